/* The sys.monitoring route (Python 3.12+) and what the program can see of memshim: the
 * tool ids it takes, waits for and gives back, the program's own profilers, code-object extra
 * slots, a debugger's line.
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

START_TEST(own_profilers)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	/* the fixture asserts its profilers saw their calls */
	run_fixture_ok(&r, py, "profiled.py", "prof=work,prof2=work2", NULL);
	expect_out(&r, "profiled ok");
	expect_stage(&r, "prof", 1, 6);
	expect_stage(&r, "prof2", 1, 3);
	/* memshim's detector is not a profile function: nothing was displaced, nothing to warn about */
	ck_assert_msg(count_lines(r.err, "memshim:") == 0, "%s: %s", py, r.err);
	run_done(&r);
}
END_TEST

START_TEST(monitoring_tool_id_taken)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	struct run r;
	/* the program's use_tool_id succeeded and its callback ran */
	run_fixture_ok(&r, py, "toolid.py", "work=work,after=after", NULL);
	expect_out(&r, "toolid ok");
	expect_one_warning(&r, "tool id");
	expect_stage(&r, "work", 1, 7); /* opened before the move, closed after it */
	expect_stage(&r, "after", 2, 5);
	run_done(&r);
}
END_TEST

/* No sys.monitoring tool id is held until a function a target names exists (the Trainer defaults,
 * a target that never matches); then one is, which the program sees as free (no tool, no events).
 * CPython's test_monitoring gives the bare result, also with a target matched in every test. */
START_TEST(monitoring_tool_id_waits)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	static const char *const none = "[None, None, None, None, None, None] [0, 0, 0, 0, 0, 0] True\n";
	const char *specs[] = { NULL, "s=some_function", "late=late_target" };
	for (int k = 0; k < 3; k++) {
		struct run r;
		const char *args[] = { fixture("toolfree.py"), k == 2 ? "exec" : NULL, NULL };
		run_py(&r, py, args, specs[k], NULL, NULL, 1);
		RUN_OK(&r);
		const char *before = strstr(r.out, "before "), *after = strstr(r.out, "after ");
		ck_assert_msg(before && !strncmp(before + 7, none, strlen(none)), "%s %s: %s", py,
			      specs[k] ? specs[k] : "(defaults)", r.out);
		if (k == 2) {
			ck_assert_msg(after && !strncmp(after + 6, none, strlen(none)), "%s: %s", py, r.out);
			expect_calls(&r, "late", 1);
		}
		run_done(&r);
	}
	/* CPython's own test of sys.monitoring, bare and under the shim: the same result */
	struct run bare, shim;
	const char *args[] = { "-m", "test", "test_monitoring", NULL };
	run_py(&bare, py, args, NULL, NULL, NULL, 0);
	if (!strstr(bare.out, "Result: SUCCESS")) {
		printf("test_python: %s test_monitoring does not pass bare (no test package?), skipped\n", py);
		run_done(&bare);
		return;
	}
	char total[128] = "";
	const char *t = strstr(bare.out, "Total tests:");
	snprintf(total, sizeof total, "%.*s", t ? (int)strcspn(t, "\n") : 0, t ? t : "");
	const char *monitored[] = { NULL, "s=some_function", "s=TestCase.run" };
	for (int k = 0; k < 3; k++) {
		run_py(&shim, py, args, monitored[k], NULL, NULL, 1);
		ck_assert_msg(shim.status == bare.status && strstr(shim.out, "Result: SUCCESS") && total[0] &&
			      strstr(shim.out, total), "%s %s: test_monitoring under the shim (bare: %s): %s", py,
			      monitored[k] ? monitored[k] : "(defaults)", total, shim.out);
		run_done(&shim);
	}
	run_done(&bare);
}
END_TEST

/* Every id memshim could move to is taken: both warnings (moved, then stopped) are printed. */
START_TEST(monitoring_no_tool_id_left)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "toolid_all.py", "work=work,after=after", NULL);
	expect_out(&r, "toolid_all ok");
	ck_assert_msg(count_lines(r.err, "memshim moved to another id") == 1 && strstr(r.err, "none is free"),
		      "%s: expected the move and the stop warnings: %s", py, r.err);
	expect_absent(&r, "after"); /* nothing detects it any more */
	run_done(&r);
}
END_TEST

/* A program's code-object extra index is the one it gets without memshim (0), and the slot stays
 * empty on the functions memshim matched: memshim keeps what it knows of code objects in a table
 * of its own (a slot taken by memshim made CPython's test_code crash at exit). */
START_TEST(code_extra_left_to_the_program)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "coextra.py", "w=work", NULL);
	expect_out(&r, "index 0, work's slot 0 empty");
	expect_calls(&r, "w", 1);
	run_done(&r);
}
END_TEST

/* The first line of OUT that starts with "> " (pdb's stop), or NULL. */
static const char *pdb_stop(const char *out)
{
	const char *p = strncmp(out, "> ", 2) == 0 ? out : strstr(out, "\n> ");
	return p && *p == '\n' ? p + 1 : p;
}

/* pdb stops on the line it stops on bare, after a target matched (3.13 stopped one line late while
 * memshim's PY_START was on for every code object). */
START_TEST(debugger_line_as_without_shim)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run bare, shim;
	const char *args[] = { fixture("pdbline.py"), NULL };
	run_py(&bare, py, args, NULL, NULL, NULL, 0);
	run_py(&shim, py, args, "w=work", NULL, NULL, 1);
	const char *b = pdb_stop(bare.out), *m = pdb_stop(shim.out);
	ck_assert_msg(bare.status == 0 && strstr(bare.out, "pdbline ok") && b, "%s bare: %s", py, bare.out);
	ck_assert_msg(m && strcspn(b, "\n") == strcspn(m, "\n") && !strncmp(b, m, strcspn(b, "\n")),
		      "%s: pdb stopped elsewhere under the shim:\n%s\nbare:\n%s", py, shim.out, bare.out);
	expect_calls(&shim, "w", 1);
	run_done(&bare);
	run_done(&shim);
}
END_TEST

/* 3.12+: the tool id is given back once no watched function can match (its name ran in another
 * module): the original get_tool, kept before memshim took the id, shows it free again. */
START_TEST(monitoring_tool_id_given_back)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "toolback.py", "w=othermod:work", NULL);
	expect_out(&r, "held True after [None, None, None, None, None, None]");
	run_done(&r);
}
END_TEST

Suite *python_suite(void)
{
	Suite *s = suite_create("python_monitoring");
	TCase *stages = tcase_create("stages");
	tcase_set_timeout(stages, 60);
	tcase_add_loop_test(stages, own_profilers, 0, NPY);
	tcase_add_loop_test(stages, monitoring_tool_id_taken, 0, NPY);
	tcase_add_loop_test(stages, monitoring_no_tool_id_left, 0, NPY);
	tcase_add_loop_test(stages, monitoring_tool_id_waits, 0, NPY);
	tcase_add_loop_test(stages, code_extra_left_to_the_program, 0, NPY);
	tcase_add_loop_test(stages, debugger_line_as_without_shim, 0, NPY);
	tcase_add_loop_test(stages, monitoring_tool_id_given_back, 0, NPY);
	suite_add_tcase(s, stages);
	return s;
}
