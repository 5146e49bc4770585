/* --json-dir: files byte-exact with what python3's json.dumps(d, indent=4, sort_keys=True) wrote. */
#include "util.h"
#include "base/base.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *cmp_expect_root, *cmp_actual_root;
static int cmp_count;

/* For each expected file, the file of the same relative path must be identical. */
static int cmp_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	if (flag != FTW_F)
		return 0;
	char actual[8400];
	snprintf(actual, sizeof actual, "%s%s", cmp_actual_root, path + strlen(cmp_expect_root));
	char *e = t_read(path, NULL), *a = t_read(actual, NULL);
	ck_assert_msg(a != NULL, "missing %s", actual);
	t_same(actual, e, a);
	free(e), free(a);
	cmp_count++;
	return 0;
}

static int count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path, (void)st, (void)ftw;
	cmp_count -= flag == FTW_F;
	return 0;
}

/* Every expected file is there and equal, and nothing else was written. */
static void compare_dirs(const char *expect, const char *actual)
{
	cmp_expect_root = expect, cmp_actual_root = actual, cmp_count = 0;
	ck_assert_int_eq(nftw(expect, cmp_one, 16, FTW_PHYS), 0);
	ck_assert_int_gt(cmp_count, 0);
	ck_assert_int_eq(nftw(actual, count_one, 16, FTW_PHYS), 0);
	ck_assert_msg(cmp_count == 0, "%s: %d files more or less than expected", actual, -cmp_count);
}

static void run_json_dir(const char *name, const char *existing, char **files, int want_rc)
{
	char *dir = t_tmpdir(), *argv[8] = { "memshim-format", "--json-dir", dir }, *out, *err;
	char expect[4200], path[4200];
	int argc = 3;
	for (; *files; files++)
		argv[argc++] = *files;
	argv[argc] = NULL;
	ck_assert_int_eq(chdir(t_golden()), 0);
	if (existing) {
		size_t len;
		char *text = t_read(existing, &len);
		snprintf(path, sizeof path, "%s/all_results.json", dir);
		t_write(path, text, len);
		free(text);
	}
	ck_assert_int_eq(t_run(argv, &out, &err), want_rc);
	t_same("stderr", "", err);
	snprintf(expect, sizeof expect, "%s/expect/json/%s", t_golden(), name);
	compare_dirs(expect, dir);
	t_rmtree(dir);
	free(dir), free(out), free(err);
}

START_TEST(test_seed)
{
	char *files[] = { "in/seed.json", NULL };
	run_json_dir("seed", NULL, files, 0);
}
END_TEST

START_TEST(test_widths)
{
	char *files[] = { "in/widths.json", NULL };
	run_json_dir("widths", NULL, files, 0);
}
END_TEST

START_TEST(test_update_new_keys_win)
{
	char *files[] = { "in/seed.json", NULL };
	run_json_dir("update", "in/all_results-existing.json", files, 0);
}
END_TEST

START_TEST(test_several_files_per_rank)
{
	char *files[] = { "in/rank1.json", "in/rank0.json", NULL };
	run_json_dir("ranks", NULL, files, 0);
}
END_TEST

/* Results are the metrics as written: a stage open in the snapshot has no results file. */
START_TEST(test_snapshot_open_stages)
{
	char *files[] = { "in/died.json", NULL };
	run_json_dir("died", NULL, files, 0);
}
END_TEST

START_TEST(test_merge_writes_per_rank)
{
	char *files[] = { "--merge", "in/rank1.json", "in/rank0.json", NULL };
	run_json_dir("ranks", NULL, files, 0);
}
END_TEST

START_TEST(test_json_writer)
{
	char path[4200], *buf;
	size_t len;
	snprintf(path, sizeof path, "%s/in/pyjson.json", t_golden());
	json_t *v = json_load_file(path, 0, NULL);
	ck_assert_ptr_nonnull(v);
	FILE *o = open_memstream(&buf, &len);
	mf_py_json(o, v);
	fclose(o);
	snprintf(path, sizeof path, "%s/expect/json/pyjson.json", t_golden());
	char *want = t_read(path, NULL);
	t_same("json.dumps", want, buf);
	free(want), free(buf);
	json_decref(v);
}
END_TEST

/* A broken all_results.json is reported (exit 2) and left as it was. */
START_TEST(test_bad_existing)
{
	char *dir = t_tmpdir(), path[4200], *out, *err;
	char *argv[] = { "memshim-format", "--json-dir", dir, "in/seed.json", NULL };
	snprintf(path, sizeof path, "%s/all_results.json", dir);
	t_write(path, "{\"a\": ", 6);
	ck_assert_int_eq(chdir(t_golden()), 0);
	ck_assert_int_eq(t_run(argv, &out, &err), 2);
	ck_assert_ptr_nonnull(strstr(err, "all_results.json: cannot update, not valid JSON"));
	char *after = t_read(path, NULL);
	ck_assert_str_eq(after, "{\"a\": ");
	t_rmtree(dir);
	free(after), free(dir), free(out), free(err);
}
END_TEST

START_TEST(test_unwritable_dir)
{
	char *out, *err;
	char *argv[] = { "memshim-format", "--json-dir", "in/seed.json/sub", "in/seed.json", NULL };
	ck_assert_int_eq(chdir(t_golden()), 0);
	ck_assert_int_eq(t_run(argv, &out, &err), 2);
	ck_assert_str_eq(err, "memshim-format: in/seed.json/sub: cannot create directory: Not a directory\n");
	free(out), free(err);
}
END_TEST

Suite *results_suite(void)
{
	Suite *s = suite_create("results");
	TCase *tc = tcase_create("json-dir");
	tcase_add_test(tc, test_seed);
	tcase_add_test(tc, test_widths);
	tcase_add_test(tc, test_update_new_keys_win);
	tcase_add_test(tc, test_several_files_per_rank);
	tcase_add_test(tc, test_merge_writes_per_rank);
	tcase_add_test(tc, test_snapshot_open_stages);
	tcase_add_test(tc, test_json_writer);
	tcase_add_test(tc, test_bad_existing);
	tcase_add_test(tc, test_unwritable_dir);
	suite_add_tcase(s, tc);
	return s;
}
