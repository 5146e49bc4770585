/* memshim_stage_begin_labelled: every labelled call's numbers under its label in
 * "labelled_calls", however many calls the stage has; a forked child lists only its own. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"

#define MiB ((int64_t)1 << 20)

static struct run r;

static int64_t num(json_t *o, const char *comp, const char *key)
{
	json_t *v = json_object_get(json_object_get(o, comp), key);
	ck_assert_msg(json_is_integer(v), "%s.%s missing", comp, key);
	return json_integer_value(v);
}

static json_t *run_fixture(void)
{
	const char *argv[] = { built("preload/labels_fixture"), NULL };
	const char *env[] = { "MEMSHIM_SITES=0", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x %s", r.status, r.err);
	ck_assert_str_eq(r.out, "labels ok\n");
	ck_assert_msg(strstr(r.err, "bad name!") != NULL, "the bad name is warned about: %s", r.err);
	json_t *root = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(root);
	return root;
}

START_TEST(each_labelled_call_under_its_label)
{
	json_t *root = run_fixture();
	json_t *calls = json_object_get(root, "labelled_calls");
	ck_assert_msg(json_is_array(calls), "no labelled_calls");
	ck_assert_int_eq(json_integer_value(json_object_get(root, "labelled_calls_dropped")), 0);
	ck_assert_int_eq((int)json_array_size(calls), 200 + 2); /* the 200 steps, outer, long */
	for (int i = 0; i < 200; i++) {
		char want[128];
		json_t *c = json_array_get(calls, (size_t)i);
		snprintf(want, sizeof want, "tests/test_x.py::test_%d[param \xc3\xa9]", i);
		ck_assert_str_eq(json_string_value(json_object_get(c, "label")), want);
		ck_assert_str_eq(json_string_value(json_object_get(c, "stage")), "step");
		ck_assert_int_eq(json_integer_value(json_object_get(c, "call")), i + 1);
		int64_t alloc = num(c, "cpu", "alloc_delta"), peaked = num(c, "cpu", "peaked_delta");
		int64_t want_alloc = i == 7 ? 3 * MiB : 0, want_peak = (i % 5 + 1) * MiB;
		ck_assert_msg(alloc >= want_alloc && alloc < want_alloc + MiB / 4, "call %d alloc %lld", i, (long long)alloc);
		ck_assert_msg(alloc + peaked >= want_peak && alloc + peaked < want_peak + 3 * MiB + MiB / 4,
			      "call %d needed %lld", i, (long long)(alloc + peaked));
		ck_assert_int_eq(num(c, "malloc", "peaked_delta"), peaked);
		ck_assert_ptr_null(json_object_get(c, "gpu")); /* no GPU used */
	}
	json_t *outer = json_array_get(calls, 200), *longer = json_array_get(calls, 201);
	ck_assert_str_eq(json_string_value(json_object_get(outer, "label")), "first");
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(longer, "label"))), 255);
	/* the stage itself is as before: 202 calls, 128 kept in its history */
	json_t *step = stage_of(root, "step");
	ck_assert_int_eq(json_integer_value(json_object_get(step, "calls")), 202);
	ck_assert_int_eq(json_integer_value(json_object_get(step, "history_dropped")), 202 - 128);
	json_decref(root);
}
END_TEST

START_TEST(a_forked_child_lists_its_own)
{
	json_decref(run_fixture());
	json_t *child;
	ck_assert_int_eq(load_files(r.dir, "m.json.", &child, 1), 1);
	json_t *calls = json_object_get(child, "labelled_calls");
	ck_assert_int_eq((int)json_array_size(calls), 1);
	json_t *c = json_array_get(calls, 0);
	ck_assert_str_eq(json_string_value(json_object_get(c, "label")), "in the child");
	ck_assert_int_ge(num(c, "cpu", "peaked_delta"), 2 * MiB);
	json_decref(child);
}
END_TEST

/* A program that never labels a call writes no such key (the file is as it was). */
START_TEST(no_label_no_key)
{
	const char *argv[] = { built("preload/fork_fixture"), NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	json_t *root = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(root);
	ck_assert_ptr_null(json_object_get(root, "labelled_calls"));
	ck_assert_ptr_null(json_object_get(root, "labelled_calls_dropped"));
	json_decref(root);
}
END_TEST

int main(void)
{
	harness_timeout = 60;
	Suite *s = suite_create("labels");
	TCase *tc = tcase_create("labelled calls");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, each_labelled_call_under_its_label);
	tcase_add_test(tc, a_forked_child_lists_its_own);
	tcase_add_test(tc, no_label_no_key);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
