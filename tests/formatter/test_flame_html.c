/* --flame OUT.html: one page with every stage's sites, no network; its data is the sites merged by
 * prefix with every stage's bytes, and its script (run in node against a stand-in DOM by
 * flame_page.js, where node is installed) draws, searches, zooms, shows tooltips and switches stage. */
#include "util.h"
#include "model/document.h"
#include "model/sites.h"
#include "input/input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The JSON inside the page's data script. */
static json_t *page_data(const char *path)
{
	static const char open[] = "<script type=\"application/json\" id=\"data\">";
	char *page = t_read(path, NULL), *at, *end;
	ck_assert_ptr_nonnull(page);
	ck_assert(!strncmp(page, "<!DOCTYPE html>", 15));
	ck_assert_ptr_null(strstr(page, "http://"));
	ck_assert_ptr_null(strstr(page, " src="));
	ck_assert_ptr_nonnull(at = strstr(page, open));
	at += sizeof open - 1;
	ck_assert_ptr_nonnull(end = strstr(at, "</script>"));
	json_error_t jerr;
	json_t *d = json_loadb(at, (size_t)(end - at), 0, &jerr);
	ck_assert_msg(d != NULL, "%s: %s", path, jerr.text);
	free(page);
	return d;
}

/* Every node's callees hold no more than it; returns the node's bytes. */
static double check_node(json_t *n)
{
	double kids = 0;
	size_t i;
	json_t *c;
	ck_assert(json_is_string(json_object_get(n, "n")));
	json_array_foreach(json_object_get(n, "c"), i, c)
		kids += check_node(c);
	double v = json_number_value(json_object_get(n, "v"));
	ck_assert_msg(kids <= v * (1 + 1e-12), "%s: callees %.0f over its %.0f bytes",
		      json_string_value(json_object_get(n, "n")), kids, v);
	return v;
}

static double sites_total(const char *stage, int gpu)
{
	char path[4200];
	struct mf_file f;
	size_t i;
	json_t *st;
	double total = 0;
	snprintf(path, sizeof path, "%s/in/sites.json", t_golden());
	ck_assert_int_eq(mf_load(path, &f, stderr), 0);
	json_array_foreach(f.stages, i, st)
		if (!strcmp(json_string_value(json_object_get(st, "name")), stage)) {
			struct mf_sites s;
			mf_sites_get(st, gpu, &s);
			total = s.total;
			mf_sites_free(&s);
		}
	mf_file_free(&f);
	return total;
}

START_TEST(test_page_data)
{
	char *dir = t_tmpdir(), in[4200];
	snprintf(in, sizeof in, "%s/in/sites.json", t_golden());
	char *args[] = { in, NULL };
	char *path = t_draw("--flame", dir, "sites.html", args);
	json_t *d = page_data(path), *st;
	json_t *stages = json_object_get(d, "stages");
	size_t i, pick = (size_t)json_integer_value(json_object_get(d, "pick"));
	ck_assert_uint_eq(json_array_size(stages), 2); /* init and train have CPU sites */
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(stages, pick), "name")),
			 "pid 4242 · train · CPU"); /* the largest peak, as the picture draws */
	json_array_foreach(stages, i, st) {
		const char *name = json_string_value(json_object_get(st, "name"));
		json_t *tree = json_object_get(st, "tree");
		ck_assert_str_eq(json_string_value(json_object_get(tree, "n")), "all");
		double want = sites_total(strstr(name, "· train ·") ? "train" : "init", 0);
		ck_assert_msg(check_node(tree) == want, "%s: %.0f bytes, expected %.0f", name,
			      check_node(tree), want);
		ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(st, "about")), "CPU peak"));
	}
	json_decref(d);
	const char *node = access("/usr/bin/node", X_OK) == 0 ? "/usr/bin/node" : getenv("MF_NODE");
	if (node) {
		char *cmd;
		ck_assert_int_ge(asprintf(&cmd, "'%s' '%s/../flame_page.js' '%s' '{\"alloc_a\":\"60.0 MB\","
					  "\"ALLOC_B\":\"30.0 MB\"}' >&2", node, t_golden(), path), 0);
		ck_assert_msg(system(cmd) == 0, "the page's script failed in node: %s", path);
		free(cmd);
	} else {
		fputs("test_flame_html: no node: the page's script was not run\n", stderr);
	}
	free(path);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* A stage's entry of the page: its title says what --sites says of the list (its bytes are the
 * root's), what the shares are of and how much is exact; the closing entry is a frame of its own. */
START_TEST(test_page_agrees_with_sites)
{
	char *dir = t_tmpdir(), in[4200];
	snprintf(in, sizeof in, "%s/in/sites-added.json", t_golden());
	char *args[] = { in, NULL }, *path = t_draw("--flame", dir, "added.html", args);
	json_t *d = page_data(path), *st = json_array_get(json_object_get(d, "stages"), 0), *kid;
	json_t *tree = json_object_get(st, "tree");
	size_t i, others = 0;
	ck_assert_str_eq(json_string_value(json_object_get(st, "name")), "pid 4242 · train · CPU");
	ck_assert_str_eq(json_string_value(json_object_get(st, "about")), "CPU peak 136MB; sampled every "
		"512 KB on average, 95 samples at the peak; sites taken at the peak\nadded by the stage, live "
		"at its peak: 47.5 MB in 5 sites and 7 other stacks; shares are of its need, 42.0 MB "
		"(alloc_delta + peaked_delta)\n40.0 MB exact (84.2%, blocks counted at their size), 7.50 MB "
		"sampled (15.8%, estimated)");
	ck_assert_str_eq(json_string_value(json_object_get(st, "of")), "of the stage's need (42.0 MB)");
	ck_assert(json_number_value(json_object_get(st, "base")) == 42 * 1048576.0);
	ck_assert(check_node(tree) == 47.5 * 1048576.0);
	json_array_foreach(json_object_get(tree, "c"), i, kid)
		if (!strcmp(json_string_value(json_object_get(kid, "n")), "(7 other stacks)"))
			others++, ck_assert(json_number_value(json_object_get(kid, "v")) == 1.5 * 1048576.0);
	ck_assert_uint_eq(others, 1);
	json_decref(d);
	const char *node = access("/usr/bin/node", X_OK) == 0 ? "/usr/bin/node" : getenv("MF_NODE");
	if (node) {
		char *cmd;
		ck_assert_int_ge(asprintf(&cmd, "'%s' '%s/../flame_page.js' '%s' '{\"model.py:12\":\"33.0 MB, "
					  "78.6%% of the stage\"}' >&2", node, t_golden(), path), 0);
		ck_assert_msg(system(cmd) == 0, "the page's script failed in node: %s", path);
		free(cmd);
	}
	free(path);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* Labels that would end a script ("</script>") and odd shapes stay data. */
START_TEST(test_odd_labels_and_errors)
{
	char *dir = t_tmpdir(), in[4200], seed[4200], *out, *err, *path;
	snprintf(in, sizeof in, "%s/in/odd/sites-odd.json", t_golden());
	snprintf(seed, sizeof seed, "%s/in/seed.json", t_golden());
	char *args[] = { in, NULL };
	path = t_draw("--flame", dir, "odd.html", args);
	json_t *d = page_data(path);
	ck_assert_uint_gt(json_array_size(json_object_get(d, "stages")), 0);
	json_decref(d);
	free(path);
	/* a frame named like the end of the page's script */
	snprintf(in, sizeof in, "%s/in/sites.json", t_golden());
	char *text = t_read(in, NULL), *at = strstr(text, "alloc_a (fixture.py:12)"), *evil;
	ck_assert_ptr_nonnull(at);
	ck_assert_int_ge(asprintf(&evil, "%.*s</script><b>x</b>%s", (int)(at - text), text,
				  at + strlen("alloc_a (fixture.py:12)")), 0);
	snprintf(in, sizeof in, "%s/evil.json", dir);
	t_write(in, evil, strlen(evil));
	path = t_draw("--flame", dir, "evil.html", args);
	d = page_data(path);
	char *dump = json_dumps(d, 0);
	ck_assert_ptr_nonnull(strstr(dump, "\"n\": \"</script><b>x</b>\""));
	free(dump), free(evil), free(text), free(path);
	json_decref(d);
	ck_assert_int_ge(asprintf(&path, "%s/none.html", dir), 0);
	char *a2[] = { "memshim-format", "--flame", path, seed, NULL };
	ck_assert_int_eq(t_run(a2, &out, &err), 2);
	ck_assert_ptr_nonnull(strstr(err, "memshim-format: no CPU call sites to draw in "));
	ck_assert_int_ne(access(path, F_OK), 0);
	free(out), free(err), free(path);
	t_rmtree(dir);
	free(dir);
}
END_TEST

Suite *flame_html_suite(void)
{
	Suite *s = suite_create("flame-html");
	TCase *tc = tcase_create("flame-html");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_page_data);
	tcase_add_test(tc, test_page_agrees_with_sites);
	tcase_add_test(tc, test_odd_labels_and_errors);
	suite_add_tcase(s, tc);
	return s;
}
