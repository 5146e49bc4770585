/* Integration: anonymous mappings.  Partial unmaps, remaps and MAP_FIXED counted exactly
 * (alloc_fixture), and reservations counted by the pages the program touched, not by what it
 * mapped (reserve_fixture): an arena of 1 GiB of which 8 MiB are used reads 8 MiB, its
 * highs are never lost when pages go back (madvise, munmap), and the kernel's own RSS figures sit
 * beside the counts.  Memory committed in pieces inside a PROT_NONE reservation reads what was
 * touched: node's and the JVM's own figures, where they are installed, as oracles. */

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"
#include "alloc_modes.h"

#define MiB ((int64_t)1 << 20)
#define SLACK (MiB / 2) /* the C library's own start-up allocations */

static struct run r;

/* reserve_fixture MODE under the shim: exited 0, quiet, with its metrics file. */
static json_t *run_reserve(const char *mode)
{
	const char *args[] = { mode, NULL };
	json_t *m = run_built(&r, "preload/reserve_fixture", args, NULL);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x: %s %s", r.status, r.out, r.err);
	ck_assert_str_eq(r.err, "");
	ck_assert_ptr_nonnull(m);
	return m;
}

/* A hang fails the test instead of stalling the suite. */
static void bounded(void)
{
	harness_timeout = 60;
}

START_TEST(anonymous_mappings_partial_unmaps_and_remaps)
{
	json_t *m = run_alloc_mode_exited(&r, "mmap", NULL, 0);
	ck_assert_int_eq(metric(m, "map_mem_cpu_alloc_delta"), 8 * MiB);
	ck_assert_int_eq(metric(m, "unmap_middle_mem_cpu_alloc_delta"), -2 * MiB);
	ck_assert_int_eq(metric(m, "remap_grow_mem_cpu_alloc_delta"), 3 * MiB);
	ck_assert_int_eq(metric(m, "remap_shrink_mem_cpu_alloc_delta"), -5 * MiB);
	ck_assert_int_eq(metric(m, "not_counted_mem_cpu_alloc_delta"), 0);
	ck_assert_int_eq(metric(m, "not_counted_mem_cpu_peaked_delta"), 0);
	ck_assert_int_eq(metric(m, "fixed_over_mem_cpu_alloc_delta"), -MiB);
	ck_assert_int_eq(metric(m, "unmap_all_mem_cpu_alloc_delta"), -3 * MiB);
	json_t *s = stage_of(m, "map");
	ck_assert_int_eq(member(json_object_get(s, "cpu"), "mmap", "alloc_delta"), 8 * MiB);
	ck_assert_int_eq(member(json_object_get(s, "cpu"), "malloc", "alloc_delta"), 0);
	ck_assert_int_eq(metric(m, "process_mem_cpu_mmap_peak"), 9 * MiB); /* 6 MiB head + 3 MiB tail */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(json_object_get(m, "process"),
		"mmap"), "live")), 0);
	json_decref(m);
}
END_TEST

/* The RSS a file says was live when it was written is read then, in a process without stages too
 * (it said 0: it was read only at stage boundaries). */
START_TEST(the_rss_live_is_read_for_the_file)
{
	const char *argv[] = { "/bin/sh", "-c", ":", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	json_t *rss = json_object_get(json_object_get(m, "process"), "rss");
	int64_t live = json_integer_value(json_object_get(rss, "live"));
	ck_assert_msg(live > 0 && live <= json_integer_value(json_object_get(rss, "peak")), "rss live %lld",
		      (long long)live);
	json_decref(m);
}
END_TEST

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
	json_t *m = run_reserve("arena");
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
	json_t *m = run_reserve("drop");
	assert_near(metric(m, "drop_mem_cpu_alloc_delta"), 0, "drop alloc");
	assert_near(metric(m, "drop_mem_cpu_peaked_delta"), 16 * MiB, "drop peaked");
	ck_assert_int_eq(reservations(m, "drop", "peaked_delta"), 16 * MiB);
	json_decref(m);
}
END_TEST

START_TEST(an_unmapped_reservation_keeps_its_high)
{
	json_t *m = run_reserve("unmap");
	assert_near(metric(m, "unmap_mem_cpu_alloc_delta"), 0, "unmap alloc");
	assert_near(metric(m, "unmap_mem_cpu_peaked_delta"), 16 * MiB, "unmap peaked");
	json_decref(m);
}
END_TEST

START_TEST(a_large_plain_mapping_counts_its_touched_pages)
{
	json_t *m = run_reserve("big");
	assert_near(metric(m, "touch_mem_cpu_alloc_delta"), 20 * MiB, "touch alloc");
	ck_assert_int_lt(metric(m, "before_init_mem_cpu") + metric(m, "init_mem_cpu_alloc_delta"), MiB);
	json_decref(m);
}
END_TEST

START_TEST(a_populated_reservation_counts_at_once)
{
	json_t *m = run_reserve("populate");
	assert_near(metric(m, "pop_mem_cpu_alloc_delta"), 32 * MiB, "pop alloc");
	json_decref(m);
}
END_TEST

START_TEST(a_moved_reservation_keeps_its_pages)
{
	json_t *m = run_reserve("grow");
	assert_near(metric(m, "grow_mem_cpu_alloc_delta"), 16 * MiB, "grow alloc");
	json_decref(m);
}
END_TEST

/* Memory committed inside a PROT_NONE reservation (mprotect, or a fixed mapping over it: the JVM's,
 * V8's and Go's heaps) counts what was touched, not what was committed; given back, its high stays.
 * A block mapped accessible at once still counts at once. */
START_TEST(memory_committed_in_pieces_counts_what_was_touched)
{
	json_t *m = run_reserve("commit");
	assert_near(metric(m, "commit_mem_cpu_alloc_delta"), 3 * MiB, "commit alloc");
	ck_assert_int_eq(reservations(m, "commit", "alloc_delta"), 3 * MiB);
	assert_near(metric(m, "more_mem_cpu_alloc_delta"), MiB, "more alloc");
	assert_near(metric(m, "uncommit_mem_cpu_alloc_delta"), -MiB, "uncommit alloc");
	assert_near(metric(m, "uncommit_mem_cpu_peaked_delta"), 3 * MiB, "uncommit peaked");
	ck_assert_int_eq(reservations(m, "uncommit", "peak") - reservations(m, "uncommit", "end"), 3 * MiB);
	ck_assert_int_lt(metric(m, "process_mem_cpu_mmap_peak"), MiB);
	json_decref(m);
	/* while a block mapped accessible at once is counted at once, by its size, touched or not */
	m = run_reserve("plain");
	ck_assert_int_eq(member(json_object_get(stage_of(m, "plain"), "cpu"), "mmap", "alloc_delta"), 16 * MiB);
	ck_assert_int_eq(reservations(m, "plain", "alloc_delta"), 0);
	json_decref(m);
}
END_TEST

/* The RUNTIME's (argv) JSON line of its own highs, run under the shim: {"max_rss_anon", "max_heap_used"}. */
static json_t *runtime_run(const char *const *argv, json_t **own)
{
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x: %s", r.status, r.err);
	json_error_t err;
	*own = json_loads(r.out, JSON_DISABLE_EOF_CHECK, &err);
	ck_assert_msg(*own != NULL, "no JSON line: %s", r.out);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	return m;
}

/* A managed runtime's heap reads at most its resident anonymous memory and at least what its heap
 * holds (its own figures the oracle): committed and never touched, it is not the program's memory. */
static void assert_runtime_figure(json_t *m, json_t *own, const char *what)
{
	int64_t peak = metric(m, "process_mem_cpu_peak");
	int64_t anon = json_integer_value(json_object_get(own, "max_rss_anon"));
	int64_t used = json_integer_value(json_object_get(own, "max_heap_used"));
	ck_assert_msg(anon > 0 && used > 0, "%s: %s", what, r.out);
	ck_assert_msg(peak <= anon + 8 * MiB, "%s: memshim's peak %lld is above the highest RssAnon %lld", what,
		      (long long)peak, (long long)anon);
	ck_assert_msg(peak >= used, "%s: memshim's peak %lld is below the heap in use %lld", what, (long long)peak,
		      (long long)used);
	ck_assert_int_lt(metric(m, "process_mem_cpu_mmap_peak"), 16 * MiB);
}

/* node: V8 reserves its pages PROT_NONE and commits them with mprotect. */
START_TEST(node_reads_at_most_its_resident_memory)
{
	const char *node = in_path("node");
	if (!node)
		node = in_path("nodejs");
	if (!node) {
		fprintf(stderr, "node_reads_at_most_its_resident_memory: skipped, node is not installed\n");
		return;
	}
	char prog[4096];
	snprintf(prog, sizeof prog, "%s", node);
	const char *argv[] = { prog, "tests/preload/fixtures/runtime_heap.js", NULL };
	char script[4096];
	ck_assert_ptr_nonnull(realpath(argv[1], script));
	argv[1] = script;
	json_t *own, *m = runtime_run(argv, &own);
	assert_runtime_figure(m, own, "node");
	json_decref(own);
	json_decref(m);
}
END_TEST

/* The JVM: G1's regions, the code cache and metaspace committed with fixed mappings over PROT_NONE
 * reservations, a few MiB at a time. */
START_TEST(a_jvm_reads_at_most_its_resident_memory)
{
	char java[4096], javac[4096];
	const char *found = in_path("java");
	snprintf(java, sizeof java, "%s", found ? found : "");
	found = in_path("javac");
	snprintf(javac, sizeof javac, "%s", found ? found : "");
	if (!java[0] || !javac[0]) {
		fprintf(stderr, "a_jvm_reads_at_most_its_resident_memory: skipped, no JDK (java and javac)\n");
		return;
	}
	char dir[] = "/tmp/memshim-jvm.XXXXXX", cmd[8192];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof cmd, "'%s' -d %s tests/preload/fixtures/RuntimeHeap.java", javac, dir);
	ck_assert_int_eq(system(cmd), 0);
	const char *argv[] = { java, "-cp", dir, "RuntimeHeap", NULL };
	json_t *own, *m = runtime_run(argv, &own);
	assert_runtime_figure(m, own, "JVM");
	json_decref(own);
	json_decref(m);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(madvise_errors_are_the_kernels)
{
	const char *argv[] = { built("preload/reserve_fixture"), "badadvice", NULL };
	const char *bare_env[] = { "LD_PRELOAD", NULL };
	struct run bare;
	ck_assert_int_eq(run_under_shim(&bare, argv, bare_env), 0);
	json_decref(run_reserve("badadvice"));
	ck_assert_str_eq(r.out, bare.out);
	ck_assert_ptr_nonnull(strstr(r.out, "-1 22 -1 22"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mmap");
	TCase *tc1 = tcase_create("anonymous");
	tcase_set_timeout(tc1, 120);
	tcase_add_test(tc1, anonymous_mappings_partial_unmaps_and_remaps);
	tcase_add_test(tc1, the_rss_live_is_read_for_the_file);
	suite_add_tcase(s, tc1);
	TCase *tc2 = tcase_create("touched pages");
	tcase_add_checked_fixture(tc2, bounded, NULL);
	tcase_add_test(tc2, an_arena_counts_what_was_touched);
	tcase_add_test(tc2, pages_given_back_with_madvise_keep_their_high);
	tcase_add_test(tc2, an_unmapped_reservation_keeps_its_high);
	tcase_add_test(tc2, a_large_plain_mapping_counts_its_touched_pages);
	tcase_add_test(tc2, a_populated_reservation_counts_at_once);
	tcase_add_test(tc2, a_moved_reservation_keeps_its_pages);
	tcase_add_test(tc2, memory_committed_in_pieces_counts_what_was_touched);
	tcase_add_test(tc2, madvise_errors_are_the_kernels);
	suite_add_tcase(s, tc2);
	TCase *tc3 = tcase_create("runtimes");
	tcase_set_timeout(tc3, 120);
	tcase_add_test(tc3, node_reads_at_most_its_resident_memory);
	tcase_add_test(tc3, a_jvm_reads_at_most_its_resident_memory);
	suite_add_tcase(s, tc3);
	return run_suite(s);
}
