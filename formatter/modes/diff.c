/* --diff OLD NEW: per key old, new and change; exit 1 when a memory metric grew past the threshold. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "input/input.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const enum mf_align mf_diff_align[] = { MF_LEFT, MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_LEFT };
static const char *const mf_diff_seps[] = { "  ", "  ", "  ", "  ", "  " };

/* One part: "N%" or N with a byte unit; -1 when bad. */
static int mf_parse_part(const char *text, size_t n, double *value, int *pct)
{
	static const struct {
		const char *unit;
		double scale;
	} units[] = {
		{ "%", 1 },          { "B", 1 },           { "KB", 1024.0 },       { "KiB", 1024.0 },
		{ "MB", 1048576.0 }, { "MiB", 1048576.0 }, { "GB", 1073741824.0 }, { "GiB", 1073741824.0 },
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

/* NEW - OLD as the column shows it; a memory change under 1 MiB in KB or bytes, not "+0MB". */
static char *mf_change(const char *key, json_t *a, json_t *b)
{
	json_t *d = mf_delta(a, b);
	char *text = mf_is_mem_key(key) ? mf_bytes_change(json_number_value(d)) : mf_format_value(key, d);
	if (json_number_value(d) > 0 && text[0] != '-') {
		char *plus = mf_xasprintf("+%s", text);
		free(text);
		text = plus;
	}
	json_decref(d);
	return text;
}

/* The change in percent of OLD; "n/a" from a zero base, and for memory from one under 1 MiB,
 * where a few KB would read as thousands of percent. */
static char *mf_percent(const char *key, double a, double b)
{
	if (a == b)
		return mf_xstrdup("0.0%");
	if (a == 0 || (mf_is_mem_key(key) && fabs(a) < 1048576.0))
		return mf_xstrdup("n/a");
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

/* One row; returns 1 when it is a regression. SO_FAR: a value is the numbers so far of a stage
 * open in a snapshot, which is shown but never gated. */
static int mf_diff_row(struct mf_table *t, const char *key, json_t *a, json_t *b, int so_far, const struct mf_opts *o)
{
	double x, y;
	int bad = 0;
	char *cells[6] = { mf_xstrdup(key),
			   a ? mf_format_value(key, a) : mf_xstrdup("-"),
			   b ? mf_format_value(key, b) : mf_xstrdup("-"),
			   NULL,
			   NULL,
			   NULL };
	if (!a || !b) {
		cells[3] = mf_xstrdup(a ? "removed" : "added");
	} else if (mf_num(a, &x) && mf_num(b, &y)) {
		cells[3] = mf_change(key, a, b);
		cells[4] = mf_percent(key, x, y);
		bad = !so_far && mf_regressed(key, x, y, o);
		if (bad)
			cells[5] = mf_xasprintf("grew past %s", o->threshold_text);
	} else if (!json_equal(a, b)) {
		cells[3] = mf_xstrdup("changed");
	}
	if (so_far && !cells[5])
		cells[5] = mf_xstrdup(mf_is_mem_key(key) ? "so far, not gated" : "so far");
	mf_table_row(t, cells);
	return bad;
}

static void mf_note(char **list, const char *prefix, const char *key)
{
	char *s = *list ? mf_xasprintf("%s, %s%s", *list, prefix, key) : mf_xasprintf("%s%s", prefix, key);
	free(*list);
	*list = s;
}

/* The value of KEY is a stage's numbers so far, not in the file as written. */
static int mf_so_far(const struct mf_file *f, const char *key)
{
	return json_object_get(f->metrics, key) && !json_object_get(f->file_metrics, key);
}

static const char *mf_open_note(struct mf_file *f, const char *name)
{
	int o = mf_open_stage(f[0].stages, name) != NULL, n = mf_open_stage(f[1].stages, name) != NULL;
	return o && n ? " (open in old and new)" : o ? " (open in old)" : n ? " (open in new)" : "";
}

static int mf_diff_group(FILE *out, struct mf_file *f, const struct mf_group *g, const struct mf_opts *o,
			 const char *prefix, char **regressions)
{
	struct mf_table t;
	int bad = 0;
	fprintf(out, "\n***** %s metrics%s *****\n", g->name, mf_open_note(f, g->name));
	mf_table_init(&t, 6, mf_diff_align, mf_diff_seps);
	char *head[6] = { mf_xstrdup("key"),    mf_xstrdup("old"), mf_xstrdup("new"),
			  mf_xstrdup("change"), mf_xstrdup("%"),   NULL };
	mf_table_row(&t, head);
	for (size_t i = 0; i < g->nkeys; i++) {
		const char *k = g->keys[i];
		if (mf_diff_row(&t, k, json_object_get(f[0].metrics, k), json_object_get(f[1].metrics, k),
				mf_so_far(&f[0], k) || mf_so_far(&f[1], k), o)) {
			mf_note(regressions, prefix, k);
			bad++;
		}
	}
	mf_table_print(out, &t, "  ");
	mf_table_free(&t);
	return bad;
}

static int mf_gone(FILE *out, const char *name, const char *why, const struct mf_opts *o, const char *prefix,
		   const char *what, char **regressions)
{
	fprintf(out, "\nmemshim: %sstage %s %s%s\n", prefix, name, why, o->allow_missing ? " (allowed)" : "");
	if (o->allow_missing)
		return 0;
	char *note = mf_xasprintf("stage %s %s", name, what);
	mf_note(regressions, prefix, note);
	free(note);
	return 1;
}

/* A finished call of stage NAME is in F as written. */
static int mf_finished(const struct mf_file *f, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(f->stages, i, s)
		if (!strcmp(json_string_value(json_object_get(s, "name")), name) && mf_calls_of(s) > 0)
			return 1;
	char *key = mf_xasprintf("%s_runtime", name);
	int found = json_object_get(f->file_metrics, key) != NULL;
	free(key);
	return found;
}

/* Stages of OLD that NEW never ran (a renamed function, a typo in MEMSHIM_STAGES), or that NEW
 * never finished (open in its snapshot: the run died in it): each is a regression unless
 * --allow-missing. */
static int mf_missing_stages(FILE *out, struct mf_file *oldf, struct mf_file *newf, const struct mf_opts *o,
			     const char *prefix, char **regressions)
{
	size_t i;
	json_t *s;
	int bad = 0;
	json_array_foreach(oldf->stages, i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		json_t *open = mf_open_stage(newf->stages, name);
		if (!name || (o->stage && strcmp(o->stage, name)))
			continue;
		if (!mf_has_stage(newf, name))
			bad += mf_gone(out, name, "is in the old run but not in the new one", o, prefix, "missing",
				       regressions);
		else if (open && mf_calls_of(open) == 0 && mf_finished(oldf, name))
			bad += mf_gone(out, name,
				       "finished in the old run but not in the new one (still "
				       "open when its snapshot was written)",
				       o, prefix, "unfinished", regressions);
	}
	return bad;
}

/* OLD against NEW: status lines, a table per group, stages gone; regressions go to *REGRESSIONS,
 * each named after PREFIX ("rank 1 "). */
static int mf_diff_pair(FILE *out, struct mf_file *oldf, struct mf_file *newf, const struct mf_opts *o,
			const char *prefix, int stages_too, char **regressions)
{
	struct mf_file pair[2] = { *oldf, *newf };
	struct mf_groups u;
	int bad = 0;
	for (int i = 0; i < 2; i++)
		if (!pair[i].complete)
			mf_print_status(out, &pair[i]);
	mf_group_union(pair, 2, &u);
	for (size_t j = 0; j < u.n; j++)
		if (!o->stage || !strcmp(o->stage, u.g[j].name))
			bad += mf_diff_group(out, pair, &u.g[j], o, prefix, regressions);
	mf_groups_free(&u);
	if (stages_too)
		bad += mf_missing_stages(out, oldf, newf, o, prefix, regressions);
	return bad;
}

static int mf_diff_verdict(FILE *out, int bad, const char *regressions, const struct mf_opts *o)
{
	if (bad)
		fprintf(out, "\nmemshim: %d regression%s (threshold %s): %s\n", bad, bad == 1 ? "" : "s",
			o->threshold_text, regressions);
	else
		fprintf(out, "\nmemshim: no memory metric grew past the threshold (%s)\n", o->threshold_text);
	return bad ? MF_REGRESSION : MF_OK;
}

int mf_diff(FILE *out, struct mf_file *oldf, struct mf_file *newf, const struct mf_opts *o)
{
	char *regressions = NULL;
	fprintf(out, "memshim diff: old %s, new %s, threshold %s\n", oldf->path, newf->path, o->threshold_text);
	int bad = mf_diff_pair(out, oldf, newf, o, "", 1, &regressions);
	int rc = mf_diff_verdict(out, bad, regressions, o);
	free(regressions);
	return rc;
}

static struct mf_file *mf_rank_file(struct mf_file *files, size_t n, const int *keep, long long r)
{
	for (size_t i = 0; i < n; i++)
		if (keep[i] && files[i].rank == r)
			return &files[i];
	return NULL;
}

/* The largest value of every numeric key over the ranks (as written: numbers so far of open
 * stages are left out), with every stage name, as one file. */
static void mf_max_file(struct mf_file *files, size_t n, const int *keep, const char *label, struct mf_file *out,
			FILE *err)
{
	json_t *max = json_object(), *stages = json_array(), *names = json_object();
	for (size_t i = 0; i < n; i++) {
		const char *key;
		json_t *v, *s;
		double x, y;
		size_t j;
		if (!keep[i])
			continue;
		json_object_foreach(files[i].file_metrics, key, v) {
			json_t *m = json_object_get(max, key);
			if (mf_num(v, &x) && (!m || (mf_num(m, &y) && x > y)))
				json_object_set(max, key, v);
		}
		json_array_foreach(files[i].stages, j, s) {
			const char *name = json_string_value(json_object_get(s, "name"));
			if (json_object_get(names, name))
				continue;
			json_object_set_new(names, name, json_true());
			json_array_append_new(stages,
					      json_pack("{s:s, s:O}", "name", name, "implicit",
							json_object_get(s, "implicit") ? json_object_get(s, "implicit")
										       : json_false()));
		}
	}
	json_decref(names);
	json_t *root = json_pack("{s:s, s:i, s:i, s:o, s:o}", "format", "memshim-metrics", "version", MF_VERSION, "pid",
				 0, "metrics", max, "stages", stages);
	if (!root || mf_load_json(label, root, out, err))
		mf_oom();
}

/* Ranks named in one run but not the other; with a prefix for the lines. */
static int mf_lone_ranks(FILE *out, struct mf_file *a, size_t na, const int *ka, struct mf_file *b, size_t nb,
			 const int *kb, int old_side, const struct mf_opts *o, char **regressions)
{
	int bad = 0;
	for (size_t i = 0; i < na; i++) {
		if (!ka[i] || !a[i].has_rank || mf_rank_file(b, nb, kb, a[i].rank))
			continue;
		if (!old_side) {
			fprintf(out, "\nmemshim: rank %lld is in the new run only (%s)\n", a[i].rank, a[i].path);
			continue;
		}
		fprintf(out, "\nmemshim: rank %lld is in the old run (%s) but not in the new one%s\n", a[i].rank,
			a[i].path, o->allow_missing ? " (allowed)" : "");
		if (!o->allow_missing) {
			char *what = mf_xasprintf("rank %lld missing", a[i].rank);
			mf_note(regressions, "", what);
			free(what);
			bad++;
		}
	}
	return bad;
}

static char *mf_side_text(struct mf_file *files, size_t n, size_t used, int ranked)
{
	return mf_xasprintf("%zu file%s (%zu %s)", n, n == 1 ? "" : "s", used,
			    ranked ? (used == 1 ? "rank" : "ranks") : "compared");
}

int mf_diff_runs(FILE *out, const struct mf_set *olds, const struct mf_set *news, const struct mf_opts *o, FILE *err)
{
	struct mf_file *oldf = olds->f, *newf = news->f;
	size_t nold = olds->n, nnew = news->n;
	const int *ko = olds->keep, *kn = news->keep;
	size_t uo = nold - olds->left_out, un = nnew - news->left_out;
	int ro = mf_count_ranks(oldf, nold) > 0, rn = mf_count_ranks(newf, nnew) > 0, bad = 0;
	char *regressions = NULL;
	if (ro != rn || (!ro && (uo != 1 || un != 1))) {
		fprintf(err,
			"memshim-format: --diff: cannot match the processes of the two runs (%s); "
			"compare ranks with ranks, or one file with one file\n",
			ro != rn ? "one has ranks, the other none" : "no ranks and several processes");
		return MF_BAD;
	}
	char *so = mf_side_text(oldf, nold, uo, ro), *sn = mf_side_text(newf, nnew, un, rn);
	fprintf(out, "memshim diff: old %s, new %s, threshold %s\n", so, sn, o->threshold_text);
	free(so), free(sn);
	if (uo < nold || un < nnew) {
		char *lo = mf_proc_list(oldf, nold, ko), *ln = mf_proc_list(newf, nnew, kn);
		fprintf(out, "memshim: left out %s: old %s; new %s\n",
			ro ? "the processes without a rank of their own" : "the launchers and shells",
			*lo ? lo : "none", *ln ? ln : "none");
		free(lo), free(ln);
	}
	for (size_t i = 0; i < nold; i++) {
		struct mf_file *a = &oldf[i], *b = NULL;
		if (!ko[i])
			continue;
		if (ro)
			b = mf_rank_file(newf, nnew, kn, a->rank);
		else
			for (size_t j = 0; j < nnew; j++)
				b = kn[j] ? &newf[j] : b;
		if (!b)
			continue; /* a rank gone from the new run: below */
		char *prefix = ro ? mf_xasprintf("rank %lld ", a->rank) : mf_xstrdup("");
		if (ro)
			fprintf(out, "\n==> rank %lld: old %s, new %s <==\n", a->rank, a->path, b->path);
		else
			fprintf(out, "\n==> old %s, new %s <==\n", a->path, b->path);
		bad += mf_diff_pair(out, a, b, o, prefix, 1, &regressions);
		free(prefix);
	}
	if (ro) {
		bad += mf_lone_ranks(out, oldf, nold, ko, newf, nnew, kn, 1, o, &regressions);
		mf_lone_ranks(out, newf, nnew, kn, oldf, nold, ko, 0, o, &regressions);
		struct mf_file mo, mn;
		mf_max_file(oldf, nold, ko, "max over old ranks", &mo, err);
		mf_max_file(newf, nnew, kn, "max over new ranks", &mn, err);
		fprintf(out, "\n==> max over ranks: old %zu, new %zu <==\n", uo, un);
		bad += mf_diff_pair(out, &mo, &mn, o, "max ", 0, &regressions);
		mf_file_free(&mo);
		mf_file_free(&mn);
	}
	int rc = mf_diff_verdict(out, bad, regressions, o);
	free(regressions);
	return rc;
}
