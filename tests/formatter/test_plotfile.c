/* --plot end to end: the SVG is XML with a line per series and a label per stage, the PNG has the
 * asked size and is not blank, several files give several panels, odd input never fails. */
#include "util.h"
#include "svg.h"
#include "plot/plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *dir;

static void setup(void)
{
	dir = t_tmpdir();
	const char *in = getenv("MF_PLOT_IN");
	char path[4200];
	ck_assert_ptr_nonnull(realpath(in ? in : "tests/formatter/plot", path));
	ck_assert_int_eq(chdir(path), 0);
}

static void teardown(void)
{
	t_rmtree(dir);
	free(dir);
}

/* memshim-format --plot DIR/NAME [ARGS...]: exit status 0, nothing printed; returns the path. */
static char *plot(const char *name, char **args)
{
	return t_draw("--plot", dir, name, args);
}

static void has_text(const struct t_svg *s, const char *text)
{
	if (t_svg_text_count(s, text))
		return;
	for (size_t i = 0; i < s->ntexts; i++)
		fprintf(stderr, "  text: %s\n", s->texts[i]);
	ck_abort_msg("no text \"%s\" in the picture", text);
}

/* The memory line of DEVICE: exactly one long stroked path of its colour (cairo joins collinear
 * segments, so a flat stretch counts as one). */
static void has_line(const struct t_svg *s, int device, size_t points)
{
	struct mf_rgb c = mf_series_colour(device);
	ck_assert_uint_eq(t_svg_lines(s, c.r, c.g, c.b, points), 1);
}

START_TEST(test_svg_cpu)
{
	char *args[] = { "cpu.json", NULL }, *path = plot("cpu.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	/* every word is a <text> element, none a glyph outline */
	ck_assert_msg(!s.has_glyphs, "text drawn as glyph outlines");
	ck_assert_uint_gt(s.ntext_elements, 10);
	ck_assert_uint_eq(s.ntext_elements, s.ntexts);
	/* nothing is filled in the CPU line's blue (the area under it is grey), which read as
	 * the first stage's tint (init) where no stage runs */
	struct mf_rgb blue = mf_series_colour(-1);
	for (size_t i = 0; i < s.nboxes; i++)
		ck_assert_msg(!(fabs(s.boxes[i].r - blue.r) < 0.01 && fabs(s.boxes[i].g - blue.g) < 0.01 &&
				fabs(s.boxes[i].b - blue.b) < 0.01),
			      "a fill in the CPU line's colour");
	has_line(&s, -1, 10);
	const char *stages[] = { "init", "train", "eval", "test" };
	for (int i = 0; i < 4; i++)
		has_text(&s, stages[i]);
	has_text(&s, "memshim · /usr/bin/python3 train.py --epochs 2");
	has_text(&s, "pid 4242 · ran 7.50 s");
	has_text(&s, "train 260 MB (process peak)");
	has_text(&s, "eval 230 MB");
	has_text(&s, "100 MB");
	has_text(&s, "time since the process started (s)");
	t_svg_free(&s);
	free(path);
}
END_TEST

START_TEST(test_svg_gpus)
{
	char *args[] = { "gpu2.json", NULL }, *path = plot("gpu2.SVG", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	for (int d = -1; d < 2; d++)
		has_line(&s, d, 10);
	has_text(&s, "GPU 0 live");
	has_text(&s, "GPU 1 live");
	has_text(&s, "train 2.34 GB (process peak)");
	t_svg_free(&s);
	free(path);
}
END_TEST

static void png_check(const char *path, int w, int h)
{
	cairo_surface_t *img = cairo_image_surface_create_from_png(path);
	ck_assert_int_eq(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
	ck_assert_int_eq(cairo_image_surface_get_width(img), w);
	ck_assert_int_eq(cairo_image_surface_get_height(img), h);
	cairo_surface_flush(img);
	unsigned char *px = cairo_image_surface_get_data(img);
	int stride = cairo_image_surface_get_stride(img), inked = 0;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			inked += (*(uint32_t *)(px + y * stride + 4 * x) & 0xffffff) != 0xffffff;
	/* Lines, bands, text: a real picture inks a good share of its pixels, never all. */
	ck_assert_msg(inked > w * h / 50 && inked < w * h * 9 / 10, "%d of %d pixels inked", inked, w * h);
	cairo_surface_destroy(img);
}

START_TEST(test_png_default_size)
{
	char *args[] = { "cpu.json", NULL }, *path = plot("cpu.png", args);
	png_check(path, MF_PLOT_W, MF_PLOT_H0 + MF_PLOT_HP);
	free(path);
}
END_TEST

START_TEST(test_png_size)
{
	char *args[] = { "--size", "640x480", "snapshot.json", NULL }, *path = plot("s.png", args);
	png_check(path, 640, 480);
	free(path);
}
END_TEST

START_TEST(test_several_panels)
{
	char *args[] = { "rank1.json", "rank0.json", NULL }, *path = plot("ranks.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	has_text(&s, "memshim · 2 processes · /usr/bin/python3");
	has_text(&s, "pid 7000 · rank 0 of 2");
	has_text(&s, "pid 7001 · rank 1 of 2");
	has_text(&s, "time since the first process started (s)");
	ck_assert_uint_eq(t_svg_text_count(&s, "CPU live"), 2); /* a legend per panel */
	t_svg_free(&s);
	free(path);
	char *png[] = { "rank1.json", "rank0.json", NULL };
	path = plot("ranks.png", png);
	png_check(path, MF_PLOT_W, MF_PLOT_H0 + 2 * MF_PLOT_HP);
	free(path);
}
END_TEST

/* Issue 42: a run's processes stacked on one clock, the cgroup limit and the GPU total across. */
START_TEST(test_stacked)
{
	char *args[] = { "../golden/in/job-parent.json", "../golden/in/job-forked.json",
			 "../golden/in/job-spawned.json", NULL },
	     *path = plot("job.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	has_text(&s, "3 processes stacked · combined CPU peak 220MB at 2.00 s");
	has_text(&s, "2 processes stacked · combined GPU 0 peak 5000MB at 1.90 s");
	has_text(&s, "cgroup limit 400MB");
	has_text(&s, "GPU 0 total 8000MB");
	t_svg_free(&s);
	free(path);
}
END_TEST

START_TEST(test_snapshot_title)
{
	char *args[] = { "snapshot.json", NULL }, *path = plot("snap.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	has_text(&s, "SNAPSHOT (signal 11), incomplete");
	has_text(&s, "train (open)");
	has_text(&s, "process peak");
	t_svg_free(&s);
	free(path);
}
END_TEST

/* The process peak of the snapshot lies above train's last recorded peak: its label names the
 * stage open at that moment. */
START_TEST(test_process_peak_names_its_stage)
{
	char *args[] = { "snapshot.json", NULL }, *path = plot("peak.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	has_text(&s, "CPU process peak 400 MB in train");
	t_svg_free(&s);
	free(path);
}
END_TEST

/* Panels share one memory scale: a rank drawn next to a larger snapshot gets the same ticks. */
START_TEST(test_panels_share_the_memory_scale)
{
	char *args[] = { "rank0.json", "snapshot.json", NULL }, *path = plot("shared.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	/* the snapshot's 2.93 GB GPU peak sets both axes (alone, rank 0's 2.34 GB ends lower) */
	ck_assert_uint_eq(t_svg_text_count(&s, "3.5 GB"), 2);
	ck_assert_uint_eq(t_svg_text_count(&s, "0.5 GB"), 2);
	t_svg_free(&s);
	free(path);
}
END_TEST

/* The golden inputs have no timeline: bands and peaks from stages[], and it says so. */
START_TEST(test_no_timeline)
{
	char *args[] = { "../golden/in/seed.json", "../golden/in/nostages.json", NULL };
	char *path = plot("old.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	ck_assert_uint_eq(t_svg_text_count(&s, "no timeline recorded"), 2);
	t_svg_free(&s);
	free(path);
}
END_TEST

START_TEST(test_unwritable)
{
	char *out, *err, *target;
	ck_assert_int_ge(asprintf(&target, "%s/no/such/dir/x.png", dir), 0);
	char *argv[] = { "memshim-format", "--plot", target, "cpu.json", NULL };
	ck_assert_int_eq(t_run(argv, &out, &err), 2);
	char *want;
	ck_assert_int_ge(asprintf(&want, "memshim-format: %s: cannot write: No such file or directory\n", target), 0);
	ck_assert_str_eq(err, want);
	ck_assert_str_eq(out, "");
	free(out), free(err), free(want), free(target);
}
END_TEST

/* A write that fails midway (a full disk): one message, exit 2, the partial file removed. */
START_TEST(test_full_disk)
{
	free(t_draw_to_full_disk("--plot", dir, "full.png", "cpu.json"));
}
END_TEST

static void usage_error(char **argv, const char *want)
{
	char *out, *err;
	ck_assert_int_eq(t_run(argv, &out, &err), 2);
	ck_assert_msg(strstr(err, want) && !strchr(err, '\n')[1], "stderr: %s", err);
	free(out), free(err);
}

START_TEST(test_usage)
{
	char *ext[] = { "memshim-format", "--plot", "x.jpg", "cpu.json", NULL };
	usage_error(ext, "--plot wants a file name ending in .svg or .png: x.jpg");
	char *size[] = { "memshim-format", "--plot", "x.png", "--size", "10x10", "cpu.json", NULL };
	usage_error(size, "bad size (want WxH, each 200 to 16000): 10x10");
	char *alone[] = { "memshim-format", "--size", "800x600", "cpu.json", NULL };
	usage_error(alone, "--size only applies to --plot");
	char *merge[] = { "memshim-format", "--plot", "x.svg", "--merge", "cpu.json", NULL };
	usage_error(merge, "--plot does not combine with");
	ck_assert_int_ne(access("x.svg", F_OK), 0); /* nothing written on a usage error */
}
END_TEST

Suite *plotfile_suite(void)
{
	Suite *s = suite_create("plot-files");
	TCase *tc = tcase_create("plot-files");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_svg_cpu);
	tcase_add_test(tc, test_svg_gpus);
	tcase_add_test(tc, test_png_default_size);
	tcase_add_test(tc, test_png_size);
	tcase_add_test(tc, test_several_panels);
	tcase_add_test(tc, test_snapshot_title);
	tcase_add_test(tc, test_process_peak_names_its_stage);
	tcase_add_test(tc, test_panels_share_the_memory_scale);
	tcase_add_test(tc, test_no_timeline);
	tcase_add_test(tc, test_stacked);
	tcase_add_test(tc, test_unwritable);
	tcase_add_test(tc, test_full_disk);
	tcase_add_test(tc, test_usage);
	suite_add_tcase(s, tc);
	return s;
}
