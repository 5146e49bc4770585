/* Inside one panel's plot area: the grid, the memory lines and the peak marks with their values. */
#include "plot/plot.h"
#include "base/base.h"

#include <math.h>
#include <stdlib.h>

/* Kept near the plot area: cairo's fixed-point coordinates cannot hold a time of 1e300. */
double mf_frame_x(const struct mf_frame *fr, const struct mf_panel *p, double t)
{
	double x = fr->x + (p->offset + t) / fr->tmax * fr->w;
	return isnan(x) ? fr->x : fmin(fmax(x, fr->x - 100), fr->x + fr->w + 100);
}

static double mf_frame_y(const struct mf_frame *fr, const struct mf_ticks *yt, double v)
{
	double y = fr->y + fr->h - v / (yt->top * yt->unit) * fr->h;
	return fmin(fmax(y, fr->y), fr->y + fr->h);
}

void mf_draw_grid(cairo_t *cr, const struct mf_frame *fr, const struct mf_ticks *yt)
{
	cairo_set_line_width(cr, 1);
	mf_font(cr, MF_FS_SMALL, 0);
	int nticks = yt->step > 0 ? (int)floor(yt->top / yt->step + 0.5) : 0;
	for (int i = 0; i <= nticks; i++) { /* counted, so rounding never drops the top tick */
		double v = i * yt->step;
		double y = round(mf_frame_y(fr, yt, v * yt->unit)) + 0.5;
		cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
		cairo_move_to(cr, fr->x, y);
		cairo_line_to(cr, fr->x + fr->w, y);
		cairo_stroke(cr);
		char *s = mf_tick_label(yt, v, 1);
		cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
		cairo_move_to(cr, fr->x - 6 - mf_text_w(cr, s), y + MF_FS_SMALL * 0.35);
		mf_show_text(cr, s);
		free(s);
	}
	for (double t = 0; t * fr->xt->unit <= fr->tmax * (1 + 1e-9); t += fr->xt->step) {
		double x = round(fr->x + t * fr->xt->unit / fr->tmax * fr->w) + 0.5;
		cairo_set_source_rgb(cr, 0.92, 0.92, 0.92);
		cairo_move_to(cr, x, fr->y);
		cairo_line_to(cr, x, fr->band_y);
		cairo_stroke(cr);
	}
	cairo_set_source_rgb(cr, 0.55, 0.55, 0.55);
	cairo_rectangle(cr, fr->x + 0.5, fr->y + 0.5, fr->w, fr->h);
	cairo_stroke(cr);
}

/* One series: a pale grey area under it and the line itself, thinned to what the pixels can show. */
/* The line's stretch from (X0, Y0) to (X1, Y1), as a box labels should keep out of. */
static void mf_line_box(struct mf_taken *lines, double x0, double y0, double x1, double y1)
{
	struct mf_rect r = { fmin(x0, x1) - 1, fmin(y0, y1) - 1, fmax(x0, x1) + 1, fmax(y0, y1) + 1 };
	mf_taken_add(lines, &r);
}

static void mf_draw_one(cairo_t *cr, const struct mf_panel *p, const struct mf_series *s, const struct mf_frame *fr,
			const struct mf_ticks *yt, struct mf_taken *lines)
{
	struct mf_pt *d = mf_xmalloc((s->n + 1) * sizeof *d);
	size_t n = mf_decimate(s->p, s->n, fr->w / fr->tmax, d);
	struct mf_rgb c = mf_series_colour(s->device);
	cairo_new_path(cr);
	/* Steps: the shim adds a point whenever live memory moves past its threshold, so between two
	 * points it stayed near the earlier one. */
	for (size_t i = 0; i < n; i++) {
		double x = mf_frame_x(fr, p, d[i].t), y = mf_frame_y(fr, yt, d[i].v);
		if (i) {
			double px = mf_frame_x(fr, p, d[i - 1].t), py = mf_frame_y(fr, yt, d[i - 1].v);
			cairo_line_to(cr, x, py);
			mf_line_box(lines, px, py, x, py);
			mf_line_box(lines, x, py, x, y);
		}
		cairo_line_to(cr, x, y);
	}
	if (n == 1) /* a single point still shows */
		cairo_rel_line_to(cr, 2, 0);
	cairo_path_t *line = cairo_copy_path(cr);
	cairo_line_to(cr, mf_frame_x(fr, p, d[n - 1].t), fr->y + fr->h);
	cairo_line_to(cr, mf_frame_x(fr, p, d[0].t), fr->y + fr->h);
	cairo_close_path(cr);
	/* grey, not the line's colour: the CPU's blue under the curve read as the first stage's tint
	 * (init) where no stage runs, after the last one */
	mf_set_rgb(cr, mf_area_colour(), MF_AREA_ALPHA);
	cairo_fill(cr);
	cairo_append_path(cr, line);
	cairo_path_destroy(line);
	mf_set_rgb(cr, c, 1);
	cairo_set_line_width(cr, 1.6);
	cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
	cairo_stroke(cr);
	free(d);
}

void mf_draw_series(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, const struct mf_ticks *yt,
		    struct mf_room *room)
{
	cairo_save(cr);
	cairo_rectangle(cr, fr->x, fr->y - 1, fr->w + 1, fr->h + 2);
	cairo_clip(cr);
	for (size_t i = 0; i < p->ns; i++)
		if (p->s[i].n)
			mf_draw_one(cr, p, &p->s[i], fr, yt, &room->lines);
	cairo_restore(cr);
}

/* A label on a white backing at the first of the offered spots that is free and inside the area. */
static int mf_place(cairo_t *cr, const struct mf_frame *fr, struct mf_room *room, const char *s,
		    const double (*spots)[2], int nspots, struct mf_rgb c)
{
	double w = mf_text_w(cr, s), h = MF_FS_SMALL;
	/* First a spot clear of the memory lines too; failing that, one that covers a line. */
	for (int i = 0; i < 2 * nspots; i++) {
		const double *at = spots[i % nspots];
		struct mf_rect r = { at[0], at[1] - h, at[0] + w, at[1] + 3 };
		if (r.x0 < fr->x + 2 || r.x1 > fr->x + fr->w - 2 || r.y0 < fr->y + 2 || r.y1 > fr->y + fr->h - 2 ||
		    !mf_taken_free_at(&room->marks, &r) || (i < nspots && !mf_taken_free_at(&room->lines, &r)))
			continue;
		mf_taken_add(&room->marks, &r);
		cairo_set_source_rgba(cr, 1, 1, 1, 0.8);
		cairo_rectangle(cr, r.x0 - 1, r.y0, r.x1 - r.x0 + 2, r.y1 - r.y0);
		cairo_fill(cr);
		mf_set_rgb(cr, (struct mf_rgb){ c.r * 0.6, c.g * 0.6, c.b * 0.6 }, 1);
		cairo_move_to(cr, r.x0, at[1]);
		mf_show_text(cr, s);
		return 1;
	}
	return 0;
}

/* Beside a mark at X, Y: above it first, then to the sides, then below. */
static int mf_place_near(cairo_t *cr, const struct mf_frame *fr, struct mf_room *room, const char *s, double x,
			 double y, struct mf_rgb c)
{
	double w = mf_text_w(cr, s);
	const double spots[][2] = { { x - w / 2, y - 8 },  { x + 7, y - 5 },      { x - 7 - w, y - 5 },
				    { x + 7, y + 14 },     { x - 7 - w, y + 14 }, { x - w / 2, y + 19 },
				    { x - w / 2, y - 22 }, { x + 7, y - 20 },     { x - 7 - w, y - 20 },
				    { x - w / 2, y - 36 }, { x + 7, y - 34 },     { x - 7 - w, y - 34 } };
	return mf_place(cr, fr, room, s, spots, 12, c);
}

static void mf_triangle(cairo_t *cr, double x, double y, struct mf_rgb c, struct mf_room *room)
{
	struct mf_rect r = { x - 5, y - 8, x + 5, y + 1 };
	mf_taken_add(&room->marks, &r);
	cairo_move_to(cr, x, y);
	cairo_line_to(cr, x - 4.5, y - 7);
	cairo_line_to(cr, x + 4.5, y - 7);
	cairo_close_path(cr);
	mf_set_rgb(cr, c, 1);
	cairo_fill_preserve(cr);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_set_line_width(cr, 1);
	cairo_stroke(cr);
}

/* The first stage peak on S's device that is the process peak itself, or NULL. */
static const struct mf_peak *mf_peak_of_run(const struct mf_panel *p, const struct mf_series *s)
{
	for (size_t i = 0; i < p->npk; i++)
		if (p->pk[i].device == s->device && p->pk[i].v == s->peak)
			return &p->pk[i];
	return NULL;
}

/* The innermost stage call open at T (the deepest band holding it), or NULL. */
static const char *mf_stage_at(const struct mf_panel *p, double t)
{
	const struct mf_band *best = NULL;
	for (size_t i = 0; i < p->nb; i++)
		if (p->b[i].t0 <= t && t <= p->b[i].t1 && (!best || p->b[i].row >= best->row))
			best = &p->b[i];
	return best ? best->stage : NULL;
}

/* The process peak: a dashed line at its height, a ring where it happened, its value at the right
 * and the stage open at that moment ("CPU process peak 400 MB in train"). */
static void mf_process_peak(cairo_t *cr, const struct mf_panel *p, const struct mf_series *s, const struct mf_frame *fr,
			    const struct mf_ticks *yt, struct mf_room *room)
{
	struct mf_rgb c = mf_series_colour(s->device);
	double y = round(mf_frame_y(fr, yt, s->peak)) + 0.5, dash = 4;
	mf_set_rgb(cr, c, 0.6);
	cairo_set_line_width(cr, 1);
	cairo_set_dash(cr, &dash, 1, 0);
	cairo_move_to(cr, fr->x, y);
	cairo_line_to(cr, fr->x + fr->w, y);
	cairo_stroke(cr);
	cairo_set_dash(cr, NULL, 0, 0);
	if (s->peak_t >= 0) {
		double x = mf_frame_x(fr, p, s->peak_t);
		struct mf_rect r = { x - 6, y - 6, x + 6, y + 6 };
		mf_taken_add(&room->marks, &r);
		cairo_arc(cr, x, y, 4.5, 0, 2 * M_PI);
		mf_set_rgb(cr, c, 1);
		cairo_set_line_width(cr, 2);
		cairo_stroke(cr);
	}
	if (mf_peak_of_run(p, s)) /* the stage's label says it */
		return;
	char *v = mf_fmt_bytes(s->peak), *dev = s->device < 0 ? mf_xstrdup("CPU") : mf_xasprintf("GPU %d", s->device);
	const char *stage = s->peak_t >= 0 ? mf_stage_at(p, s->peak_t) : NULL;
	char *in = stage ? mf_clean_text(stage) : NULL;
	char *t =
		in ? mf_xasprintf("%s process peak %s in %s", dev, v, in) : mf_xasprintf("%s process peak %s", dev, v);
	free(in);
	double w = mf_text_w(cr, t);
	const double spots[][2] = { { fr->x + fr->w - w - 6, y - 4 },
				    { fr->x + fr->w - w - 6, y + 13 },
				    { fr->x + 6, y - 4 },
				    { fr->x + 6, y + 13 } };
	mf_place(cr, fr, room, t, spots, 4, c);
	free(v), free(dev), free(t);
}

static int mf_is_run_peak(const struct mf_panel *p, const struct mf_peak *m)
{
	for (size_t i = 0; i < p->ns; i++)
		if (mf_peak_of_run(p, &p->s[i]) == m)
			return 1;
	return 0;
}

/* "train 131 MB", and "(process peak)" after the stage where the process peak happened. */
static void mf_peak_label(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, const struct mf_ticks *yt,
			  struct mf_room *room, const struct mf_peak *m)
{
	double x = mf_frame_x(fr, p, m->t), y = mf_frame_y(fr, yt, m->v);
	char *v = mf_fmt_bytes(m->v), *name = mf_clean_text(m->stage);
	char *s = mf_xasprintf("%s %s%s", name, v, mf_is_run_peak(p, m) ? " (process peak)" : "");
	mf_place_near(cr, fr, room, s, x, y - 7, mf_series_colour(m->device));
	free(v), free(name), free(s);
}

/* Marks first, so that no label covers one; then the labels of the process peaks, which matter
 * most, then the other stages'. */
void mf_draw_peaks(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, const struct mf_ticks *yt,
		   struct mf_room *room)
{
	mf_font(cr, MF_FS_SMALL, 0);
	for (size_t i = 0; i < p->npk; i++)
		mf_triangle(cr, mf_frame_x(fr, p, p->pk[i].t), mf_frame_y(fr, yt, p->pk[i].v),
			    mf_series_colour(p->pk[i].device), room);
	for (size_t i = 0; i < p->ns; i++)
		if (p->s[i].peak >= 0)
			mf_process_peak(cr, p, &p->s[i], fr, yt, room);
	for (size_t i = 0; i < p->ns; i++)
		if (mf_peak_of_run(p, &p->s[i]))
			mf_peak_label(cr, p, fr, yt, room, mf_peak_of_run(p, &p->s[i]));
	for (size_t i = 0; i < p->npk; i++)
		if (!mf_is_run_peak(p, &p->pk[i]))
			mf_peak_label(cr, p, fr, yt, room, &p->pk[i]);
}
