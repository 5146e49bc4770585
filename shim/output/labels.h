/* Labelled calls (memshim_stage_begin_labelled): the numbers of each call a label names, kept for
 * the metrics file's "labelled_calls" (doc/metrics-format.md): a test's node id, a request, a batch. */
#ifndef MS_LABELS_H
#define MS_LABELS_H

#include <stdint.h>
#include "core/stages.h"

#define MS_LABEL_MAX 256     /* bytes kept of a label, its NUL included */
#define MS_LABELLED_MAX 8192 /* calls kept; later ones are only counted */

struct ms_labelled_call {
	uint32_t ready; /* the table's generation once filled (a reader skips others) */
	int stage;
	uint64_t call; /* the stage's call it was, from 1 (its "history" index + 1) */
	struct ms_span span;
	char label[MS_LABEL_MAX];
};

/* The calls kept so far: N entries at the returned address (those whose ready is *GENERATION),
 * and *DROPPED more.  Read without a lock: safe from a signal handler. */
const struct ms_labelled_call *ms_labels_table(uint32_t *n, uint64_t *dropped, uint32_t *generation);

/* Stage ID's call that just began (the begin opened it) is labelled LABEL. */
void ms_labels_open(int id, const char *label);
/* Stage ID's call closed with numbers SP, its CALL-th: kept when it was labelled. */
void ms_labels_close(int id, const struct ms_span *sp, uint64_t call);

/* A forked child that goes on TRACKING keeps only the calls it completes (its calls still open
 * keep their labels). */
void ms_labels_fork_child(int tracking);

#endif
