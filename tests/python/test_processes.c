/* Python processes with children: forked and spawned children, pool workers terminated,
 * signals, which process speaks about targets, and matches that count for the whole run.
 * Fixture scripts (tests/python/fixtures) run under LD_PRELOAD=libmemshim.so on every interpreter
 * present (tests/python/pyrun.h). */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "child.h"
#include "pyrun.h"

/* Whether STAGE of ROOT names FUNCTION among the functions that opened it. */
static int opened_by(json_t *root, const char *stage, const char *function)
{
	size_t i, j;
	json_t *s, *e;
	json_array_foreach(json_object_get(root, "stages"), i, s) {
		if (strcmp(json_string_value(json_object_get(s, "name")) ? json_string_value(json_object_get(s, "name")) : "", stage))
			continue;
		json_array_foreach(json_object_get(s, "matched_functions"), j, e)
			if (json_string_value(json_object_get(e, "function")) &&
			    !strcmp(json_string_value(json_object_get(e, "function")), function))
				return 1;
	}
	return 0;
}

/* The per-process metrics files (m_<pid>.json) a run_py_children run left, read one at a time:
 *	struct process_files f;
 *	for (open_process_files(&f, r.dir); next_process_file(&f);)
 *		... f.name, f.root ...
 * A file that does not parse is passed over. */
struct process_files {
	DIR *d;
	const char *dir;
	const char *name; /* the current file's name */
	json_t *root;     /* its contents, freed by the next call */
};

static void open_process_files(struct process_files *f, const char *dir)
{
	f->d = opendir(dir);
	f->dir = dir;
	f->name = NULL;
	f->root = NULL;
}

/* Moves to the next file that parses; 0 (the directory closed) after the last. */
static int next_process_file(struct process_files *f)
{
	json_decref(f->root);
	f->root = NULL;
	struct dirent *e;
	while (f->d && (e = readdir(f->d))) {
		if (strncmp(e->d_name, "m_", 2) != 0)
			continue;
		char path[512];
		json_error_t jerr;
		snprintf(path, sizeof path, "%s/%s", f->dir, e->d_name);
		f->root = json_load_file(path, 0, &jerr);
		if (f->root) {
			f->name = e->d_name;
			return 1;
		}
	}
	if (f->d)
		closedir(f->d);
	f->d = NULL;
	return 0;
}

/* The fixture SCRIPT run by PY with children (run_py_children) under STAGES: it must exit 0 and
 * print EXPECTED. */
static void run_children_ok(struct run *r, const char *py, const char *script, const char *stages,
			    const char *expected)
{
	const char *args[] = { fixture(script), NULL };
	run_py_children(r, py, args, stages);
	ck_assert_msg(r->status == 0 && strstr(r->out, expected), "%s: %d %s %s", py, r->status, r->out, r->err);
}

/* Spawned workers: a target pinned as __main__:prepare matches the script's function there (its
 * module is __mp_main__), and each worker's file names the functions that opened its stages, the
 * bare target's multiprocessing.spawn:prepare among them, though SIGTERM ended the worker. */
START_TEST(spawned_workers_name_their_functions)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_children_ok(&r, py, "spawn_prepare.py", "prep=prepare,own=__main__:prepare", "spawn ok 10");
	long own = 0;
	int workers = 0;
	struct process_files f;
	for (open_process_files(&f, r.dir); next_process_file(&f);) {
		json_t *n = json_object_get(json_object_get(f.root, "metrics"), "own_calls");
		if (n) {
			workers++;
			own += (long)json_integer_value(n);
			ck_assert_msg(opened_by(f.root, "own", "__mp_main__:prepare"), "%s: %s: own", py, f.name);
			ck_assert_msg(opened_by(f.root, "prep", "multiprocessing.spawn:prepare"), "%s: %s: prep", py, f.name);
		}
	}
	ck_assert_msg(workers >= 1 && own == 4, "%s: %d workers ran own %ld times of 4", py, workers, own);
	run_done(&r);
}
END_TEST

/* Workers terminated by their pool while they write their last file on the way out (a signal
 * handler then waited for the writer its own thread held, and the file was lost): every worker's
 * file is complete and their calls add up to the tasks.  Three rounds: the race is timing's. */
START_TEST(pool_workers_terminated_leave_complete_files)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	for (int round = 0; round < 3; round++) {
		struct run r;
		run_children_ok(&r, py, "pool_exit.py", "work=work", "pool ok 210");
		long calls = 0;
		struct process_files f;
		for (open_process_files(&f, r.dir); next_process_file(&f);) {
			json_t *n = json_object_get(json_object_get(f.root, "metrics"), "work_calls");
			if (n)
				ck_assert_msg(json_is_true(json_object_get(f.root, "complete")), "%s: %s is %s", py,
					      f.name, json_string_value(json_object_get(f.root, "reason")));
			calls += (long)json_integer_value(n);
		}
		ck_assert_msg(calls == 20, "%s: the workers' files count %ld calls of 20", py, calls);
		run_done(&r);
	}
}
END_TEST

START_TEST(python_children)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	const char *modes[] = { "fork", "spawn" };
	for (int m = 0; m < 2; m++) {
		struct run r;
		const char *args[] = { fixture("children.py"), modes[m], NULL };
		run_py_children(&r, py, args, "cw=child_work");
		ck_assert_msg(r.status == 0 && strstr(r.out, "mp ok 0"), "%s %s: %d %s %s", py, modes[m], r.status,
			      r.out, r.err);
		int parents = 0, children = 0;
		struct process_files f;
		for (open_process_files(&f, r.dir); next_process_file(&f);) {
			json_t *saved = r.root;
			r.root = f.root;
			int ran = json_object_get(json_object_get(f.root, "metrics"), "cw_calls") != NULL;
			if (ran) { /* helpers (spawn's resource tracker) run no stage */
				expect_stage(&r, "cw", 1, 7);
			}
			r.root = saved;
			if (ran && json_is_true(json_object_get(f.root, "is_child")))
				children++;
			else if (ran)
				parents++;
		}
		ck_assert_msg(parents == 1 && children == 1, "%s %s: %d parent and %d child reports with the stage", py,
			      modes[m], parents, children);
		run_done(&r);
	}
}
END_TEST

/* Whether a process still running has DIR in its environment (a helper of the run in DIR that
 * outlives its parent: multiprocessing's resource tracker and forkserver). */
static int run_still_going(const char *dir)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int found = 0;
	while (d && !found && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[300], env[65536];
		snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(env, 1, sizeof env - 1, f) : 0;
		if (f)
			fclose(f);
		for (size_t i = 0; i < n; i++)
			if (env[i] == '\0')
				env[i] = '\n';
		env[n] = '\0';
		found = strstr(env, dir) != NULL;
	}
	if (d)
		closedir(d);
	return found;
}

/* Waits (10 s at most) for the run's helpers that end after its parent (multiprocessing's resource
 * tracker and forkserver), then reads the run's output again, theirs with it. */
static void wait_for_helpers(struct run *r)
{
	for (int k = 0; k < 200 && run_still_going(r->dir); k++)
		usleep(50 * 1000);
	read_back(r->dir, r->out, sizeof r->out, r->err, sizeof r->err);
}

/* Messages about targets are the parent's: children that never run the target (a fork Pool's
 * workers, a spawned Process and spawn's resource tracker, the forkserver and its child) print
 * nothing, and record the target in their own files. */
START_TEST(children_say_nothing_about_targets)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_children_ok(&r, py, "mpquiet.py", "mw=main_work", "mpquiet ok [0, 0]");
	wait_for_helpers(&r);
	ck_assert_msg(r.err[0] == '\0', "%s: stderr: %s", py, r.err);
	int children = 0, recorded = 0;
	struct process_files f;
	for (open_process_files(&f, r.dir); next_process_file(&f);) {
		if (json_is_true(json_object_get(f.root, "is_child"))) {
			children++;
			recorded += json_array_size(json_object_get(f.root, "unmatched_targets")) == 1;
		}
	}
	/* the spawned child, the forkserver and its child, the resource tracker; pool workers ended by
	 * the pool's terminate() may not get to write theirs */
	ck_assert_msg(children >= 4 && recorded >= 3, "%s: %d child files, %d recording the target", py, children,
		      recorded);
	run_done(&r);
	/* started by a shell: the first Python process names a target that matched nothing, once */
	char cmd[2 * PATH_MAX];
	snprintf(cmd, sizeof cmd, "%s %s; true", py, fixture("mpquiet.py"));
	const char *sh[] = { "-c", cmd, NULL };
	run_py_children(&r, "/bin/sh", sh, "mw=main_work,x=no_such_function");
	wait_for_helpers(&r);
	ck_assert_msg(r.status == 0 && strstr(r.out, "mpquiet ok"), "%s: %d %s %s", py, r.status, r.out, r.err);
	ck_assert_msg(count_lines(r.err, "memshim:") == 1 &&
		      strstr(r.err, "memshim: Python stage target that matched no function that ran: x=no_such_function\n"),
		      "%s under a shell: %s", py, r.err);
	run_done(&r);
}
END_TEST

/* signals.py MODE run by PY without the shim into BARE and with it into SHIM. */
static void run_signals_bare_and_shim(struct run *bare, struct run *shim, const char *py, const char *mode)
{
	const char *args[] = { fixture("signals.py"), mode, NULL };
	run_py(bare, py, args, NULL, NULL, NULL, 0);
	run_py(shim, py, args, NULL, NULL, NULL, 1);
}

/* The program's signal dispositions are its own: Ctrl-C raises KeyboardInterrupt, getsignal and
 * restoring an old handler work, forkserver starts; the same output and status as without the shim. */
START_TEST(signals_as_without_shim)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	static const char *const modes[] = { "facts", "forkserver" };
	for (int m = 0; m < 2; m++) {
		struct run bare, shim;
		run_signals_bare_and_shim(&bare, &shim, py, modes[m]);
		ck_assert_msg(bare.status == 0 && strstr(bare.out, m ? "process exit: 0" : "interrupt: raised"),
			      "%s %s without the shim: %d %s %s", py, modes[m], bare.status, bare.out, bare.err);
		ck_assert_msg(shim.status == bare.status && !strcmp(shim.out, bare.out) && !strstr(shim.err, "Error"),
			      "%s %s: status %d vs %d, output\n%s\nvs\n%s\nstderr %s", py, modes[m], shim.status,
			      bare.status, shim.out, bare.out, shim.err);
		ck_assert_ptr_nonnull(shim.root);
		run_done(&bare);
		run_done(&shim);
	}
}
END_TEST

/* Interrupted or terminated without a handler: the same exit status; Ctrl-C leaves a last
 * snapshot, SIGTERM with no stage open (a stop, not a crash) the final file. */
START_TEST(signal_deaths_leave_a_snapshot)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	static const char *const modes[] = { "interrupted", "terminated" };
	static const int sigs[] = { 2, 15 };
	for (int m = 0; m < 2; m++) {
		struct run bare, shim;
		run_signals_bare_and_shim(&bare, &shim, py, modes[m]);
		ck_assert_msg(bare.status == 128 + sigs[m] && shim.status == bare.status, "%s %s: %d vs %d %s", py,
			      modes[m], shim.status, bare.status, shim.err);
		ck_assert_msg(shim.root != NULL, "%s %s: no metrics file", py, modes[m]);
		ck_assert_int_eq(json_integer_value(json_object_get(shim.root, "signal")), sigs[m]);
		ck_assert(json_is_boolean(json_object_get(shim.root, "complete")) &&
			  json_is_true(json_object_get(shim.root, "complete")) == (sigs[m] == 15));
		run_done(&bare);
		run_done(&shim);
	}
}
END_TEST

/* The default snapshot policy starts no thread: Python 3.12+ forks without its DeprecationWarning
 * about other threads.  The periodic thread (MEMSHIM_SNAPSHOT_INTERVAL) does trigger it, so the
 * check can fail. */
START_TEST(fork_sees_no_extra_thread)
{
	const char *py = python_or_skip(_i);
	if (!py || minor_of(py) < 12)
		return;
	const char *args[] = { fixture("fork_warn.py"), NULL };
	struct run r;
	run_py(&r, py, args, "work=work", NULL, NULL, 1);
	RUN_OK(&r);
	ck_assert_str_eq(r.out, "threads 1\n");
	ck_assert_msg(!strstr(r.err, "DeprecationWarning"), "%s: %s", py, r.err);
	run_done(&r);
	const char *periodic[] = { "MEMSHIM_SNAPSHOT_INTERVAL=0.5", NULL };
	run_py(&r, py, args, "work=work", periodic, NULL, 1);
	ck_assert_msg(strstr(r.err, "DeprecationWarning") && strstr(r.out, "threads 2"), "%s with a thread: %s %s",
		      py, r.out, r.err);
	run_done(&r);
}
END_TEST

/* A target only the children ran (regrtest's workers run the tests, its main process does not): the
 * first process names only the target that matched in no process of the run, and leaves no file. */
START_TEST(children_matches_count_for_the_run)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_children_ok(&r, py, "kidsonly.py", "cw=child_work,x=never_defined", "kidsonly ok [0, 0]");
	ck_assert_msg(count_lines(r.err, "memshim:") == 1 && strstr(r.err, "matched no function that ran: x=never_defined\n"),
		      "%s: expected one line naming x only: %s", py, r.err);
	const char *pid = strstr(r.out, " pid ");
	char shared[96];
	snprintf(shared, sizeof shared, "/dev/shm/memshim-py-%u-%ld", (unsigned)getuid(), pid ? atol(pid + 5) : 0L);
	ck_assert_msg(pid && access(shared, F_OK) != 0, "%s: %s was left (%s)", py, shared, r.out);
	run_done(&r);
}
END_TEST

/* fork inside a stage (on 3.11 with the frame hook out: the stage is the only one): the child
 * goes on inside the call, which ends there as in the parent, and its next call is seen. */
START_TEST(fork_inside_a_stage)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_children_ok(&r, py, "fork_stage.py", "work=work", "parent again");
	ck_assert_msg(strstr(r.out, "child again"), "%s: %s", py, r.out);
	int files = 0;
	struct process_files f;
	for (open_process_files(&f, r.dir); next_process_file(&f);) {
		json_t *work = NULL, *st;
		size_t k;
		json_array_foreach(json_object_get(f.root, "stages"), k, st)
			if (!strcmp(json_string_value(json_object_get(st, "name")), "work"))
				work = st;
		ck_assert_msg(work, "%s: %s has no stage work", py, f.name);
		json_t *hist = json_object_get(work, "history");
		ck_assert_msg(json_array_size(hist) == 2, "%s: %s: %zu calls", py, f.name, json_array_size(hist));
		double first =
			(double)json_integer_value(json_object_get(json_array_get(hist, 0), "cpu_alloc_delta")) / MIB;
		double again =
			(double)json_integer_value(json_object_get(json_array_get(hist, 1), "cpu_alloc_delta")) / MIB;
		ck_assert_msg(fabs(again - 3) <= 1 && (fabs(first - 1) <= 1 || fabs(first - 2) <= 1),
			      "%s: %s: calls kept %.2f and %.2f MiB", py, f.name, first, again);
		files++;
	}
	ck_assert_int_eq(files, 2);
	run_done(&r);
}
END_TEST

Suite *python_suite(void)
{
	Suite *s = suite_create("python_processes");
	TCase *stages = tcase_create("stages");
	tcase_set_timeout(stages, 60);
	tcase_add_loop_test(stages, python_children, 0, NPY);
	tcase_add_loop_test(stages, children_say_nothing_about_targets, 0, NPY);
	tcase_add_loop_test(stages, signals_as_without_shim, 0, NPY);
	tcase_add_loop_test(stages, signal_deaths_leave_a_snapshot, 0, NPY);
	tcase_add_loop_test(stages, fork_sees_no_extra_thread, 0, NPY);
	tcase_add_loop_test(stages, fork_inside_a_stage, 0, NPY);
	tcase_add_loop_test(stages, children_matches_count_for_the_run, 0, NPY);
	suite_add_tcase(s, stages);
	TCase *pool = tcase_create("pool");
	tcase_set_timeout(pool, 120);
	tcase_add_loop_test(pool, pool_workers_terminated_leave_complete_files, 0, NPY);
	tcase_add_loop_test(pool, spawned_workers_name_their_functions, 0, NPY);
	suite_add_tcase(s, pool);
	return s;
}
