/* The frame evaluation hook route (Python 3.8-3.11): another tool's hook replacing
 * memshim's or giving the place back, and recursion deeper than the C stack allows with it.
 * Fixture scripts (tests/python/fixtures) run under LD_PRELOAD=libmemshim.so on every interpreter
 * present (tests/python/pyrun.h). */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pyrun.h"

/* replaced_hook.py on interpreter I with MODE ("keep" or "give-back") into R; 0 when I is not
 * installed or does not use the frame hook route (3.9-3.11). */
static int run_replaced_hook(struct run *r, int i, const char *mode)
{
	const char *py = python_or_skip(i);
	if (!py)
		return 0;
	if (minor_of(py) < 9 || minor_of(py) > 11) {
		printf("test_python: %s does not use the frame evaluation hook route, test skipped\n", py);
		return 0;
	}
	const char *args[] = { fixture("replaced_hook.py"), otherhook, mode, NULL };
	run_py(r, py, args, "work=work", NULL, NULL, 1);
	RUN_OK(r);
	expect_out(r, "replaced ok, the other hook evaluated some frames");
	return 1;
}

START_TEST(frame_hook_replaced)
{
	struct run r;
	if (!run_replaced_hook(&r, _i, "keep"))
		return;
	expect_stage(&r, "work", 1, 4); /* the call after the replacement is not seen */
	expect_one_warning(&r, "frame evaluation hook");
	ck_assert_ptr_null(json_object_get(r.root, "python_hook_lost"));
	run_done(&r);
}
END_TEST

/* A tool that puts the default evaluator back gives the hook up (CPython's own PEP 523 test does
 * it, a debugger detaching would): memshim's goes back in, and the file says stages may have been
 * missed in between, on no stream of the program's. */
START_TEST(frame_hook_given_back)
{
	struct run r;
	if (!run_replaced_hook(&r, _i, "give-back"))
		return;
	expect_calls(&r, "work", 2); /* before and after, not while the other tool held it */
	ck_assert_msg(!strstr(r.err, "memshim:"), "%s: %s", r.python, r.err);
	ck_assert_int_eq(json_integer_value(json_object_get(r.root, "python_hook_lost")), 1);
	run_done(&r);
}
END_TEST

START_TEST(deep_recursion)
{
	const char *py = python_at_least(_i, 11, "itself cannot recurse this deep,");
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "deep.py", "outer=outer_deep", NULL);
	expect_out(&r, "deep ok");
	expect_calls(&r, "outer", 1);
	ck_assert(!json_is_true(json_object_get(stage_entry(&r, "outer"), "closed_at_exit")));
	double a = (double)json_integer_value(metric(&r, "outer", "mem_cpu_alloc_delta")) / MIB;
	ck_assert_msg(a >= 1.0 && a <= 4.0, "%s: outer kept %.2f MiB", py, a); /* 2 + frames' chunks */
	int warnings = count_lines(r.err, "memshim:");
	if (minor_of(py) == 11)
		ck_assert_msg(warnings == 1 && strstr(r.err, "C stack"), "%s: %s", py, r.err);
	else
		ck_assert_msg(warnings == 0, "%s: %s", py, r.err);
	run_done(&r);
}
END_TEST

Suite *python_suite(void)
{
	Suite *s = suite_create("python_frame_hook");
	TCase *stages = tcase_create("stages");
	tcase_set_timeout(stages, 60);
	tcase_add_loop_test(stages, frame_hook_replaced, 0, NPY);
	tcase_add_loop_test(stages, frame_hook_given_back, 0, NPY);
	tcase_add_loop_test(stages, deep_recursion, 0, NPY);
	suite_add_tcase(s, stages);
	return s;
}
