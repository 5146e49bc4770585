/* --csv: one row per process and stage for spreadsheets and scripts (RFC 4180: CRLF line ends,
 * fields with a comma, quote or line break quoted, quotes doubled). Bytes and seconds unformatted. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"

#include <stdlib.h>
#include <string.h>

static const char *const mf_csv_head[] = { "file",
					   "pid",
					   "rank",
					   "stage",
					   "calls",
					   "cpu_alloc_delta",
					   "cpu_peaked_delta",
					   "gpu_alloc_delta",
					   "gpu_peaked_delta",
					   "runtime",
					   "open" };
#define MF_CSV_COLS (sizeof mf_csv_head / sizeof mf_csv_head[0])

void mf_csv_field(FILE *out, const char *s, int last)
{
	if (strpbrk(s, ",\"\r\n")) {
		fputc('"', out);
		for (; *s; s++) {
			if (*s == '"')
				fputc('"', out);
			fputc(*s, out);
		}
		fputc('"', out);
	} else {
		fputs(s, out);
	}
	fputs(last ? "\r\n" : ",", out);
}

/* A number as text: integers exactly, reals as Python's repr (shortest digits that read back). */
static char *mf_csv_num(json_t *v)
{
	char buf[MF_REPR_MAX];
	if (json_is_integer(v))
		return mf_xasprintf("%lld", (long long)json_integer_value(v));
	if (!json_is_real(v))
		return mf_xstrdup("");
	mf_py_repr(json_real_value(v), buf);
	return mf_xstrdup(buf);
}

/* A finished stage's value from the flat key the dump shows, else its entry; an open stage's from
 * its entry (the current call so far). */
static json_t *mf_csv_value(const struct mf_file *f, json_t *s, const char *flat, const char *comp, const char *member)
{
	const char *name = json_string_value(json_object_get(s, "name"));
	int open = json_is_true(json_object_get(s, "open"));
	json_t *v = NULL;
	if (!open) {
		char *key = mf_xasprintf("%s_%s", name, flat);
		v = json_object_get(f->file_metrics, key);
		free(key);
	}
	if (!json_is_number(v))
		v = comp ? mf_span_value(s, comp, member) : json_object_get(s, member);
	return json_is_number(v) ? v : NULL;
}

static void mf_csv_row(FILE *out, const struct mf_file *f, json_t *s)
{
	char *cells[MF_CSV_COLS];
	json_t *calls = json_object_get(s, "calls");
	cells[0] = mf_xstrdup(f->path);
	cells[1] = mf_xasprintf("%lld", f->pid);
	cells[2] = f->has_rank ? mf_xasprintf("%lld", f->rank) : mf_xstrdup("");
	cells[3] = mf_xstrdup(json_string_value(json_object_get(s, "name")));
	cells[4] = mf_csv_num(json_is_integer(calls) ? calls : mf_csv_value(f, s, "calls", NULL, "calls"));
	cells[5] = mf_csv_num(mf_csv_value(f, s, "mem_cpu_alloc_delta", "cpu", "alloc_delta"));
	cells[6] = mf_csv_num(mf_csv_value(f, s, "mem_cpu_peaked_delta", "cpu", "peaked_delta"));
	cells[7] = mf_csv_num(mf_csv_value(f, s, "mem_gpu_alloc_delta", "gpu", "alloc_delta"));
	cells[8] = mf_csv_num(mf_csv_value(f, s, "mem_gpu_peaked_delta", "gpu", "peaked_delta"));
	cells[9] = mf_csv_num(mf_csv_value(f, s, "runtime", NULL, "runtime"));
	cells[10] = mf_xstrdup(json_is_true(json_object_get(s, "open")) ? "true" : "false");
	for (size_t c = 0; c < MF_CSV_COLS; c++) {
		mf_csv_field(out, cells[c], c + 1 == MF_CSV_COLS);
		free(cells[c]);
	}
}

void mf_csv(FILE *out, const struct mf_file *files, size_t n, const char *only_stage)
{
	for (size_t c = 0; c < MF_CSV_COLS; c++)
		mf_csv_field(out, mf_csv_head[c], c + 1 == MF_CSV_COLS);
	for (size_t i = 0; i < n; i++) {
		size_t j;
		json_t *s;
		json_array_foreach(files[i].stages, j, s)
			if (!only_stage || !strcmp(only_stage, json_string_value(json_object_get(s, "name"))))
				mf_csv_row(out, &files[i], s);
	}
}
