/* Python stages: fixture scripts (tests/python/fixtures) run under LD_PRELOAD=libmemshim.so on every
 * interpreter present; the metrics file each run writes is parsed with jansson and checked for
 * exact deltas (within 1 MiB: Python's own allocations) and call counts. */
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
#include "suite.h"

#define MIB (1024.0 * 1024.0)

static const char *const pythons[] = {
	"/root/.pyenv/versions/3.8.18/bin/python",  "/root/.pyenv/versions/3.9.18/bin/python",
	"/root/.pyenv/versions/3.10.13/bin/python", "/root/.pyenv/versions/3.11.7/bin/python",
	"/root/.pyenv/versions/3.12.1/bin/python",  "/root/.pyenv/versions/3.13.0/bin/python",
	"/usr/bin/python3",
};
#define NPY ((int)(sizeof pythons / sizeof *pythons))

static char lib[PATH_MAX], fixtures[PATH_MAX], scripts[PATH_MAX];
static const char *output_name = "m.json"; /* "m_%p.json" for tests with children */

struct run {
	char dir[64];
	int status; /* exit status, or 128 + signal */
	char out[8192], err[16384];
	json_t *root; /* the metrics file, or NULL */
	const char *python;
};

/* Runs PYTHON ARGS... in CWD (NULL: here) with the shim preloaded (unless PRELOAD is 0), stages
 * STAGES (NULL: MEMSHIM_STAGES unset) and extra KEY=VALUE entries ENV (NULL-terminated). */
static void run_py(struct run *r, const char *python, const char *const *args, const char *stages,
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
static void run_py_children(struct run *r, const char *python, const char *const *args, const char *stages)
{
	output_name = "m_%p.json";
	run_py(r, python, args, stages, NULL, NULL, 1);
	output_name = "m.json";
}

static void run_done(struct run *r)
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

static char otherhook[PATH_MAX]; /* the other tool's frame hook (fixtures/otherhook.c) */

static const char *fixture(const char *name)
{
	static char paths[4][2 * PATH_MAX];
	static int next;
	char *p = paths[next++ % 4];
	snprintf(p, sizeof paths[0], "%s/%s", fixtures, name);
	return p;
}

/* The interpreter of loop index I, or NULL (with a message) when it is not installed. */
static const char *python_or_skip(int i)
{
	if (access(pythons[i], X_OK) != 0) {
		printf("test_python: %s not installed, skipped\n", pythons[i]);
		return NULL;
	}
	return pythons[i];
}

static int minor_of(const char *python)
{
	if (strstr(python, "/usr/bin/python3"))
		return 11; /* Debian 12 */
	const char *v = strstr(python, "versions/3.");
	return v ? atoi(v + 11) : 0;
}

/* As python_or_skip, and NULL (saying WHY) for an interpreter older than 3.MINOR. */
static const char *python_at_least(int i, int minor, const char *why)
{
	const char *py = python_or_skip(i);
	if (py && minor_of(py) < minor) {
		printf("test_python: %s %s test skipped\n", py, why);
		return NULL;
	}
	return py;
}

#define RUN_OK(r)                                                                                  \
	do {                                                                                       \
		ck_assert_msg((r)->status == 0, "%s exited %d\nstdout: %s\nstderr: %s", (r)->python, \
			      (r)->status, (r)->out, (r)->err);                                    \
		ck_assert_msg((r)->root != NULL, "%s wrote no metrics file; stderr: %s", (r)->python, \
			      (r)->err);                                                           \
	} while (0)

/* The fixture SCRIPT run by PYTHON under the shim with STAGES and ENV (see run_py): it must exit 0
 * and leave a metrics file. */
static void run_fixture_ok(struct run *r, const char *python, const char *script, const char *stages,
			   const char *const *env)
{
	const char *args[] = { fixture(script), NULL };
	run_py(r, python, args, stages, env, NULL, 1);
	RUN_OK(r);
}

static void expect_out(struct run *r, const char *needle)
{
	ck_assert_msg(strstr(r->out, needle), "%s: %s", r->python, r->out);
}

static json_t *metric(struct run *r, const char *stage, const char *what)
{
	char key[160];
	snprintf(key, sizeof key, "%s_%s", stage, what);
	json_t *v = json_object_get(json_object_get(r->root, "metrics"), key);
	ck_assert_msg(v != NULL, "%s: metric %s missing; stderr: %s", r->python, key, r->err);
	return v;
}

static void expect_calls(struct run *r, const char *stage, long calls)
{
	long got = (long)json_integer_value(metric(r, stage, "calls"));
	ck_assert_msg(got == calls, "%s: %s_calls = %ld, expected %ld", r->python, stage, got, calls);
}

/* KIND is "alloc" or "peaked": the stage's last call, in MiB, within 1 MiB. */
static void expect_mib(struct run *r, const char *stage, const char *kind, double mib)
{
	char what[64];
	snprintf(what, sizeof what, "mem_cpu_%s_delta", kind);
	double got = (double)json_integer_value(metric(r, stage, what)) / MIB;
	ck_assert_msg(fabs(got - mib) <= 1.0, "%s: %s_%s = %.2f MiB, expected %.0f MiB", r->python,
		      stage, what, got, mib);
}

/* STAGE ran CALLS times and its last call kept ALLOC_MIB (within 1 MiB). */
static void expect_stage(struct run *r, const char *stage, long calls, double alloc_mib)
{
	expect_calls(r, stage, calls);
	expect_mib(r, stage, "alloc", alloc_mib);
}

static int count_lines(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Exactly one line of memshim's on stderr, and it mentions NEEDLE. */
static void expect_one_warning(struct run *r, const char *needle)
{
	ck_assert_msg(count_lines(r->err, "memshim:") == 1 && strstr(r->err, needle), "%s: expected one warning: %s",
		      r->python, r->err);
}

static void expect_absent(struct run *r, const char *stage)
{
	char key[160];
	snprintf(key, sizeof key, "%s_calls", stage);
	ck_assert_msg(json_object_get(json_object_get(r->root, "metrics"), key) == NULL,
		      "%s: stage %s should not exist", r->python, stage);
}

static json_t *stage_entry(struct run *r, const char *name)
{
	json_t *st = json_object_get(r->root, "stages"), *s;
	size_t i;
	json_array_foreach(st, i, s)
		if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0)
			return s;
	ck_abort_msg("%s: no stage %s", r->python, name);
	return NULL;
}

/* ---- tests ------------------------------------------------------------------------------ */

START_TEST(trainer_default_names)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	char pp[PATH_MAX + 32];
	snprintf(pp, sizeof pp, "PYTHONPATH=%s/hfstub", fixtures);
	const char *env[] = { pp, NULL };
	run_fixture_ok(&r, py, "trainer.py", NULL, env);
	ck_assert_msg(!strstr(r.err, "matched no function"), "%s: the default names warned: %s", py, r.err);
	expect_out(&r, "trainer ok");
	expect_stage(&r, "init", 1, 20);
	/* train: +30 state, +5 from the nested eval, +10 from the helper thread; 40 temporary */
	expect_stage(&r, "train", 1, 45);
	expect_mib(&r, "train", "peaked", 40);
	expect_stage(&r, "eval", 2, 5);
	expect_mib(&r, "eval", "peaked", 3); /* 8 temporary on top of the 5 kept */
	/* predict raised: its stage closed at the raise */
	expect_stage(&r, "test", 1, 7);
	ck_assert(!json_is_true(json_object_get(stage_entry(&r, "test"), "closed_at_exit")));
	ck_assert(!json_is_true(json_object_get(stage_entry(&r, "train"), "closed_at_exit")));
	ck_assert_msg(count_lines(r.err, "memshim:") == 0, "%s: unexpected messages: %s", py, r.err);
	run_done(&r);
}
END_TEST

START_TEST(custom_names)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	const char *args[] = { fixture("custom.py"), NULL };
	run_py(&r, py, args,
	       "fn=module_func,rec=recurse,inh=Base.run,gen=produce,pinned=helpermod:Thing.go,"
	       "nested=outer.<locals>.step,cls=Base.make,stat=Base.util",
	       NULL, NULL, 1);
	RUN_OK(&r);
	expect_stage(&r, "fn", 2, 6);
	expect_stage(&r, "rec", 1, 5); /* recursion is one call */
	expect_stage(&r, "inh", 1, 3); /* Base.run through Sub, not the module-level run() */
	expect_stage(&r, "gen", 4, 0); /* three slices ending in yield, one ending in return */
	json_t *hist = json_object_get(stage_entry(&r, "gen"), "history");
	ck_assert_int_eq(json_array_size(hist), 4);
	for (size_t k = 0; k < 3; k++) {
		double d = (double)json_integer_value(json_object_get(json_array_get(hist, k), "cpu_alloc_delta")) / MIB;
		ck_assert_msg(fabs(d - 2) <= 1.0, "%s: generator slice %zu: %.2f MiB", py, k, d);
	}
	expect_stage(&r, "pinned", 1, 4); /* helpermod.Thing.go only, not __main__.Thing.go */
	expect_stage(&r, "nested", 2, 1);
	expect_stage(&r, "cls", 1, 2);
	expect_stage(&r, "stat", 1, 1);
	run_done(&r);
}
END_TEST

static void expect_history_mib(struct run *r, const char *stage, const double *mib, size_t n)
{
	json_t *hist = json_object_get(stage_entry(r, stage), "history");
	ck_assert_msg(json_array_size(hist) == n, "%s: %s has %zu calls in history, expected %zu", r->python,
		      stage, json_array_size(hist), n);
	for (size_t k = 0; k < n; k++) {
		double d = (double)json_integer_value(json_object_get(json_array_get(hist, k), "cpu_alloc_delta")) / MIB;
		ck_assert_msg(fabs(d - mib[k]) <= 1.0, "%s: %s call %zu: %.2f MiB, expected %.0f", r->python,
			      stage, k + 1, d, mib[k]);
	}
}

START_TEST(coroutines)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "coro.py", "co=fetch,agen=ticks", NULL);
	expect_out(&r, "coro ok");
	expect_calls(&r, "co", 3); /* two suspending awaits, then the end */
	const double co[] = { 2, 2, 3 };
	expect_history_mib(&r, "co", co, 3);
	expect_calls(&r, "agen", 3); /* async generator: two yields, then the end */
	const double agen[] = { 1, 1, 0 };
	expect_history_mib(&r, "agen", agen, 3);
	run_done(&r);
}
END_TEST

START_TEST(exits_by_exception)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "genthrow.py", "gen=g,deep=deep,o=outer_fn", NULL);
	/* next, throw (handled: +2 and the loop's +1), next, close (finally), next, close by del */
	const double gen[] = { 1, 3, 1, 1, 1, 1 };
	expect_calls(&r, "gen", 6);
	expect_history_mib(&r, "gen", gen, 6);
	expect_calls(&r, "deep", 1);
	expect_stage(&r, "o", 1, 3);
	const char *names[] = { "gen", "deep", "o" };
	for (int k = 0; k < 3; k++) {
		json_t *s = stage_entry(&r, names[k]);
		ck_assert_msg(!json_is_true(json_object_get(s, "open")) &&
			      !json_is_true(json_object_get(s, "closed_at_exit")), "%s: %s left open", py, names[k]);
	}
	run_done(&r);
}
END_TEST

/* How each call ended (issue 39): Ctrl-C inside a stage and a ValueError are "raised" with their
 * type names, per call and counted; a generator's close() is its normal end; the explicit API's
 * stage says the same. */
START_TEST(calls_ended_by_exceptions)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	char pp[PATH_MAX + 16];
	snprintf(pp, sizeof pp, "PYTHONPATH=%s", scripts);
	const char *env[] = { pp, NULL };
	run_fixture_ok(&r, py, "interrupted.py", "epoch=epoch,gen=numbers", env);
	expect_out(&r, "ok");
	json_t *s = stage_entry(&r, "epoch");
	json_t *hist = json_object_get(s, "history");
	const char *want[] = { "returned", "returned", "raised", "returned", "raised" };
	const char *exc[] = { NULL, NULL, "KeyboardInterrupt", NULL, "ValueError" };
	ck_assert_int_eq((int)json_array_size(hist), 5);
	for (int i = 0; i < 5; i++) {
		json_t *h = json_array_get(hist, (size_t)i);
		const char *e = json_string_value(json_object_get(h, "exception"));
		const char *how = json_string_value(json_object_get(h, "ended"));
		ck_assert_msg(how && !strcmp(how, want[i]), "%s: call %d ended %s", py, i + 1, how ? how : "(not said)");
		ck_assert_msg(exc[i] ? e && !strcmp(e, exc[i]) : !e, "%s: call %d exception %s", py, i + 1, e ? e : "none");
	}
	/* the traceback the handler keeps holds the interrupted call's block: it reads as kept */
	ck_assert_int_ge(json_integer_value(json_object_get(json_array_get(hist, 2), "cpu_alloc_delta")), 8 << 20);
	json_t *ended = json_object_get(s, "calls_ended");
	ck_assert_int_eq(json_integer_value(json_object_get(ended, "returned")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(ended, "raised")), 2);
	ck_assert_int_eq((int)json_array_size(json_object_get(s, "exceptions")), 2);
	ck_assert_pstr_eq(json_string_value(json_object_get(s, "ended")), "raised");
	ck_assert_pstr_eq(json_string_value(json_object_get(s, "exception")), "ValueError");
	json_t *g = json_object_get(stage_entry(&r, "gen"), "calls_ended");
	ck_assert_msg(json_integer_value(json_object_get(g, "raised")) == 0 &&
		      json_integer_value(json_object_get(g, "returned")) == 2, "%s: a closed generator raised", py);
	json_t *api = stage_entry(&r, "api");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(api, "calls_ended"), "raised")), 1);
	ck_assert_pstr_eq(json_string_value(json_array_get(json_object_get(api, "exceptions"), 0)), "KeyboardInterrupt");
	run_done(&r);
}
END_TEST

/* A matched generator that drops its argument frees it inside the stage: naming the code object
 * (3.8-3.10 look at the frame's first argument) must not keep the arguments alive. */
START_TEST(argument_dropped_in_stage)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "argfree.py", "work=work", NULL);
	expect_out(&r, "argfree ok");
	const char *freed = strstr(r.out, "freed"), *dropped = strstr(r.out, "dropped");
	ck_assert_msg(freed && dropped && freed < dropped, "%s: the argument outlived its last reference: %s",
		      py, r.out);
	expect_calls(&r, "work", 2);
	const double work[] = { -8, 0 };
	expect_history_mib(&r, "work", work, 2);
	run_done(&r);
}
END_TEST

/* A stage ends once its function's frame is gone: locals released at the return are peaked, not
 * left behind; what the function stored elsewhere, returned, or left in a traceback stays. */
START_TEST(locals_released_at_return)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "locals.py", "d=drops,s=stores,ret=returns_it,x=raises,rec=rec,loc=with_locals,"
		       "tr=traced,w=watched,pk=peeked,kf=kept_frame", NULL);
	expect_out(&r, "locals ok"); /* the trace function and the 3.12+ tool saw the locals */
	static const struct {
		const char *stage;
		double alloc, peaked;
	} want[] = {
		{ "d", 0, 64 }, { "s", 10, 30 }, { "ret", 20, 0 }, { "x", 16, 0 },
		{ "rec", 0, 20 }, { "loc", 0, 12 }, { "tr", 0, 6 }, { "pk", 0, 7 }, { "kf", 9, 0 },
	};
	for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
		expect_stage(&r, want[k].stage, 1, want[k].alloc);
		expect_mib(&r, want[k].stage, "peaked", want[k].peaked);
	}
	/* 3.12+: a tool called after memshim watches that return, so the locals stay for it */
	expect_stage(&r, "w", 1, minor_of(py) >= 12 ? 8 : 0);
	run_done(&r);
}
END_TEST

START_TEST(sys_exit_in_stage)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	const char *args[] = { fixture("exiting.py"), NULL };
	run_py(&r, py, args, "fin=finish,sitemain=site:main", NULL, NULL, 1);
	ck_assert_msg(r.status == 3, "%s: exit status %d, expected the script's 3; %s", py, r.status, r.err);
	ck_assert_ptr_nonnull(r.root);
	expect_stage(&r, "fin", 1, 12);
	ck_assert(!json_is_true(json_object_get(stage_entry(&r, "fin"), "closed_at_exit")));
	expect_absent(&r, "sitemain"); /* the interpreter's own startup is not watched */
	run_done(&r);
}
END_TEST

START_TEST(run_module_and_command)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	const char *args[] = { "-m", "modmain", NULL };
	run_py(&r, py, args, "m=work,m2=__main__:work2", NULL, fixtures, 1);
	RUN_OK(&r);
	expect_out(&r, "module ok");
	expect_stage(&r, "m", 1, 6);
	expect_stage(&r, "m2", 1, 2);
	run_done(&r);

	const char *cargs[] = { "-c",
				"k=[]\ndef work():\n    k.append(bytearray(9<<20))\nwork()\nwork()\nprint('c ok')",
				NULL };
	run_py(&r, py, cargs, "c=work", NULL, NULL, 1);
	RUN_OK(&r);
	expect_stage(&r, "c", 2, 9);
	run_done(&r);
}
END_TEST

START_TEST(own_profilers)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	/* the fixture asserts its profilers saw their calls */
	run_fixture_ok(&r, py, "profiled.py", "prof=work,prof2=work2", NULL);
	expect_out(&r, "profiled ok");
	expect_stage(&r, "prof", 1, 6);
	expect_stage(&r, "prof2", 1, 3);
	/* memshim's detector is not a profile function: nothing was displaced, nothing to warn about */
	ck_assert_msg(count_lines(r.err, "memshim:") == 0, "%s: %s", py, r.err);
	run_done(&r);
}
END_TEST

START_TEST(monitoring_tool_id_taken)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	struct run r;
	/* the program's use_tool_id succeeded and its callback ran */
	run_fixture_ok(&r, py, "toolid.py", "work=work,after=after", NULL);
	expect_out(&r, "toolid ok");
	expect_one_warning(&r, "tool id");
	expect_stage(&r, "work", 1, 7); /* opened before the move, closed after it */
	expect_stage(&r, "after", 2, 5);
	run_done(&r);
}
END_TEST

/* No sys.monitoring tool id is held until a function a target names exists (the Trainer defaults,
 * a target that never matches); then one is, which the program sees as free (no tool, no events).
 * CPython's test_monitoring gives the bare result, also with a target matched in every test. */
START_TEST(monitoring_tool_id_waits)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	static const char *const none = "[None, None, None, None, None, None] [0, 0, 0, 0, 0, 0] True\n";
	const char *specs[] = { NULL, "s=some_function", "late=late_target" };
	for (int k = 0; k < 3; k++) {
		struct run r;
		const char *args[] = { fixture("toolfree.py"), k == 2 ? "exec" : NULL, NULL };
		run_py(&r, py, args, specs[k], NULL, NULL, 1);
		RUN_OK(&r);
		const char *before = strstr(r.out, "before "), *after = strstr(r.out, "after ");
		ck_assert_msg(before && !strncmp(before + 7, none, strlen(none)), "%s %s: %s", py,
			      specs[k] ? specs[k] : "(defaults)", r.out);
		if (k == 2) {
			ck_assert_msg(after && !strncmp(after + 6, none, strlen(none)), "%s: %s", py, r.out);
			expect_calls(&r, "late", 1);
		}
		run_done(&r);
	}
	/* CPython's own test of sys.monitoring, bare and under the shim: the same result */
	struct run bare, shim;
	const char *args[] = { "-m", "test", "test_monitoring", NULL };
	run_py(&bare, py, args, NULL, NULL, NULL, 0);
	if (!strstr(bare.out, "Result: SUCCESS")) {
		printf("test_python: %s test_monitoring does not pass bare (no test package?), skipped\n", py);
		run_done(&bare);
		return;
	}
	char total[128] = "";
	const char *t = strstr(bare.out, "Total tests:");
	snprintf(total, sizeof total, "%.*s", t ? (int)strcspn(t, "\n") : 0, t ? t : "");
	const char *monitored[] = { NULL, "s=some_function", "s=TestCase.run" };
	for (int k = 0; k < 3; k++) {
		run_py(&shim, py, args, monitored[k], NULL, NULL, 1);
		ck_assert_msg(shim.status == bare.status && strstr(shim.out, "Result: SUCCESS") && total[0] &&
			      strstr(shim.out, total), "%s %s: test_monitoring under the shim (bare: %s): %s", py,
			      monitored[k] ? monitored[k] : "(defaults)", total, shim.out);
		run_done(&shim);
	}
	run_done(&bare);
}
END_TEST

/* Every id memshim could move to is taken: both warnings (moved, then stopped) are printed. */
START_TEST(monitoring_no_tool_id_left)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "toolid_all.py", "work=work,after=after", NULL);
	expect_out(&r, "toolid_all ok");
	ck_assert_msg(count_lines(r.err, "memshim moved to another id") == 1 && strstr(r.err, "none is free"),
		      "%s: expected the move and the stop warnings: %s", py, r.err);
	expect_absent(&r, "after"); /* nothing detects it any more */
	run_done(&r);
}
END_TEST

START_TEST(other_threads)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "threads.py", "worker=worker,raw=raw_worker", NULL);
	expect_stage(&r, "worker", 2, 5);
	expect_stage(&r, "raw", 1, 3);
	run_done(&r);
}
END_TEST

START_TEST(helper_module)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	char pp[PATH_MAX + 16];
	snprintf(pp, sizeof pp, "PYTHONPATH=%s", scripts);
	const char *env[] = { pp, NULL };
	const char *args[] = { fixture("helper_module.py"), NULL };
	struct run r;
	run_py(&r, py, args, NULL, env, NULL, 1);
	RUN_OK(&r);
	expect_out(&r, "helper ok True");
	ck_assert_msg(strstr(r.out, "bad name refused\nprocess refused\nlive open alloc MiB 5\nwarmup alloc MiB 3 calls 2\n"
				    "live calls 1 reason live\n"), "%s: %s", py, r.out);
	expect_stage(&r, "warmup", 1, 3);
	expect_stage(&r, "decorated", 2, 2);
	run_done(&r);
	/* without the library the module does nothing and the program runs the same */
	run_py(&r, py, args, NULL, env, NULL, 0);
	ck_assert_msg(r.status == 0 && strstr(r.out, "helper ok False"), "%s: %s %s", py, r.out, r.err);
	ck_assert_msg(strstr(r.out, "bad name refused\nprocess refused\nnot active: libmemshim.so is not preloaded\n"), "%s: %s", py,
		      r.out);
	run_done(&r);
}
END_TEST

/* A bare target that matched functions of two modules: one line at exit naming both with their
 * calls, the stage's matched_functions in the file, one line under the dump's group. */
START_TEST(target_matched_several_functions)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "ambiguous.py", "eval=evaluate,t=Trainer.evaluate,p=ambmod:evaluate", NULL);
	expect_out(&r, "ambiguous ok");
	expect_one_warning(&r, "matched more than one function: eval=evaluate ran __main__:evaluate (2 calls), "
			       "ambmod:evaluate (1 call); name the one meant as module:qualname (e.g. eval=__main__:evaluate)\n");
	expect_calls(&r, "eval", 3);
	json_t *m = json_object_get(stage_entry(&r, "eval"), "matched_functions");
	ck_assert_msg(json_array_size(m) == 2, "%s: matched_functions: %zu", py, json_array_size(m));
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 1), "function")), "ambmod:evaluate");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(m, 0), "calls")), 2);
	/* a target that matched one function names it too (a bare one may be a library's) */
	json_t *p = json_array_get(json_object_get(stage_entry(&r, "p"), "matched_functions"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(p, "function")), "ambmod:evaluate");
	json_t *t = json_object_get(stage_entry(&r, "t"), "matched_functions");
	ck_assert_msg(json_array_size(t) == 1, "%s: t: %zu functions", py, json_array_size(t));
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(t, 0), "function")), "__main__:Trainer.evaluate");
	char file[128], fmt[PATH_MAX + 32];
	snprintf(file, sizeof file, "%s/m.json", r.dir);
	snprintf(fmt, sizeof fmt, "%s/memshim-format", getenv("BUILD") ? getenv("BUILD") : "build");
	struct run f;
	const char *args[] = { file, NULL };
	run_py(&f, fmt, args, NULL, NULL, NULL, 0);
	ck_assert_msg(f.status == 0 && strstr(f.out, "  eval=evaluate ran __main__:evaluate (2 calls), ambmod:evaluate "
						   "(1 call); name the one meant as module:qualname\n"),
		      "%s: %s %s", py, f.out, f.err);
	run_done(&f);
	run_done(&r);
}
END_TEST

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

/* Spawned workers: a target pinned as __main__:prepare matches the script's function there (its
 * module is __mp_main__), and each worker's file names the functions that opened its stages, the
 * bare target's multiprocessing.spawn:prepare among them, though SIGTERM ended the worker. */
START_TEST(spawned_workers_name_their_functions)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	const char *args[] = { fixture("spawn_prepare.py"), NULL };
	run_py_children(&r, py, args, "prep=prepare,own=__main__:prepare");
	ck_assert_msg(r.status == 0 && strstr(r.out, "spawn ok 10"), "%s: %d %s %s", py, r.status, r.out, r.err);
	long own = 0;
	int workers = 0;
	DIR *d = opendir(r.dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[512];
		json_error_t jerr;
		snprintf(path, sizeof path, "%s/%s", r.dir, e->d_name);
		json_t *root = strncmp(e->d_name, "m_", 2) ? NULL : json_load_file(path, 0, &jerr);
		json_t *n = json_object_get(json_object_get(root, "metrics"), "own_calls");
		if (n) {
			workers++;
			own += (long)json_integer_value(n);
			ck_assert_msg(opened_by(root, "own", "__mp_main__:prepare"), "%s: %s: own", py, e->d_name);
			ck_assert_msg(opened_by(root, "prep", "multiprocessing.spawn:prepare"), "%s: %s: prep", py, e->d_name);
		}
		json_decref(root);
	}
	if (d)
		closedir(d);
	ck_assert_msg(workers >= 1 && own == 4, "%s: %d workers ran own %ld times of 4", py, workers, own);
	run_done(&r);
}
END_TEST

/* Whether PYTHON imports torch; says why a test is skipped when not. */
static int torch_or_skip(const char *python, const char *test)
{
	struct run r;
	const char *check[] = { "-c", "import torch", NULL };
	run_py(&r, python, check, NULL, NULL, NULL, 0);
	int have = r.status == 0;
	run_done(&r);
	if (!have)
		printf("test_python: python3-torch not importable by %s, %s skipped\n", python, test);
	return have;
}

/* Issue 24's known answer on real PyTorch (the project venv's): an MLP's training stage (Adam,
 * backward) with 64 MiB made before it still live.  Its call sites cover its need and memshim-format
 * shows the script's own line first; the 64 MiB is in what it found (peak_sites_before), not in
 * what it added. */
START_TEST(torch_sites_lead_with_the_script)
{
	char py[PATH_MAX];
	snprintf(py, sizeof py, "%s/bin/python", getenv("VENV") ? getenv("VENV") : ".venv");
	if (!torch_or_skip(py, "torch sites test"))
		return;
	struct run r;
	const char *env[] = { "OMP_NUM_THREADS=1", NULL };
	const char *args[] = { fixture("sites_mlp.py"), NULL };
	run_py(&r, py, args, "train=train_loop", env, NULL, 1);
	RUN_OK(&r);
	json_t *train = stage_entry(&r, "train"), *e;
	json_t *cpu = json_object_get(train, "cpu");
	double need = (double)(json_integer_value(json_object_get(cpu, "alloc_delta")) +
			       json_integer_value(json_object_get(cpu, "peaked_delta")));
	double listed = 0, before_big = 0;
	size_t i;
	json_array_foreach(json_object_get(train, "peak_sites"), i, e) {
		listed += (double)json_integer_value(json_object_get(e, "bytes"));
		ck_assert_msg(json_integer_value(json_object_get(e, "bytes")) < 48 * MIB,
			      "%s: a site of %lld bytes in what train added (the 64 MiB is from before)", py,
			      (long long)json_integer_value(json_object_get(e, "bytes")));
	}
	json_array_foreach(json_object_get(train, "peak_sites_before"), i, e)
		if (json_integer_value(json_object_get(e, "bytes")) >= before_big)
			before_big = (double)json_integer_value(json_object_get(e, "bytes"));
	ck_assert_msg(need > 90 * MIB, "%s: train needed %.1f MiB", py, need / MIB);
	ck_assert_msg(listed >= 0.8 * need, "%s: sites %.1f MiB of a need of %.1f MiB", py, listed / MIB, need / MIB);
	ck_assert_msg(before_big >= 48 * MIB, "%s: largest site from before %.1f MiB", py, before_big / MIB);
	char file[128], fmt[PATH_MAX + 32];
	snprintf(file, sizeof file, "%s/m.json", r.dir);
	snprintf(fmt, sizeof fmt, "%s/memshim-format", getenv("BUILD") ? getenv("BUILD") : "build");
	struct run f;
	const char *fargs[] = { "--sites", "--stage", "train", "--top", "3", file, NULL };
	run_py(&f, fmt, fargs, NULL, NULL, NULL, 0);
	const char *row = strstr(f.out, "\n  1 ");
	const char *eol = row ? strchr(row + 1, '\n') : NULL;
	const char *line = row ? strstr(row, "sites_mlp.py:") : NULL;
	ck_assert_msg(f.status == 0 && line && eol && line < eol, "%s: the first site is not the script's line:\n%s%s",
		      py, f.out, f.err);
	run_done(&f);
	run_done(&r);
}
END_TEST

/* Issue 39: a bare target names the program's own function and an installed package's (as
 * eval=evaluate named sympy's evaluate, which torch imports): the program's wins, the package's
 * calls open no stage (counted as passed over), and the exit line says which won.  The program's
 * function may come late, from a module under the working directory: the package's calls before
 * it are kept, those after passed over. */
START_TEST(the_programs_own_function_wins)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	char pp[2 * PATH_MAX + 32];
	snprintf(pp, sizeof pp, "PYTHONPATH=%s/site-packages:%s", fixtures, fixtures);
	const char *env[] = { pp, NULL };
	run_fixture_ok(&r, py, "own_wins.py", "eval=evaluate,t=train", env);
	expect_out(&r, "own wins ok");
	expect_stage(&r, "eval", 1, 3); /* the program's evaluate, not the package's 7 MiB */
	expect_one_warning(&r, "eval=evaluate ran pkg_eval:evaluate (0 calls, 2 passed over), __main__:evaluate (1 call); "
			       "the program's own function won");
	json_t *m = json_object_get(stage_entry(&r, "eval"), "matched_functions"), *e;
	size_t i;
	int seen = 0;
	json_array_foreach(m, i, e) {
		const char *fn = json_string_value(json_object_get(e, "function"));
		if (fn && !strcmp(fn, "pkg_eval:evaluate")) {
			ck_assert(json_is_false(json_object_get(e, "user")));
			ck_assert_int_eq(json_integer_value(json_object_get(e, "passed_over")), 2);
			seen |= 1;
		} else if (fn && !strcmp(fn, "__main__:evaluate")) {
			ck_assert(json_is_true(json_object_get(e, "user")));
			seen |= 2;
		}
	}
	ck_assert_msg(seen == 3, "%s: matched_functions: %s", py, json_dumps(m, JSON_COMPACT));
	run_done(&r);
	run_fixture_ok(&r, py, "own_wins_late.py", "prep=prepare_batch,t=train", env);
	expect_out(&r, "late own wins ok");
	expect_stage(&r, "prep", 2, 2); /* the package's first call, then the program's */
	expect_one_warning(&r, "prep=prepare_batch ran pkg_prep:prepare_batch (1 call, 2 passed over), "
			       "ownmod_late:prepare_batch (1 call)");
	run_done(&r);
}
END_TEST

/* Issue 39: a target that matched nothing is named with the nearest name of a function the program
 * has, as an unknown MEMSHIM_ setting is with the nearest setting's. */
START_TEST(a_typo_gets_did_you_mean)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "typo.py", "data=load_dat,fit=Trainer.trian,t=Trainer.train,x=qqqqqq", NULL);
	expect_out(&r, "typo ok");
	expect_one_warning(&r, "matched no function that ran: data=load_dat (did you mean load_data?), "
			       "fit=Trainer.trian (did you mean Trainer.train?), x=qqqqqq\n");
	json_t *u = json_object_get(r.root, "unmatched_targets");
	ck_assert_int_eq((int)json_array_size(u), 3);
	ck_assert_pstr_eq(json_string_value(json_object_get(json_array_get(u, 0), "did_you_mean")), "load_data");
	ck_assert_ptr_null(json_object_get(json_array_get(u, 2), "did_you_mean"));
	run_done(&r);
}
END_TEST

/* A stage opened before the Trainer's init (a notebook cell): init is one call, the Trainer's, and
 * before_init the live memory when it began. */
START_TEST(stage_before_trainer_init)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	char pp[2 * PATH_MAX + 32];
	snprintf(pp, sizeof pp, "PYTHONPATH=%s:%s/hfstub", scripts, fixtures);
	const char *env[] = { pp, NULL };
	struct run r;
	run_fixture_ok(&r, py, "stage_first.py", NULL, env);
	expect_out(&r, "stage first ok");
	expect_stage(&r, "prep", 1, 40);
	expect_stage(&r, "init", 1, 20);
	double before = (double)json_integer_value(json_object_get(json_object_get(r.root, "metrics"),
									 "before_init_mem_cpu")) / MIB;
	ck_assert_msg(before >= 40, "%s: before_init_mem_cpu %.1f MiB, the 40 MiB kept before init missing", py,
		      before);
	ck_assert(!json_is_true(json_object_get(stage_entry(&r, "init"), "implicit")));
	run_done(&r);
}
END_TEST

START_TEST(unmatched_targets)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	/* stages that match nothing: the program runs, no stage but the implicit init appears */
	struct run r;
	run_fixture_ok(&r, py, "custom.py", "x=no_such_function,y=pkg.mod:Nope.nope,z=libnothing.so:nothing,custom=module_func",
		       NULL);
	expect_absent(&r, "x");
	expect_absent(&r, "y");
	/* a target pinned to a library is native only: warned about as such, never as a Python name */
	ck_assert_msg(strstr(r.err, "native stage z: 'libnothing.so:nothing' was not found"), "%s: %s", py, r.err);
	/* ...but they are named: one line at exit, and in the file */
	ck_assert_msg(strstr(r.err, "memshim: Python stage targets that matched no function that ran: "
				    "x=no_such_function, y=pkg.mod:Nope.nope\n"), "%s: %s", py, r.err);
	json_t *u = json_object_get(r.root, "unmatched_targets");
	ck_assert_int_eq(json_array_size(u), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(u, 1), "target")), "pkg.mod:Nope.nope");
	run_done(&r);
	/* under memshim run, whose dump names them for the whole run: the file only */
	const char *dump[] = { "MEMSHIM_RUN_DUMP=1", NULL };
	run_fixture_ok(&r, py, "custom.py", "x=no_such_function,custom=module_func", dump);
	ck_assert_msg(!strstr(r.err, "matched no function"), "%s: %s", py, r.err);
	ck_assert_int_eq(json_array_size(json_object_get(r.root, "unmatched_targets")), 1);
	run_done(&r);
}
END_TEST

/* Real PyTorch CPU training with Debian's python3-torch: parameters appear in init, gradients and
 * Adam state in train, activations only as peaks. */
START_TEST(torch_training)
{
	const char *py = "/usr/bin/python3";
	if (!torch_or_skip(py, "torch test"))
		return;
	struct run r;
	const char *env[] = { "OMP_NUM_THREADS=1", NULL };
	const char *args[] = { fixture("torch_train.py"), NULL };
	run_py(&r, py, args, "init=Model.__init__,train=train,eval=evaluate", env, NULL, 1);
	RUN_OK(&r);
	/* the fixture prints the sizes it expects: parameter bytes and one batch's activations */
	long params = 0, acts = 0;
	const char *line = strstr(r.out, "sizes ");
	ck_assert_msg(line && sscanf(line, "sizes %ld %ld", &params, &acts) == 2, "%s", r.out);
	double p = (double)params;
	double init = (double)json_integer_value(metric(&r, "init", "mem_cpu_alloc_delta"));
	double train = (double)json_integer_value(metric(&r, "train", "mem_cpu_alloc_delta"));
	double train_peak = (double)json_integer_value(metric(&r, "train", "mem_cpu_peaked_delta"));
	double eval = (double)json_integer_value(metric(&r, "eval", "mem_cpu_alloc_delta"));
	double eval_peak = (double)json_integer_value(metric(&r, "eval", "mem_cpu_peaked_delta"));
	ck_assert_msg(init >= p && init <= p + 8 * MIB, "init %.1f MiB vs parameters %.1f MiB", init / MIB, p / MIB);
	/* gradients (1x) + Adam's exp_avg and exp_avg_sq (2x) stay after training */
	ck_assert_msg(train >= 3 * p - MIB && train <= 3 * p + 16 * MIB, "train %.1f MiB vs 3x parameters %.1f MiB",
		      train / MIB, 3 * p / MIB);
	ck_assert_msg(train_peak >= acts, "train peaked %.1f MiB < activations %.1f MiB", train_peak / MIB, acts / MIB);
	ck_assert_msg(fabs(eval) <= 2 * MIB, "eval keeps %.1f MiB", eval / MIB);
	ck_assert_msg(eval_peak >= acts / 2, "eval peaked %.1f MiB < activations/2 %.1f MiB", eval_peak / MIB, acts / 2 / MIB);
	expect_calls(&r, "train", 1);
	expect_calls(&r, "eval", 2);
	run_done(&r);
}
END_TEST

/* replaced_hook.py on interpreter I with MODE ("keep" or "give-back") into R; 0 when I is not
 * installed or does not use the frame hook route (3.9-3.11). */
static int run_replaced_hook(struct run *r, int i, const char *mode)
{
	const char *py = python_or_skip(i);
	if (!py)
		return 0;
	if (minor_of(py) < 9 || minor_of(py) > 11) {
		printf("test_python: %s does not use the frame evaluation hook route, test skipped\n", py);
		return 0;
	}
	const char *args[] = { fixture("replaced_hook.py"), otherhook, mode, NULL };
	run_py(r, py, args, "work=work", NULL, NULL, 1);
	RUN_OK(r);
	expect_out(r, "replaced ok, the other hook evaluated some frames");
	return 1;
}

START_TEST(frame_hook_replaced)
{
	struct run r;
	if (!run_replaced_hook(&r, _i, "keep"))
		return;
	expect_stage(&r, "work", 1, 4); /* the call after the replacement is not seen */
	expect_one_warning(&r, "frame evaluation hook");
	ck_assert_ptr_null(json_object_get(r.root, "python_hook_lost"));
	run_done(&r);
}
END_TEST

/* A tool that puts the default evaluator back gives the hook up (CPython's own PEP 523 test does
 * it, a debugger detaching would): memshim's goes back in, and the file says stages may have been
 * missed in between, on no stream of the program's. */
START_TEST(frame_hook_given_back)
{
	struct run r;
	if (!run_replaced_hook(&r, _i, "give-back"))
		return;
	expect_calls(&r, "work", 2); /* before and after, not while the other tool held it */
	ck_assert_msg(!strstr(r.err, "memshim:"), "%s: %s", r.python, r.err);
	ck_assert_int_eq(json_integer_value(json_object_get(r.root, "python_hook_lost")), 1);
	run_done(&r);
}
END_TEST

START_TEST(embedded_interpreter)
{
	char embed[PATH_MAX + 32];
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	snprintf(embed, sizeof embed, "%s/python/embed", build);
	if (access(embed, X_OK) != 0) {
		printf("test_python: no embedding Python was found at build time, embed test skipped\n");
		return;
	}
	char abs_embed[PATH_MAX];
	ck_assert_ptr_nonnull(realpath(embed, abs_embed));
	struct run r;
	run_py(&r, abs_embed, NULL, "w=work", NULL, NULL, 1);
	RUN_OK(&r);
	ck_assert_msg(strstr(r.out, "embed ok"), "%s", r.out);
	expect_stage(&r, "w", 2, 5);
	run_done(&r);
}
END_TEST

/* Python's development mode and debug allocators: the audit hook's entry, made before the debug
 * allocator was set up, must not reach its free (that aborts the process at exit); stages work. */
START_TEST(debug_allocator)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	static const char *const modes[][2] = {
		{ "-X", "dev" }, { "PYTHONDEVMODE=1", NULL }, { "PYTHONMALLOC=debug", NULL },
		{ "PYTHONMALLOC=malloc_debug", NULL }, { "PYTHONMALLOC=pymalloc_debug", NULL },
	};
	for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
		int opt = modes[k][0][0] == '-';
		const char *env[] = { opt ? NULL : modes[k][0], NULL };
		const char *code = "k=[]\ndef f():\n    k.append(bytearray(3<<20))\nf()\nprint('dev ok')";
		const char *args[] = { opt ? "-X" : "-c", opt ? "dev" : code, opt ? "-c" : NULL, opt ? code : NULL, NULL };
		struct run r;
		run_py(&r, py, args, "f=f", env, NULL, 1);
		ck_assert_msg(r.status == 0 && r.root, "%s %s %s: exit %d: %s", py, modes[k][0], modes[k][1] ? modes[k][1] : "",
			      r.status, r.err);
		expect_out(&r, "dev ok");
		ck_assert_msg(count_lines(r.err, "memshim:") == 0, "%s %s: %s", py, modes[k][0], r.err);
		expect_stage(&r, "f", 1, 3);
		run_done(&r);
	}
}
END_TEST

START_TEST(deep_recursion)
{
	const char *py = python_at_least(_i, 11, "itself cannot recurse this deep,");
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "deep.py", "outer=outer_deep", NULL);
	expect_out(&r, "deep ok");
	expect_calls(&r, "outer", 1);
	ck_assert(!json_is_true(json_object_get(stage_entry(&r, "outer"), "closed_at_exit")));
	double a = (double)json_integer_value(metric(&r, "outer", "mem_cpu_alloc_delta")) / MIB;
	ck_assert_msg(a >= 1.0 && a <= 4.0, "%s: outer kept %.2f MiB", py, a); /* 2 + frames' chunks */
	int warnings = count_lines(r.err, "memshim:");
	if (minor_of(py) == 11)
		ck_assert_msg(warnings == 1 && strstr(r.err, "C stack"), "%s: %s", py, r.err);
	else
		ck_assert_msg(warnings == 0, "%s: %s", py, r.err);
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
		const char *args[] = { fixture("pool_exit.py"), NULL };
		run_py_children(&r, py, args, "work=work");
		ck_assert_msg(r.status == 0 && strstr(r.out, "pool ok 210"), "%s: %d %s %s", py, r.status, r.out, r.err);
		long calls = 0;
		DIR *d = opendir(r.dir);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char path[512];
			json_error_t jerr;
			snprintf(path, sizeof path, "%s/%s", r.dir, e->d_name);
			json_t *root = strncmp(e->d_name, "m_", 2) ? NULL : json_load_file(path, 0, &jerr);
			json_t *n = json_object_get(json_object_get(root, "metrics"), "work_calls");
			if (n)
				ck_assert_msg(json_is_true(json_object_get(root, "complete")), "%s: %s is %s", py,
					      e->d_name, json_string_value(json_object_get(root, "reason")));
			calls += (long)json_integer_value(n);
			json_decref(root);
		}
		if (d)
			closedir(d);
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
		DIR *d = opendir(r.dir);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (strncmp(e->d_name, "m_", 2) != 0)
				continue;
			char path[512];
			snprintf(path, sizeof path, "%s/%s", r.dir, e->d_name);
			json_error_t jerr;
			json_t *root = json_load_file(path, 0, &jerr);
			if (!root)
				continue;
			json_t *saved = r.root;
			r.root = root;
			int ran = json_object_get(json_object_get(root, "metrics"), "cw_calls") != NULL;
			if (ran) { /* helpers (spawn's resource tracker) run no stage */
				expect_stage(&r, "cw", 1, 7);
			}
			r.root = saved;
			if (ran && json_is_true(json_object_get(root, "is_child")))
				children++;
			else if (ran)
				parents++;
			json_decref(root);
		}
		if (d)
			closedir(d);
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

/* Messages about targets are the parent's: children that never run the target (a fork Pool's
 * workers, a spawned Process and spawn's resource tracker, the forkserver and its child) print
 * nothing, and record the target in their own files. */
START_TEST(children_say_nothing_about_targets)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	const char *args[] = { fixture("mpquiet.py"), NULL };
	run_py_children(&r, py, args, "mw=main_work");
	ck_assert_msg(r.status == 0 && strstr(r.out, "mpquiet ok [0, 0]"), "%s: %d %s %s", py, r.status, r.out, r.err);
	for (int k = 0; k < 200 && run_still_going(r.dir); k++) /* the helpers end after the parent */
		usleep(50 * 1000);
	read_back(r.dir, r.out, sizeof r.out, r.err, sizeof r.err);
	ck_assert_msg(r.err[0] == '\0', "%s: stderr: %s", py, r.err);
	int children = 0, recorded = 0;
	DIR *d = opendir(r.dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[512];
		snprintf(path, sizeof path, "%s/%s", r.dir, e->d_name);
		json_error_t jerr;
		json_t *root = strncmp(e->d_name, "m_", 2) == 0 ? json_load_file(path, 0, &jerr) : NULL;
		if (root && json_is_true(json_object_get(root, "is_child"))) {
			children++;
			recorded += json_array_size(json_object_get(root, "unmatched_targets")) == 1;
		}
		json_decref(root);
	}
	if (d)
		closedir(d);
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
	for (int k = 0; k < 200 && run_still_going(r.dir); k++)
		usleep(50 * 1000);
	read_back(r.dir, r.out, sizeof r.out, r.err, sizeof r.err);
	ck_assert_msg(r.status == 0 && strstr(r.out, "mpquiet ok"), "%s: %d %s %s", py, r.status, r.out, r.err);
	ck_assert_msg(count_lines(r.err, "memshim:") == 1 &&
		      strstr(r.err, "memshim: Python stage target that matched no function that ran: x=no_such_function\n"),
		      "%s under a shell: %s", py, r.err);
	run_done(&r);
}
END_TEST

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
		const char *args[] = { fixture("signals.py"), modes[m], NULL };
		run_py(&bare, py, args, NULL, NULL, NULL, 0);
		run_py(&shim, py, args, NULL, NULL, NULL, 1);
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
		const char *args[] = { fixture("signals.py"), modes[m], NULL };
		run_py(&bare, py, args, NULL, NULL, NULL, 0);
		run_py(&shim, py, args, NULL, NULL, NULL, 1);
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

/* Python 2 to 3.7 cannot have Python stages: one line says so when MEMSHIM_STAGES names some, none
 * with the Trainer defaults, and 3.8 does not get it. */
START_TEST(old_pythons_warn_once)
{
	static const char *const old[] = { "/root/.pyenv/versions/3.6.15/bin/python",
					   "/root/.pyenv/versions/3.7.16/bin/python",
					   "/root/.pyenv/versions/2.7.18/bin/python" };
	const char *args[] = { "-c", "print('ran')", NULL };
	const char *want = "memshim: Python stages need Python 3.8 or newer; this is Python ";
	int tested = 0;
	for (size_t i = 0; i < sizeof old / sizeof *old; i++) {
		if (access(old[i], X_OK) != 0)
			continue;
		struct run r;
		run_py(&r, old[i], args, "work=work,eval=Trainer.evaluate", NULL, NULL, 1);
		RUN_OK(&r);
		ck_assert_str_eq(r.out, "ran\n");
		const char *at = strstr(r.err, want);
		ck_assert_msg(at && !strstr(at + 1, want), "%s: %s", old[i], r.err);
		run_done(&r);
		run_py(&r, old[i], args, NULL, NULL, NULL, 1);
		ck_assert_msg(!strstr(r.err, want), "%s with the defaults: %s", old[i], r.err);
		run_done(&r);
		tested++;
	}
	if (access(pythons[0], X_OK) == 0) {
		struct run r;
		run_py(&r, pythons[0], args, "work=work", NULL, NULL, 1);
		ck_assert_msg(!strstr(r.err, want), "%s: %s", pythons[0], r.err);
		run_done(&r);
	}
	if (!tested)
		printf("test_python: no Python older than 3.8 installed, old_pythons_warn_once skipped\n");
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

/* The frame hook (3.8-3.11) or the monitoring events (3.12+) go on only once a function some
 * target can name exists: the debug log says when (and why). */
static const char *detection_on(struct run *r)
{
	const char *line = strstr(r->err, "python frame hook installed");
	return line ? line : strstr(r->err, "python monitoring events on");
}

/* Each run names one target that appears only after many calls (lazy.py): it is found, and on
 * the frame hook route the hook went in for it. */
START_TEST(lazy_install)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	static const struct {
		const char *stages, *stage, *why;
		double mib;
	} cases[] = {
		{ "main=main_work", "main", "main_work", 2 },
		{ "late=late_work", "late", "late_work", 3 },
		{ "meth=Late.method", "meth", "Late", 4 },
		{ "nest=outer_late.<locals>.inner", "nest", "outer_late.<locals>.inner", 5 },
		{ "imp=imported_work", "imp", "imported_work", 6 },
		{ "ex=exec_work", "ex", "exec_work", 7 },
		{ "thr=thread_work", "thr", "thread_work", 8 },
		{ "pat=Late2.patched", "pat", "the class Late2", 9 }, /* 3.8-3.10 name it from its class */
		{ "reb=rebuilt", "reb", "built at run time named rebuilt", 10 }, /* 3.9+: code.__new__ */
	};
	const char *env[] = { "MEMSHIM_LOG=debug", NULL };
	const char *args[] = { fixture("lazy.py"), NULL };
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		struct run r;
		run_py(&r, py, args, cases[k].stages, env, NULL, 1);
		RUN_OK(&r);
		expect_out(&r, "lazy ok");
		if ((cases[k].mib == 9 && minor_of(py) >= 11) || (cases[k].mib == 10 && minor_of(py) == 8)) {
			expect_absent(&r, cases[k].stage);
			ck_assert_msg(!detection_on(&r), "%s: %s", py, r.err);
			run_done(&r);
			continue;
		}
		expect_stage(&r, cases[k].stage, 1, cases[k].mib);
		const char *line = detection_on(&r);
		const char *end = line ? strchr(line, '\n') : NULL;
		const char *why = line ? strstr(line, cases[k].why) : NULL;
		ck_assert_msg(why && (!end || why < end), "%s %s: detection went on for something else: %s", py,
			      cases[k].stages, r.err);
		run_done(&r);
	}
}
END_TEST

/* No function a target can name: the frame hook never goes in, the monitoring events stay off
 * (the Trainer names in a program with its own Model.train, evaluate and a dataclass; a name that
 * matches nothing), and unmatched targets are still named at exit. */
START_TEST(no_target_no_hook)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	const char *env[] = { "MEMSHIM_LOG=debug", NULL };
	const char *args[] = { fixture("noinstall.py"), NULL };
	const char *specs[] = { NULL, "x=no_such_function" };
	for (int k = 0; k < 2; k++) {
		struct run r;
		run_py(&r, py, args, specs[k], env, NULL, 1);
		RUN_OK(&r);
		expect_out(&r, "noinstall ok");
		ck_assert_msg(strstr(r.err, "python stage detection armed") && !detection_on(&r),
			      "%s %s: detection went on: %s", py, specs[k] ? specs[k] : "(defaults)", r.err);
		int unmatched = strstr(r.err, "matched no function that ran: x=no_such_function\n") != NULL;
		ck_assert_msg(unmatched == (k == 1), "%s: %s", py, r.err);
		ck_assert_int_eq(json_array_size(json_object_get(r.root, "unmatched_targets")), k == 1 ? 1 : 0);
		run_done(&r);
	}
	/* the same program with a target it has: the hook goes in */
	struct run r;
	run_py(&r, py, args, "t=Model.train", env, NULL, 1);
	RUN_OK(&r);
	expect_calls(&r, "t", 2);
	ck_assert_msg(detection_on(&r), "%s: %s", py, r.err);
	run_done(&r);
}
END_TEST

/* Functions of a module imported while the interpreter started (sitecustomize), before the
 * detector did: found by name at start. */
START_TEST(defined_before_start)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	char pp[PATH_MAX + 32];
	snprintf(pp, sizeof pp, "PYTHONPATH=%s/early", fixtures);
	const char *env[] = { pp, "MEMSHIM_LOG=debug", NULL };
	const char *args[] = { fixture("early_main.py"), NULL };
	static const char *const specs[] = { "ew=early_work", "em=early_mod:Early.method" };
	static const char *const stages[] = { "ew", "em" };
	static const double mib[] = { 3, 2 };
	for (int k = 0; k < 2; k++) {
		struct run r;
		run_py(&r, py, args, specs[k], env, NULL, 1);
		RUN_OK(&r);
		expect_out(&r, "early ok");
		expect_stage(&r, stages[k], 1, mib[k]);
		ck_assert_msg(strstr(r.err, "loaded before the program started defines early_mod"), "%s: %s", py, r.err);
		run_done(&r);
	}
}
END_TEST

/* The main program is compiled code (a .pyc, or any name with the magic number at its start): no
 * exec event brings its code, so the hook goes in at the start. */
START_TEST(compiled_main)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	char dir[] = "/tmp/memshim-pyc.XXXXXX", pyc[64], bare[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(pyc, sizeof pyc, "%s/prog.pyc", dir);
	snprintf(bare, sizeof bare, "%s/prog", dir);
	struct run r;
	const char *compile[] = { "-c", "import py_compile, shutil, sys\n"
				  "py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)\n"
				  "shutil.copy(sys.argv[2], sys.argv[3])",
				  fixture("pycmain.py"), pyc, bare, NULL };
	run_py(&r, py, compile, NULL, NULL, NULL, 0);
	ck_assert_msg(r.status == 0, "%s: %s", py, r.err);
	run_done(&r);
	const char *const progs[] = { pyc, bare };
	for (int k = 0; k < 2; k++) {
		const char *args[] = { progs[k], NULL };
		run_py(&r, py, args, "w=work", NULL, NULL, 1);
		RUN_OK(&r);
		expect_out(&r, "pyc ok");
		expect_stage(&r, "w", 1, 4);
		run_done(&r);
	}
	unlink(pyc);
	unlink(bare);
	rmdir(dir);
	/* a main program read from a pipe is not looked into (that would take its first bytes) */
	char cmd[PATH_MAX + 200];
	snprintf(cmd, sizeof cmd, "exec %s <(printf 'k=[]\\ndef work():\\n    k.append(bytearray(4<<20))\\n"
		 "work()\\nprint(\"pipe ok\")\\n')", py);
	const char *args[] = { "-c", cmd, NULL };
	run_py(&r, "/bin/bash", args, "w=work", NULL, NULL, 1);
	RUN_OK(&r);
	ck_assert_msg(strstr(r.out, "pipe ok"), "%s: %s %s", py, r.out, r.err);
	expect_stage(&r, "w", 1, 4);
	run_done(&r);
}
END_TEST

/* ---- what the program can see of memshim (issue 29) ------------------------------------------ */

/* A program's code-object extra index is the one it gets without memshim (0), and the slot stays
 * empty on the functions memshim matched: memshim keeps what it knows of code objects in a table
 * of its own (a slot taken by memshim made CPython's test_code crash at exit). */
START_TEST(code_extra_left_to_the_program)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "coextra.py", "w=work", NULL);
	expect_out(&r, "index 0, work's slot 0 empty");
	expect_calls(&r, "w", 1);
	run_done(&r);
}
END_TEST

/* The first line of OUT that starts with "> " (pdb's stop), or NULL. */
static const char *pdb_stop(const char *out)
{
	const char *p = strncmp(out, "> ", 2) == 0 ? out : strstr(out, "\n> ");
	return p && *p == '\n' ? p + 1 : p;
}

/* pdb stops on the line it stops on bare, after a target matched (3.13 stopped one line late while
 * memshim's PY_START was on for every code object). */
START_TEST(debugger_line_as_without_shim)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run bare, shim;
	const char *args[] = { fixture("pdbline.py"), NULL };
	run_py(&bare, py, args, NULL, NULL, NULL, 0);
	run_py(&shim, py, args, "w=work", NULL, NULL, 1);
	const char *b = pdb_stop(bare.out), *m = pdb_stop(shim.out);
	ck_assert_msg(bare.status == 0 && strstr(bare.out, "pdbline ok") && b, "%s bare: %s", py, bare.out);
	ck_assert_msg(m && strcspn(b, "\n") == strcspn(m, "\n") && !strncmp(b, m, strcspn(b, "\n")),
		      "%s: pdb stopped elsewhere under the shim:\n%s\nbare:\n%s", py, shim.out, bare.out);
	expect_calls(&shim, "w", 1);
	run_done(&bare);
	run_done(&shim);
}
END_TEST

/* 3.12+: the tool id is given back once no watched function can match (its name ran in another
 * module): the original get_tool, kept before memshim took the id, shows it free again. */
START_TEST(monitoring_tool_id_given_back)
{
	const char *py = python_at_least(_i, 12, "has no sys.monitoring, tool id");
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "toolback.py", "w=othermod:work", NULL);
	expect_out(&r, "held True after [None, None, None, None, None, None]");
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
	const char *args[] = { fixture("kidsonly.py"), NULL };
	run_py_children(&r, py, args, "cw=child_work,x=never_defined");
	ck_assert_msg(r.status == 0 && strstr(r.out, "kidsonly ok [0, 0]"), "%s: %d %s %s", py, r.status, r.out, r.err);
	ck_assert_msg(count_lines(r.err, "memshim:") == 1 && strstr(r.err, "matched no function that ran: x=never_defined\n"),
		      "%s: expected one line naming x only: %s", py, r.err);
	const char *pid = strstr(r.out, " pid ");
	char shared[96];
	snprintf(shared, sizeof shared, "/dev/shm/memshim-py-%u-%ld", (unsigned)getuid(), pid ? atol(pid + 5) : 0L);
	ck_assert_msg(pid && access(shared, F_OK) != 0, "%s: %s was left (%s)", py, shared, r.out);
	run_done(&r);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("python");
	TCase *tc = tcase_create("stages");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, trainer_default_names, 0, NPY);
	tcase_add_loop_test(tc, custom_names, 0, NPY);
	tcase_add_loop_test(tc, sys_exit_in_stage, 0, NPY);
	tcase_add_loop_test(tc, coroutines, 0, NPY);
	tcase_add_loop_test(tc, exits_by_exception, 0, NPY);
	tcase_add_loop_test(tc, calls_ended_by_exceptions, 0, NPY);
	tcase_add_loop_test(tc, argument_dropped_in_stage, 0, NPY);
	tcase_add_loop_test(tc, locals_released_at_return, 0, NPY);
	tcase_add_loop_test(tc, run_module_and_command, 0, NPY);
	tcase_add_loop_test(tc, own_profilers, 0, NPY);
	tcase_add_loop_test(tc, monitoring_tool_id_taken, 0, NPY);
	tcase_add_loop_test(tc, monitoring_no_tool_id_left, 0, NPY);
	tcase_add_loop_test(tc, monitoring_tool_id_waits, 0, NPY);
	tcase_add_loop_test(tc, other_threads, 0, NPY);
	tcase_add_loop_test(tc, helper_module, 0, NPY);
	tcase_add_loop_test(tc, unmatched_targets, 0, NPY);
	tcase_add_loop_test(tc, stage_before_trainer_init, 0, NPY);
	tcase_add_loop_test(tc, target_matched_several_functions, 0, NPY);
	tcase_add_loop_test(tc, the_programs_own_function_wins, 0, NPY);
	tcase_add_loop_test(tc, a_typo_gets_did_you_mean, 0, NPY);
	tcase_add_loop_test(tc, lazy_install, 0, NPY);
	tcase_add_loop_test(tc, no_target_no_hook, 0, NPY);
	tcase_add_loop_test(tc, defined_before_start, 0, NPY);
	tcase_add_loop_test(tc, compiled_main, 0, NPY);
	tcase_add_loop_test(tc, frame_hook_replaced, 0, NPY);
	tcase_add_loop_test(tc, frame_hook_given_back, 0, NPY);
	tcase_add_test(tc, torch_sites_lead_with_the_script);
	tcase_add_test(tc, embedded_interpreter);
	tcase_add_loop_test(tc, debug_allocator, 0, NPY);
	tcase_add_loop_test(tc, deep_recursion, 0, NPY);
	tcase_add_loop_test(tc, python_children, 0, NPY);
	tcase_add_loop_test(tc, children_say_nothing_about_targets, 0, NPY);
	tcase_add_loop_test(tc, signals_as_without_shim, 0, NPY);
	tcase_add_loop_test(tc, signal_deaths_leave_a_snapshot, 0, NPY);
	tcase_add_test(tc, old_pythons_warn_once);
	tcase_add_loop_test(tc, fork_sees_no_extra_thread, 0, NPY);
	tcase_add_loop_test(tc, code_extra_left_to_the_program, 0, NPY);
	tcase_add_loop_test(tc, debugger_line_as_without_shim, 0, NPY);
	tcase_add_loop_test(tc, children_matches_count_for_the_run, 0, NPY);
	tcase_add_loop_test(tc, monitoring_tool_id_given_back, 0, NPY);
	suite_add_tcase(s, tc);
	TCase *tp = tcase_create("pool");
	tcase_set_timeout(tp, 120);
	tcase_add_loop_test(tp, pool_workers_terminated_leave_complete_files, 0, NPY);
	tcase_add_loop_test(tp, spawned_workers_name_their_functions, 0, NPY);
	suite_add_tcase(s, tp);
	TCase *tt = tcase_create("torch");
	tcase_set_timeout(tt, 120);
	tcase_add_test(tt, torch_training);
	suite_add_tcase(s, tt);
	return s;
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
	return run_suite(suite());
}
