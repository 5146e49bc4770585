/* --merge: one table per stage over the processes: min, max, mean, sum and who had the max. Ranks
 * are merged when there are any; launchers and other processes are then left out (one line). */
#include "modes/modes.h"
#include "base/base.h"
#include "model/combined.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"

#include <stdlib.h>
#include <string.h>

static const enum mf_align mf_merge_align[] = { MF_LEFT, MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_LEFT };
static const char *const mf_merge_seps[] = { "  ", "  ", "  ", "  ", "  " };

/* A key whose sum is memory the processes held together: not the cgroup's, a figure of the group they
 * share (ranks in one job's group would count its peak once per rank). */
static int mf_summable(const char *key)
{
	return mf_is_mem_key(key) && !strstr(key, "_mem_cgroup_");
}

static void mf_merge_row(struct mf_table *t, struct mf_file *files, size_t n, const char *key)
{
	json_t *lo = NULL, *hi = NULL;
	size_t hi_at = 0, have = 0, numeric = 0;
	long double sum = 0;
	double x, y;
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_object_get(files[i].metrics, key);
		have += v != NULL;
		if (!mf_num(v, &x))
			continue;
		numeric++;
		sum += x;
		if (!lo || (mf_num(lo, &y) && x < y))
			lo = v;
		if (!hi || (mf_num(hi, &y) && x > y))
			hi = v, hi_at = i;
	}
	char *cells[6] = { mf_xstrdup(key), NULL, NULL, NULL, NULL, NULL };
	if (numeric) {
		json_t *mean = json_real((double)(sum / (long double)numeric));
		json_t *total = json_real((double)sum);
		char *who = mf_proc_label(&files[hi_at]);
		cells[1] = mf_format_value(key, lo);
		cells[2] = mf_format_value(key, hi);
		cells[3] = mf_format_value(key, mean);
		/* a sum of bytes is memory the processes held together; of runtimes or counts, nothing */
		cells[4] = mf_summable(key) ? mf_format_value(key, total) : mf_xstrdup("");
		cells[5] = have < n ? mf_xasprintf("%s (in %zu of %zu)", who, have, n) : mf_xstrdup(who);
		free(who);
		json_decref(mean);
		json_decref(total);
	} else {
		for (int c = 1; c < 6; c++)
			cells[c] = mf_xstrdup(c == 4 ? "" : "-");
	}
	mf_table_row(t, cells);
}

/* "; open in rank 1, rank 2" for the processes where stage NAME is still open in a snapshot. */
static char *mf_open_in(struct mf_file *files, size_t n, const char *name)
{
	char *list = mf_xstrdup("");
	for (size_t i = 0; i < n; i++) {
		if (!mf_open_stage(files[i].stages, name))
			continue;
		char *who = mf_proc_label(&files[i]);
		char *s = mf_xasprintf("%s%s%s", list, *list ? ", " : "; open in ", who);
		free(who);
		free(list);
		list = s;
	}
	return list;
}

static void mf_merge_group(FILE *out, struct mf_file *files, size_t n, const struct mf_group *g)
{
	struct mf_table t;
	char *open = mf_open_in(files, n, g->name);
	fprintf(out, "\n***** %s metrics (%zu processes%s) *****\n", g->name, n, open);
	free(open);
	mf_table_init(&t, 6, mf_merge_align, mf_merge_seps);
	char *head[6] = { mf_xstrdup("key"),  mf_xstrdup("min"), mf_xstrdup("max"),
			  mf_xstrdup("mean"), mf_xstrdup("sum"), mf_xstrdup("max at") };
	mf_table_row(&t, head);
	for (size_t i = 0; i < g->nkeys; i++)
		mf_merge_row(&t, files, n, g->keys[i]);
	mf_table_print(out, &t, "  ");
	mf_table_free(&t);
}

/* One shared memory segment over the merged files: how many name it, their peaks' largest and sum. */
struct mf_segment {
	const char *dev, *kind;
	long long ino;
	size_t files;
	double top, sum, mapped;
};

static char *mf_bytes(double b)
{
	json_t *v = json_real(b);
	char *s = mf_format_value("process_mem_cpu_peak", v);
	json_decref(v);
	return s;
}

/* Segments named alike by several of the merged processes (doc/metrics-format.md): each counted the
 * pages it touched, so a sum counts them once per process; one line says so, with the largest. */
static void mf_merge_shared(FILE *out, struct mf_file *files, size_t n)
{
	struct mf_segment *seg = NULL;
	size_t nseg = 0, cap = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *list = json_object_get(json_object_get(json_object_get(files[i].root, "process"), "shared"),
					       "segments"),
		       *g;
		size_t k;
		json_array_foreach(list, k, g) {
			const char *dev = json_string_value(json_object_get(g, "dev"));
			long long ino = json_integer_value(json_object_get(g, "ino"));
			double peak = json_number_value(json_object_get(g, "peak"));
			if (!dev)
				continue;
			size_t j = 0;
			while (j < nseg && (seg[j].ino != ino || strcmp(seg[j].dev, dev)))
				j++;
			if (j == nseg) {
				if (nseg == cap)
					seg = mf_xrealloc(seg, (cap = cap ? 2 * cap : 16) * sizeof *seg);
				seg[nseg++] = (struct mf_segment){
					dev, json_string_value(json_object_get(g, "kind")), ino, 0, 0, 0, 0
				};
			}
			seg[j].files++;
			seg[j].sum += peak;
			if (peak > seg[j].top)
				seg[j].top = peak;
			double mapped = json_number_value(json_object_get(g, "mapped_peak"));
			if (mapped > seg[j].mapped)
				seg[j].mapped = mapped;
		}
	}
	size_t shared = 0, big = 0;
	for (size_t j = 0; j < nseg; j++) {
		if (seg[j].files < 2)
			continue;
		if (!shared++ || seg[j].sum > seg[big].sum)
			big = j;
	}
	if (shared) {
		char *mapped = mf_bytes(seg[big].mapped), *top = mf_bytes(seg[big].top), *sum = mf_bytes(seg[big].sum);
		fprintf(out,
			"memshim: %zu shared memory segment%s mapped by several of these processes, each counting "
			"the pages it touched (a sum counts them once per process); the largest, %s %s:%lld (%s "
			"mapped) in %zu: one touched at most %s, all %s\n",
			shared, shared == 1 ? " is" : "s are", seg[big].kind ? seg[big].kind : "?", seg[big].dev,
			seg[big].ino, mapped, seg[big].files, top, sum);
		free(mapped);
		free(top);
		free(sum);
	}
	free(seg);
}

static const enum mf_align mf_combined_align[] = { MF_LEFT, MF_RIGHT, MF_RIGHT, MF_RIGHT };
static const char *const mf_combined_seps[] = { "  ", "  ", "  " };

static char *mf_secs(double t)
{
	return mf_xasprintf("%.2fs", t);
}

/* One process's row: its own peak and when, and what it held at the combined peak. */
static void mf_combined_row(struct mf_table *t, const struct mf_combined *c, const struct mf_file *f, size_t i)
{
	char *cells[4] = { mf_proc_label(f), mf_bytes(c->own[i]), mf_secs(c->own_at[i]), mf_bytes(c->held[i]) };
	mf_table_row(t, cells);
}

static void mf_combined_table(FILE *out, const struct mf_combined *c, const struct mf_file *files)
{
	struct mf_table t;
	char *what = c->gpu ? mf_xasprintf("GPU %lld", c->device) : mf_xstrdup("CPU");
	char *peak = mf_bytes(c->peak), *slack = mf_bytes(c->slack), *sum = mf_bytes(c->own_sum);
	fprintf(out, "\n***** combined %s over time (%zu processes on one clock) *****\n", what, c->with);
	fprintf(out,
		"  combined %s peak %s at %.2fs from the run's start (the own peaks add up to %s); within %s "
		"(each timeline within one step of its live)\n",
		what, peak, c->at, sum, slack);
	mf_table_init(&t, 4, mf_combined_align, mf_combined_seps);
	char *head[4] = { mf_xstrdup("process"), mf_xstrdup("own peak"), mf_xstrdup("at"),
			  mf_xstrdup("at the combined peak") };
	mf_table_row(&t, head);
	for (size_t i = 0; i < c->n; i++)
		if (c->has[i])
			mf_combined_row(&t, c, &files[i], i);
	mf_table_print(out, &t, "  ");
	mf_table_free(&t);
	free(what);
	free(peak);
	free(slack);
	free(sum);
}

/* The run's processes summed over time (model/combined.h); forked children above what they
 * inherited, since their parent's timeline already holds it. */
void mf_print_combined(FILE *out, const struct mf_file *files, size_t n)
{
	struct mf_combined *c;
	size_t nc = mf_combined_build(files, n, &c);
	for (size_t k = 0; k < nc; k++)
		mf_combined_table(out, &c[k], files);
	mf_combined_free(c, nc);
}

void mf_merge(FILE *out, const struct mf_set *s, const struct mf_opts *o)
{
	struct mf_groups u;
	struct mf_file *files = s->f;
	const int *keep = s->keep;
	size_t n = s->n, left_out = s->left_out, m = 0;
	size_t ranks = mf_count_ranks(files, n);
	struct mf_file *set = mf_xmalloc((n ? n : 1) * sizeof *set);
	for (size_t i = 0; i < n; i++) {
		if (!keep[i])
			continue;
		set[m++] = files[i];
		mf_print_header(out, &files[i]);
		if (!files[i].complete)
			mf_print_status(out, &files[i]);
	}
	if (left_out && ranks && !o->all) {
		char *list = mf_proc_list(files, n, keep);
		fprintf(out,
			"memshim: merged the %zu ranks; left out %zu process%s without a rank of "
			"%s own: %s; --all merges every file\n",
			ranks, left_out, left_out == 1 ? "" : "es", left_out == 1 ? "its" : "their", list);
		free(list);
	} else if (left_out) {
		mf_print_hidden(out, files, n, keep, left_out, "merges them too");
	}
	mf_print_targets(out, files, n);
	mf_merge_shared(out, set, m);
	mf_group_union(set, m, &u);
	for (size_t j = 0; j < u.n; j++)
		if (!o->stage || !strcmp(o->stage, u.g[j].name))
			mf_merge_group(out, set, m, &u.g[j]);
	mf_groups_free(&u);
	mf_print_combined(out, set, m);
	free(set);
}
