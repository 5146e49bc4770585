/* Identity and clock of the tracked process (see process.h), and the per-thread guard. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"

struct ms_process ms_proc;
int ms_active;
int ms_counting = 1;
__thread int ms_tls_guard MS_TLS;

double ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double ms_elapsed(void)
{
	return ms_now() - ms_proc.start_monotonic;
}

static double unix_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ms_is_tracked_process(void)
{
	return ms_active && (pid_t)syscall(SYS_getpid) == ms_proc.pid;
}

void ms_process_start(void)
{
	ms_proc.pid = getpid();
	ms_proc.ppid = getppid();
	ms_proc.start_monotonic = ms_now();
	ms_proc.start_unix = unix_now();
}

void ms_process_args(int argc, char *const *argv, char *const *envp)
{
	if (argc >= 0 && argc < (1 << 20) && argv && envp == argv + argc + 1 && !argv[argc])
		ms_proc.argv = argv;
}

size_t ms_process_cmdline(char *buf, size_t size, int *truncated)
{
	size_t len = 0;
	*truncated = 0;
	if (ms_proc.argv) {
		for (char *const *a = ms_proc.argv; *a; a++) {
			size_t n = strlen(*a) + 1;
			if (n > size - len) {
				memcpy(buf + len, *a, size - len);
				*truncated = 1;
				return size;
			}
			memcpy(buf + len, *a, n);
			len += n;
		}
		return len;
	}
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n;
	while (len < size && (n = read(fd, buf + len, size - len)) > 0)
		len += (size_t)n;
	char extra;
	*truncated = len == size && read(fd, &extra, 1) == 1;
	close(fd);
	return len;
}

void ms_process_forked(void)
{
	pid_t parent = ms_proc.pid;
	ms_process_start();
	ms_proc.ppid = parent;
	ms_proc.is_child = 1;
	ms_proc.forked = 1;
	ms_proc.own_output = 0;
}

static long env_pid(const char *name)
{
	return ms_decimal(getenv(name));
}

/* Exec'd children find where to write here: MEMSHIM_ROOT_OUTPUT, the MEMSHIM_OUTPUT value it came
 * from, and the pid that writes it as is (its children add ".<pid>"). */
void ms_process_export_output(void)
{
	char pid[24];
	const char *setting = getenv("MEMSHIM_OUTPUT");
	ms_format(pid, sizeof pid, "%d", (int)ms_proc.pid);
	setenv("MEMSHIM_ROOT_OUTPUT", ms_cfg.output, 1);
	setenv("MEMSHIM_ROOT_OUTPUT_SETTING", setting ? setting : "", 1);
	setenv("MEMSHIM_ROOT_OUTPUT_PID", pid, 1);
}

/* A child that set MEMSHIM_OUTPUT to another value than the exporter saw chose its own file. */
static int own_setting(void)
{
	const char *seen = getenv("MEMSHIM_ROOT_OUTPUT_SETTING");
	const char *mine = getenv("MEMSHIM_OUTPUT");
	return seen && mine && *mine && strcmp(seen, mine) != 0;
}

void ms_process_identify(void)
{
	long root_pid = env_pid("MEMSHIM_ROOT_PID");
	if (root_pid <= 0 || root_pid == ms_proc.pid) {
		char pid[24];
		ms_proc.root_pid = ms_proc.pid;
		ms_format(pid, sizeof pid, "%d", (int)ms_proc.pid);
		setenv("MEMSHIM_ROOT_PID", pid, 1);
		ms_process_export_output();
		return;
	}
	ms_proc.root_pid = (pid_t)root_pid;
	ms_proc.is_child = 1;
	if (own_setting()) {
		ms_proc.own_output = 1;
		ms_process_export_output(); /* its own exec'd children derive their names from its file */
		return;
	}
	const char *out = getenv("MEMSHIM_ROOT_OUTPUT");
	if (out && out[0] == '/' && strlen(out) < sizeof ms_cfg.output)
		ms_strlcpy(ms_cfg.output, out, sizeof ms_cfg.output);
	/* the process that owns the file exec'd itself in place: it keeps writing the file as is */
	ms_proc.own_output = env_pid("MEMSHIM_ROOT_OUTPUT_PID") == ms_proc.pid;
}
