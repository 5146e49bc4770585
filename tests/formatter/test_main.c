/* Runs every Check suite of the formatter and the wrapper; exit status 1 when any test fails. */
#include "util.h"

#include <stdlib.h>

int main(void)
{
	SRunner *sr = srunner_create(golden_suite());
	srunner_add_suite(sr, pyfloat_suite());
	srunner_add_suite(sr, results_suite());
	srunner_add_suite(sr, wrapper_suite());
	srunner_add_suite(sr, plot_suite());
	srunner_add_suite(sr, plotfile_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
