/* Libraries loaded as interpreters load extensions (RTLD_LOCAL, RTLD_DEEPBIND, a dlmopen namespace,
 * and after a tool loaded late): their libstdc++ and libgcc_s are then in a local scope only, where
 * the exported unwinder wrappers must still find the functions the library would have bound
 * (intercept/scope.c).  Each program's output and exit status are compared with a run without the
 * library, then native stages left by a C++ exception, a Rust panic and a longjmp inside such a
 * library are checked call by call. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "harness.h"
#include "suite.h"

#define MIB (1 << 20)
#define CXX_CALLS "priv_throw_catch=42\npriv_rethrow=43\npriv_exception_ptr=44\npriv_epochs=3\npriv_longjmp=45\npriv_libc=7\n"

static const char *const modes[] = { "local", "deepbind", "global", "newns", "late" };
/* The shim's settings each comparison runs under: none, disabled, and stages on the library's
 * functions (bound through the GOT, then seen from the stack only). */
static const char *const *const configs[] = {
	(const char *const[]){ NULL },
	(const char *const[]){ "MEMSHIM_DISABLE=1", NULL },
	(const char *const[]){ "MEMSHIM_STAGES=e=priv_epoch,j=priv_jumper,r=privrs::engine::epoch", NULL },
	(const char *const[]){ "MEMSHIM_STAGES=e=priv_epoch,j=priv_jumper,r=privrs::engine::epoch",
			       "MEMSHIM_NATIVE_PLT=0", NULL },
	(const char *const[]){ "MEMSHIM_STAGES=e=priv_epoch", "MEMSHIM_SITES=exact:e", NULL },
};

static int have(const char *relative)
{
	struct stat st;
	if (stat(built(relative), &st) == 0)
		return 1;
	printf("test_private: %s not built (no rustc), skipped\n", relative);
	return 0;
}

/* ENV plus NPRIVATE_LATE (the library itself, for "late") and, for the bare run, no preload. */
static const char *const *with(const char *const *env, int bare, const char **room, size_t n)
{
	static char late[512];
	size_t k = 0;
	snprintf(late, sizeof late, "NPRIVATE_LATE=%s", built("libmemshim.so"));
	room[k++] = late;
	if (bare)
		room[k++] = "LD_PRELOAD";
	for (; env && *env && k + 1 < n; env++)
		room[k++] = *env;
	room[k] = NULL;
	return room;
}

/* Runs ARGV bare and under the library with ENV: same output, same exit status, EXPECT printed. */
static void same_as_bare(const char *const *argv, const char *const *env, const char *expect)
{
	static struct run bare, shim;
	const char *room[16];
	harness_timeout = 60;
	ck_assert_int_eq(run_under_shim(&bare, argv, with(env, 1, room, 16)), 0);
	ck_assert_int_eq(run_under_shim(&shim, argv, with(env, 0, room, 16)), 0);
	ck_assert_msg(WIFEXITED(bare.status) && WEXITSTATUS(bare.status) == 0, "%s %s bare: status %d: %s", argv[0],
		      argv[2], bare.status, bare.err);
	ck_assert_str_eq(bare.out, expect);
	ck_assert_msg(shim.status == bare.status, "%s %s %s: status %d under the library, %d bare: %s", argv[0],
		      argv[1], argv[2], shim.status, bare.status, shim.err);
	ck_assert_msg(strcmp(shim.out, bare.out) == 0, "%s %s (%s): output differs:\n%s\nbare:\n%s", argv[1], argv[2],
		      env[0] ? env[0] : "defaults", shim.out, bare.out);
	ck_assert_msg(memshim_lines(shim.err) == 0 || strstr(shim.err, "not found") || strstr(shim.err, "matched no"),
		      "the library spoke: %s", shim.err); /* only of targets the program does not have */
}

START_TEST(cxx_in_a_private_library_behaves_as_without_the_library)
{
	for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
		const char *argv[] = { built("native/nprivate"), built("native/libprivxx.so"), modes[m], "priv_throw_catch",
				       "priv_rethrow", "priv_exception_ptr", "priv_epochs", "priv_longjmp", "priv_libc",
				       NULL };
		same_as_bare(argv, configs[_i], CXX_CALLS);
	}
}
END_TEST

START_TEST(rust_panics_in_a_private_library_behave_as_without_the_library)
{
	if (!have("native/libprivrs.so"))
		return;
	for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
		const char *argv[] = { built("native/nprivate"), built("native/libprivrs.so"), modes[m], "priv_panics", NULL };
		same_as_bare(argv, configs[_i], "priv_panics=3\n");
	}
}
END_TEST

/* The issue's own five lines: a C++ library caught its exception through ctypes. */
START_TEST(python_ctypes_library_catches_its_exception)
{
	char code[1024];
	snprintf(code, sizeof code, "import ctypes; print(ctypes.CDLL(%s%s%s).priv_throw_catch())", "'",
		 built("native/libprivxx.so"), "'");
	const char *argv[] = { "/usr/bin/python3", "-c", code, NULL };
	same_as_bare(argv, configs[_i], "42\n");
}
END_TEST

/* Six calls of a stage function in a private library, every even one left by an exception or a
 * panic: each call keeps 1 MiB and frees 4 MiB (while unwinding, for the ones that threw). */
static void six_calls(const char *lib, const char *fn, const char *stage, const char *target, const char *plt)
{
	static struct run r;
	char spec[128], plt_env[64];
	snprintf(spec, sizeof spec, "MEMSHIM_STAGES=%s=%s", stage, target);
	snprintf(plt_env, sizeof plt_env, "MEMSHIM_NATIVE_PLT=%s", plt);
	const char *env[] = { spec, plt_env, NULL };
	const char *args[] = { built(lib), "local", fn, NULL };
	json_t *m = exited_with_file(&r, run_built(&r, "native/nprivate", args, env), 0, fn);
	char calls[64];
	snprintf(calls, sizeof calls, "%s_calls", stage);
	ck_assert_int_eq(metric(m, calls), 6);
	for (int i = 0; i < 6; i++) {
		assert_between(stage_call(m, stage, i, "cpu_alloc_delta"), MIB, MIB + 8192, "a call's kept 1 MiB");
		assert_between(stage_call(m, stage, i, "cpu_peaked_delta"), 4 * MIB, 4 * MIB + 8192, "a call's 4 MiB");
	}
	ck_assert_msg(json_is_false(json_object_get(stage_of(m, stage), "closed_at_exit")), "still open at exit");
	/* native stages read the resident set at their boundaries, as Python stages do */
	json_t *rss = json_object_get(stage_of(m, stage), "rss");
	ck_assert_msg(rss && member(stage_of(m, stage), "rss", "begin") > 0 && member(stage_of(m, stage), "rss", "end") > 0,
		      "native stage %s has no rss read", stage);
	json_decref(m);
}

START_TEST(stage_left_by_an_exception_in_a_private_library)
{
	six_calls("native/libprivxx.so", "priv_epochs", "e", "priv_epoch", _i ? "0" : "1");
}
END_TEST

START_TEST(stage_left_by_a_rust_panic_in_a_private_library)
{
	if (have("native/libprivrs.so"))
		six_calls("native/libprivrs.so", "priv_panics", "e", "privrs::engine::epoch", _i ? "0" : "1");
}
END_TEST

START_TEST(stage_left_by_longjmp_in_a_private_library)
{
	static struct run r;
	const char *env[] = { "MEMSHIM_STAGES=j=priv_jumper", _i ? "MEMSHIM_NATIVE_PLT=0" : "MEMSHIM_NATIVE_PLT=1", NULL };
	const char *args[] = { built("native/libprivxx.so"), "local", "priv_longjmp", "priv_epochs", NULL };
	json_t *m = exited_with_file(&r, run_built(&r, "native/nprivate", args, env), 0, "priv_longjmp");
	ck_assert_int_eq(metric(m, "j_calls"), 1);
	assert_between(stage_call(m, "j", 0, "cpu_alloc_delta"), MIB, MIB + 8192, "the jumper's kept 1 MiB");
	ck_assert_int_eq(stage_call(m, "j", 0, "cpu_peaked_delta"), 0); /* the epochs' 4 MiB came after it */
	ck_assert_msg(json_is_false(json_object_get(stage_of(m, "j"), "closed_at_exit")), "still open at exit");
	json_decref(m);
}
END_TEST

static Suite *private_suite(void)
{
	Suite *s = suite_create("private libraries");
	TCase *tc = tcase_create("as without the library");
	tcase_set_timeout(tc, 300);
	int n = (int)(sizeof configs / sizeof *configs);
	tcase_add_loop_test(tc, cxx_in_a_private_library_behaves_as_without_the_library, 0, n);
	tcase_add_loop_test(tc, rust_panics_in_a_private_library_behave_as_without_the_library, 0, n);
	tcase_add_loop_test(tc, python_ctypes_library_catches_its_exception, 0, n);
	suite_add_tcase(s, tc);
	TCase *st = tcase_create("stages left without returning");
	tcase_set_timeout(st, 120);
	tcase_add_loop_test(st, stage_left_by_an_exception_in_a_private_library, 0, 2);
	tcase_add_loop_test(st, stage_left_by_a_rust_panic_in_a_private_library, 0, 2);
	tcase_add_loop_test(st, stage_left_by_longjmp_in_a_private_library, 0, 2);
	suite_add_tcase(s, st);
	return s;
}

int main(void)
{
	return run_suite(private_suite());
}
