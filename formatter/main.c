/* memshim-format: prints memshim metrics files; everything but main() lives in testable files. */
#include "cli/cli.h"

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

int main(int argc, char **argv)
{
	return mf_main(argc, argv, stdout, stderr);
}
