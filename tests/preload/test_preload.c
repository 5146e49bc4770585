/* Integration: fixture programs under LD_PRELOAD, asserting on the metrics file they leave. */
#include <check.h>
#include <fcntl.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MALLOC_DEBUG_LIB "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
#include "suite.h"
#include "harness.h"

#define MiB (1024 * 1024)
#define BLOCK (MiB + 37)

static struct run r;

static json_t *run_mode(const char *mode, const char *const *env)
{
	const char *argv[] = { built("preload/alloc_fixture"), mode, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	return load_metrics(&r, "m.json");
}

/* As run_mode, for a run that must exit normally with STATUS and leave a metrics file. */
static json_t *run_mode_exited(const char *mode, const char *const *env, int status)
{
	json_t *m = run_mode(mode, env);
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == status, "%s: wait status %d, stderr: %s", mode,
		      r.status, r.err);
	return m;
}

static void assert_between(int64_t v, int64_t lo, int64_t hi, const char *what)
{
	ck_assert_msg(v >= lo && v <= hi, "%s = %lld, expected %lld..%lld", what, (long long)v,
		      (long long)lo, (long long)hi);
}

static int64_t sub(json_t *stage, const char *a, const char *b)
{
	return json_integer_value(json_object_get(json_object_get(stage, a), b));
}

START_TEST(every_wrapped_function_is_counted_exactly)
{
	json_t *m = run_mode_exited("funcs", NULL, 0);
	ck_assert_str_eq(r.err, ""); /* quiet by default */
	static const char *const one_block[] = { "malloc", "calloc", "realloc", "reallocarray",
		"posix_memalign", "memalign", "valloc", "pvalloc" };
	char key[64];
	int64_t total = 0;
	for (size_t i = 0; i < sizeof one_block / sizeof *one_block; i++) {
		snprintf(key, sizeof key, "%s_mem_cpu_alloc_delta", one_block[i]);
		assert_between(metric(m, key), BLOCK, BLOCK + 8192 + 256, key); /* pvalloc rounds to pages */
		total += metric(m, key);
	}
	int64_t grow = metric(m, "realloc_grow_mem_cpu_alloc_delta");
	assert_between(grow, BLOCK - 128, BLOCK + 4096 + 256, "realloc_grow");
	int64_t aligned = metric(m, "aligned_alloc_mem_cpu_alloc_delta");
	assert_between(aligned, 4 * MiB, 4 * MiB + 8192, "aligned_alloc");
	/* realloc_grow's block began as malloc(64), whose 72 usable bytes were counted before */
	ck_assert_int_eq(metric(m, "free_all_mem_cpu_alloc_delta"), -(total + grow + aligned + 72));
	ck_assert_int_eq(metric(m, "free_all_mem_cpu_peaked_delta"), total + grow + aligned + 72);
	assert_between(metric(m, "free_sized_mem_cpu_alloc_delta"), -BLOCK - 4096 - 256, -BLOCK, "free_sized");
	assert_between(metric(m, "cfree_mem_cpu_alloc_delta"), -BLOCK - 4096 - 256, -BLOCK, "cfree");
	assert_between(metric(m, "realloc_zero_mem_cpu_alloc_delta"), -BLOCK - 4096 - 256, -BLOCK, "realloc(p,0)");
	ck_assert_int_eq(metric(m, "malloc_calls"), 1);
	json_decref(m);
}
END_TEST

/* The fast path reads glibc's chunk header instead of calling malloc_usable_size; it must agree to
 * the byte, for every kind of block (fails when the mmapped-chunk rule is dropped). */
START_TEST(usable_sizes_exact_for_every_kind_of_glibc_block)
{
	json_t *m = run_mode("usable", NULL);
	ck_assert_ptr_nonnull(m);
	long long live = -1, peak = -1;
	ck_assert_int_eq(sscanf(r.out, "live=%lld peak=%lld", &live, &peak), 2);
	ck_assert_int_gt(live, 40 << 20);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_alloc_delta"), live);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_peaked_delta"), peak - live);
	json_decref(m);
}
END_TEST

/* Another allocator underneath (glibc's debugging malloc, whose blocks carry a check byte): the
 * general path, still exact to what that allocator's malloc_usable_size says. */
START_TEST(usable_sizes_exact_under_another_allocator)
{
	static char preload[4200];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", built("libmemshim.so"), MALLOC_DEBUG_LIB);
	ck_assert_msg(access(MALLOC_DEBUG_LIB, R_OK) == 0, "glibc's %s is missing", MALLOC_DEBUG_LIB);
	const char *env[] = { preload, "MALLOC_CHECK_=3", NULL };
	json_t *m = run_mode("usable", env);
	ck_assert_ptr_nonnull(m);
	long long live = -1, peak = -1;
	ck_assert_int_eq(sscanf(r.out, "live=%lld peak=%lld", &live, &peak), 2);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_alloc_delta"), live);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_peaked_delta"), peak - live);
	json_decref(m);
}
END_TEST

START_TEST(anonymous_mappings_partial_unmaps_and_remaps)
{
	json_t *m = run_mode_exited("mmap", NULL, 0);
	ck_assert_int_eq(metric(m, "map_mem_cpu_alloc_delta"), 8 * MiB);
	ck_assert_int_eq(metric(m, "unmap_middle_mem_cpu_alloc_delta"), -2 * MiB);
	ck_assert_int_eq(metric(m, "remap_grow_mem_cpu_alloc_delta"), 3 * MiB);
	ck_assert_int_eq(metric(m, "remap_shrink_mem_cpu_alloc_delta"), -5 * MiB);
	ck_assert_int_eq(metric(m, "not_counted_mem_cpu_alloc_delta"), 0);
	ck_assert_int_eq(metric(m, "not_counted_mem_cpu_peaked_delta"), 0);
	ck_assert_int_eq(metric(m, "fixed_over_mem_cpu_alloc_delta"), -MiB);
	ck_assert_int_eq(metric(m, "unmap_all_mem_cpu_alloc_delta"), -3 * MiB);
	json_t *s = stage_of(m, "map");
	ck_assert_int_eq(sub(json_object_get(s, "cpu"), "mmap", "alloc_delta"), 8 * MiB);
	ck_assert_int_eq(sub(json_object_get(s, "cpu"), "malloc", "alloc_delta"), 0);
	ck_assert_int_eq(metric(m, "process_mem_cpu_mmap_peak"), 9 * MiB); /* 6 MiB head + 3 MiB tail */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(json_object_get(m, "process"),
		"mmap"), "live")), 0);
	json_decref(m);
}
END_TEST

START_TEST(eight_threads_churning_return_to_baseline)
{
	json_t *m = run_mode_exited("threads", NULL, 0);
	assert_between(metric(m, "churn_mem_cpu_alloc_delta"), -65536, 65536, "churn alloc_delta");
	ck_assert_int_gt(metric(m, "churn_mem_cpu_peaked_delta"), 1 * MiB);
	ck_assert_int_lt(metric(m, "churn_mem_cpu_peaked_delta"), 8 * 128 * 66000 + MiB);
	json_decref(m);
}
END_TEST

START_TEST(forked_child_writes_its_own_file_and_parent_is_intact)
{
	json_t *m = run_mode("fork", NULL);
	ck_assert_ptr_nonnull(m);
	int child = 0, st = -1;
	ck_assert_int_eq(sscanf(r.out, "child %d status %d", &child, &st), 2);
	ck_assert_int_eq(st, 0);
	assert_between(metric(m, "parent_work_mem_cpu_alloc_delta"), 6 * MiB, 6 * MiB + 16384, "parent");
	ck_assert(!has_metric(m, "child_work_mem_cpu_alloc_delta"));
	ck_assert(json_is_false(json_object_get(m, "is_child")));
	char name[64];
	snprintf(name, sizeof name, "m.json.%d", child);
	json_t *c = load_metrics(&r, name);
	ck_assert_msg(c != NULL, "child file %s missing", name);
	ck_assert(json_is_true(json_object_get(c, "is_child")));
	ck_assert(json_is_true(json_object_get(c, "forked")));
	ck_assert_int_eq(json_integer_value(json_object_get(c, "pid")), child);
	assert_between(metric(c, "child_work_mem_cpu_alloc_delta"), 3 * MiB, 3 * MiB + 8192, "child");
	/* open at fork: in the child it starts at the fork and is closed at the child's exit */
	json_t *pw = stage_of(c, "parent_work");
	ck_assert(json_is_true(json_object_get(pw, "closed_at_exit")));
	assert_between(sub(pw, "cpu", "alloc_delta"), 3 * MiB, 3 * MiB + 16384, "parent_work in child");
	assert_between(metric(c, "before_init_mem_cpu"), 0, 0, "child before_init");
	json_decref(c);
	json_decref(m);
}
END_TEST

START_TEST(fork_while_threads_are_inside_hooks_never_hangs)
{
	json_t *m = run_mode_exited("forkstress", NULL, 0);
	assert_between(metric(m, "stress_mem_cpu_alloc_delta"), -65536, 65536, "stress alloc_delta");
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 100);
	DIR *d = opendir(r.dir);
	struct dirent *e;
	int valid = 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "m.json.", 7)) {
			json_t *c = load_metrics(&r, e->d_name);
			valid += c && json_is_true(json_object_get(c, "forked")) && has_metric(c, "in_child_calls");
			json_decref(c);
		}
	closedir(d);
	ck_assert_int_eq(valid, 100);
	json_decref(m);
}
END_TEST

START_TEST(exec_child_writes_its_own_file)
{
	json_t *m = run_mode("exec", NULL);
	ck_assert_ptr_nonnull(m);
	int child = 0, st = -1;
	ck_assert_int_eq(sscanf(r.out, "child %d status %d", &child, &st), 2);
	char name[64];
	snprintf(name, sizeof name, "m.json.%d", child);
	json_t *c = load_metrics(&r, name);
	ck_assert_msg(c != NULL, "exec'd child file %s missing", name);
	ck_assert(json_is_true(json_object_get(c, "is_child")));
	ck_assert(json_is_false(json_object_get(c, "forked")));
	ck_assert_int_eq(json_integer_value(json_object_get(c, "root_pid")),
			 json_integer_value(json_object_get(m, "pid")));
	assert_between(metric(c, "simple_mem_cpu_alloc_delta"), 2 * MiB, 2 * MiB + 8192, "exec child");
	json_decref(c);
	json_decref(m);
}
END_TEST

START_TEST(follow_children_off_leaves_no_child_files)
{
	const char *env[] = { "MEMSHIM_FOLLOW_CHILDREN=0", NULL };
	json_t *m = run_mode("fork", env);
	ck_assert_ptr_nonnull(m);
	json_decref(m);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
	m = run_mode("exec", env);
	ck_assert_ptr_nonnull(m);
	json_decref(m);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
}
END_TEST

START_TEST(underscore_exit_writes_the_file_and_keeps_the_status)
{
	json_t *m = run_mode_exited("_exit", NULL, 7);
	ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "_exit");
	ck_assert(json_is_true(json_object_get(stage_of(m, "open_stage"), "closed_at_exit")));
	assert_between(metric(m, "open_stage_mem_cpu_alloc_delta"), MiB, MiB + 8192, "open stage");
	json_decref(m);
}
END_TEST

START_TEST(stages_open_at_exit_are_closed_and_marked)
{
	json_t *m = run_mode("open_at_exit", NULL);
	ck_assert_ptr_nonnull(m);
	json_t *s = stage_of(m, "left_open");
	ck_assert(json_is_true(json_object_get(s, "closed_at_exit")));
	ck_assert_int_eq(json_integer_value(json_object_get(s, "calls")), 1);
	ck_assert(json_is_true(json_object_get(m, "complete")));
	json_decref(m);
}
END_TEST

START_TEST(malloc_after_the_file_was_written_works)
{
	json_t *m = run_mode_exited("late", NULL, 0);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

START_TEST(api_nesting_recursion_and_unmatched_ends)
{
	json_t *m = run_mode_exited("api", NULL, 0);
	ck_assert_int_eq(metric(m, "outer_calls"), 1);
	assert_between(metric(m, "outer_mem_cpu_alloc_delta"), 2 * MiB, 2 * MiB + 8192, "outer");
	assert_between(metric(m, "outer_mem_cpu_peaked_delta"), 4 * MiB, 4 * MiB + 8192, "outer peak");
	assert_between(metric(m, "inner_mem_cpu_peaked_delta"), 4 * MiB, 4 * MiB + 8192, "inner peak");
	ck_assert(!has_metric(m, "never_begun_calls"));
	json_decref(m);
}
END_TEST

/* The library's zero-initialised tables (the anonymous mapping after its writable segment) are
 * marked no-huge-page: with THP always on, a first touch there zeroed a 2 MiB page. */
START_TEST(our_tables_never_get_huge_pages)
{
	const char *argv[] = { "/bin/cat", "/proc/self/smaps", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	int after_ours = 0, checked = 0;
	for (char *line = strtok(r.out, "\n"); line && !checked; line = strtok(NULL, "\n")) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) { /* a mapping's first line */
			if (after_ours == 1)
				after_ours = 2; /* the anonymous mapping right after ours */
			else
				after_ours = strstr(line, "libmemshim.so") && !strcmp(perms, "rw-p");
		} else if (after_ours == 2 && !strncmp(line, "VmFlags:", 8)) {
			ck_assert_msg(strstr(line, " nh"), "the tables' mapping: %s", line);
			checked = 1;
		}
	}
	ck_assert_msg(checked, "no mapping after libmemshim.so's writable segment");
}
END_TEST

START_TEST(exit_status_is_unchanged)
{
	const char *argv[] = { built("preload/alloc_fixture"), "exit", "42", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_int_eq(WEXITSTATUS(r.status), 42);
}
END_TEST

START_TEST(bad_stage_spec_warns_and_runs)
{
	const char *env[] = { "MEMSHIM_STAGES=ok=f,bad name=g,x", NULL };
	json_t *m = run_mode_exited("simple", env, 0);
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
	json_t *m = run_mode("api", env);
	ck_assert_ptr_null(m);
	ck_assert_int_eq(WEXITSTATUS(r.status), 10); /* the API returns 0 for everything when disabled */
	ck_assert_str_eq(r.err, "");
}
END_TEST

START_TEST(unwritable_output_warns_once_naming_the_path)
{
	const char *env[] = { "MEMSHIM_OUTPUT=/nonexistent-dir/sub/m.json", NULL };
	run_mode("fork", env);
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	ck_assert_msg(strstr(r.err, "memshim: cannot write metrics file /nonexistent-dir/sub/m.json") != NULL,
		      "%s", r.err);
}
END_TEST

START_TEST(devices_are_written_in_place_never_replaced)
{
	const char *env[] = { "MEMSHIM_OUTPUT=/dev/stdout", NULL };
	run_mode("simple", env);
	struct stat st;
	ck_assert_int_eq(stat("/dev/null", &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	json_error_t err;
	json_t *m = json_loads(r.out, 0, &err);
	ck_assert_msg(m != NULL, "stdout: %s", r.out);
	ck_assert_int_gt(metric(m, "simple_mem_cpu_alloc_delta"), 2 * MiB - 1);
	json_decref(m);
	const char *env2[] = { "MEMSHIM_OUTPUT=/dev/null", NULL };
	run_mode("simple", env2);
	ck_assert_int_eq(stat("/dev/null", &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	ck_assert_str_eq(r.err, "");
}
END_TEST

START_TEST(pid_in_output_path_is_expanded)
{
	static char env0[400];
	snprintf(env0, sizeof env0, "MEMSHIM_OUTPUT=%s", "/tmp/memshim-pid-test-%p.json");
	const char *env[] = { env0, NULL };
	run_mode("fork", env);
	int child = 0, st;
	ck_assert_int_eq(sscanf(r.out, "child %d status %d", &child, &st), 2);
	char path[128];
	snprintf(path, sizeof path, "/tmp/memshim-pid-test-%d.json", child);
	ck_assert_int_eq(access(path, R_OK), 0);
	unlink(path);
}
END_TEST

START_TEST(allocations_before_the_constructor_are_counted)
{
	static char preload[1200];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", built("libmemshim.so"), built("preload/early_lib.so"));
	const char *env[] = { preload, NULL };
	json_t *m = run_mode_exited("simple", env, 0);
	assert_between(metric(m, "before_init_mem_cpu"), 4 * MiB, 4 * MiB + 64 * 1024, "before_init");
	assert_between(metric(m, "simple_mem_cpu_alloc_delta"), 2 * MiB, 2 * MiB + 8192, "simple");
	json_decref(m);
}
END_TEST

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
	assert_between(sub(s, "cpu", "alloc_delta"), 2 * MiB, 2 * MiB + 8192, "doomed so far");
}

START_TEST(fatal_signals_leave_a_snapshot_and_the_same_status)
{
	static const struct { const char *how; int sig; } cases[] = {
		{ "segv", SIGSEGV }, { "abort", SIGABRT }, { "term", SIGTERM } };
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
	assert_between(sub(s, "cpu", "alloc_delta"), 8 * MiB, 8 * MiB + 16384, "doomed before kill");
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
	assert_between(sub(s, "cpu", "alloc_delta"), 8 * MiB, 8 * MiB + 16384, "doomed before kill");
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
	ck_assert_int_ge(json_integer_value(json_object_get(json_object_get(json_object_get(m, "process"), "cpu"), "live")),
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
	json_t *m = run_mode("simple", env);
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(strstr(r.err, "memshim: MEMSHIM_SNAPSHOT_INTERVAL=\"soon\" is not valid") != NULL, "%s", r.err);
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
	json_t *m = run_mode("api", NULL);
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
	m = run_mode("api", env);
	ck_assert_ptr_null(json_object_get(m, "timeline"));
	json_decref(m);
}
END_TEST

START_TEST(a_signal_handler_that_allocates_never_deadlocks)
{
	json_t *m = run_mode_exited("sigmalloc", NULL, 0);
	ck_assert_int_eq(metric(m, "chunk_calls"), 400);
	json_decref(m);
}
END_TEST

START_TEST(exit_from_a_thread_writes_the_file)
{
	json_t *m = run_mode_exited("thread_exit", NULL, 4);
	ck_assert(json_is_true(json_object_get(m, "complete")));
	ck_assert(json_is_true(json_object_get(stage_of(m, "main_work"), "closed_at_exit")));
	json_decref(m);
}
END_TEST

static json_t *spawn_run(const char *how)
{
	const char *argv[] = { built("preload/alloc_fixture"), "spawn", how, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	return load_metrics(&r, "m.json");
}

START_TEST(vfork_and_posix_spawn_children_report_on_their_own)
{
	static const char *const hows[] = { "vfork", "posix_spawn" };
	for (int i = 0; i < 2; i++) {
		json_t *m = spawn_run(hows[i]);
		ck_assert_msg(m != NULL, "%s: parent file missing", hows[i]);
		ck_assert_int_eq(WEXITSTATUS(r.status), 0);
		ck_assert(json_is_false(json_object_get(m, "is_child")));
		ck_assert(!has_metric(m, "simple_calls")); /* the child never wrote into the parent's file */
		int child = 0, st = -1;
		ck_assert_int_eq(sscanf(r.out, "child %d status %d", &child, &st), 2);
		ck_assert_int_eq(st, 0);
		char name[64];
		snprintf(name, sizeof name, "m.json.%d", child);
		json_t *c = load_metrics(&r, name);
		ck_assert_msg(c != NULL, "%s: child file missing", hows[i]);
		ck_assert(json_is_true(json_object_get(c, "is_child")));
		assert_between(metric(c, "simple_mem_cpu_alloc_delta"), 2 * MiB, 2 * MiB + 8192, hows[i]);
		json_decref(c);
		json_decref(m);
	}
}
END_TEST

START_TEST(exec_in_place_keeps_the_main_file)
{
	json_t *m = spawn_run("execve");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	ck_assert(json_is_false(json_object_get(m, "is_child")));
	ck_assert_int_eq(metric(m, "simple_calls"), 1);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
	json_decref(m);
}
END_TEST

START_TEST(no_environment_in_the_file_and_argv_truncated)
{
	static char big[6000];
	memset(big, 'a', sizeof big - 1);
	const char *argv[] = { built("preload/alloc_fixture"), "simple", big, NULL };
	const char *env[] = { "SECRET_TOKEN=hunter2-very-secret", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	char path[400];
	snprintf(path, sizeof path, "%s/m.json", r.dir);
	FILE *f = fopen(path, "r");
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof text - 1, f);
	text[n] = '\0';
	fclose(f);
	ck_assert(strstr(text, "hunter2") == NULL);
	ck_assert(strstr(text, "SECRET_TOKEN") == NULL);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert(json_is_true(json_object_get(m, "argv_truncated")));
	ck_assert_int_le(json_array_size(json_object_get(m, "argv")), 3);
	json_decref(m);
}
END_TEST

START_TEST(a_fifo_is_written_in_place)
{
	char dir[] = "/tmp/memshim-fifo.XXXXXX", fifo[64], env0[100];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof fifo, "%s/pipe", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(env0, sizeof env0, "MEMSHIM_OUTPUT=%s", fifo);
	pid_t reader = fork();
	if (reader == 0) {
		char path[80];
		snprintf(path, sizeof path, "%s/read.json", dir);
		FILE *in = fopen(fifo, "r"), *out = fopen(path, "w");
		int c;
		while ((c = fgetc(in)) != EOF)
			fputc(c, out);
		fclose(out);
		_exit(0);
	}
	/* a write end of our own, opened once the reader has the FIFO open: the shim, which opens it
	 * non-blocking, always finds the reader there (it found none under load: ENXIO, and the reader
	 * then waited for ever); closed after the run so the reader sees the end */
	int hold = open(fifo, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(hold, 0);
	const char *env[] = { env0, NULL };
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	close(hold);
	int st;
	waitpid(reader, &st, 0);
	struct stat sb;
	ck_assert_int_eq(stat(fifo, &sb), 0);
	ck_assert(S_ISFIFO(sb.st_mode));
	char path[80];
	snprintf(path, sizeof path, "%s/read.json", dir);
	json_error_t err;
	json_t *m = json_load_file(path, 0, &err);
	ck_assert_msg(m != NULL, "%s", err.text);
	ck_assert_int_eq(metric(m, "simple_calls"), 1);
	json_decref(m);
}
END_TEST

START_TEST(a_symlinked_output_replaces_its_target_not_the_link)
{
	char dir[] = "/tmp/memshim-link.XXXXXX", target[64], link[64], env0[100];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(target, sizeof target, "%s/real.json", dir);
	snprintf(link, sizeof link, "%s/link.json", dir);
	FILE *f = fopen(target, "w");
	fputs("old", f);
	fclose(f);
	ck_assert_int_eq(symlink(target, link), 0);
	snprintf(env0, sizeof env0, "MEMSHIM_OUTPUT=%s", link);
	const char *env[] = { env0, NULL };
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	struct stat sb;
	ck_assert_int_eq(lstat(link, &sb), 0);
	ck_assert(S_ISLNK(sb.st_mode));
	json_error_t err;
	json_t *m = json_load_file(target, 0, &err);
	ck_assert_msg(m != NULL, "%s", err.text);
	ck_assert_int_eq(stat(target, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0644 & ~umask(022));
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("preload");
	TCase *tc = tcase_create("fixtures");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_wrapped_function_is_counted_exactly);
	tcase_add_test(tc, usable_sizes_exact_for_every_kind_of_glibc_block);
	tcase_add_test(tc, usable_sizes_exact_under_another_allocator);
	tcase_add_test(tc, anonymous_mappings_partial_unmaps_and_remaps);
	tcase_add_test(tc, eight_threads_churning_return_to_baseline);
	tcase_add_test(tc, forked_child_writes_its_own_file_and_parent_is_intact);
	tcase_add_test(tc, fork_while_threads_are_inside_hooks_never_hangs);
	tcase_add_test(tc, exec_child_writes_its_own_file);
	tcase_add_test(tc, follow_children_off_leaves_no_child_files);
	tcase_add_test(tc, underscore_exit_writes_the_file_and_keeps_the_status);
	tcase_add_test(tc, stages_open_at_exit_are_closed_and_marked);
	tcase_add_test(tc, malloc_after_the_file_was_written_works);
	tcase_add_test(tc, api_nesting_recursion_and_unmatched_ends);
	tcase_add_test(tc, our_tables_never_get_huge_pages);
	tcase_add_test(tc, exit_status_is_unchanged);
	tcase_add_test(tc, bad_stage_spec_warns_and_runs);
	tcase_add_test(tc, disabled_writes_nothing);
	tcase_add_test(tc, unwritable_output_warns_once_naming_the_path);
	tcase_add_test(tc, devices_are_written_in_place_never_replaced);
	tcase_add_test(tc, pid_in_output_path_is_expanded);
	tcase_add_test(tc, allocations_before_the_constructor_are_counted);
	tcase_add_test(tc, fatal_signals_leave_a_snapshot_and_the_same_status);
	tcase_add_test(tc, the_programs_own_handler_keeps_working);
	tcase_add_test(tc, periodic_snapshots_survive_kill_9);
	tcase_add_test(tc, bad_snapshot_interval_warns_and_is_off);
	tcase_add_test(tc, default_snapshot_survives_kill_9_in_a_stage);
	tcase_add_test(tc, default_snapshot_only_for_processes_worth_it);
	tcase_add_test(tc, default_snapshots_start_no_thread);
	tcase_add_test(tc, timeline_holds_the_peak_and_stage_events);
	tcase_add_test(tc, a_signal_handler_that_allocates_never_deadlocks);
	tcase_add_test(tc, exit_from_a_thread_writes_the_file);
	tcase_add_test(tc, vfork_and_posix_spawn_children_report_on_their_own);
	tcase_add_test(tc, exec_in_place_keeps_the_main_file);
	tcase_add_test(tc, no_environment_in_the_file_and_argv_truncated);
	tcase_add_test(tc, a_fifo_is_written_in_place);
	tcase_add_test(tc, a_symlinked_output_replaces_its_target_not_the_link);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
