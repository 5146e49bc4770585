/* Live records (see live.h): the shim's fixed layout read through a shared read-only mapping with
 * the record's sequence counter, then written out as the metrics file the shim would have written
 * (doc/metrics-format.md), so every mode of memshim-format reads it. */
#include "input/input.h"
#include "base/base.h"
#include "model/document.h"
#include "input/live.h"
#include "input/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MF_LIVE_TRIES 1000 /* copies tried while the writer is inside an update (~1 s in all) */

int mf_live_magic(const char *buf, size_t len)
{
	uint64_t m;
	if (len < sizeof m)
		return 0;
	memcpy(&m, buf, sizeof m);
	return m == MS_LIVE_MAGIC;
}

static int mf_live_fail(FILE *err, const char *path, const char *what)
{
	if (err)
		fprintf(err, "memshim-format: %s: %s\n", path, what);
	return -1;
}

/* Copies the mapping between two reads of the sequence counter; 1 when consistent. */
static int mf_live_copy(const struct ms_live_record *map, struct ms_live_record *out)
{
	uint32_t before = __atomic_load_n(&map->seq, __ATOMIC_ACQUIRE);
	memcpy(out, map, sizeof *out);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	uint32_t after = __atomic_load_n(&map->seq, __ATOMIC_RELAXED);
	return before == after && !(before & 1);
}

static int mf_live_check(const char *path, const struct ms_live_record *r, FILE *err)
{
	char msg[200];
	if (r->magic != MS_LIVE_MAGIC)
		return mf_live_fail(err, path, "not a memshim live record (bad magic number)");
	if (r->version != MS_LIVE_VERSION) {
		snprintf(msg, sizeof msg, "live record version %u; this memshim-format reads version %d", r->version,
			 MS_LIVE_VERSION);
		return mf_live_fail(err, path, msg);
	}
	if (r->size != sizeof *r) {
		snprintf(msg, sizeof msg,
			 "live record of %u bytes, from another build of memshim (this one "
			 "reads %zu)",
			 r->size, sizeof *r);
		return mf_live_fail(err, path, msg);
	}
	if (r->uid != getuid())
		return mf_live_fail(err, path, "live record of another user: not read");
	return 0;
}

int mf_live_read(const char *path, struct ms_live_record *out, int *torn, FILE *err)
{
	char msg[200];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(msg, sizeof msg, "cannot open: %s", strerror(errno));
		return mf_live_fail(err, path, msg);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return mf_live_fail(err, path, "not a regular file");
	}
	if (st.st_uid != getuid()) {
		close(fd);
		snprintf(msg, sizeof msg, "live record of another user (uid %u): not read", (unsigned)st.st_uid);
		return mf_live_fail(err, path, msg);
	}
	if ((size_t)st.st_size < sizeof *out) {
		close(fd);
		snprintf(msg, sizeof msg, "truncated live record (%lld of %zu bytes), or from another version",
			 (long long)st.st_size, sizeof *out);
		return mf_live_fail(err, path, msg);
	}
	const struct ms_live_record *map = mmap(NULL, sizeof *out, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		snprintf(msg, sizeof msg, "cannot map: %s", strerror(errno));
		return mf_live_fail(err, path, msg);
	}
	int ok = 0;
	for (int i = 0; i < MF_LIVE_TRIES && !(ok = mf_live_copy(map, out)); i++) {
		struct timespec pause = { 0, 1000000 };
		if (i == 10 && out->pid > 0 && kill(out->pid, 0) < 0 && errno == ESRCH)
			break; /* its writer is gone: the count stays odd */
		if (i >= 10)
			nanosleep(&pause, NULL);
	}
	munmap((void *)map, sizeof *out);
	if (mf_live_check(path, out, err))
		return -1;
	if (torn)
		*torn = !ok; /* the writer stopped inside an update: it was killed there */
	return 0;
}

/* The start time of PID from /proc (seconds since the epoch), or -1. */
static double mf_proc_start(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *fp = fopen(path, "r");
	if (!fp)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
	unsigned long long ticks = 0;
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &ticks) != 1)
		return -1;
	struct timespec now, up;
	clock_gettime(CLOCK_REALTIME, &now);
	clock_gettime(CLOCK_BOOTTIME, &up);
	double boot = (double)now.tv_sec + now.tv_nsec * 1e-9 - ((double)up.tv_sec + up.tv_nsec * 1e-9);
	return boot + (double)ticks / (double)sysconf(_SC_CLK_TCK);
}

int mf_live_alive(const struct ms_live_record *r)
{
	if (r->pid <= 0 || (kill(r->pid, 0) < 0 && errno == ESRCH))
		return 0;
	double started = mf_proc_start(r->pid);
	/* a forked child's clock starts at the fork, an exec'd one's at its constructor: both within
	 * moments of what /proc says, where a reused pid started later */
	return started < 0 || (started < r->start_unix + 2.0);
}

/* ---- the record as a metrics document (the shim's shim/output/report.c, key by key) ---------------- */

static void mf_set(json_t *o, const char *key, json_t *v)
{
	if (!v || json_object_set_new(o, key, v))
		mf_oom();
}

static void mf_set_int(json_t *o, const char *key, int64_t v)
{
	mf_set(o, key, json_integer((json_int_t)v));
}

/* A - B wrapping, never undefined: a damaged record may hold any numbers. */
static int64_t mf_sub(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* N bytes of text from the record as a JSON string: what is not UTF-8 (a damaged record, a file
 * name in another encoding) reads as '?' byte by byte. */
json_t *mf_live_text(const char *s, size_t n)
{
	json_t *v = json_stringn(s, n);
	if (v)
		return v;
	char *copy = mf_xmalloc(n + 1);
	for (size_t i = 0; i < n; i++)
		copy[i] = (s[i] > 0 && s[i] < 0x7f) ? s[i] : '?';
	copy[n] = '\0';
	v = json_stringn(copy, n);
	free(copy);
	return v;
}

/* Seconds; a damaged record's NaN or infinity (which JSON cannot hold) reads as 0. */
static json_t *mf_secs(double v)
{
	return json_real(isfinite(v) ? v : 0.0);
}

static json_t *mf_delta(const struct ms_live_span *sp, int c)
{
	json_t *o = json_object();
	int64_t peaked = mf_sub(sp->peak[c], sp->end[c]);
	mf_set_int(o, "begin", sp->begin[c]);
	mf_set_int(o, "end", sp->end[c]);
	mf_set_int(o, "alloc_delta", mf_sub(sp->end[c], sp->begin[c]));
	mf_set_int(o, "peaked_delta", peaked > 0 ? peaked : 0);
	mf_set_int(o, "peak", sp->peak[c]);
	return o;
}

/* Opens the object of component C for a stage's span (SPAN) or the process (PEAKS, LIVE). */
struct mf_src {
	const struct ms_live_span *span;
	const int64_t *peaks, *live;
};

static json_t *mf_comp(const struct mf_src *s, int c)
{
	if (s->span)
		return mf_delta(s->span, c);
	json_t *o = json_object();
	mf_set_int(o, "peak", s->peaks[c]);
	mf_set_int(o, "live", s->live[c]);
	return o;
}

static json_t *mf_gpu_tree(const struct ms_live_record *r, const struct mf_src *s)
{
	json_t *gpu = mf_comp(s, MS_LIVE_GPU), *devs = json_array();
	if (s->span) {
		mf_set_int(gpu, "failed_allocs", s->span->gpu_failed_allocs);
		mf_set_int(gpu, "failed_bytes", s->span->gpu_failed_bytes);
	}
	for (int d = 0; d < MS_LIVE_DEVICES; d++) {
		if (!(r->devices_used & (1u << d)))
			continue;
		json_t *o = mf_comp(s, MS_LIVE_DEV0 + d);
		mf_set_int(o, "device", d);
		json_array_append_new(devs, o);
	}
	mf_set(gpu, "devices", devs);
	mf_set(gpu, "managed", mf_comp(s, MS_LIVE_MANAGED));
	mf_set(gpu, "pinned", mf_comp(s, MS_LIVE_PINNED));
	return gpu;
}

static json_t *mf_cpu_tree(const struct mf_src *s)
{
	json_t *cpu = mf_comp(s, MS_LIVE_CPU), *res = mf_comp(s, MS_LIVE_RESERVE);
	mf_set(cpu, "malloc", mf_comp(s, MS_LIVE_MALLOC));
	mf_set(cpu, "mmap", mf_comp(s, MS_LIVE_MMAP));
	mf_set(res, "read", json_string("resident pages (pagemap scan or mincore)"));
	mf_set(cpu, "reservations", res);
	json_t *sh = mf_comp(s, MS_LIVE_SHARED);
	mf_set(sh, "read", json_string("resident pages of shared memory mappings in this process (pagemap)"));
	mf_set(cpu, "shared", sh);
	return cpu;
}

static json_t *mf_stage_json(const struct ms_live_record *r, const struct ms_live_stage *st)
{
	int open = st->depth > 0;
	const struct ms_live_span *sp = open ? &st->cur : &st->last;
	struct mf_src src = { sp, NULL, NULL };
	json_t *o = json_object(), *rss = json_object(), *need = json_object();
	mf_set(o, "name", mf_live_text(st->name, strnlen(st->name, sizeof st->name)));
	mf_set(o, "implicit", json_boolean(st->implicit));
	mf_set_int(o, "calls", (int64_t)st->calls);
	mf_set(o, "open", json_boolean(open));
	mf_set(o, "closed_at_exit", json_boolean(!open && sp->closed_at_exit));
	mf_set(o, "start", mf_secs(sp->start));
	mf_set(o, "runtime", mf_secs(sp->runtime));
	mf_set(o, "cpu", mf_cpu_tree(&src));
	mf_set_int(rss, "begin", sp->begin[MS_LIVE_RSS]);
	mf_set_int(rss, "end", sp->end[MS_LIVE_RSS]);
	mf_set_int(rss, "peak", sp->peak[MS_LIVE_RSS]);
	mf_set(rss, "read", json_string("/proc/self/statm at boundaries"));
	mf_set(o, "rss", rss);
	mf_live_cgroup_stage(o, r, sp);
	if (r->gpu_used)
		mf_set(o, "gpu", mf_gpu_tree(r, &src));
	mf_set_int(need, "cpu", st->max_cpu_needed);
	mf_set_int(need, "cpu_call", (int64_t)st->max_cpu_call);
	if (r->gpu_used) {
		mf_set_int(need, "gpu", st->max_gpu_needed);
		mf_set_int(need, "gpu_call", (int64_t)st->max_gpu_call);
	}
	mf_set(o, "max_needed", need);
	mf_set(o, "history", json_array()); /* the record keeps no call history */
	mf_set_int(o, "history_dropped", (int64_t)st->calls);
	return o;
}

static void mf_flat(json_t *m, const char *stage, const char *suffix, json_t *v)
{
	char *key = mf_xasprintf("%s_%s", stage, suffix);
	mf_set(m, key, v);
	free(key);
}

static void mf_flat_stage(json_t *m, const struct ms_live_record *r, const struct ms_live_stage *st)
{
	const struct ms_live_span *sp = &st->last;
	int64_t cpu_peaked = mf_sub(sp->peak[MS_LIVE_CPU], sp->end[MS_LIVE_CPU]);
	int64_t gpu_peaked = mf_sub(sp->peak[MS_LIVE_GPU], sp->end[MS_LIVE_GPU]);
	char name[MS_LIVE_NAME + 1];
	snprintf(name, sizeof name, "%.*s", MS_LIVE_NAME, st->name);
	for (char *p = name; *p; p++) /* names are [A-Za-z0-9_]+; a damaged record's are not keys */
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
			*p = '?';
	mf_flat(m, name, "mem_cpu_alloc_delta", json_integer(mf_sub(sp->end[MS_LIVE_CPU], sp->begin[MS_LIVE_CPU])));
	mf_flat(m, name, "mem_cpu_peaked_delta", json_integer(cpu_peaked > 0 ? cpu_peaked : 0));
	if (r->gpu_used) {
		mf_flat(m, name, "mem_gpu_alloc_delta",
			json_integer(mf_sub(sp->end[MS_LIVE_GPU], sp->begin[MS_LIVE_GPU])));
		mf_flat(m, name, "mem_gpu_peaked_delta", json_integer(gpu_peaked > 0 ? gpu_peaked : 0));
		mf_flat(m, name, "mem_gpu_failed_allocs", json_integer(sp->gpu_failed_allocs));
	}
	mf_flat(m, name, "runtime", mf_secs(sp->runtime));
	mf_flat(m, name, "calls", json_integer((json_int_t)st->calls));
}

/* A forked child's CPU numbers are what it added over its parent's memory at the fork. */
static void mf_above_inherited(const struct ms_live_record *r, int64_t *v)
{
	static const int parts[] = { MS_LIVE_CPU, MS_LIVE_MALLOC, MS_LIVE_MMAP, MS_LIVE_RESERVE, MS_LIVE_SHARED };
	for (size_t i = 0; r->forked && i < sizeof parts / sizeof *parts; i++) {
		int c = parts[i];
		v[c] = v[c] > r->inherited[c] ? mf_sub(v[c], r->inherited[c]) : 0;
	}
}

static json_t *mf_metrics(const struct ms_live_record *r, const int *ids, int n, const int64_t *peaks)
{
	json_t *m = json_object();
	for (int i = 0; i < n; i++)
		if (r->stage[ids[i]].calls > 0)
			mf_flat_stage(m, r, &r->stage[ids[i]]);
	int64_t inherited = r->forked ? r->inherited[MS_LIVE_CPU] : 0;
	int64_t before = r->before_init_set ? mf_sub(r->before_init[MS_LIVE_CPU], inherited) : 0;
	mf_set_int(m, "before_init_mem_cpu", before > 0 ? before : 0);
	if (r->forked)
		mf_set_int(m, "inherited_mem_cpu", inherited);
	mf_set_int(m, "process_mem_cpu_peak", peaks[MS_LIVE_CPU]);
	mf_set_int(m, "process_mem_cpu_malloc_peak", peaks[MS_LIVE_MALLOC]);
	mf_set_int(m, "process_mem_cpu_mmap_peak", peaks[MS_LIVE_MMAP]);
	mf_set_int(m, "process_mem_cpu_reservations_peak", peaks[MS_LIVE_RESERVE]);
	if (r->shared_mappings)
		mf_set_int(m, "process_mem_cpu_shared_peak", peaks[MS_LIVE_SHARED]);
	mf_set_int(m, "process_mem_rss_peak", r->rss_peak);
	if (r->gpu_used) {
		mf_set_int(m, "before_init_mem_gpu", r->before_init_set ? r->before_init[MS_LIVE_GPU] : 0);
		mf_set_int(m, "process_mem_gpu_peak", peaks[MS_LIVE_GPU]);
		mf_set_int(m, "process_mem_gpu_managed_peak", peaks[MS_LIVE_MANAGED]);
		mf_set_int(m, "process_mem_gpu_pinned_peak", peaks[MS_LIVE_PINNED]);
	}
	return m;
}

static json_t *mf_process(const struct ms_live_record *r, const int64_t *peaks, const int64_t *live)
{
	static const char *const names[] = { "cpu", "malloc", "mmap" };
	struct mf_src src = { NULL, peaks, live };
	json_t *p = json_object(), *rss = json_object();
	for (int c = MS_LIVE_CPU; c <= MS_LIVE_MMAP; c++)
		mf_set(p, names[c], mf_comp(&src, c));
	json_t *res = mf_comp(&src, MS_LIVE_RESERVE);
	mf_set(res, "read", json_string("resident pages (pagemap scan or mincore)"));
	mf_set(p, "reservations", res);
	json_t *sh = mf_comp(&src, MS_LIVE_SHARED);
	mf_set(sh, "read", json_string("resident pages of shared memory mappings in this process (pagemap)"));
	mf_set(p, "shared", sh); /* the segments are in the metrics file only */
	mf_set_int(rss, "peak", r->rss_peak);
	mf_set_int(rss, "live", r->live[MS_LIVE_RSS]);
	mf_set(rss, "read",
	       json_string("peak: getrusage ru_maxrss, or /proc/self/status VmHWM below what exec carried over, "
			   "read at stage boundaries and timeline points (at most every 0.1 s but in a Go program); "
			   "live: /proc/self/statm"));
	mf_set(p, "rss", rss);
	if (r->forked) {
		json_t *inh = json_object();
		mf_set_int(inh, "cpu", r->inherited[MS_LIVE_CPU]);
		mf_set_int(inh, "malloc", r->inherited[MS_LIVE_MALLOC]);
		mf_set_int(inh, "mmap", r->inherited[MS_LIVE_MMAP]);
		mf_set_int(inh, "reservations", r->inherited[MS_LIVE_RESERVE]);
		mf_set_int(inh, "shared", r->inherited[MS_LIVE_SHARED]);
		mf_set(p, "inherited", inh);
	}
	if (r->gpu_used)
		mf_set(p, "gpu", mf_gpu_tree(r, &src));
	mf_set_int(p, "mmap_untracked", (int64_t)r->mmap_untracked);
	return p;
}

static void mf_identity(json_t *d, const struct ms_live_record *r, int alive)
{
	json_t *argv = json_array();
	mf_set(d, "format", json_string("memshim-metrics"));
	mf_set_int(d, "version", 1);
	mf_set(d, "complete", json_false());
	mf_set(d, "reason", json_string(alive ? "live" : "recovered"));
	mf_set_int(d, "pid", r->pid);
	mf_set_int(d, "ppid", r->ppid);
	mf_set_int(d, "root_pid", r->root_pid);
	mf_set(d, "is_child", json_boolean(r->is_child));
	mf_set(d, "forked", json_boolean(r->forked));
	size_t len = r->argv_len < sizeof r->argv ? r->argv_len : sizeof r->argv;
	for (size_t i = 0; i < len;) {
		size_t n = strnlen(r->argv + i, len - i);
		json_array_append_new(argv, mf_live_text(r->argv + i, n));
		i += n + 1;
	}
	mf_set(d, "argv", argv);
	mf_set(d, "argv_truncated", json_boolean(r->argv_truncated));
	mf_set(d, "start_time", mf_secs(r->start_unix));
	mf_set(d, "end_time", mf_secs(r->update_unix));
	mf_set(d, "elapsed", mf_secs(r->elapsed));
	if (r->rank >= 0) {
		json_t *rank = json_object();
		mf_set_int(rank, "rank", r->rank);
		if (r->local_rank >= 0)
			mf_set_int(rank, "local_rank", r->local_rank);
		if (r->world_size >= 0)
			mf_set_int(rank, "world_size", r->world_size);
		if (r->node_rank >= 0)
			mf_set_int(rank, "node_rank", r->node_rank);
		mf_set(rank, "source", mf_live_text(r->rank_source, strnlen(r->rank_source, sizeof r->rank_source)));
		mf_set(d, "rank", rank);
	}
}

/* Stage ids in the order they first began (as the report orders them). */
static int mf_ordered(const struct ms_live_record *r, int ids[MS_LIVE_STAGES])
{
	int n = 0, nst = r->nstages < MS_LIVE_STAGES ? r->nstages : MS_LIVE_STAGES;
	for (int order = 0; order < MS_LIVE_STAGES; order++)
		for (int i = 0; i < nst; i++)
			if (r->stage[i].first_order == order)
				ids[n++] = i;
	return n;
}

/* The CPU (or GPU: C) bytes a span needed: what it kept plus what came and went. */
static int64_t mf_needed(const struct ms_live_span *sp, int c)
{
	int64_t peaked = mf_sub(sp->peak[c], sp->end[c]);
	return mf_sub(sp->end[c], sp->begin[c]) + (peaked > 0 ? peaked : 0);
}

/* What the shim does to the stages still open at a normal exit (each call closed at exit, its
 * numbers those of the last update), for a program that leaves past that exit (Go). */
static void mf_close_at_exit(struct ms_live_record *r)
{
	int nst = r->nstages < MS_LIVE_STAGES ? r->nstages : MS_LIVE_STAGES;
	for (int i = 0; i < nst; i++) {
		struct ms_live_stage *st = &r->stage[i];
		if (st->depth <= 0)
			continue;
		st->calls++;
		if (st->calls == 1 || mf_needed(&st->cur, MS_LIVE_CPU) > st->max_cpu_needed)
			st->max_cpu_needed = mf_needed(&st->cur, MS_LIVE_CPU), st->max_cpu_call = st->calls;
		if (st->calls == 1 || mf_needed(&st->cur, MS_LIVE_GPU) > st->max_gpu_needed)
			st->max_gpu_needed = mf_needed(&st->cur, MS_LIVE_GPU), st->max_gpu_call = st->calls;
		st->last = st->cur;
		st->last.closed_at_exit = 1;
		st->depth = 0;
	}
	r->nopen = 0;
}

/* A program that leaves by its own exit system call (leaves_raw), gone while its record says it
 * runs: it exited (or was killed: the record cannot tell the two apart). */
static int mf_left_raw(const struct ms_live_record *r, int alive)
{
	return !alive && r->leaves_raw && r->state == MS_LIVE_RUNNING;
}

static json_t *mf_live_json_of(const struct ms_live_record *r, const char *path, int alive, int torn)
{
	json_t *d = json_object(), *stages = json_array(), *about = json_object();
	int64_t peaks[MS_LIVE_COMPS], live[MS_LIVE_COMPS];
	int ids[MS_LIVE_STAGES], n = mf_ordered(r, ids);
	memcpy(peaks, r->peak, sizeof peaks);
	memcpy(live, r->live, sizeof live);
	mf_above_inherited(r, peaks);
	mf_above_inherited(r, live);
	mf_identity(d, r, alive);
	mf_set(about, "path", mf_live_text(path, strlen(path)));
	mf_set(about, "state",
	       json_string(alive                          ? "running"
			   : r->state == MS_LIVE_ENDED    ? "ended"
			   : r->state == MS_LIVE_SIGNALED ? "signal"
			   : r->leaves_raw                ? "exited"
							  : "killed"));
	if (!alive && r->state == MS_LIVE_SIGNALED)
		mf_set_int(about, "signal", r->signal);
	if (r->leaves_raw >= MS_LIVE_RAW_SECCOMP)
		mf_set(about, "seccomp",
		       json_string(r->leaves_raw == MS_LIVE_RAW_SECCOMP_STRICT ? "strict" : "filter"));
	mf_set_int(about, "updates", (int64_t)r->updates);
	mf_set(about, "torn", json_boolean(torn));
	mf_set(about, "timeline", json_boolean(r->timeline));
	mf_set(about, "output", mf_live_text(r->output, strnlen(r->output, sizeof r->output)));
	mf_set(d, "live_record", about);
	mf_set(d, "gpu_used", json_boolean(r->gpu_used));
	json_t *m = mf_metrics(r, ids, n, peaks);
	mf_live_cgroup_flat(m, r);
	mf_set(d, "metrics", m);
	for (int i = 0; i < n; i++)
		json_array_append_new(stages, mf_stage_json(r, &r->stage[ids[i]]));
	mf_set(d, "stages", stages);
	mf_set(d, "unmatched_targets", json_array());
	json_t *p = mf_process(r, peaks, live);
	mf_live_cgroup_process(p, r, peaks[MS_LIVE_CGROUP]);
	mf_set(d, "process", p);
	return d;
}

json_t *mf_live_json(const struct ms_live_record *r, const char *path, int alive, int torn)
{
	if (!mf_left_raw(r, alive))
		return mf_live_json_of(r, path, alive, torn);
	struct ms_live_record *closed = mf_xmalloc(sizeof *closed);
	memcpy(closed, r, sizeof *closed);
	mf_close_at_exit(closed);
	json_t *d = mf_live_json_of(closed, path, alive, torn);
	free(closed);
	return d;
}

char *mf_live_default_dir(void)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && xdg[0] == '/')
		return mf_xasprintf("%s/memshim", xdg);
	return mf_xasprintf("/dev/shm/memshim-%u", (unsigned)getuid());
}

int mf_live_load(const char *path, struct mf_file *f, FILE *err)
{
	struct ms_live_record *r = mf_xmalloc(sizeof *r);
	int torn = 0, rc = mf_live_read(path, r, &torn, err);
	if (rc == 0)
		rc = mf_load_json(path, mf_live_json(r, path, mf_live_alive(r), torn), f, err);
	free(r);
	return rc;
}

/* ---- a snapshot its live record has moved past --------------------------------------------------- */

/* The record in DIR of process PID started at START (a name "<pid>.<start ms>.live"; the start is
 * compared inside, to the millisecond) into R, its path into *PATH (malloc'd): 1, else 0. */
static int mf_record_of(const char *dir, long long pid, double start, struct ms_live_record *r, int *torn, char **path)
{
	char prefix[32];
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;
	snprintf(prefix, sizeof prefix, "%lld.", pid);
	while (d && !found && (e = readdir(d))) {
		size_t len = strlen(e->d_name), sl = strlen(MS_LIVE_SUFFIX);
		if (strncmp(e->d_name, prefix, strlen(prefix)) || len <= sl ||
		    strcmp(e->d_name + len - sl, MS_LIVE_SUFFIX))
			continue;
		char *p = mf_xasprintf("%s/%s", dir, e->d_name);
		found = mf_live_read(p, r, torn, NULL) == 0 && r->pid == pid &&
			fabs(r->start_unix - start) < MF_SAME_START;
		if (found)
			*path = p;
		else
			free(p);
	}
	if (d)
		closedir(d);
	return found;
}

int mf_live_newer(struct mf_file *f, FILE *err)
{
	if (f->complete || !f->has_times || json_object_get(f->root, "live_record"))
		return 0;
	char *dirs[2] = { NULL, mf_live_default_dir() }, *path = NULL;
	const char *env = getenv("MEMSHIM_LIVE_DIR");
	if (env && *env)
		dirs[0] = mf_xstrdup(env);
	struct ms_live_record *r = mf_xmalloc(sizeof *r);
	int torn = 0, found = 0;
	for (int i = 0; i < 2 && !found; i++)
		found = dirs[i] && mf_record_of(dirs[i], f->pid, f->start_time, r, &torn, &path);
	/* a sandboxed process's snapshot was written as it entered, the record updated after (in strict
	 * mode with its clock stopped there) */
	int newer = found && (r->update_unix > f->end_time + MF_SAME_TIME || r->leaves_raw >= MS_LIVE_RAW_SECCOMP);
	if (newer) {
		char *file = mf_xstrdup(f->path);
		double was = f->end_time - f->start_time;
		json_t *doc = mf_live_json(r, path, mf_live_alive(r), torn);
		mf_file_free(f);
		newer = mf_load_json(file, doc, f, err) == 0;
		if (newer && r->leaves_raw >= MS_LIVE_RAW_SECCOMP)
			fprintf(err,
				"memshim-format: %s: its snapshot is from %.3fs after start, as it entered a seccomp "
				"sandbox; its live record %s holds what came after: showing the record\n",
				file, was, path);
		else if (newer)
			fprintf(err,
				"memshim-format: %s: its snapshot is from %.3fs after start; its live record %s is "
				"newer (%.3fs): showing the record\n",
				file, was, path, r->elapsed);
		free(file);
	}
	free(path);
	free(r);
	free(dirs[0]);
	free(dirs[1]);
	return newer;
}
