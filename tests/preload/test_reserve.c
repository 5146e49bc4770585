/* Reservations are counted by the pages the program touched, not by what it mapped: an arena of
 * 1 GiB of which 8 MiB are used reads 8 MiB (issue 30), its highs are never lost when pages go
 * back (madvise, munmap), and the kernel's own RSS figures sit beside the counts. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"

#define MiB ((int64_t)1 << 20)
#define SLACK (MiB / 2) /* the C library's own start-up allocations */

static struct run r;

static json_t *run_mode(const char *mode)
{
	const char *argv[] = { built("preload/reserve_fixture"), mode, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x: %s %s", r.status, r.out, r.err);
	ck_assert_str_eq(r.err, "");
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	return m;
}

static void assert_near(int64_t got, int64_t want, const char *what)
{
	ck_assert_msg(got >= want - SLACK && got <= want + SLACK, "%s: %lld, expected %lld", what, (long long)got,
		      (long long)want);
}

static int64_t reservations(json_t *m, const char *stage, const char *key)
{
	json_t *s = stage_of(m, stage);
	ck_assert_ptr_nonnull(s);
	json_t *v = json_object_get(json_object_get(json_object_get(s, "cpu"), "reservations"), key);
	ck_assert_ptr_nonnull(v);
	return json_integer_value(v);
}

START_TEST(an_arena_counts_what_was_touched)
{
	json_t *m = run_mode("arena");
	assert_near(metric(m, "train_mem_cpu_alloc_delta"), 8 * MiB, "train alloc");
	assert_near(metric(m, "process_mem_cpu_peak"), 8 * MiB, "process peak");
	assert_near(metric(m, "process_mem_cpu_reservations_peak"), 8 * MiB, "reservations peak");
	ck_assert_int_eq(reservations(m, "train", "alloc_delta"), 8 * MiB);
	ck_assert_int_lt(metric(m, "process_mem_cpu_mmap_peak"), MiB);
	/* the kernel's view beside it: everything counted is resident */
	ck_assert_int_ge(metric(m, "process_mem_rss_peak"), metric(m, "process_mem_cpu_peak"));
	json_t *rss = json_object_get(stage_of(m, "train"), "rss");
	ck_assert_int_ge(json_integer_value(json_object_get(rss, "end")) - json_integer_value(json_object_get(rss, "begin")),
			 8 * MiB - SLACK);
	json_decref(m);
}
END_TEST

START_TEST(pages_given_back_with_madvise_keep_their_high)
{
	json_t *m = run_mode("drop");
	assert_near(metric(m, "drop_mem_cpu_alloc_delta"), 0, "drop alloc");
	assert_near(metric(m, "drop_mem_cpu_peaked_delta"), 16 * MiB, "drop peaked");
	ck_assert_int_eq(reservations(m, "drop", "peaked_delta"), 16 * MiB);
	json_decref(m);
}
END_TEST

START_TEST(an_unmapped_reservation_keeps_its_high)
{
	json_t *m = run_mode("unmap");
	assert_near(metric(m, "unmap_mem_cpu_alloc_delta"), 0, "unmap alloc");
	assert_near(metric(m, "unmap_mem_cpu_peaked_delta"), 16 * MiB, "unmap peaked");
	json_decref(m);
}
END_TEST

START_TEST(a_large_plain_mapping_counts_its_touched_pages)
{
	json_t *m = run_mode("big");
	assert_near(metric(m, "touch_mem_cpu_alloc_delta"), 20 * MiB, "touch alloc");
	ck_assert_int_lt(metric(m, "before_init_mem_cpu") + metric(m, "init_mem_cpu_alloc_delta"), MiB);
	json_decref(m);
}
END_TEST

START_TEST(a_populated_reservation_counts_at_once)
{
	json_t *m = run_mode("populate");
	assert_near(metric(m, "pop_mem_cpu_alloc_delta"), 32 * MiB, "pop alloc");
	json_decref(m);
}
END_TEST

START_TEST(a_moved_reservation_keeps_its_pages)
{
	json_t *m = run_mode("grow");
	assert_near(metric(m, "grow_mem_cpu_alloc_delta"), 16 * MiB, "grow alloc");
	json_decref(m);
}
END_TEST

START_TEST(madvise_errors_are_the_kernels)
{
	const char *argv[] = { built("preload/reserve_fixture"), "badadvice", NULL };
	const char *bare_env[] = { "LD_PRELOAD", NULL };
	struct run bare;
	ck_assert_int_eq(run_under_shim(&bare, argv, bare_env), 0);
	json_decref(run_mode("badadvice"));
	ck_assert_str_eq(r.out, bare.out);
	ck_assert_ptr_nonnull(strstr(r.out, "-1 22 -1 22"));
}
END_TEST

int main(void)
{
	harness_timeout = 60;
	Suite *s = suite_create("reservations");
	TCase *tc = tcase_create("touched pages");
	tcase_add_test(tc, an_arena_counts_what_was_touched);
	tcase_add_test(tc, pages_given_back_with_madvise_keep_their_high);
	tcase_add_test(tc, an_unmapped_reservation_keeps_its_high);
	tcase_add_test(tc, a_large_plain_mapping_counts_its_touched_pages);
	tcase_add_test(tc, a_populated_reservation_counts_at_once);
	tcase_add_test(tc, a_moved_reservation_keeps_its_pages);
	tcase_add_test(tc, madvise_errors_are_the_kernels);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
