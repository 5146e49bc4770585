/* --flame: a stage's peak call sites as a flame graph: the outermost callers at the bottom, each
 * frame as wide as the bytes live under it at the peak, merged by common prefix. */
#include "plot/plot.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "model/sites.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MF_FL_W = 1200, MF_FL_HEAD = 90, MF_FL_FOOT = 34, MF_FL_ROW = 17, MF_FL_SIDE = 10 };
/* Frames used per site, from the outermost, and sites drawn on their own: a file far beyond the
 * shim's own limits (64 frames, 50 sites) stays quick to draw; smaller sites share one box. */
enum { MF_FL_FRAMES = 256, MF_FL_SITES = 2000 };

static struct mf_fnode *mf_fnode_kid(struct mf_fnode *n, const char *label)
{
	for (size_t i = 0; i < n->nkids; i++)
		if (!strcmp(n->kid[i].label, label))
			return &n->kid[i];
	if (n->nkids == n->cap) {
		n->cap = n->cap ? n->cap * 2 : 4;
		n->kid = mf_xrealloc(n->kid, n->cap * sizeof *n->kid);
	}
	n->kid[n->nkids] = (struct mf_fnode){ label, 0, NULL, 0, 0 };
	return &n->kid[n->nkids++];
}

static int mf_fnode_cmp(const void *a, const void *b)
{
	const struct mf_fnode *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return strcmp(x->label, y->label);
}

static void mf_fnode_sort(struct mf_fnode *n)
{
	if (n->nkids > 1)
		qsort(n->kid, n->nkids, sizeof *n->kid, mf_fnode_cmp);
	for (size_t i = 0; i < n->nkids; i++)
		mf_fnode_sort(&n->kid[i]);
}

void mf_flame_tree(const struct mf_sites *s, struct mf_fnode *root)
{
	memset(root, 0, sizeof *root);
	for (size_t i = 0; i < s->n; i++) {
		const struct mf_site *site = &s->s[i];
		size_t nf = mf_site_nframes(site), stop = nf > MF_FL_FRAMES ? nf - MF_FL_FRAMES : 0;
		struct mf_fnode *node = root;
		root->bytes += site->bytes;
		if (i >= MF_FL_SITES) {
			mf_fnode_kid(root, "(smaller sites)")->bytes += site->bytes;
			continue;
		}
		for (size_t k = nf; k-- > stop;) {
			node = mf_fnode_kid(node, mf_site_frame(site, k));
			node->bytes += site->bytes;
		}
	}
	mf_fnode_sort(root);
}

void mf_flame_free(struct mf_fnode *n)
{
	for (size_t i = 0; i < n->nkids; i++)
		mf_flame_free(&n->kid[i]);
	free(n->kid);
	memset(n, 0, sizeof *n);
}

int mf_flame_depth(const struct mf_fnode *n)
{
	int d = 0;
	for (size_t i = 0; i < n->nkids; i++) {
		int k = mf_flame_depth(&n->kid[i]);
		d = k > d ? k : d;
	}
	return d + 1;
}

/* The stage to draw: the asked one, or the one with the largest peak, in the process that
 * peaked highest there (the first on ties). */
struct mf_flame_pick {
	const struct mf_file *f;
	json_t *stage;
	double peak;
};

static void mf_flame_choose(struct mf_file *files, size_t n, const struct mf_opts *o, struct mf_flame_pick *p)
{
	memset(p, 0, sizeof *p);
	for (size_t i = 0; i < n; i++) {
		size_t k;
		json_t *st;
		json_array_foreach(files[i].stages, k, st) {
			struct mf_sites s;
			const char *name = json_string_value(json_object_get(st, "name"));
			if (o->stage && strcmp(name, o->stage))
				continue;
			mf_sites_get(st, o->flame_gpu, &s);
			double peak = mf_stage_peak(st, o->flame_gpu);
			peak = peak >= 0 ? peak : s.total;
			if (s.n && (!p->f || peak > p->peak))
				*p = (struct mf_flame_pick){ &files[i], st, peak };
			mf_sites_free(&s);
		}
	}
}

static int mf_flame_none(FILE *err, struct mf_file *files, size_t n, const struct mf_opts *o)
{
	const char *more = n > 1 ? " or the other files" : "";
	int any = 0;
	for (size_t i = 0; i < n; i++)
		any |= mf_file_has_sites(&files[i]);
	if (!any)
		fprintf(err,
			"memshim-format: no call sites to draw in %s%s: sampling was off "
			"(MEMSHIM_SITES=0), or the file predates call-site sampling\n",
			files[0].path, more);
	else if (o->stage)
		fprintf(err, "memshim-format: no %s call sites for stage \"%s\" in %s%s\n",
			o->flame_gpu ? "GPU" : "CPU", o->stage, files[0].path, more);
	else
		fprintf(err, "memshim-format: no %s call sites in %s%s\n", o->flame_gpu ? "GPU" : "CPU", files[0].path,
			more);
	return MF_BAD;
}

struct mf_flame_page {
	const struct mf_file *f;
	json_t *stage;
	int gpu;
	struct mf_sites s;
	struct mf_fnode root;
	int rows;
	double base; /* what the tooltips' shares are of (as --sites's) */
	char *of;    /* "of the stage's need (42.0 MB)" */
};

/* The function's name only (up to "+0x" or " ("), so its call sites share one colour. */
static unsigned mf_hash(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s && strncmp(s, "+0x", 3) && strncmp(s, " (", 2); s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Python frames green-yellow, native ones warm, addresses without a symbol grey; the shade
 * follows the name so a function keeps its colour everywhere. */
static struct mf_rgb mf_frame_colour(const char *label)
{
	if (!label)
		return (struct mf_rgb){ 0.82, 0.82, 0.82 };
	double v = (mf_hash(label) % 1000) / 1000.0;
	if (strstr(label, ".py:"))
		return (struct mf_rgb){ 0.55 + 0.35 * v, 0.80 + 0.15 * v, 0.30 + 0.2 * v };
	if (!strncmp(label, "0x", 2))
		return (struct mf_rgb){ 0.70 + 0.1 * v, 0.72 + 0.1 * v, 0.78 + 0.1 * v };
	return (struct mf_rgb){ 0.90 + 0.1 * v, 0.35 + 0.45 * v, 0.15 + 0.15 * v };
}

/* Where the graph goes: drawn by cairo (a PNG), or written as SVG elements (text stays text);
 * cairo measures the text for both, so labels fit alike. */
struct mf_canvas {
	cairo_t *cr;
	FILE *svg; /* NULL: draw with cr */
};

enum mf_ink { MF_INK_TITLE, MF_INK_SUB, MF_INK_LABEL, MF_INK_NOTE };

static void mf_cv_font(const struct mf_canvas *cv, enum mf_ink ink)
{
	static const double size[] = { MF_FS_TITLE, MF_FS_PANEL, MF_FS_SMALL, MF_FS_SMALL };
	static const double grey[] = { 0.1, 0.3, 0.1, 0.3 };
	mf_font(cv->cr, size[ink], ink == MF_INK_TITLE);
	cairo_set_source_rgb(cv->cr, grey[ink], grey[ink], grey[ink]);
}

/* S at (X, Y), shortened in the middle to fit W. */
static void mf_cv_text(const struct mf_canvas *cv, double x, double y, enum mf_ink ink, const char *s, double w)
{
	static const char *const cls[] = { "h", "p", NULL, "q" };
	mf_cv_font(cv, ink);
	char *t = mf_text_fitted(cv->cr, s, w);
	if (t && cv->svg)
		mf_svg_text(cv->svg, x, y, cls[ink], t);
	else if (t)
		cairo_move_to(cv->cr, x, y), cairo_show_text(cv->cr, t);
	free(t);
}

static void mf_cv_rect(const struct mf_canvas *cv, double x, double y, double w, double h, struct mf_rgb c)
{
	if (cv->svg) {
		mf_svg_rect(cv->svg, x, y, w, h, c);
		return;
	}
	mf_set_rgb(cv->cr, c, 1);
	cairo_rectangle(cv->cr, x, y, w, h);
	cairo_fill(cv->cr);
}

struct mf_flame_frame {
	double x0, bottom, row_h, scale;
};

/* A frame's tooltip: its whole name, then its bytes and their share ("all": the sum listed). */
static void mf_flame_tooltip(FILE *svg, const struct mf_flame_page *p, const struct mf_fnode *nd, const char *shown)
{
	char *bytes = mf_fmt_bytes_cut(nd->bytes);
	char *tip = mf_xasprintf("%s%s\n%s, %.1f%% %s", shown, nd->label ? "" : ": every stack listed", bytes,
				 p->base > 0 ? 100 * nd->bytes / p->base : 0.0, p->of);
	fputs("<g><title>", svg);
	mf_svg_escaped(svg, tip, 1);
	fputs("</title>", svg);
	free(bytes), free(tip);
}

/* "name · 60.0 MB" when it fits, else the name alone, shortened to fit. */
static void mf_flame_label(const struct mf_canvas *cv, const char *clean, double bytes, double x, double y, double w)
{
	char *b = mf_fmt_bytes_cut(bytes), *text = mf_xasprintf("%s · %s", clean, b);
	mf_cv_font(cv, MF_INK_LABEL);
	mf_cv_text(cv, x, y, MF_INK_LABEL, mf_text_w(cv->cr, text) <= w ? text : clean, w);
	free(b), free(text);
}

static void mf_flame_node(const struct mf_canvas *cv, const struct mf_flame_page *p, const struct mf_fnode *nd,
			  const struct mf_flame_frame *fr, double x, int row)
{
	double w = nd->bytes * fr->scale, y = fr->bottom - (row + 1) * fr->row_h;
	if (w < 0.25 || y < MF_FL_HEAD - 1)
		return;
	char *shown = mf_frame_display(nd->label ? nd->label : "all"), *clean = mf_clean_text(shown);
	if (cv->svg)
		mf_flame_tooltip(cv->svg, p, nd, clean);
	mf_cv_rect(cv, x, y, w > 2 ? w - 1 : w, fr->row_h - 1, mf_frame_colour(nd->label));
	if (fr->row_h >= 13 && w > 12)
		mf_flame_label(cv, clean, nd->bytes, x + 3, y + fr->row_h - 5, w - 7);
	if (cv->svg)
		fputs("</g>\n", cv->svg);
	free(shown), free(clean);
	for (size_t i = 0; i < nd->nkids; i++) {
		mf_flame_node(cv, p, &nd->kid[i], fr, x, row + 1);
		x += nd->kid[i].bytes * fr->scale;
	}
}

/* The stage, how its sites were taken, and what the graph holds: the list (its sum is the base
 * bar), what the shares are of, and how much of it is exact. */
static void mf_flame_titles(const struct mf_canvas *cv, const struct mf_flame_page *p, double w)
{
	const char *name = json_string_value(json_object_get(p->stage, "name"));
	char *about = mf_sites_about(p->f, p->stage, p->gpu, &p->s);
	char *proc = mf_proc_label(p->f), *argv = mf_argv_text(p->f), *clean = mf_clean_text(name);
	char *title = mf_xasprintf("memshim · %s call sites at the peak of %s", p->gpu ? "GPU" : "CPU", clean);
	char *sub = mf_xasprintf("%s · %s · %s", about, proc, argv), *list, *exact;
	double tw = w - 2 * MF_FL_SIDE;
	mf_flame_list_lines(p->stage, p->gpu, &p->s, &list, &exact);
	mf_cv_text(cv, MF_FL_SIDE, 24, MF_INK_TITLE, title, tw);
	mf_cv_text(cv, MF_FL_SIDE, 44, MF_INK_SUB, sub, tw);
	mf_cv_text(cv, MF_FL_SIDE, 61, MF_INK_SUB, list, tw);
	mf_cv_text(cv, MF_FL_SIDE, 78, MF_INK_SUB, exact, tw);
	free(about), free(proc), free(argv), free(clean), free(title), free(sub), free(list), free(exact);
}

static void mf_flame_paint(const struct mf_canvas *cv, const struct mf_flame_page *p, int w, int h)
{
	struct mf_flame_frame fr = { MF_FL_SIDE, h - MF_FL_FOOT, 0, 0 };
	fr.row_h = fmin(MF_FL_ROW, (h - MF_FL_HEAD - MF_FL_FOOT) / (double)p->rows);
	fr.scale = p->root.bytes > 0 ? (w - 2.0 * MF_FL_SIDE) / p->root.bytes : 0;
	if (!cv->svg) {
		cairo_set_source_rgb(cv->cr, 1, 1, 1);
		cairo_paint(cv->cr);
	}
	mf_flame_titles(cv, p, w);
	if (p->root.bytes > 0)
		mf_flame_node(cv, p, &p->root, &fr, fr.x0, 0);
	mf_cv_text(cv, MF_FL_SIDE, h - 12, MF_INK_NOTE,
		   "width: bytes live at the peak, the bottom bar "
		   "their sum · callers below, the allocating frame on top · Python frames green, native "
		   "warm",
		   w - 2 * MF_FL_SIDE);
}

static void mf_flame_draw(cairo_t *cr, void *arg, int w, int h)
{
	struct mf_canvas cv = { cr, NULL };
	mf_flame_paint(&cv, arg, w, h);
}

/* The SVG as text; cairo (on a pixel it never draws) only measures. */
static int mf_flame_svg(FILE *err, const char *path, const struct mf_flame_page *p, int w, int h)
{
	cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_A8, 1, 1);
	struct mf_canvas cv = { cairo_create(s), NULL };
	char *text = NULL;
	size_t n = 0;
	if (!(cv.svg = open_memstream(&text, &n)))
		mf_oom();
	mf_svg_begin(cv.svg, w, h);
	mf_flame_paint(&cv, p, w, h);
	mf_svg_end(cv.svg);
	if (fclose(cv.svg))
		mf_oom();
	cairo_destroy(cv.cr);
	cairo_surface_destroy(s);
	int rc = mf_write_picture(err, path, text, n);
	free(text);
	return rc;
}

void mf_flame_list_lines(json_t *stage, int gpu, const struct mf_sites *s, char **list, char **exact)
{
	*list = mf_sites_summary(stage, gpu, MF_ADDED, s, mf_fmt_bytes_cut, NULL);
	*exact = mf_sites_exact_text(s, mf_fmt_bytes_cut, 1);
	if (!*exact)
		*exact = mf_xstrdup(gpu ? "all of it exact: every allocation recorded at its size"
					: "how much of it is exact is not said (an older file)");
}

char *mf_flame_share_of(json_t *stage, int gpu, const struct mf_sites *s, double *base)
{
	enum mf_base kind;
	*base = mf_sites_base(stage, gpu, MF_ADDED, s, &kind);
	char *b = mf_fmt_bytes_cut(*base), *of;
	if (kind == MF_BASE_NEED)
		of = mf_xasprintf("of the stage's need (%s)", b);
	else if (kind == MF_BASE_PEAK)
		of = mf_xasprintf("of the stage's peak (%s)", b);
	else
		of = mf_xstrdup("of the bytes listed");
	free(b);
	return of;
}

int mf_flame(FILE *err, struct mf_file *files, size_t n, const struct mf_opts *o)
{
	struct mf_flame_pick pick;
	mf_flame_choose(files, n, o, &pick);
	if (!pick.f)
		return mf_flame_none(err, files, n, o);
	struct mf_flame_page p;
	memset(&p, 0, sizeof p);
	p.f = pick.f, p.stage = pick.stage, p.gpu = o->flame_gpu;
	mf_sites_get(pick.stage, o->flame_gpu, &p.s);
	mf_flame_tree(&p.s, &p.root);
	p.rows = mf_flame_depth(&p.root);
	p.of = mf_flame_share_of(p.stage, p.gpu, &p.s, &p.base);
	double want = MF_FL_HEAD + MF_FL_FOOT + (double)p.rows * MF_FL_ROW;
	int w = o->plot_w ? o->plot_w : MF_FL_W;
	int h = o->plot_h ? o->plot_h : (int)fmax(MF_PLOT_MIN, fmin(MF_PLOT_MAX, want));
	int rc = mf_plot_kind(o->mode_arg) == 1 ? mf_flame_svg(err, o->mode_arg, &p, w, h)
						: mf_picture(err, o->mode_arg, w, h, mf_flame_draw, &p);
	mf_flame_free(&p.root);
	mf_sites_free(&p.s);
	free(p.of);
	return rc;
}
