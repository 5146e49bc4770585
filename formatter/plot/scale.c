/* Axis scales: ticks on a 1-2-5 scale, bytes in B/KB/MB/GB, time in seconds or minutes. */
#include "plot/plot.h"
#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The smallest 1-2-5 step that divides RANGE into at most MAX intervals. */
static double mf_nice_step(double range, int max)
{
	static const double f[] = { 1, 2, 5, 10, 20 };
	double mag = pow(10, floor(log10(range / max)));
	for (int i = 0; i < 4; i++)
		if (ceil(range / (f[i] * mag) - 1e-9) <= max)
			return f[i] * mag;
	return f[4] * mag;
}

static int mf_decimals(double step)
{
	int d = 0;
	while (d < 6 && fabs(step - round(step)) > 1e-9 * fmax(1, step))
		step *= 10, d++;
	return d;
}

static void mf_ticks_in(double max, double unit, const char *uname, int intervals, struct mf_ticks *t)
{
	double m = max / unit;
	if (!(m > 0) || !isfinite(m))
		m = 1;
	t->unit = unit, t->uname = uname;
	t->step = mf_nice_step(m, intervals);
	t->top = ceil(m / t->step - 1e-9) * t->step;
	t->decimals = mf_decimals(t->step);
}

/* VMAX gets about 10% of headroom, so that peak labels above it stay inside. */
void mf_ticks_bytes(double vmax, struct mf_ticks *t)
{
	int u = 0;
	vmax = vmax > 0 && isfinite(vmax) ? vmax * 1.1 : 1024 * 1024;
	while (u < 5 && vmax >= 1024.0 * pow(1024, u))
		u++;
	mf_ticks_in(vmax, pow(1024, u), mf_byte_units[u], 8, t);
}

void mf_ticks_time(double tmax, struct mf_ticks *t)
{
	if (!(tmax > 0) || !isfinite(tmax))
		tmax = 1;
	if (tmax > 180)
		mf_ticks_in(tmax, 60, "min", 10, t);
	else
		mf_ticks_in(tmax, 1, "s", 10, t);
}

char *mf_tick_label(const struct mf_ticks *t, double v, int with_unit)
{
	double x = v / t->step;
	/* A tick is a whole number of steps: its value printed from that, never -0 or 0.30000001. */
	x = round(x) * t->step;
	return mf_xasprintf("%.*f%s%s", t->decimals, fabs(x) < 1e-12 ? 0 : x, with_unit ? " " : "",
			    with_unit ? t->uname : "");
}

char *mf_fmt_secs(double s)
{
	if (!isfinite(s))
		return mf_xstrdup("?");
	if (s >= 180)
		return mf_xasprintf("%.1f min", s / 60);
	return mf_xasprintf("%.*f s", s >= 99.95 ? 0 : s >= 9.995 ? 1 : 2, s);
}

/* Points of one pixel column reduce to its first, lowest, highest and last point (in time order),
 * so every peak and every valley that could be seen is kept. OUT has room for N points. */
size_t mf_decimate(const struct mf_pt *in, size_t n, double px_per_s, struct mf_pt *out)
{
	size_t o = 0, i = 0;
	while (i < n) {
		double col = floor(in[i].t * px_per_s);
		size_t j = i, lo = i, hi = i;
		while (j < n && floor(in[j].t * px_per_s) == col) {
			lo = in[j].v < in[lo].v ? j : lo;
			hi = in[j].v > in[hi].v ? j : hi;
			j++;
		}
		size_t keep[4] = { i, lo < hi ? lo : hi, lo < hi ? hi : lo, j - 1 };
		for (int k = 0; k < 4; k++)
			if (!k || keep[k] != keep[k - 1])
				out[o++] = in[keep[k]];
		i = j;
	}
	return o;
}
