/* The order in which subsystems see a stage boundary (shim/subsystems.def: lowest layer first): the
 * CUDA layer samples the memory pools before output/ writes a snapshot that reads them.  The
 * fixture is killed right after a stage whose end wrote a snapshot, so that snapshot is the file. */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gpu_suite.h"

#define MiB (1024ll * 1024ll)

/* Runs build/gpu/fx_linked SCENARIO under the shim with the stand-in driver; its file, or NULL. */
static json_t *run_killed(const char *scenario, char *dir, int *status)
{
	char exe[PATH_MAX + 32], lib[PATH_MAX + 32], libdir[PATH_MAX + 32], out[PATH_MAX + 32], live[PATH_MAX + 32];
	snprintf(dir, PATH_MAX, "/tmp/memshim-gpu-order-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(exe, sizeof exe, "%s/gpu/fx_linked", build_dir);
	snprintf(lib, sizeof lib, "%s/libmemshim.so", build_dir);
	snprintf(libdir, sizeof libdir, "%s/gpu", build_dir);
	snprintf(out, sizeof out, "%s/m.json", dir);
	snprintf(live, sizeof live, "%s/live", dir); /* the killed run's record stays in the test's directory */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("LD_PRELOAD", lib, 1);
		setenv("LD_LIBRARY_PATH", libdir, 1);
		setenv("MEMSHIM_OUTPUT", out, 1);
		setenv("MEMSHIM_LIVE_DIR", live, 1);
		unsetenv("MEMSHIM_DISABLE");
		unsetenv("MEMSHIM_SNAPSHOT_INTERVAL");
		execl(exe, exe, scenario, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, status, 0);
	json_error_t err;
	return json_load_file(out, 0, &err);
}

static void remove_dir(const char *dir)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

START_TEST(snapshot_at_a_stage_end_holds_its_pool_sample)
{
	char dir[PATH_MAX];
	int status;
	json_t *m = run_killed("pool_killed", dir, &status);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
	ck_assert_msg(m != NULL, "no snapshot");
	ck_assert(json_is_false(json_object_get(m, "complete")));
	json_t *pool = json_array_get(json_object_get(m, "gpu_pools"), 0);
	ck_assert_msg(pool != NULL, "no gpu_pools in the snapshot");
	ck_assert_int_eq(json_integer_value(json_object_get(pool, "reserved")), 6 * MiB);
	json_t *row = json_array_get(json_object_get(pool, "stages"), 0);
	ck_assert_msg(row != NULL, "the pool has no row for the stage the snapshot was written at the end of");
	ck_assert_str_eq(json_string_value(json_object_get(row, "stage")), "work");
	ck_assert_int_eq(json_integer_value(json_object_get(row, "reserved_begin")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(row, "reserved_end")), 6 * MiB);
	json_decref(m);
	remove_dir(dir);
}
END_TEST

static Suite *order_suite(void)
{
	Suite *s = suite_create("boundary order");
	TCase *tc = tcase_create("snapshots");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, snapshot_at_a_stage_end_holds_its_pool_sample);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_gpu_suite(order_suite());
}
