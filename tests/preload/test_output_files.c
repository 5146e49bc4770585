/* Integration: the metrics file itself and the shim's warnings about it.  Links followed only where
 * the kernel would, a replaced file keeping its mode and a new one 0644 less the umask, devices and
 * FIFOs written in place, a symlinked output replacing its target, no environment in the file; a
 * warning never lands in a file that took fd 2, and full devices, full file systems and unwritable
 * paths are reported in one line. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"
#include "alloc_modes.h"

#define NOBODY 65534
#define MiB (1024 * 1024)

static struct run r;

/* Runs the output fixture in MODE with ARG and MEMSHIM_OUTPUT=OUTPUT (NULL: the harness default). */
static void run_fixture(const char *mode, const char *arg, const char *output)
{
	static char env0[4200];
	snprintf(env0, sizeof env0, "MEMSHIM_OUTPUT=%s", output ? output : "");
	const char *env[] = { output ? env0 : NULL, NULL };
	const char *argv[] = { built("preload/output_fixture"), mode, arg, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static void read_text(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);
	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

static mode_t mode_of(const char *path)
{
	struct stat sb;
	ck_assert_msg(stat(path, &sb) == 0, "%s missing", path);
	return sb.st_mode & 07777;
}

static void make_link(const char *target, const char *link, uid_t owner)
{
	ck_assert_int_eq(symlink(target, link), 0);
	ck_assert_int_eq(lchown(link, owner, owner), 0);
}

static int is_metrics(const char *path)
{
	json_error_t err;
	json_t *m = json_load_file(path, 0, &err);
	int ok = m && json_object_get(m, "metrics") != NULL;
	json_decref(m);
	return ok;
}

START_TEST(a_link_planted_by_another_user_in_a_sticky_dir_is_not_followed)
{
	char dir[64], target[96], link[96];
	make_dir(dir, sizeof dir, 01777, 0);
	snprintf(target, sizeof target, "%s/victim", dir);
	snprintf(link, sizeof link, "%s/m.json", dir);
	write_text(target, "secret\n", 0600);
	make_link(target, link, NOBODY);
	run_fixture("simple", "", link);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	char text[64];
	read_text(target, text, sizeof text);
	ck_assert_str_eq(text, "secret\n");
	ck_assert_int_eq(mode_of(target), 0600);
	struct stat sb;
	ck_assert_int_eq(lstat(link, &sb), 0);
	ck_assert(S_ISLNK(sb.st_mode));
	ck_assert_int_eq(count_files(dir, ".", NULL, 0), 2); /* "." and "..": no temporary left */
	ck_assert_msg(memshim_lines(r.err) == 1, "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, link) != NULL, "stderr: %s", r.err);
}
END_TEST

/* The kernel's protected_symlinks rule, for each link on the way and not only the first. */
START_TEST(links_are_followed_only_where_the_kernel_would)
{
	static const struct {
		const char *what;
		mode_t dir_mode;
		uid_t dir_owner, link_owner, second_owner; /* second_owner: a link the first points at */
		int followed;
	} cases[] = {
		{ "root's link in a sticky dir", 01777, 0, 0, 0, 1 },
		{ "another user's link in a plain dir", 0755, 0, NOBODY, NOBODY, 1 },
		{ "a link owned by the sticky dir's owner", 01777, NOBODY, NOBODY, NOBODY, 1 },
		{ "a chain through another user's link", 01777, 0, 0, NOBODY, 0 },
		{ "another user's link to the directory", 01777, 0, NOBODY, 0, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char dir[64], real_dir[64], target[96], link[96], second[96], output[128];
		make_dir(dir, sizeof dir, cases[i].dir_mode, cases[i].dir_owner);
		make_dir(real_dir, sizeof real_dir, 0755, 0);
		snprintf(target, sizeof target, "%s/m.json", real_dir);
		snprintf(link, sizeof link, "%s/link", dir);
		snprintf(second, sizeof second, "%s/second", dir);
		write_text(target, "old\n", 0600);
		if (i == 4) { /* dir/link -> real_dir, written through as dir/link/m.json */
			make_link(real_dir, link, cases[i].link_owner);
			snprintf(output, sizeof output, "%s/m.json", link);
		} else {
			make_link(target, second, cases[i].second_owner);
			make_link("second", link, cases[i].link_owner); /* relative: resolved in dir */
			snprintf(output, sizeof output, "%s", link);
		}
		run_fixture("simple", "", output);
		ck_assert_msg(is_metrics(target) == cases[i].followed, "%s: target %s", cases[i].what,
			      cases[i].followed ? "not written" : "written");
		ck_assert_msg(memshim_lines(r.err) == !cases[i].followed, "%s: stderr: %s", cases[i].what, r.err);
		ck_assert_msg(mode_of(target) == 0600, "%s: mode %o", cases[i].what, mode_of(target));
	}
}
END_TEST

START_TEST(a_replaced_0600_file_stays_0600)
{
	char dir[64], path[96];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(path, sizeof path, "%s/m.json", dir);
	write_text(path, "old\n", 0600);
	run_fixture("simple", "", path);
	ck_assert(is_metrics(path));
	ck_assert_int_eq(mode_of(path), 0600);
	ck_assert_str_eq(r.err, "");
}
END_TEST

START_TEST(a_new_file_is_0644_less_the_umask)
{
	char dir[64], path[96];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(path, sizeof path, "%s/m.json", dir);
	mode_t mask = umask(022);
	umask(mask);
	run_fixture("simple", "", path);
	ck_assert(is_metrics(path));
	ck_assert_int_eq(mode_of(path), 0644 & ~mask);
}
END_TEST

START_TEST(a_symlinked_output_replaces_its_target_not_the_link)
{
	char dir[] = "/tmp/memshim-link.XXXXXX", target[64], link[64], env0[100];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(target, sizeof target, "%s/real.json", dir);
	snprintf(link, sizeof link, "%s/link.json", dir);
	FILE *f = fopen(target, "w");
	fputs("old", f);
	fclose(f);
	ck_assert_int_eq(symlink(target, link), 0);
	snprintf(env0, sizeof env0, "MEMSHIM_OUTPUT=%s", link);
	const char *env[] = { env0, NULL };
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	struct stat sb;
	ck_assert_int_eq(lstat(link, &sb), 0);
	ck_assert(S_ISLNK(sb.st_mode));
	json_error_t err;
	json_t *m = json_load_file(target, 0, &err);
	ck_assert_msg(m != NULL, "%s", err.text);
	ck_assert_int_eq(stat(target, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0644 & ~umask(022));
	json_decref(m);
}
END_TEST

START_TEST(devices_are_written_in_place_never_replaced)
{
	const char *env[] = { "MEMSHIM_OUTPUT=/dev/stdout", NULL };
	run_alloc_mode(&r, "simple", env);
	struct stat st;
	ck_assert_int_eq(stat("/dev/null", &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	json_error_t err;
	json_t *m = json_loads(r.out, 0, &err);
	ck_assert_msg(m != NULL, "stdout: %s", r.out);
	ck_assert_int_gt(metric(m, "simple_mem_cpu_alloc_delta"), 2 * MiB - 1);
	json_decref(m);
	const char *env2[] = { "MEMSHIM_OUTPUT=/dev/null", NULL };
	run_alloc_mode(&r, "simple", env2);
	ck_assert_int_eq(stat("/dev/null", &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	ck_assert_str_eq(r.err, "");
}
END_TEST

START_TEST(a_fifo_is_written_in_place)
{
	char dir[] = "/tmp/memshim-fifo.XXXXXX", fifo[64], env0[100];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof fifo, "%s/pipe", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(env0, sizeof env0, "MEMSHIM_OUTPUT=%s", fifo);
	pid_t reader = fork();
	if (reader == 0) {
		char path[80];
		snprintf(path, sizeof path, "%s/read.json", dir);
		FILE *in = fopen(fifo, "r"), *out = fopen(path, "w");
		int c;
		while ((c = fgetc(in)) != EOF)
			fputc(c, out);
		fclose(out);
		_exit(0);
	}
	/* a write end of our own, opened once the reader has the FIFO open: the shim, which opens it
	 * non-blocking, always finds the reader there (it found none under load: ENXIO, and the reader
	 * then waited for ever); closed after the run so the reader sees the end */
	int hold = open(fifo, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(hold, 0);
	const char *env[] = { env0, NULL };
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	close(hold);
	int st;
	waitpid(reader, &st, 0);
	struct stat sb;
	ck_assert_int_eq(stat(fifo, &sb), 0);
	ck_assert(S_ISFIFO(sb.st_mode));
	char path[80];
	snprintf(path, sizeof path, "%s/read.json", dir);
	json_error_t err;
	json_t *m = json_load_file(path, 0, &err);
	ck_assert_msg(m != NULL, "%s", err.text);
	ck_assert_int_eq(metric(m, "simple_calls"), 1);
	json_decref(m);
}
END_TEST

START_TEST(no_environment_in_the_file_and_argv_truncated)
{
	static char big[6000];
	memset(big, 'a', sizeof big - 1);
	const char *argv[] = { built("preload/alloc_fixture"), "simple", big, NULL };
	const char *env[] = { "SECRET_TOKEN=hunter2-very-secret", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	char path[400];
	snprintf(path, sizeof path, "%s/m.json", r.dir);
	FILE *f = fopen(path, "r");
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof text - 1, f);
	text[n] = '\0';
	fclose(f);
	ck_assert(strstr(text, "hunter2") == NULL);
	ck_assert(strstr(text, "SECRET_TOKEN") == NULL);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert(json_is_true(json_object_get(m, "argv_truncated")));
	ck_assert_int_le(json_array_size(json_object_get(m, "argv")), 3);
	json_decref(m);
}
END_TEST

/* Fixture MODE writes "data" through fd 2 into DIR/data while the output cannot be written: that
 * file holds the data and nothing of memshim's. */
static void data_alone_in_fd2_file(const char *mode)
{
	char dir[64], data[96];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(data, sizeof data, "%s/data", dir);
	run_fixture(mode, data, "/nonexistent-dir/sub/m.json");
	ck_assert(WIFEXITED(r.status));
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	char text[512];
	read_text(data, text, sizeof text);
	ck_assert_str_eq(text, "data\n");
}

START_TEST(a_warning_never_lands_in_a_file_that_took_fd_2)
{
	data_alone_in_fd2_file("data_on_fd2");
}
END_TEST

START_TEST(no_warning_when_fd_2_was_closed_at_start)
{
	data_alone_in_fd2_file("fd2_closed_at_start");
}
END_TEST

START_TEST(the_same_stderr_still_gets_the_warning)
{
	run_fixture("simple", "", "/nonexistent-dir/sub/m.json");
	ck_assert_msg(memshim_lines(r.err) == 1, "stderr: %s", r.err);
}
END_TEST

START_TEST(a_full_device_is_reported_as_enospc)
{
	run_fixture("simple", "", "/dev/full");
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	ck_assert_msg(strstr(r.err, "memshim: cannot write metrics file /dev/full: no space left on device "
				    "(errno 28)") != NULL, "stderr: %s", r.err);
	ck_assert_int_eq(memshim_lines(r.err), 1);
}
END_TEST

/* A process that lowered its own RLIMIT_NOFILE to its three standard fds: its exit status, and
 * one warning per path tried that says why in words. */
START_TEST(no_fds_left_is_said_in_words)
{
	char dir[64], path[96];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(path, sizeof path, "%s/m.json", dir);
	run_fixture("no_fds_left", "", path);
	ck_assert_int_eq(WEXITSTATUS(r.status), 6);
	char want[200];
	snprintf(want, sizeof want, "cannot write metrics file %s: too many open files (the process's RLIMIT_NOFILE) (errno 24)",
		 path);
	ck_assert_msg(strstr(r.err, want) != NULL, "stderr: %s", r.err);
}
END_TEST

/* Fills the file system at DIR so the next write fails. */
static void fill(const char *dir)
{
	char path[128];
	static char block[4096];
	snprintf(path, sizeof path, "%s/filler", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	while (write(fd, block, sizeof block) > 0)
		;
	close(fd);
}

START_TEST(a_full_file_system_is_reported_as_enospc)
{
	char dir[64], path[96];
	make_dir(dir, sizeof dir, 0755, 0);
	if (mount("memshim-test", dir, "tmpfs", 0, "size=64k") != 0) {
		printf("a_full_file_system_is_reported_as_enospc: skipped, cannot mount a tmpfs (%s)\n",
		       strerror(errno));
		return;
	}
	fill(dir);
	snprintf(path, sizeof path, "%s/m.json", dir);
	run_fixture("simple", "", path);
	int files = count_files(dir, ".m.json", NULL, 0);
	umount(dir);
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	ck_assert_msg(strstr(r.err, ": no space left on device (errno 28)") != NULL, "stderr: %s", r.err);
	ck_assert_int_eq(memshim_lines(r.err), 1);
	ck_assert_int_eq(files, 0); /* the temporary was removed */
}
END_TEST

START_TEST(unwritable_output_warns_once_naming_the_path)
{
	const char *env[] = { "MEMSHIM_OUTPUT=/nonexistent-dir/sub/m.json", NULL };
	run_alloc_mode(&r, "fork", env);
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	ck_assert_msg(strstr(r.err, "memshim: cannot write metrics file /nonexistent-dir/sub/m.json") != NULL,
		      "%s", r.err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("output files");
	TCase *tc1 = tcase_create("the file");
	tcase_set_timeout(tc1, 120);
	tcase_add_test(tc1, a_link_planted_by_another_user_in_a_sticky_dir_is_not_followed);
	tcase_add_test(tc1, links_are_followed_only_where_the_kernel_would);
	tcase_add_test(tc1, a_replaced_0600_file_stays_0600);
	tcase_add_test(tc1, a_new_file_is_0644_less_the_umask);
	tcase_add_test(tc1, a_symlinked_output_replaces_its_target_not_the_link);
	tcase_add_test(tc1, devices_are_written_in_place_never_replaced);
	tcase_add_test(tc1, a_fifo_is_written_in_place);
	tcase_add_test(tc1, no_environment_in_the_file_and_argv_truncated);
	suite_add_tcase(s, tc1);
	TCase *tc2 = tcase_create("failures");
	tcase_set_timeout(tc2, 120);
	tcase_add_test(tc2, a_warning_never_lands_in_a_file_that_took_fd_2);
	tcase_add_test(tc2, no_warning_when_fd_2_was_closed_at_start);
	tcase_add_test(tc2, the_same_stderr_still_gets_the_warning);
	tcase_add_test(tc2, a_full_device_is_reported_as_enospc);
	tcase_add_test(tc2, no_fds_left_is_said_in_words);
	tcase_add_test(tc2, a_full_file_system_is_reported_as_enospc);
	tcase_add_test(tc2, unwritable_output_warns_once_naming_the_path);
	suite_add_tcase(s, tc2);
	return run_suite(s);
}
