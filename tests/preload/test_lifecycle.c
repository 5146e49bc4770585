/* Integration: a run from its start to its exit.  Settings read at start (a bad stage spec warns,
 * MEMSHIM_DISABLE writes nothing), stages opened through the API (nesting, recursion, unmatched
 * ends) and the timeline of their events; and every way out: the exit status unchanged, _exit, exit
 * from a thread, stages still open at exit closed and marked. */

#include <check.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"
#include "alloc_modes.h"

#define MiB (1024 * 1024)

static struct run r;

START_TEST(bad_stage_spec_warns_and_runs)
{
	const char *env[] = { "MEMSHIM_STAGES=ok=f,bad name=g,x", NULL };
	json_t *m = run_alloc_mode_exited(&r, "simple", env, 0);
	ck_assert_msg(strstr(r.err, "memshim: MEMSHIM_STAGES entry \"bad name=g\"") != NULL, "%s", r.err);
	ck_assert_msg(strstr(r.err, "memshim: MEMSHIM_STAGES entry \"x\"") != NULL, "%s", r.err);
	int lines = 0; /* the native detector may add its own line about the target "f" */
	for (const char *p = r.err; (p = strstr(p, "memshim: MEMSHIM_STAGES")); p++)
		lines++;
	ck_assert_int_eq(lines, 2);
	ck_assert_int_gt(metric(m, "simple_mem_cpu_alloc_delta"), 2 * MiB - 1);
	json_decref(m);
}
END_TEST

START_TEST(disabled_writes_nothing)
{
	const char *env[] = { "MEMSHIM_DISABLE=1", NULL };
	json_t *m = run_alloc_mode(&r, "api", env);
	ck_assert_ptr_null(m);
	ck_assert_int_eq(WEXITSTATUS(r.status), 10); /* the API returns 0 for everything when disabled */
	ck_assert_str_eq(r.err, "");
}
END_TEST

START_TEST(api_nesting_recursion_and_unmatched_ends)
{
	json_t *m = run_alloc_mode_exited(&r, "api", NULL, 0);
	ck_assert_int_eq(metric(m, "outer_calls"), 1);
	assert_between(metric(m, "outer_mem_cpu_alloc_delta"), 2 * MiB, 2 * MiB + 8192, "outer");
	assert_between(metric(m, "outer_mem_cpu_peaked_delta"), 4 * MiB, 4 * MiB + 8192, "outer peak");
	assert_between(metric(m, "inner_mem_cpu_peaked_delta"), 4 * MiB, 4 * MiB + 8192, "inner peak");
	ck_assert(!has_metric(m, "never_begun_calls"));
	json_decref(m);
}
END_TEST

static int64_t series_peak(json_t *m, const char *component)
{
	size_t i, j;
	json_t *s, *p;
	int64_t peak = -1;
	json_array_foreach(json_object_get(json_object_get(m, "timeline"), "series"), i, s)
		if (!strcmp(json_string_value(json_object_get(s, "component")), component))
			json_array_foreach(json_object_get(s, "points"), j, p)
				if (json_integer_value(json_array_get(p, 1)) > peak)
					peak = json_integer_value(json_array_get(p, 1));
	return peak;
}

START_TEST(timeline_holds_the_peak_and_stage_events)
{
	json_t *m = run_alloc_mode(&r, "api", NULL);
	ck_assert_ptr_nonnull(m);
	json_t *tl = json_object_get(m, "timeline");
	ck_assert_ptr_nonnull(tl);
	ck_assert_int_eq(series_peak(m, "cpu"), metric(m, "process_mem_cpu_peak"));
	size_t i;
	json_t *e;
	int outer_begin = 0, inner_end = 0;
	json_array_foreach(json_object_get(tl, "events"), i, e) {
		const char *st = json_string_value(json_object_get(e, "stage"));
		const char *kind = json_string_value(json_object_get(e, "kind"));
		outer_begin += !strcmp(st, "outer") && !strcmp(kind, "begin");
		inner_end += !strcmp(st, "inner") && !strcmp(kind, "end");
	}
	ck_assert_int_eq(outer_begin, 1);
	ck_assert_int_eq(inner_end, 1);
	json_decref(m);
	const char *env[] = { "MEMSHIM_TIMELINE=0", NULL };
	m = run_alloc_mode(&r, "api", env);
	ck_assert_ptr_null(json_object_get(m, "timeline"));
	json_decref(m);
}
END_TEST

START_TEST(exit_status_is_unchanged)
{
	const char *argv[] = { built("preload/alloc_fixture"), "exit", "42", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_int_eq(WEXITSTATUS(r.status), 42);
}
END_TEST

START_TEST(underscore_exit_writes_the_file_and_keeps_the_status)
{
	json_t *m = run_alloc_mode_exited(&r, "_exit", NULL, 7);
	ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "_exit");
	ck_assert(json_is_true(json_object_get(stage_of(m, "open_stage"), "closed_at_exit")));
	assert_between(metric(m, "open_stage_mem_cpu_alloc_delta"), MiB, MiB + 8192, "open stage");
	json_decref(m);
}
END_TEST

START_TEST(exit_from_a_thread_writes_the_file)
{
	json_t *m = run_alloc_mode_exited(&r, "thread_exit", NULL, 4);
	ck_assert(json_is_true(json_object_get(m, "complete")));
	ck_assert(json_is_true(json_object_get(stage_of(m, "main_work"), "closed_at_exit")));
	json_decref(m);
}
END_TEST

START_TEST(stages_open_at_exit_are_closed_and_marked)
{
	json_t *m = run_alloc_mode(&r, "open_at_exit", NULL);
	ck_assert_ptr_nonnull(m);
	json_t *s = stage_of(m, "left_open");
	ck_assert(json_is_true(json_object_get(s, "closed_at_exit")));
	ck_assert_int_eq(json_integer_value(json_object_get(s, "calls")), 1);
	ck_assert(json_is_true(json_object_get(m, "complete")));
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc1 = tcase_create("start and stages");
	tcase_set_timeout(tc1, 120);
	tcase_add_test(tc1, bad_stage_spec_warns_and_runs);
	tcase_add_test(tc1, disabled_writes_nothing);
	tcase_add_test(tc1, api_nesting_recursion_and_unmatched_ends);
	tcase_add_test(tc1, timeline_holds_the_peak_and_stage_events);
	suite_add_tcase(s, tc1);
	TCase *tc2 = tcase_create("exit");
	tcase_set_timeout(tc2, 120);
	tcase_add_test(tc2, exit_status_is_unchanged);
	tcase_add_test(tc2, underscore_exit_writes_the_file_and_keeps_the_status);
	tcase_add_test(tc2, exit_from_a_thread_writes_the_file);
	tcase_add_test(tc2, stages_open_at_exit_are_closed_and_marked);
	suite_add_tcase(s, tc2);
	return run_suite(s);
}
