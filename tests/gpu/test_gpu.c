/* GPU suite: fixture programs run against the stand-in libcuda.so.1 under the preloaded shim; the
 * metrics file is parsed with jansson and every count checked exactly. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gpu_suite.h"

#define MiB (1024ll * 1024ll)

struct run {
	int status;
	char dir[PATH_MAX];
	char err[8192];
	json_t *m;
};

#define LONG_PATH (PATH_MAX + 64)

static int with_nvml;         /* the fixtures find the stand-in NVML (build/gpu/nvml) */
static const char *more_env; /* one more "NAME=value" for the fixture, or NULL */

static void path_in(char *out, const char *rel)
{
	snprintf(out, LONG_PATH, "%s/%s", build_dir, rel);
}

static void read_file(const char *path, char *buf, size_t size)
{
	buf[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t n = fread(buf, 1, size - 1, f);
	buf[n] = 0;
	fclose(f);
}

/* Runs build/gpu/PROG ARG with the stand-in driver; SHIM adds the library to LD_PRELOAD, EXTRA
 * ("NAME=value" or NULL) one more variable, PRELOAD_MORE another preloaded library. */
static void run_fixture(struct run *r, const char *prog, const char *arg, int shim, const char *extra,
			const char *preload_more)
{
	char exe[LONG_PATH], libdir[LONG_PATH], shimlib[LONG_PATH], preload[3 * LONG_PATH], out[LONG_PATH];
	char errpath[LONG_PATH];
	memset(r, 0, sizeof *r);
	snprintf(r->dir, sizeof r->dir, "/tmp/memshim-gpu-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(r->dir));
	snprintf(exe, sizeof exe, "%s/gpu/%.40s", build_dir, prog);
	path_in(libdir, "gpu");
	path_in(shimlib, "libmemshim.so");
	snprintf(preload, sizeof preload, "%s%s%s", shim ? shimlib : "", shim && preload_more ? " " : "",
		 preload_more ? preload_more : "");
	snprintf(out, sizeof out, "%s/m.json", r->dir);
	snprintf(errpath, sizeof errpath, "%s/stderr", r->dir);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 2);
		setenv("LD_PRELOAD", preload, 1);
		char libs[2 * LONG_PATH + 8];
		snprintf(libs, sizeof libs, with_nvml ? "%s:%s/nvml" : "%s", libdir, libdir);
		setenv("LD_LIBRARY_PATH", libs, 1);
		setenv("MEMSHIM_OUTPUT", out, 1);
		unsetenv("MEMSHIM_DISABLE");
		unsetenv("MEMSHIM_LOG");
		if (extra)
			putenv((char *)extra);
		if (more_env)
			putenv((char *)more_env);
		execl(exe, exe, arg, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &r->status, 0);
	read_file(errpath, r->err, sizeof r->err);
	json_error_t jerr;
	r->m = shim ? json_load_file(out, 0, &jerr) : NULL;
}

static void done(struct run *r)
{
	char cmd[LONG_PATH];
	json_decref(r->m);
	snprintf(cmd, sizeof cmd, "rm -rf %s", r->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", r->dir);
}

/* The fixture ran to completion, said nothing (the shim prints nothing by default) and left a file. */
static void assert_clean(const struct run *r)
{
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0, "fixture failed: status %d, stderr: %s",
		      r->status, r->err);
	ck_assert_msg(r->err[0] == 0, "unexpected stderr: %s", r->err);
	ck_assert_msg(r->m != NULL, "no metrics file");
}

/* build/gpu/PROG ARG under the shim with nothing else set; it must run clean (assert_clean). */
static void run_clean(struct run *r, const char *prog, const char *arg)
{
	run_fixture(r, prog, arg, 1, NULL, NULL);
	assert_clean(r);
}

static int64_t metric(const struct run *r, const char *key)
{
	json_t *v = json_object_get(json_object_get(r->m, "metrics"), key);
	ck_assert_msg(json_is_integer(v), "metric %s missing", key);
	return json_integer_value(v);
}

static json_t *stage(const struct run *r, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(r->m, "stages"), i, s)
		if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0)
			return s;
	ck_abort_msg("stage %s missing", name);
	return NULL;
}

static int64_t get_int(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	ck_assert_msg(json_is_integer(v), "key %s missing", key);
	return json_integer_value(v);
}

/* The devices[] entry of DEVICE in OBJ, or NULL. */
static json_t *device_of(json_t *obj, int device)
{
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(obj, "devices"), i, d)
		if (json_integer_value(json_object_get(d, "device")) == device)
			return d;
	return NULL;
}

static int64_t stage_dev(const struct run *r, const char *name, int device, const char *key)
{
	json_t *d = device_of(json_object_get(stage(r, name), "gpu"), device);
	ck_assert_msg(d != NULL, "stage %s has no device %d", name, device);
	return get_int(d, key);
}

static void assert_gpu(const struct run *r, const char *st, int64_t alloc, int64_t peaked)
{
	char k[128];
	snprintf(k, sizeof k, "%s_mem_gpu_alloc_delta", st);
	ck_assert_int_eq(metric(r, k), alloc);
	snprintf(k, sizeof k, "%s_mem_gpu_peaked_delta", st);
	ck_assert_int_eq(metric(r, k), peaked);
}

START_TEST(linked_direct_calls)
{
	struct run r;
	run_clean(&r, "fx_linked", "linked");
	ck_assert(json_is_true(json_object_get(r.m, "gpu_used")));
	assert_gpu(&r, "alloc", 3 * MiB + 10240, 1 * MiB);
	assert_gpu(&r, "free", -(3 * MiB + 10240), 3 * MiB + 10240); /* peak - end */
	ck_assert_int_eq(metric(&r, "alloc_mem_gpu_failed_allocs"), 0);
	ck_assert_int_eq(metric(&r, "process_mem_gpu_peak"), 4 * MiB + 10240);
	ck_assert_int_eq(metric(&r, "before_init_mem_gpu"), 0);
	ck_assert_int_eq(stage_dev(&r, "alloc", 0, "alloc_delta"), 3 * MiB + 10240);
	ck_assert_int_eq(stage_dev(&r, "alloc", 0, "peak"), 4 * MiB + 10240);
	done(&r);
}
END_TEST

START_TEST(device_from_current_context)
{
	struct run r;
	run_clean(&r, "fx_linked", "device1");
	assert_gpu(&r, "dev1", 5 * MiB, 0);
	ck_assert_int_eq(stage_dev(&r, "dev1", 1, "alloc_delta"), 5 * MiB);
	ck_assert_int_eq(stage_dev(&r, "dev1", 0, "alloc_delta"), 0);
	json_t *gpu = json_object_get(json_object_get(r.m, "process"), "gpu");
	ck_assert_int_eq(get_int(device_of(gpu, 1), "peak"), 5 * MiB);
	ck_assert_int_eq(get_int(device_of(gpu, 1), "live"), 0);
	ck_assert_int_eq(get_int(device_of(gpu, 0), "live"), 1 * MiB);
	ck_assert_int_eq(get_int(gpu, "live"), 1 * MiB);
	done(&r);
}
END_TEST

START_TEST(vmm_expandable_segments)
{
	struct run r;
	run_clean(&r, "fx_linked", "vmm");
	assert_gpu(&r, "grow", 100 * MiB, 0);
	assert_gpu(&r, "shrink", -40 * MiB, 40 * MiB);
	assert_gpu(&r, "still_mapped", 0, 0);
	assert_gpu(&r, "unmap_all", -60 * MiB, 60 * MiB);
	ck_assert_int_eq(metric(&r, "process_mem_gpu_peak"), 100 * MiB); /* the 1 GiB reservation is not memory */
	done(&r);
}
END_TEST

/* The gpu_pools row of the pool on DEVICE for stage NAME, or NULL. */
static json_t *pool_row(const struct run *r, int device, const char *name)
{
	size_t i, j;
	json_t *p, *row;
	json_array_foreach(json_object_get(r->m, "gpu_pools"), i, p) {
		if (json_integer_value(json_object_get(p, "device")) != device)
			continue;
		json_array_foreach(json_object_get(p, "stages"), j, row)
			if (strcmp(json_string_value(json_object_get(row, "stage")), name) == 0)
				return row;
	}
	return NULL;
}

/* Pools' reserved memory is sampled at every stage boundary (ms_cuda_boundary). */
static void check_pools(const struct run *r)
{
	ck_assert_msg(json_object_get(r->m, "gpu_pools") != NULL, "no gpu_pools: stage boundaries sampled no pool");
	json_t *created = pool_row(r, 1, "async"), *dflt = pool_row(r, 0, "async_free");
	ck_assert_ptr_nonnull(created);
	ck_assert_int_eq(get_int(created, "reserved_begin"), 0);
	ck_assert_int_eq(get_int(created, "reserved_end"), 6 * MiB);
	ck_assert_int_eq(get_int(created, "reserved_high"), 6 * MiB);
	ck_assert_ptr_nonnull(dflt); /* the default pool joins once cuMemAllocAsync used it */
	ck_assert_int_eq(get_int(dflt, "reserved_begin"), 4 * MiB); /* freed memory stays reserved */
	ck_assert_int_eq(get_int(dflt, "reserved_end"), 4 * MiB);
}

START_TEST(stream_ordered_and_pools)
{
	struct run r;
	run_clean(&r, "fx_linked", "async");
	assert_gpu(&r, "async", 6 * MiB, 4 * MiB);
	ck_assert_int_eq(stage_dev(&r, "async", 1, "alloc_delta"), 6 * MiB);
	ck_assert_int_eq(stage_dev(&r, "async", 0, "alloc_delta"), 0);
	ck_assert_int_eq(stage_dev(&r, "async", 0, "peaked_delta"), 4 * MiB);
	assert_gpu(&r, "async_free", -6 * MiB, 6 * MiB);
	check_pools(&r);
	done(&r);
}
END_TEST

START_TEST(out_of_memory_recorded)
{
	struct run r;
	run_fixture(&r, "fx_linked", "oom", 1, "STANDIN_CUDA_MEM_LIMIT=67108864", NULL);
	assert_clean(&r);
	assert_gpu(&r, "big", 16 * MiB, 0);
	ck_assert_int_eq(metric(&r, "big_mem_gpu_failed_allocs"), 3);
	json_t *ev = json_object_get(r.m, "gpu_events");
	ck_assert_int_eq(json_array_size(ev), 3);
	json_t *e0 = json_array_get(ev, 0), *e1 = json_array_get(ev, 1), *e2 = json_array_get(ev, 2);
	ck_assert_int_eq(get_int(e0, "bytes"), 100 * MiB);
	ck_assert_int_eq(get_int(e0, "device"), 0);
	ck_assert_int_eq(get_int(e0, "result"), 2); /* CUDA_ERROR_OUT_OF_MEMORY */
	ck_assert_str_eq(json_string_value(json_object_get(e0, "stage")), "big");
	ck_assert_int_eq(get_int(e1, "bytes"), 50 * MiB);
	ck_assert_int_eq(get_int(e2, "bytes"), 70 * MiB);
	ck_assert_int_eq(get_int(e2, "device"), 1);
	ck_assert_int_eq(get_int(json_object_get(stage(&r, "big"), "gpu"), "failed_allocs"), 3);
	done(&r);
}
END_TEST

START_TEST(unknown_pointers_forwarded)
{
	struct run r;
	run_clean(&r, "fx_linked", "unknown");
	assert_gpu(&r, "unknown", 0, 1 * MiB);
	ck_assert_int_eq(metric(&r, "unknown_mem_gpu_failed_allocs"), 0);
	done(&r);
}
END_TEST

START_TEST(eight_threads_exact)
{
	struct run r;
	run_clean(&r, "fx_linked", "threads");
	/* 20 kept per thread, 4096 * (t + 1) bytes each; even threads on device 0 */
	ck_assert_int_eq(metric(&r, "threads_mem_gpu_alloc_delta"), 20 * 4096 * 36);
	ck_assert_int_le(metric(&r, "threads_mem_gpu_peaked_delta"), 4096 * 36); /* at most one in flight each */
	ck_assert_int_eq(stage_dev(&r, "threads", 0, "alloc_delta"), 20 * 4096 * 16);
	ck_assert_int_eq(stage_dev(&r, "threads", 1, "alloc_delta"), 20 * 4096 * 20);
	json_t *pinned = json_object_get(json_object_get(json_object_get(r.m, "process"), "gpu"), "pinned");
	ck_assert_int_eq(get_int(pinned, "live"), 0);
	ck_assert_int_ge(get_int(pinned, "peak"), 4096);
	ck_assert_int_le(get_int(pinned, "peak"), 8 * 4096);
	done(&r);
}
END_TEST

START_TEST(managed_and_pinned_counters)
{
	struct run r;
	run_clean(&r, "fx_linked", "side");
	assert_gpu(&r, "side", 0, 0);
	ck_assert_int_eq(metric(&r, "side_mem_gpu_failed_allocs"), 0); /* a refused registration allocates nothing */
	ck_assert_int_eq(metric(&r, "process_mem_gpu_managed_peak"), 8 * MiB);
	ck_assert_int_eq(metric(&r, "process_mem_gpu_pinned_peak"), 6 * MiB);
	json_t *gpu = json_object_get(stage(&r, "side"), "gpu");
	ck_assert_int_eq(get_int(json_object_get(gpu, "managed"), "alloc_delta"), 8 * MiB);
	ck_assert_int_eq(get_int(json_object_get(gpu, "pinned"), "alloc_delta"), 4 * MiB);
	ck_assert_int_eq(get_int(json_object_get(gpu, "pinned"), "peaked_delta"), 2 * MiB);
	gpu = json_object_get(stage(&r, "side_free"), "gpu");
	ck_assert_int_eq(get_int(json_object_get(gpu, "managed"), "alloc_delta"), -8 * MiB);
	ck_assert_int_eq(get_int(json_object_get(gpu, "pinned"), "alloc_delta"), -4 * MiB);
	done(&r);
}
END_TEST

/* A driver that builds entry points on other exported ones, reached through their global symbols
 * (the shim's wrappers): every byte and every failure counts once, by the outermost call, and the
 * host memory the driver allocates and frees inside the calls still counts as host memory. */
START_TEST(nested_driver_calls_count_once)
{
	struct run r;
	run_fixture(&r, "fx_linked", "nested", 0, "STANDIN_CUDA_NESTED=1", NULL);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "nested bare: %s", r.err);
	done(&r);
	run_fixture(&r, "fx_linked", "nested", 1, "STANDIN_CUDA_NESTED=1", NULL);
	assert_clean(&r);
	assert_gpu(&r, "nest_alloc", 3 * MiB + 10240, 0);
	assert_gpu(&r, "nest_free", -(3 * MiB + 10240), 3 * MiB + 10240);
	ck_assert_int_eq(metric(&r, "process_mem_gpu_peak"), 3 * MiB + 10240);
	ck_assert_int_eq(metric(&r, "process_mem_gpu_pinned_peak"), 2 * MiB);
	ck_assert_int_eq(get_int(json_object_get(json_object_get(stage(&r, "nest_alloc"), "gpu"), "pinned"), "alloc_delta"),
			 2 * MiB);
	ck_assert_int_eq(metric(&r, "nest_alloc_mem_gpu_failed_allocs"), 1);
	json_t *ev = json_object_get(r.m, "gpu_events");
	ck_assert_int_eq(json_array_size(ev), 1);
	ck_assert_int_eq(get_int(json_array_get(ev, 0), "bytes"), 100 * 1024 * MiB);
	int64_t host = metric(&r, "nest_alloc_mem_cpu_alloc_delta"); /* two 4096-byte records */
	ck_assert_msg(host >= 2 * 4096 && host < 2 * 4096 + 64, "host records counted as %lld", (long long)host);
	ck_assert_int_eq(metric(&r, "nest_free_mem_cpu_alloc_delta"), -host);
	done(&r);
}
END_TEST

/* build/gpu/PROG ARG run clean, the driver reached by the path it names: stage ST's GPU deltas. */
static void assert_path_counts(const char *prog, const char *arg, const char *st, int64_t alloc, int64_t peaked)
{
	struct run r;
	run_clean(&r, prog, arg);
	assert_gpu(&r, st, alloc, peaked);
	done(&r);
}

START_TEST(dlopen_dlsym_path)
{
	assert_path_counts("fx_dl", "dlsym", "dl", 7 * MiB, 0);
}
END_TEST

START_TEST(get_proc_address_v2_path)
{
	assert_path_counts("fx_dl", "procaddr12", "p12", 2 * MiB, 4 * MiB); /* 2 + 3 (ptsz) + 1 (legacy) live at the peak */
}
END_TEST

START_TEST(get_proc_address_cuda11_path)
{
	assert_path_counts("fx_dl", "procaddr11", "p11", 9 * MiB, 0);
}
END_TEST

START_TEST(no_driver_no_gpu_keys)
{
	struct run r;
	run_clean(&r, "fx_nocuda", "plain");
	ck_assert(json_is_false(json_object_get(r.m, "gpu_used")));
	const char *key;
	json_t *v;
	json_object_foreach(json_object_get(r.m, "metrics"), key, v)
		ck_assert_msg(strstr(key, "gpu") == NULL, "GPU key %s without a driver", key);
	ck_assert_ptr_null(json_object_get(r.m, "gpu_events"));
	ck_assert_ptr_null(json_object_get(stage(&r, "cpu"), "gpu"));
	ck_assert_ptr_null(json_object_get(json_object_get(r.m, "process"), "gpu"));
	done(&r);
}
END_TEST

START_TEST(dlsym_keeps_rtld_next_of_caller)
{
	struct run r;
	char next[LONG_PATH];
	path_in(next, "gpu/libfx_next.so");
	run_fixture(&r, "fx_nocuda", "rtld_next", 1, NULL, next);
	assert_clean(&r);
	done(&r);
}
END_TEST

/* A second CUDA tool preloaded after the shim looks the driver up with dlsym(RTLD_NEXT): it must
 * get what it would get without the shim (not its own function back through the shim's wrapper,
 * which loops), and the shim must not take the tool's function for the driver's. */
START_TEST(dlsym_rtld_next_cuda_tool)
{
	struct run r;
	char next[LONG_PATH];
	path_in(next, "gpu/libfx_next.so");
	run_fixture(&r, "fx_dl", "rtld_next", 1, NULL, next);
	assert_clean(&r);
	assert_gpu(&r, "next", 5 * MiB, 0);
	done(&r);
}
END_TEST

/* Disabled, the wrappers still stand in the way but only forward: the program behaves the same. */
START_TEST(disabled_forwards_only)
{
	static const char *const cases[][2] = {
		{ "fx_linked", "threads" }, { "fx_linked", "vmm" }, { "fx_dl", "procaddr12" },
	};
	struct run r;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		run_fixture(&r, cases[i][0], cases[i][1], 1, "MEMSHIM_DISABLE=1", NULL);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s %s disabled: %s", cases[i][0],
			      cases[i][1], r.err);
		ck_assert_msg(r.err[0] == 0, "unexpected stderr: %s", r.err);
		done(&r);
	}
}
END_TEST

/* Every fixture also passes against the stand-in without the shim (the fixtures are right). */
START_TEST(fixtures_pass_bare)
{
	static const char *const cases[][2] = {
		{ "fx_linked", "linked" }, { "fx_linked", "vmm" },  { "fx_linked", "async" },
		{ "fx_linked", "threads" }, { "fx_linked", "side" }, { "fx_linked", "unknown" },
		{ "fx_linked", "capture" },
		{ "fx_dl", "dlsym" },	    { "fx_dl", "procaddr12" }, { "fx_dl", "procaddr11" },
	};
	char next[LONG_PATH];
	struct run r;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		run_fixture(&r, cases[i][0], cases[i][1], 0, NULL, NULL);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s %s bare: %s", cases[i][0],
			      cases[i][1], r.err);
		done(&r);
	}
	path_in(next, "gpu/libfx_next.so");
	run_fixture(&r, "fx_nocuda", "rtld_next", 0, NULL, next);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "rtld_next bare: %s", r.err);
	done(&r);
	run_fixture(&r, "fx_dl", "rtld_next", 0, NULL, next);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "fx_dl rtld_next bare: %s", r.err);
	done(&r);
}
END_TEST

/* ---- the GPU's footprint (read, not counted) and out-of-memory reports ---- */

#define CTX (32 * MiB)                /* the stand-in's context overhead */
#define TOTAL (80 * 1024 * MiB + CTX) /* its default limit plus the context */

static json_t *fp_device(json_t *fp, int device)
{
	json_t *d = device_of(fp, device);
	ck_assert_msg(d != NULL, "gpu_footprint device %d missing", device);
	return d;
}

/* build/gpu/fx_linked ARG with the stand-in NVML found, EXTRA as in run_fixture. */
static void run_nvml(struct run *r, const char *arg, const char *extra)
{
	with_nvml = 1;
	run_fixture(r, "fx_linked", arg, 1, extra, NULL);
	with_nvml = 0;
}

START_TEST(footprint_read_at_boundaries)
{
	struct run r;
	run_nvml(&r, "footprint", NULL);
	assert_clean(&r);
	ck_assert_int_eq(metric(&r, "load_mem_gpu_footprint_peak"), 40 * MiB + CTX);
	ck_assert_int_eq(metric(&r, "dev1_mem_gpu_footprint_peak"), 50 * MiB + 2 * CTX);
	ck_assert_int_eq(metric(&r, "release_mem_gpu_footprint_peak"), 50 * MiB + 2 * CTX);
	ck_assert_int_eq(metric(&r, "process_mem_gpu_footprint_peak"), 50 * MiB + 2 * CTX);
	ck_assert_ptr_null(json_object_get(json_object_get(r.m, "metrics"), "pre_mem_gpu_footprint_peak"));
	json_t *load = fp_device(json_object_get(stage(&r, "load"), "gpu_footprint"), 0);
	ck_assert_int_eq(get_int(load, "total"), TOTAL);
	ck_assert_int_eq(get_int(load, "free_min"), TOTAL - CTX - 40 * MiB);
	ck_assert_int_eq(get_int(load, "footprint"), 40 * MiB + CTX);
	json_t *dev1 = json_object_get(stage(&r, "dev1"), "gpu_footprint");
	ck_assert_int_eq(get_int(fp_device(dev1, 1), "free_min"), TOTAL - CTX - 10 * MiB);
	ck_assert_int_eq(get_int(fp_device(dev1, 1), "footprint"), 10 * MiB + CTX);
	ck_assert_ptr_null(json_object_get(fp_device(dev1, 0), "free_min")); /* another device's context */
	json_t *p = json_object_get(json_object_get(r.m, "process"), "gpu_footprint");
	ck_assert_str_eq(json_string_value(json_object_get(p, "nvml")), "ok");
	json_t *d0 = fp_device(p, 0);
	ck_assert_int_eq(get_int(d0, "footprint"), CTX); /* at exit, after the free */
	ck_assert_int_eq(get_int(d0, "footprint_peak"), 40 * MiB + CTX);
	ck_assert_int_eq(get_int(d0, "counted_at_peak"), 40 * MiB);
	ck_assert_int_eq(get_int(d0, "free"), TOTAL - CTX);
	ck_assert_int_eq(get_int(d0, "free_min"), TOTAL - CTX - 40 * MiB);
	ck_assert_ptr_null(json_object_get(r.m, "gpu_oom"));
	done(&r);
}
END_TEST

/* Inside one stage the footprint rises and falls back: only GPU timeline points read it between. */
START_TEST(footprint_read_at_gpu_points)
{
	struct run r;
	run_nvml(&r, "points", NULL);
	assert_clean(&r);
	int64_t peak = metric(&r, "grow_mem_gpu_footprint_peak");
	ck_assert_msg(peak >= CTX + 16 * MiB && peak <= CTX + 80 * MiB, "grow's footprint peak %lld", (long long)peak);
	done(&r);
}
END_TEST

/* A forked child of a process that used the driver calls nothing of it (the stand-in aborts if it
 * does); the parent reads on. */
START_TEST(footprint_not_read_in_a_forked_child)
{
	struct run r;
	run_nvml(&r, "fork_child", "STANDIN_CUDA_FORK_ABORT=1");
	assert_clean(&r);
	ck_assert_int_eq(metric(&r, "parent_mem_gpu_footprint_peak"), 8 * MiB + CTX);
	done(&r);
}
END_TEST

START_TEST(footprint_without_nvml)
{
	struct run r;
	run_clean(&r, "fx_linked", "footprint");
	const char *key;
	json_t *v;
	json_object_foreach(json_object_get(r.m, "metrics"), key, v)
		ck_assert_msg(strstr(key, "footprint") == NULL, "%s without NVML", key);
	json_t *p = json_object_get(json_object_get(r.m, "process"), "gpu_footprint");
	ck_assert_str_eq(json_string_value(json_object_get(p, "nvml")), "absent");
	ck_assert_int_eq(get_int(fp_device(p, 0), "free_min"), TOTAL - CTX - 40 * MiB);
	ck_assert_ptr_null(json_object_get(fp_device(p, 0), "footprint"));
	json_t *load = fp_device(json_object_get(stage(&r, "load"), "gpu_footprint"), 0);
	ck_assert_int_eq(get_int(load, "free_min"), TOTAL - CTX - 40 * MiB);
	done(&r);
}
END_TEST

/* What memshim-format prints for the run's file, into OUT. */
static void format_dump(const struct run *r, char *out, size_t size)
{
	char cmd[3 * LONG_PATH];
	snprintf(cmd, sizeof cmd, "%s/memshim-format %s/m.json", build_dir, r->dir);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = 0;
	ck_assert_int_eq(pclose(p), 0);
}

static json_t *first_oom(const struct run *r)
{
	json_t *all = json_object_get(r->m, "gpu_oom");
	ck_assert_int_eq(json_array_size(all), 1);
	return json_array_get(all, 0);
}

START_TEST(oom_report_burst_and_retry)
{
	struct run r;
	char text[8192];
	run_nvml(&r, "oom_retry", "STANDIN_CUDA_MEM_LIMIT=67108864");
	assert_clean(&r);
	json_t *o = first_oom(&r);
	ck_assert_int_eq(get_int(o, "device"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(o, "stage")), "train");
	ck_assert_int_eq(get_int(o, "asked"), 40 * MiB);
	ck_assert_int_eq(get_int(o, "free"), 24 * MiB);
	ck_assert_int_eq(get_int(o, "total"), 64 * MiB + CTX);
	ck_assert_int_eq(get_int(o, "footprint"), 40 * MiB + CTX);
	ck_assert_int_eq(get_int(o, "counted"), 40 * MiB);
	ck_assert_int_eq(get_int(o, "failures"), 2);
	ck_assert(json_is_true(json_object_get(o, "went_on")));
	json_t *open = json_array_get(json_object_get(o, "open_stages"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(open, "stage")), "train");
	ck_assert_int_eq(get_int(open, "added"), 40 * MiB);
	json_t *other = json_array_get(json_object_get(o, "others"), 0);
	ck_assert_int_eq(get_int(other, "pid"), 4242);
	ck_assert_int_eq(get_int(other, "used"), 2048 * MiB);
	ck_assert_int_eq(json_array_size(json_object_get(r.m, "gpu_events")), 2); /* unchanged */
	format_dump(&r, text, sizeof text);
	const char *want = "GPU 0 out of memory in train: asked 40MB, 24MB free of 96MB; this process 72MB (counted "
			   "40MB); others: pid 4242 2.0GB\n";
	ck_assert_msg(strncmp(text, want, strlen(want)) == 0, "dump begins: %s", text);
	ck_assert_int_eq(get_int(json_array_get(json_object_get(o, "sites"), 0), "bytes"), 40 * MiB);
	ck_assert_msg(strstr(text, "GPU sites live then (all devices):\n        40MB  oom_retry+0x"), "%s", text);
	ck_assert_msg(strstr(text, "2 failed allocations in this burst; the program went on"), "%s", text);
	ck_assert_msg(strstr(text, "GPU 0 footprint 72MB: 40MB counted + 32MB context, modules and driver"), "%s",
		      text);
	done(&r);
}
END_TEST

START_TEST(oom_report_without_nvml)
{
	struct run r;
	char text[8192];
	run_fixture(&r, "fx_linked", "oom", 1, "STANDIN_CUDA_MEM_LIMIT=67108864", NULL);
	assert_clean(&r);
	json_t *all = json_object_get(r.m, "gpu_oom");
	ck_assert_int_eq(json_array_size(all), 2); /* device 0 (two failures), device 1 */
	json_t *o = json_array_get(all, 0), *o1 = json_array_get(all, 1);
	ck_assert_int_eq(get_int(o, "failures"), 2);
	ck_assert_int_eq(get_int(o, "free"), 48 * MiB);
	ck_assert_ptr_null(json_object_get(o, "footprint"));
	ck_assert(json_is_null(json_object_get(o, "others")));
	ck_assert(json_is_false(json_object_get(o, "went_on")));
	ck_assert_int_eq(get_int(o1, "device"), 1);
	ck_assert_ptr_null(json_object_get(o1, "free")); /* device 0's context was current */
	format_dump(&r, text, sizeof text);
	const char *want = "GPU 0 out of memory in big: asked 100MB, 48MB free of 96MB; this process counted 16MB; "
			   "others: not known (no NVML)\n";
	ck_assert_msg(strncmp(text, want, strlen(want)) == 0, "dump begins: %s", text);
	ck_assert_msg(strstr(text, "the program did not go on after it"), "%s", text);
	done(&r);
}
END_TEST

START_TEST(oom_report_pid_namespace)
{
	struct run r;
	char text[8192];
	more_env = "STANDIN_NVML_HOST_PIDS=1";
	run_nvml(&r, "oom_retry", "STANDIN_CUDA_MEM_LIMIT=67108864");
	more_env = NULL;
	assert_clean(&r);
	json_t *o = first_oom(&r);
	ck_assert_ptr_null(json_object_get(o, "footprint"));
	ck_assert(json_is_false(json_object_get(o, "self_listed")));
	ck_assert_int_eq(json_array_size(json_object_get(o, "others")), 2);
	ck_assert_ptr_null(json_object_get(json_object_get(r.m, "metrics"), "process_mem_gpu_footprint_peak"));
	format_dump(&r, text, sizeof text);
	ck_assert_msg(strstr(text, "this process may be one of the others)\n"), "%s", text);
	ck_assert_msg(strstr(text, "GPU footprint: this pid is not in NVML's list"), "%s", text);
	done(&r);
}
END_TEST

START_TEST(oom_snapshot_survives_kill)
{
	struct run r;
	run_nvml(&r, "oom_killed", "STANDIN_CUDA_MEM_LIMIT=67108864");
	ck_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	ck_assert_msg(r.m != NULL, "no snapshot");
	ck_assert_str_eq(json_string_value(json_object_get(r.m, "reason")), "snapshot");
	json_t *o = first_oom(&r);
	ck_assert_int_eq(get_int(o, "asked"), 40 * MiB);
	ck_assert(json_is_false(json_object_get(o, "went_on")));
	done(&r);
}
END_TEST

/* The least time of a boundary before the driver was used (no reading) and after (cuMemGetInfo and
 * NVML on the stand-ins): the reading must stay under 20 us. */
START_TEST(footprint_boundary_cost)
{
	struct run r;
	run_nvml(&r, "boundary_cost", NULL);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
	double cold = 0, hot = 0;
	ck_assert_int_eq(sscanf(r.err, "boundary ns: without reading %lf, with reading %lf", &cold, &hot), 2);
	fprintf(stderr, "footprint: a boundary takes %.0f ns without the reading, %.0f ns with it\n", cold, hot);
	ck_assert_msg(hot - cold < 20000.0, "a boundary's reading took %.0f ns", hot - cold);
	done(&r);
}
END_TEST

/* Two threads begin one stage, the second's boundary while the first's observers are held: the
 * stage is read at its begin and end all the same, and its pool sampled once at each. */
START_TEST(footprint_of_a_stage_two_threads_begin)
{
	struct run r;
	run_nvml(&r, "race_open", NULL);
	assert_clean(&r);
	ck_assert_int_eq(metric(&r, "shared_mem_gpu_footprint_peak"), 9 * MiB + CTX);
	json_t *d0 = fp_device(json_object_get(stage(&r, "shared"), "gpu_footprint"), 0);
	ck_assert_int_eq(get_int(d0, "footprint"), 9 * MiB + CTX);
	ck_assert_int_eq(get_int(d0, "free_min"), TOTAL - CTX - 9 * MiB);
	json_t *row = pool_row(&r, 0, "shared");
	ck_assert_msg(row != NULL, "the pool has no row for the stage");
	ck_assert_int_eq(get_int(row, "reserved_begin"), 0);
	ck_assert_int_eq(get_int(row, "reserved_end"), 0);
	done(&r);
}
END_TEST

/* A stage's end overtakes its begin's reading: the stage is not left open to later readings. */
START_TEST(footprint_of_a_stage_whose_end_came_first)
{
	struct run r;
	run_nvml(&r, "race_close", NULL);
	assert_clean(&r);
	ck_assert_int_eq(metric(&r, "early_mem_gpu_footprint_peak"), 1 * MiB + CTX);
	ck_assert_int_eq(metric(&r, "later_mem_gpu_footprint_peak"), 65 * MiB + CTX);
	done(&r);
}
END_TEST

/* A graph captured in global mode while stages begin and end on its thread and another: the
 * readings (relaxed capture mode) leave it valid and each thread's mode as it was (the fixture
 * checks both), and still read. */
START_TEST(footprint_read_during_a_capture)
{
	struct run r;
	run_nvml(&r, "capture", NULL);
	assert_clean(&r);
	json_t *d0 = fp_device(json_object_get(stage(&r, "captured"), "gpu_footprint"), 0);
	ck_assert_int_eq(get_int(d0, "free_min"), TOTAL - CTX - 4 * MiB);
	ck_assert_int_eq(get_int(d0, "footprint"), 4 * MiB + CTX);
	d0 = fp_device(json_object_get(stage(&r, "beside"), "gpu_footprint"), 0);
	ck_assert_int_eq(get_int(d0, "free_min"), TOTAL - CTX - 4 * MiB);
	done(&r);
}
END_TEST

/* A stage whose only device allocation turned the call sites on lists it at its peak. */
START_TEST(first_device_allocation_is_a_site)
{
	struct run r;
	run_clean(&r, "fx_linked", "footprint");
	json_t *sites = json_object_get(stage(&r, "load"), "peak_sites_gpu");
	ck_assert_int_eq(json_array_size(sites), 1);
	ck_assert_int_eq(get_int(json_array_get(sites, 0), "bytes"), 40 * MiB);
	done(&r);
}
END_TEST

static Suite *gpu_suite(void)
{
	Suite *s = suite_create("gpu");
	TCase *paths = tcase_create("paths");
	tcase_set_timeout(paths, 60);
	tcase_add_test(paths, linked_direct_calls);
	tcase_add_test(paths, dlopen_dlsym_path);
	tcase_add_test(paths, get_proc_address_v2_path);
	tcase_add_test(paths, get_proc_address_cuda11_path);
	tcase_add_test(paths, no_driver_no_gpu_keys);
	tcase_add_test(paths, dlsym_keeps_rtld_next_of_caller);
	tcase_add_test(paths, dlsym_rtld_next_cuda_tool);
	tcase_add_test(paths, fixtures_pass_bare);
	tcase_add_test(paths, disabled_forwards_only);
	suite_add_tcase(s, paths);
	TCase *mem = tcase_create("memory");
	tcase_set_timeout(mem, 60);
	tcase_add_test(mem, device_from_current_context);
	tcase_add_test(mem, vmm_expandable_segments);
	tcase_add_test(mem, stream_ordered_and_pools);
	tcase_add_test(mem, out_of_memory_recorded);
	tcase_add_test(mem, unknown_pointers_forwarded);
	tcase_add_test(mem, eight_threads_exact);
	tcase_add_test(mem, managed_and_pinned_counters);
	tcase_add_test(mem, nested_driver_calls_count_once);
	tcase_add_test(mem, first_device_allocation_is_a_site);
	suite_add_tcase(s, mem);
	TCase *fp = tcase_create("footprint");
	tcase_set_timeout(fp, 60);
	tcase_add_test(fp, footprint_read_at_boundaries);
	tcase_add_test(fp, footprint_read_at_gpu_points);
	tcase_add_test(fp, footprint_not_read_in_a_forked_child);
	tcase_add_test(fp, footprint_without_nvml);
	tcase_add_test(fp, oom_report_burst_and_retry);
	tcase_add_test(fp, oom_report_without_nvml);
	tcase_add_test(fp, oom_report_pid_namespace);
	tcase_add_test(fp, oom_snapshot_survives_kill);
	tcase_add_test(fp, footprint_boundary_cost);
	tcase_add_test(fp, footprint_of_a_stage_two_threads_begin);
	tcase_add_test(fp, footprint_of_a_stage_whose_end_came_first);
	tcase_add_test(fp, footprint_read_during_a_capture);
	suite_add_tcase(s, fp);
	return s;
}

int main(void)
{
	return run_gpu_suite(gpu_suite());
}
