/* Check's runner as every suite's main() uses it. */
#ifndef MS_TEST_SUITE_H
#define MS_TEST_SUITE_H

#include <check.h>

/* Runs every test of S (Check's normal output) and frees it; the exit status for main(). */
static inline int run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
