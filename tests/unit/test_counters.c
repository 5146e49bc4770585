/* Counters: exact balance, peak windows and process peaks, also under threads. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "core/counters.h"

static void reset(void)
{
	memset(ms_counters, 0, sizeof ms_counters);
	ms_counters_reset_peaks();
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
	ms_counters_cut_window(peaks, live);
	ck_assert_int_eq(peaks[MS_CPU], 1000);
	ck_assert_int_eq(peaks[MS_MALLOC], 1000);
	ck_assert_int_eq(live[MS_CPU], 300);
	ms_cpu_add(MS_MALLOC, 50);
	ms_counters_cut_window(peaks, live);
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
	tcase_add_test(tc, eight_threads_return_to_baseline);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
