/* memshim-format's one path: the command line (options.c), then read -> select -> print: every
 * file loaded (both sides for --diff), --stage checked, sorted, the mode's selection made
 * (model/select.c), and the mode's run function (modes/modes.c) groups and prints. */
#include "cli/cli.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "input/input.h"
#include "modes/modes.h"

#include <stdlib.h>
#include <string.h>

/* Loads every file so that all bad ones are reported, not only the first; into *NOK how many
 * loaded.  With SOME, the files that loaded (when any did: a run's good files beside one cut short);
 * else all of them or none (*NOK 0); *BAD set when one did not. */
static struct mf_file *mf_load_paths(char **paths, size_t n, int some, size_t *nok, int *bad, FILE *err)
{
	struct mf_file *files = mf_xmalloc((n ? n : 1) * sizeof *files);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += mf_load(paths[i], &files[k], err) == 0;
	*bad |= k < n;
	if (k == n || (some && k)) {
		mf_infer_lightning_ranks(files, k);
		*nok = k;
		return files;
	}
	for (size_t i = 0; i < k; i++)
		mf_file_free(&files[i]);
	free(files);
	*nok = 0;
	return NULL;
}

/* --diff's sides: OLD... -- NEW..., or OLD NEW where each may be a directory of a run's files. */
static int mf_read_sides(const struct mf_args *a, struct mf_run *r, FILE *err)
{
	struct mf_paths side[2];
	int sep = a->sep >= 0 ? a->sep : 1, rc = MF_OK;
	memset(side, 0, sizeof side);
	for (int i = 0; i < a->nfiles && rc == MF_OK; i++)
		rc = mf_paths_add(&side[i >= sep], a->files[i], err);
	int bad = 0;
	for (int s = 0; s < 2 && rc == MF_OK; s++) /* both sides, so every bad file is reported */
		r->side[s].f = mf_load_paths(side[s].p, side[s].n, 0, &r->side[s].n, &bad, err);
	for (int s = 0; s < 2; s++)
		mf_paths_free(&side[s]);
	r->nsides = 2;
	return rc == MF_OK && r->side[0].f && r->side[1].f ? MF_OK : MF_BAD;
}

/* Read: the files as given (those that load: a good file is shown beside a bad one, which is
 * named, and the exit status says one was bad: *BAD), or --diff's two sides, each whole. */
static int mf_read(const struct mf_args *a, struct mf_run *r, int *bad, FILE *err)
{
	if (a->o.mode == MF_DIFF)
		return mf_read_sides(a, r, err);
	r->nsides = 1;
	r->side[0].f = mf_load_paths(a->files, (size_t)a->nfiles, 1, &r->side[0].n, bad, err);
	return r->side[0].f ? MF_OK : MF_BAD;
}

/* --stage must name a stage of at least one file. */
static int mf_stage_known(const struct mf_run *r, FILE *err)
{
	const char *stage = r->o->stage;
	size_t n = 0;
	for (size_t s = 0; s < r->nsides; s++)
		for (size_t i = 0; i < r->side[s].n; i++, n++)
			if (mf_has_stage(&r->side[s].f[i], stage))
				return MF_OK;
	fprintf(err, "memshim-format: no stage \"%s\" in %s%s\n", stage, r->side[0].f[0].path,
		n > 1 ? " or the other files" : "");
	return MF_BAD;
}

/* Select: with --auto-merge and two or more ranks the dump is a --merge and --sites shows the
 * rank that peaked highest; each side sorted (ranks first), then its files picked. */
static void mf_select_all(struct mf_run *r)
{
	enum mf_pick pick = mf_modes[r->o->mode].pick;
	r->mode = r->o->mode;
	if (r->o->auto_merge && mf_count_ranks(r->side[0].f, r->side[0].n) >= 2) {
		r->mode = r->mode == MF_DUMP ? MF_MERGE : r->mode;
		pick = r->mode == MF_SITES ? MF_PICK_TOP_RANK : mf_modes[r->mode].pick;
	}
	for (size_t s = 0; s < r->nsides; s++) {
		mf_sort_files(r->side[s].f, r->side[s].n);
		mf_select(&r->side[s], pick, r->o->all);
	}
}

static void mf_run_free(struct mf_run *r)
{
	for (size_t s = 0; s < 2; s++) {
		for (size_t i = 0; i < r->side[s].n; i++)
			mf_file_free(&r->side[s].f[i]);
		free(r->side[s].f);
		free(r->side[s].keep);
	}
}

/* The modes that show call sites read the native frames' lines (not --no-lines). */
static void mf_read_lines(const struct mf_run *r)
{
	if (r->o->no_lines ||
	    (r->mode != MF_SITES && r->mode != MF_FLAME && r->mode != MF_SPEEDSCOPE && r->mode != MF_PPROF))
		return;
	for (size_t s = 0; s < r->nsides; s++)
		for (size_t i = 0; i < r->side[s].n; i++)
			if (r->side[s].keep[i])
				mf_lines_resolve(&r->side[s].f[i]);
}

static int mf_pipeline(const struct mf_args *a, FILE *out, FILE *err)
{
	struct mf_run r;
	memset(&r, 0, sizeof r);
	r.o = &a->o;
	int bad = 0, rc = mf_read(a, &r, &bad, err);
	if (rc == MF_OK && a->o.stage)
		rc = mf_stage_known(&r, err);
	if (rc == MF_OK) {
		mf_select_all(&r);
		mf_read_lines(&r);
		rc = mf_modes[r.mode].run(&r, out, err);
	}
	mf_run_free(&r);
	mf_lines_end();
	return rc == MF_OK && bad ? MF_BAD : rc;
}

int mf_main(int argc, char **argv, FILE *out, FILE *err)
{
	for (int i = 1; i < argc; i++) { /* modes that read the whole command line themselves */
		const struct mf_option *op = mf_option_named(argv[i]);
		if (op && op->kind == MF_OWN) {
			struct mf_run r = { .argc = argc, .argv = argv, .mode = mf_option_mode(op) };
			return mf_modes[r.mode].run(&r, out, err);
		}
	}
	struct mf_args a;
	int rc = mf_parse_args(argc, argv, &a, out, err);
	if (rc == MF_OK)
		rc = mf_check_args(&a, err);
	if (rc == MF_OK)
		rc = mf_pipeline(&a, out, err);
	mf_args_free(&a);
	return rc < 0 ? MF_OK : rc;
}
