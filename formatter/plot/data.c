/* The data of one panel: series from the timeline, stage calls as bands, and the peaks to mark. */
#include "plot/plot.h"
#include "base/base.h"
#include "model/document.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double mf_get(json_t *obj, const char *key, double dflt)
{
	double v;
	return mf_num(json_object_get(obj, key), &v) && isfinite(v) ? v : dflt;
}

/* A device number as an int, or -2 when KEY is missing or not a sensible device. */
static int mf_dev(json_t *obj, const char *key, int dflt)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return dflt;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096)
		return -2;
	return (int)json_integer_value(v);
}

static int mf_pt_cmp(const void *a, const void *b)
{
	const struct mf_pt *x = a, *y = b;
	return (x->t > y->t) - (x->t < y->t);
}

/* [t, bytes] pairs; anything else is skipped. Sorted, as a hand-edited file may not be. */
static void mf_read_points(json_t *pts, struct mf_series *s)
{
	size_t i;
	json_t *pt;
	s->p = mf_xmalloc((json_array_size(pts) + 1) * sizeof *s->p);
	json_array_foreach(pts, i, pt) {
		double t, v;
		if (json_array_size(pt) < 2 || !mf_num(json_array_get(pt, 0), &t) ||
		    !mf_num(json_array_get(pt, 1), &v) || !isfinite(t) || !isfinite(v))
			continue;
		s->p[s->n++] = (struct mf_pt){ t, v };
	}
	qsort(s->p, s->n, sizeof *s->p, mf_pt_cmp);
}

/* The process object's entry for DEVICE (-1: CPU): its peak and its live bytes at the end. */
static json_t *mf_proc_component(json_t *root, int device)
{
	json_t *proc = json_object_get(root, "process"), *d;
	size_t i;
	if (device < 0)
		return json_object_get(proc, "cpu");
	json_array_foreach(json_object_get(json_object_get(proc, "gpu"), "devices"), i, d)
		if (mf_get(d, "device", -1) == device)
			return d;
	return NULL;
}

static struct mf_series *mf_add_series(struct mf_panel *p, int device)
{
	for (size_t i = 0; i < p->ns; i++)
		if (p->s[i].device == device)
			return &p->s[i];
	p->s = mf_xrealloc(p->s, (p->ns + 1) * sizeof *p->s);
	struct mf_series *s = &p->s[p->ns++];
	memset(s, 0, sizeof *s);
	s->device = device;
	s->peak = s->peak_t = -1;
	return s;
}

/* The last point is the live memory when the file was written, a measurement like any other. */
static void mf_series_finish(struct mf_panel *p, struct mf_series *s, double elapsed)
{
	json_t *c = mf_proc_component(p->f->root, s->device);
	double live = mf_get(c, "live", -1);
	s->peak = mf_get(c, "peak", -1);
	if (s->n && live >= 0 && elapsed > s->p[s->n - 1].t)
		s->p[s->n++] = (struct mf_pt){ elapsed, live };
	double top = -INFINITY;
	for (size_t i = 0; i < s->n; i++)
		top = fmax(top, s->p[i].v);
	/* The highest point tells when the peak happened only when it comes near the peak's value. */
	if (s->n && (s->peak < 0 || top >= 0.9 * s->peak))
		s->peak_t = mf_series_argmax(s, -INFINITY, INFINITY);
	s->peak = fmax(s->peak, top);
}

static void mf_read_series(struct mf_panel *p, json_t *tl, double elapsed)
{
	size_t i;
	json_t *sj;
	json_array_foreach(json_object_get(tl, "series"), i, sj) {
		const char *comp = json_string_value(json_object_get(sj, "component"));
		int dev = comp && !strcmp(comp, "gpu") ? mf_dev(sj, "device", 0) : -1;
		if (!comp || dev < -1 || (dev == -1 && strcmp(comp, "cpu")))
			continue;
		struct mf_series *s = mf_add_series(p, dev);
		if (s->n) /* a repeated component: the first one wins */
			continue;
		free(s->p);
		mf_read_points(json_object_get(sj, "points"), s);
	}
	for (size_t k = 0; k < p->ns; k++)
		mf_series_finish(p, &p->s[k], elapsed);
}

double mf_series_argmax(const struct mf_series *s, double t0, double t1)
{
	double best_t = -1, best_v = -INFINITY;
	for (size_t i = 0; i < s->n; i++)
		if (s->p[i].t >= t0 && s->p[i].t <= t1 && s->p[i].v > best_v)
			best_v = s->p[i].v, best_t = s->p[i].t;
	return best_t;
}

static void mf_add_band(struct mf_panel *p, const char *stage, double t0, double t1, int open)
{
	if (!(t1 >= t0))
		t1 = t0;
	p->b = mf_xrealloc(p->b, (p->nb + 1) * sizeof *p->b);
	p->b[p->nb++] = (struct mf_band){ stage, t0, t1, 0, 1, open, NULL, 1 };
}

/* An open call per stage name while reading events: begin..end pairs, nested calls counted. */
struct mf_open {
	const char *stage;
	double t0;
	int depth;
};

static struct mf_open *mf_open_find(struct mf_open *o, size_t *n, const char *stage)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(o[i].stage, stage))
			return &o[i];
	o[*n] = (struct mf_open){ stage, 0, 0 };
	return &o[(*n)++];
}

static void mf_read_events(struct mf_panel *p, json_t *events)
{
	size_t i, no = 0;
	json_t *e;
	struct mf_open *o = mf_xmalloc((json_array_size(events) + 1) * sizeof *o);
	json_array_foreach(events, i, e) {
		const char *stage = json_string_value(json_object_get(e, "stage"));
		const char *kind = json_string_value(json_object_get(e, "kind"));
		double t = mf_get(e, "t", NAN);
		if (!stage || !kind || isnan(t))
			continue;
		struct mf_open *s = mf_open_find(o, &no, stage);
		if (!strcmp(kind, "begin") && s->depth++ == 0)
			s->t0 = t;
		else if (!strcmp(kind, "end") && s->depth > 0 && --s->depth == 0)
			mf_add_band(p, stage, s->t0, t, 0);
	}
	for (size_t k = 0; k < no; k++) /* never ended: open until the file was written */
		if (o[k].depth > 0)
			mf_add_band(p, o[k].stage, o[k].t0, fmax(p->end, o[k].t0), 1);
	free(o);
}

static int mf_have_band(const struct mf_panel *p, const char *stage, double t0)
{
	for (size_t i = 0; i < p->nb; i++)
		if (fabs(p->b[i].t0 - t0) < 1e-4 && !strcmp(p->b[i].stage, stage))
			return 1;
	return 0;
}

/* Calls the events do not hold (no timeline, or events dropped): the history, then the last call. */
static void mf_stage_calls(struct mf_panel *p, json_t *st)
{
	const char *name = json_string_value(json_object_get(st, "name"));
	int open = json_is_true(json_object_get(st, "open"));
	size_t i;
	json_t *h;
	json_array_foreach(json_object_get(st, "history"), i, h) {
		double t0 = mf_get(h, "start", NAN), r = mf_get(h, "runtime", 0);
		if (!isnan(t0) && !mf_have_band(p, name, t0))
			mf_add_band(p, name, t0, t0 + r, 0);
	}
	double t0 = mf_get(st, "start", NAN), r = mf_get(st, "runtime", 0);
	if (!isnan(t0) && !mf_have_band(p, name, t0))
		mf_add_band(p, name, t0, t0 + r, open);
}

/* The stage's last call: where on each series its peak lies. */
static void mf_stage_peaks(struct mf_panel *p, json_t *st)
{
	const char *name = json_string_value(json_object_get(st, "name"));
	double t0 = mf_get(st, "start", NAN), t1 = t0 + mf_get(st, "runtime", 0);
	json_t *gpu = json_object_get(st, "gpu"), *d;
	size_t i;
	if (isnan(t0) || (mf_get(st, "calls", 0) < 1 && !json_is_true(json_object_get(st, "open"))))
		return;
	for (i = 0; i <= json_array_size(json_object_get(gpu, "devices")); i++) {
		d = i ? json_array_get(json_object_get(gpu, "devices"), i - 1) : json_object_get(st, "cpu");
		int dev = i ? mf_dev(d, "device", -2) : -1;
		double v = mf_get(d, "peak", -1), t = (t0 + t1) / 2;
		/* A GPU the stage never touched has nothing to mark. */
		if (v < 0 || dev < -1 || (dev >= 0 && v == 0))
			continue;
		for (size_t k = 0; k < p->ns; k++)
			if (p->s[k].device == dev && mf_series_argmax(&p->s[k], t0, t1) >= 0)
				t = mf_series_argmax(&p->s[k], t0, t1);
		p->pk = mf_xrealloc(p->pk, (p->npk + 1) * sizeof *p->pk);
		p->pk[p->npk++] = (struct mf_peak){ name, dev, t, v };
	}
}

/* Without a timeline there are no series, but the process peaks are still worth a line. */
static void mf_peak_only_series(struct mf_panel *p)
{
	json_t *proc = json_object_get(p->f->root, "process"), *d;
	size_t i;
	if (mf_get(json_object_get(proc, "cpu"), "peak", -1) >= 0)
		mf_series_finish(p, mf_add_series(p, -1), p->end);
	json_array_foreach(json_object_get(json_object_get(proc, "gpu"), "devices"), i, d)
		if (mf_dev(d, "device", -2) >= 0)
			mf_series_finish(p, mf_add_series(p, mf_dev(d, "device", -2)), p->end);
}

static void mf_panel_extent(struct mf_panel *p)
{
	for (size_t i = 0; i < p->ns; i++) {
		const struct mf_series *s = &p->s[i];
		if (s->n)
			p->end = fmax(p->end, s->p[s->n - 1].t);
		p->vmax = fmax(p->vmax, s->peak);
	}
	for (size_t i = 0; i < p->nb; i++)
		p->end = fmax(p->end, p->b[i].t1);
	for (size_t i = 0; i < p->npk; i++)
		p->vmax = fmax(p->vmax, p->pk[i].v);
}

/* A call of a stage that begins at the very instant another call of it ended took its place: the
 * implicit init (load to the first stage) handed over to the Trainer's own init, and the dump's
 * init is that one (what came before it is before_init), so the bar is that one's alone and the
 * imports before it stay untinted (one bar over both read as an init of 5 s beside the dump's
 * 0.5 s).  Calls back to back are apart by the time between the shim's two readings of the clock;
 * only a hand-over is at the same instant. */
static void mf_join_handovers(struct mf_panel *p)
{
	size_t out = 0;
	for (size_t i = 0; i < p->nb; i++) {
		size_t k = out;
		while (k > 0 && strcmp(p->b[k - 1].stage, p->b[i].stage))
			k--;
		struct mf_band *prev = k ? &p->b[k - 1] : NULL;
		if (prev && !prev->open && prev->t1 == p->b[i].t0) {
			*prev = p->b[i];
			continue;
		}
		p->b[out++] = p->b[i];
	}
	p->nb = out;
}

void mf_panel_build(const struct mf_file *f, double offset, struct mf_panel *p)
{
	json_t *tl = json_object_get(f->root, "timeline"), *st;
	double elapsed = mf_get(f->root, "elapsed", f->has_times ? f->end_time - f->start_time : 0);
	size_t i;
	memset(p, 0, sizeof *p);
	p->f = f, p->offset = offset, p->end = fmax(elapsed, 0);
	p->has_timeline = json_is_object(tl) && json_is_array(json_object_get(tl, "series"));
	if (p->has_timeline) {
		mf_read_series(p, tl, p->end);
		mf_read_events(p, json_object_get(tl, "events"));
	} else {
		mf_peak_only_series(p);
	}
	int all_events =
		p->has_timeline && json_is_array(json_object_get(tl, "events")) && mf_get(tl, "events_dropped", 0) <= 0;
	json_array_foreach(f->stages, i, st) {
		if (!all_events)
			mf_stage_calls(p, st);
		mf_stage_peaks(p, st);
	}
	mf_join_handovers(p);
	mf_bands_rows(p->b, p->nb, &p->nrows);
	mf_panel_extent(p);
}

void mf_panel_free(struct mf_panel *p)
{
	for (size_t i = 0; i < p->ns; i++)
		free(p->s[i].p);
	free(p->s);
	free(p->b);
	free(p->pk);
	memset(p, 0, sizeof *p);
}
