/* Integration: the live record.  A fixture climbs inside a stage and is killed with
 * SIGKILL; the record it leaves is recovered into a metrics file that shows the climb.  Records
 * appear only where worth it, go at a normal exit, are per process after fork, and are created
 * only in a private directory of the user's own (symlinks, modes, read-only and full file systems). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "child.h"
#include "harness.h"
#include "suite.h"
#include "../../shim/output/live_record.h"

#define NOBODY 65534
#define MIB (1024 * 1024)


static char dir[256], live_dir[PATH_MAX], ready[PATH_MAX];

static void fresh_dir(void)
{
	snprintf(dir, sizeof dir, "/tmp/memshim-live.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(live_dir, sizeof live_dir, "%s/live", dir);
	snprintf(ready, sizeof ready, "%s/ready", dir);
}

/* The harness's environment for a run in DIR with MEMSHIM_LIVE_DIR=LIVE (NULL: not set) and EXTRA
 * (may be NULL).  XDG_RUNTIME_DIR is DIR, so the tools' default directory is the test's own: on a
 * machine shared with other runs, /dev/shm/memshim-<uid> holds records of other builds. */
static char **live_env(const char *live, const char *extra)
{
	static char livevar[PATH_MAX + 64], runtime[PATH_MAX + 32];
	snprintf(livevar, sizeof livevar, "MEMSHIM_LIVE_DIR=%s", live ? live : "");
	snprintf(runtime, sizeof runtime, "XDG_RUNTIME_DIR=%s", dir);
	const char *env[] = { live ? livevar : "MEMSHIM_LIVE_DIR", runtime, extra, NULL };
	return shim_env(dir, env);
}

static pid_t spawn_fixture(const char *mode, char **envp)
{
	const char *argv[] = { built("live/live_fixture"), mode, ready, NULL };
	pid_t pid = spawn_redirected(dir, argv, envp, NULL);
	ck_assert_int_gt(pid, 0);
	return pid;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* Waits up to SECONDS for PATH to exist. */
static void wait_long(const char *path, int seconds)
{
	for (int i = 0; i < seconds * 100 && access(path, F_OK) != 0; i++)
		pause_ms(10);
	ck_assert_msg(access(path, F_OK) == 0, "%s never appeared in %d s", path, seconds);
}

static void wait_for(const char *path)
{
	wait_long(path, 20);
}

static int wait_status(pid_t pid)
{
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

/* live_fixture climbing in a fresh directory, its record in live_dir: its pid once it is ready. */
static pid_t climbing(void)
{
	fresh_dir();
	pid_t pid = spawn_fixture("climb", live_env(live_dir, NULL));
	wait_for(ready);
	return pid;
}

/* Runs a tool with ARGV and MEMSHIM_LIVE_DIR=LIVE (NULL: unset), its stdout and stderr into OUT
 * (SIZE bytes); returns its exit code. */
static int run_tool_live(const char *live, const char *const *argv, char *out, size_t size)
{
	char sub[PATH_MAX + 8], err[1 << 14];
	snprintf(sub, sizeof sub, "%s/tool", dir);
	mkdir(sub, 0755);
	char **envp = live_env(live, NULL);
	for (int i = 0; envp[i]; i++) /* the tools themselves run bare */
		if (!strncmp(envp[i], "LD_PRELOAD=", 11))
			envp[i] = "LD_PRELOAD=";
	pid_t pid = spawn_redirected(sub, argv, envp, NULL);
	ck_assert_int_gt(pid, 0);
	int code = exit_code(wait_status(pid));
	read_back(sub, out, size, err, sizeof err);
	size_t n = strlen(out);
	snprintf(out + n, size - n, "%s", err);
	return code;
}

static int run_tool(const char *const *argv, char *out, size_t size)
{
	return run_tool_live(NULL, argv, out, size);
}

/* The records in DIR (names ending in .live) into NAMES; returns how many. */
static int records(const char *in, char names[][PATH_MAX], int max)
{
	DIR *d = opendir(in);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len > 5 && !strcmp(e->d_name + len - 5, ".live") && n < max)
			snprintf(names[n++], PATH_MAX, "%s/%s", in, e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	ck_assert_msg(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
	return st.st_mode & 07777;
}

/* The record at PATH recovered into DIR/NAME, parsed. */
static json_t *recover(const char *path, const char *name, char *out, size_t size)
{
	char file[PATH_MAX + 64];
	snprintf(file, sizeof file, "%s/%s", dir, name);
	const char *argv[] = { built("memshim-format"), "--recover", path, "-o", file, NULL };
	int code = run_tool(argv, out, size);
	ck_assert_msg(code == 0, "--recover failed (%d): %s", code, out);
	json_error_t je;
	json_t *root = json_load_file(file, 0, &je);
	ck_assert_msg(root != NULL, "%s: %s", file, je.text);
	return root;
}

static long long so_far(json_t *root, const char *stage, const char *member)
{
	json_t *s = stage_of(root, stage);
	ck_assert_msg(s != NULL, "no stage %s", stage);
	ck_assert(json_is_true(json_object_get(s, "open")));
	return json_integer_value(json_object_get(json_object_get(s, "cpu"), member));
}

/* The row of PID in `memshim top --once LIVE_DIR`, with STATE and the open STAGE; --json agrees. */
static void top_lists(pid_t pid, const char *state, const char *stage)
{
	char out[1 << 15], want[64];
	const char *argv[] = { built("memshim-top"), "--once", live_dir, NULL };
	ck_assert_int_eq(run_tool(argv, out, sizeof out), 0);
	snprintf(want, sizeof want, "\n%d ", (int)pid);
	const char *row = strstr(out, want);
	ck_assert_msg(row != NULL, "no row for pid %d in:\n%s", (int)pid, out);
	const char *end = strchr(row + 1, '\n');
	char line[4096];
	snprintf(line, sizeof line, "%.*s", (int)(end ? end - row : (long)strlen(row)), row);
	ck_assert_msg(strstr(line, state) && strstr(line, stage) && strstr(line, "live_fixture climb"),
		      "row: %s", line);
	const char *json[] = { built("memshim-top"), "--json", live_dir, NULL };
	ck_assert_int_eq(run_tool(json, out, sizeof out), 0);
	json_error_t je;
	json_t *rows = json_loads(out, 0, &je), *r = json_array_get(rows, 0);
	ck_assert_msg(rows && json_array_size(rows) == 1, "%s", out);
	ck_assert_int_eq(json_integer_value(json_object_get(r, "pid")), pid);
	ck_assert_str_eq(json_string_value(json_object_get(r, "state")), state);
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "open_stages"), 0)), stage);
	json_decref(rows);
}

/* Sets the last update of the record at PATH to AGO seconds before now (an old killed run). */
static void age_record(const char *path, double ago)
{
	struct ms_live_record r;
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &r, sizeof r, 0), (ssize_t)sizeof r);
	r.update_unix = (double)time(NULL) - ago;
	ck_assert_int_eq(pwrite(fd, &r, sizeof r, 0), (ssize_t)sizeof r);
	close(fd);
}

/* Where ROW_PID's row starts in OUT (a `memshim top --once` table), or NULL. */
static const char *row_of(const char *out, pid_t pid)
{
	char want[32];
	snprintf(want, sizeof want, "\n%d ", (int)pid);
	return strstr(out, want);
}

/* `memshim top` without a run directory: the running first, a process gone for over an hour
 * counted under the table, not listed, unless --all. */
START_TEST(top_lists_the_running_first_and_counts_old_gone_ones)
{
	char out[1 << 15], names[4][PATH_MAX], runtime[PATH_MAX + 32], env_live[PATH_MAX + 32];
	fresh_dir();
	snprintf(runtime, sizeof runtime, "XDG_RUNTIME_DIR=%s", dir); /* top's default directory: DIR/memshim */
	snprintf(env_live, sizeof env_live, "%s/memshim", dir);
	pid_t old = spawn_fixture("climb", live_env(env_live, NULL));
	wait_for(ready);
	kill(old, SIGKILL);
	wait_status(old);
	ck_assert_int_eq(records(env_live, names, 4), 1);
	age_record(names[0], 7200);
	unlink(ready);
	pid_t running = spawn_fixture("climb", live_env(env_live, NULL));
	wait_for(ready);
	const char *once[] = { "/usr/bin/env", "-u", "MEMSHIM_LIVE_DIR", runtime, built("memshim-top"), "--once", NULL };
	ck_assert_int_eq(run_tool(once, out, sizeof out), 0);
	ck_assert_msg(row_of(out, running) && !row_of(out, old), "%s", out);
	ck_assert_msg(strstr(out, "(1 more of processes gone for over an hour: memshim top --all lists them)"), "%s", out);
	const char *all[] = { "/usr/bin/env", "-u", "MEMSHIM_LIVE_DIR", runtime, built("memshim-top"), "--once", "--all",
			      "--sort", "pid", NULL };
	ck_assert_int_eq(run_tool(all, out, sizeof out), 0);
	const char *r = row_of(out, running), *k = row_of(out, old);
	ck_assert_msg(r && k && r < k && !strstr(out, "more of processes gone"), "%s", out);
	ck_assert_msg(strstr(k, "killed"), "%s", out);
	kill(running, SIGKILL);
	wait_status(running);
}
END_TEST

/* The fixture: 40 then 30 MiB in "train", SIGKILL 1.5 s after the climb.  The snapshot
 * file shows the stage at its start; the record shows the climb. */
START_TEST(a_killed_climb_is_recovered_from_its_record)
{
	char out[1 << 15], names[4][PATH_MAX];
	pid_t pid = climbing();
	top_lists(pid, "running", "train");
	pause_ms(1500);
	kill(pid, SIGKILL);
	ck_assert_int_eq(exit_code(wait_status(pid)), 128 + SIGKILL);
	top_lists(pid, "killed", "train");
	ck_assert_int_eq(records(live_dir, names, 4), 1);
	ck_assert_int_eq(mode_of(live_dir), 0700);
	ck_assert_int_eq(mode_of(names[0]), 0600);
	json_t *root = recover(names[0], "recovered.json", out, sizeof out);
	ck_assert_msg(strstr(out, "gone") && strstr(out, "record removed"), "%s", out);
	ck_assert_int_eq(records(live_dir, names, 4), 0); /* read: removed */
	ck_assert_str_eq(json_string_value(json_object_get(root, "reason")), "recovered");
	ck_assert_int_eq(json_integer_value(json_object_get(root, "pid")), pid);
	ck_assert(json_is_false(json_object_get(root, "complete")));
	long long alloc = so_far(root, "train", "alloc_delta");
	ck_assert_msg(alloc >= 70LL * MIB && alloc < 71LL * MIB, "train alloc so far %lld", alloc);
	/* the RSS high-water is read between boundaries too (the last stage boundary came before the
	 * climb): by the 30 MiB allocation's point, 0.3 s in, the first 40 MiB were written */
	long long rss = json_integer_value(json_object_get(json_object_get(root, "metrics"), "process_mem_rss_peak"));
	ck_assert_msg(rss >= 40LL * MIB, "RSS peak %lld", rss);
	json_decref(root);

	/* the dump, as a user reads it */
	char file[PATH_MAX + 32];
	snprintf(file, sizeof file, "%s/recovered.json", dir);
	const char *argv[] = { built("memshim-format"), file, NULL };
	ck_assert_int_eq(run_tool(argv, out, sizeof out), 0);
	ck_assert_msg(strstr(out, "train_mem_cpu_alloc_delta  =   70MB"), "%s", out);
	ck_assert_msg(strstr(out, "from a live record: process killed"), "%s", out);
}
END_TEST

/* Whether the dump TEXT has the line "KEY = VALUE", however its columns are padded (their widths
 * follow the other values, e.g. a runtime of 0.323 or 0.3231). */
static int dump_shows(const char *text, const char *key, const char *value)
{
	for (const char *p = text; (p = strstr(p, key)); p++) {
		const char *v = p + strlen(key) + strspn(p + strlen(key), " ");
		if (*v == '=' && !strncmp(v + 1 + strspn(v + 1, " "), value, strlen(value)))
			return 1;
	}
	return 0;
}

/* kill -9 under a plain LD_PRELOAD: the file at MEMSHIM_OUTPUT is the snapshot the
 * stage's begin wrote, the record holds the climb up to the kill; `memshim-format FILE` shows the
 * record's numbers and says so.  The snapshot is never older than the record by more than the
 * default policy's 2 s. */
START_TEST(a_killed_runs_snapshot_reads_as_its_newer_record)
{
	char out[1 << 15], names[4][PATH_MAX], file[PATH_MAX + 16];
	pid_t pid = climbing();
	snprintf(file, sizeof file, "%s/m.json", dir);
	pause_ms(500);
	kill(pid, SIGKILL);
	ck_assert_int_eq(exit_code(wait_status(pid)), 128 + SIGKILL);
	ck_assert_int_eq(records(live_dir, names, 4), 1);
	json_error_t je;
	json_t *snap = json_load_file(file, 0, &je);
	ck_assert_msg(snap != NULL, "%s: %s", file, je.text);
	ck_assert_str_eq(json_string_value(json_object_get(snap, "reason")), "snapshot");
	struct ms_live_record rec;
	int fd = open(names[0], O_RDONLY);
	ck_assert_int_eq(pread(fd, &rec, sizeof rec, 0), (ssize_t)sizeof rec);
	close(fd);
	double lag = rec.update_unix - json_number_value(json_object_get(snap, "end_time"));
	ck_assert_msg(lag <= 2.0 + 0.5, "the snapshot is %.3f s older than the record", lag);
	json_decref(snap);

	const char *argv[] = { built("memshim-format"), file, NULL };
	ck_assert_int_eq(run_tool_live(live_dir, argv, out, sizeof out), 0);
	ck_assert_msg(dump_shows(out, "train_mem_cpu_alloc_delta", "70MB"), "%s", out);
	ck_assert_msg(strstr(out, "memshim-format: ") && strstr(out, "/m.json: its snapshot is from ") &&
		      strstr(out, "; its live record ") && strstr(out, "is newer ("), "%s", out);
	ck_assert_int_eq(records(live_dir, names, 4), 1); /* read, not recovered: it stays */
}
END_TEST

/* `memshim run` whose command died by a signal writes the files its killed processes could not,
 * from their records, and its dump shows the climb. */
START_TEST(memshim_run_recovers_a_killed_run)
{
	char out[1 << 15], script[4 * PATH_MAX], output[PATH_MAX + 16];
	fresh_dir();
	snprintf(output, sizeof output, "%s/m.json", dir);
	snprintf(script, sizeof script,
		 "%s climb %s & p=$!; while [ ! -e %s ]; do sleep 0.05; done; sleep 1.5; kill -9 $p; wait $p",
		 built("live/live_fixture"), ready, ready);
	char wrapper[PATH_MAX];
	snprintf(wrapper, sizeof wrapper, "%s/../scripts/memshim", built("."));
	const char *argv[] = { wrapper, "run", "--output", output, "--", "/bin/sh", "-c", script, NULL };
	char **envp = live_env(live_dir, NULL);
	for (char **e = envp; *e; e++) /* memshim run preloads the library itself */
		if (!strncmp(*e, "LD_PRELOAD=", 11))
			*e = "MEMSHIM_LOG=warn";
	pid_t pid = spawn_redirected(dir, argv, envp, NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(exit_code(wait_status(pid)), 128 + SIGKILL);
	read_back(dir, out, sizeof out, out + sizeof out / 2, sizeof out / 2);
	const char *text = out + sizeof out / 2;
	ck_assert_msg(strstr(text, "recovered") && strstr(text, "from its live record"), "%s", text);
	ck_assert_msg(dump_shows(text, "train_mem_cpu_alloc_delta", "70MB"), "%s", text);
	char names[4][PATH_MAX];
	ck_assert_int_eq(records(live_dir, names, 4), 0); /* recovered: removed */
}
END_TEST

/* Starts `memshim run --output OUTPUT -- ARGV...` in DIR with the records in LIVE_DIR and EXTRA
 * (NULL, or one "NAME=value") in its environment; OUTER: memshim run itself runs under the library,
 * the first process of an outer run (as `memshim run` inside a tracked program). */
static pid_t spawn_memshim_run_in(const char *output, const char *const *command, const char *extra, int outer)
{
	static char wrapper[PATH_MAX];
	const char *argv[16] = { wrapper, "run", "--output", output, "--" };
	int n = 5;
	for (; *command && n < 15; command++)
		argv[n++] = *command;
	argv[n] = NULL;
	snprintf(wrapper, sizeof wrapper, "%s/../scripts/memshim", built("."));
	char **envp = live_env(live_dir, extra);
	for (char **e = envp; *e && !outer; e++) /* memshim run preloads the library itself */
		if (!strncmp(*e, "LD_PRELOAD=", 11))
			*e = "MEMSHIM_LOG=warn";
	pid_t pid = spawn_redirected(dir, argv, envp, NULL);
	ck_assert_int_gt(pid, 0);
	return pid;
}

static pid_t spawn_memshim_run(const char *output, const char *const *command, const char *extra)
{
	return spawn_memshim_run_in(output, command, extra, 0);
}

/* A command ended by SIGTERM under `memshim run` (timeout, Slurm, docker stop) wrote its own last
 * snapshot: memshim run keeps it (the timeline, the call sites), never replaces it with a poorer
 * file from the record, and the record, which says no more, goes. */
START_TEST(memshim_run_keeps_a_signal_file)
{
	char out[1 << 15], output[PATH_MAX + 16], names[4][PATH_MAX];
	fresh_dir();
	snprintf(output, sizeof output, "%s/m.json", dir);
	const char *command[] = { built("live/live_fixture"), "climb", ready, NULL };
	pid_t pid = spawn_memshim_run(output, command, NULL);
	wait_for(ready);
	ck_assert_int_eq(records(live_dir, names, 4), 1);
	kill(pid, SIGTERM); /* passed on to the command */
	ck_assert_int_eq(exit_code(wait_status(pid)), 128 + SIGTERM);
	read_back(dir, out, sizeof out, out + sizeof out / 2, sizeof out / 2);
	const char *text = out + sizeof out / 2;
	ck_assert_msg(!strstr(text, "recovered"), "%s", text);
	ck_assert_msg(dump_shows(text, "train_mem_cpu_alloc_delta", "70MB"), "%s", text);
	json_error_t je;
	json_t *root = json_load_file(output, 0, &je);
	ck_assert_msg(root != NULL, "%s: %s", output, je.text);
	ck_assert_str_eq(json_string_value(json_object_get(root, "reason")), "signal");
	ck_assert_int_eq(json_integer_value(json_object_get(root, "signal")), SIGTERM);
	ck_assert_int_gt(json_array_size(json_object_get(json_object_get(root, "timeline"), "events")), 0);
	json_decref(root);
	ck_assert_int_eq(records(live_dir, names, 4), 0);
}
END_TEST

/* Kills a fixture climbing in DIR with MEMSHIM_OUTPUT=DIR/NAME; returns its pid (its record stays). */
static pid_t killed_elsewhere(const char *name)
{
	char output[PATH_MAX + 64], flag[PATH_MAX + 16];
	snprintf(output, sizeof output, "MEMSHIM_OUTPUT=%s/%s", dir, name);
	snprintf(flag, sizeof flag, "%s.other", ready);
	const char *argv[] = { built("live/live_fixture"), "climb", flag, NULL };
	pid_t pid = spawn_redirected(dir, argv, live_env(live_dir, output), NULL);
	ck_assert_int_gt(pid, 0);
	wait_for(flag);
	kill(pid, SIGKILL);
	ck_assert_int_eq(exit_code(wait_status(pid)), 128 + SIGKILL);
	return pid;
}

/* The reason in DIR/NAME's metrics file, "" when there is none. */
static const char *reason_of(const char *name, char *buf, size_t size)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	json_t *root = json_load_file(path, 0, NULL);
	snprintf(buf, size, "%s", root ? json_string_value(json_object_get(root, "reason")) : "");
	json_decref(root);
	return buf;
}

/* The record of an earlier, unrelated killed process writing in the same directory is not this
 * run's: `memshim run` recovers its own command's processes only (their root_pid; 1: under an
 * outer memshim, whose root pid they inherit, those started since the run: memshim run itself is
 * then tracked, the outer run's first process, writing outer.json). */
START_TEST(memshim_run_recovers_only_its_own_processes)
{
	char out[1 << 15], script[4 * PATH_MAX], output[PATH_MAX + 16], names[4][PATH_MAX], reason[64];
	char outer[PATH_MAX + 32];
	fresh_dir();
	snprintf(outer, sizeof outer, "MEMSHIM_OUTPUT=%s/outer.json", dir);
	killed_elsewhere("other.json");
	for (time_t now = time(NULL); _i && time(NULL) == now;) /* --since counts whole seconds */
		pause_ms(20);
	ck_assert_int_eq(records(live_dir, names, 4), 1);
	reason_of("other.json", reason, sizeof reason);
	ck_assert_str_ne(reason, "recovered");
	snprintf(output, sizeof output, "%s/m.json", dir);
	snprintf(script, sizeof script,
		 "%s climb %s & p=$!; while [ ! -e %s ]; do sleep 0.05; done; kill -9 $p; wait $p",
		 built("live/live_fixture"), ready, ready);
	const char *command[] = { "/bin/sh", "-c", script, NULL };
	pid_t pid = spawn_memshim_run_in(output, command, _i ? outer : NULL, _i);
	ck_assert_int_eq(exit_code(wait_status(pid)), 128 + SIGKILL);
	read_back(dir, out, sizeof out, out + sizeof out / 2, sizeof out / 2);
	const char *text = out + sizeof out / 2;
	ck_assert_msg(strstr(text, "m.json.") && strstr(text, "from its live record"), "%s", text);
	ck_assert_msg(!strstr(text, "other.json"), "%s", text);
	ck_assert_str_eq(reason_of("other.json", out, sizeof out), reason); /* untouched */
	ck_assert_int_eq(records(live_dir, names, 4), 1); /* the other's stays for its owner */
}
END_TEST

/* --recover-under's --root-pid and --since leave out the records of other runs. */
START_TEST(recover_under_takes_only_the_records_asked_for)
{
	char out[1 << 15], names[2][PATH_MAX], pid_text[32], later[32], reason[64];
	fresh_dir();
	pid_t pid = killed_elsewhere("m.json");
	snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
	snprintf(later, sizeof later, "%lld", (long long)time(NULL) + 5);
	const char *fmt = built("memshim-format");
	const char *other_root[] = { fmt, "--recover-under", dir, "--root-pid", "1", NULL };
	const char *too_old[] = { fmt, "--recover-under", dir, "--root-pid", pid_text, "--since", later, NULL };
	const char *ours[] = { fmt, "--recover-under", dir, "--since", "0", "--root-pid", pid_text, NULL };
	const char *bad[] = { fmt, "--recover-under", dir, "--root-pid", "x", NULL };
	ck_assert_int_eq(run_tool_live(live_dir, other_root, out, sizeof out), 0);
	ck_assert_int_eq(run_tool_live(live_dir, too_old, out + strlen(out), sizeof out - strlen(out)), 0);
	ck_assert_msg(!strstr(out, "recovered"), "%s", out);
	ck_assert_str_ne(reason_of("m.json", reason, sizeof reason), "recovered");
	ck_assert_int_eq(records(live_dir, names, 2), 1);
	ck_assert_int_eq(run_tool_live(live_dir, ours, out, sizeof out), 0);
	ck_assert_msg(strstr(out, "from its live record"), "%s", out);
	ck_assert_str_eq(reason_of("m.json", reason, sizeof reason), "recovered");
	ck_assert_int_eq(records(live_dir, names, 2), 0);
	ck_assert_int_eq(run_tool_live(live_dir, bad, out, sizeof out), 2);
	ck_assert_msg(strstr(out, "bad --root-pid: x"), "%s", out);
}
END_TEST

/* A killed process whose name now holds a later process's file (torchrun's next attempt wrote
 * m_0.json after this rank was killed): its record is recovered beside it, NAME.<pid>, the later
 * file untouched (the killed attempt's numbers were left unwritten before). */
START_TEST(a_killed_process_whose_name_was_taken_is_recovered_beside_it)
{
	char out[1 << 15], names[2][PATH_MAX], pid_text[32], path[PATH_MAX + 64], beside[PATH_MAX + 96];
	fresh_dir();
	pid_t pid = killed_elsewhere("m.json");
	snprintf(path, sizeof path, "%s/m.json", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "{\"format\": \"memshim-metrics\", \"version\": 1, \"complete\": true, \"reason\": \"exit\", "
		   "\"pid\": %d, \"start_time\": %lld, \"end_time\": %lld}",
		(int)pid + 100000, (long long)time(NULL), (long long)time(NULL) + 60);
	fclose(f);
	snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
	const char *ours[] = { built("memshim-format"), "--recover-under", dir, "--root-pid", pid_text, NULL };
	ck_assert_int_eq(run_tool_live(live_dir, ours, out, sizeof out), 0);
	snprintf(beside, sizeof beside, "%s.%d", path, (int)pid);
	ck_assert_msg(strstr(out, beside) && strstr(out, "holds a later process's file"), "%s", out);
	ck_assert_str_eq(reason_of("m.json", out, sizeof out), "exit"); /* the later file, untouched */
	json_t *kept = json_load_file(beside, 0, NULL);
	ck_assert_ptr_nonnull(kept);
	ck_assert_int_eq(json_integer_value(json_object_get(kept, "pid")), pid);
	json_decref(kept);
	ck_assert_int_eq(records(live_dir, names, 2), 0);
}
END_TEST

/* A fatal signal with the default action (SIGTERM): the record is marked with it. */
START_TEST(a_fatal_signal_marks_the_record)
{
	char out[1 << 15], names[2][PATH_MAX];
	pid_t pid = climbing();
	kill(pid, SIGTERM);
	ck_assert_int_eq(exit_code(wait_status(pid)), 128 + SIGTERM);
	top_lists(pid, "signal 15", "train");
	ck_assert_int_eq(records(live_dir, names, 2), 1);
	json_t *root = recover(names[0], "term.json", out, sizeof out);
	json_t *about = json_object_get(root, "live_record");
	ck_assert_str_eq(json_string_value(json_object_get(about, "state")), "signal");
	ck_assert_int_eq(json_integer_value(json_object_get(about, "signal")), SIGTERM);
	long long alloc = so_far(root, "train", "alloc_delta");
	ck_assert_msg(alloc >= 70LL * MIB && alloc < 71LL * MIB, "train alloc so far %lld", alloc);
	json_decref(root);
}
END_TEST

/* memshim-format reads a record directly, marked as one, and keeps it (only --recover removes). */
START_TEST(memshim_format_reads_a_record_of_a_running_process)
{
	char out[1 << 15], names[4][PATH_MAX];
	pid_t pid = climbing();
	ck_assert_int_eq(records(live_dir, names, 4), 1);
	const char *argv[] = { built("memshim-format"), names[0], NULL };
	int code = run_tool(argv, out, sizeof out);
	json_t *root = recover(names[0], "live.json", out + strlen(out), sizeof out - strlen(out));
	kill(pid, SIGKILL);
	wait_status(pid);
	ck_assert_int_eq(code, 0);
	ck_assert_msg(strstr(out, "from a live record: process running"), "%s", out);
	ck_assert_msg(strstr(out, "train_mem_cpu_alloc_delta  =   70MB"), "%s", out);
	ck_assert_str_eq(json_string_value(json_object_get(root, "reason")), "live");
	ck_assert_int_eq(records(live_dir, names, 4), 1); /* a running process keeps its record */
	json_decref(root);
}
END_TEST

START_TEST(a_normal_exit_removes_the_record)
{
	char names[4][PATH_MAX], out[1 << 14], err[1 << 14];
	fresh_dir();
	pid_t pid = spawn_fixture("exit", live_env(live_dir, NULL));
	ck_assert_int_eq(exit_code(wait_status(pid)), 0);
	read_back(dir, out, sizeof out, err, sizeof err);
	ck_assert_int_eq(mode_of(live_dir), 0700); /* it was created */
	ck_assert_int_eq(records(live_dir, names, 4), 0);
	ck_assert_str_eq(err, "");
}
END_TEST

/* A short, small process (a build tool under an inherited LD_PRELOAD) creates nothing at all,
 * where a process that opens a stage does. */
START_TEST(only_a_process_worth_it_creates_a_record)
{
	fresh_dir();
	const char *argv[] = { built("live/live_fixture"), "small", NULL };
	pid_t pid = spawn_redirected(dir, argv, live_env(live_dir, NULL), NULL);
	ck_assert_int_eq(exit_code(wait_status(pid)), 0);
	ck_assert_int_ne(access(live_dir, F_OK), 0);
	pid = spawn_fixture("exit", live_env(live_dir, NULL));
	ck_assert_int_eq(exit_code(wait_status(pid)), 0);
	ck_assert_int_eq(access(live_dir, F_OK), 0);
}
END_TEST

START_TEST(memshim_live_0_creates_no_record)
{
	char names[2][PATH_MAX];
	fresh_dir();
	for (int off = 1; off >= 0; off--) {
		pid_t pid = spawn_fixture("climb", live_env(live_dir, off ? "MEMSHIM_LIVE=0" : NULL));
		wait_for(ready);
		kill(pid, SIGKILL);
		wait_status(pid);
		unlink(ready);
		ck_assert_int_eq(records(live_dir, names, 2), !off);
	}
}
END_TEST

/* A forked child writes its own record, never its parent's. */
START_TEST(a_forked_child_has_its_own_record)
{
	char names[4][PATH_MAX], out[1 << 15];
	fresh_dir();
	pid_t pid = spawn_fixture("fork", live_env(live_dir, NULL));
	char parent_ready[PATH_MAX + 32];
	snprintf(parent_ready, sizeof parent_ready, "%s.%d", ready, (int)pid);
	wait_for(parent_ready);
	int child = 0;
	for (int i = 0; i < 2000 && !child; i++) { /* the child's ready file names its pid */
		DIR *d = opendir(dir);
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, "ready.", 6) && atoi(e->d_name + 6) != pid)
				child = atoi(e->d_name + 6);
		if (d)
			closedir(d);
		if (!child)
			pause_ms(10);
	}
	ck_assert_int_gt(child, 0);
	pause_ms(200);
	kill(child, SIGKILL);
	kill(pid, SIGKILL);
	wait_status(pid);
	ck_assert_int_eq(records(live_dir, names, 4), 2);
	int seen = 0;
	for (int i = 0; i < 2; i++) {
		json_t *root = recover(names[i], i ? "b.json" : "a.json", out, sizeof out);
		long long p = json_integer_value(json_object_get(root, "pid"));
		if (p == pid) {
			ck_assert_ptr_null(stage_of(root, "work"));
			long long alloc = so_far(root, "train", "alloc_delta");
			ck_assert_msg(alloc >= 40LL * MIB && alloc < 41LL * MIB, "parent train %lld", alloc);
			seen |= 1;
		} else {
			ck_assert_int_eq(p, child);
			ck_assert(json_is_true(json_object_get(root, "forked")));
			long long alloc = so_far(root, "work", "alloc_delta");
			ck_assert_msg(alloc >= 20LL * MIB && alloc < 21LL * MIB, "child work %lld", alloc);
			seen |= 2;
		}
		json_decref(root);
	}
	ck_assert_int_eq(seen, 3);
}
END_TEST

/* Runs the exit fixture with MEMSHIM_LIVE_DIR=LIVE: it must succeed with exactly one warning
 * naming the live record (returned in ERR). */
static void refused(const char *live, char *err, size_t size)
{
	char out[1 << 14];
	pid_t pid = spawn_fixture("exit", live_env(live, NULL));
	ck_assert_int_eq(exit_code(wait_status(pid)), 0);
	read_back(dir, out, sizeof out, err, size);
	ck_assert_msg(strstr(err, "memshim: cannot create the live record in ") != NULL, "stderr: %s", err);
	ck_assert_msg(strstr(err, "the run goes on without it"), "stderr: %s", err);
	ck_assert_int_eq(memshim_lines(err), 1);
}

START_TEST(a_symlinked_record_directory_is_refused)
{
	char real[PATH_MAX + 8], link[PATH_MAX + 8], err[1 << 14], names[2][PATH_MAX];
	fresh_dir();
	snprintf(real, sizeof real, "%s/real", dir);
	snprintf(link, sizeof link, "%s/link", dir);
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(symlink(real, link), 0);
	refused(link, err, sizeof err);
	ck_assert_msg(strstr(err, "a symlink or not a directory"), "%s", err);
	ck_assert_int_eq(records(real, names, 2), 0);
}
END_TEST

/* Another user's link in a sticky world-writable directory (as /dev/shm): the metrics file's rule. */
START_TEST(another_users_link_in_a_sticky_directory_is_refused)
{
	char sticky[300], real[300], link[320], live[340], err[1 << 14];
	if (geteuid() != 0) {
		printf("another_users_link_in_a_sticky_directory_is_refused: skipped, needs root for lchown\n");
		return;
	}
	fresh_dir();
	snprintf(sticky, sizeof sticky, "%s/shm", dir);
	snprintf(real, sizeof real, "%s/theirs", dir);
	snprintf(link, sizeof link, "%s/link", sticky);
	snprintf(live, sizeof live, "%s/memshim-0", link);
	ck_assert_int_eq(mkdir(sticky, 0777), 0);
	ck_assert_int_eq(chmod(sticky, 01777), 0);
	ck_assert_int_eq(mkdir(real, 0777), 0);
	ck_assert_int_eq(symlink(real, link), 0);
	ck_assert_int_eq(lchown(link, NOBODY, NOBODY), 0);
	refused(live, err, sizeof err);
	ck_assert_msg(strstr(err, "not following a symlink"), "%s", err);
	ck_assert_int_ne(access(live, F_OK), 0);
}
END_TEST

START_TEST(a_directory_open_to_others_is_refused)
{
	char err[1 << 14];
	fresh_dir();
	ck_assert_int_eq(mkdir(live_dir, 0755), 0);
	ck_assert_int_eq(chmod(live_dir, 0755), 0);
	refused(live_dir, err, sizeof err);
	ck_assert_msg(strstr(err, "not a directory of this user with mode 0700"), "%s", err);
}
END_TEST

START_TEST(a_directory_of_another_user_is_refused)
{
	char err[1 << 14];
	if (geteuid() != 0) {
		printf("a_directory_of_another_user_is_refused: skipped, needs root for chown\n");
		return;
	}
	fresh_dir();
	ck_assert_int_eq(mkdir(live_dir, 0700), 0);
	ck_assert_int_eq(chown(live_dir, NOBODY, NOBODY), 0);
	refused(live_dir, err, sizeof err);
	ck_assert_msg(strstr(err, "not a directory of this user with mode 0700"), "%s", err);
}
END_TEST

/* A read-only file system (a read-only tmpfs: root writes through mode bits) costs the record only. */
START_TEST(a_read_only_file_system_costs_only_the_record)
{
	char ro[PATH_MAX + 8], live[PATH_MAX + 16], err[1 << 14];
	fresh_dir();
	snprintf(ro, sizeof ro, "%s/ro", dir);
	snprintf(live, sizeof live, "%s/live", ro);
	ck_assert_int_eq(mkdir(ro, 0755), 0);
	if (mount("memshim-test", ro, "tmpfs", MS_RDONLY, "size=64k") != 0) {
		printf("a_read_only_file_system_costs_only_the_record: skipped, cannot mount (%s)\n", strerror(errno));
		return;
	}
	refused(live, err, sizeof err);
	umount(ro);
	ck_assert_msg(strstr(err, "read-only file system (errno 30)"), "%s", err);
}
END_TEST

/* A full file system: the record's blocks are written before it is mapped, so the creation fails
 * (one warning) and no store into the mapping can raise SIGBUS. */
START_TEST(a_full_file_system_costs_only_the_record)
{
	char full[PATH_MAX + 8], live[PATH_MAX + 16], filler[PATH_MAX + 32], err[1 << 14], names[2][PATH_MAX];
	static char block[4096];
	fresh_dir();
	snprintf(full, sizeof full, "%s/full", dir);
	snprintf(live, sizeof live, "%s/live", full);
	ck_assert_int_eq(mkdir(full, 0755), 0);
	if (mount("memshim-test", full, "tmpfs", 0, "size=64k") != 0) {
		printf("a_full_file_system_costs_only_the_record: skipped, cannot mount (%s)\n", strerror(errno));
		return;
	}
	ck_assert_int_eq(mkdir(live, 0700), 0);
	snprintf(filler, sizeof filler, "%s/filler", full);
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	while (fd >= 0 && write(fd, block, sizeof block) > 0)
		;
	close(fd);
	unlink(filler); /* room for a few pages, not for a record */
	fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (int i = 0; i < 8 && fd >= 0; i++)
		ck_assert_int_eq(write(fd, block, sizeof block), (ssize_t)sizeof block);
	close(fd);
	refused(live, err, sizeof err);
	int left = records(live, names, 2);
	umount(full);
	ck_assert_msg(strstr(err, "no space left on device (errno 28)"), "%s", err);
	ck_assert_int_eq(left, 0); /* the partial file was removed */
}
END_TEST

/* Writes a record-like file of SIZE bytes at PATH with MAGIC and VERSION. */
static void fake_record(const char *path, size_t size, int version)
{
	unsigned char buf[128 * 1024] = { 0 };
	const char magic[] = "MSMLIVE1";
	ck_assert(size <= sizeof buf);
	memcpy(buf, magic, 8);
	memcpy(buf + 8, &version, 4);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, size), (ssize_t)size);
	close(fd);
}

static void bad_record(const char *path, const char *want)
{
	char out[1 << 14], file[PATH_MAX + 16];
	snprintf(file, sizeof file, "%s/x.json", dir);
	const char *argv[] = { built("memshim-format"), path, NULL };
	ck_assert_int_eq(run_tool(argv, out, sizeof out), 2);
	ck_assert_msg(strstr(out, want), "want \"%s\" in: %s", want, out);
	const char *rec[] = { built("memshim-format"), "--recover", path, "-o", file, NULL };
	ck_assert_int_eq(run_tool(rec, out, sizeof out), 2);
	ck_assert_msg(strstr(out, want), "want \"%s\" in: %s", want, out);
	ck_assert_int_ne(access(file, F_OK), 0);
}

/* Bad records get one clear line, and another user's record is never read. */
START_TEST(bad_records_get_a_clear_line)
{
	char path[PATH_MAX + 16], names[2][PATH_MAX], out[1 << 15];
	fresh_dir();
	snprintf(path, sizeof path, "%s/short.live", dir);
	fake_record(path, 4096, 1);
	bad_record(path, "truncated live record (4096 of ");
	snprintf(path, sizeof path, "%s/v9.live", dir);
	fake_record(path, 100 * 1024, 9);
	char want[96];
	snprintf(want, sizeof want, "live record version 9; this memshim-format reads version %d", MS_LIVE_VERSION);
	bad_record(path, want);

	pid_t pid = spawn_fixture("climb", live_env(live_dir, NULL));
	wait_for(ready);
	kill(pid, SIGKILL);
	wait_status(pid);
	ck_assert_int_eq(records(live_dir, names, 2), 1);
	snprintf(path, sizeof path, "%s/other.live", dir);
	const char *cp[] = { "/bin/cp", names[0], path, NULL };
	ck_assert_int_eq(run_tool(cp, out, sizeof out), 0);
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(path, NOBODY, NOBODY), 0);
		bad_record(path, "live record of another user (uid 65534): not read");
	}

	/* damaged numbers and text (what fuzzing found): read, never undefined or "out of memory" */
	static struct ms_live_record rec;
	int fd = open(names[0], O_RDONLY);
	ck_assert_int_eq(read(fd, &rec, sizeof rec), (ssize_t)sizeof rec);
	close(fd);
	rec.stage[1].cur.begin[MS_LIVE_CPU] = INT64_MIN;
	rec.stage[1].cur.peak[MS_LIVE_CPU] = INT64_MIN;
	rec.stage[1].cur.start = 0.0 / 0.0;
	memset(rec.stage[1].name, 0xff, 8);
	memset(rec.argv, 0xfe, 16);
	rec.inherited[MS_LIVE_CPU] = INT64_MIN;
	rec.forked = 1;
	snprintf(path, sizeof path, "%s/damaged.live", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_eq(write(fd, &rec, sizeof rec), (ssize_t)sizeof rec);
	close(fd);
	const char *dump[] = { built("memshim-format"), path, NULL };
	ck_assert_int_eq(run_tool(dump, out, sizeof out), 0);
	ck_assert_msg(strstr(out, "?????????_mem_cpu_alloc_delta") || strstr(out, "(open) metrics"), "%s", out);
	const char *top[] = { built("memshim-top"), "--json", dir, NULL };
	ck_assert_int_eq(run_tool(top, out, sizeof out), 0);
}
END_TEST

/* memshim top RUN_DIR: only the processes writing their metrics file under RUN_DIR, read from the
 * records directory in MEMSHIM_LIVE_DIR (as a user's default place would be). */
START_TEST(top_on_a_run_directory_lists_that_run_only)
{
	char out[1 << 15], cmd[PATH_MAX * 2], other[PATH_MAX], other_out[PATH_MAX + 32], want[64];
	fresh_dir();
	snprintf(other, sizeof other, "/tmp/memshim-live-other.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(other));
	pid_t mine = spawn_fixture("climb", live_env(live_dir, NULL));
	wait_for(ready);
	unlink(ready);
	snprintf(other_out, sizeof other_out, "MEMSHIM_OUTPUT=%s/m.json", other);
	char **envp = live_env(live_dir, NULL);
	for (int i = 0; envp[i]; i++) /* the second run writes its file elsewhere */
		if (!strncmp(envp[i], "MEMSHIM_OUTPUT=", 15))
			envp[i] = other_out;
	pid_t theirs = spawn_fixture("climb", envp);
	wait_for(ready);
	snprintf(cmd, sizeof cmd, "MEMSHIM_LIVE_DIR='%s' '%s' --once '%s'", live_dir, built("memshim-top"), dir);
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	int code = run_tool(argv, out, sizeof out);
	kill(mine, SIGKILL);
	kill(theirs, SIGKILL);
	wait_status(mine);
	wait_status(theirs);
	ck_assert_int_eq(code, 0);
	snprintf(want, sizeof want, "\n%d ", (int)mine);
	ck_assert_msg(strstr(out, want), "pid %d missing:\n%s", (int)mine, out);
	snprintf(want, sizeof want, "\n%d ", (int)theirs);
	ck_assert_msg(!strstr(out, want), "pid %d of another run listed:\n%s", (int)theirs, out);
}
END_TEST

/* /proc/meminfo's MemTotal and MemAvailable in bytes, read here apart from the tool's parser. */
static void host_memory(double *total, double *avail)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long long v;
	*total = *avail = -1;
	while (f && fgets(line, sizeof line, f)) {
		if (sscanf(line, "MemTotal: %lld kB", &v) == 1)
			*total = (double)v * 1024;
		else if (sscanf(line, "MemAvailable: %lld kB", &v) == 1)
			*avail = (double)v * 1024;
	}
	if (f)
		fclose(f);
}

/* "23.5GB" at S back into bytes; *END after it. */
static double bytes_at(const char *s, const char **end)
{
	static const char *const units[] = { "PB", "TB", "GB", "MB", "KB", "B" };
	static const double scale[] = { 1125899906842624.0, 1099511627776.0, 1073741824.0, 1048576.0, 1024.0, 1.0 };
	char *e;
	double v = strtod(s, &e);
	ck_assert_msg(e != s, "no number at %s", s);
	for (int u = 0; u < 6; u++)
		if (!strncmp(e, units[u], strlen(units[u]))) {
			*end = e + strlen(units[u]);
			return v * scale[u];
		}
	ck_abort_msg("no unit at %s", s);
	return 0;
}

/* memshim top --once: the host's memory first ("host 23.5GB, 21.3GB available"), /proc/meminfo's
 * MemTotal and MemAvailable in three significant digits (within 0.5%); MemAvailable moves with the
 * host's other programs, so it is checked against what it was before and after top read it, with
 * 1% of the total more for a move that came and went in between. */
START_TEST(top_shows_the_hosts_memory)
{
	char out[1 << 15];
	double t0, a0, t1, a1;
	fresh_dir();
	ck_assert_int_eq(mkdir(live_dir, 0700), 0);
	host_memory(&t0, &a0);
	const char *argv[] = { built("memshim-top"), "--once", live_dir, NULL };
	ck_assert_int_eq(run_tool(argv, out, sizeof out), 0);
	host_memory(&t1, &a1);
	ck_assert_msg(t0 > 0 && a0 >= 0 && t0 == t1, "/proc/meminfo: %g %g %g", t0, a0, t1);
	ck_assert_msg(!strncmp(out, "host ", 5), "no host line first:\n%s", out);
	const char *p;
	double total = bytes_at(out + 5, &p);
	ck_assert_msg(!strncmp(p, ", ", 2), "%s", out);
	double avail = bytes_at(p + 2, &p);
	ck_assert_msg(!strncmp(p, " available\nPID ", 15), "the table does not follow:\n%s", out);
	ck_assert_msg(fabs(total - t0) <= 0.005 * t0, "host total %.0f, MemTotal %.0f:\n%s", total, t0, out);
	double lo = (a0 < a1 ? a0 : a1) * 0.995 - 0.01 * t0, hi = (a0 > a1 ? a0 : a1) * 1.005 + 0.01 * t0;
	ck_assert_msg(avail >= lo && avail <= hi, "available %.0f, MemAvailable %.0f then %.0f:\n%s", avail, a0, a1,
		      out);
}
END_TEST

/* tmux: run ARGS (a shell command) in a detached session NAME of 200 x 40. */
static int tmux(const char *args, char *out, size_t size)
{
	const char *argv[] = { "/bin/sh", "-c", args, NULL };
	return run_tool(argv, out, size);
}

/* The curses view in a terminal (tmux): rows of a running and a killed process (the running first),
 * sorting by pid with a key, and q quits. */
START_TEST(the_curses_view_shows_running_and_killed_processes)
{
	char out[1 << 15], cmd[8192], session[64], want[64];
	if (access("/usr/bin/tmux", X_OK) != 0) {
		printf("the_curses_view_shows_running_and_killed_processes: skipped, no tmux\n");
		return;
	}
	fresh_dir();
	pid_t dead = spawn_fixture("climb", live_env(live_dir, NULL));
	wait_for(ready);
	kill(dead, SIGKILL);
	wait_status(dead);
	unlink(ready);
	pid_t pid = spawn_fixture("climb", live_env(live_dir, NULL));
	wait_for(ready);
	snprintf(session, sizeof session, "memshim-top-test-%d", (int)getpid());
	snprintf(cmd, sizeof cmd, "tmux -L %s new-session -d -s %s -x 200 -y 40 'TERM=xterm %s %s'", session,
		 session, built("memshim-top"), live_dir);
	ck_assert_int_eq(tmux(cmd, out, sizeof out), 0);
	char capture[600];
	snprintf(capture, sizeof capture, "tmux -L %s capture-pane -p -t %s", session, session);
	int found = 0;
	for (int i = 0; i < 100 && !found; i++) { /* the first frame */
		pause_ms(100);
		tmux(capture, out, sizeof out);
		snprintf(want, sizeof want, "%d ", (int)pid);
		found = strstr(out, want) && strstr(out, "killed") && strstr(out, "running");
	}
	ck_assert_msg(found, "screen:\n%s", out);
	ck_assert_msg(strstr(out, "train") && strstr(out, "70M/70M") && strstr(out, "sorted by cpu"), "%s", out);
	ck_assert_msg(strstr(out, "\nhost ") && strstr(out, " available\n"), "no host line:\n%s", out);
	snprintf(cmd, sizeof cmd, "tmux -L %s send-keys -t %s p", session, session);
	ck_assert_int_eq(tmux(cmd, out, sizeof out), 0);
	for (int i = 0; i < 50 && !strstr(out, "sorted by pid"); i++) {
		pause_ms(100);
		tmux(capture, out, sizeof out);
	}
	ck_assert_msg(strstr(out, "sorted by pid"), "%s", out);
	const char *first = strstr(out, "\n") ? strstr(out, "PID") : NULL; /* the running first, whatever the key */
	char a[32], b[32];
	snprintf(a, sizeof a, "\n%d ", (int)pid);
	snprintf(b, sizeof b, "\n%d ", (int)dead);
	ck_assert_msg(first && strstr(first, a) && strstr(first, b) && strstr(first, a) < strstr(first, b), "%s", out);
	snprintf(cmd, sizeof cmd, "tmux -L %s send-keys -t %s q", session, session);
	ck_assert_int_eq(tmux(cmd, out, sizeof out), 0);
	int gone = 0;
	snprintf(cmd, sizeof cmd, "tmux -L %s has-session -t %s 2>/dev/null", session, session);
	for (int i = 0; i < 50 && !gone; i++) {
		pause_ms(100);
		gone = tmux(cmd, out, sizeof out) != 0;
	}
	kill(pid, SIGKILL);
	wait_status(pid);
	if (!gone) {
		snprintf(cmd, sizeof cmd, "tmux -L %s kill-server", session);
		tmux(cmd, out, sizeof out);
	}
	ck_assert_msg(gone, "q did not end memshim top");
}
END_TEST

/* Device memory (the stand-in driver): per device in memshim top, and in the recovered file. */
START_TEST(device_memory_per_device_in_top_and_the_record)
{
	char out[1 << 15], names[2][PATH_MAX];
	if (access(built("live/live_gpu"), X_OK) != 0) {
		printf("device_memory_per_device_in_top_and_the_record: skipped, no CUDA headers\n");
		return;
	}
	fresh_dir();
	const char *argv[] = { built("live/live_gpu"), ready, NULL };
	pid_t pid = spawn_redirected(dir, argv, live_env(live_dir, NULL), NULL);
	wait_for(ready);
	const char *top[] = { built("memshim-top"), "--once", live_dir, NULL };
	ck_assert_int_eq(run_tool(top, out, sizeof out), 0);
	ck_assert_msg(strstr(out, "0:8.0M/8.0M 1:12M/12M"), "%s", out);
	kill(pid, SIGKILL);
	wait_status(pid);
	ck_assert_int_eq(records(live_dir, names, 2), 1);
	json_t *root = recover(names[0], "gpu.json", out, sizeof out);
	json_t *gpu = json_object_get(stage_of(root, "train"), "gpu");
	ck_assert_int_eq(json_integer_value(json_object_get(gpu, "alloc_delta")), 20 * MIB);
	json_t *devs = json_object_get(gpu, "devices");
	ck_assert_int_eq(json_array_size(devs), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(devs, 1), "alloc_delta")), 12 * MIB);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(root, "metrics"), "process_mem_gpu_peak")),
			 20 * MIB);
	json_decref(root);
}
END_TEST

/* A 2-rank torchrun job (the project's venv): both ranks' rows while they run, both recovered
 * after a SIGKILL with their climb. */
START_TEST(a_killed_torchrun_job_is_recovered_rank_by_rank)
{
	char torchrun[PATH_MAX], out[1 << 16], names[4][PATH_MAX], ready1[PATH_MAX + 8], extra[64];
	const char *root = getenv("LIVE_ROOT") ? getenv("LIVE_ROOT") : ".";
	snprintf(torchrun, sizeof torchrun, "%s/.venv/bin/torchrun", root);
	if (access(torchrun, X_OK) != 0) {
		printf("a_killed_torchrun_job_is_recovered_rank_by_rank: skipped, no %s\n", torchrun);
		return;
	}
	fresh_dir();
	char job[PATH_MAX], rdy[PATH_MAX + 8];
	snprintf(job, sizeof job, "%s/tests/live/fixtures/rank_job.py", root);
	snprintf(rdy, sizeof rdy, "%s.0", ready);
	snprintf(ready1, sizeof ready1, "%s.1", ready);
	snprintf(extra, sizeof extra, "MEMSHIM_STAGES=train=__main__:train");
	char port[32];
	snprintf(port, sizeof port, "%d", 20000 + getpid() % 20000);
	const char *argv[] = { torchrun, "--nproc_per_node", "2", "--master_port", port, job, ready, NULL };
	pid_t launcher = spawn_redirected(dir, argv, live_env(live_dir, extra), NULL);
	ck_assert_int_gt(launcher, 0);
	wait_long(rdy, 120); /* two interpreters importing torch on a busy machine */
	wait_long(ready1, 120);
	const char *top[] = { built("memshim-top"), "--json", "--sort", "rank", live_dir, NULL };
	ck_assert_int_eq(run_tool(top, out, sizeof out), 0);
	json_error_t je;
	json_t *rows = json_loads(out, 0, &je);
	ck_assert_msg(rows != NULL, "%s", out);
	pid_t ranks[2] = { 0, 0 };
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		json_t *rank = json_object_get(r, "rank");
		if (!json_is_integer(rank))
			continue; /* the launcher */
		ck_assert_str_eq(json_string_value(json_object_get(r, "state")), "running");
		ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "open_stages"), 0)), "train");
		ranks[json_integer_value(rank) & 1] = (pid_t)json_integer_value(json_object_get(r, "pid"));
	}
	json_decref(rows);
	ck_assert_msg(ranks[0] > 0 && ranks[1] > 0, "both ranks listed: %s", out);
	pause_ms(1500);
	kill(ranks[0], SIGKILL);
	kill(ranks[1], SIGKILL);
	wait_status(launcher); /* torchrun ends once its workers are gone */
	int n = records(live_dir, names, 4);
	int recovered = 0;
	for (int k = 0; k < n; k++) {
		json_t *root_doc = recover(names[k], k ? "r1.json" : "r0.json", out, sizeof out);
		long long pid = json_integer_value(json_object_get(root_doc, "pid"));
		if (pid == ranks[0] || pid == ranks[1]) {
			long long alloc = so_far(root_doc, "train", "alloc_delta");
			ck_assert_msg(alloc >= 70LL * MIB && alloc < 71LL * MIB, "rank pid %lld train %lld", pid, alloc);
			ck_assert(json_is_integer(json_object_get(json_object_get(root_doc, "rank"), "rank")));
			recovered++;
		}
		json_decref(root_doc);
	}
	ck_assert_int_eq(recovered, 2);
}
END_TEST

/* The Go program's own figures (C bytes, HeapAlloc, Sys) from its output. */
static void go_figures(const char *text, long long *c, long long *heap, long long *sys)
{
	const char *line = strstr(text, "c=");
	ck_assert_msg(line && sscanf(line, "c=%lld heap_alloc=%lld sys=%lld", c, heap, sys) == 3, "gocgo printed: %s",
		      text);
}

/* What memshim counted agrees with the Go program's own figures: its C malloc and its Go heap at
 * least, its C malloc and all the Go runtime took from the system at most. */
static void go_counted(json_t *doc, long long c, long long heap, long long sys)
{
	long long peak = member(json_object_get(doc, "process"), "cpu", "peak");
	ck_assert_msg(peak >= c + heap && peak <= c + sys + 8LL * MIB, "cpu peak %lld for C %lld + heap %lld (sys %lld)",
		      peak, c, heap, sys);
	/* its RSS high-water as of its last point (read at every point: its record is all there is),
	 * not of its start: the C bytes and most of the written Go heap */
	long long rss = json_integer_value(json_object_get(json_object_get(doc, "metrics"), "process_mem_rss_peak"));
	ck_assert_msg(rss >= c + 40LL * MIB, "RSS peak %lld for C %lld + heap %lld", rss, c, heap);
}

/* A Go program gone is read as one that exited (its usual end, which its record cannot tell from a
 * kill -9): its record's state says so and the stage open at its end (init) is closed at exit, as
 * the shim closes open stages at a normal exit. */
static void go_closed_at_exit(json_t *doc)
{
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "live_record"), "state")), "exited");
	json_t *init = json_array_get(json_object_get(doc, "stages"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(init, "name")), "init");
	ck_assert(json_is_false(json_object_get(init, "open")));
	ck_assert(json_is_true(json_object_get(init, "closed_at_exit")));
	ck_assert_int_eq(json_integer_value(json_object_get(init, "calls")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "metrics"), "init_calls")), 1);
}

/* Go leaves by its own exit_group, past every exit handler: the file it leaves under plain
 * LD_PRELOAD is a snapshot from its start, and its record, there from the start, has the rest. */
START_TEST(a_go_program_leaves_its_file_and_record)
{
	static struct run r;
	struct stat st;
	if (stat(built("live/gocgo"), &st) != 0) {
		printf("test_live: no go: the Go test skipped\n");
		return;
	}
	fresh_dir();
	const char *argv[] = { built("live/gocgo"), NULL };
	pid_t pid = spawn_redirected(dir, argv, live_env(live_dir, NULL), NULL);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(exit_code(wait_status(pid)), 0);
	read_back(dir, r.out, sizeof r.out, r.err, sizeof r.err);
	long long c, heap, sys;
	go_figures(r.out, &c, &heap, &sys);
	strcpy(r.dir, dir);
	json_t *snap = load_metrics(&r, "m.json");
	ck_assert_msg(snap != NULL, "no metrics file at all");
	ck_assert(json_is_false(json_object_get(snap, "complete")));
	json_decref(snap);
	char names[4][PATH_MAX], out[1 << 14];
	ck_assert_int_eq(records(live_dir, names, 4), 1);
	const char *fmt[] = { built("memshim-format"), "--recover-under", dir, NULL };
	run_tool_live(live_dir, fmt, out, sizeof out);
	json_t *doc = load_metrics(&r, "m.json");
	ck_assert_str_eq(json_string_value(json_object_get(doc, "reason")), "recovered");
	go_counted(doc, c, heap, sys);
	go_closed_at_exit(doc);
	json_decref(doc);
}
END_TEST

START_TEST(memshim_run_recovers_a_go_program)
{
	struct stat st;
	if (stat(built("live/gocgo"), &st) != 0)
		return;
	char out[1 << 15], output[PATH_MAX + 16];
	fresh_dir();
	snprintf(output, sizeof output, "%s/m.json", dir);
	const char *command[] = { built("live/gocgo"), NULL };
	ck_assert_int_eq(exit_code(wait_status(spawn_memshim_run(output, command, NULL))), 0);
	read_back(dir, out, sizeof out, out + sizeof out / 2, sizeof out / 2);
	const char *err = out + sizeof out / 2;
	ck_assert_msg(strstr(err, "recovered"), "%s", err);
	/* the dump says why, and reads as a run that ended: no "killed", no open stage */
	ck_assert_msg(strstr(err, "a Go program leaves by its own exit system call"), "%s", err);
	ck_assert_msg(!strstr(err, "killed") && !strstr(err, "(open)"), "%s", err);
	ck_assert_msg(dump_shows(err, "init_calls", "1\n"), "%s", err);
	long long c, heap, sys;
	go_figures(out, &c, &heap, &sys);
	json_error_t jerr;
	json_t *doc = json_load_file(output, 0, &jerr);
	ck_assert_msg(doc != NULL, "%s", jerr.text);
	go_counted(doc, c, heap, sys);
	go_closed_at_exit(doc);
	json_decref(doc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("live");
	TCase *tc = tcase_create("record");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_killed_climb_is_recovered_from_its_record);
	tcase_add_test(tc, a_killed_runs_snapshot_reads_as_its_newer_record);
	tcase_add_test(tc, top_lists_the_running_first_and_counts_old_gone_ones);
	tcase_add_test(tc, memshim_run_recovers_a_killed_run);
	tcase_add_test(tc, memshim_run_keeps_a_signal_file);
	tcase_add_loop_test(tc, memshim_run_recovers_only_its_own_processes, 0, 2);
	tcase_add_test(tc, recover_under_takes_only_the_records_asked_for);
	tcase_add_test(tc, a_killed_process_whose_name_was_taken_is_recovered_beside_it);
	tcase_add_test(tc, memshim_format_reads_a_record_of_a_running_process);
	tcase_add_test(tc, a_fatal_signal_marks_the_record);
	tcase_add_test(tc, a_normal_exit_removes_the_record);
	tcase_add_test(tc, only_a_process_worth_it_creates_a_record);
	tcase_add_test(tc, memshim_live_0_creates_no_record);
	tcase_add_test(tc, a_forked_child_has_its_own_record);
	tcase_add_test(tc, a_go_program_leaves_its_file_and_record);
	tcase_add_test(tc, memshim_run_recovers_a_go_program);
	suite_add_tcase(s, tc);
	TCase *safety = tcase_create("safety");
	tcase_set_timeout(safety, 60);
	tcase_add_test(safety, a_symlinked_record_directory_is_refused);
	tcase_add_test(safety, another_users_link_in_a_sticky_directory_is_refused);
	tcase_add_test(safety, a_directory_open_to_others_is_refused);
	tcase_add_test(safety, a_directory_of_another_user_is_refused);
	tcase_add_test(safety, a_read_only_file_system_costs_only_the_record);
	tcase_add_test(safety, a_full_file_system_costs_only_the_record);
	tcase_add_test(safety, bad_records_get_a_clear_line);
	suite_add_tcase(s, safety);
	TCase *top = tcase_create("top");
	tcase_set_timeout(top, 240);
	tcase_add_test(top, the_curses_view_shows_running_and_killed_processes);
	tcase_add_test(top, top_on_a_run_directory_lists_that_run_only);
	tcase_add_test(top, top_shows_the_hosts_memory);
	tcase_add_test(top, a_killed_torchrun_job_is_recovered_rank_by_rank);
	tcase_add_test(top, device_memory_per_device_in_top_and_the_record);
	suite_add_tcase(s, top);
	return run_suite(s);
}
