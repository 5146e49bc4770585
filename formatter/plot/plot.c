/* --plot: the page (title, panels stacked on one time axis) and writing it as SVG or PNG. */
#include "plot/plot.h"
#include "base/base.h"
#include "model/combined.h"
#include "model/document.h"

#include <cairo-svg.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum { MF_HEAD_H = 40, MF_FOOT_H = 46, MF_GAP = 14, MF_PAGE_L = 74, MF_PAGE_R = 24 };

int mf_plot_kind(const char *path)
{
	size_t n = strlen(path);
	if (n > 4 && !strcasecmp(path + n - 4, ".svg"))
		return 1;
	if (n > 4 && !strcasecmp(path + n - 4, ".png"))
		return 2;
	return 0;
}

/* The output stream; a failed write is remembered so that it is reported once, with its errno. */
struct mf_sink {
	FILE *fp;
	int err;
};

static cairo_status_t mf_sink_write(void *closure, const unsigned char *data, unsigned int len)
{
	struct mf_sink *s = closure;
	if (!s->err && fwrite(data, 1, len, s->fp) != len)
		s->err = errno ? errno : EIO;
	return s->err ? CAIRO_STATUS_WRITE_ERROR : CAIRO_STATUS_SUCCESS;
}

/* The page head: the command line of the first process (the root, or the lowest rank). */
static void mf_page_title(cairo_t *cr, const struct mf_file *files, size_t n, double w)
{
	char *argv = mf_argv_text(&files[0]);
	char *t = n > 1 ? mf_xasprintf("memshim · %zu processes · %s", n, argv) : mf_xasprintf("memshim · %s", argv);
	mf_font(cr, MF_FS_TITLE, 1);
	cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
	mf_text_fit(cr, MF_PAGE_L, 26, t, w - MF_PAGE_L - MF_PAGE_R);
	free(argv), free(t);
}

/* The shared time axis under the last panel. */
static void mf_time_axis(cairo_t *cr, const struct mf_frame *fr, double y, size_t n, int aligned)
{
	mf_font(cr, MF_FS_SMALL, 0);
	cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
	for (double t = 0; t * fr->xt->unit <= fr->tmax * (1 + 1e-9); t += fr->xt->step) {
		double x = fr->x + t * fr->xt->unit / fr->tmax * fr->w;
		char *s = mf_tick_label(fr->xt, t, 0);
		cairo_move_to(cr, x - mf_text_w(cr, s) / 2, y + 14);
		mf_show_text(cr, s);
		free(s);
	}
	char *s = mf_xasprintf("time since %s started (%s)",
			       n == 1    ? "the process"
			       : aligned ? "the first process"
					 : "each process (not one run: started far apart)",
			       fr->xt->uname);
	cairo_move_to(cr, fr->x + (fr->w - mf_text_w(cr, s)) / 2, y + 32);
	mf_show_text(cr, s);
	free(s);
}

/* The earliest start_time, or NAN when the files cannot be one run: their starts lie further apart
 * than a minute and twice the longest of them, so each is drawn from its own start instead. */
static double mf_earliest(const struct mf_file *files, size_t n)
{
	double t0 = INFINITY, t1 = -INFINITY, longest = 0;
	for (size_t i = 0; i < n; i++) {
		if (!files[i].has_times || !isfinite(files[i].start_time))
			continue;
		t0 = fmin(t0, files[i].start_time);
		t1 = fmax(t1, files[i].start_time);
		longest = fmax(longest, files[i].end_time - files[i].start_time);
	}
	return t1 - t0 > fmax(60, 2 * longest) ? NAN : t0;
}

static void mf_draw_page(cairo_t *cr, struct mf_file *files, size_t n, int w, int h)
{
	struct mf_panel *p = mf_xmalloc(n * sizeof *p);
	struct mf_names names = { 0 };
	struct mf_ticks xt;
	double t0 = mf_earliest(files, n), tmax = 0;
	for (size_t i = 0; i < n; i++) {
		double off = files[i].has_times && isfinite(t0) ? files[i].start_time - t0 : 0;
		mf_panel_build(&files[i], off, &p[i]);
		tmax = fmax(tmax, off + p[i].end);
		for (size_t k = 0; k < json_array_size(files[i].stages); k++)
			mf_names_add(&names,
				     json_string_value(json_object_get(json_array_get(files[i].stages, k), "name")));
	}
	/* One memory scale for every panel, so ranks and children compare at a glance. */
	double vmax = 0;
	for (size_t i = 0; i < n; i++)
		vmax = fmax(vmax, p[i].vmax);
	for (size_t i = 0; i < n; i++)
		p[i].vmax = vmax;
	/* The axis ends at the end of the data, not at the next tick: no empty stretch at the right. */
	mf_ticks_time(tmax, &xt);
	struct mf_frame fr = { .x = MF_PAGE_L,
			       .w = fmax(10, w - MF_PAGE_L - MF_PAGE_R),
			       .tmax = tmax > 0 && isfinite(tmax) ? tmax * 1.01 : xt.top * xt.unit,
			       .xt = &xt,
			       .names = &names };
	/* Several processes of one run: first what they held together (issue 42). */
	struct mf_combined *c = NULL;
	size_t nc = n > 1 && !isnan(t0) ? mf_combined_build(files, n, &c) : 0, np = n + nc;
	double ph = fmax(20, (h - MF_HEAD_H - MF_FOOT_H - (double)(np - 1) * MF_GAP) / np);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	mf_page_title(cr, files, n, w);
	double axis_y = 0;
	for (size_t k = 0; k < nc; k++)
		mf_draw_stack(cr, files, n, &c[k], t0, &fr, MF_HEAD_H + k * (ph + MF_GAP), ph);
	if (c)
		mf_combined_free(c, nc);
	for (size_t i = 0; i < n; i++) {
		mf_draw_panel(cr, &p[i], &fr, MF_HEAD_H + (i + nc) * (ph + MF_GAP), ph, n > 1);
		axis_y = fr.band_y + (p[i].nrows ? p[i].nrows : 1) * fr.row_h;
		mf_panel_free(&p[i]);
	}
	mf_time_axis(cr, &fr, axis_y, n, !isnan(t0));
	free(names.name);
	free(p);
}

static cairo_surface_t *mf_surface(int kind, struct mf_sink *sink, int w, int h)
{
	if (kind == 2)
		return cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
	cairo_surface_t *s = cairo_svg_surface_create_for_stream(mf_sink_write, sink, w, h);
	cairo_svg_surface_set_document_unit(s, CAIRO_SVG_UNIT_PX);
	return s;
}

/* Draws, then writes: a PNG from the pixels, an SVG as its surface is finished.  WORDS (an SVG's
 * stream) keeps the words drawn (mf_show_text) instead of cairo's glyph outlines. */
static cairo_status_t mf_draw_surface(int kind, struct mf_sink *sink, int w, int h, mf_draw_fn *draw, void *arg,
				      FILE *words)
{
	cairo_surface_t *s = mf_surface(kind, sink, w, h);
	cairo_status_t st = cairo_surface_status(s);
	if (st == CAIRO_STATUS_SUCCESS) {
		cairo_t *cr = cairo_create(s);
		mf_words_to(words);
		draw(cr, arg, w, h);
		mf_words_to(NULL);
		st = cairo_status(cr);
		cairo_destroy(cr);
	}
	if (st == CAIRO_STATUS_SUCCESS && kind == 2)
		st = cairo_surface_write_to_png_stream(s, mf_sink_write, sink);
	cairo_surface_finish(s);
	if (st == CAIRO_STATUS_SUCCESS)
		st = cairo_surface_status(s);
	cairo_surface_destroy(s);
	return st;
}

/* An SVG is drawn by cairo into memory and its words kept apart; written out with the words as
 * <text> elements in the picture's font, on top, before the document's end: selectable, searchable
 * and a fraction of the glyph outlines' bytes. */
static cairo_status_t mf_render(int kind, struct mf_sink *sink, int w, int h, mf_draw_fn *draw, void *arg)
{
	if (kind != 1)
		return mf_draw_surface(kind, sink, w, h, draw, arg, NULL);
	char *svg = NULL, *txt = NULL;
	size_t nsvg = 0, ntxt = 0;
	struct mf_sink mem = { open_memstream(&svg, &nsvg), 0 };
	FILE *words = open_memstream(&txt, &ntxt);
	if (!mem.fp || !words)
		mf_oom();
	cairo_status_t st = mf_draw_surface(kind, &mem, w, h, draw, arg, words);
	if (fclose(mem.fp) || fclose(words) || mem.err)
		mf_oom();
	const char *end = NULL;
	for (const char *p = svg; (p = strstr(p, "</svg>")); p++)
		end = p;
	if (st == CAIRO_STATUS_SUCCESS && end) {
		static const char head[] = "<g font-family=\"" MF_PLOT_FONT ", sans-serif\">\n", tail[] = "</g>\n";
		mf_sink_write(sink, (const unsigned char *)svg, (unsigned)(end - svg));
		mf_sink_write(sink, (const unsigned char *)head, sizeof head - 1);
		mf_sink_write(sink, (const unsigned char *)txt, (unsigned)ntxt);
		mf_sink_write(sink, (const unsigned char *)tail, sizeof tail - 1);
		mf_sink_write(sink, (const unsigned char *)end, (unsigned)(nsvg - (size_t)(end - svg)));
		if (sink->err)
			st = CAIRO_STATUS_WRITE_ERROR;
	} else if (st == CAIRO_STATUS_SUCCESS) {
		st = CAIRO_STATUS_WRITE_ERROR;
	}
	free(svg), free(txt);
	return st;
}

int mf_picture(FILE *err, const char *path, int w, int h, mf_draw_fn *draw, void *arg)
{
	struct mf_sink sink = { fopen(path, "wb"), 0 };
	if (!sink.fp) {
		fprintf(err, "memshim-format: %s: cannot write: %s\n", path, strerror(errno));
		return MF_BAD;
	}
	errno = 0;
	cairo_status_t st = mf_render(mf_plot_kind(path), &sink, w, h, draw, arg);
	if (fclose(sink.fp) && !sink.err)
		sink.err = errno ? errno : EIO;
	if (st == CAIRO_STATUS_SUCCESS && !sink.err)
		return MF_OK;
	if (sink.err)
		fprintf(err, "memshim-format: %s: cannot write: %s\n", path, strerror(sink.err));
	else
		fprintf(err, "memshim-format: %s: cannot draw: %s\n", path, cairo_status_to_string(st));
	unlink(path);
	return MF_BAD;
}

struct mf_page {
	struct mf_file *files;
	size_t n;
};

static void mf_draw_plot(cairo_t *cr, void *arg, int w, int h)
{
	struct mf_page *p = arg;
	mf_draw_page(cr, p->files, p->n, w, h);
}

int mf_plot(FILE *err, struct mf_file *files, size_t n, const char *path, int w, int h)
{
	struct mf_page page = { files, n };
	return mf_picture(err, path, w, h, mf_draw_plot, &page);
}
