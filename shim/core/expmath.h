/* Exponentials and logarithms for call-site sampling without libm (the shim links none).  Pure
 * functions. */
#ifndef MS_EXPMATH_H
#define MS_EXPMATH_H

#include <stdint.h>

/* 1 - e^-X for X >= 0 (0 for X <= 0), relative error under 1e-9: the chance that a block of X
 * times the sampling rate holds a sample point. */
double ms_one_minus_exp_neg(double x);

/* Natural log of X > 0, within 1e-9 of it (relative; absolute near 1). */
double ms_ln(double x);

/* -ln U for U = R / 2^64, R a random word (an exponential draw of mean 1; times the rate, the bytes
 * to the next sample), from a table: U = 2^-(z+1) m with z R's leading zeros and m in [1, 2), so
 * -ln U = (z+1) ln 2 - ln m, and ln m is linear between 257 points (within 2e-6 of it, and below it:
 * a draw is never short but by 1e-9).  About 15 instructions against 35 for ms_ln.  The table is a
 * constant the compiler computes: a process builds nothing at its first sample. */
#define MS_NEG_LN_CELLS 256
struct ms_neg_ln_cell {
	double at, slope; /* ln(1 + i / CELLS), and the step to the next per unit of a 53-bit fraction */
};
extern const struct ms_neg_ln_cell ms_neg_ln_cells[MS_NEG_LN_CELLS];

static inline double ms_neg_ln(uint64_t r)
{
	r |= 1; /* R 0 read as 1: a leading one to find */
	uint64_t z = (uint64_t)__builtin_clzll(r);
	uint64_t m = r << z;                          /* the leading one at bit 63 */
	uint64_t i = (m >> 55) - MS_NEG_LN_CELLS;     /* the 8 bits after it */
	double f = (double)(int64_t)((m << 9) >> 11); /* the 53 bits after those */
	return (double)(z + 1) * 0.6931471805599453 - ms_neg_ln_cells[i].at - ms_neg_ln_cells[i].slope * f;
}

#endif
