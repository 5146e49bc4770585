/* --plot of several processes of one run: above their own panels, one panel per component (CPU,
 * each GPU device) with the processes stacked on the common clock (model/combined.h), the limit
 * that kills the job drawn across it: the cgroup's for the CPU, the device's total for a GPU. */
#include "plot/plot.h"
#include "base/base.h"
#include "model/combined.h"
#include "model/select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MF_STACK_TITLE_H = 22 };

/* The limit drawn across the stack: the largest cgroup limit or device total any file read. */
static double mf_stack_limit(const struct mf_file *files, size_t n, const struct mf_combined *c)
{
	double top = 0, v;
	for (size_t i = 0; i < n; i++) {
		json_t *proc = json_object_get(files[i].root, "process"), *d;
		size_t k;
		if (!c->gpu && mf_num(json_object_get(json_object_get(proc, "cgroup"), "limit"), &v))
			top = fmax(top, v);
		json_array_foreach(json_object_get(json_object_get(proc, "gpu_footprint"), "devices"), k, d)
			if (c->gpu && json_integer_value(json_object_get(d, "device")) == c->device &&
			    mf_num(json_object_get(d, "total"), &v))
				top = fmax(top, v);
	}
	return top;
}

static double mf_stack_y(const struct mf_frame *fr, const struct mf_ticks *yt, double v)
{
	return fr->y + fr->h - fmin(v / (yt->top * yt->unit), 1) * fr->h;
}

static double mf_stack_x(const struct mf_frame *fr, double t)
{
	return fr->x + fmin(fmax(t / fr->tmax, 0), 1) * fr->w;
}

/* One process's band [LO, HI] from T0 to T1. */
static void mf_stack_rect(cairo_t *cr, const struct mf_frame *fr, const struct mf_ticks *yt, size_t who, double t0,
			  double t1, double lo, double hi)
{
	if (hi <= lo || t1 <= t0)
		return;
	double x0 = mf_stack_x(fr, t0), y1 = mf_stack_y(fr, yt, hi);
	mf_set_rgb(cr, mf_series_colour((int)who), 0.55);
	cairo_rectangle(cr, x0, y1, mf_stack_x(fr, t1) - x0, mf_stack_y(fr, yt, lo) - y1);
	cairo_fill(cr);
}

/* The sweep: each process's band is the sum of those before it up to that plus its own; a band
 * is drawn as one rectangle for as long as it does not move. */
static void mf_stack_areas(cairo_t *cr, const struct mf_frame *fr, const struct mf_ticks *yt, struct mf_step *v,
			   size_t nv, size_t n)
{
	double *now = mf_xmalloc(4 * (n ? n : 1) * sizeof *now);
	double *lo = now + n, *hi = lo + n, *since = hi + n;
	memset(now, 0, 4 * n * sizeof *now);
	for (size_t i = 0; i < nv;) {
		size_t j = i;
		for (; j < nv && v[j].t == v[i].t; j++)
			now[v[j].who] = v[j].v;
		double sum = 0;
		for (size_t k = 0; k < n; k++) {
			double l = sum, h = (sum += now[k]);
			if (l == lo[k] && h == hi[k])
				continue;
			mf_stack_rect(cr, fr, yt, k, since[k], v[i].t, lo[k], hi[k]);
			lo[k] = l, hi[k] = h, since[k] = v[i].t;
		}
		i = j;
	}
	free(now);
}

/* The limit as a dashed line, labelled at its right end. */
static void mf_stack_limit_line(cairo_t *cr, const struct mf_frame *fr, const struct mf_ticks *yt,
				const struct mf_combined *c, double limit)
{
	double y = round(mf_stack_y(fr, yt, limit)) + 0.5, dash[] = { 6, 4 };
	cairo_set_source_rgb(cr, 0.8, 0.1, 0.1);
	cairo_set_line_width(cr, 1.5);
	cairo_set_dash(cr, dash, 2, 0);
	cairo_move_to(cr, fr->x, y);
	cairo_line_to(cr, fr->x + fr->w, y);
	cairo_stroke(cr);
	cairo_set_dash(cr, NULL, 0, 0);
	json_t *b = json_real(limit);
	char *size = mf_format_value("process_mem_cpu_peak", b);
	char *s = c->gpu ? mf_xasprintf("GPU %lld total %s", c->device, size) : mf_xasprintf("cgroup limit %s", size);
	mf_font(cr, MF_FS_SMALL, 1);
	cairo_move_to(cr, fr->x + fr->w - 6 - mf_text_w(cr, s), y - 4);
	mf_show_text(cr, s);
	free(s), free(size);
	json_decref(b);
}

/* The head: what is stacked, the combined peak and when; the processes' colours at the right. */
static void mf_stack_head(cairo_t *cr, const struct mf_file *files, const struct mf_combined *c,
			  const struct mf_frame *fr, double y)
{
	double x = fr->x + fr->w;
	mf_font(cr, MF_FS_SMALL, 0);
	for (size_t k = c->n; k-- > 0;) {
		if (!c->has[k])
			continue;
		char *who = mf_proc_label(&files[k]);
		x -= mf_text_w(cr, who) + 18;
		mf_set_rgb(cr, mf_series_colour((int)k), 0.55);
		cairo_rectangle(cr, x, y - 9, 10, 10);
		cairo_fill(cr);
		cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
		cairo_move_to(cr, x + 13, y);
		mf_show_text(cr, who);
		free(who);
	}
	json_t *b = json_real(c->peak);
	char *peak = mf_format_value("process_mem_cpu_peak", b);
	char *what = c->gpu ? mf_xasprintf("GPU %lld", c->device) : mf_xstrdup("CPU");
	char *t = mf_xasprintf("%zu processes stacked · combined %s peak %s at %.2f s", c->with, what, peak, c->at);
	mf_font(cr, MF_FS_PANEL, 1);
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	mf_text_fit(cr, fr->x, y, t, x - fr->x - 10);
	free(t), free(what), free(peak);
	json_decref(b);
}

void mf_draw_stack(cairo_t *cr, const struct mf_file *files, size_t n, const struct mf_combined *c, double origin,
		   struct mf_frame *fr, double y, double h)
{
	struct mf_ticks yt;
	struct mf_step *v;
	double limit = mf_stack_limit(files, n, c);
	size_t nv = mf_combined_steps(files, n, c->gpu, c->device, origin, &v);
	fr->y = y + MF_STACK_TITLE_H;
	fr->h = fmax(10, h - MF_STACK_TITLE_H - 4);
	fr->band_y = fr->y + fr->h;
	mf_ticks_bytes(fmax(c->peak, limit) * 1.05, &yt);
	mf_stack_head(cr, files, c, fr, y + 14);
	mf_draw_grid(cr, fr, &yt);
	mf_stack_areas(cr, fr, &yt, v, nv, n);
	if (limit > 0)
		mf_stack_limit_line(cr, fr, &yt, c, limit);
	free(v);
}
