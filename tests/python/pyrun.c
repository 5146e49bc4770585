/* The Python suites' harness: see pyrun.h. */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>
#include "child.h"
#include "pyrun.h"
#include "suite.h"

const char *const pythons[] = {
	"/root/.pyenv/versions/3.8.18/bin/python",  "/root/.pyenv/versions/3.9.18/bin/python",
	"/root/.pyenv/versions/3.10.13/bin/python", "/root/.pyenv/versions/3.11.7/bin/python",
	"/root/.pyenv/versions/3.12.1/bin/python",  "/root/.pyenv/versions/3.13.0/bin/python",
	"/usr/bin/python3",
};
const int py_count = (int)(sizeof pythons / sizeof *pythons);

char lib[PATH_MAX], fixtures[PATH_MAX], scripts[PATH_MAX], otherhook[PATH_MAX];
static const char *output_name = "m.json"; /* "m_%p.json" for tests with children */


/* Runs PYTHON ARGS... in CWD (NULL: here) with the shim preloaded (unless PRELOAD is 0), stages
 * STAGES (NULL: MEMSHIM_STAGES unset) and extra KEY=VALUE entries ENV (NULL-terminated). */
void run_py(struct run *r, const char *python, const char *const *args, const char *stages,
	    const char *const *env, const char *cwd, int preload)
{
	memset(r, 0, sizeof *r);
	r->python = python;
	snprintf(r->dir, sizeof r->dir, "/tmp/memshim-py.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(r->dir));
	struct py_env e;
	char stages_var[1024];
	snprintf(stages_var, sizeof stages_var, "MEMSHIM_STAGES=%s", stages ? stages : "");
	const char *more[] = { stages ? stages_var : NULL, NULL };
	char **envp = py_env(&e, preload ? lib : NULL, r->dir, output_name, more, env);
	const char *argv[16] = { python };
	int a = 1;
	for (; args && *args && a < 15; args++)
		argv[a++] = *args;
	argv[a] = NULL;
	pid_t pid = spawn_redirected(r->dir, argv, envp, cwd);
	ck_assert_int_ge(pid, 0);
	int st = 0;
	waitpid(pid, &st, 0);
	r->status = exit_code(st);
	read_back(r->dir, r->out, sizeof r->out, r->err, sizeof r->err);
	char m[128];
	snprintf(m, sizeof m, "%s/m.json", r->dir);
	json_error_t jerr;
	r->root = json_load_file(m, 0, &jerr);
}

/* run_py for a program with children: each process writes its own file, m_<pid>.json. */
void run_py_children(struct run *r, const char *python, const char *const *args, const char *stages)
{
	output_name = "m_%p.json";
	run_py(r, python, args, stages, NULL, NULL, 1);
	output_name = "m.json";
}

void run_done(struct run *r)
{
	char path[512];
	DIR *d = opendir(r->dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(path, sizeof path, "%s/%s", r->dir, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(r->dir);
	json_decref(r->root);
}

const char *fixture(const char *name)
{
	static char paths[4][2 * PATH_MAX];
	static int next;
	char *p = paths[next++ % 4];
	snprintf(p, sizeof paths[0], "%s/%s", fixtures, name);
	return p;
}

/* The interpreter of loop index I, or NULL (with a message) when it is not installed or
 * TEST_PYTHON (a part of the path, e.g. 3.12: one interpreter while iterating) names another. */
const char *python_or_skip(int i)
{
	const char *only = getenv("TEST_PYTHON");
	if (only && *only && !strstr(pythons[i], only))
		return NULL;
	if (access(pythons[i], X_OK) != 0) {
		printf("test_python: %s not installed, skipped\n", pythons[i]);
		return NULL;
	}
	return pythons[i];
}

int minor_of(const char *python)
{
	if (strstr(python, "/usr/bin/python3"))
		return 11; /* Debian 12 */
	const char *v = strstr(python, "versions/3.");
	return v ? atoi(v + 11) : 0;
}

/* As python_or_skip, and NULL (saying WHY) for an interpreter older than 3.MINOR. */
const char *python_at_least(int i, int minor, const char *why)
{
	const char *py = python_or_skip(i);
	if (py && minor_of(py) < minor) {
		printf("test_python: %s %s test skipped\n", py, why);
		return NULL;
	}
	return py;
}


/* The fixture SCRIPT run by PYTHON under the shim with STAGES and ENV (see run_py): it must exit 0
 * and leave a metrics file. */
void run_fixture_ok(struct run *r, const char *python, const char *script, const char *stages,
		    const char *const *env)
{
	const char *args[] = { fixture(script), NULL };
	run_py(r, python, args, stages, env, NULL, 1);
	RUN_OK(r);
}

void expect_out(struct run *r, const char *needle)
{
	ck_assert_msg(strstr(r->out, needle), "%s: %s", r->python, r->out);
}

json_t *metric(struct run *r, const char *stage, const char *what)
{
	char key[160];
	snprintf(key, sizeof key, "%s_%s", stage, what);
	json_t *v = json_object_get(json_object_get(r->root, "metrics"), key);
	ck_assert_msg(v != NULL, "%s: metric %s missing; stderr: %s", r->python, key, r->err);
	return v;
}

void expect_calls(struct run *r, const char *stage, long calls)
{
	long got = (long)json_integer_value(metric(r, stage, "calls"));
	ck_assert_msg(got == calls, "%s: %s_calls = %ld, expected %ld", r->python, stage, got, calls);
}

/* KIND is "alloc" or "peaked": the stage's last call, in MiB, within 1 MiB. */
void expect_mib(struct run *r, const char *stage, const char *kind, double mib)
{
	char what[64];
	snprintf(what, sizeof what, "mem_cpu_%s_delta", kind);
	double got = (double)json_integer_value(metric(r, stage, what)) / MIB;
	ck_assert_msg(fabs(got - mib) <= 1.0, "%s: %s_%s = %.2f MiB, expected %.0f MiB", r->python,
		      stage, what, got, mib);
}

/* STAGE ran CALLS times and its last call kept ALLOC_MIB (within 1 MiB). */
void expect_stage(struct run *r, const char *stage, long calls, double alloc_mib)
{
	expect_calls(r, stage, calls);
	expect_mib(r, stage, "alloc", alloc_mib);
}

int count_lines(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Exactly one line of memshim's on stderr, and it mentions NEEDLE. */
void expect_one_warning(struct run *r, const char *needle)
{
	ck_assert_msg(count_lines(r->err, "memshim:") == 1 && strstr(r->err, needle), "%s: expected one warning: %s",
		      r->python, r->err);
}

void expect_absent(struct run *r, const char *stage)
{
	char key[160];
	snprintf(key, sizeof key, "%s_calls", stage);
	ck_assert_msg(json_object_get(json_object_get(r->root, "metrics"), key) == NULL,
		      "%s: stage %s should not exist", r->python, stage);
}

json_t *stage_entry(struct run *r, const char *name)
{
	json_t *st = json_object_get(r->root, "stages"), *s;
	size_t i;
	json_array_foreach(st, i, s)
		if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0)
			return s;
	ck_abort_msg("%s: no stage %s", r->python, name);
	return NULL;
}

static void absolute(char *out, const char *rel)
{
	if (!realpath(rel, out))
		snprintf(out, PATH_MAX, "%s", rel);
}

int main(void)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char rel[PATH_MAX];
	snprintf(rel, sizeof rel, "%s/libmemshim.so", build);
	absolute(lib, rel);
	absolute(fixtures, "tests/python/fixtures");
	snprintf(rel, sizeof rel, "%s/python/libotherhook.so", build);
	absolute(otherhook, rel);
	absolute(scripts, "python");
	return run_suite(python_suite());
}
