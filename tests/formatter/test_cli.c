/* memshim-format's command line beyond the golden cases: --version from shim/memshim.h, and CSV
 * fields quoted as RFC 4180 says. */
#include "util.h"
#include "modes/modes.h"
#include "../../shim/memshim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_version)
{
	char *out, *err, want[64], *argv[] = { "memshim-format", "--version", NULL };
	ck_assert_int_eq(t_run(argv, &out, &err), 0);
	snprintf(want, sizeof want, "memshim-format %d.%d\n", MEMSHIM_VERSION_MAJOR,
		 MEMSHIM_VERSION_MINOR);
	ck_assert_str_eq(out, want);
	ck_assert_str_eq(err, "");
	free(out);
	free(err);
}
END_TEST

static char *field(const char *s, int last)
{
	char *buf;
	size_t n;
	FILE *fp = open_memstream(&buf, &n);
	mf_csv_field(fp, s, last);
	fclose(fp);
	return buf;
}

START_TEST(test_csv_fields)
{
	static const char *const cases[][2] = {
		{ "plain", "plain," },
		{ "", "," },
		{ "a,b", "\"a,b\"," },
		{ "say \"hi\"", "\"say \"\"hi\"\"\"," },
		{ "two\nlines", "\"two\nlines\"," },
		{ "cr\rhere", "\"cr\rhere\"," },
		{ "\"", "\"\"\"\"," },
		{ "caf\xc3\xa9 ok", "caf\xc3\xa9 ok," },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *got = field(cases[i][0], 0);
		ck_assert_msg(!strcmp(got, cases[i][1]), "field %zu: got [%s], want [%s]", i, got,
			      cases[i][1]);
		free(got);
	}
	char *last = field("end", 1);
	ck_assert_str_eq(last, "end\r\n");
	free(last);
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("cli");
	tcase_add_test(tc, test_version);
	tcase_add_test(tc, test_csv_fields);
	suite_add_tcase(s, tc);
	return s;
}
