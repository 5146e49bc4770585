/* The metrics file: the state gathered for the document (output/document.c lays it out), written
 * by one writer at a time, atomically replaced through a temporary in the same directory, or in
 * place for devices and FIFOs; never through a symlink the kernel would not follow for us; and no
 * file in the middle of being written across a fork.  Only raw system calls and the streaming
 * writer: safe at exit, on _exit and from a signal handler. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* renameat */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/counters.h"
#include "core/json.h"
#include "core/ms.h"
#include "intercept/cgroup.h"
#include "core/process.h"
#include "core/stages.h"
#include "core/timeline.h"
#include "cuda/cuda.h"
#include "intercept/hooks.h"
#include "native/native.h"
#include "python/py.h"
#include "output/document.h"
#include "output/identity.h"
#include "output/labels.h"
#include "output/outpath.h"
#include "output/peak_sites.h"
#include "output/report.h"

static int in_handler;                                 /* the writer runs from a signal handler: no waiting */
static struct ms_stages snap MS_PAGE_ALIGNED MS_LARGE; /* large: static, never on a handler's stack */
static struct ms_timeline tl_snap MS_PAGE_ALIGNED MS_LARGE;
static struct ms_pool_sample pools[MS_CUDA_MAX_POOLS] MS_LARGE;
static struct ms_gpu_footprint footprint MS_LARGE;
static struct ms_doc doc MS_LARGE; /* filled by the one writer at a time */
static char comm[16];
static struct ms_shared_segment segments[MS_SHARED_SEGMENTS] MS_LARGE;

/* The CPU components of a forked child: what it added over the memory it shares with its parent
 * (a DataLoader worker is not its parent's 355 MB). */
static const enum ms_comp cpu_parts[] = { MS_CPU, MS_MALLOC, MS_MMAP, MS_RESERVE, MS_SHARED };

static void above_inherited(int64_t *v, const int64_t *inherited)
{
	for (size_t i = 0; i < sizeof cpu_parts / sizeof *cpu_parts; i++) {
		enum ms_comp c = cpu_parts[i];
		v[c] = v[c] > inherited[c] ? v[c] - inherited[c] : 0;
	}
}

/* Not from a handler: telling a native name from a typo asks the dynamic linker (NULL: empty list). */
static void each_unmatched(ms_doc_target_fn fn, void *ctx)
{
	if (!in_handler)
		ms_py_each_unmatched(fn, ctx);
}

/* Published entry by entry: read from a handler too (a pool's workers end by SIGTERM). */
static void each_function(const char *stage, ms_doc_function_fn fn, void *ctx)
{
	ms_py_each_function(stage, fn, ctx);
}

static void counters_into(struct ms_doc *d)
{
	memset(d->inherited, 0, sizeof d->inherited);
	if (ms_proc.forked)
		ms_counters_inherited(d->inherited);
	ms_counters_process_peaks(d->peaks);
	for (int c = 0; c < MS_NCOMP; c++)
		d->live[c] = ms_live((enum ms_comp)c);
	if (ms_proc.forked) {
		above_inherited(d->peaks, d->inherited);
		above_inherited(d->live, d->inherited);
	}
	d->rss_peak = ms_process_rss_peak();
	if (d->rss_peak < ms_live(MS_RSS)) /* VmHWM, read after an exec, is kept by the kernel lazily */
		d->rss_peak = ms_live(MS_RSS);
	d->cgroup = ms_cgroup_state();
	d->mmap_untracked = ms_mmap_untracked();
	d->shared_mappings = ms_mmap_shared_mappings();
	d->segments = segments;
	d->nsegments = d->shared_mappings ? ms_mmap_shared_copy(segments, &d->segments_dropped) : 0;
}

static void gpu_into(struct ms_doc *d)
{
	d->gpu = ms_gpu_used();
	d->devices = ms_gpu_devices_used();
	d->pools = pools;
	d->npools = d->gpu ? ms_cuda_pools_copy(pools) : 0;
	d->gpu_untracked_allocs = 0;
	d->gpu_untracked_bytes = 0;
	if (d->gpu)
		ms_cuda_untracked(&d->gpu_untracked_allocs, &d->gpu_untracked_bytes);
	d->footprint = d->gpu && ms_gpufp_copy(&footprint) ? &footprint : NULL;
}

/* The state of the document from the engine, counters, CUDA and Python layers; then the call sites
 * at the stages' peaks.  Returns 1 when the sites were taken (release them with
 * ms_peak_sites_end). */
static int gather(struct ms_doc *d, const char *reason, int sig, int complete, int brief)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*d = (struct ms_doc){ .reason = reason,
			      .sig = sig,
			      .complete = complete,
			      .proc = &ms_proc,
			      .stages = &snap,
			      .end_unix = (double)ts.tv_sec + ts.tv_nsec * 1e-9,
			      .each_unmatched = each_unmatched,
			      .each_function = each_function,
			      .each_native = ms_native_each_target,
			      .stage_sites = ms_peak_sites_stage,
			      .sites_summary = ms_peak_sites_summary,
			      .oom_sites = ms_peak_sites_oom };
	d->argv = ms_identity_argv(&d->argv_len, &d->argv_truncated);
	d->comm = ms_identity_comm(comm);
	if (in_handler)
		ms_stages_copy_nowait(&snap, ms_elapsed());
	else
		ms_stages_copy(&snap, ms_elapsed());
	counters_into(d);
	gpu_into(d);
	if (ms_cfg.timeline && !brief) {
		ms_timeline_copy(&tl_snap, in_handler);
		d->timeline = &tl_snap;
	}
	d->python_hook_lost = ms_py_frame_hook_lost();
	d->python_detection_stopped = ms_py_targets_detection_stopped();
	d->labelled = ms_labels_table(&d->nlabelled, &d->labelled_dropped, &d->labelled_generation);
	int ids[MS_MAX_STAGES];
	if (brief) { /* the numbers alone: no timeline, history, call sites or labelled calls */
		d->brief = 1;
		d->stage_sites = NULL;
		d->sites_summary = NULL;
		d->labelled = NULL;
		return 0;
	}
	return ms_peak_sites_begin(ids, ms_document_order(&snap, ids), in_handler);
}

/* The whole document into W, initialised by the caller for a file or a buffer; the labelled calls
 * go into files only (a program that labels every call would pay for all of them each time it asks
 * memshim_metrics_json for its numbers: pytest --memshim after each phase of each test).  BRIEF:
 * the numbers without the timeline and call sites (a stage open while the program asks would
 * otherwise count the parsing of a megabyte of them). */
static void write_document(struct ms_json *w, const char *reason, int sig, int complete, int brief)
{
	int sites = gather(&doc, reason, sig, complete, brief);
	if (w->to_memory)
		doc.labelled = NULL;
	ms_document_write(w, &doc);
	if (sites)
		ms_peak_sites_end();
}

static int warned;
static int deferring, deferred; /* a failure kept for the fallback (write_held), not said yet */

/* One line for the process the user started; a child's trouble (another uid, its parent's directory
 * removed before it ended) stays off the program's stderr, where it would change the program's
 * output: MEMSHIM_LOG=debug shows it. */
static int fail(const char *path, int e)
{
	if (deferring) {
		deferred = e;
		return -1;
	}
	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return -1;
	if (ms_proc.is_child)
		ms_debug("cannot write metrics file %s: %s (errno %d)", path, ms_errno_text(e), e);
	else
		ms_warn("cannot write metrics file %s: %s (errno %d)", path, ms_errno_text(e), e);
	return -1;
}

/* Flushes W and closes FD; returns 0 or the errno of the first failure (a full disk may only
 * show at close, e.g. on NFS). */
static int finish(struct ms_json *w, int fd)
{
	int e = ms_json_finish(w) < 0 ? w->err : 0;
	if (ms_sys_close(fd) < 0 && !e)
		e = errno;
	return e;
}

static struct ms_outpath where MS_LARGE; /* set by the one writer at a time */

/* Not an errno: a symlink the kernel's protected_symlinks rule would not follow for us. */
static int refuse(const char *path)
{
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		ms_warn("cannot write metrics file %s: not following symlink %s (owner uid %u) in a sticky "
			"world-writable directory",
			path, where.link, (unsigned)where.link_owner);
	return -1;
}

/* Devices and FIFOs (e.g. /dev/stdout) are written where they are, never replaced. */
static int write_in_place(const char *path, const char *reason, int sig, int complete)
{
	static struct ms_json w MS_LARGE;
	int flags = O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
	int fd = where.follow ? (int)syscall(SYS_openat, where.dirfd, where.rest, flags)
			      : (int)syscall(SYS_openat, where.dirfd, where.name, flags | O_NOFOLLOW);
	if (fd < 0)
		return fail(path, errno);
	int fl = ms_sys_fcntl(fd, F_GETFL, 0);
	if (fl >= 0)
		ms_sys_fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	ms_json_init(&w, fd);
	write_document(&w, reason, sig, complete, 0);
	int e = finish(&w, fd);
	return e ? fail(path, e) : 0;
}

/* Opens a new temporary TMP in the file's directory; a file it replaces keeps its mode, and the
 * temporary is 0600 until then so its contents are never readable more widely. */
static int open_temporary(const char *tmp)
{
	struct stat old;
	int keep = ms_sys_fstatat(where.dirfd, where.name, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode);
	int fd = (int)syscall(SYS_openat, where.dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			      keep ? 0600 : 0644);
	if (fd >= 0 && keep)
		ms_sys_fchmod(fd, old.st_mode & 0777); /* on failure it stays 0600: narrower, never wider */
	return fd;
}

/* A torchrun rank started again after a failure (TORCHELASTIC_RESTART_COUNT N >= 1) replacing its
 * file for the first time: what is there is an earlier attempt's (the snapshot of a rank the OOM
 * killer ended), moved aside to NAME.before-restartN rather than overwritten. */
static void keep_earlier_attempt(void)
{
	static int done;
	const struct ms_rank *k = &ms_proc.rank;
	if (done || k->restart < 1 || !k->own)
		return;
	done = 1;
	char aside[NAME_MAX + 48];
	if (ms_format(aside, sizeof aside, "%s.before-restart%ld", where.name, k->restart) <= NAME_MAX)
		ms_sys_renameat(where.dirfd, where.name, where.dirfd, aside); /* none there: nothing to keep */
}

static int write_replacing(const char *path, const char *reason, int sig, int complete)
{
	static struct ms_json w MS_PAGE_ALIGNED MS_LARGE;
	static unsigned serial;
	char tmp[NAME_MAX + 48];
	size_t n = ms_format(tmp, sizeof tmp, ".%s.tmp.%d.%u", where.name, (int)ms_proc.pid,
			     __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
	if (n > NAME_MAX)
		return fail(path, ENAMETOOLONG);
	int fd = open_temporary(tmp);
	if (fd < 0)
		return fail(path, errno);
	ms_json_init(&w, fd);
	write_document(&w, reason, sig, complete, 0);
	int e = finish(&w, fd);
	if (!e)
		keep_earlier_attempt();
	if (!e && ms_sys_renameat(where.dirfd, tmp, where.dirfd, where.name) < 0)
		e = errno;
	if (e) {
		ms_sys_unlinkat(where.dirfd, tmp, 0);
		return fail(path, e);
	}
	return 0;
}

static int replace_only; /* a default snapshot: never into a device or FIFO, where it would stay */

/* Finds the file through the directories on its path (shim/output/outpath.c), then writes it. */
static int write_to(const char *path, const char *reason, int sig, int complete)
{
	int e = ms_outpath_walk(&where, path);
	int rc = e < 0                                         ? fail(path, -e)
		 : replace_only && where.how != MS_OUT_REPLACE ? -1
		 : where.how == MS_OUT_REFUSED                 ? refuse(path)
		 : where.how == MS_OUT_IN_PLACE                ? write_in_place(path, reason, sig, complete)
							       : write_replacing(path, reason, sig, complete);
	if (where.dirfd >= 0)
		ms_sys_close(where.dirfd);
	return rc;
}

static int writing, finished_final;
static uint64_t writer_mask; /* the holder's signal mask before it took the writer */

/* Takes the writer now or returns -1.  Signals sent to the process wait while it is held: a handler
 * ending the process on this thread (ours, or the program's calling _exit) would otherwise wait for
 * the writer its own thread holds, and the file it cut short would be lost. */
static int try_writer(void)
{
	uint64_t old;
	ms_sys_sigmask(SIG_BLOCK, ~MS_SIG_SYNCHRONOUS, &old);
	if (__atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE)) {
		ms_sys_sigmask(SIG_SETMASK, old, NULL);
		return -1;
	}
	writer_mask = old;
	return 0;
}

/* Gives the writer back; a signal that waited is taken now. */
static void release_writer(void)
{
	uint64_t mask = writer_mask;
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
	ms_sys_sigmask(SIG_SETMASK, mask, NULL);
}

/* One writer at a time: the final file waits for a snapshot in progress; a handler waits ~100 ms. */
static int acquire_writer(int from_handler)
{
	for (long tries = 0; try_writer() < 0; tries++) {
		if (from_handler && tries > 1000)
			return -1;
		struct timespec pause = { 0, 100000 };
		ms_sys_nanosleep(&pause, NULL);
	}
	return 0;
}

static int own_stage;      /* this process (a forked child: since its fork) began a stage */
static int wrote_snapshot; /* a snapshot of this process is at its path: its last file goes there */

void ms_report_boundary(int stage, int end)
{
	/* the engine's flag, read right after this thread's own enter: the implicit init, or an
	 * explicit init that took its place (then no longer implicit) */
	if (!end && stage >= 0 && stage < MS_MAX_STAGES && !own_stage && !ms_stages_peek()->stage[stage].implicit)
		__atomic_store_n(&own_stage, 1, __ATOMIC_RELAXED);
}

/* A child that did nothing worth a file in the user's directory (report.h): a shell's subshell, a
 * readlink a launcher runs.  memshim-format's rule for what it summarises in one line. */
static int helper(void)
{
	int64_t peaks[MS_NCOMP], inherited[MS_NCOMP] = { 0 };
	const struct ms_rank *r = &ms_proc.rank;
	if (__atomic_load_n(&own_stage, __ATOMIC_RELAXED) || wrote_snapshot || ms_gpu_used() ||
	    (r->own && r->rank >= 0) || ms_cfg.children_dir[0])
		return 0;
	ms_counters_process_peaks(peaks);
	if (ms_proc.forked)
		ms_counters_inherited(inherited);
	int64_t added = peaks[MS_CPU] > inherited[MS_CPU] ? peaks[MS_CPU] - inherited[MS_CPU] : 0;
	return added < MS_HELPER_PEAK || (ms_proc.forked && added * 20 < inherited[MS_CPU]);
}

/* Where a helper's last file goes: memshim run's directory of the run (the same name), or nowhere
 * (0).  Returns 1 when PATH was moved there. */
static int helper_path(char *path, size_t size)
{
	static char moved[MS_PATH_MAX + 32] MS_LARGE; /* the one writer's; a handler's stack may be small */
	const char *dir = ms_setting_text("MEMSHIM_RUN_DIR"), *slash = strrchr(path, '/');
	if (!dir || dir[0] != '/' || !slash)
		return 0;
	if (ms_format(moved, sizeof moved, "%s/%s", dir, slash + 1) + 1 >= sizeof moved)
		return 0;
	ms_strlcpy(path, moved, size);
	return 1;
}

/* write_to, and when that fails where the start found nothing wrong (MEMSHIM_OUTPUT=/proc/x.json
 * for root: the directory says it is writable), the file goes where an unwritable directory's
 * would (ms_identity_fall_back), once: not for a helper's file in the run's directory (MOVED). */
/* The program used up its descriptors (EMFILE), or the system's (ENFILE): another directory would
 * not help.  The file takes two (its directory, itself): memshim lets go of the ones it keeps, and
 * the soft RLIMIT_NOFILE is raised by two while it writes when the hard limit allows (restored at
 * once), then the same file is tried again. */
static int write_out_of_fds(const char *path, const char *reason, int sig, int complete)
{
	struct rlimit was, more;
	int raised = 0;
	if (deferred == EMFILE && syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &was) == 0 &&
	    was.rlim_cur != RLIM_INFINITY && was.rlim_cur + 2 <= was.rlim_max) {
		more = (struct rlimit){ was.rlim_cur + 2, was.rlim_max };
		raised = syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &more, NULL) == 0;
	}
	int rc = ms_cgroup_release_fds() > 0 || raised ? write_to(path, reason, sig, complete) : fail(path, deferred);
	if (raised)
		syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &was, NULL);
	return rc;
}

static int write_to_or_fall_back(char *path, size_t size, int moved, const char *reason, int sig, int complete)
{
	static int fell_back;
	deferring = !moved && !fell_back;
	deferred = 0;
	int rc = write_to(path, reason, sig, complete);
	deferring = 0;
	if (rc == 0 || !deferred)
		return rc;
	if (deferred == EMFILE || deferred == ENFILE)
		return write_out_of_fds(path, reason, sig, complete);
	fell_back = 1;
	if (!ms_identity_fall_back(deferred))
		return fail(path, deferred);
	ms_identity_output_path(path, size);
	return write_to(path, reason, sig, complete);
}

/* Writes the file; the caller holds the writer.  FROM_HANDLER: never wait for the engine's lock. */
static int write_held(const char *reason, int sig, int complete, int from_handler)
{
	char path[MS_PATH_MAX + 32];
	int saved = errno, rc = 0;
	ms_refresh(MS_REFRESH_REPORT);
	ms_tls_guard++;
	in_handler = from_handler;
	int inherited_name = ms_identity_output_path(path, sizeof path);
	/* a helper's last file (at exit, or on a signal) stays out of the user's directory */
	int last = complete || sig;
	int moved = 0;
	if (!path[0])
		rc = fail("(empty path)", ENOENT);
	else if (!(last && inherited_name && helper()) || (moved = helper_path(path, sizeof path)))
		rc = write_to_or_fall_back(path, sizeof path, moved, reason, sig, complete);
	if (rc == 0 && !last)
		wrote_snapshot = 1;
	if (complete)
		__atomic_store_n(&finished_final, 1, __ATOMIC_RELEASE);
	in_handler = 0;
	ms_tls_guard--;
	release_writer();
	errno = saved;
	return rc;
}

static int write_file(const char *reason, int sig, int complete, int from_handler)
{
	if (ms_sandboxed()) /* the live record is its file (intercept/sandbox.c) */
		return -1;
	if (acquire_writer(from_handler) < 0)
		return -1;
	return write_held(reason, sig, complete, from_handler);
}

int ms_report_try_snapshot(void)
{
	if (ms_sandboxed() || __atomic_load_n(&finished_final, __ATOMIC_ACQUIRE) || try_writer() < 0)
		return -1;
	replace_only = 1;
	int rc = write_held("snapshot", 0, 0, 1);
	replace_only = 0;
	return rc;
}

long ms_report_to_buffer(char *buf, size_t size, int brief)
{
	static struct ms_json w MS_LARGE;
	if (acquire_writer(0) < 0)
		return -1;
	int saved = errno;
	ms_tls_guard++;
	ms_json_init_memory(&w, buf, size);
	write_document(&w, "live", 0, 0, brief);
	long rc = ms_json_finish(&w) < 0 ? -1 : (long)w.mem_len;
	ms_tls_guard--;
	release_writer();
	errno = saved;
	return rc;
}

int ms_report_write(const char *reason, int sig, int complete)
{
	/* a snapshot after the final file would replace it with an incomplete one */
	if (!complete && __atomic_load_n(&finished_final, __ATOMIC_ACQUIRE))
		return -1;
	return write_file(reason, sig, complete, 0);
}

void ms_report_signal(int sig)
{
	if (__atomic_load_n(&finished_final, __ATOMIC_ACQUIRE))
		return;
	if ((sig == SIGTERM || sig == SIGHUP || sig == SIGPIPE) && ms_stages_explicit_open() == 0) {
		/* asked to stop with no stage open (Jupyter ending a kernel, docker stop of an idle
		 * service, a closed terminal, the reader of a pipeline gone: `sort | head`): a normal
		 * end, whose numbers are final, not a crash inside a stage */
		ms_refresh(MS_REFRESH_REPORT);
		ms_stages_close_all(ms_elapsed());
		write_file("signal", sig, 1, 1);
		return;
	}
	write_file("signal", sig, 0, 1);
}

int ms_report_finished(void)
{
	return __atomic_load_n(&finished_final, __ATOMIC_ACQUIRE);
}

static int held_for_fork;

/* No file is being written while the process forks (a child would inherit a half-written temporary). */
void ms_report_fork_prepare(void)
{
	held_for_fork = acquire_writer(1) == 0;
}

void ms_report_fork_parent(void)
{
	if (held_for_fork)
		release_writer();
	held_for_fork = 0;
}

void ms_report_fork_child(int tracking)
{
	if (held_for_fork) /* the forking thread's mask, as before fork */
		ms_sys_sigmask(SIG_SETMASK, writer_mask, NULL);
	held_for_fork = 0;
	writing = 0;
	if (!tracking)
		return;
	finished_final = 0;
	warned = 0;
	own_stage = 0; /* the child is judged on its own: stages it inherited open do not count */
	wrote_snapshot = 0;
}
