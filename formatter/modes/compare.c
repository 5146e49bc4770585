/* --compare HF.json: Hugging Face's own memory metrics (its results files: all_results.json,
 * train_results.json, ...) beside memshim's for the same run, key by key.  The two measure different
 * things, so the table ends with what each column means. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const enum mf_align mf_cmp_align[] = { MF_LEFT, MF_RIGHT, MF_RIGHT, MF_RIGHT };
static const char *const mf_cmp_seps[] = { "  ", "  ", "  " };

static const char mf_cmp_units[] =
	"  Both columns as Hugging Face's log_metrics prints them: MB rounded down (v >> 20), times\n"
	"    as h:mm:ss.hh.\n";

static const char mf_cmp_legend[] =
	"  Hugging Face: CPU = change of the process's RSS (a thread polls it; pages the allocator\n"
	"    keeps count, short peaks between polls are missed); GPU = torch.cuda.memory_allocated\n"
	"    (tensors only).\n"
	"  memshim: CPU = exact live bytes of malloc + anonymous mmap (reservations: touched pages);\n"
	"    GPU = what the driver handed out (the caching allocator's reserve, cuBLAS/cuDNN\n"
	"    workspaces, NCCL buffers).\n"
	"  Runtimes: Hugging Face times its loop inside the method; memshim the whole call (the\n"
	"    method's setup and, with skip_memory_metrics=False, its tracker's start and stop), so\n"
	"    memshim's is the longer by those, not by a cost of its own.\n";

/* HF's file: a flat object of metrics (anything else is not a results file). */
static json_t *mf_load_hf(const char *path, FILE *err)
{
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	if (!j) {
		if (jerr.line > 0)
			fprintf(err, "memshim-format: %s: %s (line %d)\n", path, jerr.text, jerr.line);
		else
			fprintf(err, "memshim-format: %s: %s\n", path, jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		fprintf(err, "memshim-format: %s: not a Hugging Face results file (a JSON object of metrics)\n", path);
		json_decref(j);
		return NULL;
	}
	return j;
}

static char *mf_cmp_cell(const char *key, json_t *v)
{
	return v ? mf_hf_format_value(key, v) : mf_xstrdup("-");
}

/* memshim minus HF as the two columns show them (whole MB rounded down), when both are numbers;
 * a run time's in seconds as a timedelta. */
static char *mf_cmp_delta(const char *key, json_t *hf, json_t *ours)
{
	double a, b;
	if (!hf || !ours || !mf_num(hf, &a) || !mf_num(ours, &b))
		return mf_xstrdup("");
	if (!mf_is_mem_key(key))
		return mf_hf_runtime_change(b - a);
	return mf_xasprintf("%+.0fMB", floor(b / 1048576.0) - floor(a / 1048576.0));
}

static void mf_cmp_row(struct mf_table *t, const char *key, json_t *hf, json_t *ours)
{
	char *cells[4] = { mf_xstrdup(key), mf_cmp_cell(key, hf), mf_cmp_cell(key, ours), mf_cmp_delta(key, hf, ours) };
	mf_table_row(t, cells);
}

/* A row for KEY: a memory key of HF's, or a run time both have. */
static int mf_compared(const char *key, json_t *hf, json_t *ours)
{
	if (!json_object_get(hf, key))
		return 0;
	if (mf_is_mem_key(key))
		return 1;
	size_t n = strlen(key);
	return n > 8 && !strcmp(key + n - 8, "_runtime") && json_object_get(ours, key);
}

/* HF's init is Trainer.__init__; memshim's is the implicit one from the process's start when no
 * init target ran (MEMSHIM_STAGES named none): it then holds the imports too, which reads as a leak. */
static void mf_cmp_init_note(FILE *out, json_t *hf, const struct mf_file *f)
{
	size_t i;
	json_t *s;
	if (!json_object_get(hf, "init_mem_cpu_alloc_delta"))
		return;
	json_array_foreach(f->stages, i, s)
		if (!strcmp(json_string_value(json_object_get(s, "name")) ?: "", "init") &&
		    json_is_true(json_object_get(s, "implicit")))
			fputs("  init: Hugging Face's is Trainer.__init__; memshim's here ran from the process's start\n"
			      "    (no init target ran), so it holds the imports too: name init=Trainer.__init__ (the\n"
			      "    default stages do) to compare the same span.\n",
			      out);
}

int mf_compare(FILE *out, FILE *err, const char *hf_path, const struct mf_file *f)
{
	json_t *hf = mf_load_hf(hf_path, err);
	if (!hf)
		return MF_BAD;
	struct mf_table t;
	mf_table_init(&t, 4, mf_cmp_align, mf_cmp_seps);
	char *head[4] = { mf_xstrdup("key"), mf_xstrdup("Hugging Face"), mf_xstrdup("memshim"),
			  mf_xstrdup("memshim - HF") };
	mf_table_row(&t, head);
	/* in memshim's stage order, so the table reads like the dump */
	struct mf_groups gs;
	mf_group_metrics(f->file_metrics, f->stages, &gs);
	int rows = 0;
	json_t *done = json_object(); /* init's keys are folded into the first group as well */
	for (size_t g = 0; g < gs.n; g++)
		for (size_t i = 0; i < gs.g[g].nkeys; i++) {
			const char *k = gs.g[g].keys[i];
			if (mf_compared(k, hf, f->file_metrics) && !json_object_get(done, k)) {
				mf_cmp_row(&t, k, json_object_get(hf, k), json_object_get(f->file_metrics, k));
				json_object_set_new(done, k, json_true());
				rows++;
			}
		}
	json_decref(done);
	const char *key;
	json_t *v;
	json_object_foreach(hf, key, v) /* HF's memory keys memshim does not have */
		if (mf_is_mem_key(key) && !json_object_get(f->file_metrics, key)) {
			mf_cmp_row(&t, key, v, NULL);
			rows++;
		}
	fprintf(out, "***** memory: Hugging Face's tracker vs memshim *****\n");
	if (rows) {
		mf_table_print(out, &t, "  ");
		fputs(mf_cmp_units, out);
		mf_cmp_init_note(out, hf, f);
	} else {
		fprintf(out, "  no memory metrics in %s (was skip_memory_metrics=False?)\n", hf_path);
	}
	fputs(mf_cmp_legend, out);
	mf_table_free(&t);
	mf_groups_free(&gs);
	json_decref(hf);
	return MF_OK;
}
