/* Writes the call sites live at each stage's peak, what the call added and what it found live (see
 * output/peak_sites.h).  The copies are taken
 * once per file, before any stage is written, so the symbols of all of them are read in one
 * pass. */
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "cuda/footprint.h"
#include "output/peak_sites.h"
#include "sites/sites.h"

static struct ms_sites_copy copies[MS_MAX_STAGES] MS_LARGE;
static int have[MS_MAX_STAGES];
static int active;
static struct ms_sites_list oom_sites[MS_FP_OOMS] MS_LARGE; /* the GPU stacks live at each burst */
static int oom_have[MS_FP_OOMS];
static pid_t oom_pid; /* the process that captured them (a forked child's tables are its own) */

static int oom_kept(int index)
{
	return index >= 0 && index < MS_FP_OOMS && __atomic_load_n(&oom_have[index], __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&oom_pid, __ATOMIC_RELAXED) == (pid_t)syscall(SYS_getpid);
}

static int list_stacks(const struct ms_sites_list *l, int32_t *out)
{
	for (int k = 0; k < l->n; k++)
		out[k] = l->e[k].stack;
	return l->n;
}

int ms_peak_sites_begin(const int *ids, int n, int in_handler)
{
	active = ms_sites_enabled();
	memset(have, 0, sizeof have);
	if (!active || !ms_sites_on()) /* no sample yet: empty lists, nothing to copy or name */
		return active;
	static int32_t stacks[(MS_MAX_STAGES * 4 + MS_FP_OOMS) * MS_SITES_TOP] MS_LARGE;
	int ns = 0;
	for (int i = 0; i < n; i++) {
		int id = ids[i];
		if (id < 0 || id >= MS_MAX_STAGES)
			continue;
		have[id] = ms_sites_stage_copy(id, &copies[id], in_handler);
		if (!have[id])
			continue;
		for (int side = 0; side < 2; side++) {
			ns += list_stacks(&copies[id].added[side], stacks + ns);
			ns += list_stacks(&copies[id].before[side], stacks + ns);
		}
	}
	for (int i = 0; i < MS_FP_OOMS; i++)
		if (oom_kept(i))
			ns += list_stacks(&oom_sites[i], stacks + ns);
	if (!in_handler)
		ms_sites_symbolise(stacks, ns);
	return 1;
}

static void write_counts(struct ms_json *w, const struct ms_sites_entry *e)
{
	ms_json_int(w, "bytes", e->bytes);
	ms_json_int(w, "samples", e->samples);
	ms_json_int(w, "exact_bytes", e->exact);
}

/* The closing entry: every stack past the list's, so that the list sums to all sampled bytes. */
static void write_rest(struct ms_json *w, const struct ms_sites_entry *rest)
{
	char text[64];
	ms_format(text, sizeof text, "(%d other stacks)", rest->stack);
	ms_json_object(w, NULL);
	write_counts(w, rest);
	ms_json_array(w, "frames");
	ms_json_string(w, NULL, text);
	ms_json_end_array(w);
	ms_json_array(w, "locations");
	ms_json_null(w, NULL);
	ms_json_end_array(w);
	ms_json_int(w, "other_stacks", rest->stack);
	ms_json_end_object(w);
}

/* "locations", parallel to the frames: [object, offset in its file] or null (doc/metrics-format.md). */
static void write_locations(struct ms_json *w, const struct ms_sites_place *where, int nf)
{
	ms_json_array(w, "locations");
	for (int f = 0; f < nf; f++)
		if (where[f].obj < 0)
			ms_json_null(w, NULL);
		else
			ms_json_int_pair(w, where[f].obj, where[f].offset);
	ms_json_end_array(w);
}

static void write_list(struct ms_json *w, const char *key, const struct ms_sites_list *l)
{
	uint64_t frames[MS_SITES_MAX_FRAMES];
	struct ms_sites_place where[MS_SITES_MAX_FRAMES];
	char text[640];
	ms_json_array(w, key);
	for (int i = 0; l && i < l->n; i++) {
		ms_json_object(w, NULL);
		write_counts(w, &l->e[i]);
		ms_json_array(w, "frames");
		int nf = ms_sites_stack_frames(l->e[i].stack, frames, MS_SITES_MAX_FRAMES);
		for (int f = 0; f < nf; f++) {
			size_t len;
			const char *s = ms_sites_frame_describe(frames[f], text, sizeof text, &len, &where[f]);
			ms_json_string_n(w, NULL, s, len);
		}
		ms_json_end_array(w);
		write_locations(w, where, nf);
		ms_json_end_object(w);
	}
	if (l && l->rest.stack > 0)
		write_rest(w, &l->rest);
	ms_json_end_array(w);
}

void ms_peak_sites_stage(struct ms_json *w, int id, const struct ms_span *sp)
{
	if (!active || id < 0 || id >= MS_MAX_STAGES)
		return;
	const struct ms_sites_copy *c = &copies[id];
	int ok = have[id];
	write_list(w, "peak_sites", ok ? &c->added[0] : NULL);
	write_list(w, "peak_sites_before", ok ? &c->before[0] : NULL);
	write_list(w, "peak_sites_gpu", ok ? &c->added[1] : NULL);
	write_list(w, "peak_sites_gpu_before", ok ? &c->before[1] : NULL);
	int64_t lag = ok ? sp->peak[MS_CPU] - c->cpu_at : 0, gpu_lag = ok ? sp->peak[MS_GPU] - c->gpu_at : 0;
	ms_json_int(w, "peak_sites_lag", lag > 0 ? lag : 0);
	ms_json_int(w, "peak_sites_gpu_lag", gpu_lag > 0 ? gpu_lag : 0);
}

void ms_peak_sites_oom_capture(int index)
{
	if (index < 0 || index >= MS_FP_OOMS || oom_kept(index) || !ms_sites_gpu_live(&oom_sites[index]))
		return;
	__atomic_store_n(&oom_pid, (pid_t)syscall(SYS_getpid), __ATOMIC_RELAXED);
	__atomic_store_n(&oom_have[index], 1, __ATOMIC_RELEASE);
}

void ms_peak_sites_oom(struct ms_json *w, int index)
{
	if (active && oom_kept(index))
		write_list(w, "sites", &oom_sites[index]);
}

/* The objects the locations name, by path and build-id, for the formatter's line tables. */
static void write_objects(struct ms_json *w)
{
	char build_id[160];
	ms_json_array(w, "objects");
	for (int k = 0; k < ms_sites_object_count(); k++) {
		const char *path = ms_sites_object(k, build_id, sizeof build_id);
		ms_json_object(w, NULL);
		ms_json_string(w, "path", path);
		if (build_id[0])
			ms_json_string(w, "build_id", build_id);
		else
			ms_json_null(w, "build_id");
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
}

void ms_peak_sites_summary(struct ms_json *w)
{
	if (!active)
		return;
	struct ms_sites_stats s;
	ms_sites_stats(&s);
	ms_json_object(w, "sites");
	ms_json_string(w, "mode", s.exact ? "exact" : "sampled");
	if (s.exact_stages) { /* MEMSHIM_SITES=exact:STAGE,...: every allocation recorded inside them */
		ms_json_array(w, "exact_stages");
		for (int k = 0; k < s.exact_stages && k < ms_cfg.nsites_exact; k++)
			ms_json_string(w, NULL, ms_cfg.sites_exact[k]);
		ms_json_end_array(w);
	}
	ms_json_int(w, "rate", s.rate);
	ms_json_uint(w, "samples", s.samples);
	ms_json_uint(w, "gpu_allocations", s.gpu_allocations);
	ms_json_uint(w, "stacks", s.stacks);
	ms_json_uint(w, "stacks_dropped", s.stacks_dropped);
	ms_json_uint(w, "samples_dropped", s.samples_dropped);
	ms_json_uint(w, "unkept", s.unkept);
	ms_json_bool(w, "python_frames", s.python_frames);
	ms_json_int(w, "max_frames", MS_SITES_MAX_FRAMES);
	ms_json_double(w, "lag_fraction", MS_SITES_LAG);
	write_objects(w);
	ms_json_end_object(w);
}

void ms_peak_sites_end(void)
{
	if (active && ms_sites_on())
		ms_sites_symbolise_done();
}
