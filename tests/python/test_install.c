/* When and how a route goes in: lazily, once code a target can name exists; not at all
 * without targets; functions defined before start, a compiled main program, an embedded
 * interpreter, Pythons too old for stages.
 * Fixture scripts (tests/python/fixtures) run under LD_PRELOAD=libmemshim.so on every interpreter
 * present (tests/python/pyrun.h). */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pyrun.h"

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

Suite *python_suite(void)
{
	Suite *s = suite_create("python_install");
	TCase *stages = tcase_create("stages");
	tcase_set_timeout(stages, 60);
	tcase_add_loop_test(stages, lazy_install, 0, NPY);
	tcase_add_loop_test(stages, no_target_no_hook, 0, NPY);
	tcase_add_loop_test(stages, defined_before_start, 0, NPY);
	tcase_add_loop_test(stages, compiled_main, 0, NPY);
	tcase_add_test(stages, embedded_interpreter);
	tcase_add_test(stages, old_pythons_warn_once);
	suite_add_tcase(s, stages);
	return s;
}
