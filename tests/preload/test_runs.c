/* Integration: what a user sees on a normal run.  A warning is said once per run, not
 * by every process a shell or a launcher starts; a native target is "not found" only when no
 * process of the run found it; hello world through a launcher (pyenv's shim, conda run, uv run,
 * poetry run, /usr/bin/time) is one table and a line or two, and one file. */

#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"
#include "child.h"

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

/* ---- memshim run through launchers ------------------------------------------------------------- */

static char run_dir[256];

/* Runs `memshim run -- ARGV...` (the wrapper of the source tree, the real library) in RUN_DIR with
 * EXTRA ("NAME=value" or NULL) in its environment; its stdout and stderr together into OUT; returns
 * its exit code. */
static int memshim_run(const char *const *argv, const char *extra, char *out, size_t size)
{
	static char wrapper[PATH_MAX];
	const char *args[24] = { wrapper, "run", "--" };
	int n = 3;
	for (; *argv && n < 23; argv++)
		args[n++] = *argv;
	args[n] = NULL;
	snprintf(wrapper, sizeof wrapper, "%s/../scripts/memshim", built("."));
	const char *env[] = { extra, NULL };
	char **envp = shim_env(run_dir, env);
	for (char **e = envp; *e; e++) /* memshim run preloads the library itself */
		if (!strncmp(*e, "LD_PRELOAD=", 11) || !strncmp(*e, "MEMSHIM_OUTPUT=", 15))
			*e = "MEMSHIM_LOG=warn";
	pid_t pid = spawn_redirected(run_dir, args, envp, run_dir);
	ck_assert_int_gt(pid, 0);
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	char err[1 << 15];
	read_back(run_dir, out, size / 2, err, sizeof err);
	size_t len = strlen(out);
	snprintf(out + len, size - len, "%s", err);
	return exit_code(st);
}

static int lines(const char *text)
{
	return occurrences(text, "\n");
}

/* Hello world through LAUNCHER (ARGV before "python3 -c ..."), twice: each run prints at most 40
 * lines, one table for the Python process and a line for the helpers; the working directory holds
 * at most two metrics files (the run's and the previous run's .prev). */
static void hello_through(const char *const *launcher, const char *extra, const char *python)
{
	char out[1 << 16];
	const char *argv[20];
	int n = 0;
	for (; *launcher; launcher++)
		argv[n++] = *launcher;
	argv[n++] = python;
	argv[n++] = "-c";
	argv[n++] = "print('hello')";
	argv[n] = NULL;
	snprintf(run_dir, sizeof run_dir, "/tmp/memshim-runs.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(run_dir));
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(memshim_run(argv, extra, out, sizeof out), 0);
		ck_assert_msg(strstr(out, "hello\n"), "%s: %.2000s", argv[0], out);
		ck_assert_msg(lines(out) <= 40, "%s: %d lines:\n%.2000s", argv[0], lines(out), out);
		ck_assert_msg(occurrences(out, "***** init metrics *****") == 1, "%s: %.2000s", argv[0], out);
		ck_assert_msg(count_files(run_dir, "memshim_metrics.json", NULL, 0) == 1 + round, "%s: %d files",
			      argv[0], count_files(run_dir, "memshim_metrics.json", NULL, 0));
	}
}

/* The run's directory (memshim run's helpers) is gone after the run. */
static void no_run_directory_left(const char *out)
{
	const char *p = strstr(out, "/memshim-run.");
	if (p) {
		char path[PATH_MAX];
		const char *start = p;
		while (start > out && start[-1] != ' ' && start[-1] != '\n')
			start--;
		snprintf(path, sizeof path, "%.*s", (int)(strcspn(p + 1, "/:\n ") + 1 + (size_t)(p - start)), start);
		ck_assert_msg(access(path, F_OK) != 0, "%s is left", path);
	}
}

/* The first pyenv version of 3.8 or newer, for PYENV_VERSION; NULL when there is none. */
static const char *pyenv_version(void)
{
	static char var[300];
	DIR *d = opendir("/root/.pyenv/versions");
	struct dirent *e;
	var[0] = '\0';
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, "3.", 2) && atoi(e->d_name + 2) >= 8 && !var[0])
			snprintf(var, sizeof var, "PYENV_VERSION=%s", e->d_name);
	if (d)
		closedir(d);
	return var[0] ? var : NULL;
}

/* pyenv's shim is a bash script that runs readlink, uname and more before it execs Python (issue
 * 39: 41 metrics files and 677 lines of 0MB tables). */
START_TEST(hello_world_through_pyenvs_shim)
{
	const char *version = pyenv_version();
	if (access("/root/.pyenv/shims/python3", X_OK) != 0 || !version) {
		printf("test_runs: no pyenv here, skipped\n");
		return;
	}
	const char *none[] = { NULL };
	hello_through(none, version, "/root/.pyenv/shims/python3");
}
END_TEST

/* /usr/bin/time runs the program as its child; the simulated conda run (a Python that runs the
 * command through a bash script), uv run (a native launcher that waits for its child) and poetry
 * run (a Python that execs the command). */
START_TEST(hello_world_through_launchers)
{
	char conda[PATH_MAX], uv[PATH_MAX], poetry[PATH_MAX];
	snprintf(conda, sizeof conda, "%s/../tests/preload/fixtures/launchers/conda", built("."));
	snprintf(uv, sizeof uv, "%s/../tests/preload/fixtures/launchers/uv", built("."));
	snprintf(poetry, sizeof poetry, "%s/../tests/preload/fixtures/launchers/poetry", built("."));
	const char *const *launchers[] = {
		(const char *[]){ conda, "run", "-n", "base", NULL },
		(const char *[]){ uv, "run", NULL },
		(const char *[]){ poetry, "run", NULL },
		(const char *[]){ "/usr/bin/time", NULL },
	};
	for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
		if (access(launchers[i][0], X_OK) != 0) {
			printf("test_runs: no %s here, skipped\n", launchers[i][0]);
			continue;
		}
		hello_through(launchers[i], NULL, "/usr/bin/python3");
	}
}
END_TEST

/* A server's forked children (PostgreSQL's shape) under memshim run: one table, the others in one
 * line, each named as it named itself (in the line, or in the header of the one shown); nothing but
 * the run's own file in the directory. */
START_TEST(a_servers_children_are_one_line_named_by_their_titles)
{
	char out[1 << 16];
	snprintf(run_dir, sizeof run_dir, "/tmp/memshim-runs.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(run_dir));
	const char *argv[] = { built("preload/names_fixture"), "--a-long-argument-a-title-can-take-the-place-of", NULL };
	ck_assert_int_eq(memshim_run(argv, NULL, out, sizeof out), 0);
	ck_assert_msg(strstr(out, "named ok\n"), "%s", out);
	ck_assert_msg(occurrences(out, "***** init metrics *****") == 1, "%s", out);
	ck_assert_msg(strstr(out, "(fixture-named)") && strstr(out, "(fixture: titled worker)"), "%s", out);
	ck_assert_int_eq(count_files(run_dir, "memshim_metrics.json", NULL, 0), 1);
	no_run_directory_left(out);
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
	TCase *tl = tcase_create("launchers");
	tcase_set_timeout(tl, 180);
	tcase_add_test(tl, hello_world_through_pyenvs_shim);
	tcase_add_test(tl, hello_world_through_launchers);
	tcase_add_test(tl, a_servers_children_are_one_line_named_by_their_titles);
	suite_add_tcase(s, tl);
	return run_suite(s);
}
