/* Integration: where the metrics files go.  Children with their own output or the inherited one
 * (".<pid>"), MEMSHIM_CHILDREN_DIR, %p, %r, %l and %h in MEMSHIM_OUTPUT, a template naming the rank
 * taken as given, and an output directory that cannot take the file falling back to $TMPDIR. */

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"
#include "alloc_modes.h"
#include "child.h"

static struct run r;

/* PATH holds TEXT (an earlier file the program's must not replace). */
static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* The pid on the stdout line "PREFIX <pid> status <status>", whose status must be 0. */
static int child_pid(const char *prefix)
{
	const char *line = r.out;
	while (line && strncmp(line, prefix, strlen(prefix)) != 0)
		line = (line = strchr(line, '\n')) ? line + 1 : NULL;
	int pid = 0, st = -1;
	ck_assert_msg(line && sscanf(line + strlen(prefix), " %d status %d", &pid, &st) == 2, "stdout: %s", r.out);
	ck_assert_int_eq(st, 0);
	return pid;
}

START_TEST(a_child_with_its_own_output_writes_there)
{
	char dir[64], own[96];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(own, sizeof own, "%s/child.json", dir);
	const char *argv[] = { built("preload/output_fixture"), "child_output", own, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	int child = child_pid("child");
	json_error_t err;
	json_t *c = json_load_file(own, 0, &err);
	ck_assert_msg(c != NULL, "no file at the child's own path %s", own);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "pid")), child);
	ck_assert(json_is_true(json_object_get(c, "is_child")));
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "root_pid")),
			 json_integer_value(json_object_get(m, "pid")));
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
	json_decref(c);
	json_decref(m);
}
END_TEST

/* Its own children add ".<pid>" to its path; an exec in place keeps its path. */
START_TEST(a_child_with_its_own_output_is_the_root_of_its_descendants)
{
	char dir[64], own[96], name[64];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(own, sizeof own, "%s/child.json", dir);
	const char *argv[] = { built("preload/output_fixture"), "child_output", own, "family", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	int child = child_pid("child"), grandchild = child_pid("grandchild");
	json_error_t err;
	json_t *c = json_load_file(own, 0, &err);
	ck_assert_msg(c != NULL, "no file at %s after the exec in place", own);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "pid")), child);
	json_decref(c);
	snprintf(name, sizeof name, "child.json.%d", grandchild);
	ck_assert_int_eq(count_files(dir, name, NULL, 0), 1);
	ck_assert_int_eq(count_files(dir, "child.json.", NULL, 0), 1);
	ck_assert_int_eq(count_files(r.dir, "m.json.", NULL, 0), 0);
}
END_TEST

START_TEST(a_child_with_the_inherited_output_adds_its_pid)
{
	char dir[64], name[64];
	make_dir(dir, sizeof dir, 0755, 0);
	setenv("BUILD", built("."), 1); /* absolute, for the chdir */
	ck_assert_int_eq(chdir(dir), 0); /* the child runs in "/": the root's directory counts */
	const char *argv[] = { built("preload/output_fixture"), "child_output", "", NULL };
	const char *env[] = { "MEMSHIM_OUTPUT=relative.json", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	int child = child_pid("child");
	snprintf(name, sizeof name, "relative.json.%d", child);
	ck_assert_int_eq(count_files(dir, name, NULL, 0), 1);
	ck_assert_int_eq(count_files(dir, "relative.json", NULL, 0), 2);
}
END_TEST

/* MEMSHIM_CHILDREN_DIR: children that write their parent's name (forked or exec'd, ".<pid>" or
 * their own %p) write it there; the process that owns the name keeps it where it is. */
/* A run's directory DIR (a mkdtemp template) with a directory SUB in it (its path into SUBDIR, 64
 * bytes), and MEMSHIM_OUTPUT=DIR/m.json into OUT (128 bytes). */
static void run_dir_with(char *dir, const char *sub, char *subdir, char *out)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(subdir, 64, "%s/%s", dir, sub);
	ck_assert_int_eq(mkdir(subdir, 0755), 0);
	snprintf(out, 128, "MEMSHIM_OUTPUT=%s/m.json", dir);
}

START_TEST(children_write_into_the_children_dir)
{
	char dir[] = "/tmp/memshim-kids.XXXXXX", kids[64], out[128], kdir[128], name[64];
	run_dir_with(dir, "kids", kids, out);
	snprintf(kdir, sizeof kdir, "MEMSHIM_CHILDREN_DIR=%s", kids);
	const char *env[] = { out, kdir, NULL };
	const char *sh[] = { "/bin/sh", "-c", "/bin/true; /bin/true", NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, sh, env), 0);
	ck_assert_int_eq(count_files(dir, "m.json", NULL, 0), 1);
	ck_assert_int_eq(count_files(kids, "m.json.", NULL, 0), 2);
	/* a forked child (no exec), and a %p name */
	snprintf(out, sizeof out, "MEMSHIM_OUTPUT=%s/k_%%p.json", dir);
	const char *fork_argv[] = { built("preload/alloc_fixture"), "fork", NULL };
	ck_assert_int_eq(run_under_shim(&x, fork_argv, env), 0);
	int child = atoi(strstr(x.out, "child ") + 6);
	snprintf(name, sizeof name, "k_%d.json", child);
	ck_assert_int_eq(count_files(kids, name, NULL, 0), 1);
	ck_assert_int_eq(count_files(dir, "k_", NULL, 0), 1); /* the parent's own */
}
END_TEST

/* Files in DIR named "m.json.<digits>" and nothing more. */
static int plain_child_names(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		const char *p = e->d_name;
		if (strncmp(p, "m.json.", 7) != 0)
			continue;
		p += 7;
		n += *p && strspn(p, "0123456789") == strlen(p);
	}
	if (d)
		closedir(d);
	return n;
}

/* A MEMSHIM_CHILDREN_DIR that does not exist: one warning from the run's first process, and each
 * child's file in $TMPDIR under its own name (before: no warning, an empty "m.json" claimed there
 * and "m.json.<pid>.<pid>" for every child but the first). */
START_TEST(a_missing_children_dir_warns_once_and_names_stay)
{
	char dir[] = "/tmp/memshim-kids.XXXXXX", tmp[64], out[128], kdir[128], tenv[96];
	run_dir_with(dir, "tmp", tmp, out);
	snprintf(kdir, sizeof kdir, "MEMSHIM_CHILDREN_DIR=%s/none", dir);
	snprintf(tenv, sizeof tenv, "TMPDIR=%s", tmp);
	const char *env[] = { out, kdir, tenv, NULL };
	const char *sh[] = { "/bin/sh", "-c", "/bin/true; /bin/true; /bin/true", NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, sh, env), 0);
	const char *w = strstr(x.err, "memshim: MEMSHIM_CHILDREN_DIR");
	ck_assert_msg(w && !strstr(w + 1, "memshim:") && strstr(x.err, "memshim:") == w, "stderr: %s", x.err);
	ck_assert_int_eq(count_files(dir, "m.json", NULL, 0), 1);
	ck_assert_int_eq(count_files(tmp, "m.json", NULL, 0), 3); /* nothing claimed under the base name */
	ck_assert_int_eq(plain_child_names(tmp), 3);
}
END_TEST

START_TEST(pid_in_output_path_is_expanded)
{
	static char env0[400];
	snprintf(env0, sizeof env0, "MEMSHIM_OUTPUT=%s", "/tmp/memshim-pid-test-%p.json");
	const char *env[] = { env0, NULL };
	run_alloc_mode(&r, "fork", env);
	int child = 0, st;
	ck_assert_int_eq(sscanf(r.out, "child %d status %d", &child, &st), 2);
	char path[128];
	snprintf(path, sizeof path, "/tmp/memshim-pid-test-%d.json", child);
	ck_assert_int_eq(access(path, R_OK), 0);
	unlink(path);
}
END_TEST

/* %r, %l and %h in MEMSHIM_OUTPUT: the launcher's rank and local rank and the host name; a process
 * without a rank gets "pid<N>" there, so its file name stays its own. */
START_TEST(rank_and_host_placeholders)
{
	char dir[] = "/tmp/memshim-ranks.XXXXXX", out[200], host[256], path[600];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out, sizeof out, "MEMSHIM_OUTPUT=%s/m_%%r_%%l_%%h.json", dir);
	gethostname(host, sizeof host);
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *ranked[] = { out, "RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4", NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, ranked), 0);
	snprintf(path, sizeof path, "%s/m_3_1_%s.json", dir, host);
	ck_assert_msg(access(path, F_OK) == 0, "no %s", path);
	const char *unranked[] = { out, "RANK", "LOCAL_RANK", NULL };
	ck_assert_int_eq(run_under_shim(&x, argv, unranked), 0);
	char name[300];
	snprintf(name, sizeof name, "m_pid");
	ck_assert_int_eq(count_files(dir, name, NULL, 0), 1);
}
END_TEST

/* torchrun's second attempt after a rank failed (TORCHELASTIC_RESTART_COUNT=1): the rank's file
 * says so, and the file the failed attempt left under the same name is moved aside to
 * NAME.before-restart1 instead of being replaced; a first attempt replaces as before. */
START_TEST(a_restarted_rank_keeps_the_failed_attempts_file)
{
	char dir[] = "/tmp/memshim-ranks.XXXXXX", out[200], path[600], aside[700];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out, sizeof out, "MEMSHIM_OUTPUT=%s/m_%%r.json", dir);
	snprintf(path, sizeof path, "%s/m_0.json", dir);
	snprintf(aside, sizeof aside, "%s.before-restart1", path);
	write_text(path, "{\"attempt\": 0}");
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *again[] = { out, "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=2", "TORCHELASTIC_RESTART_COUNT=1", NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, again), 0);
	json_error_t err;
	json_t *kept = json_load_file(aside, 0, &err), *m = json_load_file(path, 0, &err);
	ck_assert_msg(kept && json_integer_value(json_object_get(kept, "attempt")) == 0, "no %s", aside);
	ck_assert_msg(m != NULL, "no m_0.json: %s", err.text);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(m, "rank"), "restart")), 1);
	json_decref(kept);
	json_decref(m);
	/* the first attempt (restart 0) replaces what is there: another run's file, kept by memshim run */
	const char *first[] = { out, "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=2", "TORCHELASTIC_RESTART_COUNT=0", NULL };
	ck_assert_int_eq(run_under_shim(&x, argv, first), 0);
	ck_assert_int_eq(count_files(dir, "m_0.json", NULL, 0), 2); /* m_0.json and the one kept aside */
	unlink(aside);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* A template that names the rank or the pid is taken as given by the ranks (children of a launcher
 * that has none): m_0.json, not m_0.json.<pid>.  A process that inherited its parent's rank (a
 * forked worker, a helper the rank runs) adds ".<pid>", so it never replaces the rank's file. */
START_TEST(a_template_naming_the_rank_is_taken_as_given)
{
	char dir[] = "/tmp/memshim-ranks.XXXXXX", out[200], run_dir[200], name[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out, sizeof out, "MEMSHIM_OUTPUT=%s/m_%%r.json", dir);
	/* the helper's file as memshim run keeps it (in its run's directory, here the same), which a
	 * plain LD_PRELOAD does not write at all */
	snprintf(run_dir, sizeof run_dir, "MEMSHIM_RUN_DIR=%s", dir);
	const char *argv[] = { "/bin/sh", "-c", "RANK=0 /bin/sh -c '/bin/true; echo $$'; "
			       "LOCAL_RANK=1 NODE_RANK=0 WORLD_SIZE=2 /bin/true", NULL };
	const char *env[] = { out, run_dir, "RANK", "LOCAL_RANK", "MEMSHIM_RANK_HELD", NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, env), 0);
	int rank0 = atoi(x.out);
	ck_assert_int_gt(rank0, 0);
	ck_assert_int_eq(count_files(dir, "m_0.json", NULL, 0), 2); /* the rank's, its helper's */
	snprintf(name, sizeof name, "%s/m_0.json", dir);
	json_error_t err;
	json_t *m = json_load_file(name, 0, &err);
	ck_assert_msg(m != NULL, "no m_0.json: %s", err.text);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "pid")), rank0);
	json_decref(m);
	/* Lightning's ddp child: LOCAL_RANK and NODE_RANK, no RANK */
	snprintf(name, sizeof name, "%s/m_1.json", dir);
	m = json_load_file(name, 0, &err);
	ck_assert_msg(m != NULL, "no m_1.json: %s", err.text);
	json_t *rank = json_object_get(m, "rank");
	ck_assert_int_eq(json_integer_value(json_object_get(rank, "rank")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(rank, "node_rank")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(rank, "source")), "lightning");
	json_decref(m);
	ck_assert_int_eq(count_files(dir, "m_pid", NULL, 0), 1); /* the shell: no rank */
	ck_assert_int_eq(count_files(dir, "m_", NULL, 0), 4);
}
END_TEST

/* An output directory that cannot take the file is reported at start, and the file goes to
 * $TMPDIR under the same name instead of being lost at exit; a placeholder in the file's name
 * (not its directory) is no reason to wait (the %p form once lost the file). */
START_TEST(bad_output_directory_falls_back_at_start)
{
	static const char *const names[] = { "run.json", "run_%p.json" };
	char tmp[] = "/tmp/memshim-fallback.XXXXXX", tmpdir[64], output[96], path[128];
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
	snprintf(output, sizeof output, "MEMSHIM_OUTPUT=/nonexistent-memshim-dir/%s", names[_i]);
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *env[] = { output, tmpdir, NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, env), 0);
	ck_assert(WIFEXITED(x.status) && WEXITSTATUS(x.status) == 0);
	snprintf(path, sizeof path, "writing %s/%s instead", tmp, names[_i]);
	ck_assert_msg(strstr(x.err, path) && strstr(x.err, "/nonexistent-memshim-dir"), "%s", x.err);
	ck_assert_ptr_eq(strstr(strstr(x.err, "memshim:") + 1, "memshim:"), NULL); /* one line */
	ck_assert_msg(count_files(tmp, "run", NULL, 0) == 1, "no run*.json in %s: %s", tmp, x.err);
}
END_TEST

/* An output whose directory passes the start's check and still takes no file (/proc for root, who
 * may write anywhere: no file can be made there) falls back when the file is written, as
 * an unwritable directory does at start: one warning naming the cause, the file in $TMPDIR. */
START_TEST(an_output_refused_only_at_exit_falls_back)
{
	char tmp[] = "/tmp/memshim-fallback.XXXXXX", tmpdir[64], path[128];
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *env[] = { "MEMSHIM_OUTPUT=/proc/memshim-run.json", tmpdir, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	snprintf(path, sizeof path, "writing %s/memshim-run.json instead\n", tmp);
	ck_assert_msg(strstr(r.err, "memshim: cannot write metrics file /proc/memshim-run.json: ") && strstr(r.err, path),
		      "%s", r.err);
	ck_assert_int_eq(memshim_lines(r.err), 1);
	snprintf(path, sizeof path, "%s/memshim-run.json", tmp);
	json_error_t je;
	json_t *m = json_load_file(path, 0, &je);
	ck_assert_msg(m != NULL, "%s: %s", path, je.text);
	ck_assert(json_is_true(json_object_get(m, "complete")));
	ck_assert_int_eq(metric(m, "simple_calls"), 1);
	json_decref(m);
}
END_TEST

/* MEMSHIM_OUTPUT naming a directory (with or without a '/' at the end) is caught at start, as an
 * unwritable directory is: one warning, and the file goes to $TMPDIR under the default name. */
START_TEST(an_output_naming_a_directory_falls_back_at_start)
{
	char tmp[] = "/tmp/memshim-fallback.XXXXXX", out_dir[] = "/tmp/memshim-outdir.XXXXXX";
	char tmpdir[64], output[96], path[128];
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	ck_assert_ptr_nonnull(mkdtemp(out_dir));
	snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
	snprintf(output, sizeof output, "MEMSHIM_OUTPUT=%s%s", out_dir, _i ? "/" : "");
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *env[] = { output, tmpdir, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	snprintf(path, sizeof path, "it is a directory; writing %s/memshim_metrics.json instead\n", tmp);
	ck_assert_msg(strstr(r.err, path) && strstr(r.err, out_dir), "%s", r.err);
	ck_assert_int_eq(memshim_lines(r.err), 1);
	ck_assert_int_eq(count_files(tmp, "memshim_metrics.json", NULL, 0), 1);
	ck_assert_int_eq(rmdir(out_dir), 0); /* nothing was written in it */
}
END_TEST

/* A fallback name that is taken already (an earlier run's file, another user's that could not be
 * replaced) gets ".<pid>": the earlier file stays as it was, and the warning names both. */
START_TEST(a_taken_fallback_name_gets_the_pid)
{
	char tmp[] = "/tmp/memshim-fallback.XXXXXX", tmpdir[64], earlier[96], name[64], want[256];
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
	snprintf(earlier, sizeof earlier, "%s/run.json", tmp);
	write_text(earlier, "earlier\n");
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *env[] = { "MEMSHIM_OUTPUT=/nonexistent-memshim-dir/run.json", tmpdir, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	ck_assert_int_eq(count_files(tmp, "run.json.", name, sizeof name), 1);
	snprintf(want, sizeof want, "writing %s/%s instead (%s is another run's)\n", tmp, name, earlier);
	ck_assert_msg(strstr(r.err, want), "want %s in: %s", want, r.err);
	ck_assert_int_eq(memshim_lines(r.err), 1);
	char file[128], *end;
	snprintf(file, sizeof file, "%s/%s", tmp, name);
	json_error_t je;
	json_t *m = json_load_file(file, 0, &je);
	ck_assert_msg(m != NULL, "%s: %s", file, je.text);
	long pid = strtol(name + strlen("run.json."), &end, 10);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "pid")), pid);
	json_decref(m);
	FILE *fp = fopen(earlier, "r");
	ck_assert_ptr_nonnull(fp);
	char text[16] = "";
	ck_assert_ptr_nonnull(fgets(text, sizeof text, fp));
	fclose(fp);
	ck_assert_str_eq(text, "earlier\n");
}
END_TEST

/* Two runs whose output cannot be written, the second starting while the first runs (ranks of one
 * job, `xargs -P`): the first claims the fallback name at its start, the second takes ".<pid>".
 * Before the claim both wrote run.json and the one ending last was the only file left. */
START_TEST(runs_at_once_take_fallback_names_of_their_own)
{
	char tmp[] = "/tmp/memshim-fallback.XXXXXX", tmpdir[64];
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
	const char *env[] = { "MEMSHIM_OUTPUT=/nonexistent-memshim-dir/run.json", tmpdir, NULL };
	char **envp = shim_env(tmp, env);
	pid_t first = fork();
	ck_assert_int_ge(first, 0);
	if (first == 0) {
		execle("/bin/sleep", "sleep", "1", (char *)NULL, envp);
		_exit(127);
	}
	usleep(300000);
	pid_t second = fork();
	ck_assert_int_ge(second, 0);
	if (second == 0) {
		execle("/bin/sleep", "sleep", "0.1", (char *)NULL, envp);
		_exit(127);
	}
	int st1, st2;
	waitpid(second, &st2, 0);
	waitpid(first, &st1, 0);
	ck_assert(WIFEXITED(st1) && WEXITSTATUS(st1) == 0 && WIFEXITED(st2) && WEXITSTATUS(st2) == 0);
	ck_assert_int_eq(count_files(tmp, "run.json", NULL, 0), 2);
}
END_TEST

/* A MEMSHIM_ name that is no setting (a misspelt MEMSHIM_STAGE would leave the defaults) gets one
 * warning with the setting it is closest to; the pytest plugin's own variable none. */
START_TEST(unknown_settings_are_named)
{
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *env[] = { "MEMSHIM_STAGE=train=train_epoch", "MEMSHIM_PYTEST_REEXEC=1", NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, env), 0);
	ck_assert(WIFEXITED(x.status) && WEXITSTATUS(x.status) == 0);
	ck_assert_msg(strstr(x.err, "memshim: unknown setting MEMSHIM_STAGE ignored (did you mean MEMSHIM_STAGES?)\n"),
		      "%s", x.err);
	ck_assert_ptr_eq(strstr(strstr(x.err, "memshim:") + 1, "memshim:"), NULL); /* one line */
}
END_TEST

/* MEMSHIM_LOG=debug names every setting's value at start, one line each, and where it came from;
 * a process the first one execs (it inherited the settings) does not say them again. */
START_TEST(debug_log_names_the_effective_settings)
{
	const char *argv[] = { "/bin/sh", "-c", "/bin/true", NULL };
	const char *env[] = { "MEMSHIM_LOG=debug", "MEMSHIM_SITES_RATE=1M", "MEMSHIM_TIMELINE=bogus", NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, env), 0);
	ck_assert(WIFEXITED(x.status) && WEXITSTATUS(x.status) == 0);
	static const char *const lines[] = {
		"memshim: setting MEMSHIM_LOG=debug (source: env)\n",
		"memshim: setting MEMSHIM_SITES_RATE=1048576 bytes (source: env)\n",
		"memshim: setting MEMSHIM_TIMELINE=1 (source: default: the environment's was not valid)\n",
		"memshim: setting MEMSHIM_FOLLOW_CHILDREN=1 (source: default)\n",
		"memshim: setting MEMSHIM_SNAPSHOT_INTERVAL=auto (source: default)\n",
	};
	for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
		ck_assert_msg(strstr(x.err, lines[i]), "no \"%s\" in: %s", lines[i], x.err);
	int settings = 0;
	for (const char *p = x.err; (p = strstr(p, "memshim: setting MEMSHIM_")); p++)
		settings++;
	ck_assert_int_eq(settings, 13); /* each of config.c's settings once: not again in /bin/true */
}
END_TEST

/* A '%' that is no placeholder is kept as written, with one warning saying so. */
START_TEST(an_unknown_placeholder_is_named)
{
	char dir[] = "/tmp/memshim-pct.XXXXXX", output[96], path[128];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(output, sizeof output, "MEMSHIM_OUTPUT=%s/m_%%q.json", dir);
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *env[] = { output, NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, env), 0);
	ck_assert_msg(strstr(x.err, "%q is no placeholder (%p, %r, %l, %h, %%); kept as written"), "%s", x.err);
	snprintf(path, sizeof path, "%s/m_%%q.json", dir);
	ck_assert_msg(access(path, F_OK) == 0, "no %s", path);
}
END_TEST

/* The settings are read in one pass over the environment at start: a name that only begins or
 * ends like a setting is not it, and of two entries of one name the first counts (as getenv). */
START_TEST(the_first_exact_name_in_the_environment_counts)
{
	char dir[] = "/tmp/memshim-env.XXXXXX", shorter[96], longer[96], second[96], path[128];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(shorter, sizeof shorter, "MEMSHIM_OUTPU=%s/shorter.json", dir);
	snprintf(longer, sizeof longer, "MEMSHIM_OUTPUTS=%s/longer.json", dir);
	snprintf(second, sizeof second, "MEMSHIM_OUTPUT=%s/second.json", dir);
	char **base = shim_env(dir, NULL), *envp[1030] = { shorter, longer };
	int n = 2;
	for (; *base && n < 1026; base++)
		envp[n++] = *base;
	envp[n++] = second;
	envp[n] = NULL;
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	pid_t pid = spawn_redirected(dir, argv, envp, NULL);
	int status = -1;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(exit_code(status), 0);
	static const char *const expect[][2] = { { "m.json", "" }, { "second.json", "no " },
						 { "shorter.json", "no " }, { "longer.json", "no " } };
	for (size_t i = 0; i < sizeof expect / sizeof *expect; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, expect[i][0]);
		ck_assert_msg((access(path, F_OK) == 0) == !*expect[i][1], "%sfile %s expected", expect[i][1], path);
		unlink(path);
	}
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("output paths");
	TCase *tc1 = tcase_create("children");
	tcase_set_timeout(tc1, 120);
	tcase_add_test(tc1, a_child_with_its_own_output_writes_there);
	tcase_add_test(tc1, a_child_with_its_own_output_is_the_root_of_its_descendants);
	tcase_add_test(tc1, a_child_with_the_inherited_output_adds_its_pid);
	tcase_add_test(tc1, children_write_into_the_children_dir);
	tcase_add_test(tc1, a_missing_children_dir_warns_once_and_names_stay);
	suite_add_tcase(s, tc1);
	TCase *tc2 = tcase_create("templates");
	tcase_set_timeout(tc2, 120);
	tcase_add_test(tc2, pid_in_output_path_is_expanded);
	tcase_add_test(tc2, debug_log_names_the_effective_settings);
	tcase_add_test(tc2, rank_and_host_placeholders);
	tcase_add_test(tc2, a_restarted_rank_keeps_the_failed_attempts_file);
	tcase_add_test(tc2, a_template_naming_the_rank_is_taken_as_given);
	tcase_add_loop_test(tc2, bad_output_directory_falls_back_at_start, 0, 2);
	tcase_add_loop_test(tc2, an_output_naming_a_directory_falls_back_at_start, 0, 2);
	tcase_add_test(tc2, an_output_refused_only_at_exit_falls_back);
	tcase_add_test(tc2, a_taken_fallback_name_gets_the_pid);
	tcase_add_test(tc2, runs_at_once_take_fallback_names_of_their_own);
	tcase_add_test(tc2, unknown_settings_are_named);
	tcase_add_test(tc2, an_unknown_placeholder_is_named);
	tcase_add_test(tc2, the_first_exact_name_in_the_environment_counts);
	suite_add_tcase(s, tc2);
	return run_suite(s);
}
