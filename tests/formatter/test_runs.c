/* Runs through launchers and helpers: when every process of a run is small and opened
 * no stage (hello world through pyenv's shim, `time python st.py`), the one that did the work
 * stands for the run and the rest are one line each; a launcher (a process that ran the command
 * it was given as another process) is summarised whatever it holds; processes are named as they
 * named themselves (a title over their arguments, a prctl name), and many of them by count. */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB (1 << 20)

/* One process's metrics file DIR/NAME: ARGV a JSON array, COMM NULL or its prctl name, PEAK its
 * CPU peak (a forked one: what it added to what it inherited). */
static void proc(const char *dir, const char *name, int pid, int ppid, int forked, const char *argv,
		 const char *comm, long peak)
{
	char path[4300], text[4096], c[128] = "";
	if (comm)
		snprintf(c, sizeof c, "\"comm\": \"%s\", ", comm);
	int n = snprintf(text, sizeof text,
			 "{\"format\": \"memshim-metrics\", \"version\": 1, \"complete\": true, \"reason\": \"exit\", "
			 "\"pid\": %d, \"ppid\": %d, \"root_pid\": 5000, \"is_child\": %s, \"forked\": %s, "
			 "\"argv\": %s, %s\"start_time\": %d.5, \"end_time\": 1764675012.5, "
			 "\"metrics\": {\"init_mem_cpu_alloc_delta\": %ld, \"init_mem_cpu_peaked_delta\": 0, "
			 "\"init_runtime\": 0.1, \"init_calls\": 1, %s\"process_mem_cpu_peak\": %ld}, "
			 "\"stages\": [{\"name\": \"init\", \"implicit\": true, \"calls\": 1}]}",
			 pid, ppid, pid == 5000 ? "false" : "true", forked ? "true" : "false", argv, c,
			 1764675000 + pid - 5000, peak / 2, forked ? "\"inherited_mem_cpu\": 3000000, " : "", peak);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	t_write(path, text, (size_t)n);
}

/* memshim-format --auto-merge (as memshim run calls it) on every file of DIR named in FILES. */
static int format_run(const char *dir, const char *const *files, char **out, char **err)
{
	char *argv[64] = { "memshim-format", "--auto-merge", "--" };
	char paths[60][4300];
	int n = 3;
	for (int i = 0; files[i] && n < 63; i++, n++) {
		snprintf(paths[i], sizeof paths[i], "%s/%s", dir, files[i]);
		argv[n] = paths[i];
	}
	argv[n] = NULL;
	return t_run(argv, out, err);
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

/* Hello world through pyenv's shim: the shim's bash execs python in place (the root's file), its
 * subshells and the readlink and basename it runs are helpers. */
START_TEST(test_helpers_summarised_behind_the_one_that_worked)
{
	char *dir = t_tmpdir(), *out, *err;
	static char names[40][32];
	const char *files[42] = { "m.json" };
	proc(dir, "m.json", 5000, 4999, 0, "[\"/home/u/.pyenv/versions/3.11.7/bin/python3\", \"-c\", \"print()\"]",
	     NULL, 6 * MB);
	for (int i = 0; i < 30; i++) {
		int forked = i < 20;
		snprintf(names[i], sizeof names[i], "m.json.%d", 5001 + i);
		proc(dir, names[i], 5001 + i, 5000, forked,
		     i < 25 ? "[\"bash\", \"/home/u/.pyenv/libexec/pyenv-hooks\", \"exec\"]"
			    : i < 29 ? "[\"/usr/bin/readlink\", \"pyenv\"]" : "[\"basename\", \"/x/y\"]",
		     NULL, forked ? 6000 : 100000);
		files[i + 1] = names[i];
	}
	files[31] = NULL;
	ck_assert_int_eq(format_run(dir, files, &out, &err), 0);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(count(out, "***** init metrics *****"), 1);
	ck_assert_msg(strstr(out, "/m.json: pid 5000 <==\n"), "%s", out);
	ck_assert_msg(strstr(out, "\nmemshim: 10 other processes (launchers, shells) opened no stage and peaked "
			      "under 16MB: 5 bash, 4 readlink, 1 basename; --all shows them\n"), "%s", out);
	ck_assert_msg(strstr(out, "\nmemshim: 20 forked workers opened no stage of their own; each added <= 6KB "
			      "to the 2MB it inherited at the fork: 20 bash; --all shows them\n"), "%s", out);
	ck_assert_int_le(count(out, "\n"), 40);
	free(out), free(err);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* `conda run python st.py`: conda is a Python of its own, larger than the program it runs through
 * a shell; the program is the one that did the work, conda and the shell one line. */
START_TEST(test_launcher_yields_to_its_command)
{
	char *dir = t_tmpdir(), *out, *err;
	const char *files[] = { "m.json", "m.json.5001", "m.json.5002", NULL };
	proc(dir, "m.json", 5000, 4999, 0,
	     "[\"/opt/conda/bin/python\", \"/opt/conda/bin/conda\", \"run\", \"-n\", \"base\", \"python3\", \"st.py\"]",
	     NULL, 40 * MB);
	proc(dir, "m.json.5001", 5001, 5000, 0, "[\"/bin/bash\", \"/tmp/tmpa8x.sh\"]", NULL, 200000);
	proc(dir, "m.json.5002", 5002, 5001, 0, "[\"/opt/conda/envs/base/bin/python3\", \"st.py\"]", NULL, 6 * MB);
	ck_assert_int_eq(format_run(dir, files, &out, &err), 0);
	ck_assert_int_eq(count(out, "***** init metrics *****"), 1);
	ck_assert_msg(strstr(out, "/m.json.5002: pid 5002, child of 5001 (exec'd) <==\n"), "%s", out);
	/* not "under 16MB": conda held 40MB itself */
	ck_assert_msg(strstr(out, "\nmemshim: 2 other processes (launchers, shells) opened no stage; the largest "
			      "peaked at 40MB: pid 5000 (python), pid 5001 (bash); --all shows them\n"), "%s", out);
	free(out), free(err);
	/* `time python st.py`: the same, time being the smaller */
	const char *timed[] = { "m.json", "m.json.5002", NULL };
	proc(dir, "m.json", 5000, 4999, 0, "[\"/usr/bin/time\", \"python3\", \"st.py\"]", NULL, 90000);
	proc(dir, "m.json.5002", 5002, 5000, 0, "[\"python3\", \"st.py\"]", NULL, 6 * MB);
	ck_assert_int_eq(format_run(dir, timed, &out, &err), 0);
	ck_assert_msg(strstr(out, "/m.json.5002: pid 5002, child of 5000 (exec'd) <==\n"), "%s", out);
	ck_assert_msg(strstr(out, "pid 5000 (time); --all shows them\n"), "%s", out);
	free(out), free(err);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* PostgreSQL: the postmaster's children retitle themselves; one here renamed itself with prctl. */
START_TEST(test_processes_named_as_they_named_themselves)
{
	char *dir = t_tmpdir(), *out, *err;
	const char *files[] = { "m.json", "m.json.5001", "m.json.5002", "m.json.5003", NULL };
	proc(dir, "m.json", 5000, 4999, 0, "[\"/usr/lib/postgresql/15/bin/postgres\", \"-D\", \"data\"]", NULL,
	     3 * MB);
	proc(dir, "m.json.5001", 5001, 5000, 1, "[\"postgres: checkpointer   \"]", NULL, 300000);
	proc(dir, "m.json.5002", 5002, 5000, 1, "[\"postgres: background writer \"]", NULL, 300000);
	proc(dir, "m.json.5003", 5003, 5000, 1, "[\"/usr/lib/postgresql/15/bin/postgres\", \"-D\", \"data\"]",
	     "pg-named", 300000);
	ck_assert_int_eq(format_run(dir, files, &out, &err), 0);
	ck_assert_msg(strstr(out, "/m.json: pid 5000 <==\n"), "%s", out);
	ck_assert_msg(strstr(out, ": pid 5001 (postgres: checkpointer), pid 5002 (postgres: background writer), "
			      "pid 5003 (pg-named); --all shows them\n"), "%s", out);
	free(out), free(err);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* DIR/NAME: a process's file whose native targets (JSON, the file's native_targets) were bound as
 * given. */
static void native(const char *dir, const char *name, int pid, const char *argv, const char *targets)
{
	char path[4300], text[4096];
	int n = snprintf(text, sizeof text,
			 "{\"format\": \"memshim-metrics\", \"version\": 1, \"pid\": %d, \"ppid\": 5000, "
			 "\"root_pid\": 5000, \"is_child\": %s, \"argv\": %s, \"native_targets\": %s, "
			 "\"metrics\": {\"w_mem_cpu_alloc_delta\": 1048576, \"w_runtime\": 0.1, \"w_calls\": 1}, "
			 "\"stages\": [{\"name\": \"w\", \"calls\": 1}]}",
			 pid, pid == 5000 ? "false" : "true", argv, targets);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	t_write(path, text, (size_t)n);
}

/* A target unmatched in a process whose Python stage detection stopped (3.11, a deep recursion)
 * may have run after: the run's line says so instead of "matched no function that ran". */
START_TEST(test_unmatched_after_detection_stopped)
{
	char *dir = t_tmpdir(), *out, *err, path[4300];
	const char *files[] = { "m.json", NULL };
	const char *text = "{\"format\": \"memshim-metrics\", \"version\": 1, \"pid\": 5000, \"root_pid\": 5000, "
			   "\"python_detection_stopped\": true, \"unmatched_targets\": [{\"stage\": \"a\", "
			   "\"target\": \"after\", \"kind\": \"python\"}], \"metrics\": {}, \"stages\": []}";
	snprintf(path, sizeof path, "%s/m.json", dir);
	t_write(path, text, strlen(text));
	ck_assert_int_eq(format_run(dir, files, &out, &err), 0);
	ck_assert_int_eq(count(out, "memshim: stage targets not matched before Python stage detection stopped (a deep "
				    "recursion): a=after\n"), 1);
	ck_assert_msg(!strstr(out, "matched no function that ran"), "%s", out);
	free(out), free(err);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* `timeout 60 ./prog` under a plain LD_PRELOAD: timeout took the name, prog wrote m.json.5001; the
 * dump of m.json alone names the children's files of its run (not another run's m.json.6001) and
 * leaves what the targets matched to the dump of them all (prog found work). */
START_TEST(test_first_file_alone_names_its_childrens)
{
	char *dir = t_tmpdir(), *out, *err;
	native(dir, "m.json", 5000, "[\"timeout\", \"60\", \"./prog\"]",
	       "[{\"target\": \"work\", \"stage\": \"w\", \"bound\": \"none\"}]");
	native(dir, "m.json.5001", 5001, "[\"./prog\"]", "[{\"target\": \"work\", \"stage\": \"w\", \"bound\": \"stack\"}]");
	char other[4400];
	snprintf(other, sizeof other, "%s/m.json.6001", dir);
	const char *another = "{\"format\": \"memshim-metrics\", \"version\": 1, \"pid\": 6001, \"root_pid\": 6000}";
	t_write(other, another, strlen(another));
	char path[4300];
	snprintf(path, sizeof path, "%s/m.json", dir);
	char *argv[] = { "memshim-format", path, NULL };
	ck_assert_int_eq(t_run(argv, &out, &err), 0);
	ck_assert_int_eq(count(out, "memshim: 1 process of this run wrote a file of its own beside it: m.json.5001; "
				    "memshim-format "), 1);
	ck_assert_msg(!strstr(out, "6001") && !strstr(out, "was not found"), "%s", out);
	free(out), free(err);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* `time ./prog` with a stage on prog's function: time has none, prog has it; one found by no
 * process of the run is named once (memshim run leaves the line to the dump). */
START_TEST(test_native_target_judged_over_the_run)
{
	char *dir = t_tmpdir(), *out, *err;
	const char *files[] = { "m.json", "m.json.5001", NULL };
	native(dir, "m.json", 5000, "[\"/usr/bin/time\", \"./prog\"]",
	       "[{\"target\": \"work\", \"stage\": \"w\", \"bound\": \"none\"}, "
	       "{\"target\": \"typo\", \"stage\": \"x\", \"bound\": \"none\"}]");
	native(dir, "m.json.5001", 5001, "[\"./prog\"]",
	       "[{\"target\": \"work\", \"stage\": \"w\", \"bound\": \"stack\"}, "
	       "{\"target\": \"typo\", \"stage\": \"x\", \"bound\": \"none\"}, "
	       "{\"target\": \"read\", \"stage\": \"r\", \"bound\": \"runtime\", \"object\": \"libc.so.6\"}, "
	       "{\"target\": \"log\", \"stage\": \"l\", \"bound\": \"runtime\", \"object\": \"libm.so.6\"}]");
	ck_assert_int_eq(format_run(dir, files, &out, &err), 0);
	ck_assert_msg(!strstr(out, "'work'"), "%s", out);
	ck_assert_int_eq(count(out, "memshim: native stage x: 'typo' was not found in any loaded object "
				    "(in none of the 2 processes)\n"), 1);
	/* a plain name of the C library's, which binds nothing: said as such, with its pinned form */
	ck_assert_int_eq(count(out, "memshim: native stage r: 'read' is a function of libc.so.6, which a plain name "
				    "does not bind"), 1);
	ck_assert_int_eq(count(out, "name it libc.so.6:read\n"), 1);
	ck_assert_int_eq(count(out, "name it libm.so.6:log\n"), 1);
	free(out), free(err);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* A run's good file beside one cut short (a process killed while it wrote, a copy stopped
 * half-way): the good one is shown, the other named with what is wrong, the status says so. */
START_TEST(test_good_file_shown_beside_a_bad_one)
{
	char good[4300], cut[4300], *out, *err;
	snprintf(good, sizeof good, "%s/in/seed.json", t_golden());
	snprintf(cut, sizeof cut, "%s/in/truncated.json", t_golden());
	char *argv[] = { "memshim-format", good, cut, NULL };
	ck_assert_int_eq(t_run(argv, &out, &err), 2);
	ck_assert_msg(strstr(out, "***** train metrics *****\n"), "%s", out);
	ck_assert_msg(strstr(err, "/in/truncated.json: truncated JSON (") && !strstr(err, "seed"), "%s", err);
	free(out), free(err);
}
END_TEST

Suite *runs_suite(void)
{
	Suite *s = suite_create("runs");
	TCase *tc = tcase_create("runs");
	tcase_add_test(tc, test_helpers_summarised_behind_the_one_that_worked);
	tcase_add_test(tc, test_launcher_yields_to_its_command);
	tcase_add_test(tc, test_processes_named_as_they_named_themselves);
	tcase_add_test(tc, test_native_target_judged_over_the_run);
	tcase_add_test(tc, test_first_file_alone_names_its_childrens);
	tcase_add_test(tc, test_unmatched_after_detection_stopped);
	tcase_add_test(tc, test_good_file_shown_beside_a_bad_one);
	suite_add_tcase(s, tc);
	return s;
}
