/* Lineage records (see lineage.h).  System calls only: the directory is listed with getdents64
 * (opendir allocates), paths and texts are formatted into buffers on the stack or in static
 * storage.  What a run's first process pays: fstatat and statfs (the directory is empty),
 * symlinkat, and unlinkat at exit; the clock it names its record by is read without a system
 * call (vDSO). */
#include <fcntl.h>
#include <signal.h>
#include <sys/auxv.h>
#include <time.h>
#include <linux/magic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/lineage.h"
#include "core/ms.h"

#define MAX_KNOWN 256  /* records kept from the listing; past that the listing is read again per ancestor */
#define MAX_DEPTH 1024 /* ancestors walked at most (a pid namespace nests at most 32 deep) */
#define NAME_MAX_LEN 64
#define DIRENT_MAX 280     /* the largest entry getdents64 returns: a 255-byte name, aligned */
#define TMPFS_EMPTY_DIR 40 /* tmpfs counts 20 bytes an entry in a directory's size, "." and ".." too */
#define LINK_MAX_TEXT 4095 /* the longest symlink target (PATH_MAX with its NUL) */

static char dir_path[48];
static uid_t uid;          /* the user's (the shim does nothing in a setuid program) */
static pid_t published_by; /* the process whose record is at PUBLISHED */
static char published[sizeof dir_path + NAME_MAX_LEN];
static int dir_ok; /* the directory was found ours and private */

struct record_id {
	pid_t pid;
	uint64_t written; /* CLOCK_BOOTTIME, ns, when it was written */
};

struct dirent64_head { /* struct linux_dirent64 */
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

const char *ms_lineage_dir(void)
{
	if (!dir_path[0]) {
		uid = (uid_t)syscall(SYS_getuid);
		ms_format(dir_path, sizeof dir_path, "/dev/shm/memshim-lineage-%u", (unsigned)uid);
	}
	return dir_path;
}

static size_t record_name(char *out, size_t size, const struct record_id *id)
{
	return ms_format(out, size, "%d.%llu%s", (int)id->pid, (unsigned long long)id->written, MS_LINEAGE_SUFFIX);
}

/* The decimal digits from P (before END, at most 20) into *V: the pointer past them, or NULL when
 * there are none. */
static const char *number(const char *p, const char *end, uint64_t *v)
{
	const char *b = p;
	*v = 0;
	for (; p < end && *p >= '0' && *p <= '9' && p - b < 20; p++)
		*v = *v * 10 + (uint64_t)(*p - '0');
	return p > b ? p : NULL;
}

/* "<pid>.<written>.lineage" into *ID; 0 for any other name (".", ".."). */
static int parse_name(const char *name, struct record_id *id)
{
	const char *end = name + strlen(name);
	uint64_t pid, written;
	const char *p = number(name, end, &pid);
	if (!p || *p != '.' || !(p = number(p + 1, end, &written)) || strcmp(p, MS_LINEAGE_SUFFIX) != 0 || !pid ||
	    pid > INT32_MAX)
		return 0;
	id->pid = (pid_t)pid;
	id->written = written;
	return 1;
}

/* Nanoseconds since boot, suspend included: the clock /proc/PID/stat's start time counts in. */
static uint64_t boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A start time in clock ticks (/proc/PID/stat, rounded down) in nanoseconds. */
static uint64_t ticks_ns(uint64_t ticks)
{
	unsigned long hz = getauxval(AT_CLKTCK);
	return ticks * (1000000000u / (hz ? hz : 100));
}

size_t ms_lineage_encode(const struct ms_lineage *l, char *out, size_t size)
{
	const char *s[3] = { l->output, l->output_setting, l->rank_held };
	size_t cap[3] = { sizeof l->output, sizeof l->output_setting, sizeof l->rank_held };
	size_t n = ms_format(out, size, "%s%d %d %d ", MS_LINEAGE_TAG, (int)l->root_pid, (int)l->output_pid,
			     (int)l->py_root_pid);
	for (int i = 0; i < 3; i++) {
		size_t len = 0; /* a loop: strnlen's lazy binding costs every process more than its bytes */
		while (len < cap[i] - 1 && s[i][len])
			len++;
		n += ms_format(out + n, size - n, "%zu:", len);
		if (len >= size - n)
			len = 0; /* never, with SIZE as documented */
		memcpy(out + n, s[i], len);
		n += len;
	}
	out[n] = '\0';
	return n;
}

int ms_lineage_decode(const char *text, size_t n, struct ms_lineage *l)
{
	const char *p = text, *end = text + n, *s[3];
	size_t tag = sizeof MS_LINEAGE_TAG - 1, len[3],
	       cap[3] = { sizeof l->output, sizeof l->output_setting, sizeof l->rank_held };
	uint64_t v[3];
	if (n < tag || memcmp(text, MS_LINEAGE_TAG, tag) != 0)
		return -1;
	p += tag;
	for (int i = 0; i < 3; i++) {
		if (!(p = number(p, end, &v[i])) || p >= end || *p != ' ' || v[i] > INT32_MAX)
			return -1;
		p++;
	}
	for (int i = 0; i < 3; i++) {
		uint64_t k;
		if (!(p = number(p, end, &k)) || p >= end || *p != ':' || k >= cap[i] || k > (uint64_t)(end - p - 1))
			return -1;
		s[i] = p + 1, len[i] = (size_t)k;
		if (memchr(s[i], '\0', len[i]))
			return -1;
		p = s[i] + len[i];
	}
	if (p != end)
		return -1;
	l->root_pid = (pid_t)v[0];
	l->output_pid = (pid_t)v[1];
	l->py_root_pid = (pid_t)v[2];
	char *dst[3] = { l->output, l->output_setting, l->rank_held };
	for (int i = 0; i < 3; i++) {
		memcpy(dst[i], s[i], len[i]);
		dst[i][len[i]] = '\0';
	}
	return 0;
}

int ms_lineage_parse_stat(const char *text, size_t n, long *ppid, uint64_t *start)
{
	const char *end = text + n, *p = NULL;
	/* the name's ')' is the last one, within its first 64 bytes (a pid, " (", a name of at most 15
	 * bytes): the fields after it are numbers and a state letter */
	for (size_t i = n < 64 ? n : 64; i-- > 0;)
		if (text[i] == ')') {
			p = text + i + 1;
			break;
		}
	if (!p)
		return -1;
	for (int field = 3; field <= 22; field++) { /* the command's name is field 2 */
		if (p >= end || *p != ' ')
			return -1;
		const char *b = ++p;
		while (p < end && *p != ' ' && *p != '\n')
			p++;
		uint64_t v;
		if ((field == 4 || field == 22) && number(b, p, &v) != p)
			return -1;
		if (field == 4)
			*ppid = (long)v;
		else if (field == 22)
			*start = v;
	}
	return 0;
}

/* PID's parent and start time (PID 0: this process) from /proc: 0, or -1 when it is gone. */
static int read_stat(pid_t pid, long *ppid, uint64_t *start)
{
	char path[32], text[1024];
	if (pid)
		ms_format(path, sizeof path, "/proc/%d/stat", (int)pid);
	long fd = syscall(SYS_openat, AT_FDCWD, pid ? path : "/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long n = syscall(SYS_read, fd, text, sizeof text);
	syscall(SYS_close, fd);
	return n > 0 ? ms_lineage_parse_stat(text, (size_t)n, ppid, start) : -1;
}

enum { DIR_MISSING, DIR_EMPTY, DIR_ENTRIES, DIR_REFUSED };

/* What the directory holds, seen without listing it: it must be ours and private (no other user
 * can have put a record in it), and an empty one is known from its size (tmpfs only: its size
 * counts its entries; a directory elsewhere is listed). */
static int dir_state(void)
{
	struct stat st;
	struct statfs fs;
	if (syscall(SYS_newfstatat, AT_FDCWD, ms_lineage_dir(), &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? DIR_MISSING : DIR_REFUSED;
	if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
		return DIR_REFUSED;
	dir_ok = 1;
	if (st.st_size == TMPFS_EMPTY_DIR && st.st_nlink == 2 && st.st_blocks == 0 &&
	    syscall(SYS_statfs, ms_lineage_dir(), &fs) == 0 && fs.f_type == TMPFS_MAGIC)
		return DIR_EMPTY;
	return DIR_ENTRIES;
}

/* The record named by ID into *L: 0, or -1 when it is missing or not whole. */
static int read_record(long dfd, const struct record_id *id, struct ms_lineage *l)
{
	char name[NAME_MAX_LEN], text[MS_LINEAGE_TEXT_MAX + 1];
	record_name(name, sizeof name, id);
	long n = syscall(SYS_readlinkat, dfd, name, text, sizeof text);
	if (n < 0 && errno == EINVAL) { /* a regular file: a text too long for a link */
		long fd = syscall(SYS_openat, dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -1;
		n = syscall(SYS_read, fd, text, sizeof text);
		syscall(SYS_close, fd);
	}
	return n > 0 && (size_t)n < sizeof text ? ms_lineage_decode(text, (size_t)n, l) : -1;
}

static void adopt(const struct record_id *id)
{
	char name[NAME_MAX_LEN];
	record_name(name, sizeof name, id);
	ms_format(published, sizeof published, "%s/%s", ms_lineage_dir(), name);
	published_by = id->pid;
}

/* The records of the listing: those in the directory when it is read. */
struct listing {
	struct record_id id[MAX_KNOWN];
	int n, more; /* MORE: there were more than MAX_KNOWN */
};

static void list(long dfd, struct listing *ls, pid_t only)
{
	union {
		struct dirent64_head align;
		char bytes[4096];
	} buf;
	long n;
	ls->n = ls->more = 0;
	syscall(SYS_lseek, dfd, 0, SEEK_SET);
	do {
		n = syscall(SYS_getdents64, dfd, buf.bytes, sizeof buf.bytes);
		for (long off = 0; off < n; off += ((struct dirent64_head *)(buf.bytes + off))->reclen) {
			struct record_id id;
			if (!parse_name(((struct dirent64_head *)(buf.bytes + off))->name, &id) ||
			    (only && id.pid != only))
				continue;
			if (ls->n < MAX_KNOWN)
				ls->id[ls->n++] = id;
			else
				ls->more = 1;
		}
	} while (n > 0 && (size_t)n + DIRENT_MAX > sizeof buf.bytes); /* tmpfs fills the buffer while it can */
}

/* PID's newest record written since it started (at START ticks), into *L; its name into *ID. */
static int take(long dfd, const struct listing *all, pid_t pid, uint64_t start, struct ms_lineage *l,
		struct record_id *id)
{
	static struct listing own MS_LARGE; /* PID's records alone, when the listing could not hold all */
	const struct listing *ls = all;
	if (all->more) {
		list(dfd, &own, pid);
		ls = &own;
	}
	uint64_t since = ticks_ns(start), below = UINT64_MAX;
	for (;;) { /* newest first; one removed meanwhile (replaced by a newer) passes to the next */
		int best = -1;
		for (int i = 0; i < ls->n; i++)
			if (ls->id[i].pid == pid && ls->id[i].written >= since && ls->id[i].written < below &&
			    (best < 0 || ls->id[i].written > ls->id[best].written))
				best = i;
		if (best < 0)
			return 0;
		if (read_record(dfd, &ls->id[best], l) == 0) {
			*id = ls->id[best];
			return 1;
		}
		below = ls->id[best].written;
	}
}

static int has_pid(const struct listing *ls, pid_t pid)
{
	for (int i = 0; i < ls->n; i++)
		if (ls->id[i].pid == pid)
			return 1;
	return ls->more;
}

/* After a walk that found nothing: the records whose process is gone (killed: nothing removed
 * them) are removed, so later walks find fewer. */
static void prune(long dfd, const struct listing *ls)
{
	for (int i = 0; i < ls->n; i++)
		if (syscall(SYS_kill, ls->id[i].pid, 0) != 0 && errno == ESRCH) {
			char name[NAME_MAX_LEN];
			record_name(name, sizeof name, &ls->id[i]);
			syscall(SYS_unlinkat, dfd, name, 0);
		}
}

int ms_lineage_find(struct ms_lineage *l)
{
	static struct listing ls MS_LARGE;
	struct record_id id;
	int found = 0;
	if (dir_state() != DIR_ENTRIES)
		return 0;
	long dfd = syscall(SYS_openat, AT_FDCWD, ms_lineage_dir(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	list(dfd, &ls, 0);
	/* this pid first (the record it left before an exec in place), then its ancestors */
	pid_t self = (pid_t)syscall(SYS_getpid), pid = self;
	for (int depth = 0; (ls.n || ls.more) && pid > 0 && depth < MAX_DEPTH && !found; depth++) {
		long ppid;
		uint64_t start;
		if (depth == 0 && !has_pid(&ls, self)) {
			pid = (pid_t)syscall(SYS_getppid); /* no record under this pid: its start is not needed */
			continue;
		}
		if (read_stat(pid == self ? 0 : pid, &ppid, &start) != 0)
			break;
		found = has_pid(&ls, pid) && take(dfd, &ls, pid, start, l, &id);
		if (found && pid == self) /* its own from before an exec in place: it goes at this exit */
			adopt(&id);
		pid = (pid_t)ppid;
	}
	if (!found)
		prune(dfd, &ls);
	syscall(SYS_close, dfd);
	return found;
}

/* The directory, created 0700 when missing, ours and private: 0 or an errno value. */
static int dir_ready(void)
{
	int state = dir_ok ? DIR_ENTRIES : dir_state();
	if (state == DIR_MISSING && (syscall(SYS_mkdirat, AT_FDCWD, ms_lineage_dir(), 0700) == 0 || errno == EEXIST))
		state = dir_state();
	return state == DIR_REFUSED ? EPERM : state == DIR_MISSING ? ENOENT : 0;
}

static int write_all(long fd, const char *p, size_t n)
{
	while (n) {
		long w = syscall(SYS_write, fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : ENOSPC;
		p += w, n -= (size_t)w;
	}
	return 0;
}

/* Creates PATH holding TEXT (N bytes, NUL after them): a symbolic link, or a file when the text is
 * too long for one.  0 or an errno value (EEXIST: it is there already). */
static int create(const char *path, const char *text, size_t n)
{
	if (n <= LINK_MAX_TEXT)
		return syscall(SYS_symlinkat, text, AT_FDCWD, path) == 0 ? 0 : errno;
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	int e = write_all(fd, text, n);
	if (syscall(SYS_close, fd) != 0 && !e)
		e = errno;
	if (e)
		syscall(SYS_unlinkat, AT_FDCWD, path, 0);
	return e;
}

int ms_lineage_publish(const struct ms_lineage *l)
{
	char text[MS_LINEAGE_TEXT_MAX + 1], path[sizeof published], before[sizeof published];
	struct record_id id = { (pid_t)syscall(SYS_getpid), boot_ns() };
	size_t n = ms_lineage_encode(l, text, sizeof text);
	int e = dir_ready();
	if (e)
		return e;
	size_t len = ms_format(path, sizeof path, "%s/", ms_lineage_dir());
	record_name(path + len, sizeof path - len, &id);
	if ((e = create(path, text, n)) != 0)
		return e;
	/* the one it wrote before, or took over from before an exec in place: the newer one is read
	 * first, this one goes */
	int replaced = published_by == id.pid && strcmp(published, path) != 0;
	if (replaced)
		ms_strlcpy(before, published, sizeof before);
	adopt(&id);
	if (replaced)
		syscall(SYS_unlinkat, AT_FDCWD, before, 0);
	return 0;
}

void ms_lineage_remove(void)
{
	int saved = errno;
	if (published_by && published_by == (pid_t)syscall(SYS_getpid)) {
		syscall(SYS_unlinkat, AT_FDCWD, published, 0);
		published_by = 0;
	}
	errno = saved;
}
