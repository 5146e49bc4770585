/* The call-site keys of the metrics file (doc/metrics-format.md, "peak_sites"): the sites live at
 * each stage's peak, written into the document (output/document.c) through these functions. */
#ifndef MS_PEAK_SITES_H
#define MS_PEAK_SITES_H

#include "core/json.h"
#include "core/stages.h"

/* Before the document: takes each stage's copy (IDS[0..N)) and names their native frames (not
 * from a signal handler, IN_HANDLER: addresses only).  0 when sampling is off: write nothing. */
int ms_peak_sites_begin(const int *ids, int n, int in_handler);
/* Inside stage ID's object: peak_sites and peak_sites_gpu (what the call added), their _before
 * lists (what was live from before it) and the lags against the call's span SP. */
void ms_peak_sites_stage(struct ms_json *w, int id, const struct ms_span *sp);
/* The top-level "sites" object. */
void ms_peak_sites_summary(struct ms_json *w);
/* At GPU out-of-memory burst INDEX (cuda/footprint.h's record): the GPU stacks live now, kept for
 * the files written after it. */
void ms_peak_sites_oom_capture(int index);
/* Inside gpu_oom record INDEX: "sites", the GPU stacks live at its first failure, when captured. */
void ms_peak_sites_oom(struct ms_json *w, int index);
/* Releases what begin mapped. */
void ms_peak_sites_end(void);

#endif
