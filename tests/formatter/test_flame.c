/* --flame: the sites merged by common prefix from the outermost frame, drawn with widths in
 * proportion to bytes, labels that say which frame, the stage and process it chose. */
#include "util.h"
#include "svg.h"
#include "plot/plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB 1048576.0

static char *dir;

static void setup(void)
{
	dir = t_tmpdir();
	ck_assert_int_eq(chdir(t_golden()), 0);
}

static void teardown(void)
{
	t_rmtree(dir);
	free(dir);
}

/* memshim-format --flame DIR/NAME ARGS...: exit 0, nothing printed; returns the picture's path. */
static char *flame(const char *name, char **args)
{
	return t_draw("--flame", dir, name, args);
}

static void has_text(const struct t_svg *s, const char *text, size_t times)
{
	size_t n = t_svg_text_count(s, text);
	if (n == times)
		return;
	for (size_t i = 0; i < s->ntexts; i++)
		fprintf(stderr, "  text: %s\n", s->texts[i]);
	ck_abort_msg("\"%s\" shown %zu times in the picture, expected %zu", text, n, times);
}

/* The widest box: the root ("all") in the bottom row. */
static struct t_box root_box(const struct t_svg *s)
{
	struct t_box best = { 0 };
	ck_assert_uint_gt(s->nboxes, 0);
	for (size_t i = 0; i < s->nboxes; i++)
		if (s->boxes[i].x1 - s->boxes[i].x0 > best.x1 - best.x0)
			best = s->boxes[i];
	return best;
}

/* Row K above the root: its boxes left to right must be as wide as MIB_EACH (in MiB) of TOTAL. */
static void row_widths(const struct t_svg *s, int k, const double *mib_each, size_t n, double total)
{
	struct t_box root = root_box(s), row[64];
	double row_h = root.y1 - root.y0 + 1, scale = (root.x1 - root.x0 + 1) / total;
	size_t got = t_svg_row(s, root.y0 - k * row_h, row, 64);
	ck_assert_msg(got >= n, "row %d: %zu boxes, expected at least %zu", k, got, n);
	for (size_t i = 0; i < n; i++) {
		double want = mib_each[i] * scale - 1, w = row[i].x1 - row[i].x0;
		ck_assert_msg(w > want - 0.05 && w < want + 0.05, "row %d box %zu: %.3f px wide, expected "
			      "%.3f (%.1f MiB of %.1f)", k, i, w, want, mib_each[i], total);
	}
}

/* train's CPU sites: 60 + 30 + 10 MiB from three functions and 6.5 MiB of small ones. */
START_TEST(test_widths_follow_bytes)
{
	char *args[] = { "in/sites.json", NULL }, *path = flame("train.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	/* row 1: __libc_start_call_main (60), <module> (40), main (fixture.py:63) (6.5) */
	row_widths(&s, 1, (const double[]){ 60, 40, 6.5 }, 3, 106.5);
	/* row 2: Py_RunMain (60), then under <module>: main:60 (30), main:62 (10), helpers */
	row_widths(&s, 2, (const double[]){ 60, 30, 10, 1.5, 1, 1 }, 6, 106.5);
	/* top of alloc_a's tower: seven frames above the root */
	row_widths(&s, 7, (const double[]){ 60 }, 1, 106.5);
	struct t_box root = root_box(&s), above[4];
	ck_assert_uint_eq(t_svg_row(&s, root.y0 - 8 * (root.y1 - root.y0 + 1), above, 4), 0);
	has_text(&s, "CPU call sites at the peak of train", 1);
	has_text(&s, "sampled every 512 KB on average, 213 samples at the peak", 1);
	has_text(&s, "alloc_a (fixture.py:12) · 60.0 MB", 1);
	has_text(&s, "alloc_b (fixture.py:18) · 30.0 MB", 1);
	has_text(&s, "main (fixture.py:60) · 60.0 MB", 1); /* the same frame under two callers */
	has_text(&s, "main (fixture.py:60) · 30.0 MB", 1);
	has_text(&s, "all · ", 1);
	ck_assert_msg(t_svg_text_count(&s, "…") > 0, "no label was shortened to fit");
	t_svg_free(&s);
	free(path);
}
END_TEST

START_TEST(test_gpu_sites)
{
	char *args[] = { "--gpu", "in/sites.json", NULL }, *path = flame("gpu.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	row_widths(&s, 1, (const double[]){ 1536, 512 }, 2, 2048);
	has_text(&s, "GPU call sites at the peak of train", 1);
	has_text(&s, "every allocation recorded, 4 allocations at the peak", 1);
	has_text(&s, "cuMemAlloc_v2 (libcuda.so.1) · 1.50 GB", 1);
	has_text(&s, "load_weights (model.py:20) · 512 MB", 1);
	t_svg_free(&s);
	free(path);
}
END_TEST

/* Without --stage, the stage with the largest peak, of the process that peaked highest there. */
START_TEST(test_choice_of_stage_and_process)
{
	char *a1[] = { "--stage", "init", "in/sites.json", NULL }, *p1 = flame("init.svg", a1);
	char *a2[] = { "in/sites-rank0.json", "in/sites-rank1.json", NULL }, *p2 = flame("r.svg", a2);
	struct t_svg s;
	t_svg_load_ok(p1, &s);
	has_text(&s, "CPU call sites at the peak of init", 1);
	row_widths(&s, 1, (const double[]){ 2 }, 1, 2);
	t_svg_free(&s);
	t_svg_load_ok(p2, &s);
	has_text(&s, "rank 1", 1);
	has_text(&s, "make_batch (data.py:31) · 150 MB", 1);
	row_widths(&s, 1, (const double[]){ 150, 10 }, 2, 160);
	t_svg_free(&s);
	free(p1), free(p2);
}
END_TEST

START_TEST(test_png_and_size)
{
	char *args[] = { "--size", "640x300", "in/sites.json", NULL }, *path = flame("f.png", args);
	size_t len;
	char *png = t_read(path, &len);
	ck_assert_ptr_nonnull(png);
	ck_assert_uint_gt(len, 24);
	ck_assert_int_eq(memcmp(png, "\x89PNG\r\n\x1a\n", 8), 0);
	const unsigned char *u = (const unsigned char *)png;
	ck_assert_uint_eq((unsigned)(u[16] << 24 | u[17] << 16 | u[18] << 8 | u[19]), 640);
	ck_assert_uint_eq((unsigned)(u[20] << 24 | u[21] << 16 | u[22] << 8 | u[23]), 300);
	free(png), free(path);
}
END_TEST

START_TEST(test_cannot_write)
{
	char *argv[] = { "memshim-format", "--flame", "/nonexistent-dir/f.svg", "in/sites.json", NULL };
	char *out, *err;
	ck_assert_int_eq(t_run(argv, &out, &err), 2);
	ck_assert_str_eq(out, "");
	ck_assert_str_eq(err, "memshim-format: /nonexistent-dir/f.svg: cannot write: No such file or "
		"directory\n");
	free(out), free(err);
}
END_TEST

/* Odd site lists still draw: entries that are not sites are left out, odd frames show as "?". */
START_TEST(test_odd_sites)
{
	char *args[] = { "in/odd/sites-odd.json", NULL }, *path = flame("odd.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	/* the sites: 9 MiB with four frames, 5 MiB without any, 5 MiB, 3 MiB, 0.5 MiB without frames */
	row_widths(&s, 1, (const double[]){ 9, 5, 3 }, 3, 22.5);
	has_text(&s, "CPU peak unknown", 1);
	t_svg_free(&s);
	free(path);
}
END_TEST

/* The tree itself: frames merge from the outermost one, children largest first. */
START_TEST(test_tree_merges_prefixes)
{
	json_error_t je;
	json_t *stage = json_loads("{\"peak_sites\": ["
		"{\"bytes\": 10, \"frames\": [\"a\", \"m\", \"r\"]},"
		"{\"bytes\": 30, \"frames\": [\"b\", \"m\", \"r\"]},"
		"{\"bytes\": 5, \"frames\": [\"c\", \"r\"]},"
		"{\"bytes\": 7, \"frames\": [\"a\", \"x\"]},"
		"{\"bytes\": 1, \"frames\": []}]}", 0, &je);
	ck_assert_ptr_nonnull(stage);
	struct mf_sites s;
	struct mf_fnode root;
	mf_sites_get(stage, 0, &s);
	ck_assert_uint_eq(s.n, 5);
	mf_flame_tree(&s, &root);
	ck_assert(root.bytes == 53);
	ck_assert_uint_eq(root.nkids, 2);         /* r and x; the frameless site only in the root */
	ck_assert_str_eq(root.kid[0].label, "r");
	ck_assert(root.kid[0].bytes == 45);
	ck_assert_str_eq(root.kid[0].kid[0].label, "m");
	ck_assert(root.kid[0].kid[0].bytes == 40);
	ck_assert_str_eq(root.kid[0].kid[0].kid[0].label, "b");
	ck_assert_str_eq(root.kid[0].kid[0].kid[1].label, "a");
	ck_assert_str_eq(root.kid[0].kid[1].label, "c");
	ck_assert_str_eq(root.kid[1].label, "x");
	ck_assert_int_eq(mf_flame_depth(&root), 4);
	mf_flame_free(&root);
	mf_sites_free(&s);
	json_decref(stage);
}
END_TEST

/* Past 2000 sites (the shim writes 50) the smaller ones share one box at the root. */
START_TEST(test_tree_bounded)
{
	json_t *list = json_array(), *stage = json_object();
	for (int i = 0; i < 2100; i++) {
		char name[32];
		snprintf(name, sizeof name, "f%d", i);
		json_array_append_new(list, json_pack("{s:i, s:[s]}", "bytes", 5000 - i, "frames", name));
	}
	json_object_set_new(stage, "peak_sites", list);
	struct mf_sites s;
	struct mf_fnode root;
	mf_sites_get(stage, 0, &s);
	mf_flame_tree(&s, &root);
	ck_assert_uint_eq(root.nkids, 2001);
	/* 100 sites of 3000 .. 2901 bytes: together wider than any one, so first */
	ck_assert_str_eq(root.kid[0].label, "(smaller sites)");
	ck_assert(root.kid[0].bytes == 100 * (3000 + 2901) / 2.0);
	ck_assert_str_eq(root.kid[1].label, "f0");
	ck_assert_str_eq(root.kid[2000].label, "f1999");
	mf_flame_free(&root);
	mf_sites_free(&s);
	json_decref(stage);
}
END_TEST

Suite *flame_suite(void)
{
	Suite *s = suite_create("flame");
	TCase *tc = tcase_create("flame");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_widths_follow_bytes);
	tcase_add_test(tc, test_gpu_sites);
	tcase_add_test(tc, test_choice_of_stage_and_process);
	tcase_add_test(tc, test_png_and_size);
	tcase_add_test(tc, test_cannot_write);
	tcase_add_test(tc, test_odd_sites);
	tcase_add_test(tc, test_tree_merges_prefixes);
	tcase_add_test(tc, test_tree_bounded);
	suite_add_tcase(s, tc);
	return s;
}
