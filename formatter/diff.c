/* --diff OLD NEW: per key old, new and change; exit 1 when a memory metric grew past the threshold. */
#include "mf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const enum mf_align mf_diff_align[] = { MF_LEFT, MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_RIGHT,
					       MF_LEFT };
static const char *const mf_diff_seps[] = { "  ", "  ", "  ", "  ", "  " };

/* One part: "N%" or N with a byte unit; -1 when bad. */
static int mf_parse_part(const char *text, size_t n, double *value, int *pct)
{
	static const struct { const char *unit; double scale; } units[] = {
		{ "%", 1 }, { "B", 1 }, { "KB", 1024.0 }, { "KiB", 1024.0 }, { "MB", 1048576.0 },
		{ "MiB", 1048576.0 }, { "GB", 1073741824.0 }, { "GiB", 1073741824.0 },
	};
	char buf[64], *end;
	if (n == 0 || n >= sizeof buf)
		return -1;
	memcpy(buf, text, n);
	buf[n] = '\0';
	double x = strtod(buf, &end);
	if (end == buf || !isfinite(x) || x < 0)
		return -1;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (!strcmp(end, units[i].unit)) {
			*value = x * units[i].scale;
			*pct = i == 0;
			return 0;
		}
	return -1;
}

int mf_parse_threshold(const char *text, struct mf_threshold *t)
{
	t->pct = t->bytes = -1;
	for (const char *p = text;; p++) {
		size_t n = strcspn(p, ",");
		double v;
		int pct;
		if (mf_parse_part(p, n, &v, &pct) || (pct ? t->pct : t->bytes) >= 0)
			return -1; /* bad, or the same kind twice */
		*(pct ? &t->pct : &t->bytes) = v;
		p += n;
		if (!*p)
			return 0;
	}
}

/* NEW - OLD keeping integers exact when both are integers. */
static json_t *mf_delta(json_t *a, json_t *b)
{
	json_int_t d;
	if (json_is_integer(a) && json_is_integer(b) &&
	    !__builtin_sub_overflow(json_integer_value(b), json_integer_value(a), &d))
		return json_integer(d);
	return json_real(json_number_value(b) - json_number_value(a));
}

static char *mf_change(const char *key, json_t *a, json_t *b)
{
	json_t *d = mf_delta(a, b);
	char *text = mf_format_value(key, d);
	if (json_number_value(d) > 0 && text[0] != '-') {
		char *plus = mf_xasprintf("+%s", text);
		free(text);
		text = plus;
	}
	json_decref(d);
	return text;
}

static char *mf_percent(double a, double b)
{
	if (a == 0)
		return mf_xstrdup(b == 0 ? "0.0%" : "n/a");
	if (a == b)
		return mf_xstrdup("0.0%");
	return mf_xasprintf("%+.1f%%", (b - a) / fabs(a) * 100.0);
}

/* Growth past every part of the threshold: percent of the old magnitude and bytes. */
static int mf_regressed(const char *key, double a, double b, const struct mf_opts *o)
{
	if (!mf_is_mem_key(key))
		return 0;
	const struct mf_threshold *t = &o->threshold;
	return (t->pct < 0 || b - a > t->pct / 100.0 * fabs(a)) && (t->bytes < 0 || b - a > t->bytes);
}

/* One row; returns 1 when it is a regression. */
static int mf_diff_row(struct mf_table *t, const char *key, json_t *a, json_t *b,
		       const struct mf_opts *o)
{
	double x, y;
	int bad = 0;
	char *cells[6] = { mf_xstrdup(key), a ? mf_format_value(key, a) : mf_xstrdup("-"),
			   b ? mf_format_value(key, b) : mf_xstrdup("-"), NULL, NULL, NULL };
	if (!a || !b) {
		cells[3] = mf_xstrdup(a ? "removed" : "added");
	} else if (mf_num(a, &x) && mf_num(b, &y)) {
		cells[3] = mf_change(key, a, b);
		cells[4] = mf_percent(x, y);
		bad = mf_regressed(key, x, y, o);
		if (bad)
			cells[5] = mf_xasprintf("grew past %s", o->threshold_text);
	} else if (!json_equal(a, b)) {
		cells[3] = mf_xstrdup("changed");
	}
	mf_table_row(t, cells);
	return bad;
}

static void mf_note(char **list, const char *key)
{
	char *s = *list ? mf_xasprintf("%s, %s", *list, key) : mf_xstrdup(key);
	free(*list);
	*list = s;
}

static int mf_diff_group(FILE *out, struct mf_file *f, const struct mf_group *g,
			 const struct mf_opts *o, char **regressions)
{
	struct mf_table t;
	int bad = 0;
	fprintf(out, "\n***** %s metrics *****\n", g->name);
	mf_table_init(&t, 6, mf_diff_align, mf_diff_seps);
	char *head[6] = { mf_xstrdup("key"), mf_xstrdup("old"), mf_xstrdup("new"),
			  mf_xstrdup("change"), mf_xstrdup("%"), NULL };
	mf_table_row(&t, head);
	for (size_t i = 0; i < g->nkeys; i++) {
		const char *k = g->keys[i];
		if (mf_diff_row(&t, k, json_object_get(f[0].metrics, k),
				json_object_get(f[1].metrics, k), o)) {
			mf_note(regressions, k);
			bad++;
		}
	}
	mf_table_print(out, &t, "  ");
	mf_table_free(&t);
	return bad;
}

/* Stages of OLD that NEW never ran (a renamed function, a typo in MEMSHIM_STAGES): each is a
 * regression unless --allow-missing. */
static int mf_missing_stages(FILE *out, struct mf_file *oldf, struct mf_file *newf, const struct mf_opts *o,
			     char **regressions)
{
	size_t i;
	json_t *s;
	int bad = 0;
	json_array_foreach(oldf->stages, i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		if (!name || mf_has_stage(newf, name) || (o->stage && strcmp(o->stage, name)))
			continue;
		fprintf(out, "\nmemshim: stage %s is in the old run but not in the new one%s\n", name,
			o->allow_missing ? " (allowed)" : "");
		if (!o->allow_missing) {
			char *what = mf_xasprintf("stage %s missing", name);
			mf_note(regressions, what);
			free(what);
			bad++;
		}
	}
	return bad;
}

int mf_diff(FILE *out, struct mf_file *oldf, struct mf_file *newf,
	    const struct mf_opts *o)
{
	struct mf_file pair[2] = { *oldf, *newf };
	struct mf_groups u;
	char *regressions = NULL;
	int bad = 0;
	fprintf(out, "memshim diff: old %s, new %s, threshold %s\n", oldf->path, newf->path,
		o->threshold_text);
	for (int i = 0; i < 2; i++)
		if (!pair[i].complete)
			mf_print_status(out, &pair[i]);
	mf_group_union(pair, 2, &u);
	for (size_t j = 0; j < u.n; j++)
		if (!o->stage || !strcmp(o->stage, u.g[j].name))
			bad += mf_diff_group(out, pair, &u.g[j], o, &regressions);
	mf_groups_free(&u);
	bad += mf_missing_stages(out, oldf, newf, o, &regressions);
	if (bad)
		fprintf(out, "\nmemshim: %d regression%s (threshold %s): %s\n", bad,
			bad == 1 ? "" : "s", o->threshold_text, regressions);
	else
		fprintf(out, "\nmemshim: no memory metric grew past the threshold (%s)\n",
			o->threshold_text);
	free(regressions);
	return bad ? MF_REGRESSION : MF_OK;
}
