/* The fds the shim keeps open (libunwind's pipe, the memory cgroup's files), out of the program's
 * way: moved to the highest free numbers just under the soft RLIMIT_NOFILE, but not above 4096 (a
 * fork copies the fd table up to the highest fd open, and a limit of 1M would make that table
 * 8 MB), so the program's own fds keep the numbers they have without the shim. */
#ifndef MS_INTERCEPT_FDS_H
#define MS_INTERCEPT_FDS_H

/* The number kept fds go just under: the soft RLIMIT_NOFILE, at most 4096; -1 when unknown. */
int ms_fd_top(void);

/* FD moved to the highest free number below TOP with fcntl CMD (F_DUPFD or F_DUPFD_CLOEXEC; a
 * duplicate made, FD closed), or -1 (FD closed) when no number above it is free up there. */
int ms_fd_move_high(int fd, int top, int cmd);

#endif
