/* The metrics document (shim/output/document.c): a state fed in by hand, the JSON compared key by
 * key with what doc/metrics-format.md says that state writes. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "suite.h"
#include "output/document.h"

static struct ms_stages st;
static struct ms_timeline tl;
static struct ms_process proc;
static struct ms_doc doc;
static struct ms_json w;
static char out[1 << 16];

static void span(struct ms_span *sp, int c, int64_t begin, int64_t end, int64_t peak)
{
	sp->begin[c] = begin;
	sp->end[c] = end;
	sp->peak[c] = peak;
}

/* Stage "train": one call done (+3000 kept, peaked 500 above); stage "eval" open; a GPU on device 1. */
static void fill_state(void)
{
	memset(&st, 0, sizeof st);
	memset(&tl, 0, sizeof tl);
	memset(&doc, 0, sizeof doc);
	proc = (struct ms_process){ .pid = 42, .ppid = 1, .root_pid = 42, .start_unix = 100.0,
				    .rank = { .source = "torchrun", .rank = 3, .local_rank = 1, .world_size = 8,
					      .node_rank = -1, .restart = -1 } };
	st.nstages = 2;
	st.order_next = 2;
	struct ms_stage *t = &st.stage[0], *e = &st.stage[1];
	strcpy(t->name, "train");
	t->used = 1;
	t->first_order = 1; /* began second: written second */
	t->calls = 1;
	span(&t->last, MS_CPU, 1000, 4000, 4500);
	span(&t->last, MS_GPU, 0, 2048, 4096);
	span(&t->last, MS_DEV0 + 1, 0, 2048, 4096);
	t->last.start = 1.5;
	t->last.runtime = 2.0;
	t->max_cpu_needed = 3500;
	t->max_cpu_call = 1;
	t->history[0] = (struct ms_call){ .start = 1.5, .runtime = 2.0, .cpu_alloc = 3000, .cpu_peaked = 500,
					  .gpu_alloc = 2048, .gpu_peaked = 2048 };
	strcpy(e->name, "eval");
	e->used = 1;
	e->first_order = 0;
	st.depth[1] = 1;
	span(&e->cur, MS_CPU, 4000, 3000, 5000);
	e->cur.start = 4.0;
	doc = (struct ms_doc){ .reason = "exit", .complete = 1, .end_unix = 110.25, .proc = &proc,
			       .argv = "prog\0--flag", .argv_len = 12, .stages = &st, .gpu = 1, .devices = 1u << 1,
			       .rss_peak = 1 << 20, .mmap_untracked = 2 };
	doc.peaks[MS_CPU] = 5000;
	doc.peaks[MS_GPU] = 4096;
	doc.peaks[MS_DEV0 + 1] = 4096;
	doc.live[MS_CPU] = 3000;
	doc.live[MS_RSS] = 1 << 19;
}

static json_t *written(void)
{
	ms_json_init_memory(&w, out, sizeof out);
	ms_document_write(&w, &doc);
	ck_assert_int_eq(ms_json_finish(&w), 0);
	ck_assert_uint_lt(w.mem_len, sizeof out);
	json_error_t err;
	json_t *root = json_loads(out, 0, &err);
	ck_assert_msg(root != NULL, "parse error: %s", err.text);
	return root;
}

/* The member at PATH ("stages/1/cpu/alloc_delta"), or NULL. */
static json_t *at(json_t *v, const char *path)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof buf, "%s", path);
	for (char *k = strtok_r(buf, "/", &save); k && v; k = strtok_r(NULL, "/", &save))
		v = json_is_array(v) ? json_array_get(v, (size_t)strtoul(k, NULL, 10)) : json_object_get(v, k);
	return v;
}

static void expect_int(json_t *root, const char *path, json_int_t want)
{
	json_t *v = at(root, path);
	ck_assert_msg(json_is_integer(v), "%s: not an integer", path);
	ck_assert_msg(json_integer_value(v) == want, "%s: %lld, want %lld", path, (long long)json_integer_value(v),
		      (long long)want);
}

static void expect_str(json_t *root, const char *path, const char *want)
{
	json_t *v = at(root, path);
	ck_assert_msg(json_is_string(v), "%s: not a string", path);
	ck_assert_str_eq(json_string_value(v), want);
}

START_TEST(identity_and_order)
{
	fill_state();
	json_t *root = written();
	static const char *const top[] = { "format", "version", "complete", "reason", "pid", "ppid", "root_pid",
					   "is_child", "forked", "argv", "argv_truncated", "start_time", "end_time",
					   "elapsed", "rank", "gpu_used", "metrics", "stages", "unmatched_targets", "native_targets",
					   "gpu_events", "gpu_events_dropped", "process" };
	const char *p = out;
	for (size_t i = 0; i < sizeof top / sizeof *top; i++) { /* in this order, as the format says */
		char key[64];
		snprintf(key, sizeof key, "\n  \"%s\":", top[i]);
		const char *q = strstr(p, key);
		ck_assert_msg(q != NULL, "top-level key %s missing or out of order", top[i]);
		p = q;
	}
	ck_assert_int_eq((int)json_object_size(root), (int)(sizeof top / sizeof *top));
	expect_str(root, "format", "memshim-metrics");
	expect_str(root, "argv/1", "--flag");
	expect_int(root, "rank/rank", 3);
	expect_int(root, "rank/local_rank", 1);
	ck_assert_ptr_null(at(root, "rank/node_rank"));
	ck_assert(json_real_value(at(root, "elapsed")) == 10.25);
	expect_str(root, "stages/0/name", "eval"); /* first begun first */
	expect_str(root, "stages/1/name", "train");
	json_decref(root);
}
END_TEST

START_TEST(stage_numbers)
{
	fill_state();
	json_t *root = written();
	expect_int(root, "metrics/train_mem_cpu_alloc_delta", 3000);
	expect_int(root, "metrics/train_mem_cpu_peaked_delta", 500);
	expect_int(root, "metrics/train_mem_gpu_alloc_delta", 2048);
	expect_int(root, "metrics/train_mem_gpu_peaked_delta", 2048);
	expect_int(root, "metrics/train_calls", 1);
	ck_assert_ptr_null(at(root, "metrics/eval_calls")); /* no completed call: no flat keys */
	expect_int(root, "metrics/process_mem_cpu_peak", 5000);
	expect_int(root, "metrics/process_mem_rss_peak", 1 << 20);
	ck_assert(json_is_true(at(root, "stages/0/open")));
	expect_int(root, "stages/0/cpu/alloc_delta", -1000);
	expect_int(root, "stages/0/cpu/peaked_delta", 2000);
	expect_int(root, "stages/1/cpu/begin", 1000);
	expect_int(root, "stages/1/cpu/peak", 4500);
	expect_int(root, "stages/1/gpu/devices/0/device", 1);
	expect_int(root, "stages/1/gpu/devices/0/peaked_delta", 2048);
	ck_assert_int_eq((int)json_array_size(at(root, "stages/1/gpu/devices")), 1);
	expect_int(root, "stages/1/max_needed/cpu", 3500);
	expect_int(root, "stages/1/history/0/cpu_peaked_delta", 500);
	expect_int(root, "stages/1/history/0/gpu_alloc_delta", 2048);
	expect_int(root, "process/cpu/live", 3000);
	expect_int(root, "process/rss/live", 1 << 19);
	expect_int(root, "process/gpu/devices/0/peak", 4096);
	expect_int(root, "process/mmap_untracked", 2);
	ck_assert_ptr_null(at(root, "timeline")); /* off */
	ck_assert_ptr_null(at(root, "process/inherited"));
	json_decref(root);
}
END_TEST

/* How calls ended: the last finished call's way and exception, the counts, the names, per call. */
START_TEST(calls_ended)
{
	fill_state();
	struct ms_stage *t = &st.stage[0];
	t->calls = 2;
	t->history[1] = t->history[0];
	t->history[0].ended = MS_END_RAISED;
	t->history[0].exception = 1;
	t->history[1].ended = MS_END_UNWOUND;
	t->last.ended = MS_END_UNWOUND;
	t->ended[MS_END_RAISED] = 1;
	t->ended[MS_END_UNWOUND] = 1;
	t->exceptions = 1;
	st.nexc = 1;
	strcpy(st.exc_names[0], "KeyboardInterrupt");
	json_t *root = written();
	expect_str(root, "stages/1/ended", "unwound");
	ck_assert_ptr_null(at(root, "stages/1/exception"));
	expect_int(root, "stages/1/calls_ended/returned", 0);
	expect_int(root, "stages/1/calls_ended/raised", 1);
	expect_int(root, "stages/1/calls_ended/unwound", 1);
	expect_int(root, "stages/1/calls_ended/jumped", 0);
	expect_int(root, "stages/1/calls_ended/open_at_exit", 0);
	expect_str(root, "stages/1/exceptions/0", "KeyboardInterrupt");
	expect_str(root, "stages/1/history/0/ended", "raised");
	expect_str(root, "stages/1/history/0/exception", "KeyboardInterrupt");
	expect_str(root, "stages/1/history/1/ended", "unwound");
	ck_assert_ptr_null(at(root, "stages/1/history/1/exception"));
	ck_assert_ptr_null(at(root, "stages/0/ended")); /* open, no finished call */
	ck_assert_ptr_null(at(root, "stages/0/exceptions"));
	json_decref(root);
}
END_TEST

/* No GPU: no GPU key anywhere. */
/* The GPU footprint's keys and an out-of-memory record, from a copy as cuda/footprint.c keeps it. */
START_TEST(gpu_footprint_and_oom)
{
	static struct ms_gpu_footprint fp;
	fill_state();
	memset(&fp, 0, sizeof fp);
	fp.nvml = MS_NVML_OK;
	fp.peak = 9000;
	fp.dev[1] = (struct ms_fp_device){ .total = 100000, .free = 20000, .free_min = 10000, .footprint = 8000,
					   .footprint_peak = 9000, .counted_at_peak = 4096, .have_mem = 1, .have_fp = 1 };
	struct ms_fp_stage *train = &fp.stage[0];
	train->peak = 9000;
	train->total[1] = 100000;
	train->free_min[1] = 10000;
	train->footprint_peak[1] = 9000;
	train->have_mem = train->have_fp = 1u << 1;
	fp.noom = 1;
	fp.oom[0] = (struct ms_fp_oom){ .time = 3.0, .device = 1, .result = 2, .stage = 0, .asked = 50000,
					.free = 10000, .total = 100000, .footprint = 9000, .counted = 4096,
					.have_mem = 1, .have_fp = 1, .went_on = 1, .others_known = 1, .failures = 2,
					.nopen = 1, .open = { 0 }, .open_added = { 2048 }, .nothers = 1,
					.others = { { 4242, 7777 } } };
	doc.footprint = &fp;
	json_t *root = written();
	expect_int(root, "metrics/train_mem_gpu_footprint_peak", 9000);
	expect_int(root, "metrics/process_mem_gpu_footprint_peak", 9000);
	ck_assert_ptr_null(at(root, "stages/0/gpu_footprint")); /* eval read nothing */
	expect_int(root, "stages/1/gpu_footprint/devices/0/device", 1);
	expect_int(root, "stages/1/gpu_footprint/devices/0/free_min", 10000);
	expect_int(root, "stages/1/gpu_footprint/devices/0/footprint", 9000);
	expect_str(root, "process/gpu_footprint/nvml", "ok");
	expect_int(root, "process/gpu_footprint/devices/0/counted_at_peak", 4096);
	expect_str(root, "gpu_oom/0/stage", "train");
	expect_int(root, "gpu_oom/0/asked", 50000);
	expect_int(root, "gpu_oom/0/open_stages/0/added", 2048);
	expect_int(root, "gpu_oom/0/others/0/pid", 4242);
	ck_assert(json_is_true(at(root, "gpu_oom/0/went_on")));
	expect_int(root, "gpu_oom_dropped", 0);
	json_decref(root);
}
END_TEST

START_TEST(cpu_only)
{
	fill_state();
	doc.gpu = 0;
	json_t *root = written();
	ck_assert(json_is_false(at(root, "gpu_used")));
	ck_assert_ptr_null(at(root, "metrics/train_mem_gpu_alloc_delta"));
	ck_assert_ptr_null(at(root, "stages/1/gpu"));
	ck_assert_ptr_null(at(root, "stages/1/history/0/gpu_alloc_delta"));
	ck_assert_ptr_null(at(root, "process/gpu"));
	ck_assert_ptr_null(at(root, "gpu_events"));
	json_decref(root);
}
END_TEST

/* Shared memory: the component in every stage and in process, with its segments named as
 * /proc/PID/maps names their objects; the flat key only in a process that maps some. */
START_TEST(shared_memory)
{
	fill_state();
	json_t *root = written();
	ck_assert_ptr_null(at(root, "metrics/process_mem_cpu_shared_peak"));
	expect_int(root, "stages/1/cpu/shared/peak", 0);
	ck_assert_int_eq(json_array_size(at(root, "process/shared/segments")), 0);
	json_decref(root);
	static const struct ms_shared_segment seg[] = {
		{ .kind = MS_SHARED_SHM, .major = 0, .minor = 0x1b, .ino = 3547, .mapped = 8192, .mapped_peak = 8192,
		  .resident = 4096, .peak = 8192, .name = "/dev/shm/torch_1_2_0" },
		{ .kind = MS_SHARED_ANONYMOUS, .major = 259, .minor = 1, .ino = 30 },
	};
	doc.shared_mappings = 3;
	doc.segments = seg;
	doc.nsegments = 2;
	doc.segments_dropped = 5;
	doc.peaks[MS_SHARED] = 8192;
	doc.live[MS_SHARED] = 4096;
	span(&st.stage[0].last, MS_SHARED, 0, 4096, 8192);
	root = written();
	expect_int(root, "metrics/process_mem_cpu_shared_peak", 8192);
	expect_int(root, "stages/1/cpu/shared/alloc_delta", 4096);
	expect_int(root, "stages/1/cpu/shared/peaked_delta", 4096);
	expect_int(root, "process/shared/live", 4096);
	expect_str(root, "process/shared/segments/0/kind", "shm");
	expect_str(root, "process/shared/segments/0/dev", "00:1b");
	expect_int(root, "process/shared/segments/0/ino", 3547);
	expect_str(root, "process/shared/segments/0/name", "/dev/shm/torch_1_2_0");
	expect_int(root, "process/shared/segments/0/peak", 8192);
	expect_str(root, "process/shared/segments/1/kind", "anonymous");
	expect_str(root, "process/shared/segments/1/dev", "103:01");
	ck_assert(json_is_null(at(root, "process/shared/segments/1/name")));
	expect_int(root, "process/shared/segments_dropped", 5);
	json_decref(root);
}
END_TEST

/* The memory cgroup: nothing without a reading; with one, a stage's usage as read and its kind of
 * peak, the process's group (with its boot and directory when known), the flat keys (the limit
 * only when there is one). */
START_TEST(memory_cgroup)
{
	fill_state();
	json_t *root = written();
	ck_assert_ptr_null(at(root, "metrics/process_mem_cgroup_peak"));
	ck_assert_ptr_null(at(root, "process/cgroup"));
	ck_assert_ptr_null(at(root, "stages/1/cgroup"));
	json_decref(root);
	struct ms_cgroup cg = { .version = 2,
				.per_reader = 1,
				.usage = 3 << 20,
				.peak = 9 << 20,
				.limit = 16 << 20,
				.oom_kills = 1,
				.oom_kills_first = 0,
				.dir = "/sys/fs/cgroup/job.slice",
				.boot_id = "0e4a6b1c-2d3f-4a5b-8c7d-9e0f1a2b3c4d",
				.dev = 29,
				.ino = 4294971234u };
	doc.cgroup = &cg;
	doc.peaks[MS_CGROUP] = 7 << 20;
	span(&st.stage[0].last, MS_CGROUP, 1 << 20, 3 << 20, 7 << 20);
	root = written();
	expect_int(root, "metrics/process_mem_cgroup_peak", 9 << 20);
	expect_int(root, "metrics/process_mem_cgroup_limit", 16 << 20);
	expect_int(root, "stages/1/cgroup/begin", 1 << 20);
	expect_int(root, "stages/1/cgroup/end", 3 << 20);
	expect_int(root, "stages/1/cgroup/peak", 7 << 20);
	expect_str(root, "stages/1/cgroup/peak_kind", "kernel");
	ck_assert_ptr_null(at(root, "stages/0/cgroup")); /* eval never read one */
	expect_int(root, "process/cgroup/version", 2);
	expect_str(root, "process/cgroup/path", "/sys/fs/cgroup/job.slice");
	expect_int(root, "process/cgroup/usage", 3 << 20);
	expect_int(root, "process/cgroup/peak", 9 << 20);
	expect_int(root, "process/cgroup/peak_read", 7 << 20);
	expect_int(root, "process/cgroup/limit", 16 << 20);
	expect_int(root, "process/cgroup/oom_kills", 1);
	expect_int(root, "process/cgroup/oom_kills_at_start", 0);
	expect_str(root, "process/cgroup/boot_id", "0e4a6b1c-2d3f-4a5b-8c7d-9e0f1a2b3c4d");
	expect_int(root, "process/cgroup/dev", 29);
	expect_int(root, "process/cgroup/ino", 4294971234);
	json_decref(root);
	cg.limit = MS_CGROUP_NONE;
	cg.per_reader = 0;
	cg.boot_id[0] = '\0';
	cg.ino = 0;
	root = written();
	ck_assert_ptr_null(at(root, "metrics/process_mem_cgroup_limit"));
	ck_assert_ptr_null(at(root, "process/cgroup/limit"));
	ck_assert_ptr_null(at(root, "process/cgroup/boot_id")); /* not known: no key */
	ck_assert_ptr_null(at(root, "process/cgroup/ino"));
	expect_str(root, "stages/1/cgroup/peak_kind", "reads");
	json_decref(root);
}
END_TEST

static void unmatched(ms_doc_target_fn fn, void *ctx)
{
	fn(ctx, "train", "mod:Nope.train", NULL);
	fn(ctx, "data", "load_dat", "load_data"); /* a name near it exists */
}

static void sites_summary(struct ms_json *jw)
{
	ms_json_object(jw, "sites");
	ms_json_int(jw, "rate", 7);
	ms_json_end_object(jw);
}

/* A forked child's inherited memory, the timeline and what other layers add. */
START_TEST(child_timeline_and_layers)
{
	fill_state();
	proc.forked = proc.is_child = 1;
	doc.inherited[MS_CPU] = 800;
	st.before_init_set = 1;
	st.before_init[MS_CPU] = 1000;
	ms_timeline_append(&tl, MS_CPU, 0.5, 100);
	ms_timeline_append(&tl, MS_DEV0 + 1, 0.5, 200);
	tl.events[0] = (struct ms_timeline_event){ .t = 0.5, .stage = 0, .begin = 1 };
	tl.nevents = 1;
	doc.timeline = &tl;
	doc.each_unmatched = unmatched;
	doc.sites_summary = sites_summary;
	json_t *root = written();
	expect_int(root, "metrics/inherited_mem_cpu", 800);
	expect_int(root, "metrics/before_init_mem_cpu", 200);
	expect_int(root, "process/inherited/cpu", 800);
	expect_str(root, "unmatched_targets/0/target", "mod:Nope.train");
	ck_assert_ptr_null(at(root, "unmatched_targets/0/did_you_mean"));
	expect_str(root, "unmatched_targets/1/did_you_mean", "load_data");
	expect_int(root, "sites/rate", 7);
	expect_str(root, "timeline/series/1/component", "gpu");
	expect_int(root, "timeline/series/1/device", 1);
	expect_int(root, "timeline/series/0/points/0/1", 100);
	expect_str(root, "timeline/events/0/stage", "train");
	json_decref(root);
}
END_TEST

/* Labelled calls: in the order they ended, skipping slots not yet published (or of another
 * generation), with GPU devices as the process used them. */
START_TEST(labelled_calls)
{
	static struct ms_labelled_call calls[3];
	fill_state();
	memset(calls, 0, sizeof calls);
	calls[0] = (struct ms_labelled_call){ .ready = 2, .stage = 0, .call = 1 };
	span(&calls[0].span, MS_CPU, 100, 200, 1200);
	span(&calls[0].span, MS_DEV0 + 1, 0, 0, 4096);
	strcpy(calls[0].label, "tests/t.py::test_a[1]");
	calls[1] = calls[0];
	calls[1].ready = 1; /* a slot being written (the previous generation's): skipped */
	calls[2] = calls[0];
	calls[2].call = 2;
	strcpy(calls[2].label, "b");
	doc.labelled = calls;
	doc.nlabelled = 3;
	doc.labelled_generation = 2;
	doc.labelled_dropped = 5;
	json_t *root = written();
	ck_assert_int_eq((int)json_array_size(at(root, "labelled_calls")), 2);
	expect_str(root, "labelled_calls/0/label", "tests/t.py::test_a[1]");
	expect_str(root, "labelled_calls/0/stage", "train");
	expect_int(root, "labelled_calls/0/cpu/alloc_delta", 100);
	expect_int(root, "labelled_calls/0/cpu/peaked_delta", 1000);
	expect_int(root, "labelled_calls/0/gpu/devices/0/device", 1);
	expect_int(root, "labelled_calls/0/gpu/devices/0/peaked_delta", 4096);
	expect_int(root, "labelled_calls/1/call", 2);
	expect_int(root, "labelled_calls_dropped", 5);
	json_decref(root);
	doc.nlabelled = 0;
	doc.labelled_dropped = 0;
	root = written();
	ck_assert_ptr_null(at(root, "labelled_calls")); /* none: the file as it was */
	json_decref(root);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("document");
	TCase *tc = tcase_create("layout");
	tcase_add_test(tc, identity_and_order);
	tcase_add_test(tc, stage_numbers);
	tcase_add_test(tc, calls_ended);
	tcase_add_test(tc, cpu_only);
	tcase_add_test(tc, gpu_footprint_and_oom);
	tcase_add_test(tc, shared_memory);
	tcase_add_test(tc, memory_cgroup);
	tcase_add_test(tc, child_timeline_and_layers);
	tcase_add_test(tc, labelled_calls);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
