/* Native stages on real programs nobody here wrote: sqlite3's sqlite3_step and xz's
 * lzma_code bound through the GOT, their call counts checked against the programs' own behaviour
 * (one step per row inserted) and against a second preloaded library counting the same calls. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"

static struct run r;
static char tmp[64];

static void setup(void)
{
	snprintf(tmp, sizeof tmp, "/tmp/memshim-real.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

/* Runs ARGV under the shim with the counting library preloaded after it; returns the metrics. */
static json_t *run_counted(const char *stages, const char *const *argv)
{
	char preload[2 * PATH_MAX + 32], spec[128], out[128], lib[PATH_MAX];
	snprintf(lib, sizeof lib, "%s", built("native/libcountcalls.so"));
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", built("libmemshim.so"), lib);
	snprintf(spec, sizeof spec, "MEMSHIM_STAGES=%s", stages);
	snprintf(out, sizeof out, "COUNT_CALLS_OUT=%s/counts", tmp);
	const char *env[] = { preload, spec, out, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s: %d %s", argv[0], r.status, r.err);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	return m;
}

/* What the counting library counted for NAME. */
static long counted(const char *name)
{
	char path[128], line[128], key[64];
	snprintf(path, sizeof path, "%s/counts", tmp);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	long n = -1, v;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%63s %ld", key, &v) == 2 && !strcmp(key, name))
			n = v;
	fclose(f);
	return n;
}

/* Builds a database of ROWS rows with one INSERT each; returns step_calls. */
static int64_t steps_for(int rows, long *independent)
{
	char sql[128], db[128], read[160];
	snprintf(sql, sizeof sql, "%s/rows%d.sql", tmp, rows);
	snprintf(db, sizeof db, "%s/rows%d.db", tmp, rows);
	FILE *f = fopen(sql, "w");
	fprintf(f, "begin;\ncreate table t(a integer primary key, b text);\n");
	for (int i = 0; i < rows; i++)
		fprintf(f, "insert into t(b) values('row %d');\n", i);
	fprintf(f, "commit;\n");
	fclose(f);
	snprintf(read, sizeof read, ".read %s", sql);
	const char *argv[] = { "/usr/bin/sqlite3", db, read, NULL };
	json_t *m = run_counted("step=sqlite3_step", argv);
	int64_t n = metric(m, "step_calls");
	json_decref(m);
	*independent = counted("sqlite3_step");
	return n;
}

START_TEST(sqlite3_step_once_per_row_inserted)
{
	long c100, c400;
	int64_t s100 = steps_for(100, &c100), s400 = steps_for(400, &c400);
	ck_assert_msg(s400 - s100 == 300, "step_calls %lld and %lld for 100 and 400 rows", (long long)s100,
		      (long long)s400);
	ck_assert_int_eq(c400 - c100, 300);
	ck_assert_int_ge(s100, 100);
}
END_TEST

START_TEST(xz_lzma_code_every_call)
{
	char in[128];
	snprintf(in, sizeof in, "%s/in.txt", tmp);
	FILE *f = fopen(in, "w");
	unsigned x = 12345;
	for (int i = 0; i < 400000; i++) { /* 2.4 MB that compresses a little: many calls */
		x = x * 1103515245u + 12345u;
		fprintf(f, "%05u ", (x >> 16) % 50000);
	}
	fclose(f);
	const char *argv[] = { "/usr/bin/xz", "-k", "-6", "-T1", in, NULL };
	json_t *m = run_counted("code=lzma_code", argv);
	long independent = counted("lzma_code");
	ck_assert_int_gt(independent, 100);
	ck_assert_int_eq(metric(m, "code_calls"), independent);
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("native real programs");
	TCase *tc = tcase_create("real");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, sqlite3_step_once_per_row_inserted);
	tcase_add_test(tc, xz_lzma_code_every_call);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
