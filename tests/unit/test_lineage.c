/* Lineage records (core/lineage.c): what a tracked process hands the processes it execs, in a
 * record keyed by its pid and start time instead of the environment.  The stat line's parser and
 * the record's text, then records written and found for real in the user's directory (each test
 * runs in a process of its own: its pid and start time are its records' names). */
#include <check.h>
#include <dirent.h>
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
	{ "the longest name, of parentheses, after the longest pid",
	  "4194304 ())))))))))))))) S 12 99 99 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 8765 1 1\n", 0, 12, 8765 },
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

static struct ms_lineage mine, got;

static void fill(struct ms_lineage *l)
{
	memset(l, 0, sizeof *l);
	l->root_pid = 1234;
	l->output_pid = getpid();
	l->py_root_pid = 77;
	snprintf(l->output, sizeof l->output, "/data/run %s:7.json", "one");
	snprintf(l->output_setting, sizeof l->output_setting, "run %%p.json");
	snprintf(l->rank_held, sizeof l->rank_held, "torchrun/1/0");
}

static int same(const struct ms_lineage *a, const struct ms_lineage *b)
{
	return a->root_pid == b->root_pid && a->output_pid == b->output_pid && a->py_root_pid == b->py_root_pid &&
	       !strcmp(a->output, b->output) && !strcmp(a->output_setting, b->output_setting) &&
	       !strcmp(a->rank_held, b->rank_held);
}

/* The text round-trips, whatever bytes the paths hold besides NUL (a ':' or a digit after a
 * length, a newline), up to the longest paths; a text cut, padded or altered is no record. */
START_TEST(texts)
{
	static char text[MS_LINEAGE_TEXT_MAX + 1], bad[MS_LINEAGE_TEXT_MAX + 8];
	fill(&mine);
	snprintf(mine.output_setting, sizeof mine.output_setting, "12:\n %%r 3:x");
	size_t n = ms_lineage_encode(&mine, text, sizeof text);
	ck_assert_uint_eq(n, strlen(text));
	ck_assert_int_eq(ms_lineage_decode(text, n, &got), 0);
	ck_assert(same(&got, &mine));
	ck_assert_int_eq(ms_lineage_decode(text, n - 1, &got), -1);
	memcpy(bad, text, n);
	bad[n] = 'x';
	ck_assert_int_eq(ms_lineage_decode(bad, n + 1, &got), -1);
	bad[0] = 'M';
	ck_assert_int_eq(ms_lineage_decode(bad, n, &got), -1);
	ck_assert_int_eq(ms_lineage_decode("LINEAGE1 1 2 3 0:0:99999:", 25, &got), -1);
	memset(mine.output, 'o', sizeof mine.output - 1);
	memset(mine.output_setting, 's', sizeof mine.output_setting - 1);
	memset(mine.rank_held, 'r', sizeof mine.rank_held - 1);
	n = ms_lineage_encode(&mine, text, sizeof text);
	ck_assert_int_eq(ms_lineage_decode(text, n, &got), 0);
	ck_assert(same(&got, &mine));
}
END_TEST

/* Whether PATH is there (a record is a symbolic link to no file: lstat, never access). */
static int present(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* This process's start time, in clock ticks after boot. */
static uint64_t own_start(void)
{
	char text[1024];
	int fd = open("/proc/self/stat", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, text, sizeof text);
	close(fd);
	long ppid;
	uint64_t start;
	ck_assert_int_eq(ms_lineage_parse_stat(text, (size_t)n, &ppid, &start), 0);
	return start;
}

/* The path of this process's record into OUT; 0 when there is none. */
static int own_record(char *out, size_t size)
{
	char prefix[32];
	int n = snprintf(prefix, sizeof prefix, "%d.", (int)getpid()), found = 0;
	DIR *d = opendir(ms_lineage_dir());
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, (size_t)n) && strstr(e->d_name, MS_LINEAGE_SUFFIX)) {
			snprintf(out, size, "%s/%s", ms_lineage_dir(), e->d_name);
			found++;
		}
	if (d)
		closedir(d);
	ck_assert_int_le(found, 1);
	return found;
}

/* A record is found by this process again (an exec in place keeps pid and start time), and by a
 * forked child (its parent's); it is a symbolic link in a 0700 directory of the user's own (a
 * file when the text is too long for a link), and gone once removed. */
START_TEST(written_found_and_removed)
{
	char path[512], later[512];
	struct stat st;
	fill(&mine);
	ck_assert_int_eq(ms_lineage_publish(&mine), 0);
	ck_assert(own_record(path, sizeof path));
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISLNK(st.st_mode) && st.st_uid == geteuid());
	ck_assert_int_eq(lstat(ms_lineage_dir(), &st), 0);
	ck_assert(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 && st.st_uid == geteuid());
	ck_assert_int_eq(ms_lineage_find(&got), 1);
	ck_assert(same(&got, &mine));
	mine.py_root_pid = getpid(); /* a change later: a new record, the old one gone */
	memset(mine.output_setting, 'x', 4090); /* too long for a link: a file */
	ck_assert_int_eq(ms_lineage_publish(&mine), 0);
	ck_assert(own_record(later, sizeof later));
	ck_assert_str_ne(later, path);
	ck_assert_int_eq(lstat(later, &st), 0);
	ck_assert(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
	pid_t child = fork();
	if (child == 0) {
		struct ms_lineage seen;
		ms_lineage_remove(); /* the parent's record: never the child's to remove */
		_exit(ms_lineage_find(&seen) == 1 && same(&seen, &mine) ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child did not find its parent's");
	ck_assert(present(later));
	ms_lineage_remove();
	ck_assert_int_eq(own_record(path, sizeof path), 0);
	memset(&got, 0, sizeof got);
	ck_assert_int_eq(ms_lineage_find(&got), 0);
}
END_TEST

/* A record under this pid written before this process started was an earlier process's (a
 * recycled pid, killed: nothing removed it), and a cut or altered record is no record: neither is
 * taken, and the walk goes on to the parent's. */
START_TEST(stale_and_broken_records_are_never_taken)
{
	static char text[MS_LINEAGE_TEXT_MAX + 1];
	char path[256];
	fill(&mine);
	ms_lineage_encode(&mine, text, sizeof text);
	mkdir(ms_lineage_dir(), 0700);
	uint64_t before = own_start() * (1000000000u / (unsigned long)sysconf(_SC_CLK_TCK)) - 1;
	snprintf(path, sizeof path, "%s/%d.%llu%s", ms_lineage_dir(), (int)getpid(), (unsigned long long)before,
		 MS_LINEAGE_SUFFIX);
	ck_assert_int_eq(symlink(text, path), 0);
	ck_assert_int_eq(ms_lineage_find(&got), 0);
	ck_assert(present(path)); /* not this process's: not taken; it lives, so it is kept */
	unlink(path);
	snprintf(path, sizeof path, "%s/%d.%llu%s", ms_lineage_dir(), (int)getpid(), (unsigned long long)before + 1,
		 MS_LINEAGE_SUFFIX);
	ck_assert_int_eq(symlink(text, path), 0);
	ck_assert_int_eq(ms_lineage_find(&got), 1);
	ck_assert(same(&got, &mine));
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(symlink("LINEAGE1 1 2 3 4:/x", path), 0);
	ck_assert_int_eq(ms_lineage_find(&got), 0);
	unlink(path);
}
END_TEST

/* A record whose process is gone (a killed process's: nothing removed it) is removed by the next
 * walk that found nothing. */
START_TEST(records_of_processes_gone_are_removed)
{
	static char text[MS_LINEAGE_TEXT_MAX + 1];
	char path[256];
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(gone, NULL, 0), gone);
	fill(&mine);
	ms_lineage_encode(&mine, text, sizeof text);
	mkdir(ms_lineage_dir(), 0700);
	snprintf(path, sizeof path, "%s/%d.1%s", ms_lineage_dir(), (int)gone, MS_LINEAGE_SUFFIX);
	ck_assert_int_eq(symlink(text, path), 0);
	ck_assert(present(path));
	ck_assert_int_eq(ms_lineage_find(&got), 0);
	ck_assert(!present(path));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lineage");
	TCase *tc = tcase_create("records");
	tcase_add_loop_test(tc, stat_lines, 0, (int)(sizeof stat_cases / sizeof *stat_cases));
	tcase_add_test(tc, texts);
	tcase_add_test(tc, written_found_and_removed);
	tcase_add_test(tc, stale_and_broken_records_are_never_taken);
	tcase_add_test(tc, records_of_processes_gone_are_removed);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
