/* Aligned text tables: column widths are the widest cell (in code points, as Python pads). */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

void mf_table_init(struct mf_table *t, size_t ncols, const enum mf_align *align, const char *const *seps)
{
	memset(t, 0, sizeof *t);
	t->ncols = ncols;
	t->align = align;
	t->seps = seps;
}

void mf_table_row(struct mf_table *t, char **cells)
{
	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cells = mf_xrealloc(t->cells, t->cap * t->ncols * sizeof *t->cells);
	}
	memcpy(t->cells + t->nrows * t->ncols, cells, t->ncols * sizeof *cells);
	t->nrows++;
}

static void mf_pad(FILE *out, size_t n)
{
	while (n--)
		fputc(' ', out);
}

static void mf_cell(FILE *out, const char *s, size_t width, enum mf_align a, int last)
{
	size_t w = mf_width(s);
	if (a == MF_RIGHT)
		mf_pad(out, width - w);
	fputs(s, out);
	if (a == MF_LEFT && !last)
		mf_pad(out, width - w);
}

void mf_table_print(FILE *out, const struct mf_table *t, const char *indent)
{
	size_t *width = mf_xmalloc(t->ncols * sizeof *width);
	for (size_t c = 0; c < t->ncols; c++) {
		width[c] = 0;
		for (size_t r = 0; r < t->nrows; r++) {
			const char *s = t->cells[r * t->ncols + c];
			size_t w = s ? mf_width(s) : 0;
			width[c] = w > width[c] ? w : width[c];
		}
	}
	for (size_t r = 0; r < t->nrows; r++) {
		char **row = t->cells + r * t->ncols;
		size_t used = t->ncols;
		/* Empty trailing cells are left out so that no line ends in spaces. */
		while (used > 1 && (!row[used - 1] || !*row[used - 1]))
			used--;
		fputs(indent, out);
		for (size_t c = 0; c < used; c++) {
			if (c)
				fputs(t->seps[c - 1], out);
			mf_cell(out, row[c] ? row[c] : "", width[c], t->align[c], c + 1 == used);
		}
		fputc('\n', out);
	}
	free(width);
}

void mf_table_free(struct mf_table *t)
{
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof *t);
}
