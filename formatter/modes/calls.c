/* --calls: per stage, the smallest and largest value over its calls, from the stage's history. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"

#include <stdlib.h>
#include <string.h>

/* History fields and the metric key suffix that gives each its formatting. */
static const char *const mf_fields[][2] = {
	{ "cpu_alloc_delta", "_mem_cpu_alloc_delta" },
	{ "cpu_peaked_delta", "_mem_cpu_peaked_delta" },
	{ "gpu_alloc_delta", "_mem_gpu_alloc_delta" },
	{ "gpu_peaked_delta", "_mem_gpu_peaked_delta" },
	{ "runtime", "_runtime" },
};

static const enum mf_align mf_calls_align[] = { MF_LEFT, MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_RIGHT };
static const char *const mf_calls_seps[] = { "  ", "  ", "  ", "  " };

/* Index of the history entry with the smallest (WANT_MAX=0) or largest value of FIELD, or -1. */
static long mf_extreme(json_t *hist, const char *field, int want_max)
{
	long best = -1;
	double bv = 0, x;
	size_t i;
	json_t *h;
	json_array_foreach(hist, i, h) {
		if (!mf_num(json_object_get(h, field), &x))
			continue;
		if (best < 0 || (want_max ? x > bv : x < bv))
			best = (long)i, bv = x;
	}
	return best;
}

static char *mf_call_no(json_t *h, long idx)
{
	json_t *c = json_object_get(h, "call");
	if (json_is_integer(c))
		return mf_xasprintf("%lld", (long long)json_integer_value(c));
	return mf_xasprintf("%ld", idx + 1);
}

static void mf_calls_row(struct mf_table *t, const char *stage, json_t *hist, size_t f)
{
	long lo = mf_extreme(hist, mf_fields[f][0], 0), hi = mf_extreme(hist, mf_fields[f][0], 1);
	if (lo < 0)
		return;
	char *key = mf_xasprintf("%s%s", stage, mf_fields[f][1]);
	json_t *hl = json_array_get(hist, (size_t)lo), *hh = json_array_get(hist, (size_t)hi);
	char *cells[5] = { key, mf_format_value(key, json_object_get(hl, mf_fields[f][0])), mf_call_no(hl, lo),
			   mf_format_value(key, json_object_get(hh, mf_fields[f][0])), mf_call_no(hh, hi) };
	mf_table_row(t, cells);
}

static void mf_print_needed(FILE *out, const char *stage, json_t *need, const char *dev)
{
	char call_key[16];
	json_t *v = json_object_get(need, dev);
	if (!json_is_number(v))
		return;
	snprintf(call_key, sizeof call_key, "%s_call", dev);
	char *key = mf_xasprintf("%s_mem_%s", stage, dev); /* a _mem_ key: printed as MB */
	char *text = mf_format_value(key, v);
	fprintf(out, "  most %s memory needed (alloc + peaked): %s in call %lld\n", strcmp(dev, "cpu") ? "GPU" : "CPU",
		text, (long long)json_integer_value(json_object_get(need, call_key)));
	free(text);
	free(key);
}

/* "  calls that did not return: 3 raised KeyboardInterrupt, 7 unwound": the kept calls an exception
 * (or a longjmp) ended, at most ten named. */
static void mf_print_unreturned_calls(FILE *out, json_t *hist)
{
	size_t i, n = 0;
	json_t *h;
	json_array_foreach(hist, i, h) {
		const char *ended = json_string_value(json_object_get(h, "ended"));
		if (!ended || !strcmp(ended, "returned") || !strcmp(ended, "open_at_exit"))
			continue;
		if (n++ == 10)
			continue;
		char *call = mf_call_no(h, (long)i);
		const char *exc = json_string_value(json_object_get(h, "exception"));
		fprintf(out, "%s%s %s%s%s", n > 1 ? ", " : "  calls that did not return: ", call, ended, exc ? " " : "",
			exc ? exc : "");
		free(call);
	}
	if (n > 10)
		fprintf(out, ", … %zu more", n - 10);
	if (n)
		fputc('\n', out);
}

static void mf_print_stage_calls(FILE *out, json_t *s)
{
	const char *name = json_string_value(json_object_get(s, "name"));
	json_t *hist = json_object_get(s, "history"), *need = json_object_get(s, "max_needed");
	json_t *calls = json_object_get(s, "calls"), *dropped = json_object_get(s, "history_dropped");
	struct mf_table t;
	fprintf(out, "\n***** %s%s calls *****\n", name, json_is_true(json_object_get(s, "open")) ? " (open)" : "");
	fprintf(out, "  calls: %lld, %zu kept in history", (long long)json_integer_value(calls), json_array_size(hist));
	if (json_integer_value(dropped) > 0)
		fprintf(out, ", %lld not kept (min/max cover the kept calls only)",
			(long long)json_integer_value(dropped));
	fputc('\n', out);
	if (json_is_true(json_object_get(s, "open"))) {
		char *line = mf_open_line(s, 0);
		fprintf(out, "  %s\n", line);
		free(line);
	}
	mf_table_init(&t, 5, mf_calls_align, mf_calls_seps);
	char *head[5] = { mf_xstrdup("key"), mf_xstrdup("min"), mf_xstrdup("call"), mf_xstrdup("max"),
			  mf_xstrdup("call") };
	mf_table_row(&t, head);
	for (size_t f = 0; f < sizeof mf_fields / sizeof mf_fields[0]; f++)
		mf_calls_row(&t, name, hist, f);
	if (t.nrows > 1)
		mf_table_print(out, &t, "  ");
	mf_table_free(&t);
	if (mf_calls_of(s) <= 0) /* no finished call: nothing was needed yet ("in call 0") */
		return;
	mf_print_needed(out, name, need, "cpu");
	if (json_array_size(hist) && json_object_get(json_array_get(hist, 0), "gpu_alloc_delta"))
		mf_print_needed(out, name, need, "gpu");
	mf_print_unreturned_calls(out, hist);
}

void mf_print_calls(FILE *out, json_t *stages, const char *only_stage)
{
	size_t i;
	json_t *s;
	json_array_foreach(stages, i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		if (only_stage && strcmp(name, only_stage))
			continue;
		if (json_is_array(json_object_get(s, "history")))
			mf_print_stage_calls(out, s);
	}
}
