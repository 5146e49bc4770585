/* The memory cgroup in the metrics document (doc/metrics-format.md, "cgroup"): pure layout of the
 * state intercept/cgroup.c read, as document.c lays out the rest. */
#include "output/doc_cgroup.h"

static const char *read_how(const struct ms_cgroup *cg)
{
	return cg->version == 2 ? "cgroup v2: memory.current, memory.peak, memory.max, memory.events at "
				  "boundaries, timeline points and exit"
				: "cgroup v1: memory.usage_in_bytes, memory.max_usage_in_bytes, memory.limit_in_bytes, "
				  "memory.oom_control at boundaries, timeline points and exit";
}

void ms_doc_cgroup_stage(struct ms_json *w, const struct ms_cgroup *cg, const struct ms_span *sp)
{
	if (!cg || !sp->peak[MS_CGROUP])
		return;
	ms_json_object(w, "cgroup");
	ms_json_int(w, "begin", sp->begin[MS_CGROUP]);
	ms_json_int(w, "end", sp->end[MS_CGROUP]);
	ms_json_int(w, "peak", sp->peak[MS_CGROUP]);
	/* the kernel's own peak of the call (our fd of memory.peak, reset at each boundary), or the
	 * highest usage read at its boundaries and the timeline's points in between */
	ms_json_string(w, "peak_kind", cg->per_reader ? "kernel" : "reads");
	ms_json_end_object(w);
}

void ms_doc_cgroup_flat(struct ms_json *w, const struct ms_cgroup *cg)
{
	if (!cg)
		return;
	ms_json_int(w, "process_mem_cgroup_peak", cg->peak > cg->usage ? cg->peak : cg->usage);
	if (cg->limit >= 0)
		ms_json_int(w, "process_mem_cgroup_limit", cg->limit);
}

void ms_doc_cgroup_process(struct ms_json *w, const struct ms_cgroup *cg, int64_t peak_read)
{
	if (!cg)
		return;
	ms_json_object(w, "cgroup");
	ms_json_int(w, "version", cg->version);
	ms_json_string(w, "path", cg->dir);
	/* which group on which boot: memshim-format reads the group again only where both still hold */
	if (cg->boot_id[0])
		ms_json_string(w, "boot_id", cg->boot_id);
	if (cg->ino && cg->ino <= INT64_MAX && cg->dev <= INT64_MAX) { /* a reader's whole numbers */
		ms_json_int(w, "dev", (int64_t)cg->dev);
		ms_json_int(w, "ino", (int64_t)cg->ino);
	}
	ms_json_int(w, "usage", cg->usage);
	ms_json_int(w, "peak", cg->peak > cg->usage ? cg->peak : cg->usage);
	ms_json_int(w, "peak_read", peak_read);
	if (cg->limit >= 0)
		ms_json_int(w, "limit", cg->limit);
	if (cg->oom_kills >= 0) {
		ms_json_int(w, "oom_kills", cg->oom_kills);
		ms_json_int(w, "oom_kills_at_start", cg->oom_kills_first >= 0 ? cg->oom_kills_first : 0);
	}
	ms_json_string(w, "peak_kind", cg->per_reader ? "kernel" : "reads");
	ms_json_string(w, "read", read_how(cg));
	ms_json_end_object(w);
}
