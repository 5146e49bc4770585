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

/* ln(1 + I / CELLS) as a constant expression: 2 atanh s with s = I / (2 CELLS + I) <= 1/3, the
 * series to s^33 (its remainder under 1e-17). */
#define LN_S(i) ((double)(i) / (2.0 * MS_NEG_LN_CELLS + (double)(i)))
#define LN_Q(i) (LN_S(i) * LN_S(i))
/* clang-format off */
#define LN_SERIES(q) \
	(1 + q * (1.0 / 3 + q * (1.0 / 5 + q * (1.0 / 7 + q * (1.0 / 9 + q * (1.0 / 11 + q * (1.0 / 13 + \
	q * (1.0 / 15 + q * (1.0 / 17 + q * (1.0 / 19 + q * (1.0 / 21 + q * (1.0 / 23 + q * (1.0 / 25 + \
	q * (1.0 / 27 + q * (1.0 / 29 + q * (1.0 / 31 + q * (1.0 / 33)))))))))))))))))
/* clang-format on */
#define LN_CELL(i) (2 * LN_S(i) * LN_SERIES(LN_Q(i)))
#define CELL(i) { LN_CELL(i), (LN_CELL((i) + 1) - LN_CELL(i)) * 0x1p-53 },
#define CELLS4(i) CELL(i) CELL((i) + 1) CELL((i) + 2) CELL((i) + 3)
#define CELLS16(i) CELLS4(i) CELLS4((i) + 4) CELLS4((i) + 8) CELLS4((i) + 12)
#define CELLS64(i) CELLS16(i) CELLS16((i) + 16) CELLS16((i) + 32) CELLS16((i) + 48)
const struct ms_neg_ln_cell ms_neg_ln_cells[MS_NEG_LN_CELLS] = { CELLS64(0) CELLS64(64) CELLS64(128) CELLS64(192) };
_Static_assert(MS_NEG_LN_CELLS == 256, "the table's initialiser lists 256 cells");
