/* Each mode's run function (model/modes.def): it gets the files read, sorted and selected by the
 * pipeline (cli/cli.c), groups what it shows and prints it. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "input/input.h"
#include "plot/plot.h"

#include <stdlib.h>
#include <string.h>

/* The files S keeps (shown), in order, into a new array; *M how many. */
static struct mf_file *mf_kept(const struct mf_set *s, size_t *m)
{
	struct mf_file *shown = mf_xmalloc((s->n ? s->n : 1) * sizeof *shown);
	*m = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->keep[i])
			shown[(*m)++] = s->f[i];
	return shown;
}

/* --json-dir: DIR itself for one file, DIR/rank<N> or DIR/pid<N> for each of several (a worker that
 * inherited its parent's rank by its pid: one directory per process), and for
 * several the whole job's combined peaks over the files shown (DIR/job_results.json), as the
 * combined tables print them. */
static int mf_results_all(FILE *err, const struct mf_set *s, const char *dir)
{
	int rc = MF_OK;
	if (dir && s->n > 1 && mf_write_job_results(err, dir, s))
		rc = MF_BAD;
	for (size_t i = 0; i < s->n && dir; i++) {
		const struct mf_file *f = &s->f[i];
		char *who = s->n == 1 ? NULL : mf_results_label(s->f, s->n, i);
		char *sub = who ? mf_xasprintf("%s/%s", dir, who) : mf_xstrdup(dir);
		free(who);
		struct mf_groups gs;
		mf_group_metrics(f->file_metrics, f->stages, &gs);
		if (mf_write_results(err, sub, f->file_metrics, &gs))
			rc = MF_BAD;
		mf_groups_free(&gs);
		free(sub);
	}
	return rc;
}

/* The combined peak of the files S keeps (two or more with timelines). */
static void mf_print_kept_combined(FILE *out, const struct mf_set *s)
{
	size_t m;
	struct mf_file *shown = mf_kept(s, &m);
	mf_print_combined(out, shown, m);
	free(shown);
}

/* A run's first file dumped alone, its children's files beside it (KIDS: a launcher under a plain
 * LD_PRELOAD, `timeout 60 python train.py`, took the name and python wrote NAME.<pid>): named, with
 * how to see them together. */
static void mf_print_children_beside(FILE *out, const struct mf_file *f, const struct mf_paths *kids)
{
	fprintf(out, "\nmemshim: %zu process%s of this run wrote %s own beside it: ", kids->n, kids->n > 1 ? "es" : "",
		kids->n > 1 ? "files of their" : "a file of its");
	for (size_t i = 0; i < kids->n && i < 3; i++) {
		const char *slash = strrchr(kids->p[i], '/');
		fprintf(out, "%s%s", i ? ", " : "", slash ? slash + 1 : kids->p[i]);
	}
	/* the exact files: NAME* would also take other runs' files left there */
	fprintf(out, "%s; memshim-format %s", kids->n > 3 ? ", ..." : "", f->path);
	for (size_t i = 0; i < kids->n && i < 8; i++)
		fprintf(out, " %s", kids->p[i]);
	fprintf(out, "%s shows them together, and what the stage targets matched in the run\n",
		kids->n > 8 ? " ... (all the files of this run)" : "");
}

/* What the targets matched, once for the run; each file shown under its header (when there are
 * several); the ones left out in one line. */
int mf_run_dump(const struct mf_run *r, FILE *out, FILE *err)
{
	const struct mf_set *s = &r->side[0];
	int first = 1;
	struct mf_paths kids = { 0 };
	if (s->n == 1 && !r->o->auto_merge && !s->f[0].is_child && s->f[0].pid > 0)
		mf_paths_children(&kids, s->f[0].path, s->f[0].pid);
	if (s->n == 1)
		s->f[0].children_beside = kids.n;
	/* what the targets matched is the run's to say: not from its first file alone */
	if (!kids.n && mf_print_targets(out, s->f, s->n))
		fputc('\n', out);
	for (size_t i = 0; i < s->n; i++) {
		if (!s->keep[i])
			continue;
		if (s->n > 1) {
			fprintf(out, "%s", first ? "" : "\n");
			mf_print_header(out, &s->f[i]);
		}
		mf_dump_file(out, &s->f[i], r->o);
		first = 0;
	}
	if (s->left_out) {
		fputc('\n', out);
		mf_print_hidden(out, s->f, s->n, s->keep, s->left_out, "shows them");
	}
	if (r->o->auto_merge) /* what `memshim run` prints: the processes together, over time */
		mf_print_kept_combined(out, s);
	if (kids.n)
		mf_print_children_beside(out, &s->f[0], &kids);
	mf_paths_free(&kids);
	return mf_results_all(err, s, r->o->json_dir);
}

/* --merge, or the dump of a multi-rank run with --auto-merge (what `memshim run` prints). */
int mf_run_merge(const struct mf_run *r, FILE *out, FILE *err)
{
	const struct mf_set *s = &r->side[0];
	mf_merge(out, s, r->o);
	if (r->o->mode != MF_MERGE)
		fprintf(out,
			"\nmemshim: one table for the %zu ranks; memshim-format FILE... prints each "
			"process's own dump\n",
			mf_count_ranks(s->f, s->n));
	return mf_results_all(err, s, r->o->json_dir);
}

/* OLD NEW, or two runs of several files each. */
int mf_run_diff(const struct mf_run *r, FILE *out, FILE *err)
{
	const struct mf_set *a = &r->side[0], *b = &r->side[1];
	if (a->n == 1 && b->n == 1)
		return mf_diff(out, &a->f[0], &b->f[0], r->o);
	return mf_diff_runs(out, a, b, r->o, err);
}

int mf_run_csv(const struct mf_run *r, FILE *out, FILE *err)
{
	mf_csv(out, r->side[0].f, r->side[0].n, r->o->stage);
	return MF_OK;
}

/* One panel per file shown. */
int mf_run_plot(const struct mf_run *r, FILE *out, FILE *err)
{
	const struct mf_set *s = &r->side[0];
	struct mf_file *shown = mf_xmalloc((s->n ? s->n : 1) * sizeof *shown);
	size_t m = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->keep[i])
			shown[m++] = s->f[i];
	double h = MF_PLOT_H0 + (double)MF_PLOT_HP * m;
	int rc = mf_plot(err, shown, m, r->o->mode_arg, r->o->plot_w ? r->o->plot_w : MF_PLOT_W,
			 r->o->plot_h ? r->o->plot_h : (int)(h < MF_PLOT_MAX ? h : MF_PLOT_MAX));
	free(shown);
	if (rc == MF_OK) /* the files without a panel are named, as the dump names them */
		mf_print_hidden(out, s->f, s->n, s->keep, s->left_out, "draws them");
	return rc;
}

int mf_run_compare(const struct mf_run *r, FILE *out, FILE *err)
{
	return mf_compare(out, err, r->o->mode_arg, &r->side[0].f[0]);
}

/* Each file shown under its header; with --auto-merge and two or more ranks, the rank that
 * peaked highest stands for them (MF_PICK_TOP_RANK). */
int mf_run_sites(const struct mf_run *r, FILE *out, FILE *err)
{
	const struct mf_set *s = &r->side[0];
	int first = 1;
	size_t one = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (!s->keep[i])
			continue;
		if (s->n > 1) {
			fprintf(out, "%s", first ? "" : "\n");
			mf_print_header(out, &s->f[i]);
		}
		mf_print_sites(out, &s->f[i], r->o);
		first = 0;
		one = i;
	}
	if (s->how == MF_PICK_TOP_RANK)
		fprintf(out,
			"\nmemshim: call sites of rank %lld only, the highest CPU peak of the %zu "
			"ranks; memshim-format --sites FILE... shows every process\n",
			s->f[one].rank, mf_count_ranks(s->f, s->n));
	else if (s->left_out) {
		fputc('\n', out);
		mf_print_hidden(out, s->f, s->n, s->keep, s->left_out, "shows them");
	}
	return MF_OK;
}

/* A picture of one stage, or with OUT.html a page of every stage. */
int mf_run_flame(const struct mf_run *r, FILE *out, FILE *err)
{
	if (mf_html_name(r->o->mode_arg))
		return mf_flame_html(err, &r->side[0], r->o);
	return mf_flame(err, r->side[0].f, r->side[0].n, r->o);
}

int mf_run_recover(const struct mf_run *r, FILE *out, FILE *err)
{
	return mf_recover_main(r->argc, r->argv, out, err);
}

int mf_run_recover_under(const struct mf_run *r, FILE *out, FILE *err)
{
	return mf_recover_under_main(r->argc, r->argv, out, err);
}
