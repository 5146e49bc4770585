/* Integration: signals and snapshots.  A fatal signal leaves a snapshot and the same wait status,
 * the program's own handlers keep working (one that allocates never deadlocks), and a process
 * killed with SIGKILL leaves its last snapshot: periodic (MEMSHIM_SNAPSHOT_INTERVAL) or by the
 * default policy (in a stage, or old and large), which starts no thread. */

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
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
	} cases[] = { { "segv", SIGSEGV }, { "abort", SIGABRT }, { "term", SIGTERM }, { "hup", SIGHUP },
		      { "quit", SIGQUIT }, { "pipe", SIGPIPE }, { "alarm", SIGALRM }, { "usr2", SIGUSR2 } };
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

/* sigmap_fixture MODE under the shim (ENV more), killed after 60 s: it must end as bare, "ok". */
static void sigmap_ok(const char *mode, const char *const *env)
{
	const char *argv[] = { built("preload/sigmap_fixture"), mode, NULL };
	harness_timeout = 60;
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	harness_timeout = 0;
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && strstr(r.out, "ok\n"),
		      "%s: status %#x, stdout %s, stderr %s", mode, r.status, r.out, r.err);
}

/* A SIGALRM handler that forks while the program maps and unmaps: it spun for ever on the mapping
 * table's lock, which the munmap it interrupted held (and SIGTERM could not end it). */
START_TEST(fork_in_a_handler_that_interrupted_munmap)
{
	sigmap_ok("forksig", NULL);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	json_decref(m);
}
END_TEST

/* A handler that siglongjmps out of mmap/munmap: the lock the wrapper held stayed held (another
 * thread's mmap then spun for ever) and the thread's counting stayed off (50 MiB malloc'ed after
 * read as 0). */
START_TEST(siglongjmp_out_of_mmap_keeps_counting)
{
	sigmap_ok("jump", NULL);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	int64_t live = member(json_object_get(m, "process"), "malloc", "live");
	assert_between(live, 50 * MiB, 50 * MiB + 8 * MiB, "malloc live at exit (50 MiB held)");
	json_decref(m);
}
END_TEST

/* glibc's debugging allocator (mtrace, MALLOC_CHECK_) preloaded after memshim: the program's malloc
 * is its malloc@GLIBC_2.2.5, which memshim's calls must reach too (an unversioned lookup passed
 * over it: the trace held no call). */
START_TEST(the_debugging_allocator_behind_memshim_sees_every_call)
{
	static const char debug[] = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0";
	if (access(debug, R_OK) != 0) {
		printf("test_signals: no %s (glibc 2.34+): its test skipped\n", debug);
		return;
	}
	char preload[1024], trace[PATH_MAX + 32];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s:%s", built("libmemshim.so"), debug);
	char dir[] = "/tmp/memshim-mtrace.XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(trace, sizeof trace, "MALLOC_TRACE=%s/trace", dir);
	const char *env[] = { preload, trace, "MALLOC_CHECK_=3", NULL }; /* a block freed by another allocator aborts */
	sigmap_ok("mtrace", env);
	ck_assert_int_eq(memshim_lines(r.err), 0);
	char text[4096] = "";
	FILE *f = fopen(trace + strlen("MALLOC_TRACE="), "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = '\0';
	unlink(trace + strlen("MALLOC_TRACE="));
	rmdir(dir);
	/* malloc 111, malloc 222, free, calloc, realloc, aligned_alloc 640, free: between Start and End */
	ck_assert_msg(strstr(text, "+ ") && strstr(text, "- ") && strstr(text, "< ") && strstr(text, "> "), "%s", text);
	ck_assert_msg(strstr(text, " 0x280\n"), "no aligned_alloc of 640 bytes: %s", text);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_ge(member(json_object_get(m, "process"), "malloc", "peak"), 444 + 222);
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
	tcase_add_test(tc1, fork_in_a_handler_that_interrupted_munmap);
	tcase_add_test(tc1, siglongjmp_out_of_mmap_keeps_counting);
	tcase_add_test(tc1, the_debugging_allocator_behind_memshim_sees_every_call);
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
