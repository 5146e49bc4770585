/* --speedscope and --pprof on the golden sites file: speedscope's documented shape (shared frames,
 * "sampled" profiles whose weights sum to their endValue, stacks outermost first) with the bytes
 * of every stage's sites; pprof's file parsed by Google's protobuf runtime against profile.proto
 * (check_pprof.py in the venv MF_PROTO_PY names, made by make check-formatter). */
#include "util.h"
#include "model/document.h"
#include "model/sites.h"
#include "input/input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The bytes of STAGE's sites in in/sites.json as the exports round them. */
static long long stage_bytes(const char *stage, int gpu)
{
	char path[4200];
	struct mf_file f;
	long long total = 0;
	size_t i;
	json_t *st;
	snprintf(path, sizeof path, "%s/in/sites.json", t_golden());
	ck_assert_int_eq(mf_load(path, &f, stderr), 0);
	json_array_foreach(f.stages, i, st) {
		struct mf_sites s;
		if (strcmp(json_string_value(json_object_get(st, "name")), stage))
			continue;
		mf_sites_get(st, gpu, &s);
		for (size_t k = 0; k < s.n; k++)
			total += (long long)(s.s[k].bytes + 0.5);
		mf_sites_free(&s);
	}
	mf_file_free(&f);
	return total;
}

/* memshim-format OPTION DIR/NAME in/sites.json [--gpu] must write it quietly. */
static char *export(const char *option, const char *dir, const char *name, int gpu)
{
	char in[4200];
	snprintf(in, sizeof in, "%s/in/sites.json", t_golden());
	char *args[] = { in, gpu ? "--gpu" : NULL, NULL };
	return t_draw(option, dir, name, args);
}

static void check_speedscope(const char *path, int gpu)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr), *p;
	ck_assert_msg(doc != NULL, "%s: %s", path, jerr.text);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "$schema")),
			 "https://www.speedscope.app/file-format-schema.json");
	json_t *frames = json_object_get(json_object_get(doc, "shared"), "frames");
	ck_assert(json_array_size(frames) > 0);
	size_t nf = json_array_size(frames), i;
	for (size_t k = 0; k < nf; k++)
		ck_assert(json_is_string(json_object_get(json_array_get(frames, k), "name")));
	json_t *profiles = json_object_get(doc, "profiles");
	int seen_train = 0;
	ck_assert(json_array_size(profiles) > 0);
	ck_assert_int_eq(json_integer_value(json_object_get(doc, "activeProfileIndex")), 0);
	json_array_foreach(profiles, i, p) {
		const char *name = json_string_value(json_object_get(p, "name"));
		json_t *samples = json_object_get(p, "samples"), *weights = json_object_get(p, "weights");
		ck_assert_str_eq(json_string_value(json_object_get(p, "type")), "sampled");
		ck_assert_str_eq(json_string_value(json_object_get(p, "unit")), "bytes");
		ck_assert_int_eq(json_integer_value(json_object_get(p, "startValue")), 0);
		ck_assert_uint_eq(json_array_size(samples), json_array_size(weights));
		ck_assert_ptr_nonnull(strstr(name, gpu ? "· GPU" : "· CPU"));
		long long sum = 0;
		for (size_t k = 0; k < json_array_size(samples); k++) {
			json_t *stack = json_array_get(samples, k);
			ck_assert(json_array_size(stack) > 0);
			for (size_t j = 0; j < json_array_size(stack); j++) {
				json_int_t at = json_integer_value(json_array_get(stack, j));
				ck_assert(json_is_integer(json_array_get(stack, j)) && at >= 0 && (size_t)at < nf);
			}
			sum += json_integer_value(json_array_get(weights, k));
		}
		ck_assert_int_eq(sum, json_integer_value(json_object_get(p, "endValue")));
		if (!gpu && strstr(name, "· train ·")) {
			seen_train = 1;
			ck_assert_int_eq(sum, stage_bytes("train", 0));
			/* the heaviest site, 60 MB from alloc_a: its stack ends at the allocating frame */
			json_t *first = json_array_get(samples, 0);
			json_int_t top = json_integer_value(json_array_get(first, json_array_size(first) - 1));
			json_int_t bottom = json_integer_value(json_array_get(first, 0));
			ck_assert_str_eq(json_string_value(json_object_get(json_array_get(frames, top), "name")),
					 "alloc_a (fixture.py:12)");
			ck_assert_str_eq(json_string_value(json_object_get(json_array_get(frames, bottom),
									   "name")), "__libc_start_call_main+0x7a (libc.so.6)");
		}
	}
	ck_assert(gpu || seen_train);
	json_decref(doc);
}

START_TEST(test_speedscope)
{
	char *dir = t_tmpdir();
	char *cpu = export("--speedscope", dir, "cpu.json", 0);
	check_speedscope(cpu, 0);
	char *gpu = export("--speedscope", dir, "gpu.json", 1);
	check_speedscope(gpu, 1);
	free(cpu), free(gpu);
	t_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_pprof_parses)
{
	const char *py = getenv("MF_PROTO_PY");
	ck_assert_msg(py && *py, "MF_PROTO_PY (the venv with protobuf) is not set: run make check-formatter");
	char *dir = t_tmpdir(), *cmd;
	char *path = export("--pprof", dir, "cpu.pb.gz", 0);
	ck_assert_int_ge(asprintf(&cmd, "'%s' '%s/../check_pprof.py' '%s' train=%lld init=%lld >&2", py,
				  t_golden(), path, stage_bytes("train", 0), stage_bytes("init", 0)), 0);
	ck_assert_msg(system(cmd) == 0, "check_pprof.py refused %s", path);
	free(cmd), free(path);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* A file with the call-site lists of what each stage added: the exports take what each stage added, the closing entry
 * included (one frame, "(7 other stacks)"), never what was live from before it. */
START_TEST(test_speedscope_added)
{
	char *dir = t_tmpdir(), in[4200];
	snprintf(in, sizeof in, "%s/in/sites-added.json", t_golden());
	char *args[] = { in, "--stage", "train", NULL };
	char *path = t_draw("--speedscope", dir, "added.json", args);
	json_t *doc = json_load_file(path, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	json_t *frames = json_object_get(json_object_get(doc, "shared"), "frames");
	json_t *p = json_array_get(json_object_get(doc, "profiles"), 0);
	json_t *samples = json_object_get(p, "samples"), *weights = json_object_get(p, "weights");
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "profiles")), 1);
	ck_assert_uint_eq(json_array_size(samples), 6);
	/* 2 + 30 + 10 + 3 + 1 + 1.5 MiB; the 64 MiB from before the stage is not in it */
	ck_assert_int_eq(json_integer_value(json_object_get(p, "endValue")), 49807360);
	json_t *last = json_array_get(samples, 5);
	ck_assert_uint_eq(json_array_size(last), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(frames,
		json_integer_value(json_array_get(last, 0))), "name")), "(7 other stacks)");
	ck_assert_int_eq(json_integer_value(json_array_get(weights, 5)), 1572864);
	json_decref(doc);
	free(path);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* No sites: one line, exit 2 and no file; a path that cannot be written: the same. */
START_TEST(test_export_errors)
{
	char *dir = t_tmpdir(), *out, *err, *path, seed[4200], sites[4200];
	snprintf(seed, sizeof seed, "%s/in/seed.json", t_golden());
	snprintf(sites, sizeof sites, "%s/in/sites.json", t_golden());
	ck_assert_int_ge(asprintf(&path, "%s/none.json", dir), 0);
	char *a1[] = { "memshim-format", "--speedscope", path, seed, NULL };
	ck_assert_int_eq(t_run(a1, &out, &err), 2);
	ck_assert_str_eq(out, "");
	ck_assert_ptr_nonnull(strstr(err, "memshim-format: no CPU call sites to export in "));
	ck_assert_int_ne(access(path, F_OK), 0);
	free(out), free(err);
	char *a2[] = { "memshim-format", "--pprof", "/nonexistent-dir/x.pb.gz", sites, NULL };
	ck_assert_int_eq(t_run(a2, &out, &err), 2);
	ck_assert_str_eq(err, "memshim-format: cannot write /nonexistent-dir/x.pb.gz\n");
	free(out), free(err), free(path);
	t_rmtree(dir);
	free(dir);
}
END_TEST

Suite *export_suite(void)
{
	Suite *s = suite_create("export");
	TCase *tc = tcase_create("export");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_speedscope);
	tcase_add_test(tc, test_pprof_parses);
	tcase_add_test(tc, test_speedscope_added);
	tcase_add_test(tc, test_export_errors);
	suite_add_tcase(s, tc);
	return s;
}
