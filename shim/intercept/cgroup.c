/* The memory cgroup, read at stage boundaries, timeline points and reports (from intercept/mmap.c's
 * refresh, within its CPU-time budget).  The group is found once, at the first read: the memory
 * line of /proc/self/cgroup (v1 wins over v2, as the kernel charges there), its mount in
 * /proc/self/mountinfo, or MEMSHIM_CGROUP_DIR (a directory laid out by a test, or "none").  Each
 * file is opened, read and closed with raw system calls (no stdio, no allocation), so the program
 * never sees an fd of ours, except one: on cgroup v2 with a writable memory.peak (Linux 6.12+) an
 * fd of memory.peak is kept, moved to a high number and close-on-exec, and reset at every boundary:
 * its reads are the peak since the last boundary (each stage's own), and other readers of the file
 * see their own peaks, unchanged. */
#include "intercept/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"

#define CGROUP2_MAGIC 0x63677270 /* CGROUP2_SUPER_MAGIC */
#define HIGH_FD_CAP 4096         /* as native/unwinder.c: a fork copies the fd table up to the top */
#define HIGH_FD_TRIES 64

enum { UNKNOWN, FINDING, FOUND, NONE };
static int found;                    /* enum above; one thread finds */
static struct ms_cgroup cg MS_LARGE; /* written by the reading thread; fields read whole */
static int peak_fd = -1;             /* v2 per-reader memory.peak, owned by PEAK_PID */
static pid_t peak_pid;
static uint64_t peak_dev, peak_ino;
static char buf[4096] MS_LARGE; /* /proc/self/cgroup and mountinfo, a line at a time (one finder) */

/* NAME in the group's directory into PATH; 0 when it does not fit. */
static int file_path(char *path, size_t size, const char *name)
{
	size_t d = strlen(cg.dir), n = strlen(name);
	if (d + 1 + n + 1 > size)
		return 0;
	memcpy(path, cg.dir, d);
	path[d] = '/';
	memcpy(path + d + 1, name, n + 1);
	return 1;
}

static int open_file(const char *name, int flags)
{
	char path[MS_CGROUP_PATH + 32];
	if (!file_path(path, sizeof path, name))
		return -1;
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC);
}

/* Up to SIZE - 1 bytes of NAME into OUT (NUL-terminated); the length, or -1. */
static long read_small(const char *name, char *out, size_t size)
{
	int fd = open_file(name, O_RDONLY);
	if (fd < 0)
		return -1;
	long n = syscall(SYS_read, fd, out, size - 1);
	syscall(SYS_close, fd);
	if (n < 0)
		return -1;
	out[n] = '\0';
	return n;
}

static int64_t read_number(const char *name, int64_t (*parse)(const char *, size_t))
{
	char text[64];
	long n = read_small(name, text, sizeof text);
	return n < 0 ? MS_CGROUP_NONE : parse(text, (size_t)n);
}

static int64_t read_key(const char *name, const char *key)
{
	char text[512];
	long n = read_small(name, text, sizeof text);
	return n < 0 ? MS_CGROUP_NONE : ms_cgroup_key(text, (size_t)n, key);
}

static int exists(const char *name)
{
	char path[MS_CGROUP_PATH + 32];
	return file_path(path, sizeof path, name) && syscall(SYS_faccessat, AT_FDCWD, path, F_OK) == 0;
}

/* Calls FN on each line of FILE (no newline), read through BUF; stops when FN returns 1. */
static int each_line(const char *file, int (*fn)(const char *line, size_t len, void *ctx), void *ctx)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t have = 0;
	int done = 0;
	for (;;) {
		long n = syscall(SYS_read, fd, buf + have, sizeof buf - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		size_t start = 0;
		for (size_t i = 0; i < have && !done; i++)
			if (buf[i] == '\n') {
				done = fn(buf + start, i - start, ctx);
				start = i + 1;
			}
		if (done)
			break;
		if (start == 0 && have == sizeof buf)
			have = 0; /* a line longer than the buffer: not a cgroup mount, skipped */
		memmove(buf, buf + start, have - start);
		have -= start;
	}
	if (!done && have)
		done = fn(buf, have, ctx);
	syscall(SYS_close, fd);
	return done;
}

struct mount_want {
	int version;
	const char *group;
};

static int mount_line(const char *line, size_t len, void *ctx)
{
	const struct mount_want *w = ctx;
	return ms_cgroup_mount_line(line, len, w->version, w->group, cg.dir, sizeof cg.dir);
}

/* The group /proc/self/cgroup names, in the mount of its hierarchy: its version, or 0. */
static int find_mounted(void)
{
	char group[MS_CGROUP_PATH];
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	long n = syscall(SYS_read, fd, buf, sizeof buf);
	syscall(SYS_close, fd);
	int version = n > 0 ? ms_cgroup_group(buf, (size_t)n, group, sizeof group) : 0;
	struct mount_want w = { version, group };
	if (!version || !each_line("/proc/self/mountinfo", mount_line, &w))
		return 0;
	return version;
}

/* The version of the files in cg.dir: v2 has memory.current, v1 memory.usage_in_bytes. */
static int version_of_dir(void)
{
	return exists("memory.current") ? 2 : exists("memory.usage_in_bytes") ? 1 : 0;
}

static int find(void)
{
	const char *set = ms_setting_text("MEMSHIM_CGROUP_DIR");
	if (set && (!*set || !strcmp(set, "none")))
		return 0;
	if (set) {
		size_t n = strlen(set);
		if (n >= sizeof cg.dir)
			return 0;
		memcpy(cg.dir, set, n + 1);
	} else if (!find_mounted()) {
		return 0;
	}
	cg.version = version_of_dir(); /* the root group has no memory files: nothing to read */
	return cg.version;
}

/* FD moved to a free number just under the fd limit (at most HIGH_FD_CAP), so the program's own
 * fds keep the numbers they have without the shim; -1 (FD closed) when none is free there. */
static int move_high(int fd)
{
	struct rlimit lim;
	if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &lim) != 0) {
		syscall(SYS_close, fd);
		return -1;
	}
	int top = lim.rlim_cur > HIGH_FD_CAP ? HIGH_FD_CAP : (int)lim.rlim_cur;
	for (int want = top - 1; want > fd && want >= top - HIGH_FD_TRIES; want--) {
		long moved = syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, want);
		if (moved >= 0 && moved < top) {
			syscall(SYS_close, fd);
			return (int)moved;
		}
		if (moved >= 0)
			syscall(SYS_close, moved);
		else if (errno != EMFILE)
			break;
	}
	syscall(SYS_close, fd);
	return -1;
}

/* The per-reader peak: only the kernel's cgroup2 files (a test's directory is written to by no
 * one), only where memory.peak takes a reset (Linux 6.12+: before, it cannot be opened to write). */
static void open_peak_fd(void)
{
	struct statfs fs;
	char path[MS_CGROUP_PATH + 32];
	if (cg.version != 2 || !file_path(path, sizeof path, "memory.peak") || syscall(SYS_statfs, cg.dir, &fs) != 0 ||
	    fs.f_type != CGROUP2_MAGIC)
		return;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	if (syscall(SYS_write, fd, "reset\n", 6) != 6 || (fd = move_high(fd)) < 0) {
		if (fd >= 0)
			syscall(SYS_close, fd);
		return;
	}
	struct stat st;
	if (syscall(SYS_fstat, fd, &st) != 0) {
		syscall(SYS_close, fd);
		return;
	}
	peak_dev = st.st_dev;
	peak_ino = st.st_ino;
	peak_pid = ms_proc.pid;
	peak_fd = fd;
	cg.per_reader = 1;
}

/* Whether our peak fd is still ours: a forked child shares its parent's (a reset would be seen by
 * both), and a program may close every fd it did not open and reuse the number. */
static int peak_fd_ours(void)
{
	struct stat st;
	if (peak_fd < 0)
		return 0;
	if (peak_pid == ms_proc.pid && syscall(SYS_fstat, peak_fd, &st) == 0 && st.st_dev == peak_dev &&
	    st.st_ino == peak_ino)
		return 1;
	if (peak_pid != ms_proc.pid) /* the parent's: closed here, a fresh one opened */
		syscall(SYS_close, peak_fd);
	peak_fd = -1; /* else the number is the program's now: never touched again */
	cg.per_reader = 0;
	if (peak_pid != ms_proc.pid)
		open_peak_fd();
	return peak_fd >= 0;
}

/* Our fd's peak since its last reset into the window's peak; at a boundary, reset. */
static void read_own_peak(int reset)
{
	char text[64];
	if (!peak_fd_ours())
		return;
	long n = syscall(SYS_pread64, peak_fd, text, sizeof text - 1, 0);
	if (n > 0) {
		int64_t v = ms_cgroup_number(text, (size_t)n);
		if (v >= 0)
			ms_counter_raise_peak(MS_CGROUP, v);
	}
	if (reset)
		syscall(SYS_pwrite64, peak_fd, "reset\n", 6, 0);
}

/* The group's state beyond its usage: its high-water, limit and OOM kills. */
static void read_state(void)
{
	int v2 = cg.version == 2;
	int64_t peak = read_number(v2 ? "memory.peak" : "memory.max_usage_in_bytes", ms_cgroup_number);
	if (peak >= 0)
		cg.peak = peak;
	cg.limit = read_number(v2 ? "memory.max" : "memory.limit_in_bytes", ms_cgroup_limit);
	cg.oom_kills = read_key(v2 ? "memory.events" : "memory.oom_control", "oom_kill");
}

/* Found once; the first caller looks, the others read nothing meanwhile. */
static int ready(void)
{
	int f = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
	if (f != UNKNOWN)
		return f == FOUND;
	if (!__atomic_compare_exchange_n(&found, &f, FINDING, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return 0;
	int ok = find() != 0;
	if (ok) {
		read_state();
		cg.oom_kills_first = cg.oom_kills;
		open_peak_fd();
	}
	__atomic_store_n(&found, ok ? FOUND : NONE, __ATOMIC_RELEASE);
	return ok;
}

int ms_cgroup_read(enum ms_refresh_reason why)
{
	if (why == MS_REFRESH_FORK)
		return 0;
	int saved = errno;
	if (!ready()) {
		errno = saved;
		return 0;
	}
	int64_t usage = read_number(cg.version == 2 ? "memory.current" : "memory.usage_in_bytes", ms_cgroup_number);
	if (usage >= 0) {
		cg.usage = usage;
		ms_counter_set(MS_CGROUP, usage);
	}
	read_own_peak(why == MS_REFRESH_BOUNDARY);
	if (why != MS_REFRESH_POINT)
		read_state();
	else if (cg.version == 1 || !cg.per_reader) /* the group's high for a killed process's record */
		cg.peak = usage > cg.peak ? usage : cg.peak;
	errno = saved;
	return usage >= 0;
}

const struct ms_cgroup *ms_cgroup_state(void)
{
	return __atomic_load_n(&found, __ATOMIC_ACQUIRE) == FOUND ? &cg : NULL;
}
