/* Integration: signals and snapshots.  A fatal signal leaves a snapshot and the same wait status,
 * the program's own handlers keep working (one that allocates never deadlocks), and a process
 * killed with SIGKILL leaves its last snapshot: periodic (MEMSHIM_SNAPSHOT_INTERVAL) or by the
 * default policy (in a stage, or old and large), which starts no thread. */

#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"
#include "alloc_modes.h"

#define MiB (1024 * 1024)

static struct run r;

static json_t *crash_run(const char *how, const char *const *env)
{
	const char *argv[] = { built("preload/alloc_fixture"), "crash", how, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	return load_metrics(&r, "m.json");
}

static void assert_signal_snapshot(json_t *m, int sig)
{
	ck_assert_msg(m != NULL, "no snapshot after signal %d", sig);
	ck_assert(json_is_false(json_object_get(m, "complete")));
	ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "signal");
	ck_assert_int_eq(json_integer_value(json_object_get(m, "signal")), sig);
	json_t *s = stage_of(m, "doomed");
	ck_assert(json_is_true(json_object_get(s, "open")));
	assert_between(member(s, "cpu", "alloc_delta"), 2 * MiB, 2 * MiB + 8192, "doomed so far");
}

START_TEST(fatal_signals_leave_a_snapshot_and_the_same_status)
{
	static const struct {
		const char *how;
		int sig;
	} cases[] = { { "segv", SIGSEGV }, { "abort", SIGABRT }, { "term", SIGTERM } };
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		json_t *m = crash_run(cases[i].how, NULL);
		ck_assert_msg(WIFSIGNALED(r.status) && WTERMSIG(r.status) == cases[i].sig, "%s: status %d",
			      cases[i].how, r.status);
		assert_signal_snapshot(m, cases[i].sig);
		json_decref(m);
	}
}
END_TEST

START_TEST(the_programs_own_handler_keeps_working)
{
	json_t *m = crash_run("own_term", NULL);
	ck_assert(WIFEXITED(r.status));
	ck_assert_int_eq(WEXITSTATUS(r.status), 3);
	ck_assert_str_eq(r.out, "caught\n");
	ck_assert(json_is_true(json_object_get(m, "complete")));
	ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "_exit");
	json_decref(m);
}
END_TEST

/* A SIGSEGV handled on an 8 KiB alternate stack: the program's handler ending it with _exit or exit,
 * or calling abort() there (Rust's stack overflow handler: memshim's SIGABRT handler runs on what
 * is left of that stack), or the default disposition (memshim's handler on that stack): the same
 * status as without memshim and the file (written on a stack of memshim's own: on the program's
 * it crashed, and raise's first call did in the abort case). */
START_TEST(a_small_alternate_stack_ends_as_without_memshim)
{
	static const struct { const char *how; int sig; } deaths[] = { { "alt_segv", SIGSEGV }, { "alt_abort", SIGABRT } };
	json_t *m;
	for (size_t i = 0; i < sizeof deaths / sizeof *deaths; i++) {
		m = crash_run(deaths[i].how, NULL);
		ck_assert_msg(WIFSIGNALED(r.status) && WTERMSIG(r.status) == deaths[i].sig, "%s: status %d",
			      deaths[i].how, r.status);
		assert_signal_snapshot(m, deaths[i].sig);
		json_decref(m);
	}
	static const struct {
		const char *how, *reason;
		int status;
	} ends[] = { { "alt_exit", "_exit", 3 }, { "alt_libc_exit", "exit", 4 } };
	for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
		m = crash_run(ends[i].how, NULL);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == ends[i].status, "%s: status %d",
			      ends[i].how, r.status);
		ck_assert_msg(m != NULL, "%s: no metrics file", ends[i].how);
		ck_assert(json_is_true(json_object_get(m, "complete")));
		ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), ends[i].reason);
		assert_between(member(stage_of(m, "doomed"), "cpu", "alloc_delta"), 2 * MiB, 2 * MiB + 8192,
			       ends[i].how);
		json_decref(m);
	}
}
END_TEST

START_TEST(a_signal_handler_that_allocates_never_deadlocks)
{
	json_t *m = run_alloc_mode_exited(&r, "sigmalloc", NULL, 0);
	ck_assert_int_eq(metric(m, "chunk_calls"), 400);
	json_decref(m);
}
END_TEST

START_TEST(periodic_snapshots_survive_kill_9)
{
	const char *env[] = { "MEMSHIM_SNAPSHOT_INTERVAL=0.05", NULL };
	json_t *m = crash_run("kill9", env);
	ck_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	ck_assert_msg(m != NULL, "no valid snapshot after kill -9");
	ck_assert(json_is_false(json_object_get(m, "complete")));
	ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "snapshot");
	json_t *s = stage_of(m, "doomed");
	ck_assert(json_is_true(json_object_get(s, "open")));
	assert_between(member(s, "cpu", "alloc_delta"), 8 * MiB, 8 * MiB + 16384, "doomed before kill");
	ck_assert_int_eq(count_files(r.dir, ".m.json.tmp", NULL, 0), 0);
	json_decref(m);
}
END_TEST

static json_t *policy_run(const char *how, const char *const *env)
{
	const char *argv[] = { built("preload/alloc_fixture"), "policy", how, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	return load_metrics(&r, "m.json");
}

static void assert_default_snapshot(json_t *m)
{
	ck_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	ck_assert_msg(m != NULL, "no valid snapshot after kill -9");
	ck_assert(json_is_false(json_object_get(m, "complete")));
	ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "snapshot");
	ck_assert_int_eq(count_files(r.dir, ".m.json.tmp", NULL, 0), 0);
}

/* Without MEMSHIM_SNAPSHOT_INTERVAL: a process killed while it sits in a stage leaves the stage. */
START_TEST(default_snapshot_survives_kill_9_in_a_stage)
{
	json_t *m = policy_run("stage_sleep", NULL);
	assert_default_snapshot(m);
	ck_assert(json_is_true(json_object_get(stage_of(m, "doomed"), "open")));
	json_decref(m);
	m = policy_run("stage_grow", NULL); /* memory moved seconds later: a fresher one */
	assert_default_snapshot(m);
	json_t *s = stage_of(m, "doomed");
	ck_assert(json_is_true(json_object_get(s, "open")));
	assert_between(member(s, "cpu", "alloc_delta"), 8 * MiB, 8 * MiB + 16384, "doomed before kill");
	json_decref(m);
	const char *off[] = { "MEMSHIM_SNAPSHOT_INTERVAL=0", NULL };
	m = policy_run("stage_sleep", off);
	ck_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	ck_assert_msg(m == NULL, "MEMSHIM_SNAPSHOT_INTERVAL=0 still wrote a snapshot");
}
END_TEST

/* A process that opens no stage: nothing while it stays small, a snapshot once it is old and large. */
START_TEST(default_snapshot_only_for_processes_worth_it)
{
	json_t *m = policy_run("small", NULL);
	ck_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	ck_assert_msg(m == NULL, "a small process without stages wrote a snapshot");
	ck_assert_int_eq(count_files(r.dir, "m.json", NULL, 0), 0);
	m = policy_run("big", NULL);
	assert_default_snapshot(m);
	ck_assert_int_ge(
		json_integer_value(json_object_get(json_object_get(json_object_get(m, "process"), "cpu"), "live")),
		80 * MiB);
	json_decref(m);
}
END_TEST

/* The default policy starts no thread; the periodic one does (so the check can fail). */
START_TEST(default_snapshots_start_no_thread)
{
	json_t *m = policy_run("threads", NULL);
	ck_assert_str_eq(r.out, "tasks 1\n");
	ck_assert(json_is_true(json_object_get(m, "complete")));
	json_decref(m);
	const char *env[] = { "MEMSHIM_SNAPSHOT_INTERVAL=0.5", NULL };
	m = policy_run("threads", env);
	ck_assert_str_eq(r.out, "tasks 2\n");
	json_decref(m);
}
END_TEST

START_TEST(bad_snapshot_interval_warns_and_is_off)
{
	const char *env[] = { "MEMSHIM_SNAPSHOT_INTERVAL=soon", NULL };
	json_t *m = run_alloc_mode(&r, "simple", env);
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(strstr(r.err, "memshim: MEMSHIM_SNAPSHOT_INTERVAL=\"soon\" is not valid") != NULL, "%s", r.err);
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("signals");
	TCase *tc1 = tcase_create("signals");
	tcase_set_timeout(tc1, 120);
	tcase_add_test(tc1, fatal_signals_leave_a_snapshot_and_the_same_status);
	tcase_add_test(tc1, the_programs_own_handler_keeps_working);
	tcase_add_test(tc1, a_small_alternate_stack_ends_as_without_memshim);
	tcase_add_test(tc1, a_signal_handler_that_allocates_never_deadlocks);
	suite_add_tcase(s, tc1);
	TCase *tc2 = tcase_create("snapshots");
	tcase_set_timeout(tc2, 120);
	tcase_add_test(tc2, periodic_snapshots_survive_kill_9);
	tcase_add_test(tc2, default_snapshot_survives_kill_9_in_a_stage);
	tcase_add_test(tc2, default_snapshot_only_for_processes_worth_it);
	tcase_add_test(tc2, default_snapshots_start_no_thread);
	tcase_add_test(tc2, bad_snapshot_interval_warns_and_is_off);
	suite_add_tcase(s, tc2);
	return run_suite(s);
}
