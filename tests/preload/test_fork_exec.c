/* Integration: children.  Forked, vfork'd, posix_spawn'd and exec'd children write files of their
 * own (m.json.<pid>) and leave the parent's intact, an exec in place keeps the main file, a fork
 * while threads are inside hooks never hangs; and forked workers report what they added, not the
 * memory they share with their parent (a DataLoader worker of a 355 MB trainer read
 * 355 MB as its own peak). */

#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"
#include "alloc_modes.h"

#define MiB ((int64_t)1 << 20)

static struct run r;

/* A hang fails the test instead of stalling the suite. */
static void bounded(void)
{
	harness_timeout = 60;
}

/* The child alloc_fixture reported on stdout ("child <pid> status <status>") into *PID and
 * *STATUS: its own metrics file, m.json.<pid> (fails the test, naming WHAT, when it is missing). */
static json_t *reported_child_file(int *pid, int *status, const char *what)
{
	ck_assert_int_eq(sscanf(r.out, "child %d status %d", pid, status), 2);
	char name[64];
	snprintf(name, sizeof name, "m.json.%d", *pid);
	json_t *c = load_metrics(&r, name);
	ck_assert_msg(c != NULL, "%s: child file %s missing", what, name);
	return c;
}

START_TEST(forked_child_writes_its_own_file_and_parent_is_intact)
{
	json_t *m = run_alloc_mode(&r, "fork", NULL);
	ck_assert_ptr_nonnull(m);
	int child = 0, st = -1;
	json_t *c = reported_child_file(&child, &st, "fork");
	ck_assert_int_eq(st, 0);
	assert_between(metric(m, "parent_work_mem_cpu_alloc_delta"), 6 * MiB, 6 * MiB + 16384, "parent");
	ck_assert(!has_metric(m, "child_work_mem_cpu_alloc_delta"));
	ck_assert(json_is_false(json_object_get(m, "is_child")));
	ck_assert(json_is_true(json_object_get(c, "is_child")));
	ck_assert(json_is_true(json_object_get(c, "forked")));
	ck_assert_int_eq(json_integer_value(json_object_get(c, "pid")), child);
	assert_between(metric(c, "child_work_mem_cpu_alloc_delta"), 3 * MiB, 3 * MiB + 8192, "child");
	/* open at fork: in the child it starts at the fork and is closed at the child's exit */
	json_t *pw = stage_of(c, "parent_work");
	ck_assert(json_is_true(json_object_get(pw, "closed_at_exit")));
	assert_between(member(pw, "cpu", "alloc_delta"), 3 * MiB, 3 * MiB + 16384, "parent_work in child");
	assert_between(metric(c, "before_init_mem_cpu"), 0, 0, "child before_init");
	json_decref(c);
	json_decref(m);
}
END_TEST

START_TEST(fork_while_threads_are_inside_hooks_never_hangs)
{
	json_t *m = run_alloc_mode_exited(&r, "forkstress", NULL, 0);
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
	json_t *m = run_alloc_mode(&r, "exec", NULL);
	ck_assert_ptr_nonnull(m);
	int child = 0, st = -1;
	json_t *c = reported_child_file(&child, &st, "exec'd");
	ck_assert(json_is_true(json_object_get(c, "is_child")));
	ck_assert(json_is_false(json_object_get(c, "forked")));
	ck_assert_int_eq(json_integer_value(json_object_get(c, "root_pid")),
			 json_integer_value(json_object_get(m, "pid")));
	assert_between(metric(c, "simple_mem_cpu_alloc_delta"), 2 * MiB, 2 * MiB + 8192, "exec child");
	json_decref(c);
	json_decref(m);
}
END_TEST

/* The kernel's high-water RSS (getrusage) carries the 64 MiB its parent had written across the
 * child's exec: the child's process_mem_rss_peak is its own (VmHWM), not 64 MiB. */
START_TEST(an_exec_child_s_rss_peak_is_its_own)
{
	json_t *m = run_alloc_mode(&r, "exec_big", NULL);
	ck_assert_ptr_nonnull(m);
	int child = 0, st = -1;
	json_t *c = reported_child_file(&child, &st, "exec'd");
	ck_assert_int_ge(metric(m, "process_mem_rss_peak"), 64 * MiB);
	assert_between(metric(c, "process_mem_rss_peak"), 2 * MiB, 32 * MiB, "exec child's RSS peak");
	json_decref(c);
	json_decref(m);
}
END_TEST

START_TEST(follow_children_off_leaves_no_child_files)
{
	const char *env[] = { "MEMSHIM_FOLLOW_CHILDREN=0", NULL };
	json_t *m = run_alloc_mode(&r, "fork", env);
	ck_assert_ptr_nonnull(m);
	json_decref(m);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
	m = run_alloc_mode(&r, "exec", env);
	ck_assert_ptr_nonnull(m);
	json_decref(m);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
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
		json_t *c = reported_child_file(&child, &st, hows[i]);
		ck_assert_int_eq(st, 0);
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

START_TEST(a_forked_worker_reports_what_it_added)
{
	const char *argv[] = { built("preload/fork_fixture"), NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x %s", r.status, r.err);
	ck_assert_str_eq(r.out, "workers ok\n");
	ck_assert_str_eq(r.err, "");
	json_t *parent = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(parent);
	ck_assert_int_ge(metric(parent, "process_mem_cpu_peak"), 96 * MiB);
	ck_assert_ptr_null(json_object_get(json_object_get(parent, "metrics"), "inherited_mem_cpu"));
	json_decref(parent);

	json_t *children[2];
	ck_assert_int_eq(load_files(r.dir, "m.json.", children, 2), 2);
	for (int k = 0; k < 2; k++) {
		json_t *child = children[k];
		ck_assert(json_is_true(json_object_get(child, "forked")));
		int64_t inherited = metric(child, "inherited_mem_cpu");
		ck_assert_msg(inherited >= 96 * MiB && inherited < 98 * MiB, "inherited %lld", (long long)inherited);
		int64_t peak = metric(child, "process_mem_cpu_peak");
		ck_assert_msg(peak >= 24 * MiB && peak < 25 * MiB, "child peak %lld (what it added)", (long long)peak);
		ck_assert_int_lt(metric(child, "before_init_mem_cpu"), MiB);
		json_t *proc = json_object_get(child, "process");
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(proc, "inherited"), "cpu")), inherited);
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(proc, "cpu"), "peak")), peak);
		json_decref(child);
	}
}
END_TEST

static void release(json_t **files, int n)
{
	for (int i = 0; i < n; i++)
		json_decref(files[i]);
}

/* Helpers: a child that writes its parent's name with ".<pid>" and did nothing worth a
 * file (no stage of its own, little memory: a shell's subshells, the readlink and uname pyenv's
 * shim runs) leaves nothing beside the output; under memshim run (MEMSHIM_RUN_DIR) its file goes to
 * the run's directory; with MEMSHIM_CHILDREN_DIR every child's file goes there, as asked. */
START_TEST(helpers_leave_nothing_beside_the_output)
{
	char run_dir[PATH_MAX], kids[PATH_MAX], var[PATH_MAX + 32], kvar[PATH_MAX + 32];
	json_t *files[4];
	const char *small[] = { built("preload/fork_fixture"), "2", NULL };
	ck_assert_int_eq(run_under_shim(&r, small, NULL), 0);
	ck_assert_str_eq(r.out, "workers ok\n");
	ck_assert_int_eq(count_files(r.dir, "m.json", NULL, 0), 1); /* the parent's own */
	const char *shell[] = { "/bin/sh", "-c", "/bin/true; /bin/true; (/bin/true); exit 0", NULL };
	ck_assert_int_eq(run_under_shim(&r, shell, NULL), 0);
	ck_assert_int_eq(count_files(r.dir, "m.json", NULL, 0), 1);

	make_dir(run_dir, sizeof run_dir, 0700, getuid());
	snprintf(var, sizeof var, "MEMSHIM_RUN_DIR=%s", run_dir);
	const char *env[] = { var, NULL };
	ck_assert_int_eq(run_under_shim(&r, small, env), 0);
	ck_assert_int_eq(count_files(r.dir, "m.json", NULL, 0), 1);
	ck_assert_int_eq(load_files(run_dir, "m.json.", files, 4), 2);
	for (int i = 0; i < 2; i++) {
		ck_assert(json_is_true(json_object_get(files[i], "complete")));
		ck_assert(json_is_true(json_object_get(files[i], "forked")));
		assert_between(metric(files[i], "process_mem_cpu_peak"), 2 * MiB, 3 * MiB, "helper's peak");
	}
	release(files, 2);

	make_dir(kids, sizeof kids, 0700, getuid());
	snprintf(kvar, sizeof kvar, "MEMSHIM_CHILDREN_DIR=%s", kids);
	const char *kenv[] = { kvar, NULL };
	ck_assert_int_eq(run_under_shim(&r, small, kenv), 0);
	ck_assert_int_eq(load_files(kids, "m.json.", files, 4), 2);
	release(files, 2);
	/* a worker that added more than a helper does writes beside the output (above) */
}
END_TEST

/* A forked child named as it named itself (PostgreSQL's children rewrite their
 * arguments to "postgres: checkpointer"; every child's file had the postmaster's): the arguments
 * as /proc/PID/cmdline has them at its end, and "comm" when it renamed itself with prctl. */
START_TEST(children_named_as_they_named_themselves)
{
	char kids[PATH_MAX], var[PATH_MAX + 32];
	json_t *files[4];
	make_dir(kids, sizeof kids, 0700, getuid());
	snprintf(var, sizeof var, "MEMSHIM_CHILDREN_DIR=%s", kids); /* every child's file, small ones too */
	const char *env[] = { var, NULL };
	const char *argv[] = { built("preload/names_fixture"), "--a-long-argument-a-title-can-take-the-place-of", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(!strcmp(r.out, "named ok\n"), "%s %s", r.out, r.err);
	ck_assert_int_eq(load_files(kids, "m.json.", files, 4), 3);
	int named = 0, titled = 0, plain = 0;
	for (int i = 0; i < 3; i++) {
		json_t *a = json_object_get(files[i], "argv");
		const char *arg0 = json_string_value(json_array_get(a, 0));
		const char *comm = json_string_value(json_object_get(files[i], "comm"));
		ck_assert_ptr_nonnull(arg0);
		if (comm) {
			ck_assert_str_eq(comm, "fixture-named");
			named++;
		} else if (!strcmp(arg0, "fixture: titled worker")) {
			ck_assert_int_eq(json_array_size(a), 1);
			titled++;
		} else {
			ck_assert_str_eq(arg0, argv[0]);
			ck_assert_int_eq(json_array_size(a), 2);
			plain++;
		}
	}
	ck_assert_msg(named == 1 && titled == 1 && plain == 1, "named %d, titled %d, plain %d", named, titled, plain);
	release(files, 3);
	json_t *m = load_metrics(&r, "m.json"); /* the parent kept its own */
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(m, "argv"), 0)), argv[0]);
	ck_assert_ptr_null(json_object_get(m, "comm"));
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fork and exec");
	TCase *tc1 = tcase_create("fixtures");
	tcase_set_timeout(tc1, 120);
	tcase_add_test(tc1, forked_child_writes_its_own_file_and_parent_is_intact);
	tcase_add_test(tc1, fork_while_threads_are_inside_hooks_never_hangs);
	tcase_add_test(tc1, exec_child_writes_its_own_file);
	tcase_add_test(tc1, an_exec_child_s_rss_peak_is_its_own);
	tcase_add_test(tc1, follow_children_off_leaves_no_child_files);
	tcase_add_test(tc1, vfork_and_posix_spawn_children_report_on_their_own);
	tcase_add_test(tc1, exec_in_place_keeps_the_main_file);
	suite_add_tcase(s, tc1);
	TCase *tc2 = tcase_create("workers");
	tcase_add_checked_fixture(tc2, bounded, NULL);
	tcase_add_test(tc2, a_forked_worker_reports_what_it_added);
	tcase_add_test(tc2, helpers_leave_nothing_beside_the_output);
	tcase_add_test(tc2, children_named_as_they_named_themselves);
	suite_add_tcase(s, tc2);
	return run_suite(s);
}
