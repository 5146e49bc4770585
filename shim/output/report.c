/* Writing the metrics file: atomic replace through a temporary in the same directory, or in
 * place for devices and FIFOs; never through a symlink the kernel would not follow for us.  Only
 * raw system calls and the streaming writer: safe at exit, on _exit and from a signal handler. */
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
#include "core/config.h"
#include "core/counters.h"
#include "core/json.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "core/timeline.h"
#include "cuda/cuda.h"
#include "intercept/hooks.h"
#include "native/native.h"
#include "python/py.h"
#include "output/outpath.h"
#include "output/report.h"
#include "output/sites.h"

#define ARGV_MAX 4096

static int in_handler; /* the writer runs from a signal handler: no waiting */
static struct ms_stages snap MS_PAGE_ALIGNED MS_LARGE; /* large: static, never on a handler's stack */
static struct ms_timeline tl_snap MS_PAGE_ALIGNED MS_LARGE;
static struct ms_pool_sample pools[MS_CUDA_MAX_POOLS] MS_LARGE;
static char argv_buf[ARGV_MAX];
static size_t argv_len;
static int argv_truncated;

void ms_report_init(void)
{
	argv_len = ms_process_cmdline(argv_buf, sizeof argv_buf, &argv_truncated);
}

void ms_report_path(char *out, size_t size)
{
	int own = ms_outpath_expand(out, size, ms_cfg.output);
	size_t n = strlen(out);
	if (ms_proc.is_child && !ms_proc.own_output && !own)
		ms_format(out + n, size - n, ".%d", (int)ms_proc.pid);
}

static void write_delta(struct ms_json *w, const char *key, const struct ms_span *sp, int c)
{
	ms_json_object(w, key);
	int64_t peaked = sp->peak[c] - sp->end[c];
	ms_json_int(w, "begin", sp->begin[c]);
	ms_json_int(w, "end", sp->end[c]);
	ms_json_int(w, "alloc_delta", sp->end[c] - sp->begin[c]);
	ms_json_int(w, "peaked_delta", peaked > 0 ? peaked : 0);
	ms_json_int(w, "peak", sp->peak[c]);
}

static void write_cpu(struct ms_json *w, const struct ms_span *sp)
{
	write_delta(w, "cpu", sp, MS_CPU);
	write_delta(w, "malloc", sp, MS_MALLOC);
	ms_json_end_object(w);
	write_delta(w, "mmap", sp, MS_MMAP);
	ms_json_end_object(w);
	write_delta(w, "reservations", sp, MS_RESERVE);
	ms_json_string(w, "read", "resident pages (pagemap scan or mincore)");
	ms_json_end_object(w);
	ms_json_end_object(w);
}

/* The kernel's resident set size as last read before the stage's begin and end (at most every 5 ms). */
static void write_rss(struct ms_json *w, const struct ms_span *sp)
{
	if (!sp->peak[MS_RSS])
		return; /* never read: no stage boundary in this process */
	ms_json_object(w, "rss");
	ms_json_int(w, "begin", sp->begin[MS_RSS]);
	ms_json_int(w, "end", sp->end[MS_RSS]);
	ms_json_int(w, "peak", sp->peak[MS_RSS]);
	ms_json_string(w, "read", "/proc/self/statm at boundaries");
	ms_json_end_object(w);
}

/* Opens an object for component COMP of CTX (a stage's span, or the process peaks). */
typedef void (*open_comp_fn)(struct ms_json *w, const char *key, const void *ctx, int comp);

/* "gpu": the total's members, then devices[], managed and pinned: one shape for stages and process. */
static void write_gpu_tree(struct ms_json *w, open_comp_fn open, const void *ctx, const struct ms_span *failures)
{
	open(w, "gpu", ctx, MS_GPU);
	if (failures) {
		ms_json_uint(w, "failed_allocs", failures->gpu_failed_allocs);
		ms_json_int(w, "failed_bytes", failures->gpu_failed_bytes);
	}
	ms_json_array(w, "devices");
	uint32_t used = ms_gpu_devices_used();
	for (int d = 0; d < MS_MAX_DEVICES; d++) {
		if (!(used & (1u << d)))
			continue;
		open(w, NULL, ctx, MS_DEV0 + d);
		ms_json_int(w, "device", d);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	open(w, "managed", ctx, MS_MANAGED);
	ms_json_end_object(w);
	open(w, "pinned", ctx, MS_PINNED);
	ms_json_end_object(w);
	ms_json_end_object(w);
}

static void open_span(struct ms_json *w, const char *key, const void *ctx, int comp)
{
	write_delta(w, key, ctx, comp);
}

static void write_gpu(struct ms_json *w, const struct ms_span *sp)
{
	write_gpu_tree(w, open_span, sp, sp);
}

static void write_history(struct ms_json *w, const struct ms_stage *s, int gpu)
{
	ms_json_array(w, "history");
	uint64_t kept = s->calls < MS_HISTORY ? s->calls : MS_HISTORY;
	for (uint64_t i = 0; i < kept; i++) {
		const struct ms_call *h = &s->history[i];
		ms_json_object(w, NULL);
		ms_json_uint(w, "call", i + 1);
		ms_json_double(w, "start", h->start);
		ms_json_double(w, "runtime", h->runtime);
		ms_json_int(w, "cpu_alloc_delta", h->cpu_alloc);
		ms_json_int(w, "cpu_peaked_delta", h->cpu_peaked > 0 ? h->cpu_peaked : 0);
		if (gpu) {
			ms_json_int(w, "gpu_alloc_delta", h->gpu_alloc);
			ms_json_int(w, "gpu_peaked_delta", h->gpu_peaked > 0 ? h->gpu_peaked : 0);
			ms_json_uint(w, "gpu_failed_allocs", h->gpu_failed_allocs);
		}
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_uint(w, "history_dropped", s->dropped);
}

struct functions_ctx {
	struct ms_json *w;
	int opened;
};

static void write_function_one(void *ctx, const char *target, const char *function, uint64_t calls)
{
	struct functions_ctx *c = ctx;
	if (!c->opened++)
		ms_json_array(c->w, "matched_functions");
	ms_json_object(c->w, NULL);
	ms_json_string(c->w, "target", target);
	ms_json_string(c->w, "function", function);
	ms_json_uint(c->w, "calls", calls);
	ms_json_end_object(c->w);
}

/* A Python target of the stage that matched functions of several modules: each, with its calls. */
static void write_matched_functions(struct ms_json *w, const char *stage)
{
	struct functions_ctx c = { w, 0 };
	if (!in_handler) /* the Python detector's state is read without a lock: not from a handler */
		ms_py_each_ambiguous(stage, write_function_one, &c);
	if (c.opened)
		ms_json_end_array(w);
}

static void write_stage(struct ms_json *w, const struct ms_stage *s, int id, int gpu)
{
	int open = snap.depth[id] > 0;
	const struct ms_span *sp = open ? &s->cur : &s->last;
	ms_json_object(w, NULL);
	ms_json_string(w, "name", s->name);
	ms_json_bool(w, "implicit", s->implicit);
	ms_json_uint(w, "calls", s->calls);
	ms_json_bool(w, "open", open);
	ms_json_bool(w, "closed_at_exit", !open && sp->closed_at_exit);
	ms_json_double(w, "start", sp->start);
	ms_json_double(w, "runtime", sp->runtime);
	write_cpu(w, sp);
	write_rss(w, sp);
	if (gpu)
		write_gpu(w, sp);
	ms_json_object(w, "max_needed");
	ms_json_int(w, "cpu", s->max_cpu_needed);
	ms_json_uint(w, "cpu_call", s->max_cpu_call);
	if (gpu) {
		ms_json_int(w, "gpu", s->max_gpu_needed);
		ms_json_uint(w, "gpu_call", s->max_gpu_call);
	}
	ms_json_end_object(w);
	write_history(w, s, gpu);
	write_matched_functions(w, s->name);
	ms_report_sites_stage(w, id, sp);
	ms_json_end_object(w);
}

static void flat_key(struct ms_json *w, const char *stage, const char *suffix, int64_t v)
{
	char key[MS_STAGE_NAME_MAX + 40];
	ms_format(key, sizeof key, "%s_%s", stage, suffix);
	ms_json_int(w, key, v);
}

static void write_flat_stage(struct ms_json *w, const struct ms_stage *s, int gpu)
{
	const struct ms_span *sp = &s->last;
	int64_t cpu_peaked = sp->peak[MS_CPU] - sp->end[MS_CPU];
	int64_t gpu_peaked = sp->peak[MS_GPU] - sp->end[MS_GPU];
	flat_key(w, s->name, "mem_cpu_alloc_delta", sp->end[MS_CPU] - sp->begin[MS_CPU]);
	flat_key(w, s->name, "mem_cpu_peaked_delta", cpu_peaked > 0 ? cpu_peaked : 0);
	if (gpu) {
		flat_key(w, s->name, "mem_gpu_alloc_delta", sp->end[MS_GPU] - sp->begin[MS_GPU]);
		flat_key(w, s->name, "mem_gpu_peaked_delta", gpu_peaked > 0 ? gpu_peaked : 0);
		flat_key(w, s->name, "mem_gpu_failed_allocs", sp->gpu_failed_allocs);
	}
	char key[MS_STAGE_NAME_MAX + 16];
	ms_format(key, sizeof key, "%s_runtime", s->name);
	ms_json_double(w, key, sp->runtime);
	flat_key(w, s->name, "calls", (int64_t)s->calls);
}

/* Stage ids in the order they first began. */
static int ordered(int ids[MS_MAX_STAGES])
{
	int n = 0;
	for (int order = 0; order < snap.order_next; order++)
		for (int i = 0; i < snap.nstages; i++)
			if (snap.stage[i].first_order == order)
				ids[n++] = i;
	return n;
}

/* The CPU components of a forked child: what it added over the memory it shares with its parent
 * (a DataLoader worker is not its parent's 355 MB). */
static const enum ms_comp cpu_parts[] = { MS_CPU, MS_MALLOC, MS_MMAP, MS_RESERVE };

static void above_inherited(int64_t *v)
{
	int64_t inherited[MS_NCOMP];
	ms_counters_inherited(inherited);
	for (size_t i = 0; i < sizeof cpu_parts / sizeof *cpu_parts; i++) {
		enum ms_comp c = cpu_parts[i];
		v[c] = v[c] > inherited[c] ? v[c] - inherited[c] : 0;
	}
}

/* The kernel's high-water RSS (VmHWM): one system call, no /proc. */
static int64_t rss_high_water(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_maxrss * 1024 : 0;
}

static void write_metrics(struct ms_json *w, const int *ids, int n, const int64_t *peaks, int gpu)
{
	ms_json_object(w, "metrics");
	for (int i = 0; i < n; i++)
		if (snap.stage[ids[i]].calls > 0)
			write_flat_stage(w, &snap.stage[ids[i]], gpu);
	int64_t inherited[MS_NCOMP] = { 0 };
	if (ms_proc.forked)
		ms_counters_inherited(inherited);
	int64_t before_init = snap.before_init_set ? snap.before_init[MS_CPU] - inherited[MS_CPU] : 0;
	ms_json_int(w, "before_init_mem_cpu", before_init > 0 ? before_init : 0);
	if (ms_proc.forked)
		ms_json_int(w, "inherited_mem_cpu", inherited[MS_CPU]);
	ms_json_int(w, "process_mem_cpu_peak", peaks[MS_CPU]);
	ms_json_int(w, "process_mem_cpu_malloc_peak", peaks[MS_MALLOC]);
	ms_json_int(w, "process_mem_cpu_mmap_peak", peaks[MS_MMAP]);
	ms_json_int(w, "process_mem_cpu_reservations_peak", peaks[MS_RESERVE]);
	ms_json_int(w, "process_mem_rss_peak", rss_high_water());
	if (gpu) {
		ms_json_int(w, "before_init_mem_gpu", snap.before_init_set ? snap.before_init[MS_GPU] : 0);
		ms_json_int(w, "process_mem_gpu_peak", peaks[MS_GPU]);
		ms_json_int(w, "process_mem_gpu_managed_peak", peaks[MS_MANAGED]);
		ms_json_int(w, "process_mem_gpu_pinned_peak", peaks[MS_PINNED]);
	}
	ms_json_end_object(w);
}

static void peak_live(struct ms_json *w, const char *key, const int64_t *peaks, int c)
{
	int64_t live[MS_NCOMP] = { 0 };
	live[c] = ms_live((enum ms_comp)c);
	if (ms_proc.forked)
		above_inherited(live);
	ms_json_object(w, key);
	ms_json_int(w, "peak", peaks[c]);
	ms_json_int(w, "live", live[c]);
}

static void open_peak(struct ms_json *w, const char *key, const void *ctx, int comp)
{
	peak_live(w, key, ctx, comp);
}

/* A forked child's CPU peaks and live are above these (its parent's memory at the fork). */
static void write_inherited(struct ms_json *w)
{
	static const char *const names[] = { "cpu", "malloc", "mmap", "reservations" };
	int64_t inherited[MS_NCOMP];
	ms_counters_inherited(inherited);
	ms_json_object(w, "inherited");
	for (size_t i = 0; i < sizeof cpu_parts / sizeof *cpu_parts; i++)
		ms_json_int(w, names[i], inherited[cpu_parts[i]]);
	ms_json_end_object(w);
}

static void write_process(struct ms_json *w, const int64_t *peaks, int gpu)
{
	ms_json_object(w, "process");
	static const char *const cpu_names[] = { "cpu", "malloc", "mmap" };
	for (int c = MS_CPU; c <= MS_MMAP; c++) {
		peak_live(w, cpu_names[c], peaks, c);
		ms_json_end_object(w);
	}
	peak_live(w, "reservations", peaks, MS_RESERVE);
	ms_json_string(w, "read", "resident pages (pagemap scan or mincore)");
	ms_json_end_object(w);
	ms_json_object(w, "rss");
	ms_json_int(w, "peak", rss_high_water());
	ms_json_int(w, "live", ms_live(MS_RSS));
	ms_json_string(w, "read", "peak: getrusage ru_maxrss (VmHWM); live: /proc/self/statm");
	ms_json_end_object(w);
	if (ms_proc.forked)
		write_inherited(w);
	if (gpu)
		write_gpu_tree(w, open_peak, peaks, NULL);
	ms_json_uint(w, "mmap_untracked", ms_mmap_untracked());
	ms_json_end_object(w);
}

static void write_gpu_events(struct ms_json *w)
{
	ms_json_array(w, "gpu_events");
	for (uint32_t i = 0; i < snap.ngpu_events; i++) {
		const struct ms_gpu_event *e = &snap.gpu_events[i];
		ms_json_object(w, NULL);
		ms_json_string(w, "event", "alloc_failed");
		ms_json_double(w, "time", e->time);
		ms_json_int(w, "bytes", e->bytes);
		ms_json_int(w, "device", e->device);
		ms_json_int(w, "result", e->result);
		if (e->stage >= 0)
			ms_json_string(w, "stage", snap.stage[e->stage].name);
		else
			ms_json_null(w, "stage");
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_uint(w, "gpu_events_dropped", snap.gpu_events_dropped);
}

static void write_pool(struct ms_json *w, const struct ms_pool_sample *s, int index)
{
	ms_json_object(w, NULL);
	ms_json_int(w, "pool", index);
	ms_json_int(w, "device", s->device);
	ms_json_int(w, "reserved", s->reserved);
	ms_json_int(w, "reserved_high", s->high);
	ms_json_array(w, "stages");
	for (int st = 0; st < MS_MAX_STAGES; st++) {
		if (!s->have_end[st] || !snap.stage[st].used)
			continue;
		ms_json_object(w, NULL);
		ms_json_string(w, "stage", snap.stage[st].name);
		ms_json_int(w, "reserved_begin", s->begin[st]);
		ms_json_int(w, "reserved_end", s->end[st]);
		ms_json_int(w, "reserved_high", s->end_high[st]);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_end_object(w);
}

/* The memory pools sampled at stage boundaries, and allocations the CUDA table could not hold. */
static void write_gpu_pools(struct ms_json *w)
{
	int n = ms_cuda_pools_copy(pools);
	if (n > 0) {
		ms_json_array(w, "gpu_pools");
		for (int i = 0; i < n; i++)
			write_pool(w, &pools[i], i);
		ms_json_end_array(w);
	}
	uint64_t lost;
	int64_t lost_bytes;
	ms_cuda_untracked(&lost, &lost_bytes);
	if (lost) {
		ms_json_uint(w, "gpu_untracked_allocs", lost);
		ms_json_int(w, "gpu_untracked_bytes", lost_bytes);
	}
}

static void write_series(struct ms_json *w, int comp)
{
	ms_json_object(w, NULL);
	ms_json_string(w, "component", comp == MS_CPU ? "cpu" : "gpu");
	if (comp >= MS_DEV0)
		ms_json_int(w, "device", comp - MS_DEV0);
	ms_json_array(w, "points");
	for (uint32_t i = 0; i < tl_snap.npoints; i++) {
		const struct ms_timeline_point *p = &tl_snap.points[i];
		if (p->comp != comp)
			continue;
		ms_json_pair(w, p->t, p->value);
	}
	ms_json_end_array(w);
	ms_json_end_object(w);
}

static void write_timeline(struct ms_json *w)
{
	ms_timeline_copy(&tl_snap, in_handler);
	uint64_t present = 0;
	for (uint32_t i = 0; i < tl_snap.npoints; i++)
		present |= 1ULL << tl_snap.points[i].comp;
	ms_json_object(w, "timeline");
	ms_json_uint(w, "merges", tl_snap.merges);
	ms_json_uint(w, "points_dropped", 0);
	ms_json_array(w, "series");
	for (int c = 0; c < MS_NCOMP; c++)
		if (present & (1ULL << c))
			write_series(w, c);
	ms_json_end_array(w);
	ms_json_array(w, "events");
	for (uint32_t i = 0; i < tl_snap.nevents; i++) {
		const struct ms_timeline_event *e = &tl_snap.events[i];
		ms_json_object(w, NULL);
		ms_json_double(w, "t", e->t);
		ms_json_string(w, "stage", e->stage >= 0 && e->stage < snap.nstages ? snap.stage[e->stage].name : "?");
		ms_json_string(w, "kind", e->begin ? "begin" : "end");
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_uint(w, "events_dropped", tl_snap.events_dropped);
	ms_json_end_object(w);
}

static void write_identity(struct ms_json *w, const char *reason, int sig, int complete, double end_unix)
{
	ms_json_string(w, "format", "memshim-metrics");
	ms_json_int(w, "version", 1);
	ms_json_bool(w, "complete", complete);
	ms_json_string(w, "reason", reason);
	if (sig)
		ms_json_int(w, "signal", sig);
	ms_json_int(w, "pid", ms_proc.pid);
	ms_json_int(w, "ppid", ms_proc.ppid);
	ms_json_int(w, "root_pid", ms_proc.root_pid);
	ms_json_bool(w, "is_child", ms_proc.is_child);
	ms_json_bool(w, "forked", ms_proc.forked);
	ms_json_array(w, "argv");
	for (size_t i = 0; i < argv_len;) {
		size_t n = strnlen(argv_buf + i, argv_len - i);
		ms_json_string_n(w, NULL, argv_buf + i, n);
		i += n + 1;
	}
	ms_json_end_array(w);
	ms_json_bool(w, "argv_truncated", argv_truncated);
	ms_json_double(w, "start_time", ms_proc.start_unix);
	ms_json_double(w, "end_time", end_unix);
	ms_json_double(w, "elapsed", end_unix - ms_proc.start_unix);
	const struct ms_rank *r = &ms_proc.rank;
	if (r->rank >= 0) {
		ms_json_object(w, "rank");
		ms_json_int(w, "rank", r->rank);
		if (r->local_rank >= 0)
			ms_json_int(w, "local_rank", r->local_rank);
		if (r->world_size >= 0)
			ms_json_int(w, "world_size", r->world_size);
		if (r->node_rank >= 0)
			ms_json_int(w, "node_rank", r->node_rank);
		ms_json_string(w, "source", r->source);
		ms_json_end_object(w);
	}
}

static void write_unmatched_one(void *ctx, const char *stage, const char *target)
{
	struct ms_json *w = ctx;
	ms_json_object(w, NULL);
	ms_json_string(w, "stage", stage);
	ms_json_string(w, "target", target);
	ms_json_string(w, "kind", "python");
	ms_json_end_object(w);
}

/* MEMSHIM_STAGES targets that matched nothing that ran (a typo otherwise leaves no trace). */
static void write_unmatched(struct ms_json *w)
{
	ms_json_array(w, "unmatched_targets");
	if (!in_handler) /* the Python detector's state is read without a lock: not from a handler */
		ms_py_each_unmatched(write_unmatched_one, w);
	ms_json_end_array(w);
}

static void write_native_one(void *ctx, const char *target, const char *stage, const char *bound)
{
	struct ms_json *w = ctx;
	ms_json_object(w, NULL);
	ms_json_string(w, "target", target);
	ms_json_string(w, "stage", stage);
	ms_json_string(w, "bound", bound);
	ms_json_end_object(w);
}

/* Native targets and the mechanism each was bound by (doc/native.md says what each can see). */
static void write_native_targets(struct ms_json *w)
{
	ms_json_array(w, "native_targets");
	ms_native_each_target(write_native_one, w);
	ms_json_end_array(w);
}

/* The whole document into W, initialised by the caller for a file or a buffer. */
static void write_document(struct ms_json *w, const char *reason, int sig, int complete)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double end_unix = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
	if (in_handler)
		ms_stages_copy_nowait(&snap, ms_elapsed());
	else
		ms_stages_copy(&snap, ms_elapsed());
	int64_t peaks[MS_NCOMP];
	ms_counters_process_peaks(peaks);
	if (ms_proc.forked)
		above_inherited(peaks);
	int gpu = ms_gpu_used();
	int ids[MS_MAX_STAGES];
	int n = ordered(ids);

	ms_json_object(w, NULL);
	write_identity(w, reason, sig, complete, end_unix);
	ms_json_bool(w, "gpu_used", gpu);
	write_metrics(w, ids, n, peaks, gpu);
	int sites = ms_report_sites_begin(&snap, ids, n, in_handler);
	ms_json_array(w, "stages");
	for (int i = 0; i < n; i++)
		write_stage(w, &snap.stage[ids[i]], ids[i], gpu);
	ms_json_end_array(w);
	if (sites) {
		ms_report_sites_summary(w);
		ms_report_sites_end();
	}
	write_unmatched(w);
	write_native_targets(w);
	if (gpu)
		write_gpu_events(w);
	if (gpu)
		write_gpu_pools(w);
	write_process(w, peaks, gpu);
	if (ms_cfg.timeline)
		write_timeline(w);
	ms_json_end_object(w);
}


static int warned;

/* At start: an output directory that cannot take the file is found now, not after a six-hour
 * run; the file then goes to $TMPDIR (or /tmp) under the same name.  Returns 1 when it moved. */
int ms_report_check_output(void)
{
	char dir[MS_PATH_MAX], fallback[MS_PATH_MAX];
	const char *out = ms_cfg.output, *slash = strrchr(out, '/');
	if (!slash || strchr(out, '%') || (size_t)(slash - out) >= sizeof dir)
		return 0; /* a placeholder in it: judged per process when the file is written */
	size_t len = (size_t)(slash - out);
	memcpy(dir, out, len);
	dir[len] = '\0';
	if (!len || syscall(SYS_faccessat, AT_FDCWD, dir, W_OK | X_OK) == 0)
		return 0;
	int e = errno;
	const char *tmp = getenv("TMPDIR");
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if (ms_format(fallback, sizeof fallback, "%s/%s", tmp, slash + 1) >= sizeof fallback - 1 ||
	    syscall(SYS_faccessat, AT_FDCWD, tmp, W_OK | X_OK) != 0)
		return 0; /* nowhere better: the warning comes when the file cannot be written */
	ms_warn("cannot write metrics file %s: %s (%s); writing %s instead", out, dir, ms_errno_text(e), fallback);
	ms_strlcpy(ms_cfg.output, fallback, sizeof ms_cfg.output);
	return 1;
}

/* One line for the process the user started; a child's trouble (another uid, its parent's directory
 * removed before it ended) stays off the program's stderr, where it would change the program's
 * output (issue 29): MEMSHIM_LOG=debug shows it. */
static int fail(const char *path, int e)
{
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
	if (close(fd) < 0 && !e)
		e = errno;
	return e;
}

static struct ms_outpath where MS_LARGE; /* set by the one writer at a time */

/* Not an errno: a symlink the kernel's protected_symlinks rule would not follow for us. */
static int refuse(const char *path)
{
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		ms_warn("cannot write metrics file %s: not following symlink %s (owner uid %u) in a sticky "
			"world-writable directory", path, where.link, (unsigned)where.link_owner);
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
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	ms_json_init(&w, fd);
	write_document(&w, reason, sig, complete);
	int e = finish(&w, fd);
	return e ? fail(path, e) : 0;
}

/* Opens a new temporary TMP in the file's directory; a file it replaces keeps its mode, and the
 * temporary is 0600 until then so its contents are never readable more widely. */
static int open_temporary(const char *tmp)
{
	struct stat old;
	int keep = fstatat(where.dirfd, where.name, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode);
	int fd = (int)syscall(SYS_openat, where.dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			      keep ? 0600 : 0644);
	if (fd >= 0 && keep)
		fchmod(fd, old.st_mode & 0777); /* on failure it stays 0600: narrower, never wider */
	return fd;
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
	write_document(&w, reason, sig, complete);
	int e = finish(&w, fd);
	if (!e && renameat(where.dirfd, tmp, where.dirfd, where.name) < 0)
		e = errno;
	if (e) {
		unlinkat(where.dirfd, tmp, 0);
		return fail(path, e);
	}
	return 0;
}

static int replace_only; /* a default snapshot: never into a device or FIFO, where it would stay */

/* Finds the file through the directories on its path (shim/output/outpath.c), then writes it. */
static int write_to(const char *path, const char *reason, int sig, int complete)
{
	int e = ms_outpath_walk(&where, path);
	int rc = e < 0 ? fail(path, -e)
		 : replace_only && where.how != MS_OUT_REPLACE ? -1
		 : where.how == MS_OUT_REFUSED ? refuse(path)
		 : where.how == MS_OUT_IN_PLACE ? write_in_place(path, reason, sig, complete)
		 : write_replacing(path, reason, sig, complete);
	if (where.dirfd >= 0)
		close(where.dirfd);
	return rc;
}

static int writing, finished_final;

/* One writer at a time: the final file waits for a snapshot in progress; a handler waits ~100 ms. */
static int acquire_writer(int from_handler)
{
	for (long tries = 0; __atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE); tries++) {
		if (from_handler && tries > 1000)
			return -1;
		struct timespec pause = { 0, 100000 };
		nanosleep(&pause, NULL);
	}
	return 0;
}

/* Writes the file; the caller holds the writer.  FROM_HANDLER: never wait for the engine's lock. */
static int write_held(const char *reason, int sig, int complete, int from_handler)
{
	char path[MS_PATH_MAX + 32];
	int saved = errno;
	ms_refresh(MS_REFRESH_REPORT);
	ms_tls_guard++;
	in_handler = from_handler;
	ms_report_path(path, sizeof path);
	int rc = !path[0] ? fail("(empty path)", ENOENT) : write_to(path, reason, sig, complete);
	if (complete)
		__atomic_store_n(&finished_final, 1, __ATOMIC_RELEASE);
	in_handler = 0;
	ms_tls_guard--;
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
	errno = saved;
	return rc;
}

static int write_file(const char *reason, int sig, int complete, int from_handler)
{
	if (acquire_writer(from_handler) < 0)
		return -1;
	return write_held(reason, sig, complete, from_handler);
}

int ms_report_try_snapshot(void)
{
	if (__atomic_load_n(&finished_final, __ATOMIC_ACQUIRE) || __atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE))
		return -1;
	replace_only = 1;
	int rc = write_held("snapshot", 0, 0, 1);
	replace_only = 0;
	return rc;
}

long ms_report_to_buffer(char *buf, size_t size)
{
	static struct ms_json w MS_LARGE;
	if (acquire_writer(0) < 0)
		return -1;
	int saved = errno;
	ms_tls_guard++;
	ms_json_init_memory(&w, buf, size);
	write_document(&w, "live", 0, 0);
	long rc = ms_json_finish(&w) < 0 ? -1 : (long)w.mem_len;
	ms_tls_guard--;
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
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
	if (sig == SIGTERM && ms_stages_explicit_open() == 0) {
		/* asked to stop with no stage open (Jupyter ending a kernel, docker stop of an idle
		 * service): a normal end, whose numbers are final, not a crash inside a stage */
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
		__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
	held_for_fork = 0;
}

void ms_report_fork_child(int tracking)
{
	held_for_fork = 0;
	writing = 0;
	if (!tracking)
		return;
	finished_final = 0;
	warned = 0;
}
