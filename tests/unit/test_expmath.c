/* Sampling's exponential and logarithms: 1 - e^-x against libm over the range weights use, ln, and
 * the table of -ln U the draws read. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include "suite.h"
#include "core/expmath.h"

static double rel_error(double x)
{
	double want = -expm1(-x);
	return fabs(ms_one_minus_exp_neg(x) - want) / want;
}

START_TEST(within_1e9_of_libm)
{
	double worst = 0, at = 0;
	for (double x = 1e-9; x < 45; x *= 1.0009765625) {
		double e = rel_error(x);
		if (e > worst) {
			worst = e;
			at = x;
		}
	}
	ck_assert_msg(worst < 1e-9, "relative error %g at x = %g", worst, at);
}
END_TEST

START_TEST(ends_of_the_range)
{
	ck_assert(ms_one_minus_exp_neg(0) == 0);
	ck_assert(ms_one_minus_exp_neg(-1) == 0);
	ck_assert(ms_one_minus_exp_neg(1e300) == 1);
	ck_assert(ms_one_minus_exp_neg(1e-300) == 1e-300);
	ck_assert(rel_error(0.015) < 1e-11 && rel_error(0.015625) < 1e-9 && rel_error(40) < 1e-9);
}
END_TEST

START_TEST(ln_within_1e9_of_libm)
{
	double worst = 0, at = 0;
	for (double x = 1e-300; x < 1e300; x *= 1.0009765625 + (x > 1e-6 && x < 1e6 ? 0 : 1)) {
		double want = log(x), e = fabs(ms_ln(x) - want) / (fabs(want) > 1 ? fabs(want) : 1);
		if (e > worst) {
			worst = e;
			at = x;
		}
	}
	ck_assert_msg(worst < 1e-9, "error %g at x = %g", worst, at);
	ck_assert(ms_ln(1) == 0);
}
END_TEST

/* The random word R whose R / 2^64 is U (rounded down). */
static uint64_t word_of(double u)
{
	return (uint64_t)ldexp(u, 64);
}

/* Within 2e-6 of -ln U over the whole range of U, down to the smallest words, and never short of it
 * but by the table's own 1e-9 (the chord of a concave ln lies below it). */
START_TEST(neg_ln_within_2e6_and_never_short)
{
	double worst = 0, at = 0;
	for (double u = 0x1p-62; u < 1; u *= 1.000244140625) {
		uint64_t r = word_of(u);
		double want = -log(ldexp((double)(r | 1), -64)), got = ms_neg_ln(r); /* R is read odd */
		ck_assert_msg(got >= want - 1e-9, "draw %.17g short of %.17g at U = %g", got, want, u);
		if (got - want > worst) {
			worst = got - want;
			at = u;
		}
	}
	ck_assert_msg(worst < 2e-6, "error %g at U = %g", worst, at);
	ck_assert(ms_neg_ln(0) > 43 && ms_neg_ln(1) > 43); /* R 0 read as 1: U = 2^-64 */
	ck_assert(fabs(ms_neg_ln(UINT64_MAX)) < 1e-15);
}
END_TEST

/* The draws of words spread evenly over U (one in each of 2^20 equal parts) average 1 (an
 * exponential's mean; a sample's distance is a draw times the rate), and their variance is 1. */
/* The compiler's table is ln(1 + i / 256) to the last bit or two, and each slope reaches the next. */
START_TEST(neg_ln_table_is_the_log)
{
	for (int i = 0; i < MS_NEG_LN_CELLS; i++) {
		double want = log1p((double)i / MS_NEG_LN_CELLS), next = log1p((double)(i + 1) / MS_NEG_LN_CELLS);
		ck_assert_msg(fabs(ms_neg_ln_cells[i].at - want) <= 2e-16, "cell %d: %.17g, log1p %.17g", i,
			      ms_neg_ln_cells[i].at, want);
		ck_assert_msg(fabs(ms_neg_ln_cells[i].slope * 0x1p53 - (next - want)) <= 4e-16, "cell %d's slope", i);
	}
}
END_TEST

START_TEST(neg_ln_draws_average_one)
{
	int n = 1 << 20;
	double sum = 0, sq = 0;
	for (int k = 0; k < n; k++) {
		uint64_t r = (((uint64_t)k << 44) | (0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1) >> 20)) + 1;
		double d = ms_neg_ln(r);
		sum += d;
		sq += d * d;
	}
	double mean = sum / n, var = sq / n - mean * mean;
	ck_assert_msg(fabs(mean - 1) < 1e-4, "mean %.6f rates", mean);
	ck_assert_msg(fabs(var - 1) < 2e-3, "variance %.6f", var);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("expmath");
	TCase *tc = tcase_create("one_minus_exp_neg");
	tcase_add_test(tc, within_1e9_of_libm);
	tcase_add_test(tc, ends_of_the_range);
	suite_add_tcase(s, tc);
	TCase *ln = tcase_create("ln");
	tcase_add_test(ln, ln_within_1e9_of_libm);
	tcase_add_test(ln, neg_ln_within_2e6_and_never_short);
	tcase_add_test(ln, neg_ln_table_is_the_log);
	tcase_add_test(ln, neg_ln_draws_average_one);
	suite_add_tcase(s, ln);
	return run_suite(s);
}
