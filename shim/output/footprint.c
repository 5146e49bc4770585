/* The GPU footprint's keys (output/footprint.h): reads nothing but the copy it is given. */
#include "core/ms.h"
#include "output/footprint.h"

#define FP_READ                                                                                                        \
	"total, free: cuMemGetInfo on a thread whose current context is the device's; footprint: NVML usedGpuMemory "  \
	"of this pid; at stage boundaries, GPU timeline points (at most every 100 ms) and exit"

static const char *nvml_text(int state)
{
	static const char *const names[] = { "not loaded", "ok", "absent", "failed" };
	return state >= 0 && state <= MS_NVML_FAILED ? names[state] : "failed";
}

static void flat(struct ms_json *w, const char *stage, int64_t v)
{
	char key[MS_STAGE_NAME_MAX + 32];
	ms_format(key, sizeof key, "%s_mem_gpu_footprint_peak", stage);
	ms_json_int(w, key, v);
}

void ms_doc_footprint_metrics(struct ms_json *w, const struct ms_gpu_footprint *fp, const struct ms_stages *st,
			      const int *ids, int n)
{
	for (int i = 0; i < n; i++)
		if (st->stage[ids[i]].calls > 0 && fp->stage[ids[i]].have_fp)
			flat(w, st->stage[ids[i]].name, fp->stage[ids[i]].peak);
	uint32_t any = 0;
	for (int d = 0; d < MS_MAX_DEVICES; d++)
		any |= fp->dev[d].have_fp;
	if (any)
		ms_json_int(w, "process_mem_gpu_footprint_peak", fp->peak);
}

void ms_doc_footprint_stage(struct ms_json *w, const struct ms_gpu_footprint *fp, int id)
{
	const struct ms_fp_stage *r = &fp->stage[id];
	uint32_t bits = r->have_mem | r->have_fp;
	if (!bits)
		return;
	ms_json_object(w, "gpu_footprint");
	if (r->have_fp)
		ms_json_int(w, "peak", r->peak);
	ms_json_array(w, "devices");
	for (int d = 0; d < MS_MAX_DEVICES; d++) {
		uint32_t bit = 1u << d;
		if (!(bits & bit))
			continue;
		ms_json_object(w, NULL);
		ms_json_int(w, "device", d);
		if (r->have_mem & bit) {
			ms_json_int(w, "total", r->total[d]);
			ms_json_int(w, "free_min", r->free_min[d]);
		}
		if (r->have_fp & bit)
			ms_json_int(w, "footprint", r->footprint_peak[d]);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_end_object(w);
}

static void process_device(struct ms_json *w, const struct ms_fp_device *v, int d)
{
	ms_json_object(w, NULL);
	ms_json_int(w, "device", d);
	if (v->have_mem) {
		ms_json_int(w, "total", v->total);
		ms_json_int(w, "free", v->free);
		ms_json_int(w, "free_min", v->free_min);
	}
	if (v->have_fp) {
		ms_json_int(w, "footprint", v->footprint);
		ms_json_int(w, "footprint_peak", v->footprint_peak);
		ms_json_int(w, "counted_at_peak", v->counted_at_peak);
	}
	ms_json_end_object(w);
}

void ms_doc_footprint_process(struct ms_json *w, const struct ms_gpu_footprint *fp)
{
	ms_json_object(w, "gpu_footprint");
	ms_json_string(w, "read", FP_READ);
	ms_json_string(w, "nvml", nvml_text(fp->nvml));
	uint32_t any = 0;
	for (int d = 0; d < MS_MAX_DEVICES; d++)
		any |= fp->dev[d].have_fp;
	if (any)
		ms_json_int(w, "peak", fp->peak);
	ms_json_array(w, "devices");
	for (int d = 0; d < MS_MAX_DEVICES; d++)
		if (fp->dev[d].have_mem || fp->dev[d].have_fp)
			process_device(w, &fp->dev[d], d);
	ms_json_end_array(w);
	ms_json_end_object(w);
}

static void oom_stage(struct ms_json *w, const char *key, const struct ms_stages *st, int s)
{
	if (s >= 0 && s < MS_MAX_STAGES && st->stage[s].used)
		ms_json_string(w, key, st->stage[s].name);
	else
		ms_json_null(w, key);
}

static void oom_lists(struct ms_json *w, const struct ms_fp_oom *o, const struct ms_stages *st)
{
	ms_json_array(w, "open_stages");
	for (int i = 0; i < o->nopen && i < MS_FP_OPEN; i++) {
		ms_json_object(w, NULL);
		oom_stage(w, "stage", st, o->open[i]);
		ms_json_int(w, "added", o->open_added[i]);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	if (!o->others_known) {
		ms_json_null(w, "others");
		return;
	}
	if (!o->have_fp)
		ms_json_bool(w, "self_listed", 0); /* a pid namespace: NVML lists host pids */
	ms_json_array(w, "others");
	for (int i = 0; i < o->nothers && i < MS_FP_OTHERS; i++) {
		ms_json_object(w, NULL);
		ms_json_int(w, "pid", o->others[i].pid);
		ms_json_int(w, "used", o->others[i].used);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
}

static void oom_one(struct ms_json *w, const struct ms_fp_oom *o, const struct ms_stages *st, int index,
		    void (*sites)(struct ms_json *w, int index))
{
	ms_json_object(w, NULL);
	ms_json_double(w, "time", o->time);
	ms_json_int(w, "device", o->device);
	oom_stage(w, "stage", st, o->stage);
	ms_json_int(w, "asked", o->asked);
	ms_json_int(w, "result", o->result);
	if (o->have_mem) {
		ms_json_int(w, "free", o->free);
		ms_json_int(w, "total", o->total);
	}
	if (o->have_fp)
		ms_json_int(w, "footprint", o->footprint);
	ms_json_int(w, "counted", o->counted);
	ms_json_uint(w, "failures", o->failures);
	ms_json_bool(w, "went_on", o->went_on);
	oom_lists(w, o, st);
	if (sites)
		sites(w, index);
	ms_json_end_object(w);
}

void ms_doc_gpu_oom(struct ms_json *w, const struct ms_gpu_footprint *fp, const struct ms_stages *st,
		    void (*sites)(struct ms_json *w, int index))
{
	if (!fp->noom)
		return;
	ms_json_array(w, "gpu_oom");
	for (uint32_t i = 0; i < fp->noom && i < MS_FP_OOMS; i++)
		oom_one(w, &fp->oom[i], st, (int)i, sites);
	ms_json_end_array(w);
	ms_json_uint(w, "gpu_oom_dropped", fp->oom_dropped);
}
