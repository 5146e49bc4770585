/* /proc/meminfo's text as memshim top reads it (input/meminfo.c): MemTotal and MemAvailable in
 * bytes, whatever the order and the other lines; a kernel without MemAvailable; text that is not. */
#include "util.h"
#include "input/meminfo.h"

#include <stdio.h>
#include <stdlib.h>

/* The first lines of a real /proc/meminfo (Linux 6.8, 24 GiB). */
static const char real[] = "MemTotal:       24683772 kB\n"
			   "MemFree:        17017532 kB\n"
			   "MemAvailable:   22373244 kB\n"
			   "Buffers:          241488 kB\n"
			   "Cached:          5201432 kB\n"
			   "SwapCached:            0 kB\n"
			   "HugePages_Total:       0\n"
			   "Hugepagesize:       2048 kB\n";

START_TEST(test_real_text)
{
	struct mf_meminfo m;
	ck_assert_int_eq(mf_meminfo_parse(real, &m), 0);
	ck_assert_int_eq(m.total, 24683772LL * 1024);
	ck_assert_int_eq(m.available, 22373244LL * 1024);
}
END_TEST

/* Any order, no newline at the end, tabs; a name that only starts like one is another line. */
START_TEST(test_order_and_prefixes)
{
	struct mf_meminfo m;
	ck_assert_int_eq(mf_meminfo_parse("MemTotalX:  1 kB\nMemAvailable:\t2048 kB\nMemTotal:\t4096 kB", &m), 0);
	ck_assert_int_eq(m.total, 4096LL * 1024);
	ck_assert_int_eq(m.available, 2048LL * 1024);
	ck_assert_int_eq(mf_meminfo_parse("Foo_MemTotal: 3 kB\nMemTotal: 5 kB\n", &m), 0);
	ck_assert_int_eq(m.total, 5 * 1024);
}
END_TEST

/* Before Linux 3.14 there is no MemAvailable: the total alone. */
START_TEST(test_no_available)
{
	struct mf_meminfo m;
	ck_assert_int_eq(mf_meminfo_parse("MemTotal:       1000 kB\nMemFree:         10 kB\n", &m), 0);
	ck_assert_int_eq(m.total, 1024000);
	ck_assert_int_eq(m.available, -1);
}
END_TEST

/* No MemTotal, or one that is not a number of kB: nothing to show. */
START_TEST(test_not_meminfo)
{
	struct mf_meminfo m;
	ck_assert_int_eq(mf_meminfo_parse("", &m), -1);
	ck_assert_int_eq(mf_meminfo_parse("MemFree: 10 kB\n", &m), -1);
	ck_assert_int_eq(mf_meminfo_parse("MemTotal: lots\n", &m), -1);
	ck_assert_int_eq(mf_meminfo_parse("MemTotal: -5 kB\n", &m), -1);
	ck_assert_int_eq(mf_meminfo_parse("MemTotal: 5 MB\n", &m), -1);
	ck_assert_int_eq(mf_meminfo_parse("MemTotal: 99999999999999999999 kB\n", &m), -1);
	ck_assert_int_eq(mf_meminfo_parse("MemTotal: 9007199254740993 kB\n", &m), -1);  /* over LLONG_MAX bytes */
	ck_assert_int_eq(mf_meminfo_parse("MemTotal: 7\nMemAvailable: x kB\n", &m), 0); /* no unit: bytes */
	ck_assert_int_eq(m.total, 7);
	ck_assert_int_eq(m.available, -1);
}
END_TEST

/* The file itself: this host's, and one that is not there. */
START_TEST(test_read)
{
	struct mf_meminfo m;
	ck_assert_int_eq(mf_meminfo_read(NULL, &m), 0);
	ck_assert_int_gt(m.total, 0);
	ck_assert_int_eq(mf_meminfo_read("/nonexistent/meminfo", &m), -1);
	ck_assert_int_eq(m.total, -1);
	char *dir = t_tmpdir(), path[4200];
	snprintf(path, sizeof path, "%s/meminfo", dir);
	t_write(path, real, sizeof real - 1);
	ck_assert_int_eq(mf_meminfo_read(path, &m), 0);
	ck_assert_int_eq(m.available, 22373244LL * 1024);
	t_rmtree(dir);
	free(dir);
}
END_TEST

Suite *meminfo_suite(void)
{
	Suite *s = suite_create("meminfo");
	TCase *tc = tcase_create("meminfo");
	tcase_add_test(tc, test_real_text);
	tcase_add_test(tc, test_order_and_prefixes);
	tcase_add_test(tc, test_no_available);
	tcase_add_test(tc, test_not_meminfo);
	tcase_add_test(tc, test_read);
	suite_add_tcase(s, tc);
	return s;
}
