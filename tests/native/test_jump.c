/* Frames left without returning: intercept/jump.c's longjmp wrappers tell native stages through
 * ms_before_jump (native/jmp.c sets it), so a stage jumped out of closes at the jump, not at the
 * next allocation's look at the stack (and not at exit when none comes). */
#include <check.h>
#include <stdio.h>
#include <sys/wait.h>
#include "harness.h"
#include "suite.h"

START_TEST(longjmp_closes_the_stage_without_a_later_allocation)
{
	static struct run r; /* 128 KiB of output buffers */
	const char *env[] = { "MEMSHIM_STAGES=j=jumper", NULL };
	const char *argv[] = { built("native/nstages"), "longjmp_last", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "nstages exited with %d: %s", r.status, r.err);
	long keep = 0, temp = 0;
	ck_assert_msg(sscanf(r.out, "keep=%ld temp=%ld", &keep, &temp) == 2, "fixture output: %s", r.out);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "j_calls"), 1);
	ck_assert_int_eq(metric(m, "j_mem_cpu_alloc_delta"), keep);
	ck_assert_int_eq(metric(m, "j_mem_cpu_peaked_delta"), temp);
	json_t *closed = json_object_get(stage_of(m, "j"), "closed_at_exit");
	ck_assert_msg(json_is_false(closed), "the stage jumped out of was still open at exit");
	json_decref(m);
}
END_TEST

static Suite *jump_suite(void)
{
	Suite *s = suite_create("native jumps");
	TCase *tc = tcase_create("longjmp");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, longjmp_closes_the_stage_without_a_later_allocation);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(jump_suite());
}
