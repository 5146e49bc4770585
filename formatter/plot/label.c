/* Places already taken by labels, so that a new label goes elsewhere or is left out. */
#include "plot/plot.h"
#include "base/base.h"

#include <stdlib.h>

static int mf_overlap(const struct mf_rect *a, const struct mf_rect *b)
{
	return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

int mf_taken_free_at(const struct mf_taken *k, const struct mf_rect *r)
{
	for (size_t i = 0; i < k->n; i++)
		if (mf_overlap(&k->r[i], r))
			return 0;
	return 1;
}

void mf_taken_add(struct mf_taken *k, const struct mf_rect *r)
{
	if (k->n == k->cap)
		k->r = mf_xrealloc(k->r, (k->cap = k->cap ? 2 * k->cap : 16) * sizeof *k->r);
	k->r[k->n++] = *r;
}

void mf_room_free(struct mf_room *m)
{
	free(m->marks.r);
	free(m->lines.r);
}
