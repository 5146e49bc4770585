/* Colours: strong ones for the memory lines, pale ones for the stage bands behind them. */
#include "plot/plot.h"
#include "base/base.h"

#include <string.h>

static struct mf_rgb mf_hex(unsigned x)
{
	return (struct mf_rgb){ (x >> 16 & 255) / 255.0, (x >> 8 & 255) / 255.0, (x & 255) / 255.0 };
}

/* CPU blue, then GPUs in colours that stay apart from it and from each other. */
struct mf_rgb mf_series_colour(int device)
{
	static const unsigned c[] = { 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd, 0x8c564b, 0xe377c2, 0x17becf, 0xbcbd22 };
	return mf_hex(device < 0 ? 0x1f77b4 : c[device % 8]);
}

struct mf_rgb mf_area_colour(void)
{
	return mf_hex(0x7f7f7f);
}

void mf_names_add(struct mf_names *nm, const char *name)
{
	for (size_t i = 0; i < nm->n; i++)
		if (!strcmp(nm->name[i], name))
			return;
	nm->name = mf_xrealloc(nm->name, (nm->n + 1) * sizeof *nm->name);
	nm->name[nm->n++] = name;
}

struct mf_rgb mf_stage_colour(const struct mf_names *nm, const char *stage)
{
	static const unsigned c[] = { 0xaec7e8, 0xffbb78, 0x98df8a, 0xff9896, 0xc5b0d5,
				      0xc49c94, 0xf7b6d2, 0xdbdb8d, 0x9edae5, 0xc7c7c7 };
	size_t i = 0;
	while (nm && i < nm->n && strcmp(nm->name[i], stage))
		i++;
	return mf_hex(c[i % 10]);
}

void mf_set_rgb(cairo_t *cr, struct mf_rgb c, double alpha)
{
	cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha);
}
