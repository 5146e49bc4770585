/* The plain system calls the shim makes, as raw syscall(2)s: the C library's wrappers of them are
 * imports the dynamic linker binds in every process that calls them (a symbol lookup of ~700
 * instructions each), for calls that add nothing over the kernel's.  Same arguments, results and
 * errno as the C library's functions; none is a cancellation point (the shim's calls never should
 * be).  Never installed. */
#ifndef MS_SYS_H
#define MS_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* clang-format off */
static inline pid_t ms_sys_getpid(void) { return (pid_t)syscall(SYS_getpid); }
static inline pid_t ms_sys_getppid(void) { return (pid_t)syscall(SYS_getppid); }
static inline uid_t ms_sys_getuid(void) { return (uid_t)syscall(SYS_getuid); }
static inline uid_t ms_sys_geteuid(void) { return (uid_t)syscall(SYS_geteuid); }
static inline int ms_sys_close(int fd) { return (int)syscall(SYS_close, fd); }
static inline ssize_t ms_sys_read(int fd, void *b, size_t n) { return syscall(SYS_read, fd, b, n); }
static inline ssize_t ms_sys_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static inline ssize_t ms_sys_pread(int fd, void *b, size_t n, off_t o) { return syscall(SYS_pread64, fd, b, n, o); }
static inline ssize_t ms_sys_pwrite(int fd, const void *b, size_t n, off_t o)
{
	return syscall(SYS_pwrite64, fd, b, n, o);
}
static inline int ms_sys_openat(int dir, const char *p, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, dir, p, flags, mode);
}
static inline int ms_sys_open(const char *p, int flags, mode_t mode) { return ms_sys_openat(AT_FDCWD, p, flags, mode); }
static inline int ms_sys_fstatat(int dir, const char *p, struct stat *st, int flags)
{
	return (int)syscall(SYS_newfstatat, dir, p, st, flags);
}
static inline int ms_sys_fstat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }
static inline int ms_sys_stat(const char *p, struct stat *st) { return ms_sys_fstatat(AT_FDCWD, p, st, 0); }
static inline int ms_sys_fstatfs(int fd, struct statfs *st) { return (int)syscall(SYS_fstatfs, fd, st); }
static inline int ms_sys_unlinkat(int dir, const char *p, int flags) { return (int)syscall(SYS_unlinkat, dir, p, flags); }
static inline int ms_sys_unlink(const char *p) { return ms_sys_unlinkat(AT_FDCWD, p, 0); }
static inline int ms_sys_mkdirat(int dir, const char *p, mode_t m) { return (int)syscall(SYS_mkdirat, dir, p, m); }
static inline ssize_t ms_sys_readlinkat(int dir, const char *p, char *b, size_t n)
{
	return syscall(SYS_readlinkat, dir, p, b, n);
}
static inline int ms_sys_fchmod(int fd, mode_t m) { return (int)syscall(SYS_fchmod, fd, m); }
static inline int ms_sys_fcntl(int fd, int cmd, long arg) { return (int)syscall(SYS_fcntl, fd, cmd, arg); }
static inline int ms_sys_fallocate(int fd, int mode, off_t off, off_t len)
{
	return (int)syscall(SYS_fallocate, fd, mode, off, len);
}
static inline int ms_sys_nanosleep(const struct timespec *t, struct timespec *rem)
{
	return (int)syscall(SYS_nanosleep, t, rem);
}
static inline int ms_sys_prctl(int op, unsigned long a) { return (int)syscall(SYS_prctl, op, a, 0UL, 0UL, 0UL); }
static inline int ms_sys_sched_yield(void) { return (int)syscall(SYS_sched_yield); }
static inline int ms_sys_getrusage(int who, struct rusage *ru) { return (int)syscall(SYS_getrusage, who, ru); }
/* clang-format on */

/* renameat(2): aarch64 has only renameat2, whose flags 0 make it the same call. */
static inline int ms_sys_renameat(int from_dir, const char *from, int to_dir, const char *to)
{
#ifdef SYS_renameat
	return (int)syscall(SYS_renameat, from_dir, from, to_dir, to);
#else
	return (int)syscall(SYS_renameat2, from_dir, from, to_dir, to, 0U);
#endif
}

/* clock_nanosleep(3) returns the error rather than setting errno: so does this, errno kept. */
static inline int ms_sys_clock_nanosleep(clockid_t clock, int flags, const struct timespec *t, struct timespec *rem)
{
	int saved = errno;
	long r = syscall(SYS_clock_nanosleep, clock, flags, t, rem);
	int e = r < 0 ? errno : 0;
	errno = saved;
	return e;
}

/* getcwd(3) with a buffer: the kernel's call returns the length, the C library's the buffer. */
static inline char *ms_sys_getcwd(char *buf, size_t size)
{
	long n = syscall(SYS_getcwd, buf, size);
	if (n > 0 && buf[0] != '/') /* "(unreachable)/...": outside the process's root */
		errno = ENOENT;
	return n > 0 && buf[0] == '/' ? buf : NULL;
}

/* Signal N's bit in the kernel's 64-bit mask. */
#define MS_SIGBIT(sig) (UINT64_C(1) << ((sig)-1))
/* The signals a thread's own instruction raises (a fault): blocking them would not defer them. */
#define MS_SIG_SYNCHRONOUS                                                                                             \
	(MS_SIGBIT(SIGSEGV) | MS_SIGBIT(SIGBUS) | MS_SIGBIT(SIGFPE) | MS_SIGBIT(SIGILL) | MS_SIGBIT(SIGTRAP) |         \
	 MS_SIGBIT(SIGSYS))
/* pthread_sigmask(3) on the kernel's 64 signals (signal N is bit N-1): returns 0, or an error
 * number, errno kept.  Never blocks the two the C library keeps for itself (32 and 33, thread
 * cancellation and set*id), as it does; OLD (when not NULL) gets the mask before. */
static inline int ms_sys_sigmask(int how, uint64_t set, uint64_t *old)
{
	int saved = errno;
	set &= ~(MS_SIGBIT(32) | MS_SIGBIT(33));
	long r = syscall(SYS_rt_sigprocmask, how, &set, old, sizeof set);
	int e = r < 0 ? errno : 0;
	errno = saved;
	return e;
}

#endif
