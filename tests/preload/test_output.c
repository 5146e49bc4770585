/* Integration: where the metrics file and the shim's warnings go (symlinks, fd 2, full disks,
 * children that choose their own output). */
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
#include "harness.h"

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

static int memshim_lines(const char *text)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, "memshim:")); p++)
		n++;
	return n;
}

/* A fresh directory with MODE, owned by OWNER. */
static void make_dir(char *dir, size_t size, mode_t mode, uid_t owner)
{
	snprintf(dir, size, "/tmp/memshim-out.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, mode), 0);
	ck_assert_int_eq(chown(dir, owner, owner), 0);
}

static void read_text(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);
	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

START_TEST(a_warning_never_lands_in_a_file_that_took_fd_2)
{
	char dir[64], data[96];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(data, sizeof data, "%s/data", dir);
	run_fixture("data_on_fd2", data, "/nonexistent-dir/sub/m.json");
	ck_assert(WIFEXITED(r.status));
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	char text[512];
	read_text(data, text, sizeof text);
	ck_assert_str_eq(text, "data\n");
}
END_TEST

START_TEST(no_warning_when_fd_2_was_closed_at_start)
{
	char dir[64], data[96];
	make_dir(dir, sizeof dir, 0755, 0);
	snprintf(data, sizeof data, "%s/data", dir);
	run_fixture("fd2_closed_at_start", data, "/nonexistent-dir/sub/m.json");
	ck_assert(WIFEXITED(r.status));
	ck_assert_int_eq(WEXITSTATUS(r.status), 0);
	char text[512];
	read_text(data, text, sizeof text);
	ck_assert_str_eq(text, "data\n");
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

int main(void)
{
	Suite *s = suite_create("output");
	TCase *tc = tcase_create("output");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_warning_never_lands_in_a_file_that_took_fd_2);
	tcase_add_test(tc, no_warning_when_fd_2_was_closed_at_start);
	tcase_add_test(tc, the_same_stderr_still_gets_the_warning);
	tcase_add_test(tc, a_full_device_is_reported_as_enospc);
	tcase_add_test(tc, a_full_file_system_is_reported_as_enospc);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
