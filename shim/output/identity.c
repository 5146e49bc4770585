/* Who writes the metrics file and where (see identity.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "output/identity.h"

#define ARGV_MAX 4096

static char argv_buf[ARGV_MAX];
static size_t argv_len;
static int argv_truncated;
/* The arguments' strings where the kernel laid them out (one stretch, each ending in NUL), which
 * a program may overwrite to retitle itself (PostgreSQL's "postgres: checkpointer"); NULL when the
 * constructor did not get them so. */
static const char *area;
static size_t area_len;
static char comm_at_start[16]; /* the thread name the kernel gave at exec (PR_GET_NAME) */

/* Whether ARGV's strings follow each other as the kernel lays them out (what /proc/self/cmdline
 * reads): then the stretch is kept, to notice a retitle without following the program's pointers
 * later (it may have pointed them elsewhere, at memory since freed). */
static void keep_area(char *const *argv)
{
	if (!argv || !argv[0])
		return;
	const char *p = argv[0];
	for (char *const *a = argv; *a; a++) {
		if (*a != p)
			return;
		p += strlen(*a) + 1;
	}
	area = argv[0];
	area_len = (size_t)(p - argv[0]);
}

static int main_thread(void)
{
	return syscall(SYS_gettid) == syscall(SYS_getpid);
}

void ms_identity_init(void)
{
	argv_len = ms_process_cmdline(argv_buf, sizeof argv_buf, &argv_truncated);
	keep_area(ms_proc.argv);
	if (main_thread())
		ms_sys_prctl(PR_GET_NAME, (unsigned long)comm_at_start);
}

/* The arguments as /proc/self/cmdline shows them now (raw system calls: also from a handler). */
static void reread(void)
{
	long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size_t len = 0;
	long n;
	while (len < sizeof argv_buf && (n = syscall(SYS_read, fd, argv_buf + len, sizeof argv_buf - len)) > 0)
		len += (size_t)n;
	char extra;
	argv_truncated = len == sizeof argv_buf && syscall(SYS_read, fd, &extra, 1) == 1;
	syscall(SYS_close, fd);
	while (len > 1 && !argv_buf[len - 1] && !argv_buf[len - 2])
		len--; /* a title is padded with NULs to the length of what it replaced: no arguments */
	argv_len = len;
}

const char *ms_identity_argv(size_t *len, int *truncated)
{
	size_t n = area_len < argv_len ? area_len : argv_len;
	if (area && (n != argv_len || memcmp(area, argv_buf, n) != 0))
		reread(); /* the program retitled itself: the file names what it says it is */
	*len = argv_len;
	*truncated = argv_truncated;
	return argv_buf;
}

const char *ms_identity_comm(char out[16])
{
	if (!comm_at_start[0] || !main_thread() || ms_sys_prctl(PR_GET_NAME, (unsigned long)out) != 0)
		return NULL;
	out[15] = '\0';
	return strcmp(out, comm_at_start) ? out : NULL;
}

/* One placeholder C into OUT; *OWN becomes 1 when what it wrote is this process's alone. */
static size_t expand_one(char c, char *out, size_t size, int *own)
{
	struct utsname u;
	const struct ms_rank *r = &ms_proc.rank;
	long v = c == 'r' ? r->rank : r->local_rank;
	switch (c) {
	case 'p':
		*own = 1;
		return ms_format(out, size, "%d", (int)ms_proc.pid);
	case 'r':
	case 'l':
		if (v >= 0) {
			*own |= r->own && r->rank >= 0;
			return ms_format(out, size, "%ld", v);
		}
		*own = 1;
		return ms_format(out, size, "pid%d", (int)ms_proc.pid);
	case 'h':
		return ms_format(out, size, "%s", syscall(SYS_uname, &u) == 0 ? u.nodename : "host");
	default:
		return ms_format(out, size, "%%");
	}
}

int ms_identity_expand(char *out, size_t size, const char *tmpl)
{
	size_t n = 0;
	int own = 0;
	for (; *tmpl && n + 1 < size; tmpl++) {
		if (tmpl[0] == '%' && tmpl[1] && strchr("prlh%", tmpl[1])) {
			n += expand_one(tmpl[1], out + n, size - n, &own);
			tmpl++;
		} else {
			out[n++] = *tmpl;
		}
	}
	out[n < size ? n : size - 1] = '\0';
	return own;
}

int ms_identity_output_path(char *out, size_t size)
{
	int own = ms_identity_expand(out, size, ms_proc.output);
	size_t n = strlen(out);
	if (!ms_proc.is_child || ms_proc.own_output || own)
		return 0;
	ms_format(out + n, size - n, ".%d", (int)ms_proc.pid);
	return 1;
}

/* Whether PATH opens with O_PATH and FLAGS (nothing read: the object is only looked up). */
static int opens(const char *path, int flags)
{
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_PATH | O_CLOEXEC | flags);
	if (fd < 0)
		return 0;
	syscall(SYS_close, fd);
	return 1;
}

/* Whether PATH names anything (a file, a directory, a link: O_PATH opens each without following). */
static int taken(const char *path)
{
	return opens(path, O_NOFOLLOW);
}

/* Claims PATH for this process by creating it empty (O_EXCL): 0, or -1 when it exists already (runs
 * starting together, ranks of one job, each take a name of their own). */
static int claim(const char *path)
{
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno == EEXIST ? -1 : 0; /* another error: the write at exit says it */
	syscall(SYS_close, fd);
	return 0;
}

/* Whether the file this process would write at OUT is a directory (a name ending in '/' is one). */
static int names_a_directory(const char *out)
{
	char path[MS_PATH_MAX];
	ms_identity_expand(path, sizeof path, out);
	size_t n = strlen(path);
	return (n && path[n - 1] == '/') || opens(path, O_DIRECTORY);
}

static void warn_unknown_placeholders(const char *out)
{
	for (const char *p = strchr(out, '%'); p; p = strchr(p + 2, '%')) {
		if (!p[1] || !strchr("prlh%", p[1])) { /* written as it is, which may not be what was meant */
			ms_warn("MEMSHIM_OUTPUT %s: %%%c is no placeholder (%%p, %%r, %%l, %%h, %%%%); kept as written",
				out, p[1] ? p[1] : ' ');
			break;
		}
	}
}

/* Why OUT's directory cannot take the file (into WHY), or 0 when it can, or is judged later: a
 * placeholder in the directory is judged per process when the file is written. */
static int directory_refuses(const char *out, char *why, size_t size)
{
	char dir[MS_PATH_MAX];
	const char *slash = strrchr(out, '/');
	if (!slash || memchr(out, '%', (size_t)(slash - out)) || (size_t)(slash - out) >= sizeof dir)
		return 0;
	size_t len = (size_t)(slash - out);
	memcpy(dir, out, len);
	dir[len] = '\0';
	if (!len || syscall(SYS_faccessat, AT_FDCWD, dir, W_OK | X_OK) == 0)
		return 0;
	ms_format(why, size, "%s (%s)", dir, ms_errno_text(errno));
	return 1;
}

/* Where a file goes when its own place refuses it: $TMPDIR, else /tmp. */
static const char *fallback_dir(void)
{
	const char *tmp = ms_setting_text("TMPDIR");
	return tmp && tmp[0] == '/' ? tmp : "/tmp";
}

/* The fallback for OUT in TMP into FALLBACK: the same name (a directory's: the default name), with
 * ".<pid>" when that name is taken already (another run's or another user's file, which this run
 * would overwrite or could not replace: its path into TAKEN, else TAKEN is "").  A child that
 * writes OUT with ".<pid>" added (SUFFIXED) has a name of its own already: nothing is claimed. */
static void fallback_name(const char *out, int is_dir, int suffixed, const char *tmp, char *fallback, char *taken_path)
{
	const char *slash = strrchr(out, '/');
	const char *name = is_dir ? "memshim_metrics.json" : slash ? slash + 1 : out;
	size_t n = ms_format(fallback, MS_PATH_MAX, "%s/%s", tmp, name);
	ms_identity_expand(taken_path, MS_PATH_MAX, fallback);
	if (!suffixed && (taken(taken_path) || claim(taken_path) < 0))
		ms_format(fallback + n, MS_PATH_MAX - n, ".%d", (int)ms_proc.pid);
	else
		taken_path[0] = '\0';
}

int ms_identity_fall_back(int e)
{
	/* static: the one writer at a time calls it, maybe from a handler on a small stack */
	static char fallback[MS_PATH_MAX] MS_LARGE, taken_path[MS_PATH_MAX] MS_LARGE, was[MS_PATH_MAX] MS_LARGE;
	static char was_file[MS_PATH_MAX + 32] MS_LARGE, file[MS_PATH_MAX + 32] MS_LARGE;
	const char *tmp = fallback_dir();
	ms_strlcpy(was, ms_proc.output, sizeof was);
	int suffixed = ms_identity_output_path(was_file, sizeof was_file);
	fallback_name(was, 0, suffixed, tmp, fallback, taken_path);
	if (strlen(fallback) >= sizeof fallback - 1 || !strcmp(fallback, was) ||
	    syscall(SYS_faccessat, AT_FDCWD, tmp, W_OK | X_OK) != 0)
		return 0;
	ms_process_set_output(fallback);
	ms_identity_output_path(file, sizeof file);
	/* a child's trouble stays off the program's stderr, as its failed write would (report.c) */
	ms_log(ms_proc.is_child ? MS_LOG_DEBUG : MS_LOG_WARN,
	       "cannot write metrics file %s: %s (errno %d); writing %s instead%s%s%s", was_file, ms_errno_text(e), e,
	       file, taken_path[0] ? " (" : "", taken_path, taken_path[0] ? " is another run's)" : "");
	return 1;
}

/* MEMSHIM_CHILDREN_DIR that cannot take files is said once, by the run's first process: each child
 * that would write there falls back quietly (ms_identity_fall_back), as any child's trouble does. */
static void check_children_dir(void)
{
	if (!ms_cfg.children_dir[0] || ms_proc.is_child ||
	    syscall(SYS_faccessat, AT_FDCWD, ms_cfg.children_dir, W_OK | X_OK) == 0)
		return;
	ms_warn("MEMSHIM_CHILDREN_DIR %s: %s; children that would write there write in %s instead", ms_cfg.children_dir,
		ms_errno_text(errno), fallback_dir());
}

/* At start: an output that cannot take the file (its directory refuses it, or it is a directory) is
 * found now, not after a six-hour run; the file then goes to $TMPDIR (or /tmp) (fallback_name).
 * Returns 1 when it moved. */
int ms_identity_check_output(void)
{
	char why[MS_PATH_MAX + 64], fallback[MS_PATH_MAX], taken_path[MS_PATH_MAX];
	const char *out = ms_proc.output;
	warn_unknown_placeholders(out);
	check_children_dir();
	int is_dir = names_a_directory(out);
	if (!is_dir && !directory_refuses(out, why, sizeof why))
		return 0;
	const char *tmp = fallback_dir();
	fallback_name(out, is_dir, 0, tmp, fallback, taken_path);
	if (strlen(fallback) >= sizeof fallback - 1 || syscall(SYS_faccessat, AT_FDCWD, tmp, W_OK | X_OK) != 0)
		return 0; /* nowhere better: the warning comes when the file cannot be written */
	const char *reason = is_dir ? "it is a directory" : why;
	if (taken_path[0])
		ms_warn("cannot write metrics file %s: %s; writing %s instead (%s is another run's)", out, reason,
			fallback, taken_path);
	else
		ms_warn("cannot write metrics file %s: %s; writing %s instead", out, reason, fallback);
	ms_process_set_output(fallback);
	return 1;
}
