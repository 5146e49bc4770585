/* The memory cgroup (shim/intercept/cgroup.c): a v2 and a v1 group laid out in a directory
 * (MEMSHIM_CGROUP_DIR), whose usage the fixture changes between its stages: each stage's begin, end
 * and peak as read, the group's high-water, limit ("max" and v1's near-2^63 value are none) and OOM
 * kills, and the dump's line.  The real v1 group an OOM kill ends is in tests/live/test_cgroup.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"

#define MiB ((int64_t)1 << 20)

static struct run r;
static char group[256];

static void put(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", group, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* A fresh group directory of VERSION with LIMIT (the file's text), its high-water 400 MiB and
 * OOM_KILLS kills so far. */
static void lay_out(int version, const char *limit, int oom_kills)
{
	char text[128];
	snprintf(group, sizeof group, "/tmp/memshim-cgroup.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(group));
	put(version == 2 ? "memory.current" : "memory.usage_in_bytes", "0\n");
	put(version == 2 ? "memory.peak" : "memory.max_usage_in_bytes", "419430400\n");
	put(version == 2 ? "memory.max" : "memory.limit_in_bytes", limit);
	if (version == 2)
		snprintf(text, sizeof text, "low 0\nhigh 0\nmax 5\noom %d\noom_kill %d\noom_group_kill 0\n", oom_kills,
			 oom_kills);
	else
		snprintf(text, sizeof text, "oom_kill_disable 0\nunder_oom 0\noom_kill %d\n", oom_kills);
	put(version == 2 ? "memory.events" : "memory.oom_control", text);
}

/* The laid-out group removed (a test's end). */
static void remove_group(void)
{
	static const char *const files[] = {
		"memory.current",        "memory.peak",           "memory.max",
		"memory.events",         "memory.usage_in_bytes", "memory.max_usage_in_bytes",
		"memory.limit_in_bytes", "memory.oom_control"
	};
	char path[512];
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(path, sizeof path, "%s/%s", group, files[i]);
		unlink(path);
	}
	rmdir(group);
}

static json_t *run_fixture_as(int version, const char *setting, const char *mode)
{
	char var[320], v[4];
	snprintf(var, sizeof var, "MEMSHIM_CGROUP_DIR=%s", setting ? setting : group);
	snprintf(v, sizeof v, "%d", version);
	const char *args[] = { group, v, mode, NULL };
	const char *env[] = { var, "MEMSHIM_SITES=0", NULL };
	json_t *m = run_built(&r, "preload/cgroup_fixture", args, env);
	return exited_with_file(&r, m, 0, "cgroup_fixture");
}

static json_t *run_fixture(int version, const char *setting)
{
	return run_fixture_as(version, setting, NULL);
}

static json_t *cgroup_of(json_t *o)
{
	json_t *c = json_object_get(o, "cgroup");
	ck_assert_msg(json_is_object(c), "no cgroup object");
	return c;
}

static int64_t num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	ck_assert_msg(json_is_integer(v), "%s missing", key);
	return json_integer_value(v);
}

/* Each stage's usage as read at its boundaries, its peak the highest read (the timeline's point
 * inside train read 250 MiB between its begin's 200 and its end's 220). */
static void stages_read_at_boundaries_and_points(json_t *m)
{
	json_t *load = cgroup_of(stage_of(m, "load")), *train = cgroup_of(stage_of(m, "train"));
	ck_assert_int_eq(num(load, "begin"), 100 * MiB);
	ck_assert_int_eq(num(load, "end"), 300 * MiB);
	ck_assert_int_eq(num(load, "peak"), 300 * MiB);
	ck_assert_int_eq(num(train, "begin"), 200 * MiB);
	ck_assert_int_eq(num(train, "end"), 220 * MiB);
	ck_assert_int_eq(num(train, "peak"), 250 * MiB);
	/* a directory, not the kernel's cgroup2: no per-reader memory.peak to reset */
	ck_assert_str_eq(json_string_value(json_object_get(train, "peak_kind")), "reads");
}

/* Which group on which boot: this boot's id and the group directory's device and inode, read once
 * when the group was found (memshim-format reads the group again only where they still hold). */
static void names_the_group_and_the_boot(json_t *c)
{
	char boot[64] = "";
	struct stat st;
	this_boot_id(boot, sizeof boot);
	ck_assert_int_eq(stat(group, &st), 0);
	ck_assert_str_eq(json_string_value(json_object_get(c, "boot_id")), boot);
	ck_assert_int_eq(num(c, "dev"), (int64_t)st.st_dev);
	ck_assert_int_eq(num(c, "ino"), (int64_t)st.st_ino);
}

START_TEST(v2_group_with_a_limit)
{
	lay_out(2, "1073741824\n", 3);
	json_t *m = run_fixture(2, NULL);
	stages_read_at_boundaries_and_points(m);
	ck_assert_int_eq(metric(m, "process_mem_cgroup_peak"), 400 * MiB);
	ck_assert_int_eq(metric(m, "process_mem_cgroup_limit"), 1024 * MiB);
	json_t *c = cgroup_of(json_object_get(m, "process"));
	ck_assert_int_eq(num(c, "version"), 2);
	ck_assert_str_eq(json_string_value(json_object_get(c, "path")), group);
	ck_assert_int_eq(num(c, "usage"), 220 * MiB); /* read at exit */
	ck_assert_int_eq(num(c, "peak"), 400 * MiB);
	ck_assert_int_eq(num(c, "peak_read"), 300 * MiB);
	ck_assert_int_eq(num(c, "limit"), 1024 * MiB);
	ck_assert_int_eq(num(c, "oom_kills"), 3);
	ck_assert_int_eq(num(c, "oom_kills_at_start"), 3);
	names_the_group_and_the_boot(c);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(c, "read")), "memory.current"));
	const char *out = format_in_dir(&r, "m.json");
	/* the group's high-water (400MB) is above anything the process read: the line says whose it is */
	ck_assert_msg(strstr(out, "  cgroup peak 400MB of 1.00GB (39%), the group's high-water since it was created "
				  "(this process read at most 300MB)\n"),
		      "%s", out);
	ck_assert_msg(!strstr(out, "OOM killer"), "%s", out);
	json_decref(m);
	remove_group();
}
END_TEST

/* Reservations whose reads spent their share of the CPU: the group is still read at every
 * boundary (its own share: a few us a read). */
START_TEST(the_group_is_read_when_the_reservations_are_not)
{
	lay_out(2, "1073741824\n", 0);
	json_t *m = run_fixture_as(2, NULL, "starve");
	stages_read_at_boundaries_and_points(m);
	json_decref(m);
	remove_group();
}
END_TEST

/* A program that closes every fd above 2 (a daemon's close_range) finds none open later: the usage
 * file memshim kept open is not opened again, and the group is still read at each boundary (it
 * was opened again up to 8 times, at the top of the fd table, where the program saw it). */
START_TEST(an_fd_the_program_closed_stays_closed)
{
	lay_out(2, "max\n", 0);
	json_t *m = run_fixture_as(2, NULL, "close_all");
	ck_assert_msg(strstr(r.out, "open fds: 0\n"), "%s", r.out);
	stages_read_at_boundaries_and_points(m);
	json_decref(m);
	remove_group();
}
END_TEST

START_TEST(v2_max_is_no_limit)
{
	lay_out(2, "max\n", 0);
	json_t *m = run_fixture(2, NULL);
	stages_read_at_boundaries_and_points(m);
	ck_assert(!has_metric(m, "process_mem_cgroup_limit"));
	ck_assert_ptr_null(json_object_get(cgroup_of(json_object_get(m, "process")), "limit"));
	const char *out = format_in_dir(&r, "m.json");
	ck_assert_msg(strstr(out, "  cgroup peak 400MB, no limit, the group's high-water since it was created"), "%s",
		      out);
	json_decref(m);
	remove_group();
}
END_TEST

START_TEST(v1_group_and_its_unlimited_value)
{
	lay_out(1, "9223372036854771712\n", 0);
	json_t *m = run_fixture(1, NULL);
	stages_read_at_boundaries_and_points(m);
	ck_assert(!has_metric(m, "process_mem_cgroup_limit"));
	json_t *c = cgroup_of(json_object_get(m, "process"));
	ck_assert_int_eq(num(c, "version"), 1);
	ck_assert_int_eq(num(c, "peak"), 400 * MiB);
	ck_assert_int_eq(num(c, "oom_kills"), 0);
	names_the_group_and_the_boot(c);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(c, "read")), "memory.usage_in_bytes"));
	json_decref(m);
	remove_group();
}
END_TEST

START_TEST(none_reads_no_group)
{
	lay_out(2, "max\n", 0);
	json_t *m = run_fixture(2, "none");
	ck_assert(!has_metric(m, "process_mem_cgroup_peak"));
	ck_assert_ptr_null(json_object_get(json_object_get(m, "process"), "cgroup"));
	ck_assert_ptr_null(json_object_get(stage_of(m, "train"), "cgroup"));
	json_decref(m);
	remove_group();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("laid_out");
	tcase_add_test(tc, v2_group_with_a_limit);
	tcase_add_test(tc, v2_max_is_no_limit);
	tcase_add_test(tc, an_fd_the_program_closed_stays_closed);
	tcase_add_test(tc, the_group_is_read_when_the_reservations_are_not);
	tcase_add_test(tc, v1_group_and_its_unlimited_value);
	tcase_add_test(tc, none_reads_no_group);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
