/* The live record (see live.h and live_record.h).  No thread, no timer, nothing on the allocation
 * path: the record is written where the shim already leaves it, at stage boundaries (the whole
 * record, from a copy of the stage engine) and at the timeline's points (live, peaks and the open
 * stages' numbers so far: a few hundred plain stores).  A sequence counter around each update lets
 * readers in other processes take a consistent copy.  One writer at a time: a thread that finds
 * the record busy leaves its update pending and the writer does it before it lets go (no waiting,
 * no lock a forked child could inherit held).
 *
 * Created lazily, as the default snapshot policy decides (output/snapshots.c): at the first stage
 * other than init, or once the process is 2 s old and holds 64 MiB; short and small processes (build
 * tools under an inherited LD_PRELOAD) never create one; a program that leaves past every exit
 * handler (Go) creates it at once, since no final file will come.  The directory is the user's own, mode
 * 0700: MEMSHIM_LIVE_DIR, else $XDG_RUNTIME_DIR/memshim, else /dev/shm/memshim-<uid>, reached with
 * the metrics file's symlink rules (output/outpath.c) and opened with O_NOFOLLOW; files are 0600
 * and their blocks are written before the mapping is, so a full file system fails the creation
 * (one warning), never a store into the mapping (SIGBUS).  The record is removed after the final
 * metrics file; a killed process leaves it for memshim-format --recover and memshim top. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "core/timeline.h"
#include "intercept/cgroup.h"
#include "intercept/hooks.h"
#include "output/live.h"
#include "output/live_record.h"
#include "output/identity.h"
#include "output/outpath.h"
#include "output/report.h"

/* The record's tables are the engine's and the counters' (its readers index them alike). */
#define COUNT(array) (sizeof(array) / sizeof *(array))
_Static_assert(COUNT(((struct ms_live_record *)0)->live) == COUNT(((struct ms_stages *)0)->before_init) &&
		       COUNT(((struct ms_live_record *)0)->stage) == COUNT(((struct ms_stages *)0)->stage) &&
		       sizeof((struct ms_live_stage *)0)->name == sizeof((struct ms_stage *)0)->name &&
		       MS_LIVE_DEV0 == (int)MS_DEV0 && MS_LIVE_RSS == (int)MS_RSS && MS_LIVE_GPU == (int)MS_GPU &&
		       MS_LIVE_RESERVE == (int)MS_RESERVE && MS_LIVE_MANAGED == (int)MS_MANAGED &&
		       MS_LIVE_SHARED == (int)MS_SHARED && MS_LIVE_CGROUP == (int)MS_CGROUP &&
		       sizeof((struct ms_live_record *)0)->cgroup_dir == MS_CGROUP_PATH &&
		       sizeof((struct ms_live_record *)0)->cgroup_boot_id == MS_BOOT_ID_LEN,
	       "the live record follows core/counters.h and core/stages.h");

#define WORTH_AGE 2.0 /* as the default snapshot policy */
#define WORTH_BYTES ((int64_t)64 << 20)
#define LIGHT 1       /* live, peaks, open stages so far */
#define FULL 2        /* everything, from a copy of the stage engine */
#define EXACT_GAP 0.1 /* seconds between exact process peaks and getrusage */

enum { NOT_YET, ON, OFF };
/* This process's record and where its writer is. */
static struct record {
	int state;      /* OFF until init; OFF for good after a failure */
	int real_stage; /* a stage other than init began (in this process) */
	int busy, pending;
	uint64_t want_stages; /* bit i: stage i crossed a boundary since the last update */
	double next_exact;    /* ms_elapsed() of the next exact() */
	int failed;
	struct ms_live_record *map; /* the record, mapped MAP_SHARED; NULL: none yet */
	dev_t dev;                  /* its file, to know it again at exit */
	ino_t ino;
	char name[64];
} record = { .state = OFF };
static char rec_dir[MS_PATH_MAX] MS_LARGE; /* where the record is, to remove it at exit */
static struct ms_stages engine MS_PAGE_ALIGNED MS_LARGE;
static struct ms_outpath where MS_LARGE; /* its own walk: the report writer may walk at once */
static char zeros[4096] MS_LARGE;        /* never written: read, it is the kernel's zero page */

static int64_t held(void)
{
	return ms_live(MS_CPU) + ms_live(MS_GPU) + ms_live(MS_MANAGED) + ms_live(MS_PINNED);
}

static int worth_it(double now)
{
	return __atomic_load_n(&record.real_stage, __ATOMIC_RELAXED) || ms_proc.leaves_raw ||
	       (now >= WORTH_AGE && held() >= WORTH_BYTES);
}

/* ---- creating the record ---------------------------------------------------------------------- */

static int give_up(const char *dir, const char *why, int e)
{
	__atomic_store_n(&record.state, OFF, __ATOMIC_RELAXED);
	record.failed = 1; /* forked children do not try (and warn) again */
	if (e)
		ms_warn("cannot create the live record in %s: %s (errno %d); the run goes on without it", dir, why, e);
	else
		ms_warn("cannot create the live record in %s: %s; the run goes on without it", dir, why);
	return -1;
}

/* The directory records go to: MEMSHIM_LIVE_DIR, $XDG_RUNTIME_DIR/memshim or /dev/shm/memshim-<uid>. */
static void record_dir(char *out, size_t size)
{
	const char *xdg = ms_setting_text("XDG_RUNTIME_DIR");
	if (ms_cfg.live_dir[0])
		ms_strlcpy(out, ms_cfg.live_dir, size);
	else if (xdg && xdg[0] == '/')
		ms_format(out, size, "%s/memshim", xdg);
	else
		ms_format(out, size, "/dev/shm/memshim-%u", (unsigned)ms_sys_getuid());
}

/* DIR opened (O_PATH), created 0700 when missing: never through a link in its last name or one the
 * kernel's protected_symlinks rule would not follow on the way, only ours and only private.  QUIET
 * (at exit): no warning, no directory created. */
static int open_dir(const char *dir, int quiet)
{
	where.parent_only = 1;
	int rc = ms_outpath_walk(&where, dir);
	if (rc < 0 || where.how == MS_OUT_REFUSED)
		return quiet    ? -1
		       : rc < 0 ? give_up(dir, ms_errno_text(-rc), -rc)
				: give_up(dir,
					  "not following a symlink on the way in a sticky world-writable directory", 0);
	int fd = (int)ms_sys_openat(where.dirfd, where.name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0 && errno == ENOENT && !quiet &&
	    (ms_sys_mkdirat(where.dirfd, where.name, 0700) == 0 || errno == EEXIST))
		fd = (int)ms_sys_openat(where.dirfd, where.name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	int e = errno;
	ms_sys_close(where.dirfd);
	if (fd < 0)
		return quiet ? -1
			     : give_up(dir,
				       e == ENOTDIR || e == ELOOP ? "a symlink or not a directory" : ms_errno_text(e),
				       e);
	struct stat st;
	if (ms_sys_fstat(fd, &st) < 0 || st.st_uid != ms_sys_geteuid() || (st.st_mode & 077)) {
		ms_sys_close(fd);
		return quiet ? -1 : give_up(dir, "not a directory of this user with mode 0700", 0);
	}
	return fd;
}

/* Every block of FD written (tmpfs and disks alike), so stores into the mapping never need one. */
static int fill(int fd, size_t size)
{
	for (size_t off = 0; off < size;) {
		size_t n = size - off < sizeof zeros ? size - off : sizeof zeros;
		ssize_t w = ms_sys_pwrite(fd, zeros, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : ENOSPC;
		off += (size_t)w;
	}
	return 0;
}

/* The launcher's rank numbers (core/process.c read them at start). */
static void ranks(struct ms_live_record *r)
{
	const struct ms_rank *k = &ms_proc.rank;
	r->rank = r->local_rank = r->world_size = r->node_rank = -1;
	if (k->rank < 0)
		return;
	r->rank = (int32_t)k->rank;
	r->local_rank = (int32_t)k->local_rank;
	r->world_size = (int32_t)k->world_size;
	r->node_rank = (int32_t)k->node_rank;
	ms_strlcpy(r->rank_source, k->source ? k->source : "", sizeof r->rank_source);
}

/* What does not change while the process runs. */
static void identity(struct ms_live_record *r)
{
	r->version = MS_LIVE_VERSION;
	r->size = sizeof *r;
	r->state = MS_LIVE_RUNNING;
	r->uid = ms_sys_getuid();
	r->pid = ms_proc.pid;
	r->ppid = ms_proc.ppid;
	r->root_pid = ms_proc.root_pid;
	r->is_child = ms_proc.is_child;
	r->forked = ms_proc.forked;
	r->start_unix = ms_proc.start_unix;
	r->timeline = ms_cfg.timeline;
	r->leaves_raw = ms_proc.leaves_raw;
	ranks(r);
	int truncated;
	r->argv_len = (uint32_t)ms_process_cmdline(r->argv, sizeof r->argv, &truncated);
	r->argv_truncated = (uint32_t)truncated;
	ms_identity_output_path(r->output, sizeof r->output);
	ms_counters_inherited(r->inherited);
	__atomic_store_n(&r->magic, MS_LIVE_MAGIC, __ATOMIC_RELEASE); /* last: a reader sees all or none */
}

static int map_record(int dfd, int fd, const char *dir)
{
	struct stat st;
	int e = fill(fd, sizeof *record.map);
	if (e || ms_sys_fstat(fd, &st) < 0) {
		ms_sys_unlinkat(dfd, record.name, 0);
		return give_up(dir, ms_errno_text(e ? e : errno), e ? e : errno);
	}
	long p = syscall(SYS_mmap, NULL, sizeof *record.map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == 0 || (p < 0 && p > -4096)) {
		ms_sys_unlinkat(dfd, record.name, 0);
		return give_up(dir, ms_errno_text(p ? (int)-p : ENOMEM), p ? (int)-p : ENOMEM);
	}
	record.dev = st.st_dev;
	record.ino = st.st_ino;
	identity((struct ms_live_record *)p);
	__atomic_store_n(&record.map, (struct ms_live_record *)p, __ATOMIC_RELEASE);
	return 0;
}

/* Creates and maps the record; the caller holds BUSY.  0, or -1 after one warning (then never again). */
static int create(void)
{
	if (ms_sandboxed()) { /* the files below may be what the sandbox kills on */
		__atomic_store_n(&record.state, OFF, __ATOMIC_RELAXED);
		return -1;
	}
	record_dir(rec_dir, sizeof rec_dir);
	ms_format(record.name, sizeof record.name, "%d.%lld%s", (int)ms_proc.pid,
		  (long long)(ms_proc.start_unix * 1000), MS_LIVE_SUFFIX);
	int dfd = open_dir(rec_dir, 0);
	if (dfd < 0)
		return -1;
	int fd = (int)ms_sys_openat(dfd, record.name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rc = fd < 0 ? give_up(rec_dir, ms_errno_text(errno), errno) : map_record(dfd, fd, rec_dir);
	if (fd >= 0)
		ms_sys_close(fd);
	ms_sys_close(dfd);
	return rc;
}

/* ---- updates ---------------------------------------------------------------------------------- */

static void begin_write(void)
{
	__atomic_store_n(&record.map->seq, record.map->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE); /* the odd count is seen before any store below */
}

static void end_write(double t)
{
	record.map->elapsed = t;
	record.map->update_unix = ms_proc.start_unix + t;
	record.map->updates++;
	__atomic_store_n(&record.map->seq, record.map->seq + 1, __ATOMIC_RELEASE);
}

/* The components written at every update: the CPU ones, and the GPU ones once a GPU is used. */
static const int cpu_comps[] = { MS_CPU, MS_MALLOC, MS_MMAP, MS_RESERVE, MS_SHARED, MS_RSS, MS_CGROUP };
static const int all_comps[] = { MS_CPU,       MS_MALLOC,   MS_MMAP,      MS_RESERVE,   MS_SHARED,    MS_RSS,
				 MS_CGROUP,    MS_GPU,      MS_MANAGED,   MS_PINNED,    MS_DEV0,      MS_DEV0 + 1,
				 MS_DEV0 + 2,  MS_DEV0 + 3, MS_DEV0 + 4,  MS_DEV0 + 5,  MS_DEV0 + 6,  MS_DEV0 + 7,
				 MS_DEV0 + 8,  MS_DEV0 + 9, MS_DEV0 + 10, MS_DEV0 + 11, MS_DEV0 + 12, MS_DEV0 + 13,
				 MS_DEV0 + 14, MS_DEV0 + 15 };
_Static_assert(sizeof all_comps / sizeof *all_comps == MS_NCOMP, "every component once");

/* The memory cgroup as last read: what a reader needs to say the group OOM-killed the process. */
static void cgroup_of(struct ms_live_record *r)
{
	const struct ms_cgroup *cg = ms_cgroup_state();
	if (!cg)
		return;
	r->cgroup_version = cg->version;
	r->cgroup_per_reader = cg->per_reader;
	r->cgroup_usage = cg->usage;
	r->cgroup_peak = cg->peak;
	r->cgroup_limit = cg->limit;
	r->cgroup_oom_kills = cg->oom_kills;
	r->cgroup_oom_kills_first = cg->oom_kills_first;
	if (!r->cgroup_dir[0]) {
		ms_strlcpy(r->cgroup_dir, cg->dir, sizeof r->cgroup_dir);
		ms_strlcpy(r->cgroup_boot_id, cg->boot_id, sizeof r->cgroup_boot_id);
		r->cgroup_dev = cg->dev;
		r->cgroup_ino = cg->ino;
	}
}

/* Live memory moved (or a boundary): live, and from it the process peaks and the open stages' end
 * and peak so far (within one timeline step of the exact peaks, which boundaries bring). */
static void light(double t)
{
	int gpu = ms_gpu_used();
	const int *comps = gpu ? all_comps : cpu_comps;
	int n = gpu ? MS_NCOMP : (int)(sizeof cpu_comps / sizeof *cpu_comps);
	int64_t live[MS_NCOMP];
	ms_cpu_live(&live[MS_CPU], &live[MS_MALLOC], &live[MS_MMAP], &live[MS_RESERVE], &live[MS_SHARED]);
	for (int k = 5; k < n; k++)
		live[comps[k]] = ms_live((enum ms_comp)comps[k]);
	if (gpu) { /* a device's point comes before its bytes reach the total (core/counters.c) */
		int64_t sum = 0;
		for (int d = 0; d < MS_MAX_DEVICES; d++)
			sum += live[MS_DEV0 + d];
		if (sum > live[MS_GPU])
			live[MS_GPU] = sum;
	}
	begin_write();
	for (int k = 0; k < n; k++) {
		int c = comps[k];
		record.map->live[c] = live[c];
		if (live[c] > record.map->peak[c])
			record.map->peak[c] = live[c];
	}
	record.map->gpu_used = (uint32_t)gpu;
	record.map->devices_used = ms_gpu_devices_used();
	cgroup_of(record.map);
	for (int i = 0; i < record.map->nopen && i < MS_LIVE_STAGES; i++) {
		struct ms_live_span *sp = &record.map->stage[record.map->open[i] & (MS_LIVE_STAGES - 1)].cur;
		for (int k = 0; k < n; k++) {
			int c = comps[k];
			sp->end[c] = live[c];
			if (live[c] > sp->peak[c])
				sp->peak[c] = live[c];
		}
		sp->runtime = t - sp->start;
	}
	end_write(t);
}

static void span_of(struct ms_live_span *out, const struct ms_span *in)
{
	memcpy(out->begin, in->begin, sizeof out->begin);
	memcpy(out->end, in->end, sizeof out->end);
	memcpy(out->peak, in->peak, sizeof out->peak);
	out->start = in->start;
	out->runtime = in->runtime;
	out->gpu_failed_bytes = in->gpu_failed_bytes;
	out->gpu_failed_allocs = in->gpu_failed_allocs;
	out->closed_at_exit = (uint32_t)in->closed_at_exit;
}

static void stage_of(struct ms_live_stage *out, const struct ms_stage *in, int depth)
{
	ms_strlcpy(out->name, in->name, sizeof out->name);
	out->calls = in->calls;
	out->depth = depth;
	out->first_order = in->first_order;
	out->implicit = in->implicit;
	out->max_cpu_needed = in->max_cpu_needed;
	out->max_gpu_needed = in->max_gpu_needed;
	out->max_cpu_call = in->max_cpu_call;
	out->max_gpu_call = in->max_gpu_call;
	if (depth > 0)
		span_of(&out->cur, &in->cur);
	if (in->calls > 0)
		span_of(&out->last, &in->last);
}

/* Read with a system call or a pass over every counter: at most every EXACT_GAP seconds (stage
 * boundaries may come every microsecond), and when the record is new. */
static void exact(double t)
{
	int64_t peaks[MS_NCOMP];
	if (t < record.next_exact)
		return;
	/* a Go program's record is its final numbers (it leaves past every exit handler): every point */
	record.next_exact = ms_proc.leaves_raw ? 0 : t + EXACT_GAP;
	ms_counters_process_peaks(peaks);
	for (int c = 0; c < MS_NCOMP; c++)
		if (peaks[c] > record.map->peak[c])
			record.map->peak[c] = peaks[c];
	int64_t rss_peak = ms_process_rss_peak();
	if (rss_peak >= 0)
		record.map->rss_peak = rss_peak;
	record.map->mmap_untracked = ms_mmap_untracked();
	record.map->shared_mappings = ms_mmap_shared_mappings();
}

/* exact() between boundaries too: a process that allocates and never reaches another boundary (a
 * Go program leaving by its own exit_group, a killed one) has its RSS high-water in the record. */
static void exact_when_due(double t)
{
	if (t < record.next_exact)
		return;
	begin_write();
	exact(t);
	end_write(t);
}

/* A boundary: the stages that changed from a brief copy of the engine (exact peaks of the open
 * ones as of this boundary), then what light() writes. */
static void full(double t, int all)
{
	uint64_t want = __atomic_exchange_n(&record.want_stages, 0, __ATOMIC_ACQ_REL);
	uint64_t copied = ms_stages_copy_brief(&engine, all ? ~UINT64_C(0) : want);
	if (all)
		record.next_exact = 0;
	begin_write();
	record.map->nstages = engine.nstages;
	for (int i = 0; i < engine.nstages; i++)
		if ((copied >> i) & 1)
			stage_of(&record.map->stage[i], &engine.stage[i], engine.depth[i]);
	record.map->nopen = engine.nopen;
	memcpy(record.map->open, engine.open, sizeof record.map->open);
	record.map->before_init_set = engine.before_init_set;
	memcpy(record.map->before_init, engine.before_init, sizeof record.map->before_init);
	exact(t);
	end_write(t);
	light(t);
}

/* Asks for an update of KIND; whoever holds the record does every pending one before letting go. */
static void request(int kind, double t)
{
	__atomic_or_fetch(&record.pending, kind, __ATOMIC_RELAXED);
	for (int round = 0; round < 4 && __atomic_load_n(&record.pending, __ATOMIC_RELAXED); round++) {
		if (__atomic_exchange_n(&record.busy, 1, __ATOMIC_ACQUIRE))
			return; /* the holder sees PENDING before it lets go */
		int k = __atomic_exchange_n(&record.pending, 0, __ATOMIC_ACQ_REL);
		int fresh = __atomic_load_n(&record.state, __ATOMIC_RELAXED) != ON;
		int ok = !fresh || (k & FULL && create() == 0);
		int later = (k & FULL) && ms_stages_held_here(); /* a handler inside the engine: not now */
		if (ok && __atomic_load_n(&record.state, __ATOMIC_RELAXED) != OFF) {
			__atomic_store_n(&record.state, ON, __ATOMIC_RELAXED);
			if ((k & FULL) && !later) {
				full(ms_elapsed(), fresh);
			} else {
				exact_when_due(t);
				light(t);
			}
		}
		if (later)
			__atomic_or_fetch(&record.pending, FULL, __ATOMIC_RELAXED);
		__atomic_store_n(&record.busy, 0, __ATOMIC_RELEASE);
		if (later)
			return; /* the next boundary or point does it */
	}
}

/* The timeline recorded a point because live memory moved (on the allocating thread). */
void ms_live_moved(double t)
{
	int s = __atomic_load_n(&record.state, __ATOMIC_RELAXED);
	if (s == ON)
		request(LIGHT, t);
	else if (s == NOT_YET && worth_it(t) && ms_is_tracked_process())
		request(FULL, t); /* creates it */
}

void ms_live_boundary(int stage, int end)
{
	int s = __atomic_load_n(&record.state, __ATOMIC_RELAXED);
	if (s == OFF)
		return;
	if (!end && stage >= 0 && !__atomic_load_n(&record.real_stage, __ATOMIC_RELAXED) &&
	    strcmp(ms_stages_peek()->stage[stage].name, "init") != 0)
		__atomic_store_n(&record.real_stage, 1, __ATOMIC_RELAXED);
	double t = ms_elapsed();
	if (stage >= 0 && stage < MS_LIVE_STAGES)
		__atomic_or_fetch(&record.want_stages, UINT64_C(1) << stage, __ATOMIC_RELAXED);
	if (s == ON || (worth_it(t) && ms_is_tracked_process()))
		request(FULL, t);
}

void ms_live_init(void)
{
	if (!ms_cfg.live)
		return;
	record.state = NOT_YET;
}

void ms_live_fork_child(int tracking)
{
	if (record.map)
		syscall(SYS_munmap, record.map, sizeof *record.map); /* the parent's: never written by the child */
	record.map = NULL;
	record.busy = record.pending = 0;
	record.want_stages = 0;
	record.real_stage = 0; /* judged on its own, as the snapshot policy judges it */
	record.state = tracking && ms_cfg.live && !record.failed ? NOT_YET : OFF;
}

void ms_live_signal(int sig)
{
	struct ms_live_record *r = __atomic_load_n(&record.map, __ATOMIC_ACQUIRE);
	if (!r || __atomic_load_n(&record.state, __ATOMIC_RELAXED) != ON || !ms_is_tracked_process())
		return;
	if (!__atomic_exchange_n(&record.busy, 1, __ATOMIC_ACQUIRE)) { /* else this thread or another writes */
		light(ms_elapsed());
		__atomic_store_n(&record.busy, 0, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&r->signal, sig, __ATOMIC_RELAXED); /* single words: no sequence needed */
	__atomic_store_n(&r->state, MS_LIVE_SIGNALED, __ATOMIC_RELEASE);
}

void ms_live_sandbox(void)
{
	int s = __atomic_load_n(&record.state, __ATOMIC_RELAXED);
	if (s == ON)
		__atomic_store_n(&record.map->leaves_raw, ms_proc.leaves_raw, __ATOMIC_RELAXED);
	if ((s == ON || s == NOT_YET) && ms_is_tracked_process())
		request(FULL, ms_elapsed()); /* NOT_YET: made now (identity() writes leaves_raw) */
}

void ms_live_sandbox_end(void)
{
	if (__atomic_load_n(&record.state, __ATOMIC_RELAXED) != ON || !record.map ||
	    __atomic_exchange_n(&record.busy, 1, __ATOMIC_ACQUIRE))
		return;
	full(ms_elapsed(), 1);
	__atomic_store_n(&record.busy, 0, __ATOMIC_RELEASE);
}

/* Removes the record if it is still the file this process created. */
void ms_live_finish(void)
{
	if (__atomic_exchange_n(&record.state, OFF, __ATOMIC_ACQ_REL) != ON || !record.map)
		return;
	for (int tries = 0; __atomic_exchange_n(&record.busy, 1, __ATOMIC_ACQUIRE); tries++) {
		struct timespec pause = { 0, 100000 };
		if (tries > 1000)
			return; /* a writer stuck (this thread, under a handler): the record stays */
		ms_sys_nanosleep(&pause, NULL);
	}
	begin_write();
	record.map->state = MS_LIVE_ENDED;
	end_write(ms_elapsed());
	__atomic_store_n(&record.busy, 0, __ATOMIC_RELEASE);
	int dfd = open_dir(rec_dir, 1);
	struct stat st;
	if (dfd >= 0 && ms_sys_fstatat(dfd, record.name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == record.dev &&
	    st.st_ino == record.ino)
		ms_sys_unlinkat(dfd, record.name, 0);
	if (dfd >= 0)
		ms_sys_close(dfd);
}
