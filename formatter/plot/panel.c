/* One panel: its title and legend, the plot area, and the stage bands in rows beneath it. */
#include "plot/plot.h"
#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MF_TITLE_H = 22, MF_MIN_PX = 3 };

/* "step", "step ×1500", "forward + backward ×3000", "a + 2 more ×90", "train (open)". */
static char *mf_band_text(const struct mf_band *b)
{
	char *name = mf_clean_text(b->stage), *other = mf_clean_text(b->other);
	char *more = b->kinds > 2 ? mf_xstrdup(" + more") : b->other ? mf_xasprintf(" + %s", other) : mf_xstrdup("");
	char *calls = b->calls > 1 ? mf_xasprintf(" ×%d", b->calls) : mf_xstrdup("");
	char *t = mf_xasprintf("%s%s%s%s", name, more, calls, b->open ? " (open)" : "");
	free(name), free(other), free(more), free(calls);
	return t;
}

/* A run of several stages shows the second one's colour in stripes over the first one's. */
static void mf_band_stripes(cairo_t *cr, const struct mf_frame *fr, const struct mf_band *b, const struct mf_rect *r)
{
	mf_set_rgb(cr, mf_stage_colour(fr->names, b->other), 1);
	for (double x = r->x0 + 3; x + 3 <= r->x1; x += 6)
		cairo_rectangle(cr, x, r->y0, 3, r->y1 - r->y0);
	cairo_fill(cr);
}

static struct mf_rect mf_band_rect(const struct mf_frame *fr, const struct mf_panel *p, const struct mf_band *b)
{
	double x0 = fmax(mf_frame_x(fr, p, b->t0), fr->x);
	double x1 = fmax(fmin(mf_frame_x(fr, p, b->t1), fr->x + fr->w), x0 + 1);
	double y0 = fr->band_y + b->row * fr->row_h + 1;
	return (struct mf_rect){ x0, y0, x1, y0 + fr->row_h - 2 };
}

/* Row 0's stages also tint the plot area above them, so the curve reads against its stage. */
static void mf_band_shapes(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr)
{
	for (size_t i = 0; i < p->nb; i++) {
		struct mf_rect r = mf_band_rect(fr, p, &p->b[i]);
		struct mf_rgb c = mf_stage_colour(fr->names, p->b[i].stage);
		if (p->b[i].row == 0) {
			mf_set_rgb(cr, c, 0.18);
			cairo_rectangle(cr, r.x0, fr->y, r.x1 - r.x0, fr->h);
			cairo_fill(cr);
		}
		mf_set_rgb(cr, c, 1);
		cairo_rectangle(cr, r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0);
		cairo_fill(cr);
		if (p->b[i].other)
			mf_band_stripes(cr, fr, &p->b[i], &r);
		cairo_rectangle(cr, r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0);
		mf_set_rgb(cr, (struct mf_rgb){ c.r * 0.7, c.g * 0.7, c.b * 0.7 }, 1);
		cairo_set_line_width(cr, p->b[i].calls > 1 ? 0.5 : 1);
		cairo_stroke(cr);
	}
}

static size_t *mf_by_width(const struct mf_panel *p)
{
	size_t *o = mf_xmalloc((p->nb + 1) * sizeof *o);
	for (size_t i = 0; i < p->nb; i++) {
		size_t j = i;
		o[i] = i;
		/* Insertion sort: the widest band of a stage gets its label first. */
		while (j > 0 && p->b[o[j - 1]].t1 - p->b[o[j - 1]].t0 < p->b[i].t1 - p->b[i].t0) {
			o[j] = o[j - 1];
			j--;
		}
		o[j] = i;
	}
	return o;
}

/* K holds the labels, BANDS the bands: a label inside its own band only avoids other labels. */
static int mf_label_band(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, const struct mf_band *b,
			 int need, struct mf_taken *k, struct mf_taken *bands)
{
	struct mf_rect r = mf_band_rect(fr, p, b);
	char *t = mf_band_text(b);
	double w = mf_text_w(cr, t), y = r.y1 - (r.y1 - r.y0 - MF_FS_SMALL * 0.72) / 2;
	struct mf_rect in = { (r.x0 + r.x1 - w) / 2, r.y0, (r.x0 + r.x1 + w) / 2, r.y1 };
	struct mf_rect right = { r.x1 + 3, r.y0, r.x1 + 3 + w, r.y1 };
	struct mf_rect left = { r.x0 - 3 - w, r.y0, r.x0 - 3, r.y1 };
	const struct mf_rect *at = w + 6 <= r.x1 - r.x0 && mf_taken_free_at(k, &in) ? &in : NULL;
	/* Outside its band only the first label of a stage, and only over an empty stretch. */
	if (!at && need && right.x1 < fr->x + fr->w && mf_taken_free_at(k, &right) && mf_taken_free_at(bands, &right))
		at = &right;
	if (!at && need && left.x0 > fr->x && mf_taken_free_at(k, &left) && mf_taken_free_at(bands, &left))
		at = &left;
	if (at) {
		cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
		cairo_move_to(cr, at->x0, y);
		mf_show_text(cr, t);
		mf_taken_add(k, at);
	}
	free(t);
	return at != NULL;
}

/* Every band is in the way of outside labels; labels go to the widest bands first. */
static void mf_band_labels(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, struct mf_taken *k)
{
	struct mf_taken bands = { 0 };
	size_t *o = mf_by_width(p);
	const char **done = mf_xmalloc((p->nb + 1) * sizeof *done);
	size_t ndone = 0;
	for (size_t i = 0; i < p->nb; i++) {
		struct mf_rect r = mf_band_rect(fr, p, &p->b[i]);
		r.x0 -= 1, r.x1 += 1;
		mf_taken_add(&bands, &r);
	}
	mf_font(cr, MF_FS_SMALL, 0);
	for (size_t i = 0; i < p->nb; i++) {
		const struct mf_band *b = &p->b[o[i]];
		size_t d = 0;
		while (d < ndone && strcmp(done[d], b->stage))
			d++;
		if (mf_label_band(cr, p, fr, b, d == ndone, k, &bands) && d == ndone)
			done[ndone++] = b->stage;
	}
	free(o);
	free(done);
	free(bands.r);
}

void mf_draw_bands(cairo_t *cr, struct mf_panel *p, const struct mf_frame *fr)
{
	struct mf_taken k = { 0 };
	p->nb = mf_bands_merge(p->b, p->nb, fr->w / fr->tmax, MF_MIN_PX);
	mf_band_shapes(cr, p, fr);
	mf_band_labels(cr, p, fr, &k);
	free(k.r);
}

static void mf_legend_mark(cairo_t *cr, int m, double x, double y)
{
	double dash = 4;
	cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
	if (m == 0) {
		cairo_set_line_width(cr, 1);
		cairo_set_dash(cr, &dash, 1, 0);
		cairo_move_to(cr, x - 22, y - 4);
		cairo_line_to(cr, x - 4, y - 4);
		cairo_stroke(cr);
		cairo_set_dash(cr, NULL, 0, 0);
	} else {
		cairo_move_to(cr, x - 9, y);
		cairo_line_to(cr, x - 13.5, y - 7);
		cairo_line_to(cr, x - 4.5, y - 7);
		cairo_close_path(cr);
		cairo_fill(cr);
	}
}

static void mf_legend_swatch(cairo_t *cr, int device, double x, double y)
{
	mf_set_rgb(cr, mf_series_colour(device), 1);
	cairo_set_line_width(cr, 3);
	cairo_move_to(cr, x - 22, y - 4);
	cairo_line_to(cr, x - 4, y - 4);
	cairo_stroke(cr);
}

/* Right-aligned at the title line: a swatch per series, then the two kinds of peak mark. Returns
 * where it begins; draws only when DRAW, so that it can be measured first. */
static double mf_legend(cairo_t *cr, const struct mf_panel *p, double right, double y, int draw)
{
	double x = right;
	mf_font(cr, MF_FS_SMALL, 0);
	for (size_t i = 0; i < p->ns + 2; i++) {
		int m = i < 2 ? (int)i : -1, dev = i < 2 ? 0 : p->s[p->ns + 1 - i].device;
		char *t = m == 0    ? mf_xstrdup("process peak")
			  : m == 1  ? mf_xstrdup("stage peak")
			  : dev < 0 ? mf_xstrdup("CPU live")
				    : mf_xasprintf("GPU %d live", dev);
		x -= mf_text_w(cr, t);
		if (draw) {
			cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
			cairo_move_to(cr, x, y);
			mf_show_text(cr, t);
			m >= 0 ? mf_legend_mark(cr, m, x, y) : mf_legend_swatch(cr, dev, x, y);
		}
		x -= 22 + 14;
		free(t);
	}
	return x;
}

static void mf_panel_head(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, double y, int with_argv)
{
	char *t = mf_panel_title(p->f), *a = with_argv ? mf_argv_text(p->f) : NULL;
	char *full = a ? mf_xasprintf("%s · %s", t, a) : mf_xstrdup(t);
	/* The legend only where it leaves the title (pid, rank) room. */
	double left = mf_legend(cr, p, fr->x + fr->w, y, 0);
	mf_font(cr, MF_FS_PANEL, 1);
	if (left - fr->x - 10 >= fmin(mf_text_w(cr, t), fr->w / 2))
		mf_legend(cr, p, fr->x + fr->w, y, 1);
	else
		left = fr->x + fr->w + 10;
	mf_font(cr, MF_FS_PANEL, 1);
	cairo_set_source_rgb(cr, p->f->complete ? 0.1 : 0.7, 0.1, 0.1);
	mf_text_fit(cr, fr->x, y, full, left - fr->x - 10);
	free(t), free(a), free(full);
}

static void mf_no_timeline(cairo_t *cr, const struct mf_frame *fr)
{
	const char *t = "no timeline recorded: stage bands and peaks only";
	mf_font(cr, MF_FS_PANEL, 0);
	cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
	cairo_move_to(cr, fr->x + (fr->w - mf_text_w(cr, t)) / 2, fr->y + fr->h * 0.45);
	mf_show_text(cr, t);
}

/* The panel fills Y .. Y+H: title line, plot area, then one row of bands per nesting level. */
void mf_draw_panel(cairo_t *cr, struct mf_panel *p, struct mf_frame *fr, double y, double h, int with_argv)
{
	struct mf_ticks yt;
	struct mf_room room = { { 0 }, { 0 } };
	int rows = p->nrows ? p->nrows : 1;
	fr->row_h = fmin(16, fmax(4, h / 12));
	fr->y = y + MF_TITLE_H;
	fr->h = fmax(10, h - MF_TITLE_H - rows * fr->row_h - 4);
	fr->band_y = fr->y + fr->h + 2;
	mf_ticks_bytes(p->vmax, &yt);
	mf_panel_head(cr, p, fr, y + 14, with_argv);
	mf_draw_bands(cr, p, fr);
	mf_draw_grid(cr, fr, &yt);
	if (!p->has_timeline)
		mf_no_timeline(cr, fr);
	mf_draw_series(cr, p, fr, &yt, &room);
	mf_draw_peaks(cr, p, fr, &yt, &room);
	mf_room_free(&room);
}
