/* The memory cgroup's files parsed (core/cgroup.c): which group /proc/self/cgroup names, v1 and v2,
 * where mountinfo puts it, and the values of the files: "max", v1's "unlimited", keyed lines. */
#include <check.h>
#include <string.h>
#include "suite.h"
#include "core/cgroup.h"

static int group(const char *text, char *path)
{
	return ms_cgroup_group(text, strlen(text), path, MS_CGROUP_PATH);
}

START_TEST(v1_memory_line_wins_over_the_v2_line)
{
	char path[MS_CGROUP_PATH];
	const char *hybrid = "9:name=systemd:/\n5:devices:/\n4:memory:/process_api/d95680\n1:cpu:/\n0::/\n";
	ck_assert_int_eq(group(hybrid, path), 1);
	ck_assert_str_eq(path, "/process_api/d95680");
	ck_assert_int_eq(group("3:cpu,cpuacct:/a\n7:memory,hugetlb:/job/7", path), 1); /* comounted, no newline */
	ck_assert_str_eq(path, "/job/7");
}
END_TEST

START_TEST(v2_is_the_line_with_no_controllers)
{
	char path[MS_CGROUP_PATH];
	ck_assert_int_eq(group("0::/kubepods.slice/pod1/cri-abc.scope\n", path), 2);
	ck_assert_str_eq(path, "/kubepods.slice/pod1/cri-abc.scope");
	ck_assert_int_eq(group("1:name=systemd:/x\n", path), 0);
	ck_assert_int_eq(group("", path), 0);
	char small[4];
	ck_assert_int_eq(ms_cgroup_group("0::/long/path\n", 14, small, sizeof small), 0);
}
END_TEST

static int mount(const char *line, int version, const char *grp, char *dir)
{
	return ms_cgroup_mount_line(line, strlen(line), version, grp, dir, MS_CGROUP_PATH);
}

START_TEST(mountinfo_gives_the_groups_directory)
{
	char dir[MS_CGROUP_PATH];
	const char *v1 = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory";
	const char *cpu = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu";
	const char *v2 = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 master:2 - cgroup2 cgroup2 rw";
	ck_assert_int_eq(mount(v1, 1, "/process_api/d9", dir), 1);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/memory/process_api/d9");
	ck_assert_int_eq(mount(cpu, 1, "/process_api/d9", dir), 0);
	ck_assert_int_eq(mount(v1, 2, "/process_api/d9", dir), 0);
	ck_assert_int_eq(mount(v2, 2, "/a.slice", dir), 1); /* optional fields before "-" */
	ck_assert_str_eq(dir, "/sys/fs/cgroup/unified/a.slice");
	ck_assert_int_eq(mount(v2, 2, "/", dir), 1);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/unified");
	/* a container's mount of its own part of the hierarchy (no cgroup namespace) */
	const char *sub = "900 800 0:38 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw";
	ck_assert_int_eq(mount(sub, 2, "/kubepods/pod1/c2", dir), 1);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/c2");
	ck_assert_int_eq(mount(sub, 2, "/kubepods/pod10", dir), 0);
	ck_assert_int_eq(mount(sub, 2, "/other", dir), 0);
	const char *esc = "900 800 0:38 / /mnt/my\\040cg rw - cgroup2 none rw";
	ck_assert_int_eq(mount(esc, 2, "/g", dir), 1);
	ck_assert_str_eq(dir, "/mnt/my cg/g");
	ck_assert_int_eq(mount("garbage", 2, "/g", dir), 0);
	ck_assert_int_eq(mount("1 2 3 / /x rw - cgroup2", 2, "/g", dir), 0); /* fields missing */
}
END_TEST

static int64_t number(const char *t)
{
	return ms_cgroup_number(t, strlen(t));
}

static int64_t limit(const char *t)
{
	return ms_cgroup_limit(t, strlen(t));
}

START_TEST(values_max_and_huge_v1_limits)
{
	ck_assert_int_eq(number("15134720\n"), 15134720);
	ck_assert_int_eq(number("0\n"), 0);
	ck_assert_int_eq(number("max\n"), MS_CGROUP_NONE);
	ck_assert_int_eq(number(""), MS_CGROUP_NONE);
	ck_assert_int_eq(number("99999999999999999999999\n"), INT64_MAX);
	ck_assert_int_eq(limit("max\n"), MS_CGROUP_NONE);                 /* v2: no limit */
	ck_assert_int_eq(limit("25769803776\n"), 25769803776);            /* 24 GiB */
	ck_assert_int_eq(limit("9223372036854771712\n"), MS_CGROUP_NONE); /* v1, 4 KiB pages */
	ck_assert_int_eq(limit("9223372036854710272\n"), MS_CGROUP_NONE); /* v1, 64 KiB pages */
	ck_assert_int_eq(limit("67108864"), 67108864);
}
END_TEST

START_TEST(keyed_lines_match_whole_keys)
{
	const char *events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
	ck_assert_int_eq(ms_cgroup_key(events, strlen(events), "oom_kill"), 2);
	ck_assert_int_eq(ms_cgroup_key(events, strlen(events), "oom"), 3);
	const char *v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 1";
	ck_assert_int_eq(ms_cgroup_key(v1, strlen(v1), "oom_kill"), 1);
	const char *old = "oom_kill_disable 0\nunder_oom 0\n"; /* before Linux 4.13 */
	ck_assert_int_eq(ms_cgroup_key(old, strlen(old), "oom_kill"), MS_CGROUP_NONE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, v1_memory_line_wins_over_the_v2_line);
	tcase_add_test(tc, v2_is_the_line_with_no_controllers);
	tcase_add_test(tc, mountinfo_gives_the_groups_directory);
	tcase_add_test(tc, values_max_and_huge_v1_limits);
	tcase_add_test(tc, keyed_lines_match_whole_keys);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
