/* Reading memshim-format's SVG back: is it XML, which lines does it stroke, which text does it show
 * (cairo's glyph outlines decoded, or <text> elements as they are), which tooltips it carries. */
#ifndef MF_TEST_SVG_H
#define MF_TEST_SVG_H

#include <stddef.h>

struct t_line {
	double r, g, b;         /* stroke colour, 0..1 */
	size_t points;          /* how many points its path has */
};

/* A filled path of straight lines, or a <rect> (a rectangle of the flame graph): its bounding box,
 * colour and the <title> of the <g> around it (NULL when none; owned by the t_svg). */
struct t_box {
	double x0, y0, x1, y1;
	double r, g, b;
	const char *title;
};

struct t_svg {
	char **texts;           /* every shown text: <text> elements, then cairo's glyphs decoded
				 * (unknown glyphs are ' ') */
	size_t ntexts;
	size_t ntext_elements;  /* how many of them were <text> elements */
	char **titles;          /* every <title>, in document order */
	size_t ntitles;
	int has_glyphs;         /* some text was drawn as cairo's glyph outlines */
	struct t_line *lines;
	size_t nlines;
	struct t_box *boxes;    /* in document order */
	size_t nboxes;
};

/* 0 when PATH parsed as XML (S filled), else -1 with the parser's message in S->texts[0]. */
int t_svg_load(const char *path, struct t_svg *s);
/* As t_svg_load, failing the test when PATH is not XML. */
void t_svg_load_ok(const char *path, struct t_svg *s);
void t_svg_free(struct t_svg *s);
/* How many texts contain SUB. */
size_t t_svg_text_count(const struct t_svg *s, const char *sub);
/* How many stroked paths of colour R, G, B have at least MIN_POINTS points. */
size_t t_svg_lines(const struct t_svg *s, double r, double g, double b, size_t min_points);

/* The filled boxes whose top edge is at Y (within half a pixel), left to right; returns how many
 * (at most MAX) were put in OUT. */
size_t t_svg_row(const struct t_svg *s, double y, struct t_box *out, size_t max);

#endif
