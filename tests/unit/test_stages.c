/* The stage engine: nesting, overlap, repeats, recursion, implicit init, threads. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "suite.h"
#include "core/stages.h"

#define MiB (1 << 20)

/* The engine's state, read directly: only while no stage call runs. */
#define ms_st (*ms_stages_peek())

static void reset(void)
{
	ms_counters_clear();
	ms_stages_clear();
}

static int64_t alloc_delta(int id, int c)
{
	return ms_st.stage[id].last.end[c] - ms_st.stage[id].last.begin[c];
}

static int64_t peaked_delta(int id, int c)
{
	return ms_st.stage[id].last.peak[c] - ms_st.stage[id].last.end[c];
}

START_TEST(nested_stage_peaks_count_toward_parents)
{
	reset();
	int a = ms_stage_id("train"), b = ms_stage_id("eval");
	ck_assert_int_eq(ms_stage_enter(a, 0), 0);
	ms_cpu_add(MS_MALLOC, 100 * MiB);
	ms_stage_enter(b, 1);
	ms_cpu_add(MS_MALLOC, 50 * MiB);
	ms_cpu_add(MS_MALLOC, -50 * MiB);
	ms_stage_leave(b, 2);
	ms_cpu_add(MS_MALLOC, -100 * MiB);
	ms_stage_leave(a, 3);
	ck_assert_int_eq(alloc_delta(b, MS_CPU), 0);
	ck_assert_int_eq(peaked_delta(b, MS_CPU), 50 * MiB);
	ck_assert_int_eq(ms_st.stage[b].last.begin[MS_CPU], 100 * MiB);
	ck_assert_int_eq(alloc_delta(a, MS_CPU), 0);
	ck_assert_int_eq(peaked_delta(a, MS_CPU), 150 * MiB);
	ck_assert(ms_st.stage[a].last.runtime == 3.0);
	ck_assert_int_eq(ms_st.stage[a].first_order, 0);
	ck_assert_int_eq(ms_st.stage[b].first_order, 1);
}
END_TEST

START_TEST(overlapping_stages_keep_their_own_numbers)
{
	reset();
	int a = ms_stage_id("a"), b = ms_stage_id("b");
	ms_stage_enter(a, 0);
	ms_cpu_add(MS_MMAP, 10 * MiB);
	ms_stage_enter(b, 1);
	ms_cpu_add(MS_MMAP, 20 * MiB);
	ms_stage_leave(a, 2);
	ms_cpu_add(MS_MMAP, -30 * MiB);
	ms_stage_leave(b, 3);
	ck_assert_int_eq(alloc_delta(a, MS_CPU), 30 * MiB);
	ck_assert_int_eq(peaked_delta(a, MS_CPU), 0);
	ck_assert_int_eq(alloc_delta(b, MS_CPU), -10 * MiB);
	ck_assert_int_eq(peaked_delta(b, MS_CPU), 30 * MiB);
	ck_assert_int_eq(alloc_delta(b, MS_MMAP), -10 * MiB);
	ck_assert_int_eq(alloc_delta(b, MS_MALLOC), 0);
}
END_TEST

START_TEST(repeats_keep_last_call_history_and_max)
{
	reset();
	int s = ms_stage_id("step");
	for (int i = 1; i <= MS_HISTORY + 5; i++) {
		ms_stage_enter(s, i);
		ms_cpu_add(MS_MALLOC, (i == 7 ? 9 : 1) * MiB);
		ms_cpu_add(MS_MALLOC, -(i == 7 ? 9 : 1) * MiB);
		ms_stage_leave(s, i + 0.5);
	}
	const struct ms_stage *st = &ms_st.stage[s];
	ck_assert_uint_eq(st->calls, MS_HISTORY + 5);
	ck_assert_uint_eq(st->dropped, 5);
	ck_assert_int_eq(st->max_cpu_needed, 9 * MiB);
	ck_assert_uint_eq(st->max_cpu_call, 7);
	ck_assert_int_eq(st->history[6].cpu_peaked, 9 * MiB);
	ck_assert_int_eq(peaked_delta(s, MS_CPU), 1 * MiB);
	ck_assert(st->last.start == MS_HISTORY + 5);
}
END_TEST

/* While no stage is open the counters' window starts at the process peak (no slow path below it): a
 * high reached between calls counts toward the process peak only, and the next call starts exact. */
START_TEST(a_high_between_calls_is_in_no_call)
{
	int64_t peaks[MS_NCOMP];
	reset();
	int s = ms_stage_id("step"), outer = ms_stage_id("outer");
	ms_stage_enter(s, 0);
	ms_cpu_add(MS_MALLOC, 8 * MiB);
	ms_cpu_add(MS_MALLOC, -8 * MiB);
	ms_stage_leave(s, 1);
	ms_cpu_add(MS_MALLOC, 20 * MiB);
	ms_cpu_add(MS_MALLOC, -16 * MiB);
	ms_stage_enter(s, 2);
	ms_cpu_add(MS_MALLOC, 2 * MiB);
	ms_cpu_add(MS_MALLOC, -6 * MiB);
	ms_stage_leave(s, 3);
	ck_assert_int_eq(ms_st.stage[s].history[0].cpu_peaked, 8 * MiB);
	ck_assert_int_eq(ms_st.stage[s].history[1].cpu_alloc, -4 * MiB);
	ck_assert_int_eq(ms_st.stage[s].history[1].cpu_peaked, 6 * MiB);
	ms_counters_process_peaks(peaks);
	ck_assert_int_eq(peaks[MS_CPU], 20 * MiB);
	ms_stage_enter(outer, 4); /* a stage still open after a call ends keeps its window exact */
	ms_stage_enter(s, 5);
	ms_stage_leave(s, 6);
	ms_cpu_add(MS_MALLOC, 3 * MiB);
	ms_cpu_add(MS_MALLOC, -3 * MiB);
	ms_stage_leave(outer, 7);
	ck_assert_int_eq(peaked_delta(outer, MS_CPU), 3 * MiB);
}
END_TEST

START_TEST(recursion_is_one_call_and_unmatched_end_fails)
{
	reset();
	int s = ms_stage_id("fib");
	ck_assert_int_eq(ms_stage_leave(s, 0), -1);
	ms_stage_enter(s, 0);
	ms_stage_enter(s, 1);
	ms_cpu_add(MS_MALLOC, MiB);
	ms_stage_leave(s, 2);
	ck_assert_uint_eq(ms_st.stage[s].calls, 0);
	ms_stage_leave(s, 3);
	ck_assert_uint_eq(ms_st.stage[s].calls, 1);
	ck_assert_int_eq(alloc_delta(s, MS_CPU), MiB);
	ck_assert_int_eq(ms_stage_leave(s, 4), -1);
	ck_assert_int_eq(ms_stage_id("bad name"), -1);
	ck_assert_int_eq(ms_stage_id(""), -1);
	ck_assert_int_eq(ms_stage_find("never_seen"), -1);
}
END_TEST

START_TEST(implicit_init_ends_at_first_stage)
{
	reset();
	ms_cpu_add(MS_MALLOC, 3 * MiB);
	ms_stages_begin_implicit_init(0);
	ms_cpu_add(MS_MALLOC, 2 * MiB);
	int t = ms_stage_id("train"), i = ms_stage_find("init");
	ms_stage_enter(t, 1);
	ck_assert_uint_eq(ms_st.stage[i].calls, 1);
	ck_assert(ms_st.stage[i].implicit);
	ck_assert_int_eq(alloc_delta(i, MS_CPU), 2 * MiB);
	ck_assert_int_eq(ms_st.before_init[MS_CPU], 3 * MiB);
	ms_stage_leave(t, 2);
	ck_assert_int_eq(ms_st.nopen, 0);
}
END_TEST

START_TEST(explicit_init_takes_over_the_implicit_one)
{
	reset();
	ms_stages_begin_implicit_init(0);
	ms_cpu_add(MS_MALLOC, 4 * MiB);
	int i = ms_stage_id("init");
	ms_stage_enter(i, 1);
	ms_cpu_add(MS_MALLOC, 1 * MiB);
	ms_stage_leave(i, 2);
	ck_assert_uint_eq(ms_st.stage[i].calls, 1);
	ck_assert(!ms_st.stage[i].implicit);
	ck_assert_int_eq(alloc_delta(i, MS_CPU), MiB);
	ck_assert_int_eq(ms_st.before_init[MS_CPU], 4 * MiB);
	ck_assert_int_eq(ms_st.nopen, 0);
}
END_TEST

START_TEST(close_all_marks_closed_at_exit)
{
	reset();
	int a = ms_stage_id("a"), b = ms_stage_id("b");
	ms_stage_enter(a, 0);
	ms_stage_enter(b, 0);
	ms_stages_close_all(5);
	ck_assert_int_eq(ms_st.nopen, 0);
	ck_assert(ms_st.stage[a].last.closed_at_exit);
	ck_assert(ms_st.stage[b].last.closed_at_exit);
	ck_assert_uint_eq(ms_st.stage[a].calls, 1);
}
END_TEST

/* How each call ended: the leave that closes the call says it (an exception caught inside a
 * recursion is not the call's end), counted per stage, kept per call, exception names interned. */
START_TEST(calls_keep_how_they_ended)
{
	reset();
	int s = ms_stage_id("epoch"), t = ms_stage_id("train");
	ms_stage_enter(t, 0);
	ms_stage_enter(s, 1);
	ck_assert_int_eq(ms_stage_leave_ended(s, 2, MS_END_RAISED, "KeyboardInterrupt", NULL, NULL), 1);
	ms_stage_enter(s, 3); /* recursion: the inner call raises, the outer one returns */
	ms_stage_enter(s, 4);
	ck_assert_int_eq(ms_stage_leave_ended(s, 5, MS_END_RAISED, "ValueError", NULL, NULL), 0);
	ms_stage_leave(s, 6);
	ms_stage_enter(s, 7);
	ms_stage_leave_ended(s, 8, MS_END_UNWOUND, NULL, NULL, NULL);
	ms_stage_enter(s, 9);
	struct ms_span closed;
	ms_stage_leave_ended(s, 10, MS_END_RAISED, "KeyboardInterrupt", &closed, NULL);
	ck_assert_int_eq(closed.ended, MS_END_RAISED);
	ms_stage_enter(s, 11);
	ms_stage_leave_ended(s, 12, MS_END_JUMPED, NULL, NULL, NULL);
	ms_stage_enter(s, 13);
	ms_stages_close_all(14);
	const struct ms_stage *e = &ms_st.stage[s];
	ck_assert_int_eq(e->calls, 6);
	ck_assert_int_eq(e->ended[MS_END_RETURNED], 1);
	ck_assert_int_eq(e->ended[MS_END_RAISED], 2);
	ck_assert_int_eq(e->ended[MS_END_UNWOUND], 1);
	ck_assert_int_eq(e->ended[MS_END_JUMPED], 1);
	ck_assert_int_eq(e->ended[MS_END_AT_EXIT], 1);
	const int want[] = { MS_END_RAISED, MS_END_RETURNED, MS_END_UNWOUND, MS_END_RAISED, MS_END_JUMPED, MS_END_AT_EXIT };
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(e->history[i].ended, want[i]);
	/* one name, interned once: ValueError ended no call */
	ck_assert_int_eq(ms_st.nexc, 1);
	ck_assert_str_eq(ms_st.exc_names[0], "KeyboardInterrupt");
	ck_assert_int_eq(e->history[0].exception, 1);
	ck_assert_int_eq(e->history[3].exception, 1);
	ck_assert_int_eq(e->history[2].exception, 0);
	ck_assert_uint_eq(e->exceptions, 1);
	ck_assert_int_eq(e->last.ended, MS_END_AT_EXIT);
	ck_assert_int_eq(ms_st.stage[t].last.ended, MS_END_AT_EXIT);
	ck_assert_str_eq(ms_end_name(MS_END_AT_EXIT), "open_at_exit");
}
END_TEST

/* A name from the API may be anything: kept as printable ASCII, cut whole. */
START_TEST(exception_names_are_printable_and_cut)
{
	reset();
	int s = ms_stage_id("s");
	char longname[100];
	memset(longname, 'E', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	longname[3] = '\n';
	longname[4] = (char)0xc3;
	ms_stage_enter(s, 0);
	ms_stage_leave_ended(s, 1, MS_END_RAISED, longname, NULL, NULL);
	ck_assert_int_eq((int)strlen(ms_st.exc_names[0]), MS_EXC_NAME_MAX - 1);
	ck_assert_int_eq(ms_st.exc_names[0][3], '?');
	ck_assert_int_eq(ms_st.exc_names[0][4], '?');
	for (int i = 0; i < MS_EXC_NAMES + 3; i++) { /* past the table: the call has no name */
		char name[16];
		snprintf(name, sizeof name, "E%d", i);
		ms_stage_enter(s, 2 + i);
		ms_stage_leave_ended(s, 2.5 + i, MS_END_RAISED, name, NULL, NULL);
	}
	ck_assert_int_eq(ms_st.nexc, MS_EXC_NAMES);
	ck_assert_int_eq(ms_st.stage[s].last.exception, 0);
	ck_assert_int_eq(ms_st.stage[s].last.ended, MS_END_RAISED);
}
END_TEST

START_TEST(gpu_failures_go_to_open_stages_and_events)
{
	reset();
	int a = ms_stage_id("a"), b = ms_stage_id("b");
	ms_stage_enter(a, 0);
	ms_stage_enter(b, 0);
	ms_stages_note_gpu_failure(1, 1 << 30, 2, 0.5);
	ms_stage_leave(b, 1);
	ms_stage_leave(a, 1);
	ck_assert_uint_eq(ms_st.stage[a].last.gpu_failed_allocs, 1);
	ck_assert_uint_eq(ms_st.stage[b].last.gpu_failed_allocs, 1);
	ck_assert_uint_eq(ms_st.ngpu_events, 1);
	ck_assert_int_eq(ms_st.gpu_events[0].stage, b);
	ck_assert_int_eq(ms_st.gpu_events[0].device, 1);
}
END_TEST

START_TEST(child_reset_starts_from_live_memory)
{
	reset();
	int a = ms_stage_id("a");
	ms_stage_enter(a, 0);
	ms_cpu_add(MS_MALLOC, 8 * MiB);
	ms_stages_reset_for_child(0);
	ms_cpu_add(MS_MALLOC, MiB);
	ms_stage_leave(a, 1);
	ck_assert_uint_eq(ms_st.stage[a].calls, 1);
	ck_assert_int_eq(alloc_delta(a, MS_CPU), MiB);
	ck_assert_int_eq(ms_st.stage[a].last.begin[MS_CPU], 8 * MiB);
}
END_TEST

/* Calls made before any device is used copy the host components alone; a device first used inside
 * a later call has its numbers in that call, and the earlier calls' device entries stay 0. */
START_TEST(a_device_first_used_in_a_later_call_is_counted_there)
{
	reset();
	int a = ms_stage_id("step");
	ms_stage_enter(a, 0);
	ms_cpu_add(MS_MALLOC, 3 * MiB);
	ms_stage_leave(a, 1);
	ck_assert_int_eq(ms_st.stage[a].last.peak[MS_DEV0 + 1], 0);
	ck_assert_int_eq(ms_st.stage[a].last.end[MS_CPU], 3 * MiB);
	ms_stage_enter(a, 2);
	ms_gpu_add(1, 8 * MiB);
	ms_gpu_add(1, -6 * MiB);
	ms_stage_leave(a, 3);
	ck_assert_int_eq(alloc_delta(a, MS_DEV0 + 1), 2 * MiB);
	ck_assert_int_eq(peaked_delta(a, MS_DEV0 + 1), 6 * MiB);
	ck_assert_int_eq(alloc_delta(a, MS_GPU), 2 * MiB);
	ms_stage_enter(a, 4);
	ms_gpu_add(1, 1 * MiB);
	ms_stage_leave(a, 5);
	ck_assert_int_eq(ms_st.stage[a].last.begin[MS_DEV0 + 1], 2 * MiB);
	ck_assert_int_eq(ms_st.stage[a].last.peak[MS_DEV0 + 1], 3 * MiB);
	ck_assert_int_eq(ms_st.stage[a].last.end[MS_CPU], 3 * MiB);
}
END_TEST

/* What the observer's followers copy (cuda/): the open calls the observer heard begin, each with
 * its begins and device count at its begin, and one stage's latest call, open or closed. */
START_TEST(calls_copy_follows_the_engine)
{
	struct ms_stage_call open[MS_MAX_STAGES], latest;
	reset();
	ms_stages_begin_implicit_init(0);
	int init = ms_stage_find("init"), a = ms_stage_id("a"), b = ms_stage_id("b"), q = ms_stage_id("q");
	ck_assert_int_eq(ms_stages_calls(open, init, &latest), 0); /* the implicit init: never heard */
	ck_assert(latest.open && latest.unheard);
	ms_gpu_add(0, 3 * MiB);
	ms_stage_enter(a, 1);
	ms_gpu_add(0, 2 * MiB);
	ms_stage_enter(b, 2);
	ms_stage_enter(a, 3); /* a recursion: the same call */
	ck_assert_int_eq(ms_stages_calls(open, a, &latest), 2);
	ck_assert(open[0].id == a && open[0].open && !open[0].unheard && open[0].begins == 1);
	ck_assert_int_eq(open[0].dev_begin[0], 3 * MiB);
	ck_assert(open[1].id == b && open[1].begins == 1);
	ck_assert_int_eq(open[1].dev_begin[0], 5 * MiB);
	ck_assert(latest.id == a && latest.open && latest.begins == 1);
	ms_stage_leave(a, 4);
	ms_stage_leave(a, 5);
	ck_assert_int_eq(ms_stages_calls(open, a, &latest), 1);
	ck_assert(open[0].id == b && latest.id == a && !latest.open && latest.begins == 1);
	ck_assert_int_eq(latest.dev_begin[0], 3 * MiB);
	ms_stage_enter(a, 6);
	ck_assert_int_eq(ms_stages_calls(NULL, a, &latest), 0);
	ck_assert(latest.open && latest.begins == 2);
	ck_assert_int_eq(latest.dev_begin[0], 5 * MiB);
	for (int i = 0; i < MS_QUIET_AFTER + 1; i++) { /* then a quiet call: no observer hears it */
		ms_stage_enter(q, 7 + i * 0.0001);
		ms_stage_leave(q, 7 + i * 0.0001);
	}
	ms_stage_enter(q, 7 + (MS_QUIET_AFTER + 1) * 0.0001);
	ck_assert_int_eq(ms_stages_calls(open, q, &latest), 2);
	ck_assert(latest.open && latest.unheard);
	ck_assert_int_eq(ms_stages_calls(NULL, MS_MAX_STAGES - 1, &latest), 0);
	ck_assert_int_eq(latest.id, -1);
}
END_TEST

START_TEST(snapshot_copy_reports_open_stage_so_far)
{
	static struct ms_stages copy;
	reset();
	int a = ms_stage_id("a");
	ms_stage_enter(a, 0);
	ms_cpu_add(MS_MALLOC, 6 * MiB);
	ms_cpu_add(MS_MALLOC, -2 * MiB);
	ms_stages_copy(&copy, 2);
	ck_assert_int_eq(copy.depth[a], 1);
	ck_assert_int_eq(copy.stage[a].cur.end[MS_CPU], 4 * MiB);
	ck_assert_int_eq(copy.stage[a].cur.peak[MS_CPU], 6 * MiB);
	ck_assert(copy.stage[a].cur.runtime == 2.0);
}
END_TEST

/* The live record's copy: what changed since the caller's previous copy, without history. */
START_TEST(brief_copy_takes_what_changed)
{
	static struct ms_stages copy;
	memset(&copy, 0, sizeof copy);
	reset();
	int a = ms_stage_id("a"), b = ms_stage_id("b");
	ck_assert(ms_stages_copy_brief(&copy, 0) == 3); /* new since the previous copy */
	ck_assert(ms_stages_copy_brief(&copy, 0) == 0); /* nothing changed */
	ms_stage_enter(a, 1);
	ms_cpu_add(MS_MALLOC, 6 * MiB);
	ms_stage_enter(b, 2);
	ck_assert(ms_stages_copy_brief(&copy, 0) == 3); /* both open */
	ck_assert_int_eq(copy.nopen, 2);
	ck_assert_int_eq(copy.stage[b].cur.begin[MS_CPU], 6 * MiB);
	ms_stage_leave(b, 3);
	ck_assert(ms_stages_copy_brief(&copy, 0) == 3); /* a open, b closed since the last copy */
	ck_assert_int_eq(copy.stage[b].calls, 1);
	ms_stage_leave(a, 4);
	ck_assert(ms_stages_copy_brief(&copy, 0) == 1); /* a closed; b unchanged */
	ck_assert_int_eq(copy.nopen, 0);
	ck_assert_int_eq(copy.stage[a].calls, 1);
	ck_assert_int_eq(copy.stage[a].last.peak[MS_CPU], 6 * MiB);
	ck_assert(ms_stages_copy_brief(&copy, 2) == 2); /* asked for */
	ms_cpu_add(MS_MALLOC, -6 * MiB);
}
END_TEST

static int thread_stage;

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++) {
		ms_stage_enter(thread_stage, i);
		ms_cpu_add(MS_MALLOC, 4096);
		ms_cpu_add(MS_MALLOC, -4096);
		ms_stage_leave(thread_stage, i);
	}
	return NULL;
}

START_TEST(threads_entering_one_stage_stay_consistent)
{
	reset();
	thread_stage = ms_stage_id("shared");
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	const struct ms_stage *s = &ms_st.stage[thread_stage];
	ck_assert_int_eq(ms_st.depth[thread_stage], 0);
	ck_assert_int_eq(ms_st.nopen, 0);
	ck_assert_uint_ge(s->calls, 1); /* overlapping callers merge into one call */
	ck_assert_uint_le(s->calls, 80000);
	ck_assert_int_eq(ms_live(MS_CPU), 0);
	ck_assert_int_le(s->max_cpu_needed, 4 * 4096);
}
END_TEST

/* Past MS_QUIET_AFTER calls, a stage's calls that come quickly are quiet (no observer); a stage
 * MEMSHIM_SITES=exact:... names never is: call sites open their window at each of its calls. */
static int observed[2];
static int loud_id;

static void count_observed(int stage, int end)
{
	(void)end;
	observed[stage == loud_id]++;
}

START_TEST(exact_sites_stages_are_never_quiet)
{
	reset();
	ms_cfg.nsites_exact = 1;
	strcpy(ms_cfg.sites_exact[0], "tick");
	int tick = ms_stage_id("tick"), tock = ms_stage_id("tock");
	loud_id = tick;
	observed[0] = observed[1] = 0;
	ms_stage_observer = count_observed;
	for (int i = 0; i < 200; i++) {
		double now = i * 0.0001;
		ms_stage_enter(tick, now);
		ms_stage_leave(tick, now);
		ms_stage_enter(tock, now);
		ms_stage_leave(tock, now);
	}
	ms_stage_observer = NULL;
	ms_cfg.nsites_exact = 0;
	ck_assert_int_eq(observed[1], 400);
	ck_assert_msg(observed[0] < 400, "tock observed %d times", observed[0]);
}
END_TEST

/* A read component (RSS) left as it was between two stages' calls: the second call's window of it
 * starts at its live value, not at the first call's high. */
START_TEST(a_read_component_starts_each_call_at_its_value)
{
	reset();
	int a = ms_stage_id("a"), b = ms_stage_id("b");
	ms_counter_set(MS_RSS, 100 * MiB);
	ms_stage_enter(a, 0);
	ms_counter_set(MS_RSS, 10 * MiB);
	ms_stage_leave(a, 1);
	ms_stage_enter(b, 2);
	ms_counter_set(MS_RSS, 20 * MiB);
	ms_stage_leave(b, 3);
	ck_assert_int_eq(ms_st.stage[a].last.peak[MS_RSS], 100 * MiB);
	ck_assert_int_eq(ms_st.stage[b].last.begin[MS_RSS], 10 * MiB);
	ck_assert_int_eq(ms_st.stage[b].last.peak[MS_RSS], 20 * MiB);
	ck_assert_int_eq(ms_st.stage[b].last.end[MS_RSS], 20 * MiB);
}
END_TEST

/* A quiet call's boundaries read nothing (the components that are read keep their last reading)
 * and its counted numbers stay exact; a loud call reads at its begin and end, a recursive begin
 * and end (no boundary) at neither. */
static int refreshes;

static void count_refresh(enum ms_refresh_reason why)
{
	refreshes += why == MS_REFRESH_BOUNDARY;
}

START_TEST(quiet_calls_read_nothing)
{
	reset();
	int s = ms_stage_id("step");
	refreshes = 0;
	ms_refresh_fn = count_refresh;
	for (int i = 0; i < 200; i++) {
		double now = i * 0.0001;
		ms_stage_enter(s, now);
		ms_cpu_add(MS_MALLOC, (i + 1) * 4096);
		ms_cpu_add(MS_MALLOC, -4096);
		ms_stage_leave(s, now);
		ck_assert_int_eq(alloc_delta(s, MS_CPU), i * 4096);
		ck_assert_int_eq(peaked_delta(s, MS_CPU), 4096);
		ms_cpu_add(MS_MALLOC, -i * 4096);
	}
	/* the first MS_QUIET_AFTER calls are loud, then one in 10 ms (100 calls here) */
	ck_assert_int_ge(refreshes, 2 * MS_QUIET_AFTER + 2);
	ck_assert_int_le(refreshes, 2 * MS_QUIET_AFTER + 4);
	refreshes = 0;
	ms_stage_enter(s, 1.0);
	ms_stage_enter(s, 1.0);
	ms_stage_leave(s, 1.0);
	ms_stage_leave(s, 1.0);
	ms_refresh_fn = NULL;
	ck_assert_int_eq(refreshes, 2);
	ck_assert_uint_eq(ms_st.stage[s].calls, 201);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stages");
	TCase *tc = tcase_create("engine");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, nested_stage_peaks_count_toward_parents);
	tcase_add_test(tc, overlapping_stages_keep_their_own_numbers);
	tcase_add_test(tc, repeats_keep_last_call_history_and_max);
	tcase_add_test(tc, a_high_between_calls_is_in_no_call);
	tcase_add_test(tc, recursion_is_one_call_and_unmatched_end_fails);
	tcase_add_test(tc, implicit_init_ends_at_first_stage);
	tcase_add_test(tc, explicit_init_takes_over_the_implicit_one);
	tcase_add_test(tc, close_all_marks_closed_at_exit);
	tcase_add_test(tc, calls_keep_how_they_ended);
	tcase_add_test(tc, exception_names_are_printable_and_cut);
	tcase_add_test(tc, gpu_failures_go_to_open_stages_and_events);
	tcase_add_test(tc, child_reset_starts_from_live_memory);
	tcase_add_test(tc, snapshot_copy_reports_open_stage_so_far);
	tcase_add_test(tc, calls_copy_follows_the_engine);
	tcase_add_test(tc, a_device_first_used_in_a_later_call_is_counted_there);
	tcase_add_test(tc, brief_copy_takes_what_changed);
	tcase_add_test(tc, threads_entering_one_stage_stay_consistent);
	tcase_add_test(tc, exact_sites_stages_are_never_quiet);
	tcase_add_test(tc, quiet_calls_read_nothing);
	tcase_add_test(tc, a_read_component_starts_each_call_at_its_value);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
