/* SVG written as text, for pictures whose words must stay words (selectable, searchable): real
 * <text> elements in the plot's font and <title> tooltips, where cairo's SVG draws glyph outlines. */
#include "plot/plot.h"
#include "base/base.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The text classes: a label (no class), h a title, p a panel's line, q a note; plot.h's sizes. */
void mf_svg_begin(FILE *fp, int w, int h)
{
	fprintf(fp,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n<style>text{font-family:'%s',sans-serif;"
		"font-size:%gpx;fill:#1a1a1a}.h{font-size:%gpx;font-weight:bold}.p{font-size:%gpx;"
		"fill:#4d4d4d}.q{fill:#4d4d4d}</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
		w, h, w, h, MF_PLOT_FONT, MF_FS_SMALL, MF_FS_TITLE, MF_FS_PANEL);
}

void mf_svg_end(FILE *fp)
{
	fputs("</svg>\n", fp);
}

/* A coordinate with at most two decimals and no trailing zeros ("12", "12.5", "12.25"). */
void mf_svg_num(FILE *fp, double v)
{
	char s[64];
	snprintf(s, sizeof s, "%.2f", isfinite(v) ? v : 0);
	char *dot = strchr(s, '.'), *end = s + strlen(s);
	while (dot && end > dot && (end[-1] == '0' || end[-1] == '.'))
		*--end = '\0';
	fputs(strcmp(s, "-0") ? s : "0", fp);
}

/* S as XML character data or attribute text: markup escaped, control characters (not allowed in
 * XML 1.0) as '?'; a newline is kept where NEWLINES (a tooltip's lines). */
void mf_svg_escaped(FILE *fp, const char *s, int newlines)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '&')
			fputs("&amp;", fp);
		else if (c == '<')
			fputs("&lt;", fp);
		else if (c == '>')
			fputs("&gt;", fp);
		else if (c == '"')
			fputs("&quot;", fp);
		else if ((c < 0x20 && !(newlines && c == '\n')) || c == 0x7f)
			fputc('?', fp);
		else
			fputc(c, fp);
	}
}

void mf_svg_rect(FILE *fp, double x, double y, double w, double h, struct mf_rgb c)
{
	fputs("<rect x=\"", fp);
	mf_svg_num(fp, x);
	fputs("\" y=\"", fp);
	mf_svg_num(fp, y);
	fputs("\" width=\"", fp);
	mf_svg_num(fp, w);
	fputs("\" height=\"", fp);
	mf_svg_num(fp, h);
	fprintf(fp, "\" fill=\"#%02x%02x%02x\"/>", (int)lround(fmin(fmax(c.r, 0), 1) * 255),
		(int)lround(fmin(fmax(c.g, 0), 1) * 255), (int)lround(fmin(fmax(c.b, 0), 1) * 255));
}

void mf_svg_text(FILE *fp, double x, double y, const char *cls, const char *s)
{
	fputs("<text x=\"", fp);
	mf_svg_num(fp, x);
	fputs("\" y=\"", fp);
	mf_svg_num(fp, y);
	fprintf(fp, "\"%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
	mf_svg_escaped(fp, s, 0);
	fputs("</text>", fp);
}

int mf_write_picture(FILE *err, const char *path, const char *data, size_t n)
{
	FILE *fp = fopen(path, "wb");
	int e = 0;
	if (!fp) {
		fprintf(err, "memshim-format: %s: cannot write: %s\n", path, strerror(errno));
		return MF_BAD;
	}
	errno = 0;
	if (fwrite(data, 1, n, fp) != n)
		e = errno ? errno : EIO;
	if (fclose(fp) && !e)
		e = errno ? errno : EIO;
	if (!e)
		return MF_OK;
	fprintf(err, "memshim-format: %s: cannot write: %s\n", path, strerror(e));
	unlink(path);
	return MF_BAD;
}
