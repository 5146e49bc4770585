/* The GPU footprint's keys of the metrics file (doc/metrics-format.md, "GPU footprint" and
 * "gpu_oom"): pure JSON layout of the copy output/report.c took (cuda/footprint.h), written into
 * the document by output/document.c at four places. */
#ifndef MS_OUTPUT_FOOTPRINT_H
#define MS_OUTPUT_FOOTPRINT_H

#include "core/json.h"
#include "core/stages.h"
#include "cuda/footprint.h"

/* In "metrics": {S}_mem_gpu_footprint_peak of the stages IDS[0..N) that completed a call, and
 * process_mem_gpu_footprint_peak, where NVML gave a footprint. */
void ms_doc_footprint_metrics(struct ms_json *w, const struct ms_gpu_footprint *fp, const struct ms_stages *st,
			      const int *ids, int n);
/* Inside stage ID's object: "gpu_footprint", when its call read a device. */
void ms_doc_footprint_stage(struct ms_json *w, const struct ms_gpu_footprint *fp, int id);
/* Inside "process": "gpu_footprint" (how it was read, NVML's state, every device read). */
void ms_doc_footprint_process(struct ms_json *w, const struct ms_gpu_footprint *fp);
/* Top level: "gpu_oom", one record per out-of-memory burst (SITES, when given, writes record i's
 * GPU sites), and "gpu_oom_dropped". */
void ms_doc_gpu_oom(struct ms_json *w, const struct ms_gpu_footprint *fp, const struct ms_stages *st,
		    void (*sites)(struct ms_json *w, int index));

#endif
