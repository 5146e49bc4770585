/* C++ beside every allocator: operator new and delete (scalar, array, nothrow, sized, aligned) of
 * 200 MiB kept in one stage and released in the next, under glibc, jemalloc and tcmalloc, each
 * preloaded after the library or linked into the program, with the allocator's own figure
 * (jemalloc's stats.allocated, tcmalloc's generic.current_allocated_bytes) as the oracle.  An
 * allocator listed before the library in LD_PRELOAD is named in one warning. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"

#define MIB ((int64_t)1 << 20)
#define LIBDIR "/usr/lib/x86_64-linux-gnu/"

struct setup {
	const char *program; /* under the build directory */
	const char *allocator; /* preloaded after the library, or NULL */
};

static const struct setup setups[] = {
	{ "preload/cxx_alloc", NULL },
	{ "preload/cxx_alloc", LIBDIR "libjemalloc.so.2" },
	{ "preload/cxx_alloc_je", NULL },
	{ "preload/cxx_alloc", LIBDIR "libtcmalloc.so.4" },
	{ "preload/cxx_alloc_tc", NULL },
};

static int present(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0)
		return 1;
	printf("test_allocators: %s missing, skipped\n", path);
	return 0;
}

START_TEST(cxx_new_and_delete_counted_with_the_allocator_serving_them)
{
	static struct run r;
	const struct setup *s = &setups[_i];
	if (!present(built(s->program)) || (s->allocator && !present(s->allocator)))
		return;
	char preload[1024];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s%s%s", built("libmemshim.so"), s->allocator ? ":" : "",
		 s->allocator ? s->allocator : "");
	const char *env[] = { preload, NULL };
	json_t *m = exited_with_file(&r, run_built(&r, s->program, NULL, env), 0, s->program);
	long kept = 0, dropped = 0;
	ck_assert_msg(strstr(r.out, "bad_alloc caught\n") != NULL, "no bad_alloc: %s", r.out);
	ck_assert_msg(sscanf(strstr(r.out, "allocator:"), "allocator: kept %ld dropped %ld", &kept, &dropped) == 2, "%s",
		      r.out);
	ck_assert_int_eq(memshim_lines(r.err), 0);
	int64_t keep = metric(m, "keep_mem_cpu_alloc_delta"), drop = metric(m, "drop_mem_cpu_alloc_delta");
	/* 200 MiB of blocks (glibc maps each with a page more), and the vectors holding their pointers */
	assert_between(keep, 200 * MIB, 201 * MIB, "keep's alloc delta");
	/* all of the blocks back, after a bad_alloc thrown by the allocator's own operator new */
	assert_between(drop, -keep, -keep + 16384, "drop's alloc delta");
	if (kept >= 0) { /* the allocator's own figure agrees within its caches' lag (0.1%) */
		assert_between(kept, keep - keep / 1000, keep + keep / 1000, "the allocator's kept bytes");
		assert_between(dropped, drop + drop / 1000, drop - drop / 1000, "the allocator's dropped bytes");
	}
	json_t *malloc_live = json_object_get(json_object_get(json_object_get(m, "process"), "malloc"), "live");
	assert_between(json_integer_value(malloc_live), 0, MIB, "malloc live at exit");
	json_decref(m);
}
END_TEST

/* Listed first, jemalloc takes every malloc call: the library says so once and the program runs. */
START_TEST(an_allocator_ahead_of_the_library_is_named)
{
	static struct run r;
	if (!present(LIBDIR "libjemalloc.so.2"))
		return;
	char preload[1024];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s:%s", LIBDIR "libjemalloc.so.2", built("libmemshim.so"));
	const char *env[] = { preload, NULL };
	json_t *m = exited_with_file(&r, run_built(&r, "preload/cxx_alloc", NULL, env), 0, "cxx_alloc");
	ck_assert_int_eq(memshim_lines(r.err), 1);
	ck_assert_msg(strstr(r.err, "libjemalloc.so.2 comes before libmemshim.so in LD_PRELOAD") != NULL, "%s", r.err);
	json_decref(m);
}
END_TEST

static Suite *allocators_suite(void)
{
	Suite *s = suite_create("allocators");
	TCase *tc = tcase_create("C++ new and delete");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, cxx_new_and_delete_counted_with_the_allocator_serving_them, 0,
			    (int)(sizeof setups / sizeof *setups));
	tcase_add_test(tc, an_allocator_ahead_of_the_library_is_named);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(allocators_suite());
}
