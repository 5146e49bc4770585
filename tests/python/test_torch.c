/* PyTorch under memshim (skipped where torch is not installed): a training loop's stages
 * and call sites that lead with the script's own line.
 * Fixture scripts (tests/python/fixtures) run under LD_PRELOAD=libmemshim.so on every interpreter
 * present (tests/python/pyrun.h). */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pyrun.h"

/* Whether PYTHON imports torch; says why a test is skipped when not. */
static int torch_or_skip(const char *python, const char *test)
{
	struct run r;
	const char *check[] = { "-c", "import torch", NULL };
	run_py(&r, python, check, NULL, NULL, NULL, 0);
	int have = r.status == 0;
	run_done(&r);
	if (!have)
		printf("test_python: python3-torch not importable by %s, %s skipped\n", python, test);
	return have;
}

/* A known answer on real PyTorch (the project venv's): an MLP's training stage (Adam,
 * backward) with 64 MiB made before it still live.  Its call sites cover its need and memshim-format
 * shows the script's own line first; the 64 MiB is in what it found (peak_sites_before), not in
 * what it added. */
START_TEST(torch_sites_lead_with_the_script)
{
	char py[PATH_MAX];
	snprintf(py, sizeof py, "%s/bin/python", getenv("VENV") ? getenv("VENV") : ".venv");
	if (!torch_or_skip(py, "torch sites test"))
		return;
	struct run r;
	const char *env[] = { "OMP_NUM_THREADS=1", NULL };
	const char *args[] = { fixture("sites_mlp.py"), NULL };
	run_py(&r, py, args, "train=train_loop", env, NULL, 1);
	RUN_OK(&r);
	json_t *train = stage_entry(&r, "train"), *e;
	json_t *cpu = json_object_get(train, "cpu");
	double need = (double)(json_integer_value(json_object_get(cpu, "alloc_delta")) +
			       json_integer_value(json_object_get(cpu, "peaked_delta")));
	double listed = 0, before_big = 0;
	size_t i;
	json_array_foreach(json_object_get(train, "peak_sites"), i, e) {
		listed += (double)json_integer_value(json_object_get(e, "bytes"));
		ck_assert_msg(json_integer_value(json_object_get(e, "bytes")) < 48 * MIB,
			      "%s: a site of %lld bytes in what train added (the 64 MiB is from before)", py,
			      (long long)json_integer_value(json_object_get(e, "bytes")));
	}
	json_array_foreach(json_object_get(train, "peak_sites_before"), i, e)
		if (json_integer_value(json_object_get(e, "bytes")) >= before_big)
			before_big = (double)json_integer_value(json_object_get(e, "bytes"));
	ck_assert_msg(need > 90 * MIB, "%s: train needed %.1f MiB", py, need / MIB);
	ck_assert_msg(listed >= 0.8 * need, "%s: sites %.1f MiB of a need of %.1f MiB", py, listed / MIB, need / MIB);
	ck_assert_msg(before_big >= 48 * MIB, "%s: largest site from before %.1f MiB", py, before_big / MIB);
	char file[128], fmt[PATH_MAX + 32];
	snprintf(file, sizeof file, "%s/m.json", r.dir);
	snprintf(fmt, sizeof fmt, "%s/memshim-format", getenv("BUILD") ? getenv("BUILD") : "build");
	struct run f;
	const char *fargs[] = { "--sites", "--stage", "train", "--top", "3", file, NULL };
	run_py(&f, fmt, fargs, NULL, NULL, NULL, 0);
	const char *row = strstr(f.out, "\n  1 ");
	const char *eol = row ? strchr(row + 1, '\n') : NULL;
	const char *line = row ? strstr(row, "sites_mlp.py:") : NULL;
	ck_assert_msg(f.status == 0 && line && eol && line < eol, "%s: the first site is not the script's line:\n%s%s",
		      py, f.out, f.err);
	run_done(&f);
	run_done(&r);
}
END_TEST

/* Real PyTorch CPU training with Debian's python3-torch: parameters appear in init, gradients and
 * Adam state in train, activations only as peaks. */
START_TEST(torch_training)
{
	const char *py = "/usr/bin/python3";
	if (!torch_or_skip(py, "torch test"))
		return;
	struct run r;
	const char *env[] = { "OMP_NUM_THREADS=1", NULL };
	const char *args[] = { fixture("torch_train.py"), NULL };
	run_py(&r, py, args, "init=Model.__init__,train=train,eval=evaluate", env, NULL, 1);
	RUN_OK(&r);
	/* the fixture prints the sizes it expects: parameter bytes and one batch's activations */
	long params = 0, acts = 0;
	const char *line = strstr(r.out, "sizes ");
	ck_assert_msg(line && sscanf(line, "sizes %ld %ld", &params, &acts) == 2, "%s", r.out);
	double p = (double)params;
	double init = (double)json_integer_value(metric(&r, "init", "mem_cpu_alloc_delta"));
	double train = (double)json_integer_value(metric(&r, "train", "mem_cpu_alloc_delta"));
	double train_peak = (double)json_integer_value(metric(&r, "train", "mem_cpu_peaked_delta"));
	double eval = (double)json_integer_value(metric(&r, "eval", "mem_cpu_alloc_delta"));
	double eval_peak = (double)json_integer_value(metric(&r, "eval", "mem_cpu_peaked_delta"));
	ck_assert_msg(init >= p && init <= p + 8 * MIB, "init %.1f MiB vs parameters %.1f MiB", init / MIB, p / MIB);
	/* gradients (1x) + Adam's exp_avg and exp_avg_sq (2x) stay after training */
	ck_assert_msg(train >= 3 * p - MIB && train <= 3 * p + 16 * MIB, "train %.1f MiB vs 3x parameters %.1f MiB",
		      train / MIB, 3 * p / MIB);
	ck_assert_msg(train_peak >= acts, "train peaked %.1f MiB < activations %.1f MiB", train_peak / MIB, acts / MIB);
	ck_assert_msg(fabs(eval) <= 2 * MIB, "eval keeps %.1f MiB", eval / MIB);
	ck_assert_msg(eval_peak >= acts / 2, "eval peaked %.1f MiB < activations/2 %.1f MiB", eval_peak / MIB, acts / 2 / MIB);
	expect_calls(&r, "train", 1);
	expect_calls(&r, "eval", 2);
	run_done(&r);
}
END_TEST

Suite *python_suite(void)
{
	Suite *s = suite_create("python_torch");
	TCase *stages = tcase_create("stages");
	tcase_set_timeout(stages, 60);
	tcase_add_test(stages, torch_sites_lead_with_the_script);
	suite_add_tcase(s, stages);
	TCase *torch = tcase_create("torch");
	tcase_set_timeout(torch, 120);
	tcase_add_test(torch, torch_training);
	suite_add_tcase(s, torch);
	return s;
}
