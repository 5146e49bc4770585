/* Which functions the targets of MEMSHIM_STAGES name: targets that matched nothing (and the
 * name they were near), a target that matched several functions, the program's own function
 * winning over an installed package's.
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

/* A bare target that named nine functions (the program's and eight modules'): the exit line and
 * the dump name the functions that ran first, five at most, then how many more. */
START_TEST(many_functions_are_named_briefly)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "many_steps.py", "s=step", NULL);
	expect_out(&r, "steps ok");
	/* how many of a package's calls were passed over depends on the version (3.11 inlines those
	 * made while every stage is open): only that none opened the stage */
	expect_one_warning(&r, "matched more than one function: s=step ran __main__:step (1 call), stepmod0:step (0 "
			       "calls, ");
	ck_assert_msg(strstr(r.err, "stepmod3:step (0 calls, ") && strstr(r.err, " and 4 more (4 passed over); "),
		      "%s: %s", py, r.err);
	ck_assert_msg(!strstr(r.err, "stepmod4"), "%s: %s", py, r.err);
	char file[128], fmt[PATH_MAX + 32];
	snprintf(file, sizeof file, "%s/m.json", r.dir);
	snprintf(fmt, sizeof fmt, "%s/memshim-format", getenv("BUILD") ? getenv("BUILD") : "build");
	json_t *m = json_object_get(stage_entry(&r, "s"), "matched_functions");
	ck_assert_msg(json_array_size(m) == 9, "%s: matched_functions: %zu", py, json_array_size(m));
	struct run f;
	const char *fargs[] = { file, NULL };
	run_py(&f, fmt, fargs, NULL, NULL, NULL, 0);
	ck_assert_msg(f.status == 0 && strstr(f.out, "  s=step ran __main__:step (1 call), stepmod0:step") &&
			      strstr(f.out, " and 4 more (4 passed over); ") && !strstr(f.out, "stepmod4"),
		      "%s: %s %s", py, f.out, f.err);
	run_done(&f);
	run_done(&r);
}
END_TEST

/* A bare target names the program's own function and an installed package's (as
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
	expect_one_warning(&r, "eval=evaluate ran __main__:evaluate (1 call), pkg_eval:evaluate (0 calls, 2 passed over); "
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

/* A target that matched nothing is named with the nearest name of a function the program
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

/* A script's own functions named like the C library's (write, read, log): their calls, never the
 * C library's (a print is libc's write); a plain name found natively in a library loaded later
 * (sqlite3_step) is no "Python target that matched nothing"; one neither ran is (gone=sleep). */
START_TEST(c_library_names_are_the_scripts_functions)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	struct run r;
	run_fixture_ok(&r, py, "cnames.py",
		       "save=write,load=read,calc=log,step=sqlite3_step,gone=sleep,entry=main,walk=advance", NULL);
	expect_out(&r, "cnames ok 2097152");
	/* the script's main, not the interpreter's C main (in pyenv's python only in .symtab): bound
	 * from the stack, that one turned every allocation into a stack check */
	expect_calls(&r, "entry", 1);
	expect_mib(&r, "entry", "peaked", 2);
	json_t *natives = json_object_get(r.root, "native_targets"), *row;
	size_t k;
	json_array_foreach(natives, k, row) {
		/* glibc's compat advance@GLIBC_2.2.5 is no function a program calls by that name: not a
		 * native target (it made every allocation of a jitted JAX step look at the stack) */
		ck_assert_msg(strcmp(json_string_value(json_object_get(row, "target")), "advance"), "%s: advance bound %s",
			      py, json_string_value(json_object_get(row, "bound")));
		if (!strcmp(json_string_value(json_object_get(row, "target")), "main"))
			ck_assert_msg(!strcmp(json_string_value(json_object_get(row, "bound")), "runtime"), "%s: main bound %s",
				      py, json_string_value(json_object_get(row, "bound")));
	}
	expect_calls(&r, "walk", 1);
	expect_calls(&r, "save", 1);
	expect_calls(&r, "load", 1);
	expect_calls(&r, "calc", 1);
	expect_stage(&r, "save", 1, 0);
	expect_mib(&r, "load", "peaked", 2);
	if (!strstr(r.out, "no sqlite3"))
		ck_assert_msg(json_integer_value(metric(&r, "step", "calls")) >= 100, "%s: %s", py, r.err);
	expect_one_warning(&r, "memshim: Python stage target that matched no function that ran: gone=sleep");
	ck_assert_msg(!strstr(r.err, "native stage"), "%s: %s", py, r.err);
	json_t *u = json_object_get(r.root, "unmatched_targets");
	ck_assert_int_eq((int)json_array_size(u), 1);
	run_done(&r);
}
END_TEST

Suite *python_suite(void)
{
	Suite *s = suite_create("python_targets");
	TCase *stages = tcase_create("stages");
	tcase_set_timeout(stages, 60);
	tcase_add_loop_test(stages, unmatched_targets, 0, NPY);
	tcase_add_loop_test(stages, target_matched_several_functions, 0, NPY);
	tcase_add_loop_test(stages, the_programs_own_function_wins, 0, NPY);
	tcase_add_loop_test(stages, many_functions_are_named_briefly, 0, NPY);
	tcase_add_loop_test(stages, a_typo_gets_did_you_mean, 0, NPY);
	tcase_add_loop_test(stages, c_library_names_are_the_scripts_functions, 0, NPY);
	suite_add_tcase(s, stages);
	return s;
}
