/* Lineage records (core/lineage.c): what a tracked process hands the processes it execs, in a file
 * keyed by its pid and start time instead of the environment.  The stat line's parser, then
 * records written and found for real in the user's directory (each test runs in a process of
 * its own: its pid and start time are its records' names). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "core/lineage.h"

struct stat_case {
	const char *what, *text;
	int rc;
	long ppid;
	uint64_t start;
};

static const struct stat_case stat_cases[] = {
	{ "a plain line", "4242 (python3) S 4000 4242 4000 34816 4242 4194304 77 0 0 0 0 0 0 0 20 0 1 0 101164 "
			  "2461696 226 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
	  0, 4000, 101164 },
	{ "no terminal: tpgid -1", "7 (sh) R 1 7 7 0 -1 4194560 90 0 0 0 0 0 0 0 20 0 1 0 55 2400000 200 1 2\n", 0, 1, 55 },
	{ "a name with spaces and parentheses", "99 (a) (b c) S 12 99 99 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 8765 1 1\n", 0,
	  12, 8765 },
	{ "cut before the start time", "99 (x) S 12 99 99 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0", -1, 0, 0 },
	{ "a start time that is no number", "99 (x) S 12 99 99 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 1\n", -1, 0, 0 },
	{ "no name at all", "99 x S 12", -1, 0, 0 },
};

START_TEST(stat_lines)
{
	const struct stat_case *c = &stat_cases[_i];
	long ppid = 0;
	uint64_t start = 0;
	int rc = ms_lineage_parse_stat(c->text, strlen(c->text), &ppid, &start);
	ck_assert_msg(rc == c->rc, "%s: rc %d", c->what, rc);
	if (rc == 0)
		ck_assert_msg(ppid == c->ppid && start == c->start, "%s: ppid %ld start %llu", c->what, ppid,
			      (unsigned long long)start);
}
END_TEST

static uint64_t start_of(pid_t pid)
{
	char path[64], text[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, text, sizeof text);
	close(fd);
	long ppid;
	uint64_t start;
	ck_assert_int_eq(ms_lineage_parse_stat(text, (size_t)n, &ppid, &start), 0);
	return start;
}

static void record_path(char *out, size_t size, pid_t pid, uint64_t start)
{
	snprintf(out, size, "%s/%d.%llu%s", ms_lineage_dir(), (int)pid, (unsigned long long)start, MS_LINEAGE_SUFFIX);
}

static struct ms_lineage mine, got;

static void fill(struct ms_lineage *l)
{
	memset(l, 0, sizeof *l);
	l->root_pid = 1234;
	l->output_pid = getpid();
	l->py_root_pid = 77;
	snprintf(l->output, sizeof l->output, "/data/run %s.json", "one");
	snprintf(l->output_setting, sizeof l->output_setting, "run %%p.json");
	snprintf(l->rank_held, sizeof l->rank_held, "torchrun/1/0");
}

static int same(const struct ms_lineage *a, const struct ms_lineage *b)
{
	return a->root_pid == b->root_pid && a->output_pid == b->output_pid && a->py_root_pid == b->py_root_pid &&
	       !strcmp(a->output, b->output) && !strcmp(a->output_setting, b->output_setting) &&
	       !strcmp(a->rank_held, b->rank_held);
}

/* A record is found by this process again (an exec in place keeps pid and start time), and by a
 * forked child (its parent's); it is a file of the user's own, 0600, in a 0700 directory, and
 * gone once removed. */
START_TEST(written_found_and_removed)
{
	char path[256];
	struct stat st;
	fill(&mine);
	ck_assert_int_eq(ms_lineage_publish(&mine), 0);
	record_path(path, sizeof path, getpid(), start_of(getpid()));
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600 && st.st_uid == geteuid());
	ck_assert_int_eq(stat(ms_lineage_dir(), &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(ms_lineage_find(&got), 1);
	ck_assert(same(&got, &mine));
	mine.py_root_pid = getpid(); /* a change later: replaced whole */
	ck_assert_int_eq(ms_lineage_publish(&mine), 0);
	pid_t child = fork();
	if (child == 0) {
		struct ms_lineage seen;
		ms_lineage_forked();
		ms_lineage_remove(); /* the parent's record: never the child's to remove */
		_exit(ms_lineage_find(&seen) == 1 && same(&seen, &mine) ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child did not find its parent's");
	ck_assert_int_eq(access(path, F_OK), 0);
	ms_lineage_remove();
	ck_assert_int_ne(access(path, F_OK), 0);
	memset(&got, 0, sizeof got);
	ck_assert_int_eq(ms_lineage_find(&got), 0);
}
END_TEST

/* A record under this pid with another start time was another process's (a recycled pid), and a
 * cut or altered record is no record: neither is taken, and the walk goes on to the parent's. */
START_TEST(stale_and_broken_records_are_never_taken)
{
	char path[256], stale[256];
	fill(&mine);
	ck_assert_int_eq(ms_lineage_publish(&mine), 0);
	uint64_t start = start_of(getpid());
	record_path(path, sizeof path, getpid(), start);
	record_path(stale, sizeof stale, getpid(), start + 1);
	ck_assert_int_eq(rename(path, stale), 0);
	ck_assert_int_eq(ms_lineage_find(&got), 0);
	ck_assert_int_eq(rename(stale, path), 0);
	ck_assert_int_eq(ms_lineage_find(&got), 1);
	ck_assert_int_eq(truncate(path, 60), 0);
	ck_assert_int_eq(ms_lineage_find(&got), 0);
	unlink(stale);
	ms_lineage_remove();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lineage");
	TCase *tc = tcase_create("records");
	tcase_add_loop_test(tc, stat_lines, 0, (int)(sizeof stat_cases / sizeof *stat_cases));
	tcase_add_test(tc, written_found_and_removed);
	tcase_add_test(tc, stale_and_broken_records_are_never_taken);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
