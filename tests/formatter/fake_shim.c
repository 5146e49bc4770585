/* A stand-in for libmemshim.so in the wrapper tests: writes a small valid metrics file when loaded
 * (FILE for the first process, FILE.<pid> for its children), so the tests need no real shim.
 * Written at load, not exit, because dash leaves through _exit and skips destructors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fake_is_child;

static void fake_write(void);
static void fake_stage(FILE *fp);

__attribute__((constructor)) static void fake_begin(void)
{
	char pid[32];
	fake_is_child = getenv("MEMSHIM_FAKE_ROOT") != NULL;
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	if (!fake_is_child)
		setenv("MEMSHIM_FAKE_ROOT", pid, 1);
	fake_write();
}

static void fake_write(void)
{
	const char *out = getenv("MEMSHIM_OUTPUT");
	char path[4200];
	if (!out)
		return;
	const char *pct = strstr(out, "%p"), *rank = strstr(out, "%r");
	if (pct) /* as the shim: %p is each process's pid, and children need no suffix then */
		snprintf(path, sizeof path, "%.*s%ld%s", (int)(pct - out), out, (long)getpid(), pct + 2);
	else if (rank && getenv("RANK")) /* %r: a rank's own name */
		snprintf(path, sizeof path, "%.*s%s%s", (int)(rank - out), out, getenv("RANK"), rank + 2);
	else if (rank) /* no rank: "pid<N>" */
		snprintf(path, sizeof path, "%.*spid%ld%s", (int)(rank - out), out, (long)getpid(), rank + 2);
	else if (fake_is_child)
		snprintf(path, sizeof path, "%s.%ld", out, (long)getpid());
	else
		snprintf(path, sizeof path, "%s", out);
	const char *kids = getenv("MEMSHIM_FAKE_KIDS"), *base = strrchr(path, '/');
	if (getenv("MEMSHIM_FAKE_MINOR") && fake_is_child && !pct && !rank) /* a helper, as the shim */
		kids = getenv("MEMSHIM_RUN_DIR") ? getenv("MEMSHIM_RUN_DIR") : "/nonexistent-run-dir";
	if (kids && fake_is_child && base) { /* as MEMSHIM_CHILDREN_DIR does */
		char moved[sizeof path];
		snprintf(moved, sizeof moved, "%.2000s%.2000s", kids, base);
		memcpy(path, moved, sizeof path);
	}
	FILE *fp = fopen(path, "w");
	if (!fp)
		return;
	fprintf(fp, "{\"format\": \"memshim-metrics\", \"version\": 1, \"complete\": true, "
		"\"pid\": %ld, \"ppid\": %ld, \"is_child\": %s, \"forked\": false, ",
		(long)getpid(), (long)getppid(), fake_is_child ? "true" : "false");
	/* RANK as torchrun sets it: the file records the rank, as the shim does */
	if (getenv("RANK"))
		fprintf(fp, "\"rank\": {\"rank\": %d, \"world_size\": 2, \"source\": \"torchrun\"}, ",
			atoi(getenv("RANK")));
	/* MEMSHIM_FAKE_MINOR: a launcher or shell that opened no stage and stayed small */
	if (getenv("MEMSHIM_FAKE_MINOR"))
		fprintf(fp, "\"metrics\": {\"init_mem_cpu_alloc_delta\": 4096, \"init_runtime\": 0.001, "
			"\"init_calls\": 1, \"process_mem_cpu_peak\": 81920}, \"stages\": [{\"name\": "
			"\"init\", \"implicit\": true, \"calls\": 1}]}");
	else
		fake_stage(fp);
	fclose(fp);
}

/* The fake stage; call sites at its peak unless MEMSHIM_SITES=0 (the shim samples by default), a
 * rank's growing with the rank, and with RANK the process peak that picks the rank to show. */
static void fake_stage(FILE *fp)
{
	const char *off = getenv("MEMSHIM_SITES"), *rank = getenv("RANK");
	int r = rank ? atoi(rank) : 0;
	fprintf(fp, "\"metrics\": {\"fake_mem_cpu_alloc_delta\": 3145728, \"fake_runtime\": 0.5, "
		"\"fake_calls\": 1");
	if (rank)
		fprintf(fp, ", \"process_mem_cpu_peak\": %d", (100 + 10 * r) << 20);
	fprintf(fp, "}, \"stages\": [{\"name\": \"fake\", \"calls\": 1");
	if (off && !strcmp(off, "0")) {
		fputs("}]}", fp);
		return;
	}
	fprintf(fp, ", \"cpu\": {\"peak\": %d}, \"peak_sites\": [{\"bytes\": %d, \"samples\": %d, "
		"\"frames\": [\"fake_alloc (fake.py:3)\", \"main (fake.py:9)\"]}, {\"bytes\": 1048576, "
		"\"samples\": 2, \"frames\": [\"fake_native+0x10 (libfake.so)\"]}], \"peak_sites_lag\": 0}], "
		"\"sites\": {\"rate\": 524288, \"samples\": 12, \"gpu_allocations\": 0, \"stacks\": 2, "
		"\"stacks_dropped\": 0, \"python_frames\": true, \"max_frames\": 64, "
		"\"lag_fraction\": 0.02}}", (4 + r) << 20, (2 + r) << 20, 4 + 2 * r);
}
