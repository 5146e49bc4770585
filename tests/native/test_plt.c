/* Native stages bound to the call through the GOT: every call counted, allocating or
 * not, frees-only calls negative, exact through -z now, dlopen, dlsym, the library's own PLT,
 * longjmp, C++ exceptions and fork, C++ methods named demangled; which mechanism bound each target
 * is in the file. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"

static struct run r;
static int64_t keep, temp, park;
static const char *extra_env; /* one more NAME=VALUE for run_plt, or NULL */

static json_t *run_plt(const char *prog, const char *stages, const char *a1, const char *a2, const char *a3)
{
	char spec[256];
	snprintf(spec, sizeof spec, "MEMSHIM_STAGES=%s", stages);
	const char *env[] = { spec, extra_env, NULL };
	const char *argv[] = { built(prog), a1, a2, a3, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s exited with %d: %s", prog, r.status, r.err);
	long k = 0, t = 0, p = 0;
	ck_assert_msg(sscanf(r.out, "keep=%ld temp=%ld park=%ld", &k, &t, &p) >= 2, "fixture output: %s", r.out);
	keep = k, temp = t, park = p;
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	return m;
}

static void expect(json_t *m, const char *key, int64_t want)
{
	int64_t got = metric(m, key);
	ck_assert_msg(got == want, "%s = %lld, expected %lld", key, (long long)got, (long long)want);
}

static int64_t call_of(json_t *m, const char *stage, int call, const char *key)
{
	json_t *h = json_array_get(json_object_get(stage_of(m, stage), "history"), (size_t)call);
	ck_assert_ptr_nonnull(h);
	return json_integer_value(json_object_get(h, key));
}

/* The native_targets entry for TARGET says it was bound by BOUND ("plt" or "stack"). */
static void expect_bound(json_t *m, const char *target, const char *bound)
{
	json_t *list = json_object_get(m, "native_targets"), *t;
	size_t i;
	ck_assert_msg(json_is_array(list), "no native_targets in the file");
	json_array_foreach(list, i, t) {
		if (strcmp(json_string_value(json_object_get(t, "target")), target))
			continue;
		ck_assert_str_eq(json_string_value(json_object_get(t, "bound")), bound);
		return;
	}
	ck_abort_msg("%s not in native_targets", target);
}

/* ARGV under the shim with ENV: it exits 0 (printing SAYS, when given); its metrics file. */
static json_t *run_ok(const char *const *argv, const char *const *env, const char *says)
{
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s: %d %s", argv[0], r.status, r.err);
	ck_assert_msg(!says || strstr(r.out, says), "%s: %s", argv[0], r.out);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	return m;
}

static const char *const programs[] = { "native/nplt", "native/nplt-now" };

START_TEST(calls_that_never_allocate_are_counted)
{
	json_t *m = run_plt(programs[_i], "c=plt_compute", "compute", "500", NULL);
	expect(m, "c_calls", 500);
	expect(m, "c_mem_cpu_alloc_delta", 0);
	expect(m, "c_mem_cpu_peaked_delta", 0);
	expect_bound(m, "plt_compute", "plt");
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

START_TEST(a_call_that_only_frees_is_negative)
{
	json_t *m = run_plt(programs[_i], "f=plt_release", "release", "1", NULL);
	expect(m, "f_calls", 1);
	expect(m, "f_mem_cpu_alloc_delta", -park);
	expect(m, "f_mem_cpu_peaked_delta", park);
	json_decref(m);
}
END_TEST

START_TEST(back_to_back_calls_are_exact)
{
	json_t *m = run_plt(programs[_i], "w=plt_work", "work", "5", NULL);
	expect(m, "w_calls", 5);
	double sum = 0;
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(call_of(m, "w", i, "cpu_alloc_delta"), keep);
		ck_assert_int_eq(call_of(m, "w", i, "cpu_peaked_delta"), temp);
		json_t *h = json_array_get(json_object_get(stage_of(m, "w"), "history"), (size_t)i);
		sum += json_number_value(json_object_get(h, "runtime"));
	}
	/* runtime is the last call's; runtime_total all five (the history's runtimes, as written) */
	double total = json_number_value(json_object_get(stage_of(m, "w"), "runtime_total"));
	ck_assert_msg(total > 0 && fabs(total - sum) <= 1e-5, "runtime_total %g, calls' sum %g", total, sum);
	expect_bound(m, "plt_work", "plt");
	json_decref(m);
}
END_TEST

/* plt_work calls plt_compute through the library's own PLT: those calls count beside the
 * program's own. */
START_TEST(calls_inside_the_defining_library_count)
{
	json_t *m = run_plt("native/nplt", "w=plt_work,c=plt_compute", "work", "4", NULL);
	expect(m, "w_calls", 4);
	expect(m, "c_calls", 4);
	json_decref(m);
}
END_TEST

START_TEST(longjmp_out_of_a_bound_call_closes_it)
{
	json_t *m = run_plt(programs[_i], "j=plt_jump", "jump", "4", NULL);
	expect(m, "j_calls", 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(call_of(m, "j", i, "cpu_alloc_delta"), keep);
		ck_assert_int_eq(call_of(m, "j", i, "cpu_peaked_delta"), temp);
	}
	json_decref(m);
}
END_TEST

START_TEST(fork_inside_a_bound_call)
{
	json_t *m = run_plt("native/nplt", "k=plt_fork", "fork", "1", NULL);
	expect(m, "k_calls", 1);
	expect(m, "k_mem_cpu_alloc_delta", keep);
	json_decref(m);
}
END_TEST

START_TEST(cxx_exception_through_a_bound_call)
{
	const char *env[] = { "MEMSHIM_STAGES=t=plt_thrower", NULL };
	const char *argv[] = { built("native/npltxx"), "3", NULL };
	json_t *m = run_ok(argv, env, "caught=3");
	expect(m, "t_calls", 4);
	expect_bound(m, "plt_thrower", "plt");
	json_decref(m);
}
END_TEST

/* Exceptions caught and rethrown (`throw;`: __cxa_rethrow, whose real _Unwind_Resume_or_Rethrow
 * raises the object again through the exported _Unwind_RaiseException), bound to the calls or found
 * on the stack: every later call still counted (one flight per object, ended by its one catch). */
START_TEST(calls_after_a_rethrown_exception)
{
	const char *env[] = { "MEMSHIM_STAGES=t=plt_thrower", _i ? "MEMSHIM_NATIVE_PLT=0" : NULL, NULL };
	const char *argv[] = { built("native/npltxx"), "3", "rethrow", NULL };
	json_t *m = run_ok(argv, env, "caught=3");
	expect(m, "t_calls", 4);
	expect_bound(m, "plt_thrower", _i ? "stack" : "plt");
	json_decref(m);
}
END_TEST

/* A library loaded later calls the target through its own GOT, bound once dlopen returned. */
START_TEST(calls_from_a_library_loaded_later)
{
	json_t *m = run_plt("native/nplt", "w=plt_work", "dlopen", "3", built("native/libnpltdl.so"));
	expect(m, "w_calls", 3);
	json_decref(m);
}
END_TEST

/* A library loaded lazily before the one defining what it calls: read again at the next dlopen
 * (objects bound once are not read again; this one had a slot with nothing to bind yet). */
START_TEST(calls_resolved_by_a_later_library)
{
	const char *env[] = { "MEMSHIM_STAGES=w=late_work", NULL };
	const char *argv[] = { built("native/nplt"), "late", "5", built("native/libnpltlate.so"),
			       built("native/libnpltlatedef.so"), NULL };
	json_t *m = run_ok(argv, env, NULL);
	expect(m, "w_calls", 5);
	expect_bound(m, "late_work", "plt");
	json_decref(m);
}
END_TEST

START_TEST(a_pointer_from_dlsym_enters_the_stage)
{
	json_t *m = run_plt("native/nplt", "c=plt_compute", "dlsym", "7", NULL);
	expect(m, "c_calls", 7);
	json_decref(m);
}
END_TEST

/* LD_BIND_NOW: every slot resolved (and protected) before the shim binds it. */
START_TEST(ld_bind_now)
{
	char spec[] = "MEMSHIM_STAGES=c=plt_compute", now[] = "LD_BIND_NOW=1";
	const char *env[] = { spec, now, NULL };
	const char *argv[] = { built("native/nplt"), "compute", "300", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	expect(m, "c_calls", 300);
	json_decref(m);
}
END_TEST

/* MEMSHIM_NATIVE_PLT=0: the stack only, so a call that never allocates is not seen. */
START_TEST(native_plt_off_leaves_the_stack)
{
	char spec[] = "MEMSHIM_STAGES=w=plt_work,c=plt_compute", off[] = "MEMSHIM_NATIVE_PLT=0";
	const char *env[] = { spec, off, NULL };
	const char *argv[] = { built("native/nplt"), "work", "3", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	expect(m, "w_calls", 3);
	ck_assert(!has_metric(m, "c_calls"));
	expect_bound(m, "plt_work", "stack");
	json_decref(m);
}
END_TEST

/* A C++ library's methods named as users write them: demangled, pinned to the library or
 * not, with a parameter list or not, they bind the mangled imports, every overload included. */
static const char *const engine_targets[] = { "eng::Engine::step", "libnengine.so:eng::Engine::step",
					      "eng::Engine::step(long)" };

START_TEST(demangled_cxx_methods_are_bound_to_their_calls)
{
	char stages[128];
	snprintf(stages, sizeof stages, "s=%s,l=eng::Engine::load", engine_targets[_i]);
	json_t *m = run_plt("native/nengine", stages, "300", NULL, NULL);
	expect(m, "s_calls", 301);
	expect(m, "s_mem_cpu_alloc_delta", 0);
	expect(m, "l_calls", 1);
	expect(m, "l_mem_cpu_alloc_delta", keep);
	expect_bound(m, engine_targets[_i], "plt");
	expect_bound(m, "eng::Engine::load", "plt");
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

/* A C++ method bound through the GOT is still found from the stack: a call through its vtable
 * never passes the GOT (one call by name through the PLT, five through the vtable: six, each once). */
START_TEST(a_bound_cxx_method_keeps_its_virtual_calls)
{
	static const char *const forward[] = { "f=eng::Model::forward", "f=_ZN3eng5Model7forwardEi" };
	for (int k = 0; k < 2; k++) {
		json_t *m = run_plt("native/nengine", forward[k], "5", "virtual", NULL);
		expect(m, "f_calls", 6);
		expect_bound(m, forward[k] + 2, "plt");
		json_decref(m);
	}
}
END_TEST

/* A function of the program itself has no GOT slot: the stack finds it, and the file says so. */
START_TEST(a_static_function_is_bound_by_the_stack)
{
	char spec[] = "MEMSHIM_STAGES=t=train_epoch";
	const char *env[] = { spec, NULL };
	const char *argv[] = { built("native/nstages"), "loop", "2", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	expect(m, "t_calls", 2);
	expect_bound(m, "train_epoch", "stack");
	json_decref(m);
}
END_TEST

/* A stage called often: past MS_QUIET_AFTER calls, most are quiet (no reading, no report at their
 * boundaries) and each is still exact.  The history keeps the first MS_HISTORY calls; the file
 * also has the last call's numbers and the largest need of all. */
#define MANY 400
#define MANY_S "400"
#define KEPT_CALLS 128

static void expect_every_call(json_t *m, const char *stage, int calls, int64_t alloc, int64_t peaked)
{
	char key[64];
	snprintf(key, sizeof key, "%s_calls", stage);
	expect(m, key, calls);
	for (int i = 0; i < calls && i < KEPT_CALLS; i++) {
		ck_assert_msg(call_of(m, stage, i, "cpu_alloc_delta") == alloc, "%s call %d: alloc %lld, expected %lld",
			      stage, i, (long long)call_of(m, stage, i, "cpu_alloc_delta"), (long long)alloc);
		ck_assert_msg(call_of(m, stage, i, "cpu_peaked_delta") == peaked, "%s call %d: peaked %lld, expected %lld",
			      stage, i, (long long)call_of(m, stage, i, "cpu_peaked_delta"), (long long)peaked);
	}
	snprintf(key, sizeof key, "%s_mem_cpu_alloc_delta", stage);
	expect(m, key, alloc);
	snprintf(key, sizeof key, "%s_mem_cpu_peaked_delta", stage);
	expect(m, key, peaked);
	json_t *need = json_object_get(stage_of(m, stage), "max_needed");
	ck_assert_int_eq(json_integer_value(json_object_get(need, "cpu")), alloc + peaked);
}

static int64_t ended(json_t *m, const char *stage, const char *how)
{
	return json_integer_value(json_object_get(json_object_get(stage_of(m, stage), "calls_ended"), how));
}

START_TEST(many_back_to_back_calls_are_exact)
{
	json_t *m = run_plt(programs[_i], "w=plt_work", "work", MANY_S, NULL);
	expect_every_call(m, "w", MANY, keep, temp);
	ck_assert_int_eq(ended(m, "w", "returned"), MANY);
	json_decref(m);
}
END_TEST

/* plt_compute inside plt_work, both stages: every call of each. */
START_TEST(many_nested_calls_are_exact)
{
	json_t *m = run_plt("native/nplt", "w=plt_work,c=plt_compute", "work", MANY_S, NULL);
	expect_every_call(m, "w", MANY, keep, temp);
	expect_every_call(m, "c", MANY, 0, 0);
	json_decref(m);
}
END_TEST

/* plt_recurse(3) calls itself three times through the PLT: one call of the stage each time. */
START_TEST(many_recursive_calls_are_one_call_each)
{
	json_t *m = run_plt("native/nplt", "r=plt_recurse", "recurse", MANY_S, NULL);
	expect_every_call(m, "r", MANY, 4 * keep, temp);
	json_decref(m);
}
END_TEST

START_TEST(many_longjmps_out_of_bound_calls)
{
	json_t *m = run_plt("native/nplt", "j=plt_jump", "jump", MANY_S, NULL);
	expect_every_call(m, "j", MANY, keep, temp);
	ck_assert_int_eq(ended(m, "j", "jumped"), MANY);
	json_decref(m);
}
END_TEST

START_TEST(many_cxx_exceptions_through_bound_calls)
{
	char spec[] = "MEMSHIM_STAGES=t=plt_thrower";
	const char *env[] = { spec, NULL };
	const char *argv[] = { built("native/npltxx"), MANY_S, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "npltxx: %d %s", r.status, r.err);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	expect(m, "t_calls", MANY + 1);
	ck_assert_int_eq(ended(m, "t", "unwound"), MANY);
	ck_assert_int_eq(ended(m, "t", "returned"), 1);
	long k = 0, t = 0;
	ck_assert(sscanf(r.out, "keep=%ld temp=%ld", &k, &t) == 2);
	expect(m, "t_mem_cpu_alloc_delta", k); /* the last call returned */
	expect(m, "t_mem_cpu_peaked_delta", t);
	json_decref(m);
}
END_TEST

START_TEST(many_forks_inside_bound_calls)
{
	json_t *m = run_plt("native/nplt", "k=plt_fork", "forks", "80", NULL);
	expect_every_call(m, "k", 80, keep, 0);
	json_decref(m);
}
END_TEST

/* Four threads in one stage: overlapping calls merge, and each call holds whole calls of plt_work
 * (nothing else allocates while they run). */
START_TEST(threads_in_one_stage)
{
	json_t *m = run_plt("native/nplt", "w=plt_work", "threads", "200", NULL);
	int64_t calls = metric(m, "w_calls");
	ck_assert_int_ge(calls, 1);
	ck_assert_int_le(calls, 800);
	ck_assert_int_eq(ended(m, "w", "returned"), calls);
	for (int i = 0; i < calls && i < KEPT_CALLS; i++) {
		int64_t alloc = call_of(m, "w", i, "cpu_alloc_delta");
		ck_assert_msg(alloc >= keep && alloc % keep == 0, "call %d: alloc %lld", i, (long long)alloc);
		ck_assert_int_ge(call_of(m, "w", i, "cpu_peaked_delta"), 0);
	}
	ck_assert(!json_is_true(json_object_get(stage_of(m, "w"), "closed_at_exit")));
	json_decref(m);
}
END_TEST

/* More threads than trampolines, one after another, each calling the stage once: every thread
 * gives back what it kept for its next call at its exit. */
START_TEST(threads_one_after_another_give_their_trampolines_back)
{
	json_t *m = run_plt("native/nplt", "w=plt_work", "serial", "5000", NULL);
	expect(m, "w_calls", 5000);
	ck_assert_int_eq(call_of(m, "w", 127, "cpu_alloc_delta"), keep);
	expect(m, "w_mem_cpu_alloc_delta", keep);
	json_decref(m);
}
END_TEST

/* Found from the stack: the check is skipped while the stage is open on the thread, and runs again
 * once its call returned, so each call is found. */
START_TEST(many_calls_found_from_the_stack)
{
	extra_env = "MEMSHIM_NATIVE_PLT=0";
	json_t *m = run_plt("native/nplt", "w=plt_work", "work", MANY_S, NULL);
	extra_env = NULL;
	expect_every_call(m, "w", MANY, keep, temp);
	expect_bound(m, "plt_work", "stack");
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("native plt");
	TCase *tc = tcase_create("plt");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, calls_that_never_allocate_are_counted, 0, 2);
	tcase_add_loop_test(tc, a_call_that_only_frees_is_negative, 0, 2);
	tcase_add_loop_test(tc, back_to_back_calls_are_exact, 0, 2);
	tcase_add_test(tc, calls_inside_the_defining_library_count);
	tcase_add_loop_test(tc, longjmp_out_of_a_bound_call_closes_it, 0, 2);
	tcase_add_test(tc, fork_inside_a_bound_call);
	tcase_add_test(tc, cxx_exception_through_a_bound_call);
	tcase_add_loop_test(tc, demangled_cxx_methods_are_bound_to_their_calls, 0, 3);
	tcase_add_test(tc, a_bound_cxx_method_keeps_its_virtual_calls);
	tcase_add_loop_test(tc, calls_after_a_rethrown_exception, 0, 2);
	tcase_add_test(tc, calls_from_a_library_loaded_later);
	tcase_add_test(tc, calls_resolved_by_a_later_library);
	tcase_add_test(tc, a_pointer_from_dlsym_enters_the_stage);
	tcase_add_test(tc, a_static_function_is_bound_by_the_stack);
	tcase_add_test(tc, ld_bind_now);
	tcase_add_test(tc, native_plt_off_leaves_the_stack);
	suite_add_tcase(s, tc);
	TCase *many = tcase_create("many calls");
	tcase_set_timeout(many, 60);
	tcase_add_loop_test(many, many_back_to_back_calls_are_exact, 0, 2);
	tcase_add_test(many, many_nested_calls_are_exact);
	tcase_add_test(many, many_recursive_calls_are_one_call_each);
	tcase_add_test(many, many_longjmps_out_of_bound_calls);
	tcase_add_test(many, many_cxx_exceptions_through_bound_calls);
	tcase_add_test(many, many_forks_inside_bound_calls);
	tcase_add_test(many, threads_in_one_stage);
	tcase_add_test(many, threads_one_after_another_give_their_trampolines_back);
	tcase_add_test(many, many_calls_found_from_the_stack);
	suite_add_tcase(s, many);
	return run_suite(s);
}
