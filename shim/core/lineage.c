/* Lineage records (see lineage.h).  System calls only: the directory is listed with getdents64
 * (opendir allocates), paths are formatted into buffers on the stack or in static storage. */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/lineage.h"
#include "core/ms.h"

#define MAX_KNOWN 64     /* records kept from the listing; past that each ancestor is looked up */
#define MAX_DEPTH 1024   /* ancestors walked at most (a pid namespace nests at most 32 deep) */
#define NAME_MAX_LEN 64
#define DIRENT_MAX 280   /* the largest entry getdents64 returns: a 255-byte name, aligned */
#define RECORD_MAX (sizeof(struct ms_lineage_header) + 2 * (size_t)MS_PATH_MAX + MS_LINEAGE_RANK)

static char dir_path[48];
static uint64_t own_start;               /* this process's start time; 0: not read yet */
static pid_t published_by;               /* the process that wrote the record at PUBLISHED */
static int dir_ok;                       /* the directory was found ours and private */
static char published[sizeof dir_path + NAME_MAX_LEN];

struct record_id {
	pid_t pid;
	uint64_t start;
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
	if (!dir_path[0])
		ms_format(dir_path, sizeof dir_path, "/dev/shm/memshim-%u", (unsigned)syscall(SYS_getuid));
	return dir_path;
}

static size_t record_name(char *out, size_t size, pid_t pid, uint64_t start)
{
	return ms_format(out, size, "%d.%llu%s", (int)pid, (unsigned long long)start, MS_LINEAGE_SUFFIX);
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

/* "<pid>.<start>.lineage" into *ID; 0 for any other name (".", "..", a temporary, a live record). */
static int parse_name(const char *name, struct record_id *id)
{
	const char *end = name + strlen(name);
	uint64_t pid, start;
	const char *p = number(name, end, &pid);
	if (!p || *p != '.' || !(p = number(p + 1, end, &start)) || strcmp(p, MS_LINEAGE_SUFFIX) != 0 || !pid ||
	    pid > INT32_MAX)
		return 0;
	id->pid = (pid_t)pid;
	id->start = start;
	return 1;
}

int ms_lineage_parse_stat(const char *text, size_t n, long *ppid, uint64_t *start)
{
	const char *end = text + n, *p = NULL;
	for (size_t i = n; i-- > 0;)
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

static int read_own_start(void)
{
	long ppid;
	return own_start || read_stat(0, &ppid, &own_start) == 0 ? 0 : -1;
}

/* The directory, when it is ours and private (no other user can have put a record in it). */
static long open_dir(void)
{
	struct stat st;
	long fd = syscall(SYS_openat, AT_FDCWD, ms_lineage_dir(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (syscall(SYS_fstat, fd, &st) != 0 || st.st_uid != (uid_t)syscall(SYS_geteuid) || (st.st_mode & 077)) {
		syscall(SYS_close, fd);
		return -EPERM;
	}
	dir_ok = 1;
	return fd;
}

/* The record named by ID into *L: 0, or -1 when it is missing or not whole. */
static int read_record(long dfd, const struct record_id *id, struct ms_lineage *l)
{
	char name[NAME_MAX_LEN];
	union {
		struct ms_lineage_header h;
		char bytes[RECORD_MAX + 1];
	} r;
	record_name(name, sizeof name, id->pid, id->start);
	long fd = syscall(SYS_openat, dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long n = syscall(SYS_read, fd, r.bytes, sizeof r.bytes);
	syscall(SYS_close, fd);
	if (n < (long)sizeof r.h || n > (long)RECORD_MAX || r.h.magic != MS_LINEAGE_MAGIC || r.h.size != (uint32_t)n ||
	    r.h.pid != id->pid || r.h.start != id->start)
		return -1;
	const char *s[3], *p = r.bytes + sizeof r.h, *end = r.bytes + n;
	size_t len[3], cap[3] = { sizeof l->output, sizeof l->output_setting, sizeof l->rank_held };
	for (int i = 0; i < 3; i++) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		if (!nul || (size_t)(nul - p) >= cap[i])
			return -1;
		s[i] = p, len[i] = (size_t)(nul - p);
		p = nul + 1;
	}
	if (p != end)
		return -1;
	l->root_pid = r.h.root_pid;
	l->output_pid = r.h.output_pid;
	l->py_root_pid = r.h.py_root_pid;
	memcpy(l->output, s[0], len[0] + 1);
	memcpy(l->output_setting, s[1], len[1] + 1);
	memcpy(l->rank_held, s[2], len[2] + 1);
	return 0;
}

static void adopt(pid_t pid, uint64_t start)
{
	char name[NAME_MAX_LEN];
	record_name(name, sizeof name, pid, start);
	ms_format(published, sizeof published, "%s/%s", ms_lineage_dir(), name);
	published_by = pid;
}

static int known_has(const struct record_id *known, int n, pid_t pid, uint64_t start)
{
	for (int i = 0; i < n; i++)
		if (known[i].pid == pid && known[i].start == start)
			return 1;
	return 0;
}

/* The records that made a walk that found nothing go past the parent (those as old as it) and
 * that no living process owns any more (killed, its pid now another's) are removed, so later
 * walks stop early again. */
static void prune(long dfd, const struct record_id *known, int n, uint64_t parent_start)
{
	for (int i = 0; i < n; i++) {
		long ppid;
		uint64_t start;
		if (known[i].start > parent_start || (read_stat(known[i].pid, &ppid, &start) == 0 && start == known[i].start))
			continue;
		char name[NAME_MAX_LEN];
		record_name(name, sizeof name, known[i].pid, known[i].start);
		syscall(SYS_unlinkat, dfd, name, 0);
	}
}

int ms_lineage_find(struct ms_lineage *l)
{
	struct record_id known[MAX_KNOWN];
	int nknown = 0, more = 0, found = 0;
	uint64_t oldest = UINT64_MAX, parent_start = 0;
	long dfd = open_dir();
	if (dfd < 0)
		return 0;
	union {
		struct dirent64_head align;
		char bytes[4096];
	} buf;
	long n;
	do {
		n = syscall(SYS_getdents64, dfd, buf.bytes, sizeof buf.bytes);
		for (long off = 0; off < n; off += ((struct dirent64_head *)(buf.bytes + off))->reclen) {
			struct record_id id;
			if (!parse_name(((struct dirent64_head *)(buf.bytes + off))->name, &id))
				continue;
			oldest = id.start < oldest ? id.start : oldest;
			if (nknown < MAX_KNOWN)
				known[nknown++] = id;
			else
				more = 1;
		}
	} while (n > 0 && (size_t)n + DIRENT_MAX > sizeof buf.bytes); /* tmpfs fills the buffer while it can */
	/* this pid first (the record it left before an exec in place), then its ancestors, while one
	 * can be as old as a record */
	pid_t self = (pid_t)syscall(SYS_getpid), pid = self;
	int depth = 0;
	for (; (nknown || more) && pid > 0 && depth < MAX_DEPTH && !found; depth++) {
		long ppid;
		uint64_t start;
		if (read_stat(pid == self ? 0 : pid, &ppid, &start) != 0)
			break;
		if (depth == 0)
			own_start = start;
		else if (depth == 1)
			parent_start = start;
		if (start < oldest)
			break;
		struct record_id id = { pid, start };
		found = (more || known_has(known, nknown, pid, start)) && read_record(dfd, &id, l) == 0;
		if (found && pid == self) /* its own from before an exec in place: it goes at this exit */
			adopt(pid, start);
		pid = (pid_t)ppid;
	}
	if (!found && depth >= 2) /* past the parent: records as old as the parent are there */
		prune(dfd, known, nknown, parent_start);
	syscall(SYS_close, dfd);
	return found;
}

/* The directory, created 0700 when missing, checked ours and private unless a walk did: 0 or an
 * errno value. */
static int dir_ready(void)
{
	if (dir_ok)
		return 0;
	long dfd = open_dir();
	if (dfd == -ENOENT && (syscall(SYS_mkdirat, AT_FDCWD, ms_lineage_dir(), 0700) == 0 || errno == EEXIST))
		dfd = open_dir();
	if (dfd < 0)
		return (int)-dfd;
	syscall(SYS_close, dfd);
	return 0;
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

/* Creates PATH with BYTES: 0 or an errno value (EEXIST: it is there already). */
static int create(const char *path, const char *bytes, size_t n)
{
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	int e = write_all(fd, bytes, n);
	if (syscall(SYS_close, fd) != 0 && !e)
		e = errno;
	if (e)
		syscall(SYS_unlinkat, AT_FDCWD, path, 0);
	return e;
}

int ms_lineage_publish(const struct ms_lineage *l)
{
	union {
		struct ms_lineage_header h;
		char bytes[RECORD_MAX];
	} r;
	char path[sizeof published], tmp[sizeof published + 8];
	pid_t pid = (pid_t)syscall(SYS_getpid);
	if (read_own_start() != 0)
		return errno ? errno : ESRCH;
	size_t n = sizeof r.h;
	const char *s[3] = { l->output, l->output_setting, l->rank_held };
	for (int i = 0; i < 3; i++) {
		size_t len = strnlen(s[i], i == 2 ? sizeof l->rank_held - 1 : MS_PATH_MAX - 1);
		memcpy(r.bytes + n, s[i], len);
		r.bytes[n + len] = '\0';
		n += len + 1;
	}
	r.h = (struct ms_lineage_header){ MS_LINEAGE_MAGIC, (uint32_t)n, pid, own_start, l->root_pid, l->output_pid,
					  l->py_root_pid, 0 };
	int e = dir_ready();
	if (e)
		return e;
	size_t len = ms_format(path, sizeof path, "%s/", ms_lineage_dir());
	record_name(path + len, sizeof path - len, pid, own_start);
	e = create(path, r.bytes, n);
	if (e == EEXIST) { /* this process's own, from before an exec in place: replaced whole */
		ms_format(tmp, sizeof tmp, "%s.tmp", path);
		syscall(SYS_unlinkat, AT_FDCWD, tmp, 0); /* an image killed while it replaced it */
		e = create(tmp, r.bytes, n);
		if (!e && syscall(SYS_renameat, AT_FDCWD, tmp, AT_FDCWD, path) != 0) {
			e = errno;
			syscall(SYS_unlinkat, AT_FDCWD, tmp, 0);
		}
	}
	if (e)
		return e;
	adopt(pid, own_start);
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

void ms_lineage_forked(void)
{
	own_start = 0;
}
