/* What every file of the shim uses (never installed): compiler helpers, the per-thread guard,
 * messages and text without stdio (log.c), and raw memory without the allocator. */
#ifndef MS_H
#define MS_H

#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/sandbox.h"

#define MS_TLS __attribute__((tls_model("initial-exec")))

/* The C library's functions the allocation hooks may call first in any thread: bound when the
 * library loads, not lazily at that first call, whose resolver saves the CPU's whole vector state
 * on the stack (~2.7 KiB with AVX-512), too much for a small thread's nearly full stack. */
void *memmove(void *dest, const void *src, size_t n) __attribute__((noplt));
size_t malloc_usable_size(void *p) __attribute__((noplt));
pthread_t pthread_self(void) __attribute__((noplt));
int pthread_key_create(pthread_key_t *key, void (*destructor)(void *)) __attribute__((noplt));
int pthread_setspecific(pthread_key_t key, const void *value) __attribute__((noplt));
int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data) __attribute__((noplt));
/* Tables of 1 KiB and more that a process may touch in a few places or not at all: kept apart from
 * the small state, which then shares a few pages (each page first touched costs a fault). */
#define MS_LARGE __attribute__((section(".lbss")))
/* For a table whose used part is its head: one page for a small process, not two. */
#define MS_PAGE_ALIGNED __attribute__((aligned(4096)))
/* A macro's value as a string literal (a limit said in a message). */
#define MS_STR_(x) #x
#define MS_STR(x) MS_STR_(x)
#define MS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MS_LIKELY(x) __builtin_expect(!!(x), 1)
/* What the library exports: the wrappers and the public API (everything else is hidden by
 * -fvisibility=hidden; the version script, generated from the .def lists, names the same set). */
#define EXPORT __attribute__((visibility("default")))

/* Non-zero while this thread runs shim code: nested wrapped calls pass straight through
 * (defined in process.c). */
extern __thread int ms_tls_guard MS_TLS;

enum ms_log_level { MS_LOG_QUIET = 0, MS_LOG_WARN = 1, MS_LOG_DEBUG = 2 };

/* Writes "memshim: <message>\n" to stderr when LEVEL is enabled.  Async-signal-safe, no allocation.
 * Understands %s %d %u %ld %lu %lld %llu %zu %zd %x %p %c %%. */
void ms_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Remembers which file fd 2 is (constructor): later messages go there only while fd 2 is still that
 * file, and nowhere when fd 2 was closed. */
void ms_log_bind_stderr(void);
/* Joins the run whose first process is ROOT_PID (IS_ROOT: this one): a warning another process of
 * the run printed already is not printed again (log.c).  A forked child stays in its parent's. */
void ms_log_join_run(pid_t root_pid, int is_root);
/* The run's first process at its exit: the run's note of printed warnings goes. */
void ms_log_run_end(void);
/* A file the processes of the run share, named after WHAT, the run's first process and its start
 * (/dev/shm/memshim-WHAT-<uid>-<root pid>-<start ticks>) into OUT; its length, or 0 (OUT "") when
 * the process is in no run or its first process is gone. */
size_t ms_run_path(char *out, size_t size, const char *what);
/* A short text for errno E as the shim's messages say it ("system error" for the rest). */
const char *ms_errno_text(int e);
#define ms_warn(...) ms_log(MS_LOG_WARN, __VA_ARGS__)
#define ms_debug(...) ms_log(MS_LOG_DEBUG, __VA_ARGS__)

/* The non-negative decimal number that is all of S (at most 18 digits), else -1: read without
 * strtol, whose code and tables are pages every process would fault in for a few variables. */
static inline long ms_decimal(const char *s)
{
	long n = 0;
	if (!s || !*s)
		return -1;
	for (int k = 0; *s; s++, k++) {
		if (*s < '0' || *s > '9' || k == 18)
			return -1;
		n = n * 10 + (*s - '0');
	}
	return n;
}

/* The file name at the end of PATH (after its last '/'), or PATH. */
static inline const char *ms_file_name(const char *path)
{
	const char *name = path;
	for (const char *p = path; *p; p++)
		if (*p == '/')
			name = p + 1;
	return name;
}

/* Copies SRC into DST of SIZE bytes, always NUL-terminated; returns SRC's length. */
static inline size_t ms_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = 0;
	for (; src[n]; n++)
		if (n + 1 < size)
			dst[n] = src[n];
	if (size)
		dst[n < size ? n : size - 1] = '\0';
	return n;
}

/* Writes to the page of P without changing it.  A fresh page that is read first maps the zero page
 * and faults again at the first write: touched this way first, it faults once. */
static inline void ms_touch(void *p)
{
	__atomic_fetch_or((volatile char *)p, 0, __ATOMIC_RELAXED);
}

/* LEN bytes of zeroed private memory straight from the kernel (no allocator: safe inside hooks,
 * before the constructor and in a handler); NULL on failure.  Pages are reserved only as touched. */
static inline void *ms_raw_map(size_t len)
{
	if (MS_UNLIKELY(__atomic_load_n(&ms_sandbox.mode, __ATOMIC_RELAXED) == MS_SANDBOX_STRICT))
		return NULL; /* strict mode kills on mmap: the program's own heap is all there is */
	long p = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
			 0);
	if (p < 0 && p > -4096)
		return NULL;
	if (len >= ((size_t)2 << 20)) /* sparse tables: never a 2 MiB page zeroed for a few entries */
		syscall(SYS_madvise, p, len, MADV_NOHUGEPAGE);
	return (void *)p;
}

/* Zeroes LEN bytes at P of private anonymous memory (an ms_raw_map mapping, or an MS_LARGE table:
 * .lbss lies past the file's last page).  Whole pages are dropped (MADV_DONTNEED: they read as zero
 * again), so a forked child that clears a table it shares with its parent copies and faults in no
 * page; the ends, or everything when madvise refuses (locked pages), are written.  errno is kept. */
static inline void ms_zero(void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, lo = (a + 4095) & ~(uintptr_t)4095, hi = (a + len) & ~(uintptr_t)4095;
	int saved = errno;
	if (hi <= lo || syscall(SYS_madvise, lo, hi - lo, MADV_DONTNEED) != 0) {
		memset(p, 0, len);
	} else {
		memset(p, 0, lo - a);
		memset((void *)hi, 0, a + len - hi);
	}
	errno = saved;
}

/* Formats like ms_log into BUF (always NUL-terminated); returns the length written. */
size_t ms_format(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
