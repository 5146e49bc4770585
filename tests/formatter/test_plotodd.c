/* --plot never fails on odd input: broken timelines, odd numbers, thousands of calls. */
#include "util.h"
#include "svg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD "{\"format\": \"memshim-metrics\", \"version\": 1, \"pid\": 77, \"metrics\": {}, "

/* Each is a whole metrics file; every one must draw, as SVG and as PNG. */
static const char *const odd[] = {
	HEAD "\"stages\": []}",
	HEAD "\"stages\": [{\"name\": \"a\"}], \"timeline\": \"no\"}",
	HEAD "\"stages\": [], \"timeline\": {\"series\": [], \"events\": []}}",
	HEAD "\"stages\": [], \"timeline\": {\"series\": [{\"component\": \"cpu\", \"points\": "
	     "[[1], \"x\", [null, 5], [2, -5], [1e308, 1e308], [0, 1], [-3, 2], [5, 5, 5]]}, "
	     "{\"component\": \"gpu\", \"device\": -1, \"points\": [[0, 1]]}, "
	     "{\"component\": \"gpu\", \"device\": 1e20, \"points\": [[0, 1]]}, "
	     "{\"component\": \"gpu\", \"device\": \"x\", \"points\": [[0, 1]]}, "
	     "{\"component\": 42}, {\"component\": \"cpu\", \"points\": {}}, 7]}}",
	HEAD "\"stages\": [{\"name\": \"s\", \"calls\": 1, \"start\": -5, \"runtime\": -2, "
	     "\"cpu\": {\"peak\": -1}, \"history\": 3, \"gpu\": {\"devices\": [7, {\"device\": 2, "
	     "\"peak\": 5}]}}], \"timeline\": {\"series\": [{\"component\": \"gpu\", \"device\": 2, "
	     "\"points\": [[0.5, 1048576]]}], \"events\": [{\"t\": 1, \"stage\": \"s\", \"kind\": \"end\"}, "
	     "{\"t\": 2, \"stage\": \"s\", \"kind\": \"begin\"}, {\"t\": \"x\", \"stage\": 5}, 9, "
	     "{\"t\": 3, \"stage\": \"s\", \"kind\": \"begin\"}, {\"t\": 1e300, \"stage\": \"\\n\", "
	     "\"kind\": \"begin\"}], \"events_dropped\": 5}}",
	HEAD "\"stages\": [{\"name\": \"x\", \"calls\": 1, \"start\": 1e300, \"runtime\": 1e300, "
	     "\"cpu\": {\"peak\": 1e300}}], \"start_time\": 5, \"end_time\": 1, \"elapsed\": -4, "
	     "\"complete\": false, \"argv\": [1, null, \"\\u00e9\\t\"], \"argv_truncated\": true, "
	     "\"process\": {\"cpu\": {\"peak\": \"x\", \"live\": -1}, \"gpu\": {\"devices\": [{}]}}}",
	HEAD "\"stages\": [{\"name\": \"t\", \"calls\": 1, \"start\": 0, \"runtime\": 1e-9, "
	     "\"cpu\": {\"peak\": 0}}], \"elapsed\": 1e-9, \"timeline\": {\"series\": [{\"component\": "
	     "\"cpu\", \"points\": [[0, 0]]}], \"events\": []}}",
};

static char *dir;

static void setup(void)
{
	dir = t_tmpdir();
}

static void teardown(void)
{
	t_rmtree(dir);
	free(dir);
}

static void draw(const char *in, const char *name)
{
	char out_path[4300], *out, *err;
	snprintf(out_path, sizeof out_path, "%s/%s", dir, name);
	char *argv[] = { "memshim-format", "--plot", out_path, "--size", "400x300", (char *)in, NULL };
	int rc = t_run(argv, &out, &err);
	ck_assert_msg(rc == 0 && !*err, "%s: exit %d: %s", name, rc, err);
	free(out), free(err);
}

START_TEST(test_odd_input_draws)
{
	char in[4300];
	snprintf(in, sizeof in, "%s/odd.json", dir);
	t_write(in, odd[_i], strlen(odd[_i]));
	draw(in, "odd.png");
	draw(in, "odd.svg");
	struct t_svg s;
	snprintf(in, sizeof in, "%s/odd.svg", dir);
	ck_assert_int_eq(t_svg_load(in, &s), 0);
	t_svg_free(&s);
}
END_TEST

/* A loop of 1500 steps, each a forward and a backward call, inside train. */
static char *many_calls(void)
{
	size_t len;
	char *text;
	FILE *m = open_memstream(&text, &len);
	fputs(HEAD "\"elapsed\": 5, \"stages\": [], \"timeline\": {\"series\": [{\"component\": \"cpu\", "
	      "\"points\": [", m);
	for (int i = 0; i < 3000; i++)
		fprintf(m, "%s[%g, %d]", i ? "," : "", 0.1 + i * 0.0015, 100000000 + (i % 2) * 8000000);
	fputs("]}], \"events\": [{\"t\": 0.05, \"stage\": \"train\", \"kind\": \"begin\"}", m);
	for (int i = 0; i < 1500; i++) {
		double t = 0.1 + i * 0.003;
		fprintf(m, ", {\"t\": %g, \"stage\": \"step\", \"kind\": \"begin\"}"
			", {\"t\": %g, \"stage\": \"forward\", \"kind\": \"begin\"}"
			", {\"t\": %g, \"stage\": \"forward\", \"kind\": \"end\"}"
			", {\"t\": %g, \"stage\": \"backward\", \"kind\": \"begin\"}"
			", {\"t\": %g, \"stage\": \"backward\", \"kind\": \"end\"}"
			", {\"t\": %g, \"stage\": \"step\", \"kind\": \"end\"}",
			t, t, t + 0.001, t + 0.001, t + 0.0025, t + 0.0028);
	}
	fputs(", {\"t\": 4.7, \"stage\": \"train\", \"kind\": \"end\"}]}}", m);
	fclose(m);
	return text;
}

/* Thousands of tiny calls become a few labelled bands, not clutter. */
START_TEST(test_many_calls_merge)
{
	char in[4300], *text = many_calls();
	snprintf(in, sizeof in, "%s/many.json", dir);
	t_write(in, text, strlen(text));
	free(text);
	draw(in, "many.svg");
	struct t_svg s;
	snprintf(in, sizeof in, "%s/many.svg", dir);
	ck_assert_int_eq(t_svg_load(in, &s), 0);
	ck_assert_uint_eq(t_svg_text_count(&s, "step ×1500"), 1);
	ck_assert_uint_eq(t_svg_text_count(&s, "forward + backward ×3000"), 1);
	ck_assert_uint_eq(t_svg_text_count(&s, "train"), 1);
	t_svg_free(&s);
}
END_TEST

Suite *plotodd_suite(void)
{
	Suite *s = suite_create("plot-odd");
	TCase *tc = tcase_create("plot-odd");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_odd_input_draws, 0, (int)(sizeof odd / sizeof odd[0]));
	tcase_add_test(tc, test_many_calls_merge);
	suite_add_tcase(s, tc);
	return s;
}
