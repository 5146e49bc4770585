/* Integration: what a user sees on a normal run (issue 39).  A warning is said once per run, not
 * by every process a shell or a launcher starts; a native target is "not found" only when no
 * process of the run found it. */

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"

static struct run r;

/* How many times NEEDLE occurs in TEXT. */
static int occurrences(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* A shell running the server fixture: its forked children run names_work. */
static const char *const *server_under_shell(void)
{
	static char cmd[PATH_MAX + 128];
	static const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	snprintf(cmd, sizeof cmd, "'%s' --a-long-argument-a-title-can-take-the-place-of; /bin/true; exit 0",
		 built("preload/names_fixture"));
	return argv;
}

/* A bad value reaches every process a shell starts; it is named once, by the first. */
START_TEST(a_bad_value_is_named_once_per_run)
{
	const char *env[] = { "MEMSHIM_SITES_RATE=bogus", "MEMSHIM_STAGE=x", NULL };
	ck_assert_int_eq(run_under_shim(&r, server_under_shell(), env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
	ck_assert_int_eq(occurrences(r.err, "memshim: MEMSHIM_SITES_RATE=\"bogus\" is not valid"), 1);
	ck_assert_int_eq(occurrences(r.err, "memshim: unknown setting MEMSHIM_STAGE ignored"), 1);
	ck_assert_int_eq(memshim_lines(r.err), 2);
}
END_TEST

/* Forked children that each meet the same trouble (here: the live records' directory cannot be
 * made, and each child opens a stage, so each tries) say it once for the run. */
START_TEST(the_same_warning_once_from_forked_children)
{
	const char *env[] = { "MEMSHIM_STAGES=w=names_work", "MEMSHIM_LIVE_DIR=/proc/no-such-memshim-dir/live", NULL };
	const char *argv[] = { built("preload/names_fixture"), "--a-long-argument-a-title-can-take-the-place-of", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
	ck_assert_msg(occurrences(r.err, "memshim: cannot create the live record in /proc/no-such-memshim-dir") == 1,
		      "%s", r.err);
	ck_assert_int_eq(memshim_lines(r.err), 1);
}
END_TEST

/* A native target the program has, run through a wrapper that does not (a shell here; `time
 * ./prog` alike), is found in the run: no line about it.  One found nowhere is named once, by the
 * run's first process, not by each child as well. */
START_TEST(native_targets_judged_over_the_run)
{
	const char *env[] = { "MEMSHIM_STAGES=w=names_work,x=no_such_function_in_any_object", NULL };
	ck_assert_int_eq(run_under_shim(&r, server_under_shell(), env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
	ck_assert_msg(!strstr(r.err, "'names_work'"), "%s", r.err);
	ck_assert_msg(occurrences(r.err, "memshim: native stage x: 'no_such_function_in_any_object' was not found") == 1,
		      "%s", r.err);
	ck_assert_int_eq(memshim_lines(r.err), 1);
}
END_TEST

int main(void)
{
	harness_timeout = 60;
	Suite *s = suite_create("runs");
	TCase *tc = tcase_create("warnings");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_bad_value_is_named_once_per_run);
	tcase_add_test(tc, the_same_warning_once_from_forked_children);
	tcase_add_test(tc, native_targets_judged_over_the_run);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
