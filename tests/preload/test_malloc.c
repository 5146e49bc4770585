/* Integration: the malloc family under the shim (alloc_fixture).  Every wrapped function counted to
 * the byte, usable sizes exact with glibc's allocator and with another one underneath, threads that
 * churn, blocks allocated before the shim's constructor, malloc after the file was written, and the
 * shim's own tables kept off huge pages. */

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"
#include "alloc_modes.h"

#define MALLOC_DEBUG_LIB "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"

#define MiB (1024 * 1024)
#define BLOCK (MiB + 37)

static struct run r;

START_TEST(every_wrapped_function_is_counted_exactly)
{
	json_t *m = run_alloc_mode_exited(&r, "funcs", NULL, 0);
	ck_assert_str_eq(r.err, ""); /* quiet by default */
	static const char *const one_block[] = { "malloc", "calloc", "realloc", "reallocarray",
		"posix_memalign", "memalign", "valloc", "pvalloc" };
	char key[64];
	int64_t total = 0;
	for (size_t i = 0; i < sizeof one_block / sizeof *one_block; i++) {
		snprintf(key, sizeof key, "%s_mem_cpu_alloc_delta", one_block[i]);
		assert_between(metric(m, key), BLOCK, BLOCK + 8192 + 256, key); /* pvalloc rounds to pages */
		total += metric(m, key);
	}
	int64_t grow = metric(m, "realloc_grow_mem_cpu_alloc_delta");
	assert_between(grow, BLOCK - 128, BLOCK + 4096 + 256, "realloc_grow");
	int64_t aligned = metric(m, "aligned_alloc_mem_cpu_alloc_delta");
	assert_between(aligned, 4 * MiB, 4 * MiB + 8192, "aligned_alloc");
	/* realloc_grow's block began as malloc(64), whose 72 usable bytes were counted before */
	ck_assert_int_eq(metric(m, "free_all_mem_cpu_alloc_delta"), -(total + grow + aligned + 72));
	ck_assert_int_eq(metric(m, "free_all_mem_cpu_peaked_delta"), total + grow + aligned + 72);
	assert_between(metric(m, "free_sized_mem_cpu_alloc_delta"), -BLOCK - 4096 - 256, -BLOCK, "free_sized");
	assert_between(metric(m, "cfree_mem_cpu_alloc_delta"), -BLOCK - 4096 - 256, -BLOCK, "cfree");
	assert_between(metric(m, "realloc_zero_mem_cpu_alloc_delta"), -BLOCK - 4096 - 256, -BLOCK, "realloc(p,0)");
	ck_assert_int_eq(metric(m, "malloc_calls"), 1);
	json_decref(m);
}
END_TEST

/* The fast path reads glibc's chunk header instead of calling malloc_usable_size; it must agree to
 * the byte, for every kind of block (fails when the mmapped-chunk rule is dropped). */
START_TEST(usable_sizes_exact_for_every_kind_of_glibc_block)
{
	json_t *m = run_alloc_mode(&r, "usable", NULL);
	ck_assert_ptr_nonnull(m);
	long long live = -1, peak = -1;
	ck_assert_int_eq(sscanf(r.out, "live=%lld peak=%lld", &live, &peak), 2);
	ck_assert_int_gt(live, 40 << 20);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_alloc_delta"), live);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_peaked_delta"), peak - live);
	json_decref(m);
}
END_TEST

/* Another allocator underneath (glibc's debugging malloc, whose blocks carry a check byte): the
 * general path, still exact to what that allocator's malloc_usable_size says. */
START_TEST(usable_sizes_exact_under_another_allocator)
{
	static char preload[4200];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", built("libmemshim.so"), MALLOC_DEBUG_LIB);
	ck_assert_msg(access(MALLOC_DEBUG_LIB, R_OK) == 0, "glibc's %s is missing", MALLOC_DEBUG_LIB);
	const char *env[] = { preload, "MALLOC_CHECK_=3", NULL };
	json_t *m = run_alloc_mode(&r, "usable", env);
	ck_assert_ptr_nonnull(m);
	long long live = -1, peak = -1;
	ck_assert_int_eq(sscanf(r.out, "live=%lld peak=%lld", &live, &peak), 2);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_alloc_delta"), live);
	ck_assert_int_eq(metric(m, "usable_mem_cpu_peaked_delta"), peak - live);
	json_decref(m);
}
END_TEST

START_TEST(eight_threads_churning_return_to_baseline)
{
	json_t *m = run_alloc_mode_exited(&r, "threads", NULL, 0);
	assert_between(metric(m, "churn_mem_cpu_alloc_delta"), -65536, 65536, "churn alloc_delta");
	ck_assert_int_gt(metric(m, "churn_mem_cpu_peaked_delta"), 1 * MiB);
	ck_assert_int_lt(metric(m, "churn_mem_cpu_peaked_delta"), 8 * 128 * 66000 + MiB);
	json_decref(m);
}
END_TEST

START_TEST(allocations_before_the_constructor_are_counted)
{
	static char preload[1200];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", built("libmemshim.so"), built("preload/early_lib.so"));
	const char *env[] = { preload, NULL };
	json_t *m = run_alloc_mode_exited(&r, "simple", env, 0);
	assert_between(metric(m, "before_init_mem_cpu"), 4 * MiB, 4 * MiB + 64 * 1024, "before_init");
	assert_between(metric(m, "simple_mem_cpu_alloc_delta"), 2 * MiB, 2 * MiB + 8192, "simple");
	json_decref(m);
}
END_TEST

START_TEST(malloc_after_the_file_was_written_works)
{
	json_t *m = run_alloc_mode_exited(&r, "late", NULL, 0);
	ck_assert_str_eq(r.err, "");
	json_decref(m);
}
END_TEST

/* The library's zero-initialised tables (the anonymous mapping after its writable segment) are
 * marked no-huge-page: with THP always on, a first touch there zeroed a 2 MiB page. */
START_TEST(our_tables_never_get_huge_pages)
{
	const char *argv[] = { "/bin/cat", "/proc/self/smaps", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	int after_ours = 0, checked = 0;
	for (char *line = strtok(r.out, "\n"); line && !checked; line = strtok(NULL, "\n")) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) { /* a mapping's first line */
			if (after_ours == 1)
				after_ours = 2; /* the anonymous mapping right after ours */
			else
				after_ours = strstr(line, "libmemshim.so") && !strcmp(perms, "rw-p");
		} else if (after_ours == 2 && !strncmp(line, "VmFlags:", 8)) {
			ck_assert_msg(strstr(line, " nh"), "the tables' mapping: %s", line);
			checked = 1;
		}
	}
	ck_assert_msg(checked, "no mapping after libmemshim.so's writable segment");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("malloc");
	TCase *tc = tcase_create("fixtures");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_wrapped_function_is_counted_exactly);
	tcase_add_test(tc, usable_sizes_exact_for_every_kind_of_glibc_block);
	tcase_add_test(tc, usable_sizes_exact_under_another_allocator);
	tcase_add_test(tc, eight_threads_churning_return_to_baseline);
	tcase_add_test(tc, allocations_before_the_constructor_are_counted);
	tcase_add_test(tc, malloc_after_the_file_was_written_works);
	tcase_add_test(tc, our_tables_never_get_huge_pages);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
