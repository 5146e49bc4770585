/* The memory cgroup's part of the metrics document (doc_cgroup.c), apart from document.c: a
 * stage's "cgroup", the flat process_mem_cgroup_* keys and the process's "cgroup". */
#ifndef MS_DOC_CGROUP_H
#define MS_DOC_CGROUP_H

#include "core/json.h"
#include "core/stages.h"
#include "intercept/cgroup.h"

/* A stage's "cgroup" (its usage as read at its begin, end and in between); nothing when CG is NULL
 * or the span never read it. */
void ms_doc_cgroup_stage(struct ms_json *w, const struct ms_cgroup *cg, const struct ms_span *sp);

/* process_mem_cgroup_peak and process_mem_cgroup_limit (the latter only with a limit). */
void ms_doc_cgroup_flat(struct ms_json *w, const struct ms_cgroup *cg);

/* The process's "cgroup": the group, its usage, high-water, limit and OOM kills, how it was read;
 * PEAK_READ is the highest usage this process read. */
void ms_doc_cgroup_process(struct ms_json *w, const struct ms_cgroup *cg, int64_t peak_read);

#endif
