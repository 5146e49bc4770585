/* Stage bands: a row per nesting level, and runs of tiny calls merged into one band. */
#include "plot/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Earlier first; of two that begin together the longer one encloses the other, so it comes first. */
static int mf_band_time_cmp(const void *a, const void *b)
{
	const struct mf_band *x = a, *y = b;
	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	double dx = x->t1 - x->t0, dy = y->t1 - y->t0;
	return (dx < dy) - (dx > dy);
}

static int mf_band_row_cmp(const void *a, const void *b)
{
	const struct mf_band *x = a, *y = b;
	if (x->row != y->row)
		return x->row - y->row;
	return mf_band_time_cmp(a, b);
}

/* The lowest row that is free when a call begins: a call inside another lands one row below it. */
void mf_bands_rows(struct mf_band *b, size_t n, int *nrows)
{
	double end[MF_PLOT_ROWS];
	*nrows = 0;
	if (!n) /* qsort wants a real array even for nothing */
		return;
	qsort(b, n, sizeof *b, mf_band_time_cmp);
	for (size_t i = 0; i < n; i++) {
		int r = 0;
		/* 1 us of slack: a call that begins as the previous one ends is beside it, not inside. */
		while (r < *nrows && end[r] > b[i].t0 + 1e-6 && r < MF_PLOT_ROWS - 1)
			r++;
		if (r == *nrows)
			end[(*nrows)++] = b[i].t1;
		end[r] = fmax(end[r], b[i].t1);
		b[i].row = r;
	}
	qsort(b, n, sizeof *b, mf_band_row_cmp);
}

static void mf_band_absorb(struct mf_band *c, const struct mf_band *b)
{
	c->t1 = fmax(c->t1, b->t1);
	c->calls += b->calls;
	c->open |= b->open;
	if (!strcmp(c->stage, b->stage) || (c->other && !strcmp(c->other, b->stage)))
		return;
	if (!c->other)
		c->other = b->stage;
	c->kinds = c->kinds < 3 ? c->kinds + 1 : 3;
}

/* Neighbouring calls in one row, one of them thinner than MIN_PX and closer than MIN_PX apart,
 * become one band counting their calls: of one stage, or of several taking turns (forward,
 * backward). Calls that are wide enough to see stay apart. B is sorted by row then time. */
size_t mf_bands_merge(struct mf_band *b, size_t n, double px_per_s, double min_px)
{
	size_t out = 0;
	double last_w = 0;
	for (size_t i = 0; i < n; i++) {
		struct mf_band *c = out ? &b[out - 1] : NULL;
		double w = (b[i].t1 - b[i].t0) * px_per_s;
		if (c && c->row == b[i].row && (b[i].t0 - c->t1) * px_per_s < min_px &&
		    (w < min_px || last_w < min_px) &&
		    (!strcmp(c->stage, b[i].stage) || (w < min_px && last_w < min_px))) {
			mf_band_absorb(c, &b[i]);
		} else {
			b[out++] = b[i];
		}
		last_w = w;
	}
	return out;
}
