/* A real memory cgroup's OOM kill (cgroup v1, where /sys/fs/cgroup/memory is writable, as root on
 * the test machines): a child group of the test's own with a 64 MiB limit (swap included), a program
 * under `memshim run` moved into it climbs past the limit and the group's OOM killer ends it; memshim
 * run's dump and the file it recovers from the live record say so, naming the group's peak and
 * limit.  The group is removed afterwards; where cgroups are not writable the test says it skipped.
 * And `memshim top` shows a group's headroom (a v2 group laid out in a directory). */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "child.h"
#include "harness.h"
#include "suite.h"

#define LIMIT (64L << 20)

static char group[512], dir[256], own[400];

static int put(const char *name, const char *text)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", group, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	int ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* The memory controller's v1 group of this process under /sys/fs/cgroup/memory into OUT; 0 when
 * there is none (cgroup v2 alone, or the controller mounted elsewhere). */
static int own_v1_group(char *out, size_t size)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "r");
	int found = 0;
	while (f && !found && fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || strncmp(c1 + 1, "memory:", 7))
			continue;
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		snprintf(out, size, "/sys/fs/cgroup/memory%s", strcmp(c2 + 1, "/") ? c2 + 1 : "");
		found = 1;
	}
	if (f)
		fclose(f);
	struct stat st;
	return found && stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The child group's name (in the suite's process: its teardown removes it, whatever the test did). */
static void name_group(void)
{
	if (own_v1_group(own, sizeof own))
		snprintf(group, sizeof group, "%s/memshim-test-%d", own, (int)getpid());
}

/* The child group with the limit, or a reason it cannot be made (then nothing is left behind). */
static const char *make_group(void)
{
	static char why[1024];
	if (!group[0])
		return "no cgroup v1 memory controller at /sys/fs/cgroup/memory";
	if (mkdir(group, 0755) != 0) {
		snprintf(why, sizeof why, "cannot create a memory cgroup under %s: %s", own, strerror(errno));
		return why;
	}
	char limit[32], memsw[600];
	snprintf(limit, sizeof limit, "%ld\n", LIMIT);
	/* memsw (memory + swap) too, where swap is accounted: killed, not swapped */
	snprintf(memsw, sizeof memsw, "%s/memory.memsw.limit_in_bytes", group);
	if (put("memory.limit_in_bytes", limit) != 0 ||
	    (access(memsw, F_OK) == 0 && put("memory.memsw.limit_in_bytes", limit) != 0))
		return "cannot set the memory cgroup's limit";
	return NULL;
}

/* Every process still in the group killed, then the group removed (also after a failed test). */
static void remove_group(void)
{
	if (!group[0])
		return;
	for (int i = 0; i < 200 && rmdir(group) != 0 && errno == EBUSY; i++) { /* ENOENT: never made */
		char path[600], line[32];
		snprintf(path, sizeof path, "%s/cgroup.procs", group);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			kill(atoi(line), SIGKILL);
		if (f)
			fclose(f);
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	group[0] = '\0';
}

START_TEST(a_cgroup_oom_kill_is_named_with_the_groups_peak_and_limit)
{
	const char *why = make_group();
	if (why) {
		fprintf(stderr, "skipped: a real cgroup OOM kill: %s\n", why);
		return;
	}
	snprintf(dir, sizeof dir, "/tmp/memshim-oom.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char script[8192], wrapper[PATH_MAX], output[300], livevar[300], runtime[300];
	snprintf(wrapper, sizeof wrapper, "%s/../scripts/memshim", built("."));
	snprintf(output, sizeof output, "%s/m.json", dir);
	/* the shell moves itself into the group, then becomes memshim run: its command starts there */
	snprintf(script, sizeof script, "echo $$ > %s/cgroup.procs && exec %s run --output %s -- %s 1024", group,
		 wrapper, output, built("live/oom_climb"));
	snprintf(livevar, sizeof livevar, "MEMSHIM_LIVE_DIR=%s/live", dir);
	snprintf(runtime, sizeof runtime, "XDG_RUNTIME_DIR=%s", dir);
	const char *env[] = { livevar, runtime, NULL };
	char **envp = shim_env(dir, env);
	for (char **e = envp; *e; e++) /* memshim run preloads the library itself */
		if (!strncmp(*e, "LD_PRELOAD=", 11))
			*e = "MEMSHIM_LOG=warn";
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	pid_t pid = spawn_redirected(dir, argv, envp, NULL);
	ck_assert_int_gt(pid, 0);
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	static char out[1 << 16], err[1 << 16];
	read_back(dir, out, sizeof out, err, sizeof err);
	fprintf(stderr, "%s", strstr(err, "memshim: ") ? strstr(err, "memshim: ") : err);
	ck_assert_msg(exit_code(st) == 128 + SIGKILL, "status %#x: %s%s", st, out, err);
	ck_assert_msg(!strstr(out, "climbed"), "never killed: %s", out);
	char want[1024];
	snprintf(
		want, sizeof want,
		"killed by its memory cgroup's OOM killer (oom_kill 0 -> 1): cgroup peak 64.0MB of 64.0MB (100%%) (%s)",
		group);
	ck_assert_msg(strstr(err, want), "no line \"%s\" in:\n%s", want, err);
	/* the group's high-water, read again after the kill, is above what the process last read */
	const char *line = strstr(err, "  cgroup peak 64.0MB of 64.0MB (100%)");
	ck_assert_msg(line && (line[37] == '\n' || !strncmp(line + 37, ", the group's high-water", 24)), "%s", err);
	/* the file memshim run left: the group, its limit and peak, from the record or the snapshot */
	struct run r = { 0 };
	snprintf(r.dir, sizeof r.dir, "%s", dir);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "process_mem_cgroup_limit"), LIMIT);
	json_t *cg = json_object_get(json_object_get(m, "process"), "cgroup");
	ck_assert_str_eq(json_string_value(json_object_get(cg, "path")), group);
	ck_assert_int_eq(json_integer_value(json_object_get(cg, "version")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(cg, "limit")), LIMIT);
	json_t *train = stage_of(m, "train");
	ck_assert_ptr_nonnull(train);
	json_t *tc = json_object_get(train, "cgroup");
	ck_assert_msg(json_is_object(tc), "train has no cgroup");
	/* read at the timeline's points of the climb, the last within a step of the kill */
	ck_assert_int_gt(json_integer_value(json_object_get(tc, "peak")), LIMIT / 2);
	json_decref(m);
}
END_TEST

/* Runs CMD through the shell; its stdout and stderr into OUT (SIZE bytes). */
static void shell(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	pclose(p);
}

/* `memshim top` shows the group's headroom (its limit less its usage at the last reading) of a
 * running process, here of a v2 group laid out in a directory: 1 GiB, 300 MiB used. */
START_TEST(top_shows_the_cgroups_headroom)
{
	char cg[300], path[400], ready[300], var[400], livevar[300], out[1 << 14], cmd[2048];
	snprintf(dir, sizeof dir, "/tmp/memshim-oom.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cg, sizeof cg, "%s/group", dir);
	ck_assert_int_eq(mkdir(cg, 0755), 0);
	static const char *const files[][2] = { { "memory.current", "314572800\n" },
						{ "memory.peak", "419430400\n" },
						{ "memory.max", "1073741824\n" },
						{ "memory.events", "oom 0\noom_kill 0\n" } };
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(path, sizeof path, "%s/%s", cg, files[i][0]);
		FILE *f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fputs(files[i][1], f);
		fclose(f);
	}
	snprintf(ready, sizeof ready, "%s/ready", dir);
	snprintf(var, sizeof var, "MEMSHIM_CGROUP_DIR=%s", cg);
	snprintf(livevar, sizeof livevar, "MEMSHIM_LIVE_DIR=%s/live", dir);
	const char *env[] = { var, livevar, NULL };
	const char *argv[] = { built("live/live_fixture"), "climb", ready, NULL };
	pid_t pid = spawn_redirected(dir, argv, shim_env(dir, env), NULL);
	ck_assert_int_gt(pid, 0);
	for (int i = 0; i < 2000 && access(ready, F_OK) != 0; i++)
		usleep(10000);
	ck_assert_int_eq(access(ready, F_OK), 0);
	snprintf(cmd, sizeof cmd, "MEMSHIM_LIVE_DIR=%s/live %s --once 2>&1", dir, built("memshim-top"));
	shell(cmd, out, sizeof out);
	ck_assert_msg(strstr(out, "CGROUP HEADROOM") && strstr(out, " 724M of 1.0G "), "%s", out);
	snprintf(cmd, sizeof cmd, "MEMSHIM_LIVE_DIR=%s/live %s --json 2>&1", dir, built("memshim-top"));
	shell(cmd, out, sizeof out);
	ck_assert_msg(strstr(out, "\"headroom\": 759169024") && strstr(out, "\"limit\": 1073741824"), "%s", out);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
END_TEST

/* How the snapshot below names its group's boot and directory. */
enum which { SAME_GROUP, OTHER_BOOT, OTHER_DIR, NOT_SAID };

/* The "boot_id", "dev" and "ino" keys of a file naming the group at CG as WHICH says, into OUT. */
static void group_keys(enum which which, const char *cg, char *out, size_t size)
{
	char boot[64] = "";
	struct stat st;
	this_boot_id(boot, sizeof boot);
	if (which == OTHER_BOOT) /* a boot id of another boot: this one's with its first digit changed */
		boot[0] = boot[0] == '0' ? '1' : '0';
	ck_assert_int_eq(stat(cg, &st), 0);
	if (which == NOT_SAID)
		out[0] = '\0';
	else
		snprintf(out, size, "\"boot_id\": \"%s\", \"dev\": %llu, \"ino\": %llu, ", boot,
			 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino + (which == OTHER_DIR));
}

/* A gone process's snapshot naming a group (laid out: v2, 1 oom_kill now, 0 at its last reading;
 * PEAK, when not NULL, its memory.peak now), with REASON, its boot and directory as WHICH says;
 * memshim-format's output into OUT. */
static void format_gone(const char *reason, enum which which, const char *peak, char *out, size_t size)
{
	char cg[300], path[400], cmd[1024], keys[256];
	snprintf(dir, sizeof dir, "/tmp/memshim-oom.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cg, sizeof cg, "%s/group", dir);
	ck_assert_int_eq(mkdir(cg, 0755), 0);
	snprintf(path, sizeof path, "%s/memory.events", cg);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("oom 1\noom_kill 1\n", f);
	fclose(f);
	snprintf(path, sizeof path, "%s/memory.peak", cg);
	f = peak ? fopen(path, "w") : NULL;
	if (f) {
		fputs(peak, f);
		fclose(f);
	}
	pid_t gone = fork(); /* a pid that is gone */
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	group_keys(which, cg, keys, sizeof keys);
	snprintf(path, sizeof path, "%s/m.json", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"{\"format\": \"memshim-metrics\", \"version\": 1, \"complete\": false, \"reason\": \"%s\", "
		"\"signal\": 15, \"pid\": %d, \"metrics\": {\"process_mem_cgroup_peak\": 1048576, "
		"\"process_mem_cgroup_limit\": 2097152}, \"stages\": [], \"process\": {\"cgroup\": {\"version\": 2, "
		"\"path\": \"%s\", %s\"usage\": 1048576, \"peak\": 1048576, \"limit\": 2097152, \"oom_kills\": 0, "
		"\"read\": \"x\"}}}\n",
		reason, (int)gone, cg, keys);
	fclose(f);
	snprintf(cmd, sizeof cmd, "%s %s 2>&1", built("memshim-format"), path);
	shell(cmd, out, size);
}

/* The OOM line needs the group's count gone up and a death no handler saw: a file the process's
 * SIGTERM handler wrote is not an OOM kill, whatever the group's count says. */
START_TEST(the_oom_line_only_for_a_death_by_sigkill)
{
	char out[1 << 14];
	format_gone("snapshot", SAME_GROUP, NULL, out, sizeof out);
	ck_assert_msg(strstr(out, "killed by its memory cgroup's OOM killer (oom_kill 0 -> 1): cgroup peak "
				  "1.00MB of 2.00MB (50%)"),
		      "%s", out);
	format_gone("signal", SAME_GROUP, NULL, out, sizeof out);
	ck_assert_msg(!strstr(out, "OOM killer") && strstr(out, "cgroup peak 1.00MB of 2.00MB (50%)"), "%s", out);
}
END_TEST

/* format_gone's directory removed. */
static void remove_gone(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* The group's files are read again only for the group the file recorded, on the boot it ran on: a
 * file from another boot (or host), naming a directory made again under the path, or saying
 * neither, keeps what it recorded and borrows no verdict from the files there now. */
START_TEST(the_group_is_read_again_only_where_it_is_the_same)
{
	static const enum which others[] = { OTHER_BOOT, OTHER_DIR, NOT_SAID };
	char out[1 << 14];
	format_gone("snapshot", SAME_GROUP, "1572864\n", out, sizeof out); /* the group's high-water now */
	ck_assert_msg(strstr(out, "(oom_kill 0 -> 1): cgroup peak 1.50MB of 2.00MB (75%)") &&
			      strstr(out, "  cgroup peak 1.50MB of 2.00MB (75%)\n"),
		      "%s", out);
	remove_gone();
	for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
		format_gone("snapshot", others[i], "1572864\n", out, sizeof out);
		ck_assert_msg(!strstr(out, "OOM killer") && strstr(out, "  cgroup peak 1.00MB of 2.00MB (50%)\n"),
			      "case %zu: %s", i, out);
		remove_gone();
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("oom");
	tcase_add_unchecked_fixture(tc, name_group, remove_group);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_cgroup_oom_kill_is_named_with_the_groups_peak_and_limit);
	suite_add_tcase(s, tc);
	TCase *top = tcase_create("laid_out");
	tcase_add_test(top, top_shows_the_cgroups_headroom);
	tcase_add_test(top, the_oom_line_only_for_a_death_by_sigkill);
	tcase_add_test(top, the_group_is_read_again_only_where_it_is_the_same);
	suite_add_tcase(s, top);
	return run_suite(s);
}
