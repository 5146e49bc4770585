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

static const char *const keep_modes[] = { "keep", "keep-inside" };
static const char *const give_back_modes[] = { "give-back", "give-back-inside" };

START_TEST(frame_hook_replaced)
{
	for (int k = 0; k < 2; k++) {
		struct run r;
		if (!run_replaced_hook(&r, _i, keep_modes[k]))
			return;
		expect_stage(&r, "work", 1, 4); /* the call after the replacement is not seen */
		expect_one_warning(&r, "frame evaluation hook");
		ck_assert_ptr_null(json_object_get(r.root, "python_hook_lost"));
		run_done(&r);
	}
}
END_TEST

/* A tool that puts the default evaluator back gives the hook up (CPython's own PEP 523 test does
 * it, a debugger detaching would): memshim's goes back in, and the file says stages may have been
 * missed in between, on no stream of the program's. */
START_TEST(frame_hook_given_back)
{
	for (int k = 0; k < 2; k++) {
		struct run r;
		if (!run_replaced_hook(&r, _i, give_back_modes[k]))
			return;
		expect_calls(&r, "work", 2); /* before and after, not while the other tool held it */
		ck_assert_msg(!strstr(r.err, "memshim:"), "%s %s: %s", r.python, give_back_modes[k], r.err);
		ck_assert_int_eq(json_integer_value(json_object_get(r.root, "python_hook_lost")), 1);
		run_done(&r);
	}
}
END_TEST

/* deep.py under STAGES on interpreter I (3.11+) into R; 0 when skipped. */
static int run_deep(struct run *r, int i, const char *stages)
{
	const char *py = python_at_least(i, 11, "itself cannot recurse this deep,");
	if (!py)
		return 0;
	run_fixture_ok(r, py, "deep.py", stages, NULL);
	expect_out(r, "deep ok");
	expect_calls(r, "outer", 1);
	ck_assert(!json_is_true(json_object_get(stage_entry(r, "outer"), "closed_at_exit")));
	double a = (double)json_integer_value(metric(r, "outer", "mem_cpu_alloc_delta")) / MIB;
	ck_assert_msg(a >= 1.0 && a <= 4.0, "%s: outer kept %.2f MiB", py, a); /* 2 + frames' chunks */
	return 1;
}

/* Another stage is closed while the recursion runs: on 3.11 the frame hook is in and takes itself
 * out before the C stack runs short. */
START_TEST(deep_recursion)
{
	struct run r;
	if (!run_deep(&r, _i, "outer=outer_deep,warm=warm"))
		return;
	int warnings = count_lines(r.err, "memshim:");
	if (minor_of(r.python) == 11)
		ck_assert_msg(warnings == 1 && strstr(r.err, "C stack"), "%s: %s", r.python, r.err);
	else
		ck_assert_msg(warnings == 0, "%s: %s", r.python, r.err);
	run_done(&r);
}
END_TEST

/* A target that ran only after detection stopped on 3.11 is not said to have matched nothing that
 * ran: it was not matched before detection stopped, and the warning says so. */
START_TEST(deep_recursion_then_a_target)
{
	struct run r;
	if (!run_deep(&r, _i, "outer=outer_deep,warm=warm,a=after"))
		return;
	if (minor_of(r.python) == 11) {
		ck_assert_msg(count_lines(r.err, "memshim:") == 2, "%s: %s", r.python, r.err);
		ck_assert_msg(strstr(r.err, "memshim: Python stage target not matched before Python stage detection "
					    "stopped (the deep recursion above): a=after\n"),
			      "%s: %s", r.python, r.err);
		ck_assert_msg(!strstr(r.err, "matched no function that ran"), "%s: %s", r.python, r.err);
		ck_assert(json_is_true(json_object_get(r.root, "python_detection_stopped")));
	} else {
		ck_assert_msg(count_lines(r.err, "memshim:") == 0, "%s: %s", r.python, r.err);
		expect_calls(&r, "a", 1);
	}
	run_done(&r);
}
END_TEST

/* The recursion's stage is the only one: on 3.11 the hook is out while it runs (the calls are
 * inlined, as without memshim), so nothing runs short and nothing is said. */
START_TEST(deep_recursion_hook_out)
{
	struct run r;
	if (!run_deep(&r, _i, "outer=outer_deep"))
		return;
	ck_assert_msg(count_lines(r.err, "memshim:") == 0, "%s: %s", r.python, r.err);
	run_done(&r);
}
END_TEST

/* A stage that closes while the 3.11 hook is out (every stage was open when another call began)
 * brings the hook back: the calls after it are seen, on every route. */
START_TEST(stage_closes_while_hook_out)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "window.py", "a=hold,b=tick", NULL);
	expect_out(&r, "window ok");
	expect_calls(&r, "a", 1);
	expect_stage(&r, "b", 4, 1);
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
	tcase_add_loop_test(stages, deep_recursion_then_a_target, 0, NPY);
	tcase_add_loop_test(stages, deep_recursion_hook_out, 0, NPY);
	tcase_add_loop_test(stages, stage_closes_while_hook_out, 0, NPY);
	suite_add_tcase(s, stages);
	return s;
}
