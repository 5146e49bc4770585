/* The timeline buffer: bounded, ordered, and merging never loses a series' peak. */
#include <check.h>
#include <string.h>
#include "suite.h"
#include "core/timeline.h"

static struct ms_timeline tl;

static int64_t series_max(int comp)
{
	int64_t m = INT64_MIN;
	for (uint32_t i = 0; i < tl.npoints; i++)
		if (tl.points[i].comp == comp && tl.points[i].value > m)
			m = tl.points[i].value;
	return m;
}

START_TEST(a_million_points_keep_each_series_peak)
{
	memset(&tl, 0, sizeof tl);
	int64_t peak_cpu = 0, peak_gpu = 0;
	for (int i = 0; i < 1000000; i++) {
		int64_t cpu = (int64_t)(i % 977) * 4096 + (i == 612345 ? (1LL << 40) : 0);
		int64_t gpu = (((int64_t)i * 7919) % 10007) << 20;
		ms_timeline_append(&tl, MS_CPU, i * 1e-3, cpu);
		if (i % 3 == 0)
			ms_timeline_append(&tl, MS_DEV0 + 1, i * 1e-3, gpu);
		if (cpu > peak_cpu)
			peak_cpu = cpu;
		if (i % 3 == 0 && gpu > peak_gpu)
			peak_gpu = gpu;
	}
	ck_assert_uint_le(tl.npoints, MS_TIMELINE_POINTS);
	ck_assert_uint_ge(tl.npoints, MS_TIMELINE_POINTS / 4);
	ck_assert_uint_gt(tl.merges, 5);
	ck_assert_int_eq(series_max(MS_CPU), peak_cpu);
	ck_assert_int_eq(series_max(MS_DEV0 + 1), peak_gpu);
	double last[MS_NCOMP];
	for (int c = 0; c < MS_NCOMP; c++)
		last[c] = -1;
	for (uint32_t i = 0; i < tl.npoints; i++) {
		struct ms_timeline_point *p = &tl.points[i];
		ck_assert_msg(p->t >= last[p->comp], "series %d out of order at %u", p->comp, i);
		last[p->comp] = p->t;
	}
}
END_TEST

START_TEST(the_peak_point_keeps_its_time)
{
	memset(&tl, 0, sizeof tl);
	for (int i = 0; i < 3 * MS_TIMELINE_POINTS; i++)
		ms_timeline_append(&tl, MS_CPU, (double)i, i == 40001 ? 999 : 1);
	for (uint32_t i = 0; i < tl.npoints; i++)
		if (tl.points[i].value == 999)
			ck_assert(tl.points[i].t == 40001.0);
	ck_assert_int_eq(series_max(MS_CPU), 999);
}
END_TEST

START_TEST(recording_moves_by_a_mebibyte_or_one_percent)
{
	ms_timeline_clear();
	ms_counters_clear();
	ms_timeline_enable(1);
	for (int i = 0; i < 1000; i++)
		ms_cpu_add(MS_MALLOC, 4096); /* 4 MB in small steps: about 4 points */
	ck_assert_uint_ge(ms_timeline_peek()->npoints, 3);
	ck_assert_uint_le(ms_timeline_peek()->npoints, 4);
	ms_cpu_add(MS_MALLOC, 1000LL << 20);
	uint32_t n = ms_timeline_peek()->npoints;
	ms_cpu_add(MS_MALLOC, 5 << 20); /* under 1% of the 1 GB peak: no point */
	ck_assert_uint_eq(ms_timeline_peek()->npoints, n);
	ms_cpu_add(MS_MALLOC, -(20LL << 20));
	ck_assert_uint_eq(ms_timeline_peek()->npoints, n + 1);
	ms_timeline_boundary(0, 1, 2.0);
	ck_assert_uint_eq(ms_timeline_peek()->nevents, 1);
	ck_assert_uint_eq(ms_timeline_peek()->npoints, n + 2);
	ms_timeline_enable(0);
	ms_cpu_add(MS_MALLOC, 500LL << 20);
	ms_timeline_boundary(0, 0, 3.0);
	ck_assert_uint_eq(ms_timeline_peek()->npoints, n + 2);
}
END_TEST

static double fake_now;
static double fake_clock(void)
{
	return fake_now;
}

/* Alternating moves of SIZE, DT seconds apart: the points they added. */
static uint32_t swing(int64_t size, double dt, int moves)
{
	uint32_t before = ms_timeline_peek()->npoints;
	for (int i = 0; i < moves; i++) {
		fake_now += dt;
		ms_cpu_add(MS_MALLOC, i % 2 ? -size : size);
	}
	return ms_timeline_peek()->npoints - before;
}

/* Points faster than one per 1/4096 of the run so far widen the step (so the lock and the gates
 * are not hit at every allocation); slow ones narrow it back to max(1 MiB, 1% of the peak). */
START_TEST(points_that_come_too_fast_widen_the_step)
{
	ms_timeline_clear();
	ms_counters_clear();
	ms_timeline_set_clock(fake_clock);
	fake_now = 1.0;
	ms_timeline_enable(1);
	ck_assert_uint_eq(swing(256LL << 20, 1.0, 2), 2); /* a 256 MiB peak: a 2.56 MiB step, widened up to 32 MiB */
	uint32_t fast = swing(8LL << 20, 1e-6, 200);
	ck_assert_msg(fast >= 1 && fast <= 8, "%u points for 200 moves of 8 MiB a microsecond apart", fast);
	ck_assert_uint_eq(swing(64LL << 20, 1.0, 8), 8); /* past any window: each a point, each narrows */
	ck_assert_uint_eq(swing(4LL << 20, 1.0, 20), 20); /* back to the 2.56 MiB step */
	ms_timeline_set_clock(NULL);
	ms_timeline_enable(0);
}
END_TEST

/* A swing wider than any widened step, faster than the pace: its points span a band and live going
 * to and fro inside it costs none; quiet points narrow the band back, a far jump starts a new one. */
START_TEST(a_fast_swing_wider_than_the_step_settles_into_a_band)
{
	ms_timeline_clear();
	ms_counters_clear();
	ms_timeline_set_clock(fake_clock);
	fake_now = 1.0;
	ms_timeline_enable(1);
	ck_assert_uint_eq(swing(256LL << 20, 1.0, 2), 2); /* a 256 MiB peak: steps of 2.56 .. 64 MiB */
	uint32_t fast = swing(160LL << 20, 1e-6, 2000);
	ck_assert_msg(fast >= 1 && fast <= 4, "%u points for 2000 moves of 160 MiB a microsecond apart", fast);
	ck_assert_uint_eq(swing(400LL << 20, 1.0, 2), 2); /* far past the band: each starts a new one */
	ck_assert_uint_eq(swing(128LL << 20, 1.0, 20), 20); /* moves inside the old band seen again */
	ms_timeline_set_clock(NULL);
	ms_timeline_enable(0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timeline");
	TCase *tc = tcase_create("buffer");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_million_points_keep_each_series_peak);
	tcase_add_test(tc, the_peak_point_keeps_its_time);
	tcase_add_test(tc, recording_moves_by_a_mebibyte_or_one_percent);
	tcase_add_test(tc, points_that_come_too_fast_widen_the_step);
	tcase_add_test(tc, a_fast_swing_wider_than_the_step_settles_into_a_band);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
