/* How calls of matched functions open and close stages: returns, exceptions, sys.exit,
 * coroutines and generators, the locals a call leaves behind, threads, helper modules, -m and -c,
 * debug allocators.
 * Fixture scripts (tests/python/fixtures) run under LD_PRELOAD=libmemshim.so on every interpreter
 * present (tests/python/pyrun.h). */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pyrun.h"

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

/* How each call ended: Ctrl-C inside a stage and a ValueError are "raised" with their
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
	run_py(&r, py, args, "m=work,m2=__main__:work2,m3=modmain:work3", NULL, fixtures, 1);
	RUN_OK(&r);
	expect_out(&r, "module ok");
	expect_stage(&r, "m", 1, 6);
	expect_stage(&r, "m2", 1, 2);
	expect_stage(&r, "m3", 1, 3); /* pinned by the module's name, as python -m was given it */
	ck_assert_msg(!strstr(r.err, "memshim:"), "%s: %s", py, r.err);
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

/* The lines of TEXT that are not memshim's, into OUT. */
static void program_lines(const char *text, char *out, size_t size)
{
	size_t n = 0;
	for (const char *line = text; *line && n + 1 < size;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line + 1) : strlen(line);
		if (strncmp(line, "memshim:", 8) != 0 && n + len < size) {
			memcpy(out + n, line, len);
			n += len;
		}
		line += len;
	}
	out[n] = '\0';
}

#define KINDS_ONE "s=work|C.m|rec|gen|aw|fails|K.helper|looks|redefined|swapped|shared"
#define KINDS_EACH                                                                                                     \
	"w=work,m=C.m,rec=rec,gen=gen,aw=aw,fails=fails,helper=K.helper,looks=looks,redef=redefined,swapped=swapped,"  \
	"sh=shared"

/* Every way a target gets called (call_kinds.py: directly, as a method, a stored bound method,
 * through functools.partial and super(), recursively, raising, generators and coroutines, defined in
 * a class body, redefined, its __code__ replaced, pickled, under a profile and a trace function,
 * on four threads at once): the program prints what it sees (tracebacks, profile and trace events,
 * inspect.stack(), f_back) and it is what it sees without memshim, the uncaught exception's
 * traceback too.  Every call counts, with one stage holding every target (on 3.11 the frame hook
 * steps out inside it once all have matched, and the threads that enter meanwhile are followed:
 * the stage holds what they keep after the first returned) and with a stage each. */
START_TEST(call_kinds)
{
	const char *py = python_or_skip(_i);
	if (!py)
		return;
	static char bare_out[8192], bare_err[16384], out[8192], err[16384];
	struct run bare, r;
	const char *args[] = { fixture("call_kinds.py"), "uncaught", NULL };
	run_py(&bare, py, args, NULL, NULL, NULL, 0);
	ck_assert_msg(bare.status == 1 && strstr(bare.out, "threads ok"), "%s: %d %s", py, bare.status, bare.err);
	program_lines(bare.out, bare_out, sizeof bare_out);
	program_lines(bare.err, bare_err, sizeof bare_err);
	run_done(&bare);
	const char *const stages[] = { KINDS_ONE, KINDS_EACH };
	for (int k = 0; k < 2; k++) {
		run_py(&r, py, args, stages[k], NULL, NULL, 1);
		ck_assert_msg(r.status == 1 && r.root, "%s: %d %s", py, r.status, r.err);
		program_lines(r.out, out, sizeof out);
		program_lines(r.err, err, sizeof err);
		ck_assert_msg(!strcmp(out, bare_out), "%s %s: the program saw\n%s\nwithout memshim\n%s", py, stages[k],
			      out, bare_out);
		ck_assert_msg(!strcmp(err, bare_err), "%s %s: stderr\n%s\nwithout memshim\n%s", py, stages[k], err,
			      bare_err);
		if (k == 0) {
			expect_stage(&r, "s", 45, 0); /* 43, then D().m and the uncaught raise at the end */
			json_t *hist = json_object_get(stage_entry(&r, "s"), "history");
			double threads = (double)json_integer_value(
						 json_object_get(json_array_get(hist, 42), "cpu_alloc_delta")) /
					 MIB;
			ck_assert_msg(fabs(threads - 6) <= 1, "%s: the threads' call kept %.2f MiB, not 6", py,
				      threads);
		} else {
			const char *names[] = { "helper", "w",  "m",     "rec",   "fails",
						"gen",    "aw", "looks", "redef", "swapped" };
			const long calls[] = { 1, 8, 9, 4, 3, 6, 4, 2, 4, 2 };
			for (int i = 0; i < 10; i++)
				expect_calls(&r, names[i], calls[i]);
			expect_stage(&r, "sh", 2, 6);
			json_t *ended = json_object_get(stage_entry(&r, "fails"), "calls_ended");
			ck_assert_int_eq(json_integer_value(json_object_get(ended, "raised")), 3);
		}
		run_done(&r);
	}
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

Suite *python_suite(void)
{
	Suite *s = suite_create("python_calls");
	TCase *stages = tcase_create("stages");
	tcase_set_timeout(stages, 60);
	tcase_add_loop_test(stages, trainer_default_names, 0, NPY);
	tcase_add_loop_test(stages, custom_names, 0, NPY);
	tcase_add_loop_test(stages, sys_exit_in_stage, 0, NPY);
	tcase_add_loop_test(stages, coroutines, 0, NPY);
	tcase_add_loop_test(stages, exits_by_exception, 0, NPY);
	tcase_add_loop_test(stages, calls_ended_by_exceptions, 0, NPY);
	tcase_add_loop_test(stages, argument_dropped_in_stage, 0, NPY);
	tcase_add_loop_test(stages, locals_released_at_return, 0, NPY);
	tcase_add_loop_test(stages, run_module_and_command, 0, NPY);
	tcase_add_loop_test(stages, other_threads, 0, NPY);
	tcase_add_loop_test(stages, call_kinds, 0, NPY);
	tcase_add_loop_test(stages, helper_module, 0, NPY);
	tcase_add_loop_test(stages, stage_before_trainer_init, 0, NPY);
	tcase_add_loop_test(stages, debug_allocator, 0, NPY);
	suite_add_tcase(s, stages);
	return s;
}
