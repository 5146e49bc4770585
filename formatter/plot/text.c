/* Text in the picture: cleaned for cairo, shortened to fit, and the titles of the panels. */
#include "plot/plot.h"
#include "base/base.h"
#include "model/document.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const double mf_plot_font_sizes[3] = { MF_FS_TITLE, MF_FS_PANEL, MF_FS_SMALL };

static size_t mf_cp_count(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* Byte offset of code point K. */
static size_t mf_cp_off(const char *s, size_t k)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80 && k-- == 0)
			break;
	return i;
}

char *mf_shorten(const char *s, size_t max)
{
	size_t n = mf_cp_count(s);
	if (n <= max)
		return mf_xstrdup(s);
	if (max < 2)
		return mf_xstrdup(max ? "…" : "");
	/* The start says what ran, the end which file it worked on: keep two thirds and one third. */
	size_t head = (max - 1) * 2 / 3, tail = max - 1 - head;
	size_t hb = mf_cp_off(s, head), tb = mf_cp_off(s, n - tail);
	return mf_xasprintf("%.*s…%s", (int)hb, s, s + tb);
}

char *mf_argv_text(const struct mf_file *f)
{
	json_t *argv = json_object_get(f->root, "argv"), *a;
	size_t i, len = 0;
	json_array_foreach(argv, i, a)
		len += strlen(json_string_value(a) ? json_string_value(a) : "?") + 1;
	if (!len)
		return mf_xstrdup("(no command line)");
	char *s = mf_xmalloc(len + 8);
	s[0] = '\0';
	json_array_foreach(argv, i, a) {
		strcat(s, i ? " " : "");
		strcat(s, json_string_value(a) ? json_string_value(a) : "?");
	}
	if (json_is_true(json_object_get(f->root, "argv_truncated")))
		strcat(s, " …");
	char *c = mf_clean_text(s);
	free(s);
	return c;
}

static char *mf_snapshot_text(const struct mf_file *f)
{
	if (f->complete)
		return mf_xstrdup("");
	if (f->signal)
		return mf_xasprintf(" · SNAPSHOT (signal %lld), incomplete", f->signal);
	return mf_xasprintf(" · SNAPSHOT (%s), incomplete", f->reason ? f->reason : "snapshot");
}

char *mf_panel_title(const struct mf_file *f)
{
	char *rank = f->has_rank ? mf_xasprintf(" · rank %lld of %lld", f->rank, f->world_size) : mf_xstrdup("");
	char *child = f->is_child ? mf_xasprintf(" · child of %lld (%s)", f->ppid, f->forked ? "forked" : "exec'd")
				  : mf_xstrdup("");
	char *secs = f->has_times ? mf_fmt_secs(f->end_time - f->start_time) : NULL;
	char *ran = secs ? mf_xasprintf(" · ran %s", secs) : mf_xstrdup("");
	char *snap = mf_snapshot_text(f);
	char *t = mf_xasprintf("pid %lld%s%s%s%s", f->pid, rank, child, ran, snap);
	free(rank), free(child), free(secs), free(ran), free(snap);
	return t;
}

/* The font mf_font chose last, and where an SVG picture keeps its words (NULL: cairo draws them). */
static struct {
	double size;
	int bold;
	FILE *words;
} mf_text = { .size = MF_FS_SMALL };

void mf_font(cairo_t *cr, double size, int bold)
{
	cairo_select_font_face(cr, MF_PLOT_FONT, CAIRO_FONT_SLANT_NORMAL,
			       bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, size);
	mf_text.size = size;
	mf_text.bold = bold;
}

void mf_words_to(FILE *fp)
{
	mf_text.words = fp;
}

void mf_show_text(cairo_t *cr, const char *s)
{
	if (!mf_text.words) {
		cairo_show_text(cr, s);
		return;
	}
	double x = 0, y = 0, r = 0, g = 0, b = 0, a = 1;
	if (cairo_has_current_point(cr))
		cairo_get_current_point(cr, &x, &y);
	cairo_user_to_device(cr, &x, &y);
	cairo_pattern_get_rgba(cairo_get_source(cr), &r, &g, &b, &a); /* not a colour: black */
	fputs("<text x=\"", mf_text.words);
	mf_svg_num(mf_text.words, x);
	fputs("\" y=\"", mf_text.words);
	mf_svg_num(mf_text.words, y);
	fputs("\" font-size=\"", mf_text.words);
	mf_svg_num(mf_text.words, mf_text.size);
	fprintf(mf_text.words, "\"%s fill=\"#%02x%02x%02x\"", mf_text.bold ? " font-weight=\"bold\"" : "",
		(int)lround(fmin(fmax(r, 0), 1) * 255), (int)lround(fmin(fmax(g, 0), 1) * 255),
		(int)lround(fmin(fmax(b, 0), 1) * 255));
	if (a < 1) {
		fputs(" fill-opacity=\"", mf_text.words);
		mf_svg_num(mf_text.words, a);
		fputc('"', mf_text.words);
	}
	fputc('>', mf_text.words);
	mf_svg_escaped(mf_text.words, s, 0);
	fputs("</text>\n", mf_text.words);
	cairo_rel_move_to(cr, mf_text_w(cr, s), 0); /* where cairo's own text would leave the point */
}

double mf_text_w(cairo_t *cr, const char *s)
{
	cairo_text_extents_t e;
	cairo_text_extents(cr, s, &e);
	return e.x_advance;
}

char *mf_text_fitted(cairo_t *cr, const char *s, double w)
{
	size_t max = mf_cp_count(s);
	char *t = mf_xstrdup(s);
	while (max > 1 && mf_text_w(cr, t) > w) {
		free(t);
		max = max * 9 / 10 < max - 1 ? max * 9 / 10 : max - 1;
		t = mf_shorten(s, max);
	}
	if (mf_text_w(cr, t) <= w)
		return t;
	free(t);
	return NULL;
}

double mf_text_fit(cairo_t *cr, double x, double y, const char *s, double w)
{
	char *t = mf_text_fitted(cr, s, w);
	double tw = t ? mf_text_w(cr, t) : 0;
	if (t) {
		cairo_move_to(cr, x, y);
		mf_show_text(cr, t);
	}
	free(t);
	return tw;
}
