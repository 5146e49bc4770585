/* SVG reading for the --plot and --flame tests. Cairo draws text as glyph outlines (<symbol> paths
 * used by <use>), so that text is decoded by drawing known characters in the plot's fonts and
 * matching outlines; --flame's SVG has <text> elements, <title> tooltips and <rect>s, read as they are. */
#include "svg.h"
#include "plot/plot.h"

#include <cairo-svg.h>
#include <check.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Outline -> character, from the reference drawings. */
static char **glyph_d, **glyph_ch;
static size_t nglyphs;

struct parse {
	char *symbol_id;
	char **ids, **ds;       /* symbols of this document */
	size_t nsym;
	char **hrefs;           /* the <use>s of the current group */
	size_t nhrefs;
	char ***groups;         /* finished groups of hrefs, NULL-terminated each */
	size_t ngroups;
	struct t_line *lines;
	size_t nlines;
	struct t_box *boxes;
	size_t nboxes;
	char *chars;            /* the character data of the <text> or <title> being read */
	size_t nchars;
	int in_text, in_title;
	char **texts, **titles; /* <text> elements and <title>s, in document order */
	size_t ntexts, ntitles;
	const char **gtitle;    /* the <title> of each open <g>, innermost last (NULL: none yet) */
	size_t ng;
};

static const char *attr(const char **a, const char *name)
{
	for (; a[0]; a += 2)
		if (!strcmp(a[0], name))
			return a[1];
	return NULL;
}

static void grow(void *pp, size_t n, size_t size)
{
	*(void **)pp = realloc(*(void **)pp, (n + 1) * size);
}

static size_t count_points(const char *d)
{
	size_t n = 0;
	for (; *d; d++)
		n += *d == 'M' || *d == 'L';
	return n;
}

/* The bounding box of a path of M, L and Z only; 0 when it has anything else (a curve). */
static int box_of(const char *d, struct t_box *b)
{
	double v[2];
	int k = 0, seen = 0;
	b->x0 = b->y0 = 1e300, b->x1 = b->y1 = -1e300;
	for (const char *s = d; *s;) {
		char *end;
		if (*s == ' ' || *s == 'M' || *s == 'L' || *s == 'Z') {
			s++;
			continue;
		}
		v[k] = strtod(s, &end);
		if (end == s)
			return 0;
		s = end;
		if (++k < 2)
			continue;
		k = 0, seen = 1;
		b->x0 = v[0] < b->x0 ? v[0] : b->x0, b->x1 = v[0] > b->x1 ? v[0] : b->x1;
		b->y0 = v[1] < b->y0 ? v[1] : b->y0, b->y1 = v[1] > b->y1 ? v[1] : b->y1;
	}
	return seen;
}

static void on_fill(struct parse *p, const char *d, const char *style)
{
	struct t_box b;
	const char *f = strstr(style, "fill:rgb(");
	if (!d || !box_of(d, &b) || sscanf(f, "fill:rgb(%lf%%,%lf%%,%lf%%", &b.r, &b.g, &b.b) != 3)
		return;
	b.r /= 100, b.g /= 100, b.b /= 100;
	grow(&p->boxes, p->nboxes, sizeof *p->boxes);
	p->boxes[p->nboxes++] = b;
}

static void on_path(struct parse *p, const char **a)
{
	const char *d = attr(a, "d"), *style = attr(a, "style"), *st;
	if (p->symbol_id) {
		grow(&p->ids, p->nsym, sizeof *p->ids);
		grow(&p->ds, p->nsym, sizeof *p->ds);
		p->ids[p->nsym] = strdup(p->symbol_id);
		p->ds[p->nsym++] = strdup(d ? d : "");
		return;
	}
	if (style && strstr(style, "fill:rgb(") && !strstr(style, ";stroke:rgb("))
		on_fill(p, d, style);
	struct t_line l = { 0, 0, 0, d ? count_points(d) : 0 };
	if (!style || !(st = strstr(style, ";stroke:rgb(")) ||
	    sscanf(st, ";stroke:rgb(%lf%%,%lf%%,%lf%%", &l.r, &l.g, &l.b) != 3)
		return;
	l.r /= 100, l.g /= 100, l.b /= 100;
	grow(&p->lines, p->nlines, sizeof *p->lines);
	p->lines[p->nlines++] = l;
}

/* A <rect> of the flame graph (the page's "100%" background is not one). */
static void on_rect(struct parse *p, const char **a)
{
	const char *x = attr(a, "x"), *y = attr(a, "y"), *w = attr(a, "width"), *h = attr(a, "height");
	const char *fill = attr(a, "fill");
	unsigned r, g, b;
	if (!x || !y || !w || !h || strchr(w, '%') || !fill || sscanf(fill, "#%2x%2x%2x", &r, &g, &b) != 3)
		return;
	struct t_box box = { atof(x), atof(y), atof(x) + atof(w), atof(y) + atof(h), r / 255.0,
			     g / 255.0, b / 255.0, p->ng ? p->gtitle[p->ng - 1] : NULL };
	grow(&p->boxes, p->nboxes, sizeof *p->boxes);
	p->boxes[p->nboxes++] = box;
}

static void XMLCALL on_chars(void *ud, const char *s, int len)
{
	struct parse *p = ud;
	if (!p->in_text && !p->in_title)
		return;
	p->chars = realloc(p->chars, p->nchars + (size_t)len + 1);
	memcpy(p->chars + p->nchars, s, (size_t)len);
	p->nchars += (size_t)len;
	p->chars[p->nchars] = '\0';
}

/* The character data read since the element began (malloc'd). */
static char *take_chars(struct parse *p)
{
	char *t = p->chars ? p->chars : strdup("");
	p->chars = NULL, p->nchars = 0;
	return t;
}

static void XMLCALL on_start(void *ud, const char *name, const char **a)
{
	struct parse *p = ud;
	if (!strcmp(name, "text") || !strcmp(name, "title")) {
		free(take_chars(p));
		p->in_text = !strcmp(name, "text"), p->in_title = !p->in_text;
	} else if (!strcmp(name, "g")) {
		grow(&p->gtitle, p->ng, sizeof *p->gtitle);
		p->gtitle[p->ng++] = NULL;
	} else if (!strcmp(name, "rect")) {
		on_rect(p, a);
	} else if (!strcmp(name, "symbol")) {
		free(p->symbol_id);
		p->symbol_id = strdup(attr(a, "id") ? attr(a, "id") : "");
	} else if (!strcmp(name, "path")) {
		on_path(p, a);
	} else if (!strcmp(name, "use") && attr(a, "xlink:href")) {
		grow(&p->hrefs, p->nhrefs, sizeof *p->hrefs);
		p->hrefs[p->nhrefs++] = strdup(attr(a, "xlink:href") + 1);
	}
}

static void XMLCALL on_end(void *ud, const char *name)
{
	struct parse *p = ud;
	if (!strcmp(name, "text") && p->in_text) {
		grow(&p->texts, p->ntexts, sizeof *p->texts);
		p->texts[p->ntexts++] = take_chars(p);
		p->in_text = 0;
	} else if (!strcmp(name, "title") && p->in_title) {
		grow(&p->titles, p->ntitles, sizeof *p->titles);
		p->titles[p->ntitles] = take_chars(p);
		if (p->ng)
			p->gtitle[p->ng - 1] = p->titles[p->ntitles];
		p->ntitles++;
		p->in_title = 0;
	}
	if (!strcmp(name, "g") && p->ng)
		p->ng--;
	if (!strcmp(name, "symbol")) {
		free(p->symbol_id);
		p->symbol_id = NULL;
	} else if (!strcmp(name, "g") && p->nhrefs) {
		grow(&p->hrefs, p->nhrefs, sizeof *p->hrefs);
		p->hrefs[p->nhrefs] = NULL;
		grow(&p->groups, p->ngroups, sizeof *p->groups);
		p->groups[p->ngroups++] = p->hrefs;
		p->hrefs = NULL, p->nhrefs = 0;
	}
}

static int parse_xml(const char *text, size_t len, struct parse *p, char **error)
{
	XML_Parser x = XML_ParserCreate("UTF-8");
	memset(p, 0, sizeof *p);
	XML_SetUserData(x, p);
	XML_SetElementHandler(x, on_start, on_end);
	XML_SetCharacterDataHandler(x, on_chars);
	int ok = XML_Parse(x, text, (int)len, 1) == XML_STATUS_OK;
	if (!ok && error && asprintf(error, "line %lu: %s", (unsigned long)XML_GetCurrentLineNumber(x),
				     XML_ErrorString(XML_GetErrorCode(x))) < 0)
		*error = NULL;
	XML_ParserFree(x);
	return ok ? 0 : -1;
}

static const char *symbol_d(const struct parse *p, const char *id)
{
	for (size_t i = 0; i < p->nsym; i++)
		if (!strcmp(p->ids[i], id))
			return p->ds[i];
	return NULL;
}

static void parse_free(struct parse *p)
{
	for (size_t i = 0; i < p->nsym; i++)
		free(p->ids[i]), free(p->ds[i]);
	for (size_t g = 0; g < p->ngroups; g++) {
		for (char **h = p->groups[g]; *h; h++)
			free(*h);
		free(p->groups[g]);
	}
	for (size_t i = 0; i < p->nhrefs; i++)
		free(p->hrefs[i]);
	for (size_t i = 0; i < p->ntexts; i++)
		free(p->texts[i]);
	for (size_t i = 0; i < p->ntitles; i++)
		free(p->titles[i]);
	free(p->ids), free(p->ds), free(p->groups), free(p->hrefs), free(p->lines), free(p->boxes);
	free(p->symbol_id), free(p->chars), free(p->texts), free(p->titles), free(p->gtitle);
}

static cairo_status_t to_memory(void *closure, const unsigned char *data, unsigned int len)
{
	return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* The characters the plot may show, one code point each. */
static const char *const ref_chars[] = { "×", "…", "·", "(", ")", "+", ",", ".", ":", "'", "-",
					 "%", "/", "_", "=", NULL };

static void add_ref_font(double size, int bold)
{
	char *buf, ascii[2] = { 0 }, all[512] = "";
	const char *chars[128];
	size_t len, n = 0;
	for (int c = '0'; c <= 'z'; c++)
		if ((c <= '9' || c >= 'A') && (c <= 'Z' || c >= 'a'))
			ascii[0] = (char)c, chars[n++] = strdup(ascii);
	for (int i = 0; ref_chars[i]; i++)
		chars[n++] = strdup(ref_chars[i]);
	for (size_t i = 0; i < n; i++)
		strcat(all, chars[i]);
	FILE *m = open_memstream(&buf, &len);
	cairo_surface_t *s = cairo_svg_surface_create_for_stream(to_memory, m, 5000, 100);
	cairo_t *cr = cairo_create(s);
	mf_font(cr, size, bold);
	/* Wide enough for every glyph: cairo leaves out glyphs that fall outside the surface. */
	cairo_move_to(cr, 0, 50);
	cairo_show_text(cr, all);
	cairo_destroy(cr);
	cairo_surface_destroy(s);
	fclose(m);
	struct parse p;
	if (parse_xml(buf, len, &p, NULL) == 0 && p.ngroups == 1)
		for (size_t i = 0; i < n && p.groups[0][i]; i++) {
			grow(&glyph_d, nglyphs, sizeof *glyph_d);
			grow(&glyph_ch, nglyphs, sizeof *glyph_ch);
			glyph_d[nglyphs] = strdup(symbol_d(&p, p.groups[0][i]) ? symbol_d(&p, p.groups[0][i]) : "");
			glyph_ch[nglyphs++] = strdup(chars[i]);
		}
	for (size_t i = 0; i < n; i++)
		free((char *)chars[i]);
	parse_free(&p);
	free(buf);
}

static void load_reference(void)
{
	if (nglyphs)
		return;
	for (int i = 0; i < 3; i++)
		for (int bold = 0; bold < 2; bold++)
			add_ref_font(mf_plot_font_sizes[i], bold);
}

static const char *glyph_char(const char *d)
{
	for (size_t i = 0; d && i < nglyphs; i++)
		if (!strcmp(glyph_d[i], d))
			return glyph_ch[i];
	return " ";
}

static char *decode_group(const struct parse *p, char **hrefs)
{
	size_t cap = 1;
	for (char **h = hrefs; *h; h++)
		cap += 4;
	char *t = calloc(cap, 1);
	for (char **h = hrefs; *h; h++)
		strcat(t, glyph_char(symbol_d(p, *h)));
	return t;
}

int t_svg_load(const char *path, struct t_svg *s)
{
	FILE *fp = fopen(path, "rb");
	char *text = NULL, *error = NULL;
	size_t len = 0, cap = 0;
	struct parse p;
	memset(s, 0, sizeof *s);
	s->texts = calloc(2, sizeof *s->texts);
	if (!fp)
		return s->texts[0] = strdup("cannot open"), s->ntexts = 1, -1;
	for (size_t r = 1; r;) {
		text = realloc(text, cap += 65536);
		len += r = fread(text + len, 1, cap - len, fp);
	}
	fclose(fp);
	load_reference();
	int rc = parse_xml(text, len, &p, &error);
	free(text);
	if (rc)
		return s->texts[0] = error, s->ntexts = 1, -1;
	s->texts = realloc(s->texts, (p.ntexts + p.ngroups + 1) * sizeof *s->texts);
	for (size_t i = 0; i < p.ntexts; i++)
		s->texts[s->ntexts++] = p.texts[i];
	s->ntext_elements = p.ntexts;
	for (size_t g = 0; g < p.ngroups; g++)
		s->texts[s->ntexts++] = decode_group(&p, p.groups[g]);
	s->has_glyphs = p.ngroups > 0;
	s->titles = p.titles, s->ntitles = p.ntitles;
	s->lines = p.lines, s->nlines = p.nlines;
	s->boxes = p.boxes, s->nboxes = p.nboxes;
	p.lines = NULL, p.boxes = NULL, p.titles = NULL, p.ntitles = 0, p.ntexts = 0;
	parse_free(&p);
	return 0;
}

void t_svg_free(struct t_svg *s)
{
	for (size_t i = 0; i < s->ntexts; i++)
		free(s->texts[i]);
	free(s->texts);
	for (size_t i = 0; i < s->ntitles; i++)
		free(s->titles[i]);
	free(s->titles);
	free(s->lines);
	free(s->boxes);
	memset(s, 0, sizeof *s);
}

size_t t_svg_text_count(const struct t_svg *s, const char *sub)
{
	size_t n = 0;
	for (size_t i = 0; i < s->ntexts; i++)
		n += strstr(s->texts[i], sub) != NULL;
	return n;
}

size_t t_svg_lines(const struct t_svg *s, double r, double g, double b, size_t min_points)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nlines; i++) {
		const struct t_line *l = &s->lines[i];
		n += l->points >= min_points && (l->r - r) * (l->r - r) + (l->g - g) * (l->g - g) +
			(l->b - b) * (l->b - b) < 1e-6;
	}
	return n;
}

size_t t_svg_row(const struct t_svg *s, double y, struct t_box *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nboxes && n < max; i++) {
		if (s->boxes[i].y0 < y - 0.5 || s->boxes[i].y0 > y + 0.5)
			continue;
		size_t j = n++;
		for (; j > 0 && out[j - 1].x0 > s->boxes[i].x0; j--)
			out[j] = out[j - 1];
		out[j] = s->boxes[i];
	}
	return n;
}

void t_svg_load_ok(const char *path, struct t_svg *s)
{
	int rc = t_svg_load(path, s);
	ck_assert_msg(rc == 0, "%s is not XML: %s", path, s->ntexts ? s->texts[0] : "?");
}
