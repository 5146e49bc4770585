/* Python's float repr and round(x, 4), checked against answers python3 wrote (golden/floats.txt). */
#include "util.h"
#include "base/base.h"
#include "modes/modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_against_python)
{
	char path[4200], hex[64], repr[64], r4[64], mine[MF_REPR_MAX];
	snprintf(path, sizeof path, "%s/floats.txt", t_golden());
	FILE *fp = fopen(path, "r");
	int n = 0;
	ck_assert_ptr_nonnull(fp);
	while (fscanf(fp, "%63s %63s %63s", hex, repr, r4) == 3) {
		double x = strtod(hex, NULL);
		mf_py_repr(x, mine);
		ck_assert_msg(!strcmp(mine, repr), "repr(%s): python %s, mine %s", hex, repr, mine);
		mf_py_repr(mf_py_round4(x), mine);
		ck_assert_msg(!strcmp(mine, r4), "round(%s, 4): python %s, mine %s", hex, r4, mine);
		n++;
	}
	fclose(fp);
	ck_assert_int_gt(n, 2000);
}
END_TEST

/* The dump's value rules on their own (the golden cases show them in context). */
START_TEST(test_values)
{
	static const struct { const char *key, *json, *want; } cases[] = {
		{ "x_mem_cpu_alloc_delta", "-67113062", "-64MB" },  /* -64.004 MiB: toward zero */
		{ "x_mem_cpu_alloc_delta", "0", "0MB" },
		/* under 1 MiB but not 0: whole KiB toward zero, under 1 KiB in bytes (never 0MB) */
		{ "x_mem_cpu_alloc_delta", "-1", "-1B" },
		{ "x_mem_cpu_alloc_delta", "1023", "1023B" },
		{ "x_mem_cpu_alloc_delta", "1048575", "1023KB" },
		{ "x_mem_cpu_alloc_delta", "-4096", "-4KB" },
		{ "x_mem_cpu_alloc_delta", "1048576", "1MB" },
		{ "x_mem_cpu_alloc_delta", "524288.5", "512KB" },
		{ "x_mem_cpu_alloc_delta", "57671680", "55MB" },
		{ "x_mem_cpu_alloc_delta", "-67113062.0", "-64MB" },
		{ "x_mem_gpu_failed_allocs", "3", "3" },
		{ "total_flos", "2285698228224.0", "2128GF" },
		{ "total_flos", "-1", "-1GF" },                     /* Python's >> floors */
		{ "total_flos", "-1.5", "-1GF" },
		{ "total_flos", "0.5", "0GF" },
		{ "x_runtime", "2.311412", "2.3114" },
		{ "x_runtime", "2", "2.0" },
		{ "x_runtime", "1e-05", "0.0" },
		{ "x_runtime", "0.00005", "0.0001" },
		{ "epoch", "1.0", "1.0" },
		{ "x_calls", "300", "300" },
		{ "note", "\"text\"", "text" },
		{ "flag", "false", "False" },
		{ "nothing", "null", "None" },
		{ "list", "[1, {\"b\": 2}]", "[1,{\"b\":2}]" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *v = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
		char *got = mf_format_value(cases[i].key, v);
		ck_assert_msg(!strcmp(got, cases[i].want), "%s = %s: want %s, got %s", cases[i].key,
			      cases[i].json, cases[i].want, got);
		free(got);
		json_decref(v);
	}
}
END_TEST

START_TEST(test_threshold)
{
	struct mf_threshold t;
	ck_assert_int_eq(mf_parse_threshold("5%", &t), 0);
	ck_assert(t.pct == 5 && t.bytes < 0);
	ck_assert_int_eq(mf_parse_threshold("10MB", &t), 0);
	ck_assert(t.bytes == 10485760 && t.pct < 0);
	ck_assert_int_eq(mf_parse_threshold("1.5GiB", &t), 0);
	ck_assert(t.bytes == 1610612736 && t.pct < 0);
	ck_assert_int_eq(mf_parse_threshold("5%,1MB", &t), 0);
	ck_assert(t.pct == 5 && t.bytes == 1048576);
	ck_assert_int_eq(mf_parse_threshold("2KB,10%", &t), 0);
	ck_assert(t.pct == 10 && t.bytes == 2048);
	ck_assert_int_ne(mf_parse_threshold("5", &t), 0);
	ck_assert_int_ne(mf_parse_threshold("-5%", &t), 0);
	ck_assert_int_ne(mf_parse_threshold("MB", &t), 0);
	ck_assert_int_ne(mf_parse_threshold("inf%", &t), 0);
	ck_assert_int_ne(mf_parse_threshold("5%,6%", &t), 0);
	ck_assert_int_ne(mf_parse_threshold("5%,", &t), 0);
	ck_assert_int_ne(mf_parse_threshold(",1MB", &t), 0);
}
END_TEST

Suite *pyfloat_suite(void)
{
	Suite *s = suite_create("values");
	TCase *tc = tcase_create("values");
	tcase_add_test(tc, test_against_python);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_threshold);
	suite_add_tcase(s, tc);
	return s;
}
