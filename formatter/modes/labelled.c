/* The calls a program labelled (memshim_stage_begin_labelled; pytest --memshim labels each test's
 * phases with its node id): one short section after the stages, those that needed most first. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"

#include <stdlib.h>
#include <string.h>

#define MF_LABELLED_SHOWN 10 /* without --calls */

static const enum mf_align mf_labelled_align[] = { MF_LEFT, MF_RIGHT, MF_RIGHT, MF_LEFT };
static const char *const mf_labelled_seps[] = { "  ", "  ", "  " };

/* alloc + peaked of COMP in call C, or -1 when it has no such component. */
static double mf_labelled_need(json_t *c, const char *comp)
{
	double a, p;
	json_t *o = json_object_get(c, comp);
	if (!mf_num(json_object_get(o, "alloc_delta"), &a) || !mf_num(json_object_get(o, "peaked_delta"), &p))
		return -1;
	return a + p;
}

static json_t *mf_labelled_sorted;

static int mf_labelled_cmp(const void *a, const void *b)
{
	double x = mf_labelled_need(json_array_get(mf_labelled_sorted, *(const size_t *)a), "cpu");
	double y = mf_labelled_need(json_array_get(mf_labelled_sorted, *(const size_t *)b), "cpu");
	return x < y ? 1 : x > y ? -1 : *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static char *mf_labelled_cell(json_t *c, const char *comp)
{
	double need = mf_labelled_need(c, comp);
	if (need < 0)
		return mf_xstrdup("-");
	json_t *v = json_real(need);
	char *text = mf_format_value("labelled_mem_cpu_peaked_delta", v); /* a _mem_ key: as the dump */
	json_decref(v);
	return text;
}

void mf_print_labelled(FILE *out, const struct mf_file *f, const char *only_stage, int all)
{
	json_t *calls = json_object_get(f->root, "labelled_calls"), *c;
	size_t n = 0, i, *order = calloc(json_array_size(calls) + 1, sizeof *order);
	json_array_foreach(calls, i, c) {
		const char *stage = json_string_value(json_object_get(c, "stage"));
		if (stage && json_is_string(json_object_get(c, "label")) && (!only_stage || !strcmp(stage, only_stage)))
			order[n++] = i;
	}
	if (n) {
		mf_labelled_sorted = calls;
		qsort(order, n, sizeof *order, mf_labelled_cmp);
		size_t shown = all || n <= MF_LABELLED_SHOWN ? n : MF_LABELLED_SHOWN;
		fprintf(out, "\n***** labelled calls *****\n  %zu labelled call%s", n, n == 1 ? "" : "s");
		if (shown < n)
			fprintf(out, ", the %zu that needed most CPU memory (--calls: all)", shown);
		fputs("; needed = alloc + peaked delta\n", out);
		struct mf_table t;
		mf_table_init(&t, 4, mf_labelled_align, mf_labelled_seps);
		char *head[4] = { mf_xstrdup("stage"), mf_xstrdup("cpu"), mf_xstrdup("gpu"), mf_xstrdup("label") };
		mf_table_row(&t, head);
		for (i = 0; i < shown; i++) {
			c = json_array_get(calls, order[i]);
			char *row[4] = { mf_xstrdup(json_string_value(json_object_get(c, "stage"))),
					 mf_labelled_cell(c, "cpu"), mf_labelled_cell(c, "gpu"),
					 mf_xstrdup(json_string_value(json_object_get(c, "label"))) };
			mf_table_row(&t, row);
		}
		mf_table_print(out, &t, "  ");
		mf_table_free(&t);
	}
	free(order);
}
