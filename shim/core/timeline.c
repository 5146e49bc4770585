/* Timeline recording (see timeline.h). */
#include <string.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/spin.h"
#include "core/timeline.h"

static struct ms_timeline timeline MS_PAGE_ALIGNED MS_LARGE;
static double (*clock_fn)(void); /* seconds since start; NULL (unit tests): 0 */
static struct ms_spin lock;
static int enabled;
static __thread int lock_held MS_TLS;
static int64_t series_peak[MS_NCOMP];
static int widen[MS_NCOMP];         /* the series' step is doubled this many times */
static double last_moved[MS_NCOMP]; /* time of its last point for a move */
/* The band of values a series' points took while they came too fast: its window spans the band
 * plus the step, so live swinging inside it costs no points. */
static int64_t band_lo[MS_NCOMP], band_hi[MS_NCOMP];
void (*ms_timeline_moved_observer)(double t);

static void timeline_lock(void)
{
	ms_spin_lock(&lock, &lock_held);
}

static void timeline_unlock(void)
{
	ms_spin_unlock(&lock, &lock_held);
}

/* fork_prepare took the lock, and the flag before (ms_spin_lock_for_fork) */
static __thread int took_for_fork MS_TLS, flag_before_fork MS_TLS;

void ms_timeline_fork_prepare(void)
{
	took_for_fork = ms_spin_lock_for_fork(&lock, &lock_held, &flag_before_fork);
}

void ms_timeline_fork_parent(void)
{
	ms_spin_unlock_after_fork(&lock, &lock_held, took_for_fork, flag_before_fork);
}

/* A signal handler on a thread that holds the lock must not spin on it: it skips the point. */
static int lock_unless_mine(void)
{
	if (lock_held)
		return -1;
	timeline_lock();
	return 0;
}

static void copy_used(struct ms_timeline *out)
{
	out->npoints = timeline.npoints;
	out->merges = timeline.merges;
	out->nevents = timeline.nevents;
	out->events_dropped = timeline.events_dropped;
	memcpy(out->points, timeline.points, timeline.npoints * sizeof *out->points);
	memcpy(out->events, timeline.events, timeline.nevents * sizeof *out->events);
}

void ms_timeline_copy(struct ms_timeline *out, int nowait)
{
	int locked = 0;
	if (!lock_held) {
		if (nowait)
			locked = ms_spin_trylock(&lock, &lock_held, 50000000) == 0;
		else
			timeline_lock(), locked = 1;
	}
	copy_used(out);
	if (locked)
		timeline_unlock();
}

void ms_timeline_compact(struct ms_timeline *tl)
{
	int32_t pending[MS_NCOMP];
	uint32_t out = 0;
	for (int c = 0; c < MS_NCOMP; c++)
		pending[c] = -1;
	for (uint32_t i = 0; i < tl->npoints; i++) {
		struct ms_timeline_point p = tl->points[i];
		int c = p.comp;
		if (pending[c] < 0) {
			pending[c] = (int32_t)out;
			tl->points[out++] = p;
			continue;
		}
		struct ms_timeline_point *kept = &tl->points[pending[c]];
		if (p.value > kept->value) {
			kept->value = p.value;
			kept->t = p.t;
		}
		pending[c] = -1;
	}
	tl->npoints = out;
	tl->merges++;
}

void ms_timeline_append(struct ms_timeline *tl, int comp, double t, int64_t value)
{
	if (tl->npoints == MS_TIMELINE_POINTS)
		ms_timeline_compact(tl);
	if (tl->npoints == MS_TIMELINE_POINTS)
		return; /* cannot happen: a compaction at least halves */
	struct ms_timeline_point *p = &tl->points[tl->npoints++];
	p->t = t;
	p->value = value;
	p->comp = comp;
}

static double now(void)
{
	return clock_fn ? clock_fn() : 0.0;
}

/* The window's half-width: max(1 MiB, 1% of the series' peak), widened (doubling stops once it
 * reaches 1/MS_TIMELINE_WIDEST of the peak, so points keep coming). */
static int64_t step_of(int comp, int64_t value)
{
	if (value > series_peak[comp])
		series_peak[comp] = value;
	int64_t step = series_peak[comp] / 100;
	if (step < MS_TIMELINE_MIN_STEP)
		step = MS_TIMELINE_MIN_STEP;
	int64_t widest = series_peak[comp] / MS_TIMELINE_WIDEST;
	for (int k = 0; k < widen[comp] && step < widest; k++)
		step *= 2;
	return step;
}

/* A point of VALUE joins the band.  One that did not come too SOON narrows it: a jump more than a
 * STEP past the band starts a new band there, a smaller one halves the band's reach on either side
 * of it.  So a band stays wide over a steady swing and narrows over quiet points. */
static void band_take(int comp, int64_t value, int soon, int64_t step)
{
	int64_t *lo = &band_lo[comp], *hi = &band_hi[comp];
	if (!soon) {
		int64_t out = value < *lo ? *lo - value : value - *hi;
		if (out > *hi - *lo + step) {
			*lo = *hi = value;
			return;
		}
		*lo = value - (value - *lo) / 2;
		*hi = value + (*hi - value) / 2;
	}
	if (value < *lo)
		*lo = value;
	if (value > *hi)
		*hi = value;
}

/* A point of VALUE (SOON: see band_take): the next comes when live leaves the band by more than
 * the step. */
static void move_window(int comp, int64_t value, int soon)
{
	int64_t step = step_of(comp, value);
	band_take(comp, value, soon, step);
	ms_watch_set((enum ms_comp)comp, band_lo[comp] - step, band_hi[comp] + step);
}

/* A point at T came sooner than 1/MS_TIMELINE_PACE of the run so far after the last move's. */
static int too_soon(int comp, double t)
{
	return t - last_moved[comp] < t / MS_TIMELINE_PACE;
}

/* A move's point at T: widens the series' step while such points come too soon (each costs the
 * allocating threads a trip through the lock and the gates), narrows it while they come four
 * times slower than that.  Returns whether this one came too soon. */
static int pace(int comp, double t)
{
	int soon = too_soon(comp, t);
	double gap = t - last_moved[comp], need = t / MS_TIMELINE_PACE;
	last_moved[comp] = t;
	if (soon && widen[comp] < MS_TIMELINE_MAX_WIDEN)
		widen[comp]++;
	else if (gap > 4 * need && widen[comp] > 0)
		widen[comp]--;
	return soon;
}

/* The counters' watch: COMP's live left its window. */
static void moved(enum ms_comp comp, int64_t value)
{
	if (comp == MS_CPU && ms_refresh_fn) { /* the reservations are read with every point */
		ms_refresh(MS_REFRESH_POINT);
		value = ms_live(MS_CPU);
	}
	if (lock_unless_mine() < 0)
		return;
	double t = now();
	if (enabled) {
		ms_timeline_append(&timeline, comp, t, value);
		move_window(comp, value, pace(comp, t));
	}
	timeline_unlock();
	void (*observer)(double) = __atomic_load_n(&ms_timeline_moved_observer, __ATOMIC_RELAXED);
	if (enabled && observer)
		observer(t);
}

static int series_used(int comp)
{
	if (comp == MS_CPU)
		return 1;
	return comp >= MS_DEV0 && (ms_gpu_devices_used() & (1u << (comp - MS_DEV0)));
}

void ms_timeline_boundary(int stage, int begin, double t)
{
	if (lock_unless_mine() < 0)
		return;
	if (enabled) {
		if (timeline.nevents < MS_TIMELINE_EVENTS) {
			struct ms_timeline_event *e = &timeline.events[timeline.nevents++];
			e->t = t;
			e->stage = (int16_t)stage;
			e->begin = (int16_t)begin;
		} else {
			timeline.events_dropped++;
		}
		for (int c = 0; c < MS_NCOMP; c++) {
			if (!series_used(c))
				continue;
			int64_t v = ms_live((enum ms_comp)c);
			ms_timeline_append(&timeline, c, t, v);
			move_window(c, v, too_soon(c, t));
		}
	}
	timeline_unlock();
}

void ms_timeline_enable(int on)
{
	timeline_lock();
	enabled = on;
	__atomic_store_n(&ms_watch_fn, moved, __ATOMIC_RELAXED);
	for (int c = 0; c < MS_NCOMP; c++) {
		if (on && (c == MS_CPU || c >= MS_DEV0)) {
			move_window(c, ms_live((enum ms_comp)c), 0);
		} else {
			ms_watch_set((enum ms_comp)c, INT64_MIN, INT64_MAX);
		}
	}
	timeline_unlock();
}

void ms_timeline_set_clock(double (*fn)(void))
{
	clock_fn = fn;
}

void ms_timeline_init(void)
{
	clock_fn = ms_elapsed;
	if (ms_cfg.timeline)
		ms_touch(&timeline.npoints);
	ms_timeline_enable(ms_cfg.timeline);
}

static void forget_all(void)
{
	timeline.npoints = timeline.merges = 0;
	timeline.nevents = timeline.events_dropped = 0;
	memset(series_peak, 0, sizeof series_peak);
	memset(widen, 0, sizeof widen);
	memset(last_moved, 0, sizeof last_moved);
	memset(band_lo, 0, sizeof band_lo);
	memset(band_hi, 0, sizeof band_hi);
}

void ms_timeline_fork_child(int tracking)
{
	ms_spin_reset(&lock, &lock_held);
	forget_all();
	if (enabled)
		ms_timeline_enable(1);
}

const struct ms_timeline *ms_timeline_peek(void)
{
	return &timeline;
}

void ms_timeline_clear(void)
{
	forget_all();
}
