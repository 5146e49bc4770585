/* Integration: the program sees nothing of memshim in its environment.  Under the
 * library a process's environment (env's output, Python's os.environ, /proc/self/environ of a
 * process it execs) is exactly what it is bare with the same settings, plus the user's LD_PRELOAD
 * and nothing else; and the processes it execs still find their run without it: a child that
 * builds its environment from scratch (env -i, subprocess.run(env={...})) still writes
 * <root output>.<pid> and knows the root, a process that execs itself in place with a bare
 * environment keeps its file, and a lineage record whose pid is now another process's is never
 * taken. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "child.h"
#include "core/lineage.h"
#include "suite.h"
#include "harness.h"

static struct run r;

/* ARGV in a fresh directory (also its working directory: a process that took itself for a run's
 * first would write memshim_metrics.json there) with the harness's environment and EXTRA, under
 * the library or, BARE, without LD_PRELOAD.  Fails the test unless it exits with 0. */
/* As run_in_dir, in the directory of the last run. */
static void run_again(const char *const *argv, const char *const *extra, int bare)
{
	const char *env[16];
	int n = 0;
	for (; extra && extra[n] && n < 14; n++)
		env[n] = extra[n];
	if (bare)
		env[n++] = "LD_PRELOAD";
	env[n] = NULL;
	pid_t pid = spawn_redirected(r.dir, argv, shim_env(r.dir, env), r.dir);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &r.status, 0), pid);
	read_back(r.dir, r.out, sizeof r.out, r.err, sizeof r.err);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s: status %#x, stderr: %s", argv[0],
		      r.status, r.err);
}

static void run_in_dir(const char *const *argv, const char *const *extra, int bare)
{
	snprintf(r.dir, sizeof r.dir, "/tmp/memshim-env.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(r.dir));
	run_again(argv, extra, bare);
}

static int by_text(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* TEXT's lines (SEP ends each) sorted, one a line, into OUT; PLUS (when not NULL) is one more. */
static void sorted_lines(const char *text, size_t len, char sep, const char *plus, char *out, size_t size)
{
	static char copy[1 << 16];
	char *lines[2048];
	int n = 0;
	ck_assert_uint_lt(len, sizeof copy);
	memcpy(copy, text, len);
	copy[len] = '\0';
	for (char *p = copy; p < copy + len && n < 2047;) {
		char *end = memchr(p, sep, (size_t)(copy + len - p));
		if (end)
			*end = '\0';
		lines[n++] = p;
		p = end ? end + 1 : copy + len;
	}
	if (plus)
		lines[n++] = (char *)plus;
	qsort(lines, (size_t)n, sizeof *lines, by_text);
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s\n", lines[i]);
	ck_assert_uint_lt(used, size);
}

static char bare_text[1 << 16], shim_text[1 << 16], preload[PATH_MAX + 16];

/* What ARGV prints (its environment, SEP after each entry) is the same under the library as bare,
 * plus LD_PRELOAD: nothing of memshim's own, nothing missing. */
static void same_environment(const char *const *argv, const char *const *extra, char sep)
{
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", built("libmemshim.so"));
	run_in_dir(argv, extra, 1);
	sorted_lines(r.out, strlen(r.out), sep, preload, bare_text, sizeof bare_text);
	run_again(argv, extra, 0); /* the same directory: the same MEMSHIM_OUTPUT */
	sorted_lines(r.out, strlen(r.out), sep, NULL, shim_text, sizeof shim_text);
	ck_assert_msg(strstr(shim_text, "MEMSHIM_OUTPUT="), "the run's own setting is there: %s", shim_text);
	ck_assert_str_eq(shim_text, bare_text);
}

/* (1) env, run itself under the library and as the child of a tracked shell. */
START_TEST(env_prints_the_environment_it_was_given)
{
	const char *direct[] = { "/usr/bin/env", NULL };
	same_environment(direct, NULL, '\n');
	const char *child[] = { "/bin/sh", "-c", "/usr/bin/env", NULL };
	same_environment(child, NULL, '\n');
}
END_TEST

/* /usr/bin/python3 -c SCRIPT prints the same environment (SEP after each entry) under the library
 * as bare, run directly and as the child of a tracked Python process that starts it. */
static void python_and_its_child_same_environment(const char *script, const char *const *extra, char sep)
{
	static const char spawn[] = "import subprocess, sys; subprocess.run([sys.executable, '-c', sys.argv[1]], check=True)";
	const char *direct[] = { "/usr/bin/python3", "-c", script, NULL };
	same_environment(direct, extra, sep);
	const char *child[] = { "/usr/bin/python3", "-c", spawn, script, NULL };
	same_environment(child, extra, sep);
}

/* (2) Python's os.environ, in a Python process that names Python targets (the one that speaks
 * about them) and in the Python process it starts. */
START_TEST(python_sees_its_own_environment)
{
	static const char print[] =
		"import os; print('\\n'.join(k + '=' + v for k, v in sorted(os.environ.items())))";
	const char *extra[] = { "MEMSHIM_STAGES=work=no_such_function", "MEMSHIM_LOG=quiet", NULL };
	python_and_its_child_same_environment(print, extra, '\n');
}
END_TEST

/* (3) /proc/self/environ: what the kernel was given at the exec, read by the process itself and
 * by the process a tracked one starts (its envp is that process's environment). */
START_TEST(proc_self_environ_holds_what_was_given)
{
	static const char read_it[] =
		"import sys; sys.stdout.write(open('/proc/self/environ').read().replace('\\0', '\\1'))";
	python_and_its_child_same_environment(read_it, NULL, '\1');
}
END_TEST

static int64_t int_of(json_t *m, const char *key)
{
	return json_integer_value(json_object_get(m, key));
}

/* The metrics file NAME in the run's directory, which must be there. */
static json_t *file_of(const char *name)
{
	json_t *m = load_metrics(&r, name);
	ck_assert_msg(m != NULL, "no %s in %s", name, r.dir);
	return m;
}

/* (4) parent -> exec'd child that builds its children's environment from scratch (only
 * LD_PRELOAD and PATH) -> exec'd grandchild: the grandchild still writes <root output>.<pid> and
 * knows the root, as with the variables before; nobody takes itself for a run's first. */
START_TEST(a_child_with_an_environment_from_scratch_finds_the_run)
{
	const char *fixture = built("preload/alloc_fixture");
	char scripts[2][1024];
	snprintf(scripts[0], sizeof scripts[0],
		 "env -i LD_PRELOAD=\"$LD_PRELOAD\" PATH=\"$PATH\" /bin/sh -c '%s simple; echo child $$'", fixture);
	snprintf(scripts[1], sizeof scripts[1],
		 "/usr/bin/python3 -c 'import os, subprocess, sys; print(\"child\", os.getpid(), flush=True); "
		 "subprocess.run([sys.argv[1], \"simple\"], env={\"LD_PRELOAD\": os.environ[\"LD_PRELOAD\"], "
		 "\"PATH\": os.environ[\"PATH\"]}, check=True)' %s",
		 fixture);
	for (int i = 0; i < 2; i++) {
		const char *argv[] = { "/bin/sh", "-c", scripts[i], NULL };
		run_in_dir(argv, NULL, 0);
		json_t *root = file_of("m.json");
		ck_assert(json_is_false(json_object_get(root, "is_child")));
		int64_t root_pid = int_of(root, "pid");
		ck_assert_int_eq(int_of(root, "root_pid"), root_pid);
		json_decref(root);
		int child = 0;
		const char *line = strstr(r.out, "child ");
		ck_assert_msg(line && sscanf(line, "child %d", &child) == 1, "%s", r.out);
		char name[64], first[256];
		snprintf(name, sizeof name, "m.json.%d", child);
		/* the child in between is a helper (it began no stage, stayed small): it writes no file
		 * under a plain LD_PRELOAD; had it taken itself for a run's first, it would
		 * have written m.json over the root's, checked above */
		ck_assert_int_eq(count_files(r.dir, name, NULL, 0), 0);
		/* the grandchild: the one other file, its pid in its name */
		ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 1);
		ck_assert_msg(count_files(r.dir, "memshim_metrics", first, sizeof first) == 0, "%s written", first);
		DIR *d = opendir(r.dir);
		struct dirent *e;
		int grandchildren = 0;
		while ((e = readdir(d)))
			if (!strncmp(e->d_name, "m.json.", 7) && strcmp(e->d_name, name) != 0) {
				json_t *g = file_of(e->d_name);
				ck_assert_int_eq(int_of(g, "pid"), atoi(e->d_name + 7));
				ck_assert(json_is_true(json_object_get(g, "is_child")));
				ck_assert_int_eq(int_of(g, "root_pid"), root_pid);
				ck_assert_int_eq(metric(g, "simple_calls"), 1);
				json_decref(g);
				grandchildren++;
			}
		closedir(d);
		ck_assert_int_eq(grandchildren, 1);
	}
}
END_TEST

/* (5) A process that execs itself in place with an environment of LD_PRELOAD alone keeps its
 * file: the run's first its main file, a child that chose its own MEMSHIM_OUTPUT that one, as
 * is (the pid that writes it as is was MEMSHIM_ROOT_OUTPUT_PID's). */
START_TEST(an_exec_in_place_from_scratch_keeps_its_file)
{
	const char *fixture = built("preload/alloc_fixture");
	char first[256], script[1024];
	const char *alone[] = { fixture, "spawn", "execve_scratch", NULL };
	run_in_dir(alone, NULL, 0);
	json_t *m = file_of("m.json");
	ck_assert(json_is_false(json_object_get(m, "is_child")));
	ck_assert_int_eq(metric(m, "simple_calls"), 1);
	json_decref(m);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
	ck_assert_msg(count_files(r.dir, "memshim_metrics", first, sizeof first) == 0, "%s written", first);

	snprintf(script, sizeof script, "MEMSHIM_OUTPUT=\"$PWD/eval.json\" %s spawn execve_scratch", fixture);
	const char *child[] = { "/bin/sh", "-c", script, NULL };
	run_in_dir(child, NULL, 0);
	json_t *root = file_of("m.json");
	json_t *e = file_of("eval.json");
	ck_assert(json_is_true(json_object_get(e, "is_child")));
	ck_assert_int_eq(int_of(e, "root_pid"), int_of(root, "pid"));
	ck_assert_int_eq(metric(e, "simple_calls"), 1);
	json_decref(e);
	json_decref(root);
	ck_assert_int_eq(count_files(r.dir, "eval.json", NULL, 0), 1);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
	ck_assert_msg(count_files(r.dir, "memshim_metrics", first, sizeof first) == 0, "%s written", first);
}
END_TEST

/* This process's start time: the 22nd field of /proc/self/stat, in ns after boot. */
static uint64_t own_start_ns(void)
{
	char text[1024];
	int fd = open("/proc/self/stat", O_RDONLY);
	ssize_t n = read(fd, text, sizeof text);
	close(fd);
	long ppid;
	uint64_t start;
	ck_assert_int_eq(ms_lineage_parse_stat(text, (size_t)n, &ppid, &start), 0);
	return start * (1000000000u / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* A lineage record for this test process (the fixtures' parent) written at WRITTEN (ns after
 * boot), naming OUTPUT as the run's file and ROOT as its first process, in the directory the
 * library reads; its path into PATH. */
static void plant(char *path, size_t size, uint64_t written, const char *output, pid_t root)
{
	static struct ms_lineage l;
	static char text[MS_LINEAGE_TEXT_MAX + 1];
	memset(&l, 0, sizeof l);
	l.root_pid = l.output_pid = root;
	snprintf(l.output, sizeof l.output, "%s", output);
	ms_lineage_encode(&l, text, sizeof text);
	mkdir(ms_lineage_dir(), 0700);
	snprintf(path, size, "%s/%d.%llu%s", ms_lineage_dir(), (int)getpid(), (unsigned long long)written,
		 MS_LINEAGE_SUFFIX);
	unlink(path);
	ck_assert_int_eq(symlink(text, path), 0);
}

/* A record is taken only where it was written after its process started: one left under this
 * process's pid before it started (a recycled pid, a killed run) is ignored, the fixture is the
 * first of its run; the same record written since makes it a child of the run it names. */
START_TEST(a_record_of_another_process_with_the_same_pid_is_never_taken)
{
	char path[PATH_MAX], planted[PATH_MAX], first[256];
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *unset[] = { "MEMSHIM_OUTPUT", NULL }; /* the default file, the setting the record saw */
	uint64_t start = own_start_ns();
	snprintf(planted, sizeof planted, "/tmp/memshim-planted-%d.json", (int)getpid());
	plant(path, sizeof path, start - 1, planted, 1);
	run_in_dir(argv, unset, 0);
	unlink(path);
	json_t *m = file_of("memshim_metrics.json");
	ck_assert(json_is_false(json_object_get(m, "is_child")));
	ck_assert_int_eq(int_of(m, "root_pid"), int_of(m, "pid"));
	json_decref(m);
	ck_assert_int_eq(count_files("/tmp", planted + 5, NULL, 0), 0);

	plant(path, sizeof path, start + 1, planted, 1);
	run_in_dir(argv, unset, 0);
	unlink(path);
	ck_assert_int_eq(count_files(r.dir, "memshim_metrics", NULL, 0), 0);
	ck_assert_int_eq(count_files("/tmp", planted + 5, first, sizeof first), 1);
	char child[PATH_MAX];
	snprintf(child, sizeof child, "/tmp/%s", first);
	json_error_t err;
	json_t *c = json_load_file(child, 0, &err);
	unlink(child);
	ck_assert_msg(c != NULL, "%s: %s", child, err.text);
	ck_assert(json_is_true(json_object_get(c, "is_child")));
	ck_assert_int_eq(int_of(c, "root_pid"), 1);
	ck_assert_int_eq(metric(c, "simple_calls"), 1);
	json_decref(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("environment");
	TCase *tc = tcase_create("environment");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, env_prints_the_environment_it_was_given);
	tcase_add_test(tc, python_sees_its_own_environment);
	tcase_add_test(tc, proc_self_environ_holds_what_was_given);
	tcase_add_test(tc, a_child_with_an_environment_from_scratch_finds_the_run);
	tcase_add_test(tc, an_exec_in_place_from_scratch_keeps_its_file);
	tcase_add_test(tc, a_record_of_another_process_with_the_same_pid_is_never_taken);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
