/* The run's timeline: live memory points and stage events in bounded memory.  When the point
 * buffer fills, neighbouring points of a series merge keeping the larger value, so the true peak
 * is never lost.  The buffer logic is pure; recording takes a short fork-safe lock.  Points are
 * recorded when the counters' watch (counters.h) sees live leave its window, max(1 MiB, 1% of the
 * series' peak) either way, widened while points come faster than the run needs (below), around
 * the band a fast swing's points span (timeline.c). */
#ifndef MS_TIMELINE_H
#define MS_TIMELINE_H

#include <stdint.h>
#include "core/counters.h"

#define MS_TIMELINE_POINTS 16384
#define MS_TIMELINE_EVENTS 8192
#define MS_TIMELINE_MIN_STEP (1 << 20)
/* A series needs no more than one point per 1/MS_TIMELINE_PACE of the run so far: while points
 * come faster, its step doubles (up to 2^MS_TIMELINE_MAX_WIDEN times); while they come four times
 * slower, it halves back. */
#define MS_TIMELINE_PACE 4096
#define MS_TIMELINE_MAX_WIDEN 6
#define MS_TIMELINE_WIDEST 8 /* widening stops once the step reaches 1/8 of the series' peak */

struct ms_timeline_point {
	double t;
	int64_t value;
	int32_t comp; /* enum ms_comp: MS_CPU or MS_DEV0 + device */
};

struct ms_timeline_event {
	double t;
	int16_t stage;
	int16_t begin; /* 1 begin, 0 end */
};

/* Counts first: with the first events they share a page, the first points have one of their own. */
struct ms_timeline {
	uint32_t npoints, merges;
	uint32_t nevents, events_dropped;
	struct ms_timeline_event events[MS_TIMELINE_EVENTS];
	struct ms_timeline_point points[MS_TIMELINE_POINTS];
};

/* Appends a point to TL (compacting first when full).  Pure: the caller serialises access. */
void ms_timeline_append(struct ms_timeline *tl, int comp, double t, int64_t value);
/* Halves TL's buffer: consecutive points of one series merge into the larger one. */
void ms_timeline_compact(struct ms_timeline *tl);

/* Records with ms_elapsed() times when MEMSHIM_TIMELINE is on (lifecycle.c, at start). */
void ms_timeline_init(void);
/* Turns recording on or off (without a clock, points are at time 0: unit tests). */
void ms_timeline_enable(int on);
/* The clock points are stamped with (seconds since start); unit tests pass their own. */
void ms_timeline_set_clock(double (*fn)(void));

/* A stage boundary: an event plus a point for every component in use. */
void ms_timeline_boundary(int stage, int begin, double t);

/* Called after a point was recorded because live memory moved (not at boundaries), outside the
 * timeline's lock, on the thread whose allocation moved it, with the point's time T (ms_elapsed()):
 * the default snapshot policy. */
extern void (*ms_timeline_moved_observer)(double t);

/* Copies the timeline for the report; NOWAIT (signal handlers) gives up on a busy lock. */
void ms_timeline_copy(struct ms_timeline *out, int nowait);

/* Fork: the lock is taken before and released after (order: mapping table, stages, timeline); a
 * child starts an empty timeline, TRACKING or not. */
void ms_timeline_fork_prepare(void);
void ms_timeline_fork_parent(void);
void ms_timeline_fork_child(int tracking);

/* The recorded timeline as it is, unlocked, and a fresh one: for single-threaded unit tests (the
 * report copies it with ms_timeline_copy). */
const struct ms_timeline *ms_timeline_peek(void);
void ms_timeline_clear(void);

#endif
