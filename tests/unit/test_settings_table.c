/* Every setting x every kind of bad value: the table in doc/safety.md ("Bad settings"), row by row. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "suite.h"
#include "core/config.h"
#include "core/ms.h"
#include "capture.h"

static char huge64k[65537];
static const char *const values[] = { "", "99999999999999999999", "-1", "maybe", "\xe6\x97\xa5\xe6\x9c\xac", huge64k };
#define NVALUES (sizeof values / sizeof *values)

static const char *env_name, *env_value;
static const char *one_var(const char *name)
{
	return strcmp(name, env_name) ? NULL : env_value;
}

static int warnings(struct ms_config *cfg)
{
	char buf[4096];
	return load_capturing_into(cfg, one_var, buf, sizeof buf);
}

/* Expected warnings per value, in the order of values[]; then a check of the value used. */
struct row {
	const char *name;
	int warn[NVALUES];
};
static const struct row rows[] = {
	{ "MEMSHIM_STAGES", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_OUTPUT", { 0, 0, 0, 0, 0, 1 } },
	{ "MEMSHIM_DISABLE", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_LOG", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_FOLLOW_CHILDREN", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_CHILDREN_DIR", { 0, 0, 0, 0, 0, 1 } },
	{ "MEMSHIM_TIMELINE", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_SNAPSHOT_INTERVAL", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_SITES", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_SITES_RATE", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_LIVE", { 0, 1, 1, 1, 1, 1 } },
	{ "MEMSHIM_LIVE_DIR", { 0, 0, 0, 0, 0, 1 } },
};

START_TEST(each_row_of_the_table)
{
	static struct ms_config cfg;
	memset(huge64k, 'x', sizeof huge64k - 1);
	const struct row *row = &rows[_i];
	for (size_t v = 0; v < NVALUES; v++) {
		env_name = row->name;
		env_value = values[v];
		ck_assert_msg(warnings(&cfg) == row->warn[v], "%s with value #%zu: warnings", row->name, v);
		/* whatever the value, the fallback is the default and never something half-parsed */
		ck_assert_int_eq(cfg.disabled, 0);
		ck_assert_int_eq(cfg.log_level, MS_LOG_WARN);
		ck_assert_int_eq(cfg.follow_children, 1);
		ck_assert_int_eq(cfg.timeline, 1);
		ck_assert(cfg.snapshot_interval == MS_SNAPSHOT_AUTO);
		ck_assert_int_eq(cfg.sites, 1);
		ck_assert_int_eq(cfg.sites_rate, 524288);
		ck_assert_int_eq(cfg.live, 1);
		ck_assert(cfg.output[0] == '/');
		if (!strcmp(row->name, "MEMSHIM_LIVE_DIR"))
			ck_assert(v == 0 || v == NVALUES - 1 ? cfg.live_dir[0] == '\0' : cfg.live_dir[0] == '/');
		if (!strcmp(row->name, "MEMSHIM_STAGES")) {
			ck_assert_int_eq(cfg.spec.nstages, 0); /* set but nothing valid: no stages */
			ck_assert(!cfg.spec.is_default);
		}
		if (!strcmp(row->name, "MEMSHIM_OUTPUT") && v > 0 && v < NVALUES - 1) {
			char want[600];
			ck_assert_ptr_nonnull(getcwd(want, 500));
			strcat(want, "/");
			strcat(want, values[v]);
			ck_assert_str_eq(cfg.output, want); /* a plain file name in the working directory */
		}
		if (!strcmp(row->name, "MEMSHIM_CHILDREN_DIR") && v > 0 && v < NVALUES - 1) {
			char want[600];
			ck_assert_ptr_nonnull(getcwd(want, 500));
			strcat(want, "/");
			strcat(want, values[v]);
			ck_assert_str_eq(cfg.children_dir, want); /* a directory in the working directory */
		} else {
			ck_assert_str_eq(cfg.children_dir, ""); /* unset: next to the parent's file */
		}
		if (!strcmp(row->name, "MEMSHIM_OUTPUT") && (v == 0 || v == NVALUES - 1))
			ck_assert(strstr(cfg.output, "/memshim_metrics.json") != NULL);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("settings-table");
	TCase *tc = tcase_create("rows");
	tcase_add_loop_test(tc, each_row_of_the_table, 0, (int)(sizeof rows / sizeof *rows));
	suite_add_tcase(s, tc);
	return run_suite(s);
}
