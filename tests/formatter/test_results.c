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

/* A run of several processes: beside each one's directory, the whole job's combined peaks
 * (job_results.json, and all_results.json of DIR), as make-json-expect.py computes them apart. */
START_TEST(test_whole_job)
{
	char *files[] = { "in/job-parent.json", "in/job-forked.json", "in/job-spawned.json", NULL };
	run_json_dir("wholejob", NULL, files, 0);
}
END_TEST

START_TEST(test_merge_whole_job)
{
	char *files[] = { "--merge", "in/job-spawned.json", "in/job-parent.json", "in/job-forked.json", NULL };
	run_json_dir("wholejob", NULL, files, 0);
}
END_TEST

/* DIR/NAME: a process of a run (pid, parent, rank or -1, forked) holding CPU bytes over time
 * (POINTS, a JSON array of [seconds since its start, bytes]) from START for a second. */
static void job_file(const char *dir, const char *name, int pid, int ppid, int rank, int forked, double start,
		     const char *points)
{
	char path[4300], text[4096], r[128] = "", inh[64] = "";
	if (rank >= 0)
		snprintf(r, sizeof r, "\"rank\": {\"rank\": %d, \"world_size\": 2, \"source\": \"torchrun\"}, ", rank);
	if (forked)
		snprintf(inh, sizeof inh, "\"inherited_mem_cpu\": 1048576, ");
	int n = snprintf(text, sizeof text,
			 "{\"format\": \"memshim-metrics\", \"version\": 1, \"complete\": true, \"pid\": %d, "
			 "\"ppid\": %d, \"root_pid\": 100, \"is_child\": true, \"forked\": %s, %s"
			 "\"argv\": [\"python3\", \"t.py\"], \"start_time\": %.1f, \"end_time\": %.1f, "
			 "\"metrics\": {%s\"w_mem_cpu_alloc_delta\": 0, \"w_runtime\": 1.0, \"w_calls\": 1, "
			 "\"process_mem_cpu_peak\": 67108864}, \"stages\": [{\"name\": \"w\", \"calls\": 1}], "
			 "\"timeline\": {\"series\": [{\"component\": \"cpu\", \"points\": %s}]}}",
			 pid, ppid, forked ? "true" : "false", r, start, start + 1, inh, points);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	t_write(path, text, (size_t)n);
}

/* The keys name each process as its directory does: a rank by its rank, a worker that inherited its
 * parent's rank by its pid; --merge's combined peak is the ranks' alone, the dump's every one shown. */
START_TEST(test_whole_job_names_and_selection)
{
	char *in = t_tmpdir(), *dir = t_tmpdir(), *out, *err, a[4300], b[4300], w[4300], path[4300];
	job_file(in, "r0.json", 201, 100, 0, 0, 1000.0, "[[0.1, 10485760], [0.5, 20971520]]");
	job_file(in, "r1.json", 202, 100, 1, 0, 1000.0, "[[0.2, 31457280]]");
	job_file(in, "w.json", 203, 201, 0, 1, 1000.2, "[[0.1, 42991616]]"); /* 40 MiB above the 1 it inherited */
	snprintf(a, sizeof a, "%s/r0.json", in);
	snprintf(b, sizeof b, "%s/r1.json", in);
	snprintf(w, sizeof w, "%s/w.json", in);
	char *dump[] = { "memshim-format", "--json-dir", dir, a, b, w, NULL };
	ck_assert_int_eq(t_run(dump, &out, &err), 0);
	t_same("stderr", "", err);
	free(out), free(err);
	snprintf(path, sizeof path, "%s/job_results.json", dir);
	char *job = t_read(path, NULL);
	t_same("job_results.json",
	       "{\n"
	       "    \"job_mem_cpu_own_peaks_sum\": 94371840,\n"
	       "    \"job_mem_cpu_peak\": 94371840,\n"
	       "    \"job_mem_cpu_peak_at\": 0.5,\n"
	       "    \"job_mem_cpu_peak_pid203\": 41943040,\n"
	       "    \"job_mem_cpu_peak_rank0\": 20971520,\n"
	       "    \"job_mem_cpu_peak_rank1\": 31457280,\n"
	       "    \"job_mem_cpu_peak_within\": 3145728\n"
	       "}",
	       job);
	free(job);
	snprintf(path, sizeof path, "%s/pid203/w_results.json", dir);
	ck_assert_msg(access(path, F_OK) == 0, "no directory of its own for the worker: %s", path);
	snprintf(path, sizeof path, "%s/rank0/w_results.json", dir);
	ck_assert_int_eq(access(path, F_OK), 0);
	t_rmtree(dir);
	free(dir);
	dir = t_tmpdir();
	char *merge[] = { "memshim-format", "--merge", "--json-dir", dir, a, b, w, NULL };
	ck_assert_int_eq(t_run(merge, &out, &err), 0);
	free(out), free(err);
	snprintf(path, sizeof path, "%s/job_results.json", dir);
	job = t_read(path, NULL);
	ck_assert_msg(strstr(job, "\"job_mem_cpu_peak\": 52428800,\n") && !strstr(job, "pid203"), "%s", job);
	free(job);
	t_rmtree(dir);
	t_rmtree(in);
	free(dir), free(in);
}
END_TEST

/* One process, or processes without a timeline: no job keys, no job file. */
START_TEST(test_whole_job_needs_two_timelines)
{
	char *in = t_tmpdir(), *dir = t_tmpdir(), *out, *err, a[4300], path[4300];
	job_file(in, "r0.json", 201, 100, 0, 0, 1000.0, "[[0.1, 10485760]]");
	snprintf(a, sizeof a, "%s/r0.json", in);
	char *one[] = { "memshim-format", "--json-dir", dir, a, "in/rank1.json", NULL };
	ck_assert_int_eq(chdir(t_golden()), 0);
	ck_assert_int_eq(t_run(one, &out, &err), 0);
	free(out), free(err);
	snprintf(path, sizeof path, "%s/job_results.json", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof path, "%s/all_results.json", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	t_rmtree(dir);
	t_rmtree(in);
	free(dir), free(in);
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
	tcase_add_test(tc, test_whole_job);
	tcase_add_test(tc, test_merge_whole_job);
	tcase_add_test(tc, test_whole_job_names_and_selection);
	tcase_add_test(tc, test_whole_job_needs_two_timelines);
	tcase_add_test(tc, test_json_writer);
	tcase_add_test(tc, test_bad_existing);
	tcase_add_test(tc, test_unwritable_dir);
	suite_add_tcase(s, tc);
	return s;
}
