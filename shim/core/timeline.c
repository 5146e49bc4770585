/* Timeline recording (see timeline.h). */
#include <string.h>
#include "core/ms.h"
#include "core/spin.h"
#include "core/timeline.h"

struct ms_timeline ms_tl;
int64_t ms_tl_hi[MS_NCOMP] = { [0 ... MS_NCOMP - 1] = INT64_MAX };
int64_t ms_tl_lo[MS_NCOMP] = { [0 ... MS_NCOMP - 1] = INT64_MIN };
double (*ms_tl_clock)(void);

static struct ms_spin lock;
static int enabled;
static __thread int lock_held MS_TLS;
static int64_t series_peak[MS_NCOMP];

void ms_timeline_lock(void)
{
	ms_spin_lock(&lock, &lock_held);
}

void ms_timeline_unlock(void)
{
	ms_spin_unlock(&lock, &lock_held);
}

/* A signal handler on a thread that holds the lock must not spin on it: it skips the point. */
static int lock_unless_mine(void)
{
	if (lock_held)
		return -1;
	ms_timeline_lock();
	return 0;
}

static void copy_used(struct ms_timeline *out)
{
	out->npoints = ms_tl.npoints;
	out->merges = ms_tl.merges;
	out->nevents = ms_tl.nevents;
	out->events_dropped = ms_tl.events_dropped;
	memcpy(out->points, ms_tl.points, ms_tl.npoints * sizeof *out->points);
	memcpy(out->events, ms_tl.events, ms_tl.nevents * sizeof *out->events);
}

void ms_timeline_copy(struct ms_timeline *out, int nowait)
{
	int locked = 0;
	if (!lock_held) {
		if (nowait)
			locked = ms_spin_trylock(&lock, &lock_held, 50000000) == 0;
		else
			ms_timeline_lock(), locked = 1;
	}
	copy_used(out);
	if (locked)
		ms_timeline_unlock();
}

void ms_tl_compact(struct ms_timeline *tl)
{
	int32_t pending[MS_NCOMP];
	uint32_t out = 0;
	for (int c = 0; c < MS_NCOMP; c++)
		pending[c] = -1;
	for (uint32_t i = 0; i < tl->npoints; i++) {
		struct ms_tl_point p = tl->points[i];
		int c = p.comp;
		if (pending[c] < 0) {
			pending[c] = (int32_t)out;
			tl->points[out++] = p;
			continue;
		}
		struct ms_tl_point *kept = &tl->points[pending[c]];
		if (p.value > kept->value) {
			kept->value = p.value;
			kept->t = p.t;
		}
		pending[c] = -1;
	}
	tl->npoints = out;
	tl->merges++;
}

void ms_tl_append(struct ms_timeline *tl, int comp, double t, int64_t value)
{
	if (tl->npoints == MS_TL_POINTS)
		ms_tl_compact(tl);
	if (tl->npoints == MS_TL_POINTS)
		return; /* cannot happen: a compaction at least halves */
	struct ms_tl_point *p = &tl->points[tl->npoints++];
	p->t = t;
	p->value = value;
	p->comp = comp;
}

static double now(void)
{
	return ms_tl_clock ? ms_tl_clock() : 0.0;
}

/* Next point when live leaves now +- max(1 MiB, 1% of the series' peak). */
static void move_window(int comp, int64_t value)
{
	if (value > series_peak[comp])
		series_peak[comp] = value;
	int64_t step = series_peak[comp] / 100;
	if (step < MS_TL_MIN_STEP)
		step = MS_TL_MIN_STEP;
	__atomic_store_n(&ms_tl_hi[comp], value + step, __ATOMIC_RELAXED);
	__atomic_store_n(&ms_tl_lo[comp], value - step, __ATOMIC_RELAXED);
}

void ms_timeline_moved(enum ms_comp comp, int64_t value)
{
	if (lock_unless_mine() < 0)
		return;
	if (enabled) {
		ms_tl_append(&ms_tl, comp, now(), value);
		move_window(comp, value);
	}
	ms_timeline_unlock();
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
		if (ms_tl.nevents < MS_TL_EVENTS) {
			struct ms_tl_event *e = &ms_tl.events[ms_tl.nevents++];
			e->t = t;
			e->stage = (int16_t)stage;
			e->begin = (int16_t)begin;
		} else {
			ms_tl.events_dropped++;
		}
		for (int c = 0; c < MS_NCOMP; c++) {
			if (!series_used(c))
				continue;
			int64_t v = ms_live((enum ms_comp)c);
			ms_tl_append(&ms_tl, c, t, v);
			move_window(c, v);
		}
	}
	ms_timeline_unlock();
}

void ms_timeline_enable(int on)
{
	ms_timeline_lock();
	enabled = on;
	for (int c = 0; c < MS_NCOMP; c++) {
		if (on && (c == MS_CPU || c >= MS_DEV0)) {
			move_window(c, ms_live((enum ms_comp)c));
		} else {
			__atomic_store_n(&ms_tl_hi[c], INT64_MAX, __ATOMIC_RELAXED);
			__atomic_store_n(&ms_tl_lo[c], INT64_MIN, __ATOMIC_RELAXED);
		}
	}
	ms_timeline_unlock();
}

void ms_timeline_reset_for_child(void)
{
	ms_spin_reset(&lock, &lock_held);
	ms_tl.npoints = ms_tl.merges = 0;
	ms_tl.nevents = ms_tl.events_dropped = 0;
	memset(series_peak, 0, sizeof series_peak);
	if (enabled)
		ms_timeline_enable(1);
}
