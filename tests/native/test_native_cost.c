/* Native stages: what a stack-detected stage costs, counted (never timed).  A target called once
 * per "statement" under a library call tree rebuilt at the same places every time (the sqlite3
 * shell's sqlite3_step): the stack is walked about once per call, not once per
 * allocation, and the trampolines fire about once per call, not once per frame of the tree.
 * The counts come from the debug line the shim prints at exit. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"

#define STATEMENTS 2000

static struct run r;

struct stats {
	unsigned long quick, full, fired, replayed, looked_up;
};

static struct stats run_counted(const char *const argv[], const char *stages)
{
	const char *env[] = { stages, "MEMSHIM_LOG=debug", "MEMSHIM_NATIVE_PLT=0", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "exit %d: %s", r.status, r.err);
	struct stats st = { 0, 0, 0, 0, 0 };
	const char *line = strstr(r.err, "native stages: ");
	ck_assert_msg(line && sscanf(line, "native stages: %lu quick walks, %lu full looks, %lu trampolines fired",
				     &st.quick, &st.full, &st.fired) == 3, "%s", r.err);
	const char *tail = strstr(line, "hot chains taken in, ");
	ck_assert_msg(tail && sscanf(tail, "hot chains taken in, %lu walks replayed, %lu chains looked up", &st.replayed,
				     &st.looked_up) == 2,
		      "%s", r.err);
	return st;
}

static struct stats run_statements(void)
{
	char n[16];
	snprintf(n, sizeof n, "%d", STATEMENTS);
	const char *argv[] = { built("native/nstatement"), n, NULL };
	return run_counted(argv, "MEMSHIM_STAGES=s=stmt_step");
}

START_TEST(a_target_called_per_statement_costs_one_walk_per_call)
{
	struct stats st = run_statements();
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "s_calls"), STATEMENTS);
	ck_assert_int_eq(metric(m, "s_mem_cpu_alloc_delta"), 0); /* it frees what it allocates */
	json_decref(m);
	/* each call is found by one full look (a new target frame); the 16 allocations and frees of
	 * each statement's trees are decided from remembered chains (14000 walks before) */
	ck_assert_msg(st.full <= STATEMENTS + 16, "%lu full looks", st.full);
	ck_assert_msg(st.quick < STATEMENTS / 10, "%lu quick walks", st.quick);
	/* the stage's trampoline: not the marker's on the frames between it and the known ones too
	 * (4041 before), nor one per frame of the trees (78000 before that) */
	ck_assert_msg(st.fired <= STATEMENTS + STATEMENTS / 4, "%lu trampolines fired", st.fired);
	/* the 16 chains of a statement come in the order of the last one's, the same chain 8 times in a
	 * row (release's frees) and two in turn (tree's) included: each is the one expected, found
	 * without a look-up (8053 look-ups when each chain remembered the two that came after it) */
	ck_assert_msg(st.looked_up < STATEMENTS / 10, "%lu chains looked up", st.looked_up);
}
END_TEST

/* A target called in a loop by a function that allocated nothing before (no frame known when the
 * first call is found): the first look takes in the target's callers too, so each later call's
 * walk ends at them and is replayed (every call was a full walk to the end of the stack). */
START_TEST(a_target_called_by_a_fresh_main_is_replayed)
{
	char n[16];
	snprintf(n, sizeof n, "%d", STATEMENTS);
	const char *argv[] = { built("native/nstatement"), n, "direct", NULL };
	struct stats st = run_counted(argv, "MEMSHIM_STAGES=s=stmt_step");
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "s_calls"), STATEMENTS);
	ck_assert_int_eq(metric(m, "s_mem_cpu_alloc_delta"), 0);
	json_decref(m);
	ck_assert_msg(st.full <= 4, "%lu full looks", st.full);
	ck_assert_msg(st.replayed >= STATEMENTS - 10, "%lu walks replayed", st.replayed);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("native cost");
	TCase *tc = tcase_create("counts");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_target_called_per_statement_costs_one_walk_per_call);
	tcase_add_test(tc, a_target_called_by_a_fresh_main_is_replayed);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
