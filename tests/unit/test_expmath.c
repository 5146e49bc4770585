/* Sampling's exponential: 1 - e^-x against libm over the range weights use. */
#include <check.h>
#include <math.h>
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

int main(void)
{
	Suite *s = suite_create("expmath");
	TCase *tc = tcase_create("one_minus_exp_neg");
	tcase_add_test(tc, within_1e9_of_libm);
	tcase_add_test(tc, ends_of_the_range);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
