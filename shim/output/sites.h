/* The call-site keys of the metrics file (doc/metrics-format.md, "peak_sites"): written by
 * report.c, the file's one writer, through these functions. */
#ifndef MS_OUTPUT_SITES_H
#define MS_OUTPUT_SITES_H

#include "core/json.h"
#include "core/stages.h"

/* Before the stages: takes each stage's copy (IDS[0..N)) and names their native frames (not
 * from a signal handler, IN_HANDLER: addresses only).  0 when sampling is off: write nothing. */
int ms_report_sites_begin(const struct ms_stages *st, const int *ids, int n, int in_handler);
/* Inside stage ID's object: peak_sites, peak_sites_gpu and their lags against the call's span SP. */
void ms_report_sites_stage(struct ms_json *w, int id, const struct ms_span *sp);
/* The top-level "sites" object. */
void ms_report_sites_summary(struct ms_json *w);
/* Releases what begin mapped. */
void ms_report_sites_end(void);

#endif
