/* The metrics file's document (see document.h): every key in the order doc/metrics-format.md
 * gives, from the state in struct ms_doc only.  Async-signal-safe: the streaming writer, no
 * allocation. */
#include <string.h>
#include "core/ms.h"
#include "output/doc_cgroup.h"
#include "output/document.h"
#include "output/footprint.h"

#define RESERVE_READ "resident pages (pagemap scan or mincore)"
#define SHARED_READ "resident pages of shared memory mappings in this process (pagemap)"

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
	ms_json_string(w, "read", RESERVE_READ);
	ms_json_end_object(w);
	write_delta(w, "shared", sp, MS_SHARED);
	ms_json_string(w, "read", SHARED_READ);
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

/* Opens an object for component COMP of CTX (a stage's span, or the process's peaks and live). */
typedef void (*open_comp_fn)(struct ms_json *w, const char *key, const void *ctx, int comp);

/* "gpu": the total's members, then devices[], managed and pinned: one shape for stages and process. */
static void write_gpu_tree(struct ms_json *w, const struct ms_doc *d, open_comp_fn open, const void *ctx,
			   const struct ms_span *failures)
{
	open(w, "gpu", ctx, MS_GPU);
	if (failures) {
		ms_json_uint(w, "failed_allocs", failures->gpu_failed_allocs);
		ms_json_int(w, "failed_bytes", failures->gpu_failed_bytes);
	}
	ms_json_array(w, "devices");
	for (int dev = 0; dev < MS_MAX_DEVICES; dev++) {
		if (!(d->devices & (1u << dev)))
			continue;
		open(w, NULL, ctx, MS_DEV0 + dev);
		ms_json_int(w, "device", dev);
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

/* The type name of exception EXC (1 + its index, as the engine keeps it), or NULL. */
static const char *exception_name(const struct ms_stages *st, uint8_t exc)
{
	return exc > 0 && exc <= st->nexc && exc <= MS_EXC_NAMES ? st->exc_names[exc - 1] : NULL;
}

/* How a finished call ended: "ended", and "exception" when a Python exception of a known type did. */
static void write_ended(struct ms_json *w, const struct ms_stages *st, uint8_t ended, uint8_t exc)
{
	ms_json_string(w, "ended", ms_end_name(ended));
	const char *name = exception_name(st, exc);
	if (name)
		ms_json_string(w, "exception", name);
}

/* Every finished call counted by how it ended, and the exceptions' type names: a call that ended by
 * an exception may have left what its traceback holds behind (read as a leak otherwise). */
static void write_calls_ended(struct ms_json *w, const struct ms_stages *st, const struct ms_stage *s)
{
	ms_json_object(w, "calls_ended");
	for (int k = 0; k < MS_NEND; k++)
		ms_json_uint(w, ms_end_name(k), s->ended[k]);
	ms_json_end_object(w);
	if (!s->exceptions)
		return;
	ms_json_array(w, "exceptions");
	for (int i = 0; i < st->nexc && i < MS_EXC_NAMES; i++)
		if (s->exceptions & (UINT32_C(1) << i))
			ms_json_string(w, NULL, st->exc_names[i]);
	ms_json_end_array(w);
}

static void write_history(struct ms_json *w, const struct ms_stages *st, const struct ms_stage *s, int gpu)
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
		write_ended(w, st, h->ended, h->exception);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_uint(w, "history_dropped", s->dropped);
}

struct functions_ctx {
	struct ms_json *w;
	int opened;
};

static void write_function_one(void *ctx, const char *target, const char *function, uint64_t calls, uint64_t passed,
			       int user)
{
	struct functions_ctx *c = ctx;
	if (!c->opened++)
		ms_json_array(c->w, "matched_functions");
	ms_json_object(c->w, NULL);
	ms_json_string(c->w, "target", target);
	ms_json_string(c->w, "function", function);
	ms_json_uint(c->w, "calls", calls);
	ms_json_bool(c->w, "user", user);
	if (passed)
		ms_json_uint(c->w, "passed_over", passed);
	ms_json_end_object(c->w);
}

/* The Python functions (module:qualname) that opened the stage, each with its calls: which
 * function a bare target matched is otherwise a guess (multiprocessing.spawn:prepare for "prepare"). */
static void write_matched_functions(struct ms_json *w, const struct ms_doc *d, const char *stage)
{
	struct functions_ctx c = { w, 0 };
	if (d->each_function)
		d->each_function(stage, write_function_one, &c);
	if (c.opened)
		ms_json_end_array(w);
}

static void write_stage(struct ms_json *w, const struct ms_doc *d, int id)
{
	const struct ms_stage *s = &d->stages->stage[id];
	int open = d->stages->depth[id] > 0, gpu = d->gpu;
	const struct ms_span *sp = open ? &s->cur : &s->last;
	ms_json_object(w, NULL);
	ms_json_string(w, "name", s->name);
	ms_json_bool(w, "implicit", s->implicit);
	ms_json_uint(w, "calls", s->calls);
	ms_json_bool(w, "open", open);
	ms_json_bool(w, "closed_at_exit", !open && sp->closed_at_exit);
	if (!open && s->calls)
		write_ended(w, d->stages, sp->ended, sp->exception);
	write_calls_ended(w, d->stages, s);
	ms_json_double(w, "start", sp->start);
	ms_json_double(w, "runtime", sp->runtime);
	ms_json_double(w, "runtime_total", s->runtime_total);
	write_cpu(w, sp);
	write_rss(w, sp);
	ms_doc_cgroup_stage(w, d->cgroup, sp);
	if (gpu)
		write_gpu_tree(w, d, open_span, sp, sp);
	if (gpu && d->footprint)
		ms_doc_footprint_stage(w, d->footprint, id);
	ms_json_object(w, "max_needed");
	ms_json_int(w, "cpu", s->max_cpu_needed);
	ms_json_uint(w, "cpu_call", s->max_cpu_call);
	if (gpu) {
		ms_json_int(w, "gpu", s->max_gpu_needed);
		ms_json_uint(w, "gpu_call", s->max_gpu_call);
	}
	ms_json_end_object(w);
	if (!d->brief)
		write_history(w, d->stages, s, gpu);
	write_matched_functions(w, d, s->name);
	if (d->stage_sites)
		d->stage_sites(w, id, sp);
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

int ms_document_order(const struct ms_stages *st, int ids[MS_MAX_STAGES])
{
	int n = 0;
	for (int order = 0; order < st->order_next; order++)
		for (int i = 0; i < st->nstages && n < MS_MAX_STAGES; i++)
			if (st->stage[i].first_order == order)
				ids[n++] = i;
	return n;
}

static void write_metrics(struct ms_json *w, const struct ms_doc *d, const int *ids, int n)
{
	const struct ms_stages *st = d->stages;
	const int64_t *peaks = d->peaks;
	ms_json_object(w, "metrics");
	for (int i = 0; i < n; i++)
		if (st->stage[ids[i]].calls > 0)
			write_flat_stage(w, &st->stage[ids[i]], d->gpu);
	int64_t before_init = st->before_init_set ? st->before_init[MS_CPU] - d->inherited[MS_CPU] : 0;
	ms_json_int(w, "before_init_mem_cpu", before_init > 0 ? before_init : 0);
	if (d->proc->forked)
		ms_json_int(w, "inherited_mem_cpu", d->inherited[MS_CPU]);
	ms_json_int(w, "process_mem_cpu_peak", peaks[MS_CPU]);
	ms_json_int(w, "process_mem_cpu_malloc_peak", peaks[MS_MALLOC]);
	ms_json_int(w, "process_mem_cpu_mmap_peak", peaks[MS_MMAP]);
	ms_json_int(w, "process_mem_cpu_reservations_peak", peaks[MS_RESERVE]);
	if (d->shared_mappings)
		ms_json_int(w, "process_mem_cpu_shared_peak", peaks[MS_SHARED]);
	ms_json_int(w, "process_mem_rss_peak", d->rss_peak);
	ms_doc_cgroup_flat(w, d->cgroup);
	if (d->gpu) {
		ms_json_int(w, "before_init_mem_gpu", st->before_init_set ? st->before_init[MS_GPU] : 0);
		ms_json_int(w, "process_mem_gpu_peak", peaks[MS_GPU]);
		ms_json_int(w, "process_mem_gpu_managed_peak", peaks[MS_MANAGED]);
		ms_json_int(w, "process_mem_gpu_pinned_peak", peaks[MS_PINNED]);
	}
	if (d->gpu && d->footprint)
		ms_doc_footprint_metrics(w, d->footprint, st, ids, n);
	ms_json_end_object(w);
}

static void peak_live(struct ms_json *w, const char *key, const struct ms_doc *d, int c)
{
	ms_json_object(w, key);
	ms_json_int(w, "peak", d->peaks[c]);
	ms_json_int(w, "live", d->live[c]);
}

static void open_peak(struct ms_json *w, const char *key, const void *ctx, int comp)
{
	peak_live(w, key, ctx, comp);
}

/* The CPU components of a forked child, whose numbers are above what it shares with its parent. */
static const enum ms_comp cpu_parts[] = { MS_CPU, MS_MALLOC, MS_MMAP, MS_RESERVE, MS_SHARED };

/* A forked child's CPU peaks and live are above these (its parent's memory at the fork). */
static void write_inherited(struct ms_json *w, const struct ms_doc *d)
{
	static const char *const names[] = { "cpu", "malloc", "mmap", "reservations", "shared" };
	ms_json_object(w, "inherited");
	for (size_t i = 0; i < sizeof cpu_parts / sizeof *cpu_parts; i++)
		ms_json_int(w, names[i], d->inherited[cpu_parts[i]]);
	ms_json_end_object(w);
}

/* "00:1b", as /proc/PID/maps writes a device. */
static void write_dev(struct ms_json *w, uint32_t major, uint32_t minor)
{
	char buf[24];
	size_t n = 0;
	uint32_t part[2] = { major, minor };
	for (int k = 0; k < 2; k++) {
		char digits[8];
		int m = 0;
		for (uint32_t v = part[k]; v || m < 2; v /= 16)
			digits[m++] = "0123456789abcdef"[v % 16];
		while (m)
			buf[n++] = digits[--m];
		if (k == 0)
			buf[n++] = ':';
	}
	ms_json_string_n(w, "dev", buf, n);
}

/* The shared component and the segments behind it, each named by its object (dev, ino), as every
 * process that maps it names it. */
static void write_shared(struct ms_json *w, const struct ms_doc *d)
{
	static const char *const kinds[] = { "none", "anonymous", "memfd", "shm", "tmpfs", "hugetlbfs", "sysv" };
	peak_live(w, "shared", d, MS_SHARED);
	ms_json_string(w, "read", SHARED_READ);
	ms_json_array(w, "segments");
	for (int i = 0; i < d->nsegments; i++) {
		const struct ms_shared_segment *g = &d->segments[i];
		ms_json_object(w, NULL);
		ms_json_string(w, "kind",
			       g->kind > 0 && g->kind < (int)(sizeof kinds / sizeof *kinds) ? kinds[g->kind] : "none");
		write_dev(w, g->major, g->minor);
		ms_json_uint(w, "ino", g->ino);
		if (g->name[0])
			ms_json_string(w, "name", g->name);
		else
			ms_json_null(w, "name");
		ms_json_int(w, "mapped", g->mapped);
		ms_json_int(w, "mapped_peak", g->mapped_peak);
		ms_json_int(w, "resident", g->resident);
		ms_json_int(w, "peak", g->peak);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_uint(w, "segments_dropped", d->segments_dropped);
	ms_json_end_object(w);
}

static void write_process(struct ms_json *w, const struct ms_doc *d)
{
	ms_json_object(w, "process");
	static const char *const cpu_names[] = { "cpu", "malloc", "mmap" };
	for (int c = MS_CPU; c <= MS_MMAP; c++) {
		peak_live(w, cpu_names[c], d, c);
		ms_json_end_object(w);
	}
	peak_live(w, "reservations", d, MS_RESERVE);
	ms_json_string(w, "read", RESERVE_READ);
	ms_json_end_object(w);
	write_shared(w, d);
	ms_json_object(w, "rss");
	ms_json_int(w, "peak", d->rss_peak);
	ms_json_int(w, "live", d->live[MS_RSS]);
	ms_json_string(
		w, "read",
		"peak: getrusage ru_maxrss, or /proc/self/status VmHWM below what exec carried over; live: /proc/self/statm");
	ms_json_end_object(w);
	ms_doc_cgroup_process(w, d->cgroup, d->peaks[MS_CGROUP]);
	if (d->proc->forked)
		write_inherited(w, d);
	if (d->gpu)
		write_gpu_tree(w, d, open_peak, d, NULL);
	if (d->gpu && d->footprint)
		ms_doc_footprint_process(w, d->footprint);
	ms_json_uint(w, "mmap_untracked", d->mmap_untracked);
	ms_json_end_object(w);
}

static void write_gpu_events(struct ms_json *w, const struct ms_stages *st)
{
	ms_json_array(w, "gpu_events");
	for (uint32_t i = 0; i < st->ngpu_events; i++) {
		const struct ms_gpu_event *e = &st->gpu_events[i];
		ms_json_object(w, NULL);
		ms_json_string(w, "event", "alloc_failed");
		ms_json_double(w, "time", e->time);
		ms_json_int(w, "bytes", e->bytes);
		ms_json_int(w, "device", e->device);
		ms_json_int(w, "result", e->result);
		if (e->stage >= 0)
			ms_json_string(w, "stage", st->stage[e->stage].name);
		else
			ms_json_null(w, "stage");
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_uint(w, "gpu_events_dropped", st->gpu_events_dropped);
}

static void write_pool(struct ms_json *w, const struct ms_stages *st, const struct ms_pool_sample *s, int index)
{
	ms_json_object(w, NULL);
	ms_json_int(w, "pool", index);
	ms_json_int(w, "device", s->device);
	ms_json_int(w, "reserved", s->reserved);
	ms_json_int(w, "reserved_high", s->high);
	ms_json_array(w, "stages");
	for (int i = 0; i < MS_MAX_STAGES; i++) {
		if (!s->have_end[i] || !st->stage[i].used)
			continue;
		ms_json_object(w, NULL);
		ms_json_string(w, "stage", st->stage[i].name);
		ms_json_int(w, "reserved_begin", s->begin[i]);
		ms_json_int(w, "reserved_end", s->end[i]);
		ms_json_int(w, "reserved_high", s->end_high[i]);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_end_object(w);
}

/* The memory pools sampled at stage boundaries, and allocations the CUDA table could not hold. */
static void write_gpu_pools(struct ms_json *w, const struct ms_doc *d)
{
	if (d->npools > 0) {
		ms_json_array(w, "gpu_pools");
		for (int i = 0; i < d->npools; i++)
			write_pool(w, d->stages, &d->pools[i], i);
		ms_json_end_array(w);
	}
	if (d->gpu_untracked_allocs) {
		ms_json_uint(w, "gpu_untracked_allocs", d->gpu_untracked_allocs);
		ms_json_int(w, "gpu_untracked_bytes", d->gpu_untracked_bytes);
	}
}

static void write_series(struct ms_json *w, const struct ms_timeline *tl, int comp)
{
	ms_json_object(w, NULL);
	ms_json_string(w, "component", comp == MS_CPU ? "cpu" : "gpu");
	if (comp >= MS_DEV0)
		ms_json_int(w, "device", comp - MS_DEV0);
	ms_json_array(w, "points");
	for (uint32_t i = 0; i < tl->npoints; i++) {
		const struct ms_timeline_point *p = &tl->points[i];
		if (p->comp != comp)
			continue;
		ms_json_pair(w, p->t, p->value);
	}
	ms_json_end_array(w);
	ms_json_end_object(w);
}

static void write_timeline(struct ms_json *w, const struct ms_timeline *tl, const struct ms_stages *st)
{
	uint64_t present = 0;
	for (uint32_t i = 0; i < tl->npoints; i++)
		present |= 1ULL << tl->points[i].comp;
	ms_json_object(w, "timeline");
	ms_json_uint(w, "merges", tl->merges);
	ms_json_uint(w, "points_dropped", 0);
	ms_json_array(w, "series");
	for (int c = 0; c < MS_NCOMP; c++)
		if (present & (1ULL << c))
			write_series(w, tl, c);
	ms_json_end_array(w);
	ms_json_array(w, "events");
	for (uint32_t i = 0; i < tl->nevents; i++) {
		const struct ms_timeline_event *e = &tl->events[i];
		ms_json_object(w, NULL);
		ms_json_double(w, "t", e->t);
		ms_json_string(w, "stage", e->stage >= 0 && e->stage < st->nstages ? st->stage[e->stage].name : "?");
		ms_json_string(w, "kind", e->begin ? "begin" : "end");
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_uint(w, "events_dropped", tl->events_dropped);
	ms_json_end_object(w);
}

static void write_rank(struct ms_json *w, const struct ms_rank *r)
{
	if (r->rank < 0)
		return;
	ms_json_object(w, "rank");
	ms_json_int(w, "rank", r->rank);
	if (r->local_rank >= 0)
		ms_json_int(w, "local_rank", r->local_rank);
	if (r->world_size >= 0)
		ms_json_int(w, "world_size", r->world_size);
	if (r->node_rank >= 0)
		ms_json_int(w, "node_rank", r->node_rank);
	if (r->restart >= 0)
		ms_json_int(w, "restart", r->restart);
	ms_json_string(w, "source", r->source);
	ms_json_end_object(w);
}

static void write_identity(struct ms_json *w, const struct ms_doc *d)
{
	const struct ms_process *p = d->proc;
	ms_json_string(w, "format", "memshim-metrics");
	ms_json_int(w, "version", 1);
	ms_json_bool(w, "complete", d->complete);
	ms_json_string(w, "reason", d->reason);
	if (d->sig)
		ms_json_int(w, "signal", d->sig);
	ms_json_int(w, "pid", p->pid);
	ms_json_int(w, "ppid", p->ppid);
	ms_json_int(w, "root_pid", p->root_pid);
	ms_json_bool(w, "is_child", p->is_child);
	ms_json_bool(w, "forked", p->forked);
	ms_json_array(w, "argv");
	for (size_t i = 0; i < d->argv_len;) {
		const char *nul = memchr(d->argv + i, '\0', d->argv_len - i);
		size_t n = nul ? (size_t)(nul - (d->argv + i)) : d->argv_len - i;
		ms_json_string_n(w, NULL, d->argv + i, n);
		i += n + 1;
	}
	ms_json_end_array(w);
	ms_json_bool(w, "argv_truncated", d->argv_truncated);
	if (d->comm)
		ms_json_string(w, "comm", d->comm);
	ms_json_double(w, "start_time", p->start_unix);
	ms_json_double(w, "end_time", d->end_unix);
	ms_json_double(w, "elapsed", d->end_unix - p->start_unix);
	write_rank(w, &p->rank);
}

static void write_native_one(void *ctx, const char *target, const char *stage, const char *bound, const char *object)
{
	struct ms_json *w = ctx;
	ms_json_object(w, NULL);
	ms_json_string(w, "target", target);
	ms_json_string(w, "stage", stage);
	ms_json_string(w, "bound", bound);
	if (object)
		ms_json_string(w, "object", object);
	ms_json_end_object(w);
}

/* Native targets and the mechanism each was bound by (doc/native.md says what each can see). */
static void write_native_targets(struct ms_json *w, const struct ms_doc *d)
{
	ms_json_array(w, "native_targets");
	if (d->each_native)
		d->each_native(write_native_one, w);
	ms_json_end_array(w);
}

static void write_unmatched_one(void *ctx, const char *stage, const char *target, const char *near)
{
	struct ms_json *w = ctx;
	ms_json_object(w, NULL);
	ms_json_string(w, "stage", stage);
	ms_json_string(w, "target", target);
	ms_json_string(w, "kind", "python");
	if (near)
		ms_json_string(w, "did_you_mean", near);
	ms_json_end_object(w);
}

/* MEMSHIM_STAGES targets that matched nothing that ran (a typo otherwise leaves no trace). */
static void write_unmatched(struct ms_json *w, const struct ms_doc *d)
{
	ms_json_array(w, "unmatched_targets");
	if (d->each_unmatched)
		d->each_unmatched(write_unmatched_one, w);
	ms_json_end_array(w);
	if (d->python_hook_lost) /* stages that began while another tool held it were not seen */
		ms_json_uint(w, "python_hook_lost", d->python_hook_lost);
	if (d->python_detection_stopped) /* the unmatched targets may have run after */
		ms_json_bool(w, "python_detection_stopped", 1);
}

/* "alloc_delta" and "peaked_delta" of component C of SP under KEY (the object left open). */
static void write_needed(struct ms_json *w, const char *key, const struct ms_span *sp, int c)
{
	int64_t peaked = sp->peak[c] - sp->end[c];
	ms_json_object(w, key);
	ms_json_int(w, "alloc_delta", sp->end[c] - sp->begin[c]);
	ms_json_int(w, "peaked_delta", peaked > 0 ? peaked : 0);
}

static void write_labelled_call(struct ms_json *w, const struct ms_doc *d, const struct ms_labelled_call *c)
{
	const struct ms_span *sp = &c->span;
	static const char *const cpu_names[] = { "cpu", "malloc", "mmap" };
	ms_json_object(w, NULL);
	ms_json_string(w, "stage", c->stage < d->stages->nstages ? d->stages->stage[c->stage].name : "?");
	ms_json_string(w, "label", c->label);
	ms_json_uint(w, "call", c->call);
	ms_json_double(w, "start", sp->start);
	ms_json_double(w, "runtime", sp->runtime);
	for (int comp = MS_CPU; comp <= MS_MMAP; comp++) {
		write_needed(w, cpu_names[comp], sp, comp);
		ms_json_end_object(w);
	}
	if (d->gpu) {
		write_needed(w, "gpu", sp, MS_GPU);
		ms_json_uint(w, "failed_allocs", sp->gpu_failed_allocs);
		ms_json_array(w, "devices");
		for (int dev = 0; dev < MS_MAX_DEVICES; dev++) {
			if (!(d->devices & (1u << dev)))
				continue;
			write_needed(w, NULL, sp, MS_DEV0 + dev);
			ms_json_int(w, "device", dev);
			ms_json_end_object(w);
		}
		ms_json_end_array(w);
		ms_json_end_object(w);
	}
	ms_json_end_object(w);
}

/* The calls memshim_stage_begin_labelled named, in the order they ended; only when there are some. */
static void write_labelled(struct ms_json *w, const struct ms_doc *d)
{
	if (!d->labelled || (!d->nlabelled && !d->labelled_dropped))
		return;
	ms_json_array(w, "labelled_calls");
	for (uint32_t i = 0; i < d->nlabelled; i++)
		if (__atomic_load_n(&d->labelled[i].ready, __ATOMIC_ACQUIRE) == d->labelled_generation)
			write_labelled_call(w, d, &d->labelled[i]);
	ms_json_end_array(w);
	ms_json_uint(w, "labelled_calls_dropped", d->labelled_dropped);
}

void ms_document_write(struct ms_json *w, const struct ms_doc *d)
{
	int ids[MS_MAX_STAGES];
	int n = ms_document_order(d->stages, ids);
	ms_json_object(w, NULL);
	write_identity(w, d);
	ms_json_bool(w, "gpu_used", d->gpu);
	write_metrics(w, d, ids, n);
	ms_json_array(w, "stages");
	for (int i = 0; i < n; i++)
		write_stage(w, d, ids[i]);
	ms_json_end_array(w);
	if (d->sites_summary)
		d->sites_summary(w);
	write_unmatched(w, d);
	write_native_targets(w, d);
	write_labelled(w, d);
	if (d->gpu) {
		write_gpu_events(w, d->stages);
		write_gpu_pools(w, d);
	}
	if (d->gpu && d->footprint)
		ms_doc_gpu_oom(w, d->footprint, d->stages, d->oom_sites);
	write_process(w, d);
	if (d->timeline)
		write_timeline(w, d->timeline, d->stages);
	ms_json_end_object(w);
}
