/* --plot's pure parts: ticks and units, decimation that keeps every extreme, band rows and merging,
 * and text shortening. */
#include "util.h"
#include "base/base.h"
#include "model/document.h"
#include "input/input.h"
#include "plot/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024.0 * 1024)

static void tick_is(const struct mf_ticks *t, double v, const char *want)
{
	char *s = mf_tick_label(t, v, 1);
	ck_assert_str_eq(s, want);
	free(s);
}

START_TEST(test_byte_ticks)
{
	struct mf_ticks t;
	mf_ticks_bytes(110 * MiB, &t);
	ck_assert_str_eq(t.uname, "MB");
	ck_assert(t.step == 20 && t.top == 140);
	tick_is(&t, 40, "40 MB");
	mf_ticks_bytes(1.5 * 1024 * MiB, &t);
	ck_assert_str_eq(t.uname, "GB");
	tick_is(&t, 0.5, "0.5 GB");
	ck_assert(t.top == 2);
	mf_ticks_bytes(300, &t);
	ck_assert_str_eq(t.uname, "B");
	ck_assert(t.step == 50 && t.top >= 330);
	mf_ticks_bytes(0, &t); /* nothing measured: still a sane axis */
	ck_assert(t.top > 0 && t.step > 0);
	mf_ticks_bytes(NAN, &t);
	ck_assert(t.top > 0 && t.step > 0);
	/* Every step is 1, 2 or 5 times a power of ten, with at most 8 intervals. */
	for (double v = 1; v < 1e15; v *= 1.37) {
		mf_ticks_bytes(v, &t);
		double m = t.step / pow(10, floor(log10(t.step)));
		ck_assert_msg(fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9, "%g", v);
		ck_assert(t.top / t.step <= 8.0001 && t.top * t.unit >= v);
	}
}
END_TEST

START_TEST(test_time_ticks)
{
	struct mf_ticks t;
	mf_ticks_time(7.26, &t);
	ck_assert_str_eq(t.uname, "s");
	ck_assert(t.step == 1 && t.top == 8);
	mf_ticks_time(0.004, &t);
	ck_assert(t.step == 0.0005 && t.decimals == 4);
	mf_ticks_time(3600, &t); /* long runs in minutes */
	ck_assert_str_eq(t.uname, "min");
	ck_assert(t.step == 10 && t.top == 60);
}
END_TEST

START_TEST(test_value_text)
{
	const struct {
		double v;
		const char *s;
	} c[] = {
		{ 0, "0 B" },
		{ 512, "512 B" },
		{ 1000, "0.98 KB" },
		{ 106 * MiB, "106 MB" },
		{ 45.6 * MiB, "45.6 MB" },
		{ 1.234 * 1024 * MiB, "1.23 GB" },
		{ -3 * MiB, "-3.00 MB" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char *s = mf_fmt_bytes(c[i].v);
		ck_assert_str_eq(s, c[i].s);
		free(s);
	}
	char *s = mf_fmt_secs(6.667);
	ck_assert_str_eq(s, "6.67 s");
	free(s);
	s = mf_fmt_secs(600);
	ck_assert_str_eq(s, "10.0 min");
	free(s);
}
END_TEST

/* A million points into 1000 pixel columns: at most four a column, and no extreme lost. */
START_TEST(test_decimate_keeps_extremes)
{
	size_t n = 1000000;
	struct mf_pt *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
	for (size_t i = 0; i < n; i++)
		in[i] = (struct mf_pt){ i * 1e-6, (double)((i * 7919) % 10007) };
	in[123457].v = 1e9, in[876543].v = -5;
	size_t m = mf_decimate(in, n, 1000, out);
	ck_assert_uint_le(m, 4 * 1000);
	double hi = -INFINITY, lo = INFINITY;
	for (size_t i = 0; i < m; i++) {
		hi = fmax(hi, out[i].v), lo = fmin(lo, out[i].v);
		ck_assert(i == 0 || out[i].t >= out[i - 1].t);
	}
	ck_assert(hi == 1e9 && lo == -5);
	ck_assert(out[0].t == 0 && out[m - 1].t == in[n - 1].t);
	free(in), free(out);
}
END_TEST

static struct mf_band band(const char *s, double t0, double t1)
{
	return (struct mf_band){ s, t0, t1, 0, 1, 0, NULL, 1 };
}

START_TEST(test_rows_follow_nesting)
{
	struct mf_band b[] = { band("test", 8, 9), band("train", 1, 7), band("eval", 3, 4),
			       band("init", 0, 1), band("eval", 7, 8),  band("inner", 3.2, 3.5) };
	int rows;
	mf_bands_rows(b, 6, &rows);
	ck_assert_int_eq(rows, 3);
	const char *want[] = { "init", "train", "eval", "test", "eval", "inner" };
	const int row[] = { 0, 0, 0, 0, 1, 2 };
	for (int i = 0; i < 6; i++) {
		ck_assert_str_eq(b[i].stage, want[i]);
		ck_assert_int_eq(b[i].row, row[i]);
	}
}
END_TEST

START_TEST(test_rows_capped)
{
	struct mf_band b[8];
	int rows;
	for (int i = 0; i < 8; i++) /* eight levels of nesting */
		b[i] = band("s", i, 20 - i);
	mf_bands_rows(b, 8, &rows);
	ck_assert_int_eq(rows, MF_PLOT_ROWS);
	ck_assert_int_eq(b[7].row, MF_PLOT_ROWS - 1);
}
END_TEST

START_TEST(test_merge_tiny_calls)
{
	size_t n = 3000;
	struct mf_band *b = malloc((n + 2) * sizeof *b);
	b[0] = band("epoch", 0, 10);
	b[1] = band("epoch", 10.01, 20); /* wide calls stay apart however close */
	for (size_t i = 0; i < n; i++)   /* forward and backward taking turns, 1 ms each */
		b[i + 2] = band(i % 2 ? "backward" : "forward", 20 + i * 1e-3, 20 + i * 1e-3 + 9e-4);
	int rows;
	mf_bands_rows(b, n + 2, &rows);
	size_t m = mf_bands_merge(b, n + 2, 1000.0 / 23, 3);
	ck_assert_uint_eq(m, 3);
	ck_assert_int_eq(b[2].calls, 3000);
	ck_assert_str_eq(b[2].stage, "forward");
	ck_assert_str_eq(b[2].other, "backward");
	ck_assert_int_eq(b[2].kinds, 2);
	free(b);
}
END_TEST

START_TEST(test_merge_one_stage)
{
	struct mf_band b[100];
	for (int i = 0; i < 100; i++)
		b[i] = band("step", i * 0.01, i * 0.01 + 0.005);
	size_t m = mf_bands_merge(b, 100, 100, 3); /* 1 px a call */
	ck_assert_uint_eq(m, 1);
	ck_assert_int_eq(b[0].calls, 100);
	ck_assert_ptr_null(b[0].other);
	ck_assert(b[0].t0 == 0 && fabs(b[0].t1 - 0.995) < 1e-9);
}
END_TEST

/* The implicit init ends at the instant the Trainer's init begins (the engine's hand-over): one
 * "init" bar, the Trainer's alone, as the dump's init is (before it: untinted, not an init of the
 * whole start); calls of a stage back to back (a clock reading apart) stay two, and so does a stage
 * that begins again later. */
START_TEST(test_handover_is_one_bar)
{
	static const char doc[] =
		"{\"format\": \"memshim-metrics\", \"version\": 1, \"pid\": 7, \"metrics\": {}, \"elapsed\": 10.0,"
		" \"stages\": [{\"name\": \"init\"}, {\"name\": \"step\"}],"
		" \"timeline\": {\"series\": [], \"events_dropped\": 0, \"events\": ["
		"{\"t\": 0.0, \"stage\": \"init\", \"kind\": \"begin\"}, {\"t\": 2.5, \"stage\": \"init\", \"kind\": \"end\"},"
		"{\"t\": 2.5, \"stage\": \"init\", \"kind\": \"begin\"}, {\"t\": 3.0, \"stage\": \"init\", \"kind\": \"end\"},"
		"{\"t\": 3.0001, \"stage\": \"step\", \"kind\": \"begin\"}, {\"t\": 4.0, \"stage\": \"step\", \"kind\": \"end\"},"
		"{\"t\": 4.000001, \"stage\": \"step\", \"kind\": \"begin\"}, {\"t\": 5.0, \"stage\": \"step\", \"kind\": \"end\"},"
		"{\"t\": 8.0, \"stage\": \"init\", \"kind\": \"begin\"}, {\"t\": 9.0, \"stage\": \"init\", \"kind\": \"end\"}]}}";
	json_error_t e;
	json_t *root = json_loads(doc, 0, &e);
	ck_assert_msg(root != NULL, "%s", e.text);
	struct mf_file f;
	ck_assert_int_eq(mf_load_json("handover.json", root, &f, stderr), 0);
	struct mf_panel p;
	mf_panel_build(&f, 0, &p);
	int inits = 0, steps = 0;
	for (size_t i = 0; i < p.nb; i++) {
		if (!strcmp(p.b[i].stage, "init")) {
			inits++;
			ck_assert(inits == 1 ? p.b[i].t0 == 2.5 && p.b[i].t1 == 3.0 : p.b[i].t0 == 8.0);
			ck_assert_int_eq(p.b[i].calls, 1);
		}
		steps += !strcmp(p.b[i].stage, "step");
	}
	ck_assert_int_eq(inits, 2);
	ck_assert_int_eq(steps, 2);
	mf_panel_free(&p);
	mf_file_free(&f);
}
END_TEST

START_TEST(test_shorten)
{
	char *s = mf_shorten("/usr/bin/python3 -m torch.distributed.run train.py", 20);
	ck_assert_str_eq(s, "/usr/bin/pyt…rain.py");
	free(s);
	s = mf_shorten("ééééééééé", 4); /* whole code points only */
	ck_assert_str_eq(s, "éé…é");
	free(s);
	s = mf_shorten("short", 20);
	ck_assert_str_eq(s, "short");
	free(s);
	s = mf_clean_text("a\nb\tc");
	ck_assert_str_eq(s, "a?b?c");
	free(s);
}
END_TEST

Suite *plot_suite(void)
{
	Suite *s = suite_create("plot");
	TCase *tc = tcase_create("parts");
	tcase_add_test(tc, test_byte_ticks);
	tcase_add_test(tc, test_time_ticks);
	tcase_add_test(tc, test_value_text);
	tcase_add_test(tc, test_decimate_keeps_extremes);
	tcase_add_test(tc, test_rows_follow_nesting);
	tcase_add_test(tc, test_rows_capped);
	tcase_add_test(tc, test_merge_tiny_calls);
	tcase_add_test(tc, test_merge_one_stage);
	tcase_add_test(tc, test_handover_is_one_bar);
	tcase_add_test(tc, test_shorten);
	suite_add_tcase(s, tc);
	return s;
}
