/* 1 - e^-x in about 50 instructions, ln x, and the table of -ln U (see expmath.h): every sample
 * weighs its block with the first and draws its successor's distance with the last. */
#include <stdint.h>
#include <string.h>
#include "core/expmath.h"

/* 2^-N for N in 0..1022. */
static double two_to_minus(int n)
{
	uint64_t bits = (uint64_t)(1023 - n) << 52;
	double d;
	memcpy(&d, &bits, sizeof d);
	return d;
}

double ms_one_minus_exp_neg(double x)
{
	if (!(x > 0))
		return 0;
	if (x < 0.015625) /* the series: no cancellation, error x^6/720 relative to x */
		return x * (1 - x * (0.5 - x * (1.0 / 6 - x * (1.0 / 24 - x * (1.0 / 120)))));
	if (x > 40)
		return 1;
	/* e^-x = 2^-n 2^-f (x log2 e = n + f, 0 <= f < 1), and 2^-f = 2^-1/2 e^-t, |t| <= ln2 / 2 */
	double y = x * 1.4426950408889634;
	int n = (int)y;
	double t = (y - n - 0.5) * 0.6931471805599453;
	/* clang-format off */
	double e = 1 - t * (1 - t * (1.0 / 2 - t * (1.0 / 6 - t * (1.0 / 24 - t * (1.0 / 120 - t * (1.0 / 720 -
		   t * (1.0 / 5040 - t * (1.0 / 40320 - t * (1.0 / 362880)))))))));
	/* clang-format on */
	return 1 - 0.7071067811865476 * e * two_to_minus(n);
}

double ms_ln(double x)
{
	uint64_t b;
	memcpy(&b, &x, sizeof b);
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & ((1ULL << 52) - 1)) | (1023ULL << 52); /* x = m 2^e, m in [1, 2) */
	double m;
	memcpy(&m, &b, sizeof m);
	if (m > 1.4142135623730951) { /* m near 1: the series below converges fast */
		m *= 0.5;
		e++;
	}
	double s = (m - 1) / (m + 1), s2 = s * s; /* ln m = 2 atanh s */
	return e * 0.6931471805599453 + 2 * s * (1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 / 9))));
}

void ms_neg_ln_build(struct ms_neg_ln *t, double scale)
{
	for (int z = 0; z < 64; z++)
		t->z[z] = (z + 1) * 0.6931471805599453 * scale;
	for (int i = 0; i < MS_NEG_LN_CELLS; i++) {
		double lo = i ? ms_ln(1 + (double)i / MS_NEG_LN_CELLS) : 0,
		       hi = ms_ln(1 + (double)(i + 1) / MS_NEG_LN_CELLS);
		t->m[i].at = lo * scale;
		t->m[i].slope = (hi - lo) * scale * 0x1p-53;
	}
}
