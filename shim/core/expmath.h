/* Exponentials for call-site sampling without libm (the shim links none).  Pure functions. */
#ifndef MS_EXPMATH_H
#define MS_EXPMATH_H

/* 1 - e^-X for X >= 0 (0 for X <= 0), relative error under 1e-9: the chance that a block of X
 * times the sampling rate holds a sample point. */
double ms_one_minus_exp_neg(double x);

#endif
