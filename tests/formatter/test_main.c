/* Runs every Check suite of the formatter and the wrapper; exit status 1 when any test fails. */
#include "util.h"

#include <stdlib.h>

/* Fontconfig (under cairo's text) keeps its caches until exit on purpose: not leaks to report in
 * sanitized builds. Only LeakSanitizer calls this. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libfontconfig.so\n";
}

/* Quietly: the wrapper tests compare stderr byte for byte. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "print_suppressions=0";
}

int main(void)
{
	SRunner *sr = srunner_create(golden_suite());
	srunner_add_suite(sr, pyfloat_suite());
	srunner_add_suite(sr, results_suite());
	srunner_add_suite(sr, wrapper_suite());
	srunner_add_suite(sr, plot_suite());
	srunner_add_suite(sr, plotfile_suite());
	srunner_add_suite(sr, plotodd_suite());
	srunner_add_suite(sr, cli_suite());
	srunner_add_suite(sr, schema_suite());
	srunner_add_suite(sr, flame_suite());
	srunner_add_suite(sr, options_suite());
	srunner_add_suite(sr, export_suite());
	srunner_add_suite(sr, flame_html_suite());
	srunner_add_suite(sr, frames_suite());
	srunner_add_suite(sr, runs_suite());
	srunner_add_suite(sr, meminfo_suite());
	srunner_add_suite(sr, job_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
