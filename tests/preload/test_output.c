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
#include "suite.h"
#include "harness.h"

#define NOBODY 65534

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

/* A fresh directory with MODE, owned by OWNER. */
static void make_dir(char *dir, size_t size, mode_t mode, uid_t owner)
{
	snprintf(dir, size, "/tmp/memshim-out.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, mode), 0);
	ck_assert_int_eq(chown(dir, owner, owner), 0);
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
	run_fixture("child_output", own, NULL);
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

/* A template that names the rank or the pid is taken as given by the ranks (children of a launcher
 * that has none): m_0.json, not m_0.json.<pid>.  A process that inherited its parent's rank (a
 * forked worker, a helper the rank runs) adds ".<pid>", so it never replaces the rank's file. */
START_TEST(a_template_naming_the_rank_is_taken_as_given)
{
	char dir[] = "/tmp/memshim-ranks.XXXXXX", out[200], name[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(out, sizeof out, "MEMSHIM_OUTPUT=%s/m_%%r.json", dir);
	const char *argv[] = { "/bin/sh", "-c", "RANK=0 /bin/sh -c '/bin/true; echo $$'; "
			       "LOCAL_RANK=1 NODE_RANK=0 WORLD_SIZE=2 /bin/true", NULL };
	const char *env[] = { out, "RANK", "LOCAL_RANK", "MEMSHIM_RANK_HELD", NULL };
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

/* MEMSHIM_CHILDREN_DIR: children that write their parent's name (forked or exec'd, ".<pid>" or
 * their own %p) write it there; the process that owns the name keeps it where it is. */
START_TEST(children_write_into_the_children_dir)
{
	char dir[] = "/tmp/memshim-kids.XXXXXX", kids[64], out[128], kdir[128], name[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(kids, sizeof kids, "%s/kids", dir);
	ck_assert_int_eq(mkdir(kids, 0755), 0);
	snprintf(kdir, sizeof kdir, "MEMSHIM_CHILDREN_DIR=%s", kids);
	snprintf(out, sizeof out, "MEMSHIM_OUTPUT=%s/m.json", dir);
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

/* An output directory that cannot take the file is reported at start, and the file goes to
 * $TMPDIR under the same name instead of being lost at exit. */
START_TEST(bad_output_directory_falls_back_at_start)
{
	char tmp[] = "/tmp/memshim-fallback.XXXXXX", tmpdir[64], path[128];
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", tmp);
	const char *argv[] = { built("preload/alloc_fixture"), "simple", NULL };
	const char *env[] = { "MEMSHIM_OUTPUT=/nonexistent-memshim-dir/run.json", tmpdir, NULL };
	struct run x;
	ck_assert_int_eq(run_under_shim(&x, argv, env), 0);
	ck_assert(WIFEXITED(x.status) && WEXITSTATUS(x.status) == 0);
	snprintf(path, sizeof path, "writing %s/run.json instead", tmp);
	ck_assert_msg(strstr(x.err, path) && strstr(x.err, "/nonexistent-memshim-dir"), "%s", x.err);
	ck_assert_ptr_eq(strstr(strstr(x.err, "memshim:") + 1, "memshim:"), NULL); /* one line */
	snprintf(path, sizeof path, "%s/run.json", tmp);
	ck_assert_msg(access(path, F_OK) == 0, "no %s", path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("output");
	TCase *tc = tcase_create("output");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_link_planted_by_another_user_in_a_sticky_dir_is_not_followed);
	tcase_add_test(tc, links_are_followed_only_where_the_kernel_would);
	tcase_add_test(tc, a_replaced_0600_file_stays_0600);
	tcase_add_test(tc, a_new_file_is_0644_less_the_umask);
	tcase_add_test(tc, a_warning_never_lands_in_a_file_that_took_fd_2);
	tcase_add_test(tc, no_warning_when_fd_2_was_closed_at_start);
	tcase_add_test(tc, the_same_stderr_still_gets_the_warning);
	tcase_add_test(tc, a_full_device_is_reported_as_enospc);
	tcase_add_test(tc, a_full_file_system_is_reported_as_enospc);
	tcase_add_test(tc, a_child_with_its_own_output_writes_there);
	tcase_add_test(tc, a_child_with_its_own_output_is_the_root_of_its_descendants);
	tcase_add_test(tc, a_child_with_the_inherited_output_adds_its_pid);
	tcase_add_test(tc, rank_and_host_placeholders);
	tcase_add_test(tc, a_template_naming_the_rank_is_taken_as_given);
	tcase_add_test(tc, children_write_into_the_children_dir);
	tcase_add_test(tc, bad_output_directory_falls_back_at_start);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
