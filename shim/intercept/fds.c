/* Kept fds out of the program's way (fds.h).  Raw system calls only. */
#include "intercept/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HIGH_FD_CAP 4096
#define HIGH_FD_TRIES 64

int ms_fd_top(void)
{
	struct rlimit lim;
	if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &lim) != 0)
		return -1;
	return lim.rlim_cur > HIGH_FD_CAP ? HIGH_FD_CAP : (int)lim.rlim_cur;
}

int ms_fd_move_high(int fd, int top, int cmd)
{
	for (int want = top - 1; want > fd && want >= top - HIGH_FD_TRIES; want--) {
		long moved = syscall(SYS_fcntl, fd, cmd, want);
		if (moved >= 0 && moved < top) {
			syscall(SYS_close, fd);
			return (int)moved;
		}
		if (moved >= 0)
			syscall(SYS_close, moved); /* above the cap (the limit is higher): try lower */
		else if (errno != EMFILE)
			break;
	}
	syscall(SYS_close, fd);
	return -1;
}
