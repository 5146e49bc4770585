/* The memory cgroup, read at stage boundaries, timeline points and reports (from intercept/mmap.c's
 * refresh, within its CPU-time budget).  The group is found once, at the first read: the memory
 * line of /proc/self/cgroup (v1 wins over v2, as the kernel charges there), its mount in
 * /proc/self/mountinfo, or MEMSHIM_CGROUP_DIR (a directory laid out by a test, or "none").  Raw
 * system calls only (no stdio, no allocation).  Opening a cgroup file costs ~20 us here, reading an
 * open one ~3 us: the usage file is kept open (every boundary and point reads it), as is, on cgroup
 * v2 with a writable memory.peak (Linux 6.12+), an fd of memory.peak reset at every boundary, whose
 * reads are the peak since the last boundary (each stage's own; other readers of the file see
 * their own peaks, unchanged).  Kept fds are moved to high numbers, close-on-exec, and checked
 * (fstat) before each use, so the program's fds keep their numbers and a number the program took
 * over is never read; one the program closed (a daemon's close_range) is not opened again.  The
 * group's high-water, limit and OOM kills are opened and read at a report and at most once a
 * second at boundaries.  With the group, the boot id and the directory's device
 * and inode are read once: they tell a later reader of the file whether the group it names is
 * still this one. */
#include "intercept/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/spin.h"
#include "intercept/fds.h"

#define CGROUP2_MAGIC 0x63677270 /* CGROUP2_SUPER_MAGIC */

#define STATE_GAP 1.0 /* seconds between two reads of the high-water, limit and OOM kills */
#define REOPENS 1     /* opened once: an fd the program closed stays closed (reads open the file) */

enum { UNKNOWN, FINDING, FOUND, NONE };
static int found;                /* enum above; one thread finds */
static struct ms_spin read_lock; /* one reader at a time: the kept fds are reopened by it */
static __thread int read_mine MS_TLS;
static struct ms_cgroup cg MS_LARGE; /* written by the reading thread; fields read whole */
static char buf[4096] MS_LARGE;      /* /proc/self/cgroup and mountinfo, a line at a time (one finder) */
static double state_read_at;

/* A file kept open: its fd and identity, and who opened it (a forked child's are its parent's). */
struct kept {
	int fd;
	pid_t pid;
	uint64_t dev, ino;
	int reopens;
};
static struct kept usage_fd = { .fd = -1 }, peak_fd = { .fd = -1 };

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

/* FD moved high (fds.h), -1 (FD closed) when no number is free there. */
static int move_high(int fd)
{
	int top = ms_fd_top();
	if (top < 0) {
		syscall(SYS_close, fd);
		return -1;
	}
	return ms_fd_move_high(fd, top, F_DUPFD_CLOEXEC);
}

/* NAME opened into K (FLAGS), moved high; 0 when it could not be kept. */
static int keep(struct kept *k, const char *name, int flags)
{
	struct stat st;
	int fd = k->reopens++ < REOPENS ? open_file(name, flags) : -1;
	if (fd < 0 || (fd = move_high(fd)) < 0)
		return 0;
	if (syscall(SYS_fstat, fd, &st) != 0) {
		syscall(SYS_close, fd);
		return 0;
	}
	*k = (struct kept){ fd, ms_proc.pid, st.st_dev, st.st_ino, k->reopens };
	return 1;
}

/* Whether K's fd is still ours: a program may close fds it did not open and reuse the number (then
 * it is the program's: never touched again). */
static int still_ours(const struct kept *k)
{
	struct stat st;
	return k->fd >= 0 && syscall(SYS_fstat, k->fd, &st) == 0 && st.st_dev == k->dev && st.st_ino == k->ino;
}

/* Up to SIZE - 1 bytes of NAME through K (kept open, opened again once lost), NUL-terminated; the
 * length, or -1.  A file that cannot be kept is opened for the read. */
static long read_kept(struct kept *k, const char *name, char *out, size_t size)
{
	if (!still_ours(k) && !keep(k, name, O_RDONLY))
		return read_small(name, out, size);
	long n = syscall(SYS_pread64, k->fd, out, size - 1, 0);
	if (n < 0)
		return -1;
	out[n] = '\0';
	return n;
}

/* The per-reader peak: only the kernel's cgroup2 files (a test's directory is written to by no
 * one), only where memory.peak takes a reset (Linux 6.12+: before, it cannot be opened to write). */
static void open_peak_fd(void)
{
	struct statfs fs;
	if (cg.version != 2 || !exists("memory.peak") || syscall(SYS_statfs, cg.dir, &fs) != 0 ||
	    fs.f_type != CGROUP2_MAGIC || !keep(&peak_fd, "memory.peak", O_RDWR))
		return;
	if (syscall(SYS_pwrite64, peak_fd.fd, "reset\n", 6, 0) != 6) {
		syscall(SYS_close, peak_fd.fd);
		peak_fd.fd = -1;
		return;
	}
	cg.per_reader = 1;
}

/* Our fd's peak since its last reset into the window's peak; at a boundary, reset.  A forked child
 * shares its parent's fd (a reset would be seen by both): it opens its own. */
static void read_own_peak(int reset)
{
	char text[64];
	if (!cg.per_reader)
		return;
	if (peak_fd.pid != ms_proc.pid) {
		if (still_ours(&peak_fd)) /* else the child took the number over: its fd */
			syscall(SYS_close, peak_fd.fd);
		peak_fd.fd = -1;
		peak_fd.reopens = 0;
		cg.per_reader = 0;
		open_peak_fd();
	} else if (!still_ours(&peak_fd)) {
		peak_fd.fd = -1;
		cg.per_reader = 0;
	}
	if (!cg.per_reader)
		return;
	long n = syscall(SYS_pread64, peak_fd.fd, text, sizeof text - 1, 0);
	if (n > 0) {
		int64_t v = ms_cgroup_number(text, (size_t)n);
		if (v >= 0)
			ms_counter_raise_peak(MS_CGROUP, v);
	}
	if (reset)
		syscall(SYS_pwrite64, peak_fd.fd, "reset\n", 6, 0);
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

/* The boot id into cg.boot_id (left "" when unreadable or not a UUID's characters). */
static void read_boot_id(void)
{
	char text[MS_BOOT_ID_LEN];
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	long n = syscall(SYS_read, fd, text, sizeof text - 1);
	syscall(SYS_close, fd);
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
		n--;
	for (long i = 0; i < n; i++)
		if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f') || text[i] == '-'))
			return;
	if (n <= 0)
		return;
	memcpy(cg.boot_id, text, (size_t)n);
	cg.boot_id[n] = '\0';
}

/* The group's directory's device and inode (0 when it cannot be read): a group made again under the
 * same path is another one. */
static void read_dir_id(void)
{
	struct stat st;
	if (syscall(SYS_newfstatat, AT_FDCWD, cg.dir, &st, 0) != 0 || !S_ISDIR(st.st_mode))
		return;
	cg.dev = (uint64_t)st.st_dev;
	cg.ino = (uint64_t)st.st_ino;
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
		read_boot_id();
		read_dir_id();
		read_state();
		state_read_at = ms_now();
		cg.oom_kills_first = cg.oom_kills;
		keep(&usage_fd, cg.version == 2 ? "memory.current" : "memory.usage_in_bytes",
		     O_RDONLY); /* one thread */
		open_peak_fd();
	}
	__atomic_store_n(&found, ok ? FOUND : NONE, __ATOMIC_RELEASE);
	return ok;
}

static int64_t read_usage(void)
{
	char text[64];
	long n = read_kept(&usage_fd, cg.version == 2 ? "memory.current" : "memory.usage_in_bytes", text, sizeof text);
	return n < 0 ? MS_CGROUP_NONE : ms_cgroup_number(text, (size_t)n);
}

int ms_cgroup_read(enum ms_refresh_reason why)
{
	if (why == MS_REFRESH_FORK)
		return 0;
	int saved = errno;
	if (!ready() || ms_spin_trylock(&read_lock, &read_mine, 1) < 0) { /* busy: another thread reads */
		errno = saved;
		return 0;
	}
	int64_t usage = read_usage();
	if (usage >= 0) {
		cg.usage = usage;
		if (usage > cg.peak) /* the group's high is at least what we read (a killed process's record) */
			cg.peak = usage;
		ms_counter_set(MS_CGROUP, usage);
	}
	read_own_peak(why == MS_REFRESH_BOUNDARY);
	double now = ms_now();
	if (why == MS_REFRESH_REPORT || (why == MS_REFRESH_BOUNDARY && now - state_read_at >= STATE_GAP)) {
		state_read_at = now;
		read_state();
	}
	ms_spin_unlock(&read_lock, &read_mine);
	errno = saved;
	return usage >= 0;
}

/* K's fd closed when still ours, never opened again (reads open the file for each read). */
static int let_go(struct kept *k)
{
	int ours = still_ours(k);
	if (ours)
		syscall(SYS_close, k->fd);
	k->fd = -1;
	k->reopens = REOPENS;
	return ours;
}

int ms_cgroup_release_fds(void)
{
	if (read_mine || ms_spin_trylock(&read_lock, &read_mine, 1000) < 0)
		return 0; /* a reader holds them: another thread, or this one that a handler interrupted */
	int n = let_go(&usage_fd);
	if (peak_fd.fd >= 0 && peak_fd.pid == ms_proc.pid) {
		n += let_go(&peak_fd);
		cg.per_reader = 0;
	}
	ms_spin_unlock(&read_lock, &read_mine);
	return n;
}

void ms_cgroup_fork_child(void)
{
	ms_spin_reset(&read_lock, &read_mine);
}

const struct ms_cgroup *ms_cgroup_state(void)
{
	return __atomic_load_n(&found, __ATOMIC_ACQUIRE) == FOUND ? &cg : NULL;
}
