/* scripts/memshim: exit status and signals pass through, LD_PRELOAD is kept, the dump appears. */
#include "util.h"
#include "svg.h"
#include "../../shim/memshim.h"

#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *tree, lib[4200], script[4200];
static const char *stdin_from; /* wrap: the command's stdin, a file in the tree (NULL: inherited) */

static const char *need_env(const char *name)
{
	const char *v = getenv(name);
	ck_assert_msg(v && *v, "%s is not set (run through make check-formatter)", name);
	return v;
}

static void copy_exec(const char *from, const char *to)
{
	size_t len;
	char *text = t_read(from, &len);
	ck_assert_msg(text != NULL, "cannot read %s", from);
	t_write(to, text, len);
	free(text);
	ck_assert_int_eq(chmod(to, 0755), 0);
}

/* A source-tree layout (LAYOUT "src": scripts/ and build/) or an installed one ("bin" and "lib"). */
static void make_tree(const char *layout)
{
	char path[2048], fmt[4200];
	tree = t_tmpdir();
	int src = !strcmp(layout, "src");
	snprintf(path, sizeof path, "%s/%s", tree, src ? "scripts" : "bin");
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(script, sizeof script, "%s/memshim", path);
	copy_exec(need_env("MF_SCRIPT"), script);
	snprintf(path, sizeof path, "%s/%s", tree, src ? "build" : "lib");
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(lib, sizeof lib, "%s/libmemshim.so", path);
	ck_assert_int_eq(symlink(need_env("MF_FAKE_SHIM"), lib), 0);
	snprintf(fmt, sizeof fmt, "%s/%s/memshim-format", tree, src ? "build" : "bin");
	ck_assert_int_eq(symlink(need_env("MF_FORMAT_BIN"), fmt), 0);
}

static void setup(void)
{
	make_tree("src");
}

static void teardown(void)
{
	t_rmtree(tree);
	free(tree);
}

/* Runs the copied script with ARGS in the tree; PRELOAD is the caller's LD_PRELOAD (NULL: unset). */
static int wrap(const char *preload, char **args, char **out, char **err)
{
	char o[4300], e[4300];
	snprintf(o, sizeof o, "%s/stdout", tree);
	snprintf(e, sizeof e, "%s/stderr", tree);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		if (chdir(tree) || !freopen(o, "w", stdout) || !freopen(e, "w", stderr))
			_exit(99);
		if (stdin_from && !freopen(stdin_from, "r", stdin))
			_exit(97);
		preload ? setenv("LD_PRELOAD", preload, 1) : unsetenv("LD_PRELOAD");
		unsetenv("MEMSHIM_OUTPUT");
		unsetenv("MEMSHIM_STAGES");
		unsetenv("MEMSHIM_FAKE_ROOT");
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		args[0] = script;
		execv(script, args);
		_exit(98);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	*out = t_read(o, NULL);
	*err = t_read(e, NULL);
	return status;
}

/* wrap_signal sends its signal to memshim's whole process group (timeout, kill -TERM -PGID). */
static int signal_the_group;
/* wrap_signal first kills memshim's witness (its `tail` child), as pkill tail or the OOM killer would. */
static int kill_the_witness;

/* Kills memshim PID's child `tail` with SIGKILL; 1 when there was one. */
static int kill_witness_of(pid_t pid)
{
	glob_t g;
	int found = 0;
	if (glob("/proc/[0-9]*/stat", 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc && !found; i++) {
		char *text = t_read(g.gl_pathv[i], NULL), *close = text ? strrchr(text, ')') : NULL;
		int ppid = 0;
		if (close && strstr(text, "(tail)") && sscanf(close + 2, "%*c %d", &ppid) == 1 && ppid == pid)
			found = kill(atoi(g.gl_pathv[i] + 6), SIGKILL) == 0;
		free(text);
	}
	globfree(&g);
	return found;
}

/* wrap, sending SIG to memshim once the command printed "ready" (it waits for a signal). */
static int wrap_signal(char **args, int sig, char **out, char **err)
{
	char o[4300], e[4300];
	snprintf(o, sizeof o, "%s/stdout", tree);
	snprintf(e, sizeof e, "%s/stderr", tree);
	unlink(o); /* the last run's "ready" is not this one's */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (chdir(tree) || !freopen(o, "w", stdout) || !freopen(e, "w", stderr))
			_exit(99);
		unsetenv("LD_PRELOAD");
		unsetenv("MEMSHIM_OUTPUT");
		unsetenv("MEMSHIM_FAKE_ROOT");
		for (int s = 1; s < 32; s++)
			signal(s, SIG_DFL);
		if (signal_the_group)
			setpgid(0, 0);
		args[0] = script;
		execv(script, args);
		_exit(98);
	}
	for (;;) { /* no time limit here: the test case's timeout ends a hang */
		char *text = t_read(o, NULL);
		int ready = text && strstr(text, "ready\n");
		free(text);
		if (ready)
			break;
		usleep(10000);
	}
	if (kill_the_witness) {
		ck_assert_msg(kill_witness_of(pid), "no witness");
		usleep(200000);
	}
	ck_assert_int_eq(kill(signal_the_group ? -pid : pid, sig), 0);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	*out = t_read(o, NULL);
	*err = t_read(e, NULL);
	return status;
}

static void free2(char *a, char *b)
{
	free(a);
	free(b);
}

/* ERR holds three reports ("==> " headers), two of them children's. */
static void expect_three_reports(const char *err)
{
	int headers = 0, kids = 0;
	for (const char *p = err; (p = strstr(p, "==> ")); p++)
		headers++;
	for (const char *p = err; (p = strstr(p, "child of")); p++)
		kids++;
	ck_assert_msg(headers == 3 && kids == 2, "stderr: %s", err);
}

START_TEST(test_exit_status_and_dump)
{
	char *out, *err, *args[] = { NULL, "run", "--", "/bin/sh", "-c", "exit 7", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 7, "status %#x, stderr: %s", st, err);
	ck_assert_msg(strstr(err, "***** fake metrics *****\n"), "no dump: %s", err);
	ck_assert_ptr_nonnull(strstr(err, "  fake_mem_cpu_alloc_delta = 3MB\n"));
	free2(out, err);
}
END_TEST

/* 147 is 128 + SIGSTOP, which never ends a process: a plain exit status, memshim must not stop. */
START_TEST(test_exit_status_like_a_stop)
{
	char *out, *err, *args[] = { NULL, "run", "--no-dump", "/bin/sh", "-c", "exit 147", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 147, "status %#x", st);
	free2(out, err);
}
END_TEST

START_TEST(test_success)
{
	char *out, *err, *args[] = { NULL, "run", "/bin/true", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, stderr: %s", st, err);
	free2(out, err);
}
END_TEST

static void expect_signal(const char *sig, int signo)
{
	char cmd[64], *out, *err, *args[] = { NULL, "run", "--", "/bin/sh", "-c", cmd, NULL };
	snprintf(cmd, sizeof cmd, "kill -%s $$", sig);
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == signo, "SIG%s: status %#x, stderr: %s", sig, st, err);
	ck_assert_msg(strstr(err, "***** fake metrics *****"), "the dump comes first: %s", err);
	free2(out, err);
}

START_TEST(test_signals)
{
	expect_signal("TERM", SIGTERM);
	expect_signal("INT", SIGINT);
	expect_signal("SEGV", SIGSEGV);
	expect_signal("KILL", SIGKILL);
}
END_TEST

/* A signal sent to memshim reaches the command (docker stop, Slurm's preemption, timeout): a
 * trainer that saves and exits 3 on it ends at once, memshim prints the dump and exits 3. */
static void expect_forwarded(int sig, const char *name)
{
	char fixture[PATH_MAX], caught[64], *out, *err;
	ck_assert_ptr_nonnull(realpath("tests/formatter/fixtures/trap_signal.py", fixture));
	char *args[] = { NULL, "run", "--", "/usr/bin/python3", fixture, NULL };
	int st = wrap_signal(args, sig, &out, &err);
	snprintf(caught, sizeof caught, "ready\ncaught %s\n", name);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "%s: status %#x, stdout: %s, stderr: %s", name, st, out,
		      err);
	ck_assert_str_eq(out, caught);
	ck_assert_msg(strstr(err, "***** fake metrics *****\n"), "%s: no dump: %s", name, err);
	free2(out, err);
}

START_TEST(test_signals_forwarded)
{
	expect_forwarded(SIGTERM, "SIGTERM");
	/* not from a terminal (memshim is in no terminal's foreground here): passed on too */
	expect_forwarded(SIGINT, "SIGINT");
	expect_forwarded(SIGHUP, "SIGHUP");
	expect_forwarded(SIGQUIT, "SIGQUIT");
	expect_forwarded(SIGUSR1, "SIGUSR1");
	expect_forwarded(SIGUSR2, "SIGUSR2");
}
END_TEST

/* A signal sent to the whole group (timeout -s INT, kill -PGID; systemd and Slurm signal every
 * process) comes to the command once, as without memshim: not passed on a second time (a trainer
 * saving a checkpoint on its first SIGINT was ended by the second).  Sent to memshim alone, once too. */
static void expect_once(int sig, const char *name, int group)
{
	char fixture[PATH_MAX], want[64], *out, *err;
	ck_assert_ptr_nonnull(realpath("tests/formatter/fixtures/trap_signal.py", fixture));
	char *args[] = { NULL, "run", "--no-dump", "--", "/usr/bin/python3", fixture, "count", NULL };
	signal_the_group = group;
	int st = wrap_signal(args, sig, &out, &err);
	signal_the_group = 0;
	snprintf(want, sizeof want, "ready\ncaught %s 1 time\n", name);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "%s: status %#x, stderr: %s", name, st, err);
	ck_assert_msg(!strcmp(out, want), "%s to the %s: %s", name, group ? "group" : "wrapper", out);
	free2(out, err);
}

START_TEST(test_signal_comes_once)
{
	expect_once(SIGINT, "SIGINT", 1);
	expect_once(SIGTERM, "SIGTERM", 1);
	expect_once(SIGUSR1, "SIGUSR1", 1);
	expect_once(SIGINT, "SIGINT", 0);
	expect_once(SIGTERM, "SIGTERM", 0);
}
END_TEST

/* Runs trap_signal.py counting, after the arguments PRE (NULL-terminated, e.g. setsid), sends
 * SIGTERM (to the group when GROUP; after killing the witness when KILL_WITNESS): it must come once. */
static void expect_term_once(const char *pre, int group, int kill_witness)
{
	char fixture[PATH_MAX], *out, *err;
	ck_assert_ptr_nonnull(realpath("tests/formatter/fixtures/trap_signal.py", fixture));
	char *args[] = { NULL, "run", "--no-dump", "--", (char *)pre, "/usr/bin/python3", fixture, "count", NULL };
	if (!pre)
		memmove(&args[4], &args[5], 4 * sizeof *args);
	signal_the_group = group;
	kill_the_witness = kill_witness;
	int st = wrap_signal(args, SIGTERM, &out, &err);
	signal_the_group = kill_the_witness = 0;
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x, stderr: %s", st, err);
	ck_assert_str_eq(out, "ready\ncaught SIGTERM 1 time\n");
	free2(out, err);
}

/* A command that left memshim's process group (setsid, a daemon) gets no group signal by itself:
 * memshim passes the group's SIGTERM on (it did not: the witness had it, so memshim took the
 * command to have it too, and the command ran on). */
START_TEST(test_group_signal_reaches_a_command_in_its_own_session)
{
	expect_term_once("setsid", 1, 0);
}
END_TEST

/* A witness that died of something else (pkill tail, the OOM killer) does not swallow the next
 * signal sent to memshim alone (it did: any end of the witness read as a group's signal). */
START_TEST(test_signal_passed_on_after_the_witness_died)
{
	expect_term_once(NULL, 0, 1);
}
END_TEST

/* SIGTERM to the whole group (timeout without --foreground) ends the command as it would bare, and
 * memshim's shell says nothing of it: dash reports a job a signal ended ("Terminated") in a wait. */
START_TEST(test_group_signal_adds_no_line)
{
	char *out, *err,
		*args[] = { NULL, "run", "--no-dump", "--", "/bin/sh", "-c", "echo ready; exec sleep 30", NULL };
	signal_the_group = 1;
	int st = wrap_signal(args, SIGTERM, &out, &err);
	signal_the_group = 0;
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status %#x, stderr: %s", st, err);
	ck_assert_msg(!strstr(err, "Terminated"), "stderr: %s", err);
	free2(out, err);
}
END_TEST

/* The command reads memshim's stdin (a pipe, a file, a terminal), as in the foreground. */
START_TEST(test_stdin_reaches_the_command)
{
	char path[4300], *out, *err, *args[] = { NULL, "run", "--no-dump", "--", "/bin/cat", NULL };
	snprintf(path, sizeof path, "%s/in.txt", tree);
	t_write(path, "from stdin\n", 11);
	stdin_from = "in.txt";
	int st = wrap(NULL, args, &out, &err);
	stdin_from = NULL;
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_str_eq(out, "from stdin\n");
	free2(out, err);
}
END_TEST

START_TEST(test_preload_kept)
{
	char want[9000], *out, *err;
	char *args[] = { NULL, "run", "--", "/bin/sh", "-c", "printf '%s\\n' \"$LD_PRELOAD\"", NULL };
	const char *other = need_env("MF_FAKE_OTHER");
	wrap(other, args, &out, &err);
	snprintf(want, sizeof want, "%s:%s\n", lib, other);
	ck_assert_str_eq(out, want);
	free2(out, err);
	wrap(NULL, args, &out, &err);
	snprintf(want, sizeof want, "%s\n", lib);
	ck_assert_str_eq(out, want);
	free2(out, err);
}
END_TEST

START_TEST(test_both_libraries_loaded)
{
	char *out, *err, *args[] = { NULL, "run", "--", "/bin/cat", "/proc/self/maps", NULL };
	wrap(need_env("MF_FAKE_OTHER"), args, &out, &err);
	ck_assert_msg(strstr(out, "libmemshim") && strstr(out, "libother"), "maps: %s", out);
	free2(out, err);
}
END_TEST

START_TEST(test_options_reach_the_command)
{
	char want[4400], *out, *err;
	char *args[] = { NULL,
			 "run",
			 "--stages",
			 "warm=f",
			 "--output=o.json",
			 "--no-dump",
			 "/bin/sh",
			 "-c",
			 "printf '%s|%s\\n' \"$MEMSHIM_STAGES\" \"$MEMSHIM_OUTPUT\"",
			 NULL };
	int st = wrap(NULL, args, &out, &err);
	snprintf(want, sizeof want, "warm=f|%s/o.json\n", tree);
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(out, want);
	ck_assert_str_eq(err, "");
	free2(out, err);
}
END_TEST

/* With the dump to come, the library leaves the targets that matched nothing to it (one line for
 * the run, not the same again in other words); with --no-dump it names them itself. */
START_TEST(test_library_told_of_the_dump)
{
	char *out, *err;
	char *dump[] = { NULL, "run", "/bin/sh", "-c", "printf '[%s]\\n' \"${MEMSHIM_RUN_DUMP-}\"", NULL };
	ck_assert_int_eq(wrap(NULL, dump, &out, &err), 0);
	ck_assert_str_eq(out, "[1]\n");
	free2(out, err);
	char *none[] = { NULL, "run", "--no-dump", "/bin/sh", "-c", "printf '[%s]\\n' \"${MEMSHIM_RUN_DUMP-}\"", NULL };
	ck_assert_int_eq(wrap(NULL, none, &out, &err), 0);
	ck_assert_str_eq(out, "[]\n");
	free2(out, err);
}
END_TEST

START_TEST(test_children_and_stale_files)
{
	char stale[4300], *out, *err;
	char *args[] = { NULL, "run", "/bin/sh", "-c", "/bin/true; /bin/true", NULL };
	snprintf(stale, sizeof stale, "%s/memshim_metrics.json.999999", tree);
	t_write(stale, "junk", 4);
	int st = wrap(NULL, args, &out, &err);
	ck_assert_int_eq(st, 0);
	expect_three_reports(err);
	ck_assert_ptr_null(strstr(err, "999999"));
	free2(out, err);
}
END_TEST

START_TEST(test_pid_in_output_name)
{
	char *out, *err;
	char *args[] = { NULL, "run", "--output", "r.%p.json", "/bin/sh", "-c", "/bin/true; /bin/true", NULL };
	ck_assert_int_eq(wrap(NULL, args, &out, &err), 0);
	expect_three_reports(err);
	free2(out, err);
}
END_TEST

START_TEST(test_format_and_diff)
{
	char a[4300], b[4300], path[4300], *out, *err;
	snprintf(a, sizeof a, "%s/in/seed.json", t_golden());
	snprintf(b, sizeof b, "%s/in/old.json", t_golden());
	char *fa[] = { NULL, "format", a, NULL }, *da[] = { NULL, "diff", b, a, NULL };
	int st = wrap(NULL, fa, &out, &err);
	snprintf(path, sizeof path, "%s/expect/seed.out", t_golden());
	char *want = t_read(path, NULL);
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(out, want);
	free(want);
	free2(out, err);
	st = wrap(NULL, da, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "diff status %#x", st);
	free2(out, err);
}
END_TEST

START_TEST(test_usage_errors)
{
	char *out, *err, *none[] = { NULL, "run", NULL }, *bad[] = { NULL, "run", "--bogus", "x", NULL };
	ck_assert_int_eq(WEXITSTATUS(wrap(NULL, none, &out, &err)), 125);
	ck_assert_str_eq(err, "memshim: no command given (see memshim --help)\n");
	free2(out, err);
	ck_assert_int_eq(WEXITSTATUS(wrap(NULL, bad, &out, &err)), 125);
	free2(out, err);
	ck_assert_int_eq(unlink(lib), 0);
	char *ok[] = { NULL, "run", "/bin/true", NULL };
	ck_assert_int_eq(WEXITSTATUS(wrap(NULL, ok, &out, &err)), 125);
	ck_assert_ptr_nonnull(strstr(err, "cannot find libmemshim.so"));
	free2(out, err);
}
END_TEST

/* --plot: every process of the run in one picture, drawn after the run; the dump can be left out. */
START_TEST(test_plot)
{
	char *out, *err, path[4300];
	char *args[] = { NULL, "run", "--no-dump", "--plot", "run.svg", "/bin/sh", "-c", "/bin/true; /bin/true", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_str_eq(err, "memshim: picture of the run in run.svg\n");
	free2(out, err);
	struct t_svg s;
	snprintf(path, sizeof path, "%s/run.svg", tree);
	ck_assert_int_eq(t_svg_load(path, &s), 0);
	ck_assert_uint_eq(t_svg_text_count(&s, "memshim · 3 processes"), 1);
	ck_assert_uint_eq(t_svg_text_count(&s, "child of"), 2);
	ck_assert_uint_eq(t_svg_text_count(&s, "no timeline recorded"), 3);
	t_svg_free(&s);
}
END_TEST

/* A picture name that cannot be drawn is refused before the command runs. */
START_TEST(test_plot_bad_name)
{
	char *out, *err, *args[] = { NULL, "run", "--plot", "run.gif", "/bin/sh", "-c", "echo ran", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 125, "status %#x", st);
	ck_assert_str_eq(err, "memshim: --plot wants a file name ending in .svg or .png: run.gif\n");
	ck_assert_str_eq(out, "");
	free2(out, err);
}
END_TEST

START_TEST(test_installed_layout)
{
	teardown();
	make_tree("bin");
	char *out, *err, *args[] = { NULL, "run", "--", "/bin/sh", "-c", "exit 3", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x: %s", st, err);
	ck_assert_ptr_nonnull(strstr(err, "***** fake metrics *****"));
	free2(out, err);
}
END_TEST

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

/* How many files in the tree match PATTERN (a glob relative to the tree). */
static size_t files_like(const char *pattern)
{
	char path[4300];
	glob_t g;
	snprintf(path, sizeof path, "%s/%s", tree, pattern);
	if (glob(path, 0, NULL, &g))
		return 0;
	size_t n = g.gl_pathc;
	globfree(&g);
	return n;
}

static char *tree_file(const char *name)
{
	char path[4300];
	snprintf(path, sizeof path, "%s/%s", tree, name);
	return t_read(path, NULL);
}

START_TEST(test_version)
{
	char want[64], *out, *err, *args[] = { NULL, "--version", NULL };
	int st = wrap(NULL, args, &out, &err);
	snprintf(want, sizeof want, "memshim %d.%d\n", MEMSHIM_VERSION_MAJOR, MEMSHIM_VERSION_MINOR);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_str_eq(out, want);
	ck_assert_str_eq(err, "");
	free2(out, err);
}
END_TEST

/* --help names every command, the --stages syntax and every setting of doc/settings.md's table. */
START_TEST(test_help_lists_everything)
{
	char readme[4300], *out, *err, *args[] = { NULL, "--help", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	static const char *const words[] = { "memshim run ",  "memshim format ",
					     "memshim diff ", "memshim kernel install ",
					     "--version",     "--stages SPEC: comma-separated stage=target" };
	for (size_t i = 0; i < sizeof words / sizeof *words; i++)
		ck_assert_msg(strstr(out, words[i]), "--help lacks %s:\n%s", words[i], out);
	snprintf(readme, sizeof readme, "%s/doc/settings.md", need_env("MF_MAKE_ROOT"));
	char *text = t_read(readme, NULL);
	ck_assert_ptr_nonnull(text);
	int settings = 0;
	for (char *p = text; (p = strstr(p, "\n| `MEMSHIM_")); p++) {
		char name[64];
		size_t n = strcspn(p + 4, "`");
		ck_assert_uint_lt(n, sizeof name);
		memcpy(name, p + 4, n);
		name[n] = '\0';
		ck_assert_msg(strstr(out, name), "--help lacks the setting %s", name);
		settings++;
	}
	ck_assert_int_ge(settings, 9);
	free(text);
	free2(out, err);
}
END_TEST

/* memshim kernel: the Python package's command when it is beside the script, else one line. */
START_TEST(test_kernel_command)
{
	char *out, *err, *args[] = { NULL, "kernel", "install", "--help", NULL }, pkg[4300], link[4300];
	setenv("PYTHON", "/usr/bin/python3", 1);
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 125, "status %#x: %s", st, err);
	ck_assert_msg(strstr(err, "memshim: kernel needs the memshim Python package"), "stderr: %s", err);
	ck_assert_ptr_null(strstr(err, "unknown command"));
	free2(out, err);
	snprintf(pkg, sizeof pkg, "%s/python", need_env("MF_MAKE_ROOT"));
	snprintf(link, sizeof link, "%s/python", tree);
	ck_assert_int_eq(symlink(pkg, link), 0);
	st = wrap(NULL, args, &out, &err);
	unsetenv("PYTHON");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_msg(strstr(out, "usage: memshim kernel install"), "stdout: %s", out);
	free2(out, err);
}
END_TEST

/* A command that cannot run: one memshim line and the shell's status, nothing run or written. */
static void expect_no_command(const char *cmd, int want, const char *message)
{
	char line[4400], *out, *err, *args[] = { NULL, "run", "--", (char *)cmd, "arg", NULL };
	int st = wrap(NULL, args, &out, &err);
	snprintf(line, sizeof line, "memshim: %s: %s\n", cmd, message);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == want, "%s: status %#x, stderr: %s", cmd, st, err);
	ck_assert_str_eq(err, line);
	ck_assert_str_eq(out, "");
	ck_assert_uint_eq(files_like("memshim_metrics.json*"), 0);
	free2(out, err);
}

START_TEST(test_command_cannot_run)
{
	char path[4300];
	snprintf(path, sizeof path, "%s/plain.txt", tree);
	t_write(path, "echo hi\n", 8);
	expect_no_command("nosuchcmd-for-memshim", 127, "command not found");
	expect_no_command("./missing", 127, "No such file or directory");
	expect_no_command("./plain.txt", 126, "Permission denied");
	expect_no_command("./build", 126, "Is a directory");
	/* the wrapper's own function names are not commands */
	expect_no_command("report", 127, "command not found");
}
END_TEST

/* An output directory that cannot take the file stops `memshim run` before the command runs. */
START_TEST(test_bad_output_directory_before_the_run)
{
	char *out, *err, marker[4300];
	snprintf(marker, sizeof marker, "%s/ran", tree);
	char *args[] = { NULL, "run", "--output", "/nonexistent-memshim-dir/m.json", "/usr/bin/touch", marker, NULL };
	int status = wrap(NULL, args, &out, &err);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 125);
	ck_assert_str_eq(err, "memshim: the output directory does not exist: /nonexistent-memshim-dir; choose another "
			      "with --output FILE\n");
	ck_assert_int_ne(access(marker, F_OK), 0); /* the command never ran */
	free2(out, err);
}
END_TEST

/* A statically linked command (pure Go, Rust's crt-static): one line saying LD_PRELOAD cannot apply
 * to it, not "no metrics file was written"; its status is kept. */
START_TEST(test_static_command)
{
	char *out, *err, *args[] = { NULL, "run", "--", (char *)need_env("MF_STATIC_PROG"), NULL };
	char want[4400];
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x: %s", st, err);
	ck_assert_str_eq(out, "static ran\n");
	snprintf(want, sizeof want,
		 "memshim: %s is statically linked: LD_PRELOAD cannot apply to a static binary, so "
		 "memshim saw nothing of it (a dynamically linked build can be measured)\n",
		 args[3]);
	ck_assert_str_eq(err, want);
	free2(out, err);
	/* a dynamically linked command that writes no file (here: the library is not found in it) */
	char *dyn[] = { NULL, "run", "--", "/bin/sh", "-c", "exit 0", NULL };
	ck_assert_int_eq(unlink(lib), 0);
	ck_assert_int_eq(symlink(need_env("MF_FAKE_OTHER"), lib), 0);
	st = wrap(NULL, dyn, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_msg(strstr(err, "memshim: no metrics file was written ("), "%s", err);
	free2(out, err);
}
END_TEST

/* A directory that says it takes the file and does not (/proc: root may write there, yet no file
 * can be made) is found before the run too, with the option that chooses another. */
START_TEST(test_output_directory_that_takes_no_file)
{
	char *out, *err, marker[4300];
	snprintf(marker, sizeof marker, "%s/ran", tree);
	char *args[] = { NULL, "run", "--output", "/proc/m.json", "/usr/bin/touch", marker, NULL };
	int status = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 125, "status %#x: %s", status, err);
	ck_assert_msg(strstr(err, " /proc; choose another with --output FILE\n") && !strchr(err, '\n')[1], "%s", err);
	ck_assert_int_ne(access(marker, F_OK), 0);
	free2(out, err);
}
END_TEST

/* An option whose value is missing takes no "--" or option as its value (`memshim run
 * --stages -- true` ran `true` with the stage list "--"): a usage error naming the option. */
START_TEST(test_option_without_its_value)
{
	static const char *const cases[][3] = {
		{ "--stages", "--", "memshim: --stages needs a value, not -- (see memshim --help)\n" },
		{ "--stages", "--all", "memshim: --stages needs a value, not --all (see memshim --help)\n" },
		{ "--output", "--", "memshim: --output needs a value, not -- (see memshim --help)\n" },
		{ "--plot", "--", "memshim: --plot needs a value, not -- (see memshim --help)\n" },
		{ "--stages=--", NULL, "memshim: --stages needs a value, not -- (see memshim --help)\n" },
	};
	char *out, *err, marker[4300];
	snprintf(marker, sizeof marker, "%s/ran", tree);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char *args[] = {
			NULL, "run", (char *)cases[i][0], (char *)cases[i][1], "/usr/bin/touch", marker, NULL
		};
		if (!cases[i][1]) /* --stages=VALUE */
			args[3] = "/usr/bin/touch", args[4] = marker, args[5] = NULL;
		int status = wrap(NULL, args, &out, &err);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 125, "%s: status %#x", cases[i][0], status);
		ck_assert_str_eq(err, cases[i][2]);
		ck_assert_int_ne(access(marker, F_OK), 0);
		free2(out, err);
	}
}
END_TEST

/* --output naming a directory (an existing one, or any name ending in '/') stops `memshim run`
 * before the command runs, as an unwritable directory does: else its metrics are lost at the end. */
START_TEST(test_output_naming_a_directory_before_the_run)
{
	static const char *const outputs[] = { "build", "build/", "runs/" };
	char *out, *err, marker[4300], want[4400];
	snprintf(marker, sizeof marker, "%s/ran", tree);
	char *args[] = { NULL, "run", "--output", (char *)outputs[_i], "/usr/bin/touch", marker, NULL };
	int status = wrap(NULL, args, &out, &err);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 125);
	snprintf(want, sizeof want, "memshim: --output names a directory, not a file: %s/%s\n", tree, outputs[_i]);
	ck_assert_str_eq(err, want);
	ck_assert_int_ne(access(marker, F_OK), 0); /* the command never ran */
	free2(out, err);
}
END_TEST

/* The previous run's files are kept as NAME.prev, one generation, and never shown in the dump. */
START_TEST(test_previous_run_kept)
{
	char want[9000], *out, *err, *first, *second, *now;
	char *kids[] = { NULL, "run", "/bin/sh", "-c", "/bin/true", NULL };
	char *one[] = { NULL, "run", "/bin/true", NULL };
	ck_assert_int_eq(wrap(NULL, kids, &out, &err), 0);
	ck_assert_ptr_null(strstr(err, "previous run"));
	free2(out, err);
	first = tree_file("memshim_metrics.json");
	ck_assert_int_eq(wrap(NULL, one, &out, &err), 0);
	snprintf(want, sizeof want,
		 "memshim: kept the previous run's metrics (2 files) as "
		 "%s/memshim_metrics.json.prev and %s/memshim_metrics.json.<pid>.prev\n",
		 tree, tree);
	ck_assert_msg(!strncmp(err, want, strlen(want)), "stderr: %s", err);
	ck_assert_int_eq(count(err, "***** fake metrics *****"), 1);
	ck_assert_int_eq(count(err, "==> "), 0);
	now = tree_file("memshim_metrics.json.prev");
	ck_assert_str_eq(now, first);
	ck_assert_uint_eq(files_like("memshim_metrics.json.*.prev"), 1);
	free2(out, err);
	free(now);
	second = tree_file("memshim_metrics.json");
	ck_assert_int_eq(wrap(NULL, one, &out, &err), 0);
	snprintf(want, sizeof want,
		 "memshim: kept the previous run's metrics (1 file) as "
		 "%s/memshim_metrics.json.prev\n",
		 tree);
	ck_assert_msg(!strncmp(err, want, strlen(want)), "stderr: %s", err);
	now = tree_file("memshim_metrics.json.prev");
	ck_assert_str_eq(now, second);
	ck_assert_uint_eq(files_like("memshim_metrics.json.*.prev"), 0);
	free2(out, err);
	free(now);
	free2(first, second);
}
END_TEST

START_TEST(test_previous_run_kept_pid_name)
{
	char want[4400], *out, *err;
	char *args[] = { NULL, "run", "--output", "r.%p.json", "/bin/sh", "-c", "/bin/true", NULL };
	ck_assert_int_eq(wrap(NULL, args, &out, &err), 0);
	free2(out, err);
	ck_assert_int_eq(wrap(NULL, args, &out, &err), 0);
	snprintf(want, sizeof want,
		 "memshim: kept the previous run's metrics (2 files) as "
		 "%s/r.<pid>.json.prev\n",
		 tree);
	ck_assert_msg(!strncmp(err, want, strlen(want)), "stderr: %s", err);
	ck_assert_int_eq(count(err, "==> "), 2);
	ck_assert_uint_eq(files_like("r.*.json.prev"), 2);
	ck_assert_uint_eq(files_like("r.*.json"), 2);
	free2(out, err);
}
END_TEST

/* A multi-rank run prints one merged table of its ranks, not a dump per process. */
START_TEST(test_ranks_merged)
{
	char *out, *err;
	char *args[] = { NULL, "run", "/bin/sh", "-c", "RANK=0 /bin/true; RANK=1 /bin/true", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_msg(strstr(err, "\nmemshim: merged the 2 ranks; left out 1 process without a rank "
				  "of its own: pid "),
		      "stderr: %s", err);
	ck_assert_ptr_nonnull(strstr(err, "***** fake metrics (2 processes) *****\n"));
	ck_assert_ptr_nonnull(strstr(err, "  key                       min  max  mean  sum  max at\n"));
	ck_assert_ptr_nonnull(strstr(err, "  fake_mem_cpu_alloc_delta  3MB  3MB   3MB  6MB  rank 0\n"));
	ck_assert_ptr_nonnull(strstr(err, "\nmemshim: one table for the 2 ranks; "));
	ck_assert_int_eq(count(err, "***** fake metrics *****"), 0);
	free2(out, err);
}
END_TEST

/* A template naming the rank (or the pid) is each process's own name: the wrapper finds every
 * file it gives, and keeps them as .prev for the next run. */
START_TEST(test_rank_in_output_name)
{
	char want[4400], *out, *err;
	char *args[] = { NULL, "run", "--output", "m_%r.json", "/bin/sh", "-c", "RANK=0 /bin/true; RANK=1 /bin/true",
			 NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_msg(strstr(err, "***** fake metrics (2 processes) *****\n"), "stderr: %s", err);
	ck_assert_ptr_nonnull(strstr(err, "\nmemshim: one table for the 2 ranks; "));
	ck_assert_uint_eq(files_like("m_[01].json"), 2);
	ck_assert_uint_eq(files_like("m_pid*.json"), 1);
	free2(out, err);
	st = wrap(NULL, args, &out, &err);
	snprintf(want, sizeof want,
		 "memshim: kept the previous run's metrics (3 files) as "
		 "%s/m_<rank>.json.prev\n",
		 tree);
	ck_assert_msg(!strncmp(err, want, strlen(want)), "stderr: %s", err);
	ck_assert_uint_eq(files_like("m_*.json.prev"), 3);
	ck_assert_ptr_nonnull(strstr(err, "***** fake metrics (2 processes) *****\n"));
	free2(out, err);
	/* a placeholder in a directory: each rank's directory (made by the program) */
	char *dirs[] = { NULL,
			 "run",
			 "--output",
			 "r%r/m.json",
			 "/bin/sh",
			 "-c",
			 "mkdir r0 r1 rpid$$; RANK=0 /bin/true; RANK=1 /bin/true",
			 NULL };
	st = wrap(NULL, dirs, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_ptr_nonnull(strstr(err, "\nmemshim: one table for the 2 ranks; "));
	ck_assert_uint_eq(files_like("r[01]/m.json"), 2);
	free2(out, err);
}
END_TEST

/* MEMSHIM_CHILDREN_DIR: the children's files are found there too. */
START_TEST(test_children_dir)
{
	char kids[4300], *out, *err,
		*args[] = { NULL, "run", "--output", "r.%p.json", "/bin/sh", "-c", "/bin/true; /bin/true", NULL };
	snprintf(kids, sizeof kids, "%s/kids", tree);
	ck_assert_int_eq(mkdir(kids, 0755), 0);
	setenv("MEMSHIM_CHILDREN_DIR", "kids", 1);
	setenv("MEMSHIM_FAKE_KIDS", kids, 1);
	int st = wrap(NULL, args, &out, &err);
	unsetenv("MEMSHIM_CHILDREN_DIR");
	unsetenv("MEMSHIM_FAKE_KIDS");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_uint_eq(files_like("kids/r.*.json"), 2);
	expect_three_reports(err);
	free2(out, err);
}
END_TEST

/* Processes that opened no stage and stayed small are named in one line, not dumped. */
START_TEST(test_launchers_summarised)
{
	char *out, *err;
	char *args[] = { NULL, "run", "/bin/sh", "-c", "MEMSHIM_FAKE_MINOR=1 /bin/true; MEMSHIM_FAKE_MINOR=1 /bin/true",
			 NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_int_eq(count(err, "==> "), 1);
	ck_assert_int_eq(count(err, "***** fake metrics *****"), 1);
	ck_assert_msg(strstr(err, "\nmemshim: 2 other processes (launchers, shells) opened no stage and "
				  "peaked under 16MB: pid "),
		      "stderr: %s", err);
	ck_assert_ptr_nonnull(strstr(err, "; --all shows them\n"));
	ck_assert_int_eq(count(err, "init metrics"), 0);
	free2(out, err);
	/* --all: every process on its own */
	char *all[] = { NULL,      "run", "--all",
			"/bin/sh", "-c",  "MEMSHIM_FAKE_MINOR=1 /bin/true; RANK=0 /bin/true; RANK=1 /bin/true",
			NULL };
	st = wrap(NULL, all, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_int_eq(count(err, "==> "), 4);
	ck_assert_int_eq(count(err, "***** init metrics *****"), 1);
	ck_assert_int_eq(count(err, "***** fake metrics *****"), 3);
	ck_assert_ptr_null(strstr(err, "other process"));
	ck_assert_ptr_null(strstr(err, "merged"));
	free2(out, err);
}
END_TEST

/* Helpers (pyenv's shim ran 40 of them before python) write into the run's own
 * directory, which memshim run reads for the dump and removes: the user's directory keeps the one
 * file of the process that did the work. */
START_TEST(test_helpers_in_the_run_directory)
{
	char *out, *err;
	char *args[] = { NULL,
			 "run",
			 "/bin/sh",
			 "-c",
			 "echo \"$MEMSHIM_RUN_DIR\"; MEMSHIM_FAKE_MINOR=1 /bin/true; MEMSHIM_FAKE_MINOR=1 /bin/true",
			 NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_msg(!strncmp(out, "/tmp/memshim-run.", 17) || strstr(out, "/memshim-run."), "run dir: %s", out);
	out[strcspn(out, "\n")] = '\0';
	ck_assert_msg(access(out, F_OK) != 0, "%s is left", out);
	ck_assert_uint_eq(files_like("memshim_metrics.json*"), 1);
	ck_assert_int_eq(count(err, "***** fake metrics *****"), 1);
	ck_assert_msg(strstr(err, "\nmemshim: 2 other processes (launchers, shells) opened no stage and "
				  "peaked under 16MB: pid "),
		      "stderr: %s", err);
	free2(out, err);
}
END_TEST

/* --sites: the call sites at each stage's peak after the dump; one line when sampling was off;
 * in a multi-rank run, those of the rank that peaked highest. */
START_TEST(test_sites)
{
	char *out, *err;
	char *args[] = { NULL, "run", "--sites", "/bin/sh", "-c", "exit 3", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x: %s", st, err);
	const char *dump = strstr(err, "***** fake metrics *****\n");
	const char *sites = strstr(err, "\n\n***** fake call sites at the peak *****\n"
					"  CPU peak 4MB; sampled every 512 KB on average, 6 samples at the peak; "
					"sites taken at the peak\n");
	ck_assert_msg(dump && sites && dump < sites, "stderr: %s", err);
	ck_assert_ptr_nonnull(strstr(sites, "  1    2MB  50.0%        4  fake_alloc (fake.py:3)\n"
					    "                              main (fake.py:9)\n"
					    "  2    1MB  25.0%        2  fake_native+0x10 (libfake.so)\n"));
	ck_assert_str_eq(out, "");
	free2(out, err);
	/* --no-dump: only the sites */
	char *quiet[] = { NULL, "run", "--no-dump", "--sites", "/bin/true", NULL };
	st = wrap(NULL, quiet, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_msg(!strncmp(err, "memshim: kept the previous run's metrics", 40), "stderr: %s", err);
	ck_assert_ptr_null(strstr(err, "fake metrics"));
	ck_assert_int_eq(count(err, "***** fake call sites at the peak *****\n"), 1);
	free2(out, err);
	/* sampling off */
	setenv("MEMSHIM_SITES", "0", 1);
	st = wrap(NULL, args, &out, &err);
	unsetenv("MEMSHIM_SITES");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x: %s", st, err);
	ck_assert_msg(strstr(err, "has no call sites: sampling was off (MEMSHIM_SITES=0), or the file "
				  "predates call-site sampling\n"),
		      "stderr: %s", err);
	ck_assert_ptr_null(strstr(err, "call sites at the peak"));
	free2(out, err);
}
END_TEST

START_TEST(test_sites_ranks)
{
	char *out, *err;
	char *args[] = { NULL, "run", "--sites", "/bin/sh", "-c", "RANK=0 /bin/true; RANK=1 /bin/true", NULL };
	int st = wrap(NULL, args, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_int_eq(count(err, "***** fake call sites at the peak *****"), 1);
	ck_assert_msg(strstr(err, "  1    3MB  60.0%        6  fake_alloc (fake.py:3)\n"), "stderr: %s", err);
	ck_assert_ptr_nonnull(strstr(err, ", rank 1 of 2 (torchrun), child of "));
	ck_assert_ptr_nonnull(strstr(err, "\nmemshim: call sites of rank 1 only, the highest CPU peak of "
					  "the 2 ranks; memshim-format --sites FILE... shows every "
					  "process\n"));
	free2(out, err);
	/* --all: every process's sites */
	char *all[] = { NULL, "run", "--sites", "--all", "/bin/sh", "-c", "RANK=0 /bin/true; RANK=1 /bin/true", NULL };
	st = wrap(NULL, all, &out, &err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, err);
	ck_assert_int_eq(count(err, "***** fake call sites at the peak *****"), 3);
	ck_assert_ptr_null(strstr(err, "only, the highest"));
	free2(out, err);
}
END_TEST

/* make install into a DESTDIR: every file where the README says, a pkg-config file for memshim.h,
 * the Python package finding the installed library; make uninstall leaves no file behind. */
static int make_in_root(const char *target, const char *dest, const char *log)
{
	char cmd[13000];
	snprintf(cmd, sizeof cmd,
		 "cd '%s' && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s %s "
		 "DESTDIR='%s' PREFIX=/opt/ms BUILD='%s' >'%s' 2>&1",
		 need_env("MF_MAKE_ROOT"), target, dest, need_env("MF_BUILD"), log);
	return system(cmd);
}

/* What a shell command prints on stdout. */
static char *run_text(const char *cmd)
{
	size_t n = 0, got;
	char *text = malloc(4097);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while ((got = fread(text + n, 1, 4096, p)) > 0)
		text = realloc(text, (n += got) + 4097);
	text[n] = '\0';
	pclose(p);
	return text;
}

START_TEST(test_install_uninstall)
{
	static const char *const files[] = { "bin/memshim",
					     "bin/memshim-format",
					     "lib/libmemshim.so",
					     "include/memshim.h",
					     "lib/pkgconfig/memshim.pc",
					     "lib/memshim/python/memshim/__init__.py",
					     "lib/memshim/python/memshim/cli.py",
					     "lib/memshim/python/memshim/hf.py" };
	char *dest = t_tmpdir(), log[4300], path[4400], cmd[13000], want[200], *text;
	snprintf(log, sizeof log, "%s.log", dest);
	int rc = make_in_root("install", dest, log);
	text = t_read(log, NULL);
	ck_assert_msg(rc == 0, "make install: %s", text);
	free(text);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		struct stat st;
		snprintf(path, sizeof path, "%s/opt/ms/%s", dest, files[i]);
		ck_assert_msg(stat(path, &st) == 0, "not installed: %s", files[i]);
	}
	snprintf(cmd, sizeof cmd,
		 "PKG_CONFIG_PATH='%s/opt/ms/lib/pkgconfig' pkg-config --cflags "
		 "--libs memshim; PKG_CONFIG_PATH='%s/opt/ms/lib/pkgconfig' pkg-config --modversion "
		 "memshim",
		 dest, dest);
	text = run_text(cmd);
	snprintf(want, sizeof want, "-I/opt/ms/include -L/opt/ms/lib -lmemshim \n%d.%d\n", MEMSHIM_VERSION_MAJOR,
		 MEMSHIM_VERSION_MINOR);
	ck_assert_str_eq(text, want);
	free(text);
	snprintf(cmd, sizeof cmd,
		 "PYTHONPATH='%s/opt/ms/lib/memshim/python' /usr/bin/python3 -c "
		 "'import memshim; print(memshim.library_path())'",
		 dest);
	text = run_text(cmd);
	snprintf(path, sizeof path, "%s/opt/ms/lib/libmemshim.so\n", dest);
	ck_assert_str_eq(text, path);
	free(text);
	snprintf(cmd, sizeof cmd, "'%s/opt/ms/bin/memshim' --version", dest);
	text = run_text(cmd);
	snprintf(want, sizeof want, "memshim %d.%d\n", MEMSHIM_VERSION_MAJOR, MEMSHIM_VERSION_MINOR);
	ck_assert_str_eq(text, want);
	free(text);
	rc = make_in_root("uninstall", dest, log);
	text = t_read(log, NULL);
	ck_assert_msg(rc == 0, "make uninstall: %s", text);
	free(text);
	snprintf(cmd, sizeof cmd,
		 "find '%s' -type f; test -e '%s/opt/ms/lib/memshim' && echo "
		 "lib/memshim",
		 dest, dest);
	text = run_text(cmd);
	ck_assert_msg(!*text, "left after make uninstall: %s", text);
	free(text);
	unlink(log);
	t_rmtree(dest);
	free(dest);
}
END_TEST

Suite *wrapper_suite(void)
{
	Suite *s = suite_create("wrapper");
	TCase *tc = tcase_create("run");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_exit_status_and_dump);
	tcase_add_test(tc, test_success);
	tcase_add_test(tc, test_exit_status_like_a_stop);
	tcase_add_test(tc, test_signals);
	tcase_add_test(tc, test_signals_forwarded);
	tcase_add_test(tc, test_signal_comes_once);
	tcase_add_test(tc, test_group_signal_adds_no_line);
	tcase_add_test(tc, test_group_signal_reaches_a_command_in_its_own_session);
	tcase_add_test(tc, test_signal_passed_on_after_the_witness_died);
	tcase_add_test(tc, test_stdin_reaches_the_command);
	tcase_add_test(tc, test_preload_kept);
	tcase_add_test(tc, test_both_libraries_loaded);
	tcase_add_test(tc, test_options_reach_the_command);
	tcase_add_test(tc, test_library_told_of_the_dump);
	tcase_add_test(tc, test_children_and_stale_files);
	tcase_add_test(tc, test_pid_in_output_name);
	tcase_add_test(tc, test_format_and_diff);
	tcase_add_test(tc, test_usage_errors);
	tcase_add_test(tc, test_installed_layout);
	tcase_add_test(tc, test_plot);
	tcase_add_test(tc, test_plot_bad_name);
	tcase_add_test(tc, test_version);
	tcase_add_test(tc, test_help_lists_everything);
	tcase_add_test(tc, test_kernel_command);
	tcase_add_test(tc, test_command_cannot_run);
	tcase_add_test(tc, test_bad_output_directory_before_the_run);
	tcase_add_test(tc, test_output_directory_that_takes_no_file);
	tcase_add_test(tc, test_option_without_its_value);
	tcase_add_test(tc, test_static_command);
	tcase_add_loop_test(tc, test_output_naming_a_directory_before_the_run, 0, 3);
	tcase_add_test(tc, test_previous_run_kept);
	tcase_add_test(tc, test_previous_run_kept_pid_name);
	tcase_add_test(tc, test_ranks_merged);
	tcase_add_test(tc, test_rank_in_output_name);
	tcase_add_test(tc, test_children_dir);
	tcase_add_test(tc, test_launchers_summarised);
	tcase_add_test(tc, test_helpers_in_the_run_directory);
	tcase_add_test(tc, test_sites);
	tcase_add_test(tc, test_sites_ranks);
	suite_add_tcase(s, tc);
	TCase *inst = tcase_create("install");
	tcase_set_timeout(inst, 120);
	tcase_add_test(inst, test_install_uninstall);
	suite_add_tcase(s, inst);
	return s;
}
