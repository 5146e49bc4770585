/* Native stages: fixture programs (plain gcc -g, -rdynamic, -O2, stripped, C++) under the shim,
 * with exact deltas, peaks and call counts read from the metrics file. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"

static struct run r;
static int64_t keep, temp; /* usable sizes of the fixtures' blocks (printed by the fixture) */

/* Runs fixture PROG with MEMSHIM_STAGES=STAGES and ARGS; returns the parsed metrics file. */
static json_t *run_fixture(const char *prog, const char *stages, const char *a1, const char *a2, const char *a3)
{
	char spec[512];
	snprintf(spec, sizeof spec, "MEMSHIM_STAGES=%s", stages);
	const char *env[] = { spec, NULL };
	const char *argv[] = { built(prog), a1, a2, a3, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s exited with %d: %s", prog, r.status, r.err);
	long k = 0, t = 0;
	ck_assert_msg(sscanf(r.out, "keep=%ld temp=%ld", &k, &t) == 2, "fixture output: %s", r.out);
	keep = k;
	temp = t;
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	return m;
}

/* The flat metric STAGE_WHAT is WANT. */
static void expect_metric(json_t *m, const char *stage, const char *what, int64_t want)
{
	char key[128];
	snprintf(key, sizeof key, "%s_%s", stage, what);
	int64_t got = metric(m, key);
	ck_assert_msg(got == want, "%s = %lld, expected %lld", key, (long long)got, (long long)want);
}

/* STAGE ran CALLS times and its last call kept ALLOC bytes. */
static void expect_stage(json_t *m, const char *stage, int64_t calls, int64_t alloc)
{
	expect_metric(m, stage, "calls", calls);
	expect_metric(m, stage, "mem_cpu_alloc_delta", alloc);
}

/* The same, its last call also peaking PEAK bytes above its start. */
static void expect_stage_peak(json_t *m, const char *stage, int64_t calls, int64_t alloc, int64_t peak)
{
	expect_stage(m, stage, calls, alloc);
	expect_metric(m, stage, "mem_cpu_peaked_delta", peak);
}

static int64_t stage_int(json_t *m, const char *stage, const char *key)
{
	json_t *s = stage_of(m, stage);
	ck_assert_msg(s != NULL, "stage %s missing", stage);
	json_t *v = json_object_get(s, key);
	return json_is_boolean(v) ? json_is_true(v) : json_integer_value(v);
}


/* STAGE was called CALLS times, each call keeping KEEP and peaking TEMP above it. */
static void expect_each_call(json_t *m, const char *stage, int calls)
{
	char key[64];
	snprintf(key, sizeof key, "%s_calls", stage);
	ck_assert_int_eq(metric(m, key), calls);
	for (int i = 0; i < calls; i++) {
		ck_assert_int_eq(stage_call(m, stage, i, "cpu_alloc_delta"), keep);
		ck_assert_int_eq(stage_call(m, stage, i, "cpu_peaked_delta"), temp);
	}
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Every fixture build: calls back to back, each keeping KEEP and peaking at TEMP above it. */
static const char *const builds[] = { "native/nstages", "native/nstages-rdynamic", "native/nstages-O2",
				       "native/nstages-rdynamic-stripped" };

START_TEST(back_to_back_calls_are_exact)
{
	json_t *m = run_fixture(builds[_i], "train=train_epoch", "loop", "5", NULL);
	expect_stage_peak(m, "train", 5, keep, temp);
	expect_each_call(m, "train", 5);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

/* Of the frames between a stage function and the last frame known, only the stage functions' are
 * taken in: what the others allocate before and after each call, and after a longjmp out of the
 * stage into one of them, stays outside the stage, call after call; a stage function among them
 * (o) is seen as well. */
START_TEST(frames_between_the_stage_and_the_known_ones)
{
	json_t *m = run_fixture(builds[_i], "train=train_epoch,j=jumps_home,o=between_outer", "between", "40", NULL);
	ck_assert_int_eq(metric(m, "o_calls"), 40);
	ck_assert_int_eq(metric(m, "train_calls"), 20);
	ck_assert_int_eq(metric(m, "j_calls"), 20);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(stage_call(m, "train", i, "cpu_alloc_delta"), keep);
		ck_assert_int_eq(stage_call(m, "train", i, "cpu_peaked_delta"), temp);
		ck_assert_int_eq(stage_call(m, "j", i, "cpu_alloc_delta"), keep);
		ck_assert_int_eq(stage_call(m, "j", i, "cpu_peaked_delta"), temp);
	}
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(stage_call(m, "o", i, "cpu_alloc_delta"), keep);
	ck_assert_int_eq(stage_int(m, "j", "closed_at_exit"), 0);
	json_decref(m);
}
END_TEST

START_TEST(only_calls_that_allocate_count)
{
	json_t *m = run_fixture("native/nstages", "s=sometimes", "sometimes", "7", NULL);
	expect_stage(m, "s", 3, keep); /* calls 1, 3 and 5 allocate */
	json_decref(m);
}
END_TEST

START_TEST(recursion_is_one_call)
{
	json_t *m = run_fixture("native/nstages", "r=descend", "recurse", "3", NULL);
	expect_stage(m, "r", 3, 6 * keep); /* depth 5..0 */
	json_decref(m);
}
END_TEST

START_TEST(longjmp_out_of_a_stage_closes_it)
{
	json_t *m = run_fixture("native/nstages", "j=jumper", "longjmp", "4", NULL);
	ck_assert_int_eq(metric(m, "j_calls"), 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(stage_call(m, "j", i, "cpu_alloc_delta"), keep);
		ck_assert_int_eq(stage_call(m, "j", i, "cpu_peaked_delta"), temp);
	}
	ck_assert_int_eq(stage_int(m, "j", "closed_at_exit"), 0);
	json_decref(m);
}
END_TEST

START_TEST(nested_native_stages)
{
	json_t *m = run_fixture("native/nstages", "outer=outer_run,train=train_epoch", "nested", "3", NULL);
	expect_stage_peak(m, "outer", 1, 3 * keep, temp);
	expect_stage(m, "train", 3, keep);
	json_decref(m);
}
END_TEST

/* The leaf allocates from the same place at the same depth inside the stage function and inside
 * its twin: a remembered way up the stack (a walk replayed, a chain) must tell them apart. */
START_TEST(same_place_same_depth_in_and_out_of_the_stage)
{
	json_t *m = run_fixture(builds[_i], "t=twin_stage", "twins", "30", NULL);
	expect_each_call(m, "t", 10);
	json_decref(m);
}
END_TEST

/* Calls of the stage function from a frame the shim has taken in (it allocated thousands of times
 * outside the stage, directly and through a helper) are each seen, and exact. */
START_TEST(stage_called_from_a_busy_loop)
{
	json_t *m = run_fixture(builds[_i], "train=train_epoch", "busy", "6", NULL);
	expect_each_call(m, "train", 6);
	json_decref(m);
}
END_TEST

START_TEST(function_in_a_library_linked_at_start)
{
	static const char *const specs[] = { "l=lib_train", "l=libnstage.so:lib_train" };
	json_t *m = run_fixture("native/nstages", specs[_i], "lib", "3", NULL);
	expect_stage_peak(m, "l", 3, keep, temp);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

START_TEST(function_in_a_library_loaded_later)
{
	static const char *const specs[] = { "p=plugin_train", "p=libnplugin.so:plugin_train" };
	json_t *m = run_fixture("native/nstages", specs[_i], "dlopen", "2", built("native/libnplugin.so"));
	expect_stage_peak(m, "p", 2, keep, temp);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

/* dlopen from a library relies on that library's RUNPATH: the wrapper must leave it the caller,
 * with native checks waiting for a dlopen (a target not loaded yet) and without any stages. */
START_TEST(dlopen_keeps_its_callers_search_path)
{
	static const char *const specs[] = { "p=plugin_train", "x=no_such_function", "" };
	json_t *m = run_fixture("native/nstages", specs[_i], "origin", "2", built("native/libnorigin.so"));
	if (_i == 0) {
		expect_stage(m, "p", 2, keep);
	}
	json_decref(m);
}
END_TEST

/* A stage function called by the constructor of a library being loaded: seen while dlopen runs. */
START_TEST(stage_called_inside_dlopen)
{
	json_t *m = run_fixture("native/nstages", "c=ctor_train", "ctor", "1", built("native/libnctor.so"));
	expect_stage_peak(m, "c", 1, keep, temp);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

/* A target found nowhere costs no look at the stack (the check waits for a dlopen to load one),
 * and one loaded by a dlopen is seen from its first call. */
START_TEST(unresolved_targets_cost_no_stack_checks)
{
	char spec[64] = "MEMSHIM_STAGES=x=no_such_function", log[] = "MEMSHIM_LOG=debug";
	const char *env[] = { spec, log, NULL };
	const char *argv[] = { built("native/nstages"), "loop", "3", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	ck_assert_msg(strstr(r.err, "native stages: 0 quick walks, 0 full looks") != NULL, "%s", r.err);
	snprintf(spec, sizeof spec, "MEMSHIM_STAGES=train=train_epoch");
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(strstr(r.err, " 0 full looks") == NULL, "%s", r.err); /* the control: it does look */
}
END_TEST

START_TEST(library_unloaded_and_loaded_again)
{
	char spec[64] = "MEMSHIM_STAGES=p=plugin_train";
	const char *env[] = { spec, NULL };
	const char *argv[] = { built("native/nstages"), "reload", "2", built("native/libnplugin.so"),
			       built("native/libnstage.so"), NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "p_calls"), 4);
	json_decref(m);
}
END_TEST

START_TEST(pinned_to_the_wrong_object_is_not_found)
{
	json_t *m = run_fixture("native/nstages", "l=libnplugin.so:lib_train", "lib", "2", NULL);
	ck_assert(!has_metric(m, "l_calls"));
	ck_assert_int_eq(count(r.err, "libnplugin.so:lib_train"), 1);
	json_decref(m);
}
END_TEST

START_TEST(four_threads_inside_at_once_are_one_call)
{
	json_t *m = run_fixture("native/nstages", "t=parallel_step", "threads", NULL, NULL);
	expect_stage(m, "t", 1, 4 * keep); /* overlapping callers merge into one call */
	json_decref(m);
}
END_TEST

START_TEST(pthread_exit_closes_the_stage)
{
	json_t *m = run_fixture("native/nstages", "q=thread_quits", "pthread_exit", NULL, NULL);
	ck_assert_int_eq(metric(m, "q_calls"), 1);
	ck_assert_int_eq(stage_int(m, "q", "closed_at_exit"), 0);
	ck_assert_int_ge(metric(m, "q_mem_cpu_alloc_delta"), keep);
	json_decref(m);
}
END_TEST

START_TEST(exit_inside_a_stage_closes_it_at_exit)
{
	json_t *m = run_fixture("native/nstages", "x=exits_inside", "exit", NULL, NULL);
	ck_assert_int_eq(metric(m, "x_calls"), 1);
	ck_assert_int_eq(stage_int(m, "x", "closed_at_exit"), 1);
	ck_assert_int_eq(metric(m, "x_mem_cpu_alloc_delta"), keep);
	json_decref(m);
}
END_TEST

START_TEST(signal_handlers_allocating_anywhere)
{
	for (int round = 0; round < 4; round++) {
		json_t *m = run_fixture(round % 2 ? "native/nstages" : "native/nstages-O2", "busy=busy_stage,h=helper_depth",
					"signals", "3000", NULL);
		expect_stage(m, "busy", 3000 + 300, 0); /* the threads' calls never overlap */
		ck_assert_int_eq(metric(m, "h_calls"), 3000 + 300);
		json_decref(m);
	}
}
END_TEST

START_TEST(signals_then_many_threads)
{
	for (int round = 0; round < 2; round++) {
		json_t *m = run_fixture("native/nstages", "s=stress_stage,h=stress_helper", "stress", NULL, NULL);
		ck_assert_int_eq(metric(m, "s_calls"), 5000);
		ck_assert_int_eq(metric(m, "h_calls"), 5000);
		json_decref(m);
	}
}
END_TEST

START_TEST(stress_signals_threads_longjmp_fork)
{
	const char *env[] = { "MEMSHIM_STAGES=s=stage_fn,j=jumpy,h=helper", NULL };
	const char *argv[] = { built("native/nstress"), "15", NULL };
	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "round %d: status %d", round, r.status);
		ck_assert_msg(strstr(r.out, "child=0") != NULL, "%s", r.out);
		json_t *m = load_metrics(&r, "m.json");
		ck_assert_ptr_nonnull(m);
		ck_assert_int_eq(metric(m, "s_calls"), 5000);
		ck_assert_int_eq(metric(m, "h_calls"), 5000);
		ck_assert_int_eq(metric(m, "j_calls"), 3000);
		json_decref(m);
	}
}
END_TEST

START_TEST(backtrace_still_reaches_main)
{
	json_t *m = run_fixture("native/nstages", "b=with_backtrace", "backtrace", NULL, NULL);
	ck_assert_msg(strstr(r.out, "main=1") != NULL, "%s", r.out);
	ck_assert_int_eq(metric(m, "b_calls"), 1);
	json_decref(m);
}
END_TEST

/* Absolute path of PROG in PATH, or NULL (with a message: the test using it is skipped). */
static const char *tool_or_skip(const char *prog)
{
	const char *found = in_path(prog);
	if (!found)
		printf("test_native: %s not installed, skipped\n", prog);
	return found;
}

/* valgrind reads all 4096 trampoline unwind entries without a warning, and an exception thrown
 * through a trampoline is caught under it as it is natively. */
START_TEST(valgrind_reads_the_trampolines_unwind_data)
{
	const char *vg = tool_or_skip("valgrind");
	if (!vg)
		return;
	const char *env[] = { "MEMSHIM_STAGES=train=ns::Trainer::train", NULL };
	const char *argv[] = { vg, "--tool=none", built("native/ncxx"), "3", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %d: %.2000s", r.status, r.err);
	ck_assert_msg(strstr(r.err, "unhandled DW_OP_") == NULL, "%.2000s", r.err);
	ck_assert_msg(strstr(r.out, "caught=1 sum=3") != NULL, "%s", r.out);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "train_calls"), 3);
	json_decref(m);
}
END_TEST

/* gdb's backtrace from inside a stage function crosses the trampoline frame and reaches main. */
START_TEST(gdb_backtrace_through_a_trampoline_reaches_main)
{
	const char *gdb = tool_or_skip("gdb");
	if (!gdb)
		return;
	char preload[PATH_MAX + 32];
	snprintf(preload, sizeof preload, "set environment LD_PRELOAD=%s", built("libmemshim.so"));
	const char *env[] = { "LD_PRELOAD", "MEMSHIM_STAGES=b=with_backtrace", NULL }; /* gdb itself runs bare */
	const char *argv[] = { gdb, "-q", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-ex",
			       "set startup-with-shell off", "-ex", preload, "-ex", "break backtrace", "-ex", "run",
			       "-ex", "bt", "-ex", "continue", "--args", built("native/nstages"), "backtrace", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	if (strstr(r.err, "ptrace:")) {
		printf("test_native: gdb cannot trace here (%.200s), skipped\n", strstr(r.err, "ptrace:"));
		return;
	}
	ck_assert_msg(strstr(r.out, " in ms_tramp_base ") != NULL, "no trampoline frame: %s\n%s", r.out, r.err);
	ck_assert_msg(strstr(r.out, " in main (") != NULL, "%s\n%s", r.out, r.err);
	ck_assert_msg(strstr(r.out, " in ?? ") == NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "main=1") != NULL, "%s", r.out);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "b_calls"), 1);
	json_decref(m);
}
END_TEST

START_TEST(cxx_exception_through_a_stage_is_caught_as_before)
{
	static const char *const specs[] = { "train=ns::Trainer::train,eval=ns::Trainer::evaluate(int) const",
					     "train=_ZN2ns7Trainer5trainEi,eval=_ZNK2ns7Trainer8evaluateEi" };
	json_t *m = run_fixture("native/ncxx", specs[_i], "3", NULL, NULL);
	ck_assert_msg(strstr(r.out, "caught=1 sum=3") != NULL, "%s", r.out);
	expect_stage_peak(m, "train", 3, keep, temp);
	ck_assert_int_eq(stage_call(m, "train", 0, "cpu_alloc_delta"), keep);
	/* the call that threw: its kept block and the exception object, not the catch block's 8192 */
	int64_t thrown = stage_call(m, "train", 1, "cpu_alloc_delta");
	ck_assert_msg(thrown >= keep && thrown < keep + 8192, "thrown call alloc %lld", (long long)thrown);
	ck_assert_int_eq(stage_call(m, "train", 1, "cpu_peaked_delta"), temp);
	expect_stage_peak(m, "eval", 3, 0, keep);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

/* How each call of STAGE ended (its history's "ended"), joined: "returned unwound returned". */
static const char *ended_calls(json_t *m, const char *stage)
{
	static char text[256];
	size_t i, n = 0;
	json_t *h;
	text[0] = '\0';
	json_array_foreach(json_object_get(stage_of(m, stage), "history"), i, h) {
		const char *e = json_string_value(json_object_get(h, "ended"));
		n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", n ? " " : "", e ? e : "?");
		if (n >= sizeof text)
			break;
	}
	return text;
}

/* A call a C++ exception unwound is "unwound", one a longjmp jumped over "jumped", each
 * counted: what they kept is not the function's own leak. */
START_TEST(how_native_calls_ended)
{
	json_t *m = run_fixture("native/ncxx", "train=ns::Trainer::train", "3", NULL, NULL);
	ck_assert_str_eq(ended_calls(m, "train"), "returned unwound returned");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(stage_of(m, "train"), "calls_ended"), "unwound")), 1);
	json_decref(m);
	m = run_fixture("native/nstages", "j=jumper", "longjmp", "2", NULL);
	ck_assert_str_eq(ended_calls(m, "j"), "jumped jumped");
	ck_assert_str_eq(json_string_value(json_object_get(stage_of(m, "j"), "ended")), "jumped");
	json_decref(m);
}
END_TEST

/* One template instance named with its arguments: that instance only. */
START_TEST(a_template_instance_by_its_arguments)
{
	json_t *m = run_fixture("native/ncxx", "d=accumulate<double>,i=accumulate<int>", "2", "templates", NULL);
	ck_assert_int_eq(metric(m, "d_calls"), 1);
	ck_assert_int_eq(metric(m, "i_calls"), 1);
	ck_assert_int_ge(metric(m, "d_mem_cpu_peaked_delta"), 2 << 20);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

/* Two stages naming one function: the first in MEMSHIM_STAGES gets its calls, and a warning says so. */
START_TEST(two_stages_on_one_function_warn)
{
	json_t *m = run_fixture("native/ncxx", "x=_Z10accumulateIiET_i,y=accumulate", "2", "templates", NULL);
	ck_assert_int_eq(metric(m, "x_calls"), 1);
	ck_assert_int_eq(metric(m, "y_calls"), 1); /* the double instance */
	ck_assert_int_eq(count(r.err, "both name _Z10accumulateIiET_i: its calls count for x only"), 1);
	ck_assert_int_eq(memshim_lines(r.err), 1);
	json_decref(m);
}
END_TEST

START_TEST(threads_throwing_through_a_stage_at_once)
{
	json_t *m = run_fixture("native/ncxx", "train=ns::Trainer::train", "400", "threads", NULL);
	ck_assert_msg(strstr(r.out, "caught=800") != NULL, "%s", r.out);
	ck_assert_int_ge(metric(m, "train_calls"), 1);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

START_TEST(missing_name_warns_once_naming_the_stripped_binary)
{
	json_t *m = run_fixture("native/nstages-stripped", "train=train_epoch,gone=no_such_function", "loop", "2", NULL);
	ck_assert_int_eq(count(r.err, "no_such_function"), 1);
	ck_assert_int_eq(count(r.err, "train_epoch"), 1); /* a static function of a stripped binary */
	ck_assert_msg(strstr(r.err, "nstages-stripped") != NULL, "%s", r.err);
	ck_assert(!has_metric(m, "train_calls"));
	json_decref(m);
}
END_TEST

/* The shim's own static functions (run, call, push) are not the program's: found nowhere. */
START_TEST(names_of_the_shims_own_functions_are_not_found)
{
	json_t *m = run_fixture("native/nstages", "x=run,y=call,z=push,train=train_epoch", "loop", "2", NULL);
	ck_assert_int_eq(count(r.err, "'run' was not found"), 1);
	ck_assert_int_eq(count(r.err, "'call' was not found"), 1);
	ck_assert_int_eq(count(r.err, "'push' was not found"), 1);
	ck_assert(!has_metric(m, "x_calls") && !has_metric(m, "y_calls") && !has_metric(m, "z_calls"));
	ck_assert_int_eq(metric(m, "train_calls"), 2);
	json_decref(m);
}
END_TEST

/* A plain name of the C library's (opendir, which the fds mode calls) binds nothing: in practice it
 * names a function of the program's own or a Python function; pinned, it is the C library's. */
START_TEST(a_c_library_function_needs_its_library_named)
{
	json_t *m = run_fixture("native/nstages", "d=opendir,l=list_fds", "fds", "1", NULL);
	ck_assert_int_eq(count(r.err, "native stage d: 'opendir' is a function of libc.so.6, which a plain name "
				      "does not bind"),
			 1);
	ck_assert_int_eq(count(r.err, "name it libc.so.6:opendir"), 1);
	ck_assert(!has_metric(m, "d_calls"));
	ck_assert_int_eq(metric(m, "l_calls"), 1);
	json_decref(m);
	m = run_fixture("native/nstages", "d=libc.so.6:opendir,l=list_fds", "fds", "1", NULL);
	ck_assert_msg(!strstr(r.err, "native stage"), "%s", r.err);
	ck_assert_int_eq(metric(m, "d_calls"), 1);
	json_decref(m);
	/* the program's own static function of such a name is the one it names */
	m = run_fixture("native/nstages", "h=gethostid", "own_libc_name", "1", NULL);
	ck_assert_msg(!strstr(r.err, "native stage"), "%s", r.err);
	ck_assert_int_eq(metric(m, "h_calls"), 1);
	json_decref(m);
}
END_TEST

/* The fds the program sees inside a stage (its own listing of /proc/self/fd) are those it sees
 * bare: libunwind's pipe for memory validation is moved to high numbers. */
START_TEST(the_program_sees_its_own_fds)
{
	json_t *m = run_fixture("native/nstages", "l=list_fds", "fds", "1", NULL);
	const char *fds = strstr(r.out, "fds:");
	ck_assert_ptr_nonnull(fds);
	char inside[256];
	snprintf(inside, sizeof inside, "%.*s", (int)strcspn(fds, "\n"), fds);
	ck_assert_int_eq(metric(m, "l_calls"), 1);
	json_decref(m);
	struct run bare;
	const char *unset[] = { "LD_PRELOAD", NULL };
	const char *argv[] = { built("native/nstages"), "fds", "1", NULL };
	ck_assert_int_eq(run_under_shim(&bare, argv, unset), 0);
	fds = strstr(bare.out, "fds:");
	ck_assert_ptr_nonnull(fds);
	ck_assert_msg(!strncmp(fds, inside, strlen(inside)) && fds[strlen(inside)] == '\n', "under the shim %s, bare %s",
		      inside, fds);
}
END_TEST

/* Rust functions named as nm -C shows them: the path with its crate, without the build's hash
 * (legacy mangling) or the crate's (v0). */
START_TEST(rust_functions_are_named_by_their_path)
{
	static const char *const builds_rs[] = { "native/nrust", "native/nrust-v0" };
	if (access(built(builds_rs[_i]), X_OK) != 0) {
		fprintf(stderr, "skipped: no rustc (%s not built)\n", builds_rs[_i]);
		return;
	}
	json_t *m = run_fixture(builds_rs[_i], "s=nrust::engine::Model::step", "3", NULL, NULL);
	ck_assert_int_eq(metric(m, "s_calls"), 3);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

START_TEST(python_names_are_left_alone)
{
	json_t *m = run_fixture("native/nstages", "train=train_epoch,py=Trainer.train,mod=pkg.mod:Class.run", "loop",
				"2", NULL);
	ck_assert_str_eq(r.err, "");
	ck_assert_int_eq(metric(m, "train_calls"), 2);
	json_decref(m);
}
END_TEST

START_TEST(unset_stages_do_nothing_native)
{
	const char *env[] = { "MEMSHIM_STAGES", NULL };
	const char *argv[] = { built("native/nstages"), "loop", "2", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	ck_assert_str_eq(r.err, "");
}
END_TEST

/* A target that ends in a tail call has no frame while its callee runs: a stage that never opened
 * for that reason is named in one warning with it; its callee, named instead, is a stage as usual. */
START_TEST(a_tail_calling_target_is_named_in_one_warning)
{
	const char *env[] = { _i ? "MEMSHIM_STAGES=f=fill" : "MEMSHIM_STAGES=m=make_buffer", NULL };
	json_t *m = exited_with_file(&r, run_built(&r, "native/ntail", NULL, env), 0, "ntail");
	if (_i) {
		ck_assert_int_eq(memshim_lines(r.err), 0);
		ck_assert_int_eq(metric(m, "f_calls"), 1);
		assert_between(metric(m, "f_mem_cpu_alloc_delta"), (int64_t)48 << 20, ((int64_t)48 << 20) + 8192, "fill");
	} else {
		ck_assert_int_eq(memshim_lines(r.err), 1);
		ck_assert_msg(strstr(r.err, "'make_buffer' was never seen: it ends in a tail call") &&
				      strstr(r.err, "name the callee"),
			      "%s", r.err);
	}
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("native");
	TCase *tc = tcase_create("native");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, back_to_back_calls_are_exact, 0, sizeof builds / sizeof *builds);
	tcase_add_loop_test(tc, frames_between_the_stage_and_the_known_ones, 0, sizeof builds / sizeof *builds);
	tcase_add_test(tc, only_calls_that_allocate_count);
	tcase_add_test(tc, recursion_is_one_call);
	tcase_add_test(tc, longjmp_out_of_a_stage_closes_it);
	tcase_add_test(tc, nested_native_stages);
	tcase_add_loop_test(tc, stage_called_from_a_busy_loop, 0, sizeof builds / sizeof *builds);
	tcase_add_loop_test(tc, same_place_same_depth_in_and_out_of_the_stage, 0, sizeof builds / sizeof *builds);
	tcase_add_loop_test(tc, function_in_a_library_linked_at_start, 0, 2);
	tcase_add_loop_test(tc, function_in_a_library_loaded_later, 0, 2);
	tcase_add_loop_test(tc, dlopen_keeps_its_callers_search_path, 0, 3);
	tcase_add_test(tc, unresolved_targets_cost_no_stack_checks);
	tcase_add_test(tc, stage_called_inside_dlopen);
	tcase_add_test(tc, library_unloaded_and_loaded_again);
	tcase_add_test(tc, pinned_to_the_wrong_object_is_not_found);
	tcase_add_test(tc, four_threads_inside_at_once_are_one_call);
	tcase_add_test(tc, pthread_exit_closes_the_stage);
	tcase_add_test(tc, exit_inside_a_stage_closes_it_at_exit);
	tcase_add_test(tc, signal_handlers_allocating_anywhere);
	tcase_add_test(tc, signals_then_many_threads);
	tcase_add_test(tc, stress_signals_threads_longjmp_fork);
	tcase_add_test(tc, backtrace_still_reaches_main);
	tcase_add_loop_test(tc, cxx_exception_through_a_stage_is_caught_as_before, 0, 2);
	tcase_add_test(tc, how_native_calls_ended);
	tcase_add_test(tc, a_template_instance_by_its_arguments);
	tcase_add_test(tc, two_stages_on_one_function_warn);
	tcase_add_test(tc, threads_throwing_through_a_stage_at_once);
	tcase_add_loop_test(tc, a_tail_calling_target_is_named_in_one_warning, 0, 2);
	tcase_add_test(tc, valgrind_reads_the_trampolines_unwind_data);
	tcase_add_test(tc, gdb_backtrace_through_a_trampoline_reaches_main);
	tcase_add_test(tc, missing_name_warns_once_naming_the_stripped_binary);
	tcase_add_test(tc, names_of_the_shims_own_functions_are_not_found);
	tcase_add_test(tc, a_c_library_function_needs_its_library_named);
	tcase_add_test(tc, the_program_sees_its_own_fds);
	tcase_add_loop_test(tc, rust_functions_are_named_by_their_path, 0, 2);
	tcase_add_test(tc, python_names_are_left_alone);
	tcase_add_test(tc, unset_stages_do_nothing_native);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
