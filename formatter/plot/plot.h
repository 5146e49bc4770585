/* memshim-format --plot and --flame: what a picture of a run is made of, and the functions that draw
 * it. Reads the model (model/) only; the modes (modes/) call it. */
#ifndef MF_PLOT_H
#define MF_PLOT_H

#include "model/document.h"
#include "model/opts.h"
#include "model/sites.h"

#include <stdio.h>

#include <cairo.h>

/* Default picture: MF_PLOT_W x (MF_PLOT_H0 + MF_PLOT_HP per panel), within MF_PLOT_MIN..MAX. */
enum { MF_PLOT_W = 1200, MF_PLOT_H0 = 300, MF_PLOT_HP = 250, MF_PLOT_MIN = 200, MF_PLOT_MAX = 16000 };
/* Band rows per panel; deeper nesting shares the last row. */
enum { MF_PLOT_ROWS = 4 };

/* Font sizes in pixels; the tests decode the SVG's glyphs at these sizes. */
#define MF_PLOT_FONT "DejaVu Sans"
#define MF_FS_TITLE 15.0
#define MF_FS_PANEL 12.0
#define MF_FS_SMALL 10.5
extern const double mf_plot_font_sizes[3];

struct mf_rgb {
	double r, g, b;
};

struct mf_pt {
	double t, v; /* seconds since the process's start_time, bytes */
};

/* One line: CPU live memory (device -1) or one GPU's. */
struct mf_series {
	int device;
	struct mf_pt *p; /* owned, in time order */
	size_t n;
	double peak;   /* the process peak of this component, or -1 when unknown */
	double peak_t; /* when it was reached, or -1 when unknown */
};

/* One stage call, or after mf_bands_merge a run of neighbouring calls too thin to tell apart. */
struct mf_band {
	const char *stage; /* borrowed from the file */
	double t0, t1;
	int row, calls, open;
	const char *other; /* a second stage in a merged run, or NULL */
	int kinds;         /* how many stages the run holds (counting stops at 3) */
};

/* A stage's peak (of its last call) on one series. */
struct mf_peak {
	const char *stage; /* borrowed */
	int device;        /* -1: CPU */
	double t, v;
};

/* Everything drawn for one process. */
struct mf_panel {
	const struct mf_file *f;
	double offset; /* its start_time minus the earliest of all panels */
	double end;    /* its last known time, seconds since its start */
	int has_timeline;
	struct mf_series *s;
	size_t ns;
	struct mf_band *b;
	size_t nb;
	int nrows;
	struct mf_peak *pk;
	size_t npk;
	double vmax;
};

/* data.c: the panel of one file (pure: reads the JSON only). */
void mf_panel_build(const struct mf_file *f, double offset, struct mf_panel *p);
void mf_panel_free(struct mf_panel *p);
/* Where on series S the maximum within [T0, T1] lies, or -1 when no point is there. */
double mf_series_argmax(const struct mf_series *s, double t0, double t1);

/* bands.c: rows by nesting, and merging of calls too small to see apart. */
void mf_bands_rows(struct mf_band *b, size_t n, int *nrows);
size_t mf_bands_merge(struct mf_band *b, size_t n, double px_per_s, double min_px);

/* scale.c: axis ticks on a 1-2-5 scale and readable units. */
struct mf_ticks {
	double step, top;  /* tick spacing and the axis end (a multiple of step) */
	double unit;       /* bytes or seconds per displayed unit */
	const char *uname; /* "MB", "s", "min", ... */
	int decimals;
};
void mf_ticks_bytes(double vmax, struct mf_ticks *t);
void mf_ticks_time(double tmax, struct mf_ticks *t);
char *mf_tick_label(const struct mf_ticks *t, double v, int with_unit);
char *mf_fmt_secs(double s); /* "6.67 s", "12.5 min" */
/* At most four points per pixel column (first, lowest, highest, last): every extreme is kept. */
size_t mf_decimate(const struct mf_pt *in, size_t n, double px_per_s, struct mf_pt *out);

/* text.c: text that cairo accepts and that fits. */
char *mf_shorten(const char *s, size_t max); /* at most MAX code points, "…" in the middle */
char *mf_argv_text(const struct mf_file *f); /* the command line, or "(no command line)" */
char *mf_panel_title(const struct mf_file *f);
void mf_font(cairo_t *cr, double size, int bold);
/* Shows S at the current point in the font mf_font chose: drawn by cairo, or, while an SVG picture
 * is drawn (mf_words_to), kept as a <text> element of that font and colour for the picture's end,
 * so its words stay words (cairo's SVG draws glyph outlines). */
void mf_show_text(cairo_t *cr, const char *s);
void mf_words_to(FILE *fp);
double mf_text_w(cairo_t *cr, const char *s);
/* Shows S in at most W pixels (shortened in the middle when wider); returns the width drawn. */
double mf_text_fit(cairo_t *cr, double x, double y, const char *s, double w);
/* S as mf_text_fit would show it in the current font (malloc'd), or NULL when nothing fits. */
char *mf_text_fitted(cairo_t *cr, const char *s, double w);

/* label.c: labels that never overlap one another. */
struct mf_rect {
	double x0, y0, x1, y1;
};
struct mf_taken {
	struct mf_rect *r;
	size_t n, cap;
};
int mf_taken_free_at(const struct mf_taken *k, const struct mf_rect *r);
void mf_taken_add(struct mf_taken *k, const struct mf_rect *r);
/* In a plot area: marks and labels (never covered) and the memory lines (avoided when possible). */
struct mf_room {
	struct mf_taken marks, lines;
};
void mf_room_free(struct mf_room *m);

/* colour.c */
struct mf_rgb mf_series_colour(int device);
/* The pale area under every line: grey at MF_AREA_ALPHA, the colour of no stage, so what no stage
 * covers (before the first, after the last) reads as no stage's. */
struct mf_rgb mf_area_colour(void);
#define MF_AREA_ALPHA 0.10
/* Stage colours follow the order stage names first appear in any of the files. */
struct mf_names {
	const char **name; /* borrowed */
	size_t n;
};
void mf_names_add(struct mf_names *nm, const char *name);
struct mf_rgb mf_stage_colour(const struct mf_names *nm, const char *stage);
void mf_set_rgb(cairo_t *cr, struct mf_rgb c, double alpha);

/* draw.c, panel.c: one panel in the rectangle (x, y, w, h) with the shared time axis. */
struct mf_frame {
	double x, y, w, h;    /* the memory plot area */
	double band_y, row_h; /* the stage rows below it */
	double tmax;          /* the shared time axis: 0 .. tmax seconds */
	const struct mf_ticks *xt;
	const struct mf_names *names;
};
void mf_draw_panel(cairo_t *cr, struct mf_panel *p, struct mf_frame *fr, double y, double h, int with_argv);
void mf_draw_series(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, const struct mf_ticks *yt,
		    struct mf_room *room);
void mf_draw_peaks(cairo_t *cr, const struct mf_panel *p, const struct mf_frame *fr, const struct mf_ticks *yt,
		   struct mf_room *room);
void mf_draw_bands(cairo_t *cr, struct mf_panel *p, const struct mf_frame *fr);
void mf_draw_grid(cairo_t *cr, const struct mf_frame *fr, const struct mf_ticks *yt);
double mf_frame_x(const struct mf_frame *fr, const struct mf_panel *p, double t);

/* stack.c: C's component of FILES stacked on the clock from ORIGIN, its limit across, in (y, h). */
struct mf_combined;
void mf_draw_stack(cairo_t *cr, const struct mf_file *files, size_t n, const struct mf_combined *c, double origin,
		   struct mf_frame *fr, double y, double h);

/* plot.c: the picture of FILES into PATH (.svg or .png), W x H pixels. */
int mf_plot(FILE *err, struct mf_file *files, size_t n, const char *path, int w, int h);
/* 1 for "x.svg", 2 for "x.png" (any case), 0 otherwise. */
int mf_plot_kind(const char *path);
/* Any picture: DRAW paints the W x H page, written to PATH (.svg or .png); one line on ERR when
 * it cannot be written (then PATH is removed). */
typedef void mf_draw_fn(cairo_t *cr, void *arg, int w, int h);
int mf_picture(FILE *err, const char *path, int w, int h, mf_draw_fn *draw, void *arg);

/* svgdoc.c: SVG written as text (words stay <text>), and a picture's bytes written to a file. */
void mf_svg_begin(FILE *fp, int w, int h); /* the head, the text classes, a white page */
void mf_svg_end(FILE *fp);
void mf_svg_num(FILE *fp, double v);
void mf_svg_escaped(FILE *fp, const char *s, int newlines);
void mf_svg_rect(FILE *fp, double x, double y, double w, double h, struct mf_rgb c);
/* CLS: "h" (title), "p" (a panel's line), "q" (a note), NULL (a label). */
void mf_svg_text(FILE *fp, double x, double y, const char *cls, const char *s);
/* DATA into PATH, as mf_picture writes: one line on ERR and no file left when it fails. */
int mf_write_picture(FILE *err, const char *path, const char *data, size_t n);

/* flame.c: --flame, a stage's peak call sites as a flame graph (callers at the bottom). */
struct mf_fnode {
	const char *label; /* borrowed from the file; NULL for the root */
	double bytes;
	struct mf_fnode *kid; /* owned, largest first once built */
	size_t nkids, cap;
};
/* The sites merged by common prefix from their outermost frame. */
void mf_flame_tree(const struct mf_sites *s, struct mf_fnode *root);
void mf_flame_free(struct mf_fnode *n);
int mf_flame_depth(const struct mf_fnode *n); /* rows, the root's included */
/* The flame graph of O->stage (default: the stage with the largest peak) of the process that
 * peaked highest there, O->flame_gpu for the GPU sites, into O->mode_arg. */
int mf_flame(FILE *err, struct mf_file *files, size_t n, const struct mf_opts *o);
/* What a flame graph of STAGE's list S holds, as --sites says it (the base bar is its sum), and
 * how much of it is exact (both malloc'd). */
void mf_flame_list_lines(json_t *stage, int gpu, const struct mf_sites *s, char **list, char **exact);
/* "of the stage's need (42.0 MB)": what a frame's share is of, those bytes in *BASE (malloc'd). */
char *mf_flame_share_of(json_t *stage, int gpu, const struct mf_sites *s, double *base);

#endif
