/* The run's timeline: live memory points and stage events in bounded memory.  When the point
 * buffer fills, neighbouring points of a series merge keeping the larger value, so the true peak
 * is never lost.  The buffer logic is pure; recording takes a short fork-safe lock. */
#ifndef MS_TIMELINE_H
#define MS_TIMELINE_H

#include <stdint.h>
#include "core/counters.h"

#define MS_TL_POINTS 16384
#define MS_TL_EVENTS 8192
#define MS_TL_MIN_STEP (1 << 20)

struct ms_tl_point {
	double t;
	int64_t value;
	int32_t comp; /* enum ms_comp: MS_CPU or MS_DEV0 + device */
};

struct ms_tl_event {
	double t;
	int16_t stage;
	int16_t begin; /* 1 begin, 0 end */
};

struct ms_timeline {
	struct ms_tl_point points[MS_TL_POINTS];
	uint32_t npoints, merges;
	struct ms_tl_event events[MS_TL_EVENTS];
	uint32_t nevents, events_dropped;
};

/* Record a point when live leaves [lo, hi]: read on every allocation, written only when recording. */
extern int64_t ms_tl_hi[MS_NCOMP], ms_tl_lo[MS_NCOMP];

extern struct ms_timeline ms_tl;

/* Appends a point (compacting first when full).  Pure: the caller holds the lock. */
void ms_tl_append(struct ms_timeline *tl, int comp, double t, int64_t value);
/* Halves the buffer: consecutive points of one series merge into the larger one. */
void ms_tl_compact(struct ms_timeline *tl);

/* Slow path from the counters: records COMP at NOW bytes and moves its thresholds. */
void ms_timeline_moved(enum ms_comp comp, int64_t now);
/* A stage boundary: an event plus a point for every component in use. */
void ms_timeline_boundary(int stage, int begin, double t);

/* Turns recording on (at start, unless MEMSHIM_TIMELINE=0) or off. */
void ms_timeline_enable(int on);

/* Copies the timeline for the report; NOWAIT (signal handlers) gives up on a busy lock. */
void ms_timeline_copy(struct ms_timeline *out, int nowait);

/* Lock for fork handlers (order: mapping table, stages, timeline). */
void ms_timeline_lock(void);
void ms_timeline_unlock(void);
void ms_timeline_reset_for_child(void);

/* Seconds since start for recorded points (lifecycle sets it; unit tests may leave it NULL: 0). */
extern double (*ms_tl_clock)(void);

#endif
