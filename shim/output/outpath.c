/* Walking the output path (see outpath.h).  Holding a descriptor of each directory on the way means
 * a link swapped in after the check is never followed: every step opens with O_NOFOLLOW. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>
#include "core/sys.h"
#include "core/ms.h"
#include "output/outpath.h"

#define MAX_LINKS 40            /* the kernel's MAXSYMLINKS */
#define PROC_SUPER_MAGIC 0x9fa0 /* linux/magic.h */

/* The walk's state lives in the caller's struct ms_outpath (static there, never on a handler's
 * stack), so the report writer and the live record (live.c) never share it. */

static int open_dir(const char *path)
{
	return (int)ms_sys_openat(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
}

static void move_to(struct ms_outpath_walk *wk, int fd)
{
	ms_sys_close(wk->dirfd);
	wk->dirfd = fd;
}

/* The kernel's protected_symlinks rule: in a sticky world-writable directory only links owned by
 * us or by the directory's owner are followed (another user may have planted the link). */
static int may_follow(struct ms_outpath_walk *wk, const struct stat *link)
{
	struct stat dir;
	if (ms_sys_fstat(wk->dirfd, &dir) < 0)
		return 0;
	if ((dir.st_mode & (S_ISVTX | S_IWOTH)) != (S_ISVTX | S_IWOTH))
		return 1;
	return link->st_uid == ms_sys_geteuid() || link->st_uid == dir.st_uid;
}

/* Links in /proc (/proc/self, /proc/self/fd/1 behind /dev/stdout) name open files, not paths. */
static int in_proc(struct ms_outpath_walk *wk)
{
	struct statfs fs;
	return ms_sys_fstatfs(wk->dirfd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

static int found(struct ms_outpath *out, const char *name, enum ms_out_how how)
{
	ms_strlcpy(out->name, name, sizeof out->name);
	out->how = how;
	return 0;
}

/* Steps into directory NAME, keeping the text of the walk for messages. */
static int enter(struct ms_outpath_walk *wk, const char *name)
{
	int fd = (int)ms_sys_openat(wk->dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	move_to(wk, fd);
	size_t n = strlen(wk->shown);
	if (strcmp(name, "..") != 0)
		ms_format(wk->shown + n, sizeof wk->shown - n, "/%s", name);
	else if (strrchr(wk->shown, '/'))
		*strrchr(wk->shown, '/') = '\0';
	return 0;
}

/* Replaces the walk's remainder with link NAME's text followed by AFTER; 1 to go on walking. */
static int splice_link(struct ms_outpath_walk *wk, const char *name, const char *after)
{
	if (++wk->links > MAX_LINKS)
		return -ELOOP;
	ssize_t n = ms_sys_readlinkat(wk->dirfd, name, wk->target, sizeof wk->target);
	if (n < 0)
		return -errno;
	if (n == 0 || (size_t)n >= sizeof wk->target)
		return n ? -ENAMETOOLONG : -ENOENT;
	wk->target[n] = '\0';
	if (ms_format(wk->spliced, sizeof wk->spliced, "%s%s", wk->target, after) + 1 >= sizeof wk->spliced)
		return -ENAMETOOLONG;
	memcpy(wk->todo, wk->spliced, sizeof wk->todo);
	if (wk->target[0] == '/') {
		int fd = open_dir("/");
		if (fd < 0)
			return -errno;
		move_to(wk, fd);
		wk->shown[0] = '\0';
	}
	return 1;
}

/* Link NAME (LINK its lstat) with AFTER left to walk: 1 to go on, 0 when OUT is decided, -errno. */
static int through_link(struct ms_outpath *out, struct ms_outpath_walk *wk, const char *name, const struct stat *link,
			const char *after)
{
	if (in_proc(wk)) {
		out->follow = 1;
		if (ms_format(out->rest, sizeof out->rest, "%s%s", name, after) + 1 >= sizeof out->rest)
			return -ENAMETOOLONG;
		return found(out, name, MS_OUT_IN_PLACE);
	}
	if (!may_follow(wk, link)) {
		ms_format(out->link, sizeof out->link, "%s/%s", wk->shown, name);
		out->link_owner = link->st_uid;
		return found(out, name, MS_OUT_REFUSED);
	}
	return splice_link(wk, name, after);
}

/* One component: 1 to go on walking from wk->todo at *P, 0 when OUT is decided, or -errno. */
static int step(struct ms_outpath *out, const char **p)
{
	struct ms_outpath_walk *wk = &out->wk;
	while (**p == '/')
		(*p)++;
	if (!**p)
		return -EISDIR; /* "/" or a trailing slash names a directory */
	size_t n = 0;           /* a loop: strcspn's lazy binding costs every process more than its bytes */
	while ((*p)[n] && (*p)[n] != '/')
		n++;
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	char name[NAME_MAX + 1];
	memcpy(name, *p, n);
	name[n] = '\0';
	const char *after = *p + n;
	int last = *after == '\0';
	*p = after;
	if (!strcmp(name, "."))
		return 1;
	if (last && out->parent_only)
		return found(out, name, MS_OUT_REPLACE); /* the caller opens NAME itself */
	struct stat st;
	if (ms_sys_fstatat(wk->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT && last ? found(out, name, MS_OUT_REPLACE) : -errno;
	if (S_ISLNK(st.st_mode)) {
		int rc = through_link(out, wk, name, &st, after);
		*p = wk->todo;
		return rc;
	}
	if (last)
		return S_ISDIR(st.st_mode) ? -EISDIR
					   : found(out, name, S_ISREG(st.st_mode) ? MS_OUT_REPLACE : MS_OUT_IN_PLACE);
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	int rc = enter(wk, name);
	return rc < 0 ? rc : 1;
}

/* The directory holding PATH's last name opened in one call when no directory on the way is a link
 * (Linux 5.6; a link fails it with ELOOP): each step of the walk is two calls that look a path up,
 * some 2.5 us each here.  Returns the descriptor and the last name's offset in *LAST, or -1 for
 * the walk to start over from the top (any failure: it finds the real cause). */
static int open_parent(struct ms_outpath_walk *wk, const char *path, size_t *last)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return -1;
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	memcpy(wk->shown, path, n);
	wk->shown[n] = '\0';
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	static int missing; /* ENOSYS once (before Linux 5.6, a seccomp filter, valgrind): not asked again */
	long fd = __atomic_load_n(&missing, __ATOMIC_RELAXED)
			  ? -1
			  : syscall(SYS_openat2, AT_FDCWD, wk->shown, &how, sizeof how);
	if (fd < 0 && errno == ENOSYS)
		__atomic_store_n(&missing, 1, __ATOMIC_RELAXED);
	if (fd < 0)
		return -1;
	if (slash == path)
		wk->shown[0] = '\0'; /* the walk's text for the root */
	*last = (size_t)(slash - path) + 1;
	return (int)fd;
}

int ms_outpath_walk(struct ms_outpath *out, const char *path)
{
	struct ms_outpath_walk *wk = &out->wk;
	out->dirfd = -1;
	out->follow = 0;
	if (ms_strlcpy(wk->todo, path, sizeof wk->todo) >= sizeof wk->todo)
		return -ENAMETOOLONG;
	wk->links = 0;
	size_t last = 0;
	wk->dirfd = open_parent(wk, path, &last);
	if (wk->dirfd < 0) {
		wk->shown[0] = '\0';
		wk->dirfd = open_dir(path[0] == '/' ? "/" : ".");
	}
	if (wk->dirfd < 0)
		return -errno;
	const char *p = wk->todo + last;
	int rc;
	while ((rc = step(out, &p)) > 0)
		;
	if (rc < 0 || out->how == MS_OUT_REFUSED) {
		ms_sys_close(wk->dirfd);
		return rc;
	}
	out->dirfd = wk->dirfd;
	return 0;
}
