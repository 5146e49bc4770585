/* doc/metrics.schema.json against real files: the library run on small programs (stages, forked
 * and exec'd children, a rank, a SIGTERM snapshot, a periodic snapshot of a process killed with
 * SIGKILL, the live report, and GPU files from the stand-in driver when it is built), every one
 * described completely; and against the golden inputs: the schema accepts exactly the files
 * memshim-format reads.  Python's jsonschema, where it is installed, checks the same files. */
#include "util.h"
#include "schema.h"
#include "model/document.h"
#include "input/input.h"

#include <dirent.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char fixture[] =
	"import os, signal, subprocess, sys, time\n"
	"\n"
	"def evaluate():\n"
	"    return len(bytearray(2 << 20))\n"
	"\n"
	"def train(mode):\n"
	"    x = [bytearray(1 << 20) for _ in range(4)]\n"
	"    evaluate()\n"
	"    if mode == 'term':\n"
	"        os.kill(os.getpid(), signal.SIGTERM)\n"
	"    if mode == 'kill':\n"
	"        time.sleep(0.5)\n"
	"        os.kill(os.getpid(), signal.SIGKILL)\n"
	"    if mode == 'live':\n"
	"        sys.path.insert(0, sys.argv[2])\n"
	"        import json, memshim\n"
	"        with open(sys.argv[3], 'w') as f:\n"
	"            json.dump(memshim.report(), f)\n"
	"    return len(x)\n"
	"\n"
	"mode = sys.argv[1] if len(sys.argv) > 1 else ''\n"
	"train(mode)\n"
	"if mode == '':\n"
	"    pid = os.fork()\n"
	"    if pid == 0:\n"
	"        train('')\n"
	"        os._exit(0)\n"
	"    os.waitpid(pid, 0)\n"
	"    subprocess.run(['/bin/true'], check=True)\n";

static json_t *load_schema(void)
{
	char path[4200];
	json_error_t je;
	snprintf(path, sizeof path, "%s/../../../doc/metrics.schema.json", t_golden());
	json_t *s = json_load_file(path, 0, &je);
	ck_assert_msg(s != NULL, "%s: %s (line %d)", path, je.text, je.line);
	ck_assert_str_eq(json_string_value(json_object_get(s, "$schema")),
			 "https://json-schema.org/draft/2020-12/schema");
	return s;
}

/* Every file of DIR matching PATTERN, valid in the strict sense and read by memshim-format;
 * their paths are added to LIST (one a line) for the jsonschema check.  Returns how many. */
static int check_real(json_t *schema, const char *dir, const char *pattern, FILE *list)
{
	char pat[4300], why[512];
	glob_t g;
	int n = 0;
	snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
	if (glob(pat, 0, NULL, &g))
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		json_error_t je;
		struct mf_file f;
		char *err;
		size_t len;
		json_t *doc = json_load_file(g.gl_pathv[i], 0, &je);
		ck_assert_msg(doc != NULL, "%s: %s", g.gl_pathv[i], je.text);
		ck_assert_msg(t_schema_check(schema, doc, 1, why, sizeof why) == 0, "%s: %s",
			      g.gl_pathv[i], why);
		FILE *e = open_memstream(&err, &len);
		int rc = mf_load(g.gl_pathv[i], &f, e);
		fclose(e);
		ck_assert_msg(rc == 0, "memshim-format does not read %s: %s", g.gl_pathv[i], err);
		mf_file_free(&f);
		free(err);
		json_decref(doc);
		fprintf(list, "%s\n", g.gl_pathv[i]);
		n++;
	}
	globfree(&g);
	return n;
}

static void sh(const char *cmd)
{
	int rc = system(cmd);
	ck_assert_msg(rc != -1, "cannot run: %s", cmd);
}

static const char *python_with_jsonschema(void)
{
	static char venv[4200];
	const char *root = getenv("MF_MAKE_ROOT");
	snprintf(venv, sizeof venv, "%s/.venv/bin/python", root ? root : ".");
	const char *const cand[] = { "/usr/bin/python3", venv };
	for (size_t i = 0; i < 2; i++) {
		char cmd[4400];
		snprintf(cmd, sizeof cmd, "'%s' -c 'import jsonschema' >/dev/null 2>&1", cand[i]);
		if (access(cand[i], X_OK) == 0 && system(cmd) == 0)
			return cand[i];
	}
	return NULL;
}

/* The same files through Python's jsonschema (Draft 2020-12), where it is installed. */
static void cross_check(const char *listpath)
{
	const char *py = python_with_jsonschema();
	char cmd[13000], schema[4200];
	if (!py)
		return;
	snprintf(schema, sizeof schema, "%s/../../../doc/metrics.schema.json", t_golden());
	snprintf(cmd, sizeof cmd, "'%s' -c 'import json, sys, jsonschema\n"
		 "s = json.load(open(sys.argv[1]))\n"
		 "jsonschema.Draft202012Validator.check_schema(s)\n"
		 "v = jsonschema.Draft202012Validator(s)\n"
		 "for p in open(sys.argv[2]).read().split():\n"
		 "    v.validate(json.load(open(p)))\n' '%s' '%s'", py, schema, listpath);
	ck_assert_msg(system(cmd) == 0, "jsonschema (%s) rejects a file listed in %s", py, listpath);
}

START_TEST(test_real_files)
{
	const char *lib = getenv("MF_SHIM_LIB"), *gpu = getenv("MF_GPU_DIR");
	ck_assert_msg(lib && *lib, "MF_SHIM_LIB is not set (run through make check-formatter)");
	char *dir = t_tmpdir(), path[4300], cmd[16000], listpath[4300];
	snprintf(path, sizeof path, "%s/fx.py", dir);
	t_write(path, fixture, strlen(fixture));
	snprintf(listpath, sizeof listpath, "%s/files.txt", dir);
	const char *env = "MEMSHIM_STAGES=train=train,eval=evaluate MEMSHIM_LOG=quiet MEMSHIM_LIVE_DIR=live";
	/* MEMSHIM_CHILDREN_DIR: the small children's files too (a helper's are written nowhere else) */
	snprintf(cmd, sizeof cmd, "cd '%s' && LD_PRELOAD='%s' %s RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 "
		 "MEMSHIM_CHILDREN_DIR=. MEMSHIM_OUTPUT=run.json /usr/bin/python3 fx.py; "
		 "LD_PRELOAD='%s' %s MEMSHIM_OUTPUT=term.json /usr/bin/python3 fx.py term; "
		 "LD_PRELOAD='%s' %s MEMSHIM_SNAPSHOT_INTERVAL=0.05 MEMSHIM_OUTPUT=kill.json "
		 "/usr/bin/python3 fx.py kill; "
		 "LD_PRELOAD='%s' %s MEMSHIM_TIMELINE=0 MEMSHIM_OUTPUT=quiet.json /usr/bin/python3 fx.py "
		 "live '%s/../../../python' live.json",
		 dir, lib, env, lib, env, lib, env, lib, env, t_golden());
	sh(cmd);
	if (gpu && *gpu) { /* where the stand-in driver and its fixture are built */
		snprintf(cmd, sizeof cmd, "cd '%s' && for s in linked async vmm; do LD_PRELOAD='%s' "
			 "LD_LIBRARY_PATH='%s' MEMSHIM_OUTPUT=gpu-$s.json '%s/fx_linked' $s; done; "
			 "STANDIN_CUDA_MEM_LIMIT=67108864 LD_PRELOAD='%s' LD_LIBRARY_PATH='%s' "
			 "MEMSHIM_OUTPUT=gpu-oom.json '%s/fx_linked' oom", dir, lib, gpu, gpu, lib, gpu, gpu);
		sh(cmd);
	}
	/* the live records the killed runs left, recovered (memshim-format --recover) */
	snprintf(cmd, sizeof cmd, "cd '%s' && for r in live/*.live; do '%s' --recover \"$r\" --keep "
		 "-o \"recovered-${r##*/}.json\" >/dev/null; done", dir, getenv("MF_FORMAT_BIN"));
	sh(cmd);
	json_t *schema = load_schema();
	FILE *list = fopen(listpath, "w");
	ck_assert_ptr_nonnull(list);
	ck_assert_int_eq(check_real(schema, dir, "run.json", list), 1);
	ck_assert_int_ge(check_real(schema, dir, "run.json.*", list), 2); /* forked, exec'd */
	ck_assert_int_eq(check_real(schema, dir, "term.json", list), 1);
	ck_assert_int_eq(check_real(schema, dir, "kill.json", list), 1);
	ck_assert_int_eq(check_real(schema, dir, "live.json", list), 1);
	ck_assert_int_eq(check_real(schema, dir, "quiet.json", list), 1);
	ck_assert_int_eq(check_real(schema, dir, "recovered-*.json", list), 2); /* term and kill */
	if (gpu && *gpu)
		ck_assert_int_eq(check_real(schema, dir, "gpu-*.json", list), 4);
	fclose(list);
	/* what each run is meant to show is there */
	snprintf(cmd, sizeof cmd, "cd '%s' && grep -q '\"source\": \"torchrun\"' run.json && "
		 "grep -q '\"reason\": \"signal\"' term.json && grep -q '\"open\": true' term.json && "
		 "grep -q '\"reason\": \"snapshot\"' kill.json && grep -q '\"reason\": \"live\"' "
		 "live.json && grep -q '\"timeline\"' run.json && ! grep -q '\"timeline\"' quiet.json",
		 dir);
	ck_assert_msg(system(cmd) == 0, "the real files are not what the runs should write (%s)", dir);
	if (gpu && *gpu) {
		snprintf(cmd, sizeof cmd, "cd '%s' && grep -q '\"gpu_pools\"' gpu-async.json && "
			 "grep -q '\"alloc_failed\"' gpu-oom.json", dir);
		ck_assert_msg(system(cmd) == 0, "the GPU files lack pools or failures (%s)", dir);
	}
	cross_check(listpath);
	json_decref(schema);
	t_rmtree(dir);
	free(dir);
}
END_TEST

static int golden_json(const struct dirent *e)
{
	size_t n = strlen(e->d_name);
	return n > 5 && !strcmp(e->d_name + n - 5, ".json");
}

/* Each golden input that is JSON: the schema accepts it exactly when memshim-format reads it. */
static int agree_in(json_t *schema, const char *sub, FILE *list, int *valid)
{
	char dir[4300], path[4600], why[512];
	struct dirent **names;
	snprintf(dir, sizeof dir, "%s/%s", t_golden(), sub);
	int n = scandir(dir, &names, golden_json, alphasort), seen = 0;
	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n; i++) {
		json_error_t je;
		struct mf_file f;
		char *err;
		size_t len;
		snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
		free(names[i]);
		json_t *doc = json_load_file(path, 0, &je);
		if (!doc)
			continue; /* not JSON at all: nothing for a schema to say */
		int ok = t_schema_check(schema, doc, 0, why, sizeof why) == 0;
		FILE *e = open_memstream(&err, &len);
		int reads = mf_load(path, &f, e) == 0;
		fclose(e);
		ck_assert_msg(ok == reads, "%s: schema %s (%s), memshim-format %s (%s)", path,
			      ok ? "accepts" : "rejects", why, reads ? "reads it" : "does not", err);
		if (reads)
			mf_file_free(&f);
		if (ok) {
			fprintf(list, "%s\n", path);
			(*valid)++;
		}
		free(err);
		json_decref(doc);
		seen++;
	}
	free(names);
	return seen;
}

START_TEST(test_golden_inputs)
{
	json_t *schema = load_schema();
	char *dir = t_tmpdir(), listpath[4300];
	int valid = 0;
	snprintf(listpath, sizeof listpath, "%s/files.txt", dir);
	FILE *list = fopen(listpath, "w");
	ck_assert_ptr_nonnull(list);
	int seen = agree_in(schema, "in", list, &valid) + agree_in(schema, "in/run-old", list, &valid) +
		   agree_in(schema, "in/run-new", list, &valid);
	fclose(list);
	ck_assert_int_ge(seen, 40);
	ck_assert_int_ge(valid, 25);
	cross_check(listpath);
	json_decref(schema);
	t_rmtree(dir);
	free(dir);
}
END_TEST

/* The checker itself: each keyword the schema uses catches what it should. */
START_TEST(test_checker)
{
	static const char *const cases[][3] = { /* schema, instance, "1" when valid */
		{ "{\"type\": \"integer\"}", "3", "1" },
		{ "{\"type\": \"integer\"}", "3.0", "1" },
		{ "{\"type\": \"integer\"}", "3.5", "0" },
		{ "{\"type\": [\"string\", \"null\"]}", "null", "1" },
		{ "{\"type\": [\"string\", \"null\"]}", "1", "0" },
		{ "{\"const\": 1}", "1.0", "1" },
		{ "{\"const\": 1}", "2", "0" },
		{ "{\"enum\": [\"a\", \"b\"]}", "\"c\"", "0" },
		{ "{\"minimum\": 0}", "-1", "0" },
		{ "{\"required\": [\"a\"]}", "{\"b\": 1}", "0" },
		{ "{\"properties\": {\"a\": {\"type\": \"string\"}}}", "{\"a\": 1}", "0" },
		{ "{\"patternProperties\": {\"_mem_\": {\"type\": \"integer\"}}}", "{\"x_mem_y\": 1.5}", "0" },
		{ "{\"patternProperties\": {\"^p$\": {\"type\": \"integer\"}}}", "{\"xp\": 1.5}", "1" },
		{ "{\"additionalProperties\": false}", "{\"a\": 1}", "0" },
		{ "{\"items\": {\"type\": \"integer\"}}", "[1, \"x\"]", "0" },
		{ "{\"prefixItems\": [{\"type\": \"number\"}, {\"type\": \"integer\"}]}", "[0.5, 2]", "1" },
		{ "{\"prefixItems\": [{\"type\": \"number\"}, {\"type\": \"integer\"}]}", "[0.5, 2.5]", "0" },
		{ "{\"minItems\": 2, \"maxItems\": 2}", "[1]", "0" },
		{ "{\"minItems\": 2, \"maxItems\": 2}", "[1, 2, 3]", "0" },
		{ "{\"$defs\": {\"n\": {\"type\": \"null\"}}, \"$ref\": \"#/$defs/n\"}", "null", "1" },
		{ "{\"$defs\": {\"n\": {\"type\": \"null\"}}, \"$ref\": \"#/$defs/n\"}", "0", "0" },
		{ "{\"$ref\": \"#/$defs/nowhere\"}", "0", "0" },
		{ "{\"oneOf\": []}", "0", "0" }, /* a keyword this checker does not know */
	};
	char why[512];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		json_t *s = json_loads(cases[i][0], JSON_DECODE_ANY, NULL);
		json_t *v = json_loads(cases[i][1], JSON_DECODE_ANY, NULL);
		ck_assert_ptr_nonnull(s);
		ck_assert_ptr_nonnull(v);
		int ok = t_schema_check(s, v, 0, why, sizeof why) == 0;
		ck_assert_msg(ok == (cases[i][2][0] == '1'), "case %zu (%s on %s): %s", i, cases[i][0],
			      cases[i][1], ok ? "accepted" : why);
		json_decref(s);
		json_decref(v);
	}
	json_t *s = json_loads("{\"properties\": {\"a\": true}}", 0, NULL);
	json_t *v = json_loads("{\"a\": 1, \"b\": 2}", 0, NULL);
	ck_assert_int_eq(t_schema_check(s, v, 0, why, sizeof why), 0);
	ck_assert_int_eq(t_schema_check(s, v, 1, why, sizeof why), 1);
	ck_assert_str_eq(why, "/b: not described by the schema");
	json_decref(s);
	json_decref(v);
}
END_TEST

Suite *schema_suite(void)
{
	Suite *s = suite_create("schema");
	TCase *tc = tcase_create("schema");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_checker);
	tcase_add_test(tc, test_golden_inputs);
	tcase_add_test(tc, test_real_files);
	suite_add_tcase(s, tc);
	return s;
}
