/* memshim run on a real job (fixtures/job_overlap.c under the real library): a parent holding
 * 20 MiB, two children it execs holding 40 and 60 MiB and a child it forks holding 30 MiB above
 * what it inherited, all four at once between a handshake and a release.  The combined peak that
 * memshim run prints is their sum, at a moment inside that window, with who held what; the
 * whole job's keys of --json-dir on the files the run left say the same.
 *
 * Why the tolerances: each process's timeline records a point the moment its live memory moves by
 * more than one step (max(1 MiB, 1% of its peak)), with the exact live then, so its step function
 * is within one step of its live at every moment; each holding here is one malloc, a point of its
 * own, and everything else a process holds (its stdio buffer) is far under 1 MiB.  So what each
 * held at the combined peak is its amount to within 1 MiB, and the sum is 150 MiB to within the
 * sum of the steps, the "within" the run prints (4 MiB here). */
#include "util.h"

#include <glob.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB 1048576.0

static const char *need_env(const char *name)
{
	const char *v = getenv(name);
	ck_assert_msg(v && *v, "%s is not set (run through make check-formatter)", name);
	return v;
}

/* The source tree's layout in TREE: scripts/memshim, and build/ with the real library and
 * memshim-format, as memshim run finds them. */
static void lay_out(const char *tree, char *script, size_t size)
{
	char path[4300];
	size_t len;
	snprintf(path, sizeof path, "%s/scripts", tree);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(script, size, "%s/scripts/memshim", tree);
	char *text = t_read(need_env("MF_SCRIPT"), &len);
	ck_assert_ptr_nonnull(text);
	t_write(script, text, len);
	free(text);
	ck_assert_int_eq(chmod(script, 0755), 0);
	snprintf(path, sizeof path, "%s/build", tree);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/build/libmemshim.so", tree);
	ck_assert_int_eq(symlink(need_env("MF_SHIM_LIB"), path), 0);
	snprintf(path, sizeof path, "%s/build/memshim-format", tree);
	ck_assert_int_eq(symlink(need_env("MF_FORMAT_BIN"), path), 0);
}

/* memshim run --output m.json --json-dir TREE/run-results -- PROG in TREE/run; its stdout and
 * stderr into *OUT and *ERR. */
static int run_job(const char *tree, const char *script, const char *prog, char **out, char **err)
{
	char run[4300], o[4300], e[4300], live[4300], results[4300];
	snprintf(run, sizeof run, "%s/run", tree);
	snprintf(results, sizeof results, "%s/run-results", tree);
	ck_assert_int_eq(mkdir(run, 0755), 0);
	snprintf(o, sizeof o, "%s/stdout", tree);
	snprintf(e, sizeof e, "%s/stderr", tree);
	snprintf(live, sizeof live, "%s/live", tree);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (chdir(run) || !freopen(o, "w", stdout) || !freopen(e, "w", stderr))
			_exit(99);
		unsetenv("LD_PRELOAD");
		unsetenv("MEMSHIM_OUTPUT");
		unsetenv("MEMSHIM_STAGES");
		unsetenv("MEMSHIM_CHILDREN_DIR");
		setenv("MEMSHIM_LIVE_DIR", live, 1); /* the records of this run, not the user's */
		setenv("MEMSHIM_CGROUP_DIR", "none", 1);
		execl(script, "memshim", "run", "--output", "m.json", "--json-dir", results, "--", prog, (char *)NULL);
		_exit(98);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	*out = t_read(o, NULL);
	*err = t_read(e, NULL);
	return st;
}

struct proc {
	int pid, mb;
};

/* The fixture's stdout: "pid P holds N" four times, then "forked T" and "released T". */
static void read_fixture(const char *out, struct proc p[4], double *forked, double *released)
{
	const char *s = out;
	for (int i = 0; i < 4; i++) {
		int n = 0;
		ck_assert_msg(sscanf(s, "pid %d holds %d\n%n", &p[i].pid, &p[i].mb, &n) == 2 && n, "stdout: %s", out);
		s += n;
	}
	ck_assert_msg(sscanf(s, "forked %lf\nreleased %lf", forked, released) == 2, "stdout: %s", out);
}

/* The earliest start_time of the run's files (the common clock's zero). */
static double origin_of(char **paths, size_t n)
{
	double origin = INFINITY;
	for (size_t i = 0; i < n; i++) {
		json_t *doc = json_load_file(paths[i], 0, NULL);
		ck_assert_msg(doc != NULL, "%s", paths[i]);
		origin = fmin(origin, json_number_value(json_object_get(doc, "start_time")));
		json_decref(doc);
	}
	return origin;
}

static double key(json_t *job, const char *fmt, int pid)
{
	char name[128];
	snprintf(name, sizeof name, fmt, pid);
	json_t *v = json_object_get(job, name);
	ck_assert_msg(json_is_number(v), "no %s in job_results.json", name);
	return json_number_value(v);
}

START_TEST(test_overlapping_children_add_up)
{
	char *tree = t_tmpdir(), script[4300], pattern[4300], dir[4300], *out, *err;
	struct proc p[4];
	double forked, released;
	lay_out(tree, script, sizeof script);
	int st = run_job(tree, script, need_env("MF_JOB_PROG"), &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s%s", st, out, err);
	read_fixture(out, p, &forked, &released);

	/* what memshim run printed: the combined peak, when, and a row per process */
	const char *sec = strstr(err, "\n***** combined CPU over time (4 processes on one clock) *****\n");
	ck_assert_msg(sec != NULL, "no combined table of the 4 processes:\n%s", err);
	int peak_mb, sum_mb, within_mb;
	double at_text;
	sec = strchr(sec + 1, '\n') + 1;
	ck_assert_msg(
		sscanf(sec,
		       "  combined CPU peak %dMB at %lfs from the run's start (the own peaks add up to %dMB); within %dMB",
		       &peak_mb, &at_text, &sum_mb, &within_mb) == 4,
		"%s", sec);
	ck_assert_int_eq(peak_mb, 150);
	ck_assert_int_eq(sum_mb, 150); /* each peaked while the others held theirs */
	int held_mb[4];
	for (int i = 0; i < 4; i++) {
		char want[64];
		int pid, own_mb;
		double own_at;
		snprintf(want, sizeof want, "\n  pid %d ", p[i].pid);
		const char *row = strstr(sec, want);
		ck_assert_msg(row != NULL, "no row for pid %d:\n%s", p[i].pid, sec);
		ck_assert_int_eq(sscanf(row + 1, "  pid %d %dMB %lfs %dMB", &pid, &own_mb, &own_at, &held_mb[i]), 4);
		ck_assert_msg(held_mb[i] == p[i].mb && own_mb == p[i].mb, "pid %d holds %d MiB:\n%s", pid, p[i].mb,
			      sec);
	}

	/* the whole job's keys over the same files, as --json-dir writes them */
	snprintf(pattern, sizeof pattern, "%s/run/m.json*", tree);
	glob_t g;
	ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
	ck_assert_uint_eq(g.gl_pathc, 4);
	snprintf(dir, sizeof dir, "%s/results", tree);
	char *argv[10] = { "memshim-format", "--auto-merge", "--json-dir", dir, "--" }, *fo, *fe;
	for (size_t i = 0; i < 4; i++)
		argv[5 + i] = g.gl_pathv[i];
	argv[9] = NULL;
	ck_assert_int_eq(t_run(argv, &fo, &fe), 0);
	ck_assert_str_eq(fe, "");
	ck_assert_msg(strstr(fo, "combined CPU peak 150MB"), "%s", fo);
	char path[4400];
	snprintf(path, sizeof path, "%s/job_results.json", dir);
	json_t *job = json_load_file(path, 0, NULL);
	ck_assert_msg(job != NULL, "no %s", path);
	double peak = key(job, "job_mem_cpu_peak", 0), at = key(job, "job_mem_cpu_peak_at", 0);
	double within = key(job, "job_mem_cpu_peak_within", 0), held = 0;
	ck_assert_msg(within == 4 * MIB && fabs(peak - 150 * MIB) <= within, /* four steps of 1 MiB */
		      "peak %.0f, within %.0f", peak, within);
	ck_assert_int_eq((int)(peak / MIB), peak_mb);
	ck_assert_msg(fabs(at - at_text) <= 0.005 + 1e-9, "at %.6f, printed %.2f", at, at_text);
	/* the moment is inside the window where the four held together */
	double origin = origin_of(g.gl_pathv, g.gl_pathc);
	ck_assert_msg(origin + at >= forked - 1e-3 && origin + at <= released + 1e-3,
		      "combined peak at %.6f, the four held together from after %.6f to %.6f", origin + at, forked,
		      released);
	for (int i = 0; i < 4; i++) {
		double h = key(job, "job_mem_cpu_peak_pid%d", p[i].pid);
		ck_assert_msg(fabs(h - p[i].mb * MIB) < MIB, "pid %d held %.0f, holds %d MiB", p[i].pid, h, p[i].mb);
		ck_assert_int_eq((int)(h / MIB), held_mb[i]);
		held += h;
	}
	ck_assert_msg(held == peak, "the shares add up to %.0f, the peak is %.0f", held, peak);
	json_decref(job);
	/* memshim run --json-dir wrote the same files itself */
	char ran[4400];
	snprintf(ran, sizeof ran, "%s/run-results/job_results.json", tree);
	char *mine = t_read(path, NULL), *theirs = t_read(ran, NULL);
	ck_assert_msg(theirs != NULL, "memshim run --json-dir wrote no %s", ran);
	ck_assert_str_eq(theirs, mine);
	free(mine), free(theirs);
	globfree(&g);
	free(fo), free(fe), free(out), free(err);
	t_rmtree(tree);
	free(tree);
}
END_TEST

Suite *job_suite(void)
{
	Suite *s = suite_create("job");
	TCase *tc = tcase_create("job");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_overlapping_children_add_up);
	suite_add_tcase(s, tc);
	return s;
}
