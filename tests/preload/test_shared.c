/* Integration: shared memory.  MAP_SHARED mappings of memory (memfd, /dev/shm, anonymous
 * shared, /dev/zero, SysV) are the "shared" component, part of cpu, read by the pages this process
 * touched; a forked child holds none of its parent's; every process names each segment by its
 * object (dev, ino), the same in each of them; a file on disk mapped shared is page cache and not
 * counted; the kernel's errors pass unchanged.  Python's multiprocessing.shared_memory between two
 * processes, when a python3 is there. */

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"

#define MiB ((int64_t)1 << 20)
#define SLACK (MiB / 4) /* fault-around maps up to 16 pages about a read */

static struct run r;

/* shared_fixture MODE [ARG] under the shim: exited 0, quiet, with its metrics file. */
static json_t *run_shared(const char *mode, const char *arg)
{
	const char *args[] = { mode, arg, NULL };
	json_t *m = run_built(&r, "preload/shared_fixture", args, NULL);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x: %s %s", r.status, r.out, r.err);
	ck_assert_str_eq(r.err, "");
	ck_assert_ptr_nonnull(m);
	return m;
}

/* Stage STAGE's cpu.shared.KEY. */
static int64_t shared(json_t *m, const char *stage, const char *key)
{
	json_t *s = stage_of(m, stage);
	ck_assert_msg(s != NULL, "no stage %s", stage);
	json_t *v = json_object_get(json_object_get(json_object_get(s, "cpu"), "shared"), key);
	ck_assert_msg(json_is_integer(v), "%s: no cpu.shared.%s", stage, key);
	return json_integer_value(v);
}

static json_t *segments(json_t *m)
{
	json_t *v = json_object_get(json_object_get(json_object_get(m, "process"), "shared"), "segments");
	ck_assert_msg(json_is_array(v), "no process.shared.segments");
	return v;
}

/* The one segment of KIND in M (fails unless there is exactly one). */
static json_t *segment_of(json_t *m, const char *kind)
{
	json_t *found = NULL, *s;
	size_t i;
	json_array_foreach(segments(m), i, s)
		if (!strcmp(json_string_value(json_object_get(s, "kind")), kind)) {
			ck_assert_msg(found == NULL, "two %s segments", kind);
			found = s;
		}
	ck_assert_msg(found != NULL, "no %s segment", kind);
	return found;
}

static int64_t int_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	ck_assert_msg(json_is_integer(v), "no integer %s", key);
	return json_integer_value(v);
}

static void assert_near(int64_t got, int64_t want, const char *what)
{
	ck_assert_msg(got >= want && got <= want + SLACK, "%s: %lld, expected %lld", what, (long long)got, (long long)want);
}

START_TEST(a_memfd_counts_the_pages_written_and_its_high_stays)
{
	json_t *m = run_shared("memfd", NULL);
	ck_assert_int_eq(shared(m, "touch", "alloc_delta"), 6 * MiB);
	assert_near(metric(m, "touch_mem_cpu_alloc_delta"), 6 * MiB, "touch alloc (cpu)");
	ck_assert_int_eq(shared(m, "unmap", "alloc_delta"), -6 * MiB);
	ck_assert_int_eq(shared(m, "unmap", "peaked_delta"), 6 * MiB);
	ck_assert_int_eq(metric(m, "process_mem_cpu_shared_peak"), 6 * MiB);
	ck_assert_int_lt(metric(m, "process_mem_cpu_mmap_peak"), MiB);
	json_t *s = segment_of(m, "memfd");
	ck_assert_int_eq(int_of(s, "mapped"), 0);
	ck_assert_int_eq(int_of(s, "mapped_peak"), 8 * MiB);
	ck_assert_int_eq(int_of(s, "peak"), 6 * MiB);
	ck_assert_int_eq(int_of(s, "resident"), 0);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(s, "name")), "/memfd:fixture"));
	ck_assert_int_gt(int_of(s, "ino"), 0);
	json_decref(m);
}
END_TEST

START_TEST(a_dev_shm_object_is_named_by_its_path)
{
	json_t *m = run_shared("shm", NULL);
	ck_assert_int_eq(shared(m, "touch", "alloc_delta"), 4 * MiB);
	json_t *s = segment_of(m, "shm");
	ck_assert_int_eq(int_of(s, "mapped"), 8 * MiB);
	ck_assert_int_eq(int_of(s, "resident"), 4 * MiB);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(s, "name")), "/dev/shm/memshim-fixture-"));
	json_decref(m);
}
END_TEST

/* The postmaster and its backends, a DataLoader's workers: the child counts what it touched, and
 * both name the segment alike, so a view of both does not add it twice. */
START_TEST(a_forked_child_counts_its_own_pages_of_a_shared_segment)
{
	json_t *m = run_shared("fork", NULL);
	ck_assert_int_eq(shared(m, "parent", "alloc_delta"), 4 * MiB);
	char name[64];
	ck_assert_int_eq(count_files(r.dir, "m.json.", name, sizeof name), 1);
	json_t *c = load_metrics(&r, name);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(shared(c, "child", "begin"), 0);
	ck_assert_int_eq(shared(c, "child", "alloc_delta"), 8 * MiB);
	assert_near(metric(c, "process_mem_cpu_shared_peak"), 8 * MiB, "child's peak"); /* + its read of a[0] */
	ck_assert_int_eq(member(json_object_get(c, "process"), "inherited", "shared"), 0);
	json_t *ps = segment_of(m, "anonymous"), *cs = segment_of(c, "anonymous");
	ck_assert_str_eq(json_string_value(json_object_get(ps, "dev")), json_string_value(json_object_get(cs, "dev")));
	ck_assert_int_eq(int_of(ps, "ino"), int_of(cs, "ino"));
	assert_near(int_of(cs, "peak"), 8 * MiB, "child's segment peak");
	assert_near(int_of(ps, "peak"), 4 * MiB, "parent's segment peak"); /* + its read of the child's page */
	json_decref(c);
	json_decref(m);
}
END_TEST

/* Pages in memory that this mapping never touched are not its; MAP_POPULATE counts them at once. */
START_TEST(only_the_pages_this_process_touched_count)
{
	json_t *m = run_shared("others", NULL);
	ck_assert_int_eq(shared(m, "map", "alloc_delta"), 0);
	assert_near(shared(m, "read", "alloc_delta"), 2 * MiB, "read");
	ck_assert_int_eq(shared(m, "populate", "alloc_delta"), 8 * MiB);
	json_t *s = segment_of(m, "memfd");
	ck_assert_int_eq(int_of(s, "mapped"), 16 * MiB); /* two mappings of one object: one segment */
	json_decref(m);
}
END_TEST

START_TEST(a_sysv_segment_counts_until_detached)
{
	json_t *m = run_shared("sysv", NULL);
	ck_assert_int_eq(shared(m, "attach", "alloc_delta"), 4 * MiB);
	ck_assert_int_eq(shared(m, "detach", "alloc_delta"), -4 * MiB);
	ck_assert_int_eq(shared(m, "detach", "peaked_delta"), 4 * MiB);
	json_t *s = segment_of(m, "sysv");
	ck_assert_int_eq(int_of(s, "mapped_peak"), 4 * MiB);
	ck_assert_int_eq(int_of(s, "mapped"), 0);
	json_decref(m);
}
END_TEST

START_TEST(dev_zero_shared_is_anonymous_shared_memory)
{
	json_t *m = run_shared("devzero", NULL);
	ck_assert_int_eq(shared(m, "touch", "alloc_delta"), 2 * MiB);
	ck_assert_int_eq(int_of(segment_of(m, "anonymous"), "mapped"), 4 * MiB);
	json_decref(m);
}
END_TEST

/* A file on disk mapped shared is its page cache: not the program's memory. */
START_TEST(a_file_on_disk_is_not_counted)
{
	const char *dir = built("preload");
	struct statfs sf;
	ck_assert_int_eq(statfs(dir, &sf), 0);
	if (sf.f_type == 0x01021994 /* tmpfs */ || sf.f_type == (typeof(sf.f_type))0x858458f6 /* ramfs */) {
		fprintf(stderr, "a_file_on_disk_is_not_counted: skipped, %s is in memory\n", dir);
		return;
	}
	json_t *m = run_shared("file", dir);
	ck_assert_int_eq(shared(m, "touch", "alloc_delta"), 0);
	ck_assert_int_lt(metric(m, "touch_mem_cpu_alloc_delta"), MiB);
	ck_assert(!has_metric(m, "process_mem_cpu_shared_peak"));
	ck_assert_int_eq(json_array_size(segments(m)), 0);
	json_decref(m);
}
END_TEST

START_TEST(the_kernels_errors_pass_unchanged)
{
	const char *argv[] = { built("preload/shared_fixture"), "bad", NULL };
	const char *bare_env[] = { "LD_PRELOAD", NULL };
	struct run bare;
	ck_assert_int_eq(run_under_shim(&bare, argv, bare_env), 0);
	json_t *m = run_shared("bad", NULL);
	ck_assert_str_eq(r.out, bare.out);
	ck_assert_int_eq(json_array_size(segments(m)), 0); /* a mapping refused is no segment */
	json_decref(m);
}
END_TEST

/* An ordinary program maps no shared memory: no shared key beside the zeros of the component. */
START_TEST(no_shared_keys_without_shared_memory)
{
	const char *args[] = { "plain", NULL };
	json_t *m = run_built(&r, "preload/reserve_fixture", args, NULL);
	ck_assert_ptr_nonnull(m);
	ck_assert(!has_metric(m, "process_mem_cpu_shared_peak"));
	ck_assert_int_eq(shared(m, "plain", "peak"), 0);
	ck_assert_int_eq(json_array_size(segments(m)), 0);
	json_decref(m);
}
END_TEST

/* multiprocessing.shared_memory: the creator writes 6 MiB, a second process attaches by name and
 * reads 3 MiB; each counts its own pages and both name the same object. */
START_TEST(python_shared_memory_between_two_processes)
{
	const char *python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : in_path("python3");
	char check[4200];
	if (!python)
		python = "python3";
	snprintf(check, sizeof check, "%s -c 'import multiprocessing.shared_memory' >/dev/null 2>&1", python);
	if (system(check) != 0) {
		fprintf(stderr, "python_shared_memory_between_two_processes: skipped, no python3 with multiprocessing.shared_memory\n");
		return;
	}
	static const char script[] =
		"import multiprocessing as mp, sys\n"
		"from multiprocessing import shared_memory\n"
		"MiB = 1 << 20\n"
		"def reader(name):\n"
		"    s = shared_memory.SharedMemory(name=name)\n"
		"    total = sum(s.buf[i] for i in range(0, 3 * MiB, 4096))\n"
		"    s.close()\n"
		"    assert total == 768, total\n"
		"def writer():\n"
		"    s = shared_memory.SharedMemory(create=True, size=8 * MiB)\n"
		"    s.buf[:6 * MiB] = b'\\1' * (6 * MiB)\n"
		"    return s\n"
		"if __name__ == '__main__':\n"
		"    s = writer()\n"
		"    p = mp.get_context('spawn').Process(target=reader, args=(s.name,))\n"
		"    p.start(); p.join()\n"
		"    s.close(); s.unlink()\n"
		"    sys.exit(p.exitcode)\n";
	char dir[] = "/tmp/memshim-shm.XXXXXX", path[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/shm_two.py", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(script, f);
	fclose(f);
	const char *const env[] = { "MEMSHIM_STAGES=write=writer,read=reader", NULL };
	const char *argv[] = { python, path, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	unlink(path);
	rmdir(dir);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %#x: %s", r.status, r.err);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(shared(m, "write", "alloc_delta"), 6 * MiB);
	json_t *ws = segment_of(m, "shm");
	/* the spawned reader's file: the one with a read stage (spawn's resource tracker writes one too) */
	json_t *c = NULL;
	DIR *d = opendir(r.dir);
	struct dirent *e;
	while (d && !c && (e = readdir(d))) {
		if (strncmp(e->d_name, "m.json.", 7))
			continue;
		json_t *x = load_metrics(&r, e->d_name);
		if (x && stage_of(x, "read"))
			c = x;
		else
			json_decref(x);
	}
	if (d)
		closedir(d);
	ck_assert_msg(c != NULL, "no reader file");
	int64_t read = shared(c, "read", "peak");
	ck_assert_msg(read >= 3 * MiB && read <= 3 * MiB + SLACK, "reader read %lld", (long long)read);
	json_t *rs = segment_of(c, "shm");
	ck_assert_str_eq(json_string_value(json_object_get(ws, "dev")), json_string_value(json_object_get(rs, "dev")));
	ck_assert_int_eq(int_of(ws, "ino"), int_of(rs, "ino"));
	json_decref(c);
	json_decref(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shared");
	TCase *tc = tcase_create("shared memory");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_memfd_counts_the_pages_written_and_its_high_stays);
	tcase_add_test(tc, a_dev_shm_object_is_named_by_its_path);
	tcase_add_test(tc, a_forked_child_counts_its_own_pages_of_a_shared_segment);
	tcase_add_test(tc, only_the_pages_this_process_touched_count);
	tcase_add_test(tc, a_sysv_segment_counts_until_detached);
	tcase_add_test(tc, dev_zero_shared_is_anonymous_shared_memory);
	tcase_add_test(tc, a_file_on_disk_is_not_counted);
	tcase_add_test(tc, the_kernels_errors_pass_unchanged);
	tcase_add_test(tc, no_shared_keys_without_shared_memory);
	tcase_add_test(tc, python_shared_memory_between_two_processes);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
