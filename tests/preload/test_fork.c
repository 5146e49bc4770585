/* Forked workers report what they added, not the memory they share with their parent (issue 30):
 * a DataLoader worker of a 355 MB trainer read 355 MB as its own peak. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include "suite.h"
#include "harness.h"

#define MiB ((int64_t)1 << 20)

static struct run r;

START_TEST(a_forked_worker_reports_what_it_added)
{
	const char *argv[] = { built("preload/fork_fixture"), NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x %s", r.status, r.err);
	ck_assert_str_eq(r.out, "workers ok\n");
	ck_assert_str_eq(r.err, "");
	json_t *parent = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(parent);
	ck_assert_int_ge(metric(parent, "process_mem_cpu_peak"), 96 * MiB);
	ck_assert_ptr_null(json_object_get(json_object_get(parent, "metrics"), "inherited_mem_cpu"));
	json_decref(parent);

	DIR *d = opendir(r.dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	int children = 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "m.json.", 7) != 0)
			continue;
		json_t *child = load_metrics(&r, e->d_name);
		ck_assert_ptr_nonnull(child);
		ck_assert(json_is_true(json_object_get(child, "forked")));
		int64_t inherited = metric(child, "inherited_mem_cpu");
		ck_assert_msg(inherited >= 96 * MiB && inherited < 98 * MiB, "inherited %lld", (long long)inherited);
		int64_t peak = metric(child, "process_mem_cpu_peak");
		ck_assert_msg(peak >= 8 * MiB && peak < 9 * MiB, "child peak %lld (what it added)", (long long)peak);
		ck_assert_int_lt(metric(child, "before_init_mem_cpu"), MiB);
		json_t *proc = json_object_get(child, "process");
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(proc, "inherited"), "cpu")), inherited);
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(proc, "cpu"), "peak")), peak);
		json_decref(child);
		children++;
	}
	closedir(d);
	ck_assert_int_eq(children, 2);
}
END_TEST

int main(void)
{
	harness_timeout = 60;
	Suite *s = suite_create("fork");
	TCase *tc = tcase_create("workers");
	tcase_add_test(tc, a_forked_worker_reports_what_it_added);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
