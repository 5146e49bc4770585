/* --flame: the sites merged by common prefix from the outermost frame, drawn with widths in
 * proportion to bytes, labels that say which frame, the stage and process it chose. */
#include "util.h"
#include "svg.h"
#include "base/base.h"
#include "model/sites.h"
#include "plot/plot.h"

#include <math.h>
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

/* The box whose title starts with PREFIX (the first in document order). */
static struct t_box titled(const struct t_svg *s, const char *prefix)
{
	for (size_t i = 0; i < s->nboxes; i++)
		if (s->boxes[i].title && !strncmp(s->boxes[i].title, prefix, strlen(prefix)))
			return s->boxes[i];
	ck_abort_msg("no box titled \"%s...\"", prefix);
	return s->boxes[0];
}

static void has_title(const struct t_svg *s, const char *title)
{
	for (size_t i = 0; i < s->ntitles; i++)
		if (!strcmp(s->titles[i], title))
			return;
	for (size_t i = 0; i < s->ntitles && i < 8; i++)
		fprintf(stderr, "  title: %s\n", s->titles[i]);
	ck_abort_msg("no tooltip \"%s\"", title);
}

/* memshim-format ARGS...: its stdout (exit 0). */
static char *run_ok(char **args)
{
	char *out, *err;
	ck_assert_int_eq(t_run(args, &out, &err), 0);
	ck_assert_str_eq(err, "");
	free(err);
	return out;
}

/* The SVG is written as text: <text> elements, not cairo's glyph outlines; a <title> tooltip on
 * every frame with its name, bytes and share of the stage's need, the shares --sites prints. */
START_TEST(test_svg_text_and_tooltips)
{
	char *args[] = { "in/sites-added.json", NULL }, *path = flame("added.svg", args);
	char *sites[] = { "memshim-format", "--sites", "--stage", "train", "in/sites-added.json", NULL };
	char *table = run_ok(sites), *text = t_read(path, NULL);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	ck_assert_msg(!s.has_glyphs && !strstr(text, "<symbol") && !strstr(text, "<path"),
		      "text drawn as glyph outlines");
	ck_assert_uint_gt(s.ntext_elements, 10);
	ck_assert_uint_lt(strlen(text), 20000); /* cairo's outlines: 157 KB */
	ck_assert_uint_gt(s.nboxes, 20);
	ck_assert_uint_eq(s.ntitles, s.nboxes);
	for (size_t i = 0; i < s.nboxes; i++)
		ck_assert_ptr_nonnull(s.boxes[i].title);
	has_text(&s, "<module> (/home/u/train.py:70) · 45.0 MB", 1); /* markup in names stays text */
	/* site 1 of --sites: 30MB, 71.4% of the need */
	ck_assert_ptr_nonnull(strstr(table, "  1   30MB  71.4%       60  forward (/home/u/model.py:12)"));
	has_title(&s, "forward (/home/u/model.py:12)\n30.0 MB, 71.4% of the stage's need (42.0 MB)");
	has_title(&s, "c10::alloc_cpu(unsigned long)+0x1f (libc10.so)\n30.0 MB, 71.4% of the stage's need "
		  "(42.0 MB)");
	t_svg_free(&s);
	free(table), free(text), free(path);
}
END_TEST

/* The title, the base bar and --sites agree: the base bar is the sum of the list shown (the
 * closing entry's stacks included), the title names those bytes as --sites does, the need the
 * shares are of, and how much of it is exact or sampled. */
START_TEST(test_title_and_base_agree)
{
	char *args[] = { "in/sites-added.json", NULL }, *path = flame("added.svg", args);
	char *sites[] = { "memshim-format", "--sites", "--stage", "train", "in/sites-added.json", NULL };
	char *table = run_ok(sites);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	/* --sites: 47MB (47.5 MiB) in 5 sites and 7 other stacks, shares of 42MB; 40MB exact, 7MB sampled */
	ck_assert_ptr_nonnull(strstr(table, "added by the stage, live at its peak: 47MB in 5 sites and 7 "
				     "other stacks; shares are of its need, 42MB (alloc_delta + peaked_delta)"));
	ck_assert_ptr_nonnull(strstr(table, "40MB exact (blocks counted at their size), 7MB sampled"));
	has_text(&s, "added by the stage, live at its peak: 47.5 MB in 5 sites and 7 other stacks; shares "
		 "are of its need, 42.0 MB (alloc_delta + peaked_delta)", 1);
	has_text(&s, "40.0 MB exact (84.2%, blocks counted at their size), 7.50 MB sampled (15.8%, "
		 "estimated)", 1);
	has_text(&s, "all · 47.5 MB", 1);
	struct t_box root = titled(&s, "all: every stack listed\n"), row[16];
	ck_assert_str_eq(root.title, "all: every stack listed\n47.5 MB, 113.1% of the stage's need (42.0 MB)");
	/* the row above the base: every stack has frames, so its boxes fill the base */
	size_t n = t_svg_row(&s, root.y0 - (root.y1 - root.y0 + 1), row, 16);
	double filled = 0, px_per_mib = (root.x1 - root.x0 + 1) / 47.5;
	for (size_t i = 0; i < n; i++)
		filled += row[i].x1 - row[i].x0 + 1;
	ck_assert_msg(filled > root.x1 - root.x0 + 1 - 0.05 && filled < root.x1 - root.x0 + 1 + 0.05,
		      "the row above the base fills %.2f of its %.2f px", filled, root.x1 - root.x0 + 1);
	struct t_box other = titled(&s, "(7 other stacks)\n");
	ck_assert_str_eq(other.title, "(7 other stacks)\n1.50 MB, 3.6% of the stage's need (42.0 MB)");
	ck_assert(fabs(other.x1 - other.x0 - (1.5 * px_per_mib - 1)) < 0.05);
	ck_assert(fabs(other.y0 - row[0].y0) < 0.5); /* a box of its own on the base */
	t_svg_free(&s);
	free(table), free(path);
}
END_TEST

/* An older file: its list is everything live at the peak, the shares are of the peak, and how
 * much is exact is not said; the GPU's is all exact. */
START_TEST(test_title_older_file_and_gpu)
{
	char *a1[] = { "in/sites.json", NULL }, *p1 = flame("old.svg", a1);
	char *a2[] = { "--gpu", "in/sites-added.json", NULL }, *p2 = flame("gpu.svg", a2);
	struct t_svg s;
	t_svg_load_ok(p1, &s);
	has_text(&s, "everything live at the peak (an older file: it does not tell what the stage "
		 "added): 106 MB in 12 sites; shares are of the peak, 192 MB", 1);
	has_text(&s, "how much of it is exact is not said (an older file)", 1);
	has_title(&s, "alloc_a (fixture.py:12)\n60.0 MB, 31.2% of the stage's peak (192 MB)");
	t_svg_free(&s);
	t_svg_load_ok(p2, &s);
	has_text(&s, "added by the stage, live at its peak: 512 MB in 1 site; shares are of its need, "
		 "768 MB (alloc_delta + peaked_delta)", 1);
	has_text(&s, "all of it exact: every block counted at its size", 1);
	t_svg_free(&s);
	free(p1), free(p2);
}
END_TEST

/* Names that are markup stay text, in the labels and the tooltips. */
START_TEST(test_svg_markup_in_names)
{
	char in[4200], *text = t_read("in/sites.json", NULL), *at = strstr(text, "alloc_a (fixture.py:12)");
	char *evil;
	ck_assert_ptr_nonnull(at);
	ck_assert_int_ge(asprintf(&evil, "%.*s</text><b a=\\\"x\\\">&amp;</b>%s", (int)(at - text), text,
				  at + strlen("alloc_a (fixture.py:12)")), 0);
	snprintf(in, sizeof in, "%s/evil.json", dir);
	t_write(in, evil, strlen(evil));
	char *args[] = { in, NULL }, *path = flame("evil.svg", args);
	struct t_svg s;
	t_svg_load_ok(path, &s);
	has_text(&s, "</text><b a=\"x\">&amp;</b> · 60.0 MB", 1);
	has_title(&s, "</text><b a=\"x\">&amp;</b>\n60.0 MB, 31.2% of the stage's peak (192 MB)");
	t_svg_free(&s);
	free(text), free(evil), free(path);
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

/* The SVG written as text fails as cairo's did: one message, exit 2, the partial file removed. */
START_TEST(test_svg_full_disk)
{
	char *link = t_draw_to_full_disk("--flame", dir, "full.svg", "in/sites-added.json");
	if (!link)
		return;
	ck_assert_int_ne(access(link, F_OK), 0);
	free(link);
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

/* The flame graph's bytes are cut, not rounded, so they read as --sites's whole MB with decimals. */
START_TEST(test_bytes_cut)
{
	static const struct { double v; const char *s; } c[] = {
		{ 155.6 * MIB, "155 MB" }, { 47.5 * MIB, "47.5 MB" }, { 9.999 * MIB, "9.99 MB" },
		{ 1.5 * 1024 * MIB, "1.50 GB" }, { 1023.9 * MIB, "0.99 GB" }, { 512, "512 B" },
		{ 0.3 * MIB, "307 KB" }, { 0, "0 B" }, { 999.99, "999 B" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char *s = mf_fmt_bytes_cut(c[i].v);
		ck_assert_msg(!strcmp(s, c[i].s), "%.3f bytes: \"%s\", want \"%s\"", c[i].v, s, c[i].s);
		free(s);
	}
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
	tcase_add_test(tc, test_svg_text_and_tooltips);
	tcase_add_test(tc, test_title_and_base_agree);
	tcase_add_test(tc, test_title_older_file_and_gpu);
	tcase_add_test(tc, test_svg_markup_in_names);
	tcase_add_test(tc, test_choice_of_stage_and_process);
	tcase_add_test(tc, test_png_and_size);
	tcase_add_test(tc, test_cannot_write);
	tcase_add_test(tc, test_svg_full_disk);
	tcase_add_test(tc, test_odd_sites);
	tcase_add_test(tc, test_bytes_cut);
	tcase_add_test(tc, test_tree_merges_prefixes);
	tcase_add_test(tc, test_tree_bounded);
	suite_add_tcase(s, tc);
	return s;
}
