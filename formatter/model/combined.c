/* The combined peak of a run's processes over time (model/combined.h): a sweep over every series'
 * points on the common clock, summing the step functions. */
#include "model/combined.h"
#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *mf_zeros(size_t n)
{
	double *d = mf_xmalloc((n ? n : 1) * sizeof *d);
	memset(d, 0, (n ? n : 1) * sizeof *d);
	return d;
}

static int mf_step_cmp(const void *a, const void *b)
{
	const struct mf_step *x = a, *y = b;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* FILE's series for the component (NULL when none). */
static json_t *mf_series_of(const struct mf_file *f, int gpu, long long device)
{
	json_t *list = json_object_get(json_object_get(f->root, "timeline"), "series"), *s;
	size_t i;
	json_array_foreach(list, i, s) {
		const char *c = json_string_value(json_object_get(s, "component"));
		if (!c || strcmp(c, gpu ? "gpu" : "cpu"))
			continue;
		if (!gpu || json_integer_value(json_object_get(s, "device")) == device)
			return json_object_get(s, "points");
	}
	return NULL;
}

static void mf_push(struct mf_step **v, size_t *n, size_t *cap, struct mf_step s)
{
	if (*n == *cap)
		*v = mf_xrealloc(*v, (*cap = *cap ? 2 * *cap : 64) * sizeof **v);
	(*v)[(*n)++] = s;
}

/* File WHO's steps on the common clock (ORIGIN its zero): a forked child's CPU above what it
 * inherited (its parent holds that); back to 0 when the process ended. */
static void mf_add_steps(const struct mf_file *f, size_t who, json_t *pts, int gpu, double origin, struct mf_step **v,
			 size_t *n, size_t *cap)
{
	double base = !gpu && f->forked && f->inherited_cpu > 0 ? f->inherited_cpu : 0;
	double shift = f->start_time - origin, last = shift;
	json_t *p;
	size_t i;
	json_array_foreach(pts, i, p) {
		double t, b;
		if (!mf_num(json_array_get(p, 0), &t) || !mf_num(json_array_get(p, 1), &b))
			continue;
		last = shift + t;
		mf_push(v, n, cap, (struct mf_step){ last, fmax(b - base, 0), who });
	}
	if (f->end_time - origin > last)
		mf_push(v, n, cap, (struct mf_step){ f->end_time - origin, 0, who });
}

/* The sweep: all steps at one instant apply before the sum is read, so one process ending as
 * another starts is not counted twice. */
static void mf_sweep(struct mf_combined *c, struct mf_step *v, size_t nv)
{
	double *now = mf_zeros(c->n), sum = 0;
	if (nv) /* no steps: no array either */
		qsort(v, nv, sizeof *v, mf_step_cmp);
	for (size_t i = 0; i < nv;) {
		size_t j = i;
		for (; j < nv && v[j].t == v[i].t; j++) {
			sum += v[j].v - now[v[j].who];
			now[v[j].who] = v[j].v;
			if (v[j].v > c->own[v[j].who])
				c->own[v[j].who] = v[j].v, c->own_at[v[j].who] = v[j].t;
		}
		if (sum > c->peak) {
			c->peak = sum, c->at = v[i].t;
			memcpy(c->held, now, c->n * sizeof *now);
		}
		i = j;
	}
	for (size_t k = 0; k < c->n; k++) {
		c->own_sum += c->own[k];
		c->slack += c->own[k] > 0 ? fmax(1048576.0, c->own[k] / 100) : 0;
	}
	free(now);
}

size_t mf_combined_steps(const struct mf_file *files, size_t n, int gpu, long long device, double origin,
			 struct mf_step **out)
{
	size_t nv = 0, cap = 0;
	*out = NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *pts = files[i].has_times ? mf_series_of(&files[i], gpu, device) : NULL;
		if (json_is_array(pts))
			mf_add_steps(&files[i], i, pts, gpu, origin, out, &nv, &cap);
	}
	if (nv)
		qsort(*out, nv, sizeof **out, mf_step_cmp);
	return nv;
}

static int mf_component(const struct mf_file *files, size_t n, double origin, int gpu, long long device,
			struct mf_combined *c)
{
	struct mf_step *v = NULL;
	size_t nv = 0, cap = 0;
	memset(c, 0, sizeof *c);
	c->gpu = gpu, c->device = device, c->n = n;
	c->has = mf_xmalloc(n ? n : 1);
	memset(c->has, 0, n ? n : 1);
	for (size_t i = 0; i < n; i++) {
		json_t *pts = files[i].has_times ? mf_series_of(&files[i], gpu, device) : NULL;
		if (!json_is_array(pts))
			continue;
		c->with++;
		c->has[i] = 1;
		mf_add_steps(&files[i], i, pts, gpu, origin, &v, &nv, &cap);
	}
	if (c->with < 2) {
		free(c->has);
		free(v);
		return 0;
	}
	c->held = mf_zeros(n);
	c->own = mf_zeros(n);
	c->own_at = mf_zeros(n);
	mf_sweep(c, v, nv);
	free(v);
	return 1;
}

/* The GPU devices any file has a series for, ascending, at most 64. */
static size_t mf_devices(const struct mf_file *files, size_t n, long long *dev)
{
	size_t nd = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *list = json_object_get(json_object_get(files[i].root, "timeline"), "series"), *s;
		size_t k, j;
		json_array_foreach(list, k, s) {
			const char *c = json_string_value(json_object_get(s, "component"));
			long long d = json_integer_value(json_object_get(s, "device"));
			if (!c || strcmp(c, "gpu"))
				continue;
			for (j = 0; j < nd && dev[j] != d; j++)
				;
			if (j == nd && nd < 64)
				dev[nd++] = d;
		}
	}
	for (size_t a = 1; a < nd; a++)
		for (size_t b = a; b > 0 && dev[b - 1] > dev[b]; b--) {
			long long t = dev[b];
			dev[b] = dev[b - 1], dev[b - 1] = t;
		}
	return nd;
}

size_t mf_combined_build(const struct mf_file *files, size_t n, struct mf_combined **out)
{
	long long dev[64];
	size_t nd = mf_devices(files, n, dev), nc = 0;
	double origin = INFINITY;
	for (size_t i = 0; i < n; i++)
		if (files[i].has_times && files[i].start_time < origin)
			origin = files[i].start_time;
	*out = mf_xmalloc((nd + 1) * sizeof **out);
	if (!isfinite(origin))
		return 0;
	nc += mf_component(files, n, origin, 0, 0, &(*out)[nc]);
	for (size_t d = 0; d < nd; d++)
		nc += mf_component(files, n, origin, 1, dev[d], &(*out)[nc]);
	return nc;
}

void mf_combined_free(struct mf_combined *c, size_t nc)
{
	for (size_t i = 0; i < nc; i++) {
		free(c[i].has);
		free(c[i].held);
		free(c[i].own);
		free(c[i].own_at);
	}
	free(c);
}
