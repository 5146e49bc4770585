/* Messages on stderr without stdio or allocation, so they are safe inside hooks and handlers. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/ms.h"
#include "core/sandbox.h"

/* Which file fd 2 was at start: UNBOUND (no constructor ran, as in unit tests) writes anyway. */
enum { STDERR_UNBOUND, STDERR_BOUND, STDERR_CLOSED };
static int stderr_state;
static dev_t stderr_dev;
static ino_t stderr_ino;

void ms_log_bind_stderr(void)
{
	struct stat st;
	int saved = errno;
	if (ms_sys_fstat(2, &st) < 0) {
		stderr_state = STDERR_CLOSED;
	} else {
		stderr_dev = st.st_dev;
		stderr_ino = st.st_ino;
		stderr_state = STDERR_BOUND;
	}
	errno = saved;
}

/* A program that closed fd 2 and opened its own file there must not find our messages in it. */
static int stderr_is_ours(void)
{
	struct stat st;
	if (stderr_state == STDERR_UNBOUND)
		return 1;
	return stderr_state == STDERR_BOUND && ms_sys_fstat(2, &st) == 0 && st.st_dev == stderr_dev &&
	       st.st_ino == stderr_ino;
}

struct sink {
	char *buf;
	size_t size, len;
};

static void put(struct sink *s, char c)
{
	if (s->len + 1 < s->size)
		s->buf[s->len++] = c;
}

/* In one copy: symbol names at report time are most of what is formatted. */
static void put_str(struct sink *s, const char *str)
{
	if (!str)
		str = "(null)";
	size_t n = strlen(str), room = s->len + 1 < s->size ? s->size - s->len - 1 : 0;
	n = n < room ? n : room;
	if (n)
		memcpy(s->buf + s->len, str, n);
	s->len += n;
}

static void put_unsigned(struct sink *s, unsigned long long v, unsigned base)
{
	char digits[24];
	int n = 0;
	do {
		digits[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (n)
		put(s, digits[--n]);
}

static void put_signed(struct sink *s, long long v)
{
	if (v < 0) {
		put(s, '-');
		put_unsigned(s, 0ULL - (unsigned long long)v, 10);
	} else {
		put_unsigned(s, (unsigned long long)v, 10);
	}
}

/* Reads one conversion after '%' and returns the pointer past it. */
static const char *convert(struct sink *s, const char *f, va_list *ap)
{
	int longs = 0, size_t_mod = 0;
	for (; *f == 'l'; f++)
		longs++;
	if (*f == 'z') {
		size_t_mod = 1;
		f++;
	}
	switch (*f) {
	case 'd':
		put_signed(s, size_t_mod   ? (long long)va_arg(*ap, ssize_t)
			      : longs == 2 ? va_arg(*ap, long long)
			      : longs == 1 ? va_arg(*ap, long)
					   : va_arg(*ap, int));
		break;
	case 'u':
	case 'x':
		put_unsigned(s,
			     size_t_mod   ? va_arg(*ap, size_t)
			     : longs == 2 ? va_arg(*ap, unsigned long long)
			     : longs == 1 ? va_arg(*ap, unsigned long)
					  : va_arg(*ap, unsigned),
			     *f == 'x' ? 16 : 10);
		break;
	case 'p':
		put_str(s, "0x");
		put_unsigned(s, (unsigned long long)(uintptr_t)va_arg(*ap, void *), 16);
		break;
	case 's':
		put_str(s, va_arg(*ap, const char *));
		break;
	case 'c':
		put(s, (char)va_arg(*ap, int));
		break;
	case '%':
		put(s, '%');
		break;
	default:
		return f;
	}
	return f + 1;
}

static size_t vformat(char *buf, size_t size, const char *fmt, va_list ap)
{
	struct sink s = { buf, size, 0 };
	va_list copy;
	va_copy(copy, ap);
	while (*fmt) {
		if (*fmt != '%')
			put(&s, *fmt++);
		else if (fmt[1])
			fmt = convert(&s, fmt + 1, &copy);
		else
			break;
	}
	va_end(copy);
	if (size)
		buf[s.len] = '\0';
	return s.len;
}

size_t ms_format(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t n = vformat(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

/* ---- once per run ----------------------------------------------------------------------------
 * A warning another process of the run printed already is not printed again (else each of
 * PostgreSQL's children repeats the postmaster's line).  The run's processes note the hash of each
 * line they print in /dev/shm/memshim-warned-<uid>-<root pid>-<root's start>, a file of 8-byte
 * hashes (mode 0600, this user's, never through a link), made by whoever warns first and removed
 * by the root at its exit.  The root's start time (from /proc) keeps a reused pid from reading
 * another run's file.  Only raw system calls: a warning may come from a hook or a handler. */

static pid_t run_root; /* 0: not in a run (a unit test, or before the process knows it) */
static int run_is_root;
static char run_file[96]; /* "" until the first warning looks for it */

void ms_log_join_run(pid_t root_pid, int is_root)
{
	run_root = root_pid;
	run_is_root = is_root;
	run_file[0] = '\0';
}

/* The 22nd field of /proc/PID/stat, the start time in clock ticks since boot; 0 when unknown. */
static unsigned long long start_ticks(pid_t pid)
{
	char path[48], buf[512];
	ms_format(path, sizeof path, "/proc/%d/stat", (int)pid);
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
	for (int field = 2; p && *p && field < 22; p++)
		field += *p == ' ';
	unsigned long long v = 0;
	for (; p && *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (unsigned long long)(*p - '0');
	return v;
}

size_t ms_run_path(char *out, size_t size, const char *what)
{
	unsigned long long t = run_root > 0 ? start_ticks(run_root) : 0;
	if (!t)
		return out[0] = '\0', 0;
	return ms_format(out, size, "/dev/shm/memshim-%s-%u-%d-%llu", what, (unsigned)syscall(SYS_geteuid),
			 (int)run_root, t);
}

static const char *warned_file(void)
{
	if (!run_file[0])
		ms_run_path(run_file, sizeof run_file, "warned");
	return run_file[0] ? run_file : NULL;
}

static uint64_t line_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h ? h : 1;
}

#define RUN_WARNINGS_MAX 512 /* hashes read back; past that, lines are printed */

/* Whether another process of the run printed LINE already; if not, notes it for the others. */
static int printed_in_run(const char *line, size_t n)
{
	const char *file = warned_file();
	if (!file)
		return 0;
	long fd = syscall(SYS_openat, AT_FDCWD, file, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	struct stat st;
	uint64_t seen[32], h = line_hash(line, n); /* a few hundred bytes: a handler's stack may be small */
	int found = 0;
	if (ms_sys_fstat((int)fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == (uid_t)syscall(SYS_geteuid)) {
		long got = (long)sizeof seen;
		for (long at = 0; !found && got == (long)sizeof seen && at < RUN_WARNINGS_MAX * (long)sizeof h;
		     at += got) {
			got = syscall(SYS_pread64, fd, seen, sizeof seen, at);
			for (long i = 0; i < got / (long)sizeof *seen && !found; i++)
				found = seen[i] == h;
		}
		if (!found)
			syscall(SYS_write, fd, &h, sizeof h);
	}
	syscall(SYS_close, fd);
	return found;
}

void ms_log_run_end(void)
{
	const char *file = run_is_root && (pid_t)syscall(SYS_getpid) == run_root ? warned_file() : NULL;
	if (file)
		syscall(SYS_unlinkat, AT_FDCWD, file, 0);
}

void ms_log(int level, const char *fmt, ...)
{
	if (level > ms_cfg.log_level || ms_sandboxed()) /* a sandbox may kill on the fstat or the write */
		return;
	char buf[1024];
	size_t n = ms_format(buf, sizeof buf, "memshim: ");
	va_list ap;
	va_start(ap, fmt);
	n += vformat(buf + n, sizeof buf - n - 1, fmt, ap);
	va_end(ap);
	buf[n++] = '\n';
	/* raw syscall: no errno change visible to the program beyond this call, no cancellation point */
	int saved = errno;
	if (stderr_is_ours() && (level > MS_LOG_WARN || !printed_in_run(buf, n)))
		syscall(SYS_write, 2, buf, n);
	errno = saved;
}

/* The words for the errno values file writers meet (no strerror: it may allocate, or lock). */
const char *ms_errno_text(int e)
{
	/* clang-format off */
	switch (e) {
	case ENOENT: return "no such file or directory";
	case EACCES: return "permission denied";
	case EPERM: return "operation not permitted";
	case EROFS: return "read-only file system";
	case ENOSPC: return "no space left on device";
	case ENOTDIR: return "a path component is not a directory";
	case EISDIR: return "is a directory";
	case ENXIO: return "FIFO has no reader";
	case ENAMETOOLONG: return "name too long";
	case ELOOP: return "a symbolic link (not followed), or too many";
	case EEXIST: return "file exists";
	case EDQUOT: return "disk quota exceeded";
	case EFBIG: return "file too large";
	case EIO: return "I/O error";
	case EMFILE: return "too many open files (the process's RLIMIT_NOFILE)";
	case ENFILE: return "too many open files in the system";
	case ENOMEM: return "out of memory";
	default: return "system error"; /* the errno number follows in the message */
		/* clang-format on */
	}
}
