/* The real Hugging Face Trainer (examples/hf_trainer.py: a 4-layer GPT-2 from a config, synthetic
 * data, train with an evaluation every epoch, evaluate, predict) under the shim with MEMSHIM_STAGES
 * unset: the default names bind, HF's own memory keys all exist, and the numbers that can be known
 * hold (AdamW's two states in train, the model built before Trainer(...) not in init). */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "child.h"
#include "suite.h"

#define MiB (1024LL * 1024)
#define MS_SEGMENTS 128 /* the most a metrics file lists */

static char lib[PATH_MAX], script[PATH_MAX], formatter[PATH_MAX], venv_py[PATH_MAX], old_py[PATH_MAX];
static char pythonpath[PATH_MAX + 16], repo[PATH_MAX];

struct run {
	char dir[64];
	int status; /* exit status, or 128 + signal */
	char out[1 << 16], err[1 << 16];
};

/* Runs ARGV in a fresh directory with the shim preloaded (unless PRELOAD is 0), output pattern
 * OUTPUT (relative to that directory) and extra KEY=VALUE entries ENV; R->status is its status. */
static void run_status(struct run *r, const char *const *argv, const char *output, const char *const *env, int preload)
{
	memset(r, 0, sizeof *r);
	snprintf(r->dir, sizeof r->dir, "/tmp/memshim-hf.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(r->dir));
	struct py_env e;
	static const char *const offline[] = { "HF_HUB_OFFLINE=1", "OMP_NUM_THREADS=1", NULL };
	char **envp = py_env(&e, preload ? lib : NULL, r->dir, output, offline, env);
	pid_t pid = spawn_redirected(r->dir, argv, envp, r->dir);
	ck_assert_int_ge(pid, 0);
	int st = 0;
	waitpid(pid, &st, 0);
	r->status = exit_code(st);
	read_back(r->dir, r->out, sizeof r->out, r->err, sizeof r->err);
}

/* run_status, and the program must succeed. */
static void run(struct run *r, const char *const *argv, const char *output, const char *const *env, int preload)
{
	run_status(r, argv, output, env, preload);
	ck_assert_msg(r->status == 0, "%s exited %d\n%s", argv[1], r->status, r->err);
}

static json_t *load(const struct run *r, const char *name)
{
	char path[512];
	json_error_t jerr;
	snprintf(path, sizeof path, "%s/%s", r->dir, name);
	json_t *j = json_load_file(path, 0, &jerr);
	ck_assert_msg(j != NULL, "%s: %s", path, jerr.text);
	return j;
}

static long long metric(json_t *m, const char *key)
{
	json_t *v = json_object_get(json_object_get(m, "metrics"), key);
	ck_assert_msg(v != NULL, "metric %s missing", key);
	return json_integer_value(v);
}

static json_t *stage(json_t *m, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(m, "stages"), i, s)
		if (!strcmp(json_string_value(json_object_get(s, "name")), name))
			return s;
	ck_abort_msg("no stage %s", name);
	return NULL;
}

static double num(json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/* Evaluations whose call started inside train's call: the per-epoch ones. */
static int evals_inside_train(json_t *m)
{
	json_t *train = json_array_get(json_object_get(stage(m, "train"), "history"), 0);
	double t0 = num(train, "start"), t1 = t0 + num(train, "runtime");
	size_t i;
	json_t *h;
	int inside = 0;
	json_array_foreach(json_object_get(stage(m, "eval"), "history"), i, h)
		inside += num(h, "start") >= t0 && num(h, "start") <= t1;
	return inside;
}

static void expect_stages_bound(json_t *m, int epochs)
{
	ck_assert_int_eq(metric(m, "train_calls"), 1);
	ck_assert_int_eq(metric(m, "eval_calls"), epochs + 1);
	ck_assert_int_eq(metric(m, "test_calls"), 1);
	ck_assert_int_eq(metric(m, "init_calls"), 1);
	ck_assert_int_eq(evals_inside_train(m), epochs);
}

/* Train keeps AdamW's two states per parameter (gradients are freed at each step's zero_grad);
 * init (Trainer.__init__) does not include the model built before it. */
static void expect_train_numbers(json_t *m, long long params)
{
	long long train = metric(m, "train_mem_cpu_alloc_delta");
	ck_assert_msg(train >= 2 * params && train <= 3 * params + 64 * MiB,
		      "train alloc delta %lld, parameters %lld bytes (AdamW: 2x)", train, params);
	ck_assert_int_ge(metric(m, "train_mem_cpu_peaked_delta"), 0);
}

static void expect_known_numbers(json_t *m, long long params)
{
	expect_train_numbers(m, params);
	long long init = metric(m, "init_mem_cpu_alloc_delta");
	ck_assert_msg(init < params / 2, "init alloc delta %lld holds the model (%lld bytes)?", init, params);
}

/* Call sites at train's peak: AdamW's two states per parameter, PyTorch tensors made
 * in torch/optim/adam.py, within the documented bound 4 sqrt(rate x bytes) + the copy's lag. */
static void expect_adam_sites(json_t *m, long long params)
{
	json_t *train = stage(m, "train"), *e;
	size_t i;
	double adam = 0;
	json_array_foreach(json_object_get(train, "peak_sites"), i, e) {
		json_t *f;
		size_t k;
		json_array_foreach(json_object_get(e, "frames"), k, f)
			if (strstr(json_string_value(f), "/torch/optim/adam.py:")) {
				adam += (double)json_integer_value(json_object_get(e, "bytes"));
				break;
			}
	}
	double truth = 2.0 * (double)params, rate = 524288;
	double tol = 4 * sqrt(rate * truth) + (double)json_integer_value(json_object_get(train, "peak_sites_lag"));
	ck_assert_msg(fabs(adam - truth) <= tol, "AdamW states at train's peak: %.1f MiB from adam.py, truth %.1f MiB",
		      adam / MiB, truth / MiB);
}

static long long parameter_bytes(json_t *hf)
{
	return json_integer_value(json_object_get(json_object_get(hf, "info"), "parameter_bytes"));
}

/* The Trainer in R with OPTION VALUE, the extra settings ENV (NULL: none) and without HF's own
 * memory tracking: the stages bind over two epochs and the known numbers hold. */
static void trainer_with(struct run *r, const char *option, const char *value, const char *const *env)
{
	const char *argv[] = { venv_py, script, option, value, "--skip-hf-memory", "--hf-metrics", "hf.json", NULL };
	run(r, argv, "m.json", env, 1);
	json_t *m = load(r, "m.json"), *hf = load(r, "hf.json");
	expect_stages_bound(m, 2);
	expect_known_numbers(m, parameter_bytes(hf));
	json_decref(m);
	json_decref(hf);
}

START_TEST(trainer_default_stages_and_hf_keys)
{
	struct run r;
	const char *argv[] = { venv_py, script, "--hf-metrics", "hf.json", "--output-dir", "out", NULL };
	run(&r, argv, "m.json", NULL, 1);
	json_t *m = load(&r, "m.json"), *hf = load(&r, "hf.json");
	expect_stages_bound(m, 2);
	expect_known_numbers(m, parameter_bytes(hf));
	/* every memory key HF reports is in memshim's flat metrics under the same name */
	const char *split;
	json_t *group;
	int checked = 0;
	json_object_foreach(json_object_get(hf, "metrics"), split, group) {
		const char *key;
		json_t *v;
		json_object_foreach(group, key, v)
			if (strstr(key, "_mem_")) {
				ck_assert_msg(json_object_get(json_object_get(m, "metrics"), key) != NULL,
					      "HF's %s (%s) missing from memshim's metrics", key, split);
				checked++;
			}
	}
	ck_assert_int_ge(checked, 9); /* init, train, eval, test: alloc and peaked; before_init */
	expect_adam_sites(m, parameter_bytes(hf));
	/* side by side: HF's own results file against memshim's, every HF memory key a full row */
	char results[128], metrics[128];
	snprintf(results, sizeof results, "%s/out/all_results.json", r.dir);
	snprintf(metrics, sizeof metrics, "%s/m.json", r.dir);
	struct run c;
	const char *compare[] = { formatter, "--compare", results, metrics, NULL };
	run(&c, compare, "unused.json", NULL, 0);
	ck_assert_ptr_nonnull(strstr(c.out, "Hugging Face's tracker vs memshim"));
	ck_assert_ptr_nonnull(strstr(c.out, "train_mem_cpu_alloc_delta"));
	for (char *line = strtok(c.out, "\n"); line; line = strtok(NULL, "\n")) {
		int mbs = 0;
		for (char *p = line; (p = strstr(p, "MB")); p += 2)
			mbs++;
		ck_assert_msg(!strstr(line, "_mem_") || mbs == 3, "a memory key without both values: %s", line);
	}
	json_decref(m);
	json_decref(hf);
}
END_TEST

START_TEST(gradient_accumulation)
{
	struct run r;
	trainer_with(&r, "--accumulate", "2", NULL);
}
END_TEST

/* The segments of M's process.shared whose kind is "shm", as "dev:ino" strings into KEYS (N at most);
 * returns how many. */
static int shm_segments(json_t *m, char keys[][48], int n)
{
	int k = 0;
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(json_object_get(json_object_get(m, "process"), "shared"), "segments"), i, s)
		if (k < n && !strcmp(json_string_value(json_object_get(s, "kind")), "shm"))
			snprintf(keys[k++], 48, "%s:%lld", json_string_value(json_object_get(s, "dev")),
				 (long long)json_integer_value(json_object_get(s, "ino")));
	return k;
}

/* DataLoader workers are forked children: each writes its own file (in MEMSHIM_CHILDREN_DIR, here
 * the run's directory: a worker that added little is a helper, whose file a plain LD_PRELOAD
 * writes nowhere else); the main process's stages are the same as without workers, and train shows
 * the batches the workers sent through shared memory: the trainer names the same
 * segments as the worker that wrote them. */
START_TEST(dataloader_workers)
{
	struct run r;
	static const char *const kids[] = { "MEMSHIM_CHILDREN_DIR=.", NULL };
	trainer_with(&r, "--workers", "2", kids);
	json_t *main_file = load(&r, "m.json");
	json_t *shared = json_object_get(json_object_get(stage(main_file, "train"), "cpu"), "shared");
	ck_assert_msg(json_integer_value(json_object_get(shared, "peak")) > 0, "train read no batch");
	static char main_keys[MS_SEGMENTS][48], worker_keys[MS_SEGMENTS][48];
	int nmain = shm_segments(main_file, main_keys, MS_SEGMENTS), common = 0;
	ck_assert_int_gt(nmain, 0);
	int children = 0;
	DIR *d = opendir(r.dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "m.json.", 7) != 0)
			continue;
		children++;
		/* a worker reports what it added, not the trainer's memory it shares */
		json_t *w = load(&r, e->d_name);
		ck_assert_msg(metric(w, "inherited_mem_cpu") >= 100 * MiB, "worker inherited %lld", metric(w, "inherited_mem_cpu"));
		ck_assert_msg(metric(w, "process_mem_cpu_peak") < 64 * MiB, "worker peak %lld", metric(w, "process_mem_cpu_peak"));
		int nw = shm_segments(w, worker_keys, MS_SEGMENTS);
		for (int a = 0; a < nw; a++)
			for (int b = 0; b < nmain; b++)
				common += !strcmp(worker_keys[a], main_keys[b]);
		json_decref(w);
	}
	closedir(d);
	ck_assert_msg(children >= 2, "%d worker files", children);
	ck_assert_msg(common > 0, "no segment named alike by a worker and the trainer");
	json_decref(main_file);
}
END_TEST

/* Two ranks under torchrun (gloo on CPU): one file per rank with the rank recorded, and the
 * formatter merges them. */
START_TEST(torchrun_two_ranks)
{
	struct run r;
	char torchrun[PATH_MAX + 16];
	snprintf(torchrun, sizeof torchrun, "%.*s/torchrun", (int)(strrchr(venv_py, '/') - venv_py), venv_py);
	const char *argv[] = { torchrun, "--standalone", "--nproc-per-node", "2", script, "--skip-hf-memory",
			       "--samples", "32", "--callback", "--hf-metrics", "hf.json", NULL };
	/* A rank aborting in gloo's teardown at interpreter exit, after the whole script ran, is
	 * torch's (3 runs in 20 without memshim, 2 in 20 with it; destroy_process_group() instead
	 * hung 1 in 20): such a run is tried again. */
	const char *env[] = { pythonpath, NULL };
	for (int tries = 0;; tries++) {
		run_status(&r, argv, "m_%p.json", env, 1);
		if (r.status == 0 || tries == 2 || !strstr(r.err, "terminate called without an active exception"))
			break;
	}
	ck_assert_msg(r.status == 0, "%s exited %d\n%s", argv[1], r.status, r.err);
	char *files[2], paths[2][600];
	int ranks = 0;
	DIR *d = opendir(r.dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "m_", 2))
			continue;
		char path[600];
		snprintf(path, sizeof path, "%s/%s", r.dir, e->d_name);
		json_error_t jerr;
		json_t *m = json_load_file(path, 0, &jerr);
		json_t *rank = m ? json_object_get(m, "rank") : NULL;
		if (rank && json_object_get(json_object_get(m, "metrics"), "train_calls")) {
			ck_assert_int_lt(ranks, 2);
			expect_stages_bound(m, 2);
			ck_assert_int_eq(json_integer_value(json_object_get(rank, "world_size")), 2);
			snprintf(paths[ranks], sizeof paths[ranks], "%s", path);
			files[ranks] = paths[ranks];
			ranks++;
		}
		json_decref(m);
	}
	closedir(d);
	ck_assert_int_eq(ranks, 2);
	struct run f;
	const char *merge[] = { formatter, "--merge", files[0], files[1], NULL };
	run(&f, merge, "unused.json", NULL, 0);
	ck_assert_ptr_nonnull(strstr(f.out, "train_mem_cpu_alloc_delta"));
	ck_assert_ptr_nonnull(strstr(f.out, "rank"));
	/* MemshimCallback gathered both ranks' numbers through the job's gloo group */
	json_t *hf = load(&r, "hf.json"), *eval = json_object_get(json_object_get(hf, "metrics"), "eval");
	ck_assert_msg(json_object_get(eval, "eval_mem_cpu_peaked_delta_max") != NULL, "%s", json_dumps(eval, 0));
	long long rank = json_integer_value(json_object_get(eval, "eval_mem_cpu_peaked_delta_max_rank"));
	ck_assert_msg(rank == 0 || rank == 1, "max rank %lld", rank);
	ck_assert_int_ge(json_integer_value(json_object_get(eval, "eval_mem_cpu_peaked_delta_sum")),
			 json_integer_value(json_object_get(eval, "eval_mem_cpu_peaked_delta_max")));
	json_decref(hf);
}
END_TEST

/* The default names bind on an older transformers line too (a rename would fail here). */
START_TEST(older_transformers_line)
{
	if (access(old_py, X_OK) != 0) {
		fprintf(stderr, "test_hf: %s missing, older transformers test skipped\n", old_py);
		return;
	}
	struct run r;
	const char *argv[] = { old_py, script, "--skip-hf-memory", "--hf-metrics", "hf.json", NULL };
	run(&r, argv, "m.json", NULL, 1);
	json_t *m = load(&r, "m.json"), *hf = load(&r, "hf.json");
	const char *version = json_string_value(json_object_get(json_object_get(hf, "info"), "transformers"));
	ck_assert_msg(version && !strncmp(version, "4.46.", 5), "transformers %s", version ? version : "?");
	expect_stages_bound(m, 2);
	/* 4.46's Trainer.__init__ itself allocates about 70 MB (HF's own tracker agrees): no init bound */
	expect_train_numbers(m, parameter_bytes(hf));
	json_decref(m);
	json_decref(hf);
}
END_TEST


/* Log entries of the Trainer's log_history that hold KEY. */
static int logs_with(json_t *hf, const char *key)
{
	size_t i;
	json_t *e;
	int n = 0;
	json_array_foreach(json_object_get(json_object_get(hf, "info"), "log_history"), i, e)
		n += json_object_get(e, key) != NULL;
	return n;
}

/* memshim.hf.MemshimCallback on the real Trainer: memshim's keys in log_history (every evaluation
 * and the end of training) and in predict's metrics; without the library, nothing and no failure. */
START_TEST(trainer_callback)
{
	struct run r;
	const char *env[] = { pythonpath, NULL };
	const char *argv[] = { venv_py, script, "--callback", "--skip-hf-memory", "--hf-metrics", "hf.json", NULL };
	run(&r, argv, "m.json", env, 1);
	json_t *hf = load(&r, "hf.json");
	ck_assert_int_eq(logs_with(hf, "eval_mem_cpu_peaked_delta"), 3);
	ck_assert_int_eq(logs_with(hf, "train_mem_cpu_alloc_delta"), 1);
	ck_assert_int_eq(logs_with(hf, "init_mem_cpu_alloc_delta"), 1);
	json_t *test = json_object_get(json_object_get(hf, "metrics"), "test");
	ck_assert_ptr_nonnull(json_object_get(test, "test_mem_cpu_alloc_delta"));
	json_decref(hf);
	run(&r, argv, "m.json", env, 0);
	hf = load(&r, "hf.json");
	ck_assert_int_eq(logs_with(hf, "eval_mem_cpu_peaked_delta"), 0);
	ck_assert_ptr_nonnull(strstr(r.err, "MemshimCallback adds nothing"));
	json_decref(hf);
}
END_TEST

/* With HF's own tracker on, the callback's keys keep the split's prefix first, so TensorBoard files
 * the eval stage's under eval/ (transformers' rewrite_logs), not train/. */
START_TEST(callback_keys_grouped_as_hf_groups_them)
{
	struct run r;
	const char *env[] = { pythonpath, NULL };
	char checker[PATH_MAX + 32];
	snprintf(checker, sizeof checker, "%s/tests/hf/callback_check.py", repo);
	const char *argv[] = { venv_py, checker, NULL };
	run(&r, argv, "m.json", env, 1);
	ck_assert_msg(strstr(r.out, "eval tensorboard eval/mem_cpu_alloc_delta_memshim "
			  "eval/mem_cpu_peaked_delta_memshim\n"), "%s\n%s", r.out, r.err);
	ck_assert_msg(strstr(r.out, "train tensorboard train/before_init_mem_cpu_memshim "), "%s", r.out);
}
END_TEST

/* `memshim kernel install`, then a Jupyter kernel started by jupyter_client runs cells that open a
 * stage and read memshim.metrics(). */
START_TEST(notebook_kernel)
{
	struct run r;
	const char *env[] = { pythonpath, NULL };
	char checker[PATH_MAX + 32], prefix[] = "/tmp/memshim-kernel.XXXXXX";
	snprintf(checker, sizeof checker, "%s/tests/hf/kernel_check.py", repo);
	ck_assert_ptr_nonnull(mkdtemp(prefix));
	const char *argv[] = { venv_py, checker, prefix, formatter, NULL };
	run(&r, argv, "unused.json", env, 0);
	ck_assert_msg(strstr(r.out, "ok active True\nok \nok cell MiB 6\n"), "%s\n%s", r.out, r.err);
	/* ipykernel's `uname -p` and the like write into the kernelspec's children/, not beside the
	 * kernel's file or in the notebook's folder */
	ck_assert_msg(strstr(r.out, "kernel metrics files 1\nchildren's files in the kernelspec\n"
			     "files in the notebook's folder 0\n"), "%s\n%s", r.out, r.err);
	/* Jupyter's SIGTERM with no stage open is the shutdown it is: the final file, not a crash's */
	ck_assert_msg(strstr(r.out, "kernel file complete True signal 15\n"), "%s\n%s", r.out, r.err);
	ck_assert_msg(strstr(r.out, "formatter ***** "), "%s\n%s", r.out, r.err);
}
END_TEST

/* ctypes loading the library after start: one line saying so, and the module says not active. */
START_TEST(late_load_says_so)
{
	struct run r;
	char code[PATH_MAX + 200];
	snprintf(code, sizeof code, "import ctypes; ctypes.CDLL(%s%s%s); import memshim; print(memshim.active())", "'", lib, "'");
	const char *env[] = { pythonpath, NULL };
	const char *argv[] = { venv_py, "-c", code, NULL };
	run(&r, argv, "m.json", env, 0);
	ck_assert_str_eq(r.out, "False\n");
	ck_assert_ptr_nonnull(strstr(r.err, "memshim: libmemshim.so was loaded after the program started"));
}
END_TEST

/* pyarrow's mimalloc maps a 1 GiB MAP_NORESERVE arena: counted by its resident pages, a
 * 16 MiB array made in it reads 16 MiB (counted by size, the arena read 0 there and 1.2 GB before
 * init) and the process peak stays under the kernel's high-water RSS. */
START_TEST(pyarrow_arena_counts_what_was_touched)
{
	struct run r;
	const char *code = "import numpy, pyarrow as pa, pyarrow.compute as pc, transformers.trainer\n"
			   "base = pa.array(numpy.arange(2 * 1024 * 1024, dtype=numpy.int64))\n"
			   "def build():\n    return pc.add(base, 1)\n"
			   "kept = build()\nprint(pa.total_allocated_bytes() >> 20, pa.default_memory_pool().backend_name)\n";
	const char *env[] = { "MEMSHIM_STAGES=build=build", NULL };
	const char *argv[] = { venv_py, "-c", code, NULL };
	run(&r, argv, "m.json", env, 1);
	ck_assert_str_eq(r.out, "16 mimalloc\n"); /* pyarrow's own arena, not malloc */
	json_t *m = load(&r, "m.json");
	long long build = metric(m, "build_mem_cpu_alloc_delta"), arena = metric(m, "process_mem_cpu_reservations_peak");
	ck_assert_msg(build >= 15 * MiB && build <= 40 * MiB, "build alloc %lld (16 MiB array)", build);
	ck_assert_msg(arena >= 16 * MiB && arena <= 128 * MiB, "reservations peak %lld: the arena counted whole?", arena);
	ck_assert_msg(metric(m, "process_mem_cpu_peak") <= metric(m, "process_mem_rss_peak"),
		      "process peak %lld above VmHWM %lld", metric(m, "process_mem_cpu_peak"), metric(m, "process_mem_rss_peak"));
	json_decref(m);
}
END_TEST

/* `pip install .` (no network: the venv's setuptools) gives a package with the library inside and a
 * `memshim` command whose `run` preloads it. */
START_TEST(pip_install)
{
	struct run r;
	char target[] = "/tmp/memshim-pip.XXXXXX", pp[300], cmd[PATH_MAX], pip[PATH_MAX + 16];
	ck_assert_ptr_nonnull(mkdtemp(target));
	snprintf(pp, sizeof pp, "PYTHONPATH=%s", target);
	snprintf(pip, sizeof pip, "%.*s/pip", (int)(strrchr(venv_py, '/') - venv_py), venv_py);
	const char *install[] = { pip, "install", "-q", "--no-deps", "--no-build-isolation", "--target", target, repo, NULL };
	run(&r, install, "unused.json", NULL, 0);
	snprintf(cmd, sizeof cmd, "%s/bin/memshim", target);
	const char *env[] = { pp, NULL };
	const char *use[] = { cmd, "run", "--output", "m.json", "--", venv_py, "-c",
			      "import memshim\nwith memshim.stage('s'):\n    x = bytearray(7 << 20)\n"
			      "print('pip', memshim.active(), memshim.metrics()['s_mem_cpu_alloc_delta'] >> 20)", NULL };
	run(&r, use, "unused.json", env, 0);
	ck_assert_msg(strstr(r.out, "pip True 7\n") && (strstr(r.out, "s_mem_cpu_alloc_delta") || strstr(r.err, "s_mem_cpu_alloc_delta")),
		      "%s\n%s", r.out, r.err);
}
END_TEST

static void absolute(char *out, const char *rel)
{
	if (!realpath(rel, out))
		snprintf(out, PATH_MAX, "%s", rel);
}

/* A virtual environment's python is a symlink to the base interpreter: keep the link. */
static void absolute_link(char *out, const char *rel)
{
	char cwd[PATH_MAX / 2];
	if (rel[0] == '/' || !getcwd(cwd, sizeof cwd))
		snprintf(out, PATH_MAX, "%s", rel);
	else
		snprintf(out, PATH_MAX, "%s/%.*s", cwd, PATH_MAX / 2 - 2, rel);
}

int main(void)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char rel[PATH_MAX];
	snprintf(rel, sizeof rel, "%s/libmemshim.so", build);
	absolute(lib, rel);
	snprintf(rel, sizeof rel, "%s/memshim-format", build);
	absolute(formatter, rel);
	absolute(script, "examples/hf_trainer.py");
	snprintf(rel, sizeof rel, "%s/bin/python", getenv("VENV") ? getenv("VENV") : ".venv");
	absolute_link(venv_py, rel);
	snprintf(rel, sizeof rel, "%s/bin/python", getenv("VENV_OLD_TF") ? getenv("VENV_OLD_TF") : ".venv-transformers-4.46");
	absolute_link(old_py, rel);
	absolute(repo, ".");
	snprintf(pythonpath, sizeof pythonpath, "PYTHONPATH=%.*s/python", PATH_MAX - 8, repo);
	Suite *s = suite_create("hf");
	TCase *tc = tcase_create("trainer");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, trainer_default_stages_and_hf_keys);
	tcase_add_test(tc, gradient_accumulation);
	tcase_add_test(tc, dataloader_workers);
	tcase_add_test(tc, torchrun_two_ranks);
	tcase_add_test(tc, older_transformers_line);
	tcase_add_test(tc, trainer_callback);
	tcase_add_test(tc, late_load_says_so);
	tcase_add_test(tc, pyarrow_arena_counts_what_was_touched);
	tcase_add_test(tc, pip_install);
	suite_add_tcase(s, tc);
	TCase *quick = tcase_create("python"); /* CK_RUN_CASE=python: these alone, in seconds */
	tcase_set_timeout(quick, 240);
	tcase_add_test(quick, callback_keys_grouped_as_hf_groups_them);
	tcase_add_test(quick, notebook_kernel);
	suite_add_tcase(s, quick);
	return run_suite(s);
}
