/* Counters: exact balance, peak windows and process peaks, also under threads. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "suite.h"
#include "core/counters.h"

static void reset(void)
{
	ms_counters_clear();
}

START_TEST(add_and_free_balance)
{
	reset();
	ms_cpu_add(MS_MALLOC, 100);
	ms_cpu_add(MS_MMAP, 4096);
	ck_assert_int_eq(ms_live(MS_CPU), 4196);
	ms_cpu_add(MS_MALLOC, -100);
	ms_cpu_add(MS_MMAP, -4096);
	ck_assert_int_eq(ms_live(MS_CPU), 0);
	ck_assert_int_eq(ms_live(MS_MALLOC), 0);
}
END_TEST

START_TEST(window_keeps_the_peak_and_restarts_at_live)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	ms_cpu_add(MS_MALLOC, 1000);
	ms_cpu_add(MS_MALLOC, -700);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_CPU], 1000);
	ck_assert_int_eq(peaks[MS_MALLOC], 1000);
	ck_assert_int_eq(live[MS_CPU], 300);
	ms_cpu_add(MS_MALLOC, 50);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_CPU], 350);
	ms_counters_process_peaks(peaks);
	ck_assert_int_eq(peaks[MS_CPU], 1000);
}
END_TEST

START_TEST(gpu_devices_and_total)
{
	int64_t peaks[MS_NCOMP];
	reset();
	ms_gpu_add(1, 1 << 20);
	ms_gpu_add(0, 2 << 20);
	ms_gpu_add(1, -(1 << 20));
	ms_gpu_add(40, 5); /* out of range: total only */
	ck_assert(ms_gpu_used());
	ck_assert_uint_eq(ms_gpu_devices_used(), 3);
	ck_assert_int_eq(ms_live(MS_GPU), (2 << 20) + 5);
	ck_assert_int_eq(ms_live(MS_DEV0 + 1), 0);
	ms_counters_process_peaks(peaks);
	ck_assert_int_eq(peaks[MS_DEV0 + 1], 1 << 20);
	ck_assert_int_eq(peaks[MS_GPU], 3 << 20);
}
END_TEST

/* A cut writes only the components in use (the devices up to the highest used) and says how many;
 * callers pass uninitialised arrays and read no further.  A device first used in a window has its
 * peak in that window's cut. */
START_TEST(a_cut_covers_the_devices_in_use_and_says_how_many)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	memset(peaks, 0x5a, sizeof peaks);
	memset(live, 0x5a, sizeof live);
	ck_assert_int_eq(ms_counters_cut_window(peaks, live, 1), MS_DEV0);
	for (int c = MS_MMAP; c < MS_DEV0; c++) /* never moved: written as 0 */
		ck_assert(peaks[c] == 0 && live[c] == 0);
	ms_gpu_add(3, 7 << 20);
	ms_gpu_add(3, -(2 << 20));
	memset(peaks, 0x5a, sizeof peaks);
	memset(live, 0x5a, sizeof live);
	ck_assert_int_eq(ms_counters_cut_window(peaks, live, 1), MS_DEV0 + 4);
	ck_assert_int_eq(peaks[MS_DEV0 + 3], 7 << 20);
	ck_assert_int_eq(live[MS_DEV0 + 3], 5 << 20);
	ck_assert(peaks[MS_DEV0] == 0 && live[MS_DEV0 + 2] == 0); /* unused devices below the highest */
	ck_assert_int_eq(ms_counters_cut_window(peaks, live, 1), MS_DEV0 + 4);
	ck_assert_int_eq(peaks[MS_DEV0 + 3], 5 << 20); /* the new window starts at live */
}
END_TEST

/* Components that never moved are not exchanged at a cut; one that moves later (the RSS read, page-
 * locked memory) is cut from its first move on, with the peak it reached before the cut. */
START_TEST(a_component_first_moved_later_has_its_peak_in_the_cut)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	ms_counters_cut_window(peaks, live, 1);
	ck_assert(peaks[MS_RSS] == 0 && peaks[MS_PINNED] == 0);
	ms_counter_set(MS_RSS, 5000);
	ms_counter_set(MS_RSS, 3000);
	ms_gpu_side_add(MS_PINNED, 8192);
	ms_gpu_side_add(MS_PINNED, -4096);
	ck_assert(ms_counters_moved() & (1u << MS_RSS));
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_RSS], 5000);
	ck_assert_int_eq(live[MS_RSS], 3000);
	ck_assert_int_eq(peaks[MS_PINNED], 8192);
	ck_assert_int_eq(live[MS_PINNED], 4096);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_RSS], 3000); /* the new window starts at live */
}
END_TEST

static int64_t gate_hi_value(void);

/* A cut with no stage open after it: the new window starts at the process peak, so adds below it
 * leave the gate alone (no slow path), the process peak stays exact, and the next cut with a stage
 * open after it starts an exact window again. */
START_TEST(a_window_no_stage_reads_starts_at_the_process_peak)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	ms_cpu_add(MS_MALLOC, 1000);
	ms_cpu_add(MS_MALLOC, -700);
	ms_counters_cut_window(peaks, live, 0);
	ck_assert_int_eq(peaks[MS_CPU], 1000);
	ck_assert_int_eq(live[MS_CPU], 300);
	ck_assert_int_eq(gate_hi_value(), 1000);
	ms_cpu_add(MS_MALLOC, 400); /* 700: below the process peak, the gate does not move */
	ck_assert_int_eq(gate_hi_value(), 1000);
	ms_counters_process_peaks(peaks);
	ck_assert_int_eq(peaks[MS_CPU], 1000);
	ck_assert_int_eq(peaks[MS_MALLOC], 1000);
	ms_counters_cut_window(peaks, live, 1); /* a stage begins: its window is exact */
	ck_assert_int_eq(live[MS_CPU], 700);
	ck_assert_int_eq(gate_hi_value(), 700);
	ms_cpu_add(MS_MALLOC, 100);
	ms_cpu_add(MS_MALLOC, -300);
	ms_counters_cut_window(peaks, live, 0);
	ck_assert_int_eq(peaks[MS_CPU], 800);
	ck_assert_int_eq(peaks[MS_MALLOC], 800);
	ms_cpu_add(MS_MALLOC, 900); /* 1400: a new process peak */
	ms_counters_process_peaks(peaks);
	ck_assert_int_eq(peaks[MS_CPU], 1400);
}
END_TEST

/* The components that are read (RSS) or mapped (mmap, reservations): a cut exchanges their window
 * only after they moved, and a window no stage reads still starts at their live value, so a later
 * stage's window of them is exact; the mmap parts a cut read are taken again while no mapping
 * changed. */
START_TEST(a_read_component_is_cut_once_it_moved)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	ms_counter_set(MS_RSS, 100);
	ms_counter_set(MS_RSS, 10);
	ms_counters_cut_window(peaks, live, 0); /* no stage after it */
	ck_assert_int_eq(peaks[MS_RSS], 100);
	ck_assert_uint_ne(ms_counters_last_cut() & (1u << MS_RSS), 0);
	ms_counters_cut_window(peaks, live, 1); /* untouched: its live value, not the process peak */
	ck_assert_int_eq(peaks[MS_RSS], 10);
	ck_assert_int_eq(live[MS_RSS], 10);
	ck_assert_uint_eq(ms_counters_last_cut() & (1u << MS_RSS), 0);
	ms_counter_set(MS_RSS, 20);
	ms_counter_set(MS_RSS, 15);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_RSS], 20);
	ck_assert_int_eq(live[MS_RSS], 15);
	ms_counters_process_peaks(peaks);
	ck_assert_int_eq(peaks[MS_RSS], 100);
	ms_cpu_add(MS_MMAP, 8192);
	ms_cpu_add(MS_MALLOC, 100);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(live[MS_MMAP], 8192);
	ck_assert_int_eq(live[MS_MALLOC], 100);
	ms_cpu_add(MS_MALLOC, 50); /* no mapping changed: the parts of the last cut */
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(live[MS_MMAP], 8192);
	ck_assert_int_eq(live[MS_MALLOC], 150);
	ck_assert_int_eq(live[MS_CPU], 8342);
	ms_cpu_add(MS_MMAP, -4096);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_MMAP], 8192);
	ck_assert_int_eq(live[MS_MMAP], 4096);
	ck_assert_int_eq(live[MS_MALLOC], 150);
}
END_TEST

static int64_t gate_hi_value(void)
{
	return (int64_t)((__atomic_load_n(&ms_cpu.gate_hi, __ATOMIC_RELAXED) & MS_CPU_VALUE_MASK) - MS_CPU_BIAS);
}

/* A new high of the current epoch sets the gate to the new peak itself (the next add up to it stays
 * on the fast path), or to the timeline's high when that is lower. */
START_TEST(a_new_high_moves_the_gate_to_it)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	ms_cpu_add(MS_MALLOC, 1000);
	ms_cpu_add(MS_MALLOC, -1000);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(gate_hi_value(), 0);
	ms_cpu_add(MS_MALLOC, 300);
	ck_assert_int_eq(gate_hi_value(), 300);
	ms_cpu_add(MS_MALLOC, -300);
	ms_cpu_add(MS_MALLOC, 200);
	ck_assert_int_eq(gate_hi_value(), 300);
	ms_watch_set(MS_CPU, INT64_MIN, 400);
	ms_cpu_add(MS_MALLOC, 150); /* 350: a new high under the watch */
	ck_assert_int_eq(gate_hi_value(), 350);
	ms_cpu_add(MS_MALLOC, 100); /* 450: past the watch, which stays the gate */
	ck_assert_int_eq(gate_hi_value(), 400);
	ms_watch_set(MS_CPU, INT64_MIN, INT64_MAX);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_CPU], 450);
	ck_assert_int_eq(peaks[MS_MALLOC], 450);
}
END_TEST

START_TEST(malloc_peak_seen_after_mmap_shrinks)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	ms_cpu_add(MS_MALLOC, 100);
	ms_cpu_add(MS_MMAP, 4096);
	ms_cpu_add(MS_MALLOC, -50);
	ms_cpu_add(MS_MMAP, -4096);
	ms_cpu_add(MS_MALLOC, 60); /* malloc 110: a malloc high while the total is far below its own */
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_CPU], 4196);
	ck_assert_int_eq(peaks[MS_MALLOC], 110);
	ck_assert_int_eq(peaks[MS_MMAP], 4096);
	ck_assert_int_eq(live[MS_CPU], 110);
	ck_assert_int_eq(live[MS_MALLOC], 110);
	ck_assert_int_eq(live[MS_MMAP], 0);
}
END_TEST

/* Shared memory is part of cpu beside malloc, mmap and reservations, each exact in one consistent set. */
START_TEST(shared_rides_the_mmap_epoch_apart)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP], cpu, mal, mm, rs, sh;
	reset();
	ms_cpu_add(MS_MALLOC, 100);
	ms_cpu_add(MS_MMAP, 4096);
	ms_cpu_add(MS_RESERVE, 8192);
	ms_cpu_add(MS_SHARED, 3 * 4096);
	ms_cpu_live(&cpu, &mal, &mm, &rs, &sh);
	ck_assert_int_eq(cpu, 100 + 4096 + 8192 + 3 * 4096);
	ck_assert_int_eq(mal, 100);
	ck_assert_int_eq(mm, 4096);
	ck_assert_int_eq(rs, 8192);
	ck_assert_int_eq(sh, 3 * 4096);
	ck_assert_int_eq(ms_live(MS_SHARED), 3 * 4096);
	ck_assert(ms_counters_moved() & (1u << MS_SHARED));
	ms_cpu_add(MS_SHARED, -2 * 4096);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_SHARED], 3 * 4096);
	ck_assert_int_eq(live[MS_SHARED], 4096);
	ck_assert_int_eq(live[MS_MMAP], 4096);
	ck_assert_int_eq(live[MS_RESERVE], 8192);
	ck_assert_int_eq(peaks[MS_CPU], 100 + 4096 + 8192 + 3 * 4096);
}
END_TEST

START_TEST(epochs_wrap_and_the_triple_stays_exact)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	for (int i = 0; i < 70000; i++) { /* the 16-bit epoch wraps */
		ms_cpu_add(MS_MMAP, i % 2 ? -8192 : 8192);
		ms_cpu_add(MS_MALLOC, i % 3 ? 16 : -8);
	}
	ms_counters_cut_window(peaks, live, 1);
	int64_t malloc_live = 16 * (70000 - 23334) - 8 * 23334;
	ck_assert_int_eq(live[MS_MALLOC], malloc_live);
	ck_assert_int_eq(live[MS_MMAP], 0);
	ck_assert_int_eq(live[MS_CPU], malloc_live);
	ck_assert_int_eq(peaks[MS_MMAP], 8192);
	ck_assert_int_eq(peaks[MS_MALLOC], malloc_live + 8); /* the last step freed 8 */
	ck_assert_int_ge(peaks[MS_CPU], malloc_live + 8);
	ck_assert_int_le(peaks[MS_CPU], malloc_live + 8192 + 16);
	ck_assert_uint_eq(ms_cpu_ring_misses(), 0);
}
END_TEST

/* A thread stalled between its add and its compare while the mapping changed: its add still counts
 * against the mmap bytes of its own epoch. */
START_TEST(an_add_of_an_older_epoch_is_exact)
{
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	ms_cpu_add(MS_MALLOC, 1000);
	uint64_t stalled = __atomic_add_fetch(&ms_cpu.word, 500, __ATOMIC_RELAXED); /* its add ... */
	ms_cpu_add(MS_MMAP, 8192);                                                  /* ... a change ... */
	ck_assert_uint_gt(stalled, __atomic_load_n(&ms_cpu.gate_hi, __ATOMIC_RELAXED)); /* ... its compare */
	ms_cpu_slow(stalled);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(peaks[MS_MALLOC], 1500);
	ck_assert_int_eq(peaks[MS_CPU], 1500 + 8192);
	ck_assert_int_eq(live[MS_MALLOC], 1500);
}
END_TEST

static int64_t watched[8];
static int nwatched;

static void record_watch(enum ms_comp comp, int64_t now)
{
	if (comp == MS_CPU && nwatched < 8)
		watched[nwatched++] = now;
	ms_watch_set(MS_CPU, now - 100, now + 100);
}

START_TEST(timeline_watch_sees_crossings_both_ways)
{
	reset();
	nwatched = 0;
	ms_watch_fn = record_watch;
	ms_watch_set(MS_CPU, -100, 100);
	ms_cpu_add(MS_MALLOC, 60);
	ms_cpu_add(MS_MALLOC, 60);   /* 120: up out of the window */
	ms_cpu_add(MS_MALLOC, -30);  /* 90: inside the new one */
	ms_cpu_add(MS_MALLOC, -80);  /* 10: down out of it */
	ms_cpu_add(MS_MMAP, 4096);   /* 4106 */
	ms_watch_fn = NULL;
	ms_watch_set(MS_CPU, INT64_MIN, INT64_MAX);
	ck_assert_int_eq(nwatched, 3);
	ck_assert_int_eq(watched[0], 120);
	ck_assert_int_eq(watched[1], 10);
	ck_assert_int_eq(watched[2], 4106);
}
END_TEST

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	int64_t held[64] = { 0 };
	for (int i = 0; i < 200000; i++) {
		int slot = (int)(rand_r(&seed) % 64);
		if (held[slot]) {
			ms_cpu_add(MS_MALLOC, -held[slot]);
			held[slot] = 0;
		} else {
			held[slot] = 16 + rand_r(&seed) % 4096;
			ms_cpu_add(MS_MALLOC, held[slot]);
		}
	}
	for (int s = 0; s < 64; s++)
		ms_cpu_add(MS_MALLOC, -held[s]);
	return NULL;
}

static int stop_mapping;

/* Mapping changes one at a time, as under the mapping lock. */
static void *mapper(void *arg)
{
	pthread_mutex_t *lock = arg;
	for (int i = 0; !__atomic_load_n(&stop_mapping, __ATOMIC_RELAXED); i++) {
		pthread_mutex_lock(lock);
		ms_cpu_add(MS_MMAP, i % 2 ? -65536 : 65536);
		pthread_mutex_unlock(lock);
	}
	return NULL;
}

/* Windows cut while threads allocate and map: live is one consistent triple and no window's peak is
 * below its live (an add racing a cut may land its peaks on either side of it). */
START_TEST(threads_mapping_and_windows_stay_consistent)
{
	pthread_t t[4], m;
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int64_t peaks[MS_NCOMP], live[MS_NCOMP];
	reset();
	stop_mapping = 0;
	pthread_create(&m, NULL, mapper, &lock);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
	for (int w = 0; w < 2000; w++) {
		ms_counters_cut_window(peaks, live, 1);
		ck_assert_int_ge(peaks[MS_CPU], live[MS_CPU]);
		ck_assert_int_ge(peaks[MS_MALLOC], live[MS_MALLOC]);
		ck_assert_int_eq(live[MS_CPU], live[MS_MALLOC] + live[MS_MMAP]);
		ck_assert(live[MS_MMAP] == 0 || live[MS_MMAP] == 65536);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&stop_mapping, 1, __ATOMIC_RELAXED);
	pthread_join(m, NULL);
	ms_counters_cut_window(peaks, live, 1);
	ck_assert_int_eq(live[MS_MALLOC], 0);
	ck_assert(live[MS_CPU] == live[MS_MMAP]);
	ck_assert_int_le(peaks[MS_MALLOC], 4 * 64 * 4112);
}
END_TEST

START_TEST(eight_threads_return_to_baseline)
{
	pthread_t t[8];
	int64_t peaks[MS_NCOMP];
	reset();
	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(ms_live(MS_CPU), 0);
	ck_assert_int_eq(ms_live(MS_MALLOC), 0);
	ms_counters_process_peaks(peaks);
	ck_assert_int_gt(peaks[MS_CPU], 0);
	ck_assert_int_le(peaks[MS_CPU], 8 * 64 * 4112);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("counters");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, add_and_free_balance);
	tcase_add_test(tc, window_keeps_the_peak_and_restarts_at_live);
	tcase_add_test(tc, gpu_devices_and_total);
	tcase_add_test(tc, a_cut_covers_the_devices_in_use_and_says_how_many);
	tcase_add_test(tc, eight_threads_return_to_baseline);
	tcase_add_test(tc, malloc_peak_seen_after_mmap_shrinks);
	tcase_add_test(tc, a_component_first_moved_later_has_its_peak_in_the_cut);
	tcase_add_test(tc, a_new_high_moves_the_gate_to_it);
	tcase_add_test(tc, a_window_no_stage_reads_starts_at_the_process_peak);
	tcase_add_test(tc, a_read_component_is_cut_once_it_moved);
	tcase_add_test(tc, shared_rides_the_mmap_epoch_apart);
	tcase_add_test(tc, epochs_wrap_and_the_triple_stays_exact);
	tcase_add_test(tc, an_add_of_an_older_epoch_is_exact);
	tcase_add_test(tc, timeline_watch_sees_crossings_both_ways);
	tcase_add_test(tc, threads_mapping_and_windows_stay_consistent);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
