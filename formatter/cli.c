/* Command line of memshim-format: options, loading every file, then one of dump, merge or diff. */
#include "mf.h"
#include "live.h"
#include "plot/plot.h"

#include <stdlib.h>
#include <string.h>

static const char mf_usage[] =
	"usage: memshim-format [--stage NAME] [--calls] [--json-dir DIR] [--all] FILE...\n"
	"       memshim-format --merge [--stage NAME] [--all] FILE...\n"
	"       memshim-format --diff [--threshold 5%,1MB] [--allow-missing] [--stage NAME] OLD NEW\n"
	"       memshim-format --diff [options] OLD_FILE... -- NEW_FILE...   (or OLD_DIR NEW_DIR)\n"
	"       memshim-format --csv [--stage NAME] FILE...\n"
	"       memshim-format --plot FILE.svg|FILE.png [--size WxH] [--all] FILE...\n"
	"       memshim-format --compare HF_RESULTS.json FILE\n"
	"       memshim-format --sites [--stage NAME] [--top N] [--depth N] [--all] FILE...\n"
	"       memshim-format --flame FILE.svg|FILE.png [--stage NAME] [--gpu] [--size WxH] FILE...\n"
	"       memshim-format --recover RECORD -o FILE [--keep]\n"
	"       memshim-format --recover-under DIR\n"
	"Prints memshim metrics files as the Hugging Face Trainer memory-metrics dump, or draws them.\n"
	"  --stage NAME     only that stage's group\n"
	"  --calls          per stage, min/max over its calls\n"
	"  --json-dir DIR   also write {stage}_results.json and update all_results.json in DIR\n"
	"  --all            every process: no launcher or shell is summarised in one line, and\n"
	"                   --merge merges every file, not only the ranks\n"
	"  --merge          one table per stage over the ranks (else the processes): min, max,\n"
	"                   mean, sum, who had the max\n"
	"  --auto-merge     --merge when the files hold two or more ranks, else the dump\n"
	"  --diff OLD NEW   old, new and change per key; exit 1 when a memory metric grew past the\n"
	"                   threshold or a stage of OLD is missing from NEW or did not finish;\n"
	"                   several files or two directories: rank by rank, then the max\n"
	"  --threshold T    growth must exceed N% of the old value and/or N MB/KB/GB/B; both\n"
	"                   parts must be exceeded when given as 5%,1MB (the default)\n"
	"  --allow-missing  a stage or rank missing from NEW is reported but is no regression\n"
	"  --csv            one row per process and stage (RFC 4180), bytes and seconds\n"
	"  --plot OUT       draws memory over time with the stages into OUT (.svg or .png), one\n"
	"                   panel per file on shared time and memory axes; prints nothing\n"
	"  --size WxH       the picture's size in pixels (--plot: 1200 x 300+250 per file by\n"
	"                   default; --flame: 1200 x what its rows need)\n"
	"  --compare HF     Hugging Face's own memory metrics (all_results.json or a\n"
	"                   {split}_results.json of the same run) beside memshim's, key by key\n"
	"  --sites          per stage, the call sites live at its peak (CPU, then GPU) as sampled\n"
	"                   by the shim: bytes, share of the sampled total, the allocating frame\n"
	"                   and its callers\n"
	"  --top N          --sites: the N largest sites of each list (default 10)\n"
	"  --depth N        --sites: N frames of each site, innermost first (default 5)\n"
	"  --flame OUT      draws the call sites at a stage's peak as a flame graph into OUT (.svg\n"
	"                   or .png), callers at the bottom, widths in bytes: the --stage, else\n"
	"                   the stage with the largest peak, of the process that peaked highest\n"
	"  --gpu            --flame: the GPU sites rather than the CPU ones\n"
	"  --recover R      writes live record R (a killed or running process; a FILE argument may\n"
	"                   also be a live record) as a metrics file: -o FILE, - for stdout\n"
	"  --recover-under DIR  every record of a process gone whose metrics file is under DIR and\n"
	"                   not complete, written out as that file (memshim run after a kill)\n"
	"  --version        prints memshim-format's version\n"
	"Exit status: 0 ok, 1 --diff found a regression, 2 bad input or usage.\n";

static int mf_usage_error(FILE *err, const char *what, const char *arg)
{
	fprintf(err, "memshim-format: %s%s%s (see memshim-format --help)\n", what, arg ? ": " : "",
		arg ? arg : "");
	return MF_BAD;
}

/* "--opt VALUE" or "--opt=VALUE"; returns the value or NULL, advancing *I past it. */
static const char *mf_optval(int argc, char **argv, int *i, const char *opt, int *matched)
{
	size_t n = strlen(opt);
	*matched = 0;
	if (strncmp(argv[*i], opt, n))
		return NULL;
	if (argv[*i][n] == '=')
		return *matched = 1, argv[*i] + n + 1;
	if (argv[*i][n])
		return NULL;
	*matched = 1;
	return *i + 1 < argc ? argv[++*i] : NULL;
}

/* "1200x800": both within what a picture can sensibly be. */
static int mf_parse_size(const char *s, int *w, int *h)
{
	char *end;
	long a = strtol(s, &end, 10), b;
	if (end == s || (*end != 'x' && *end != 'X'))
		return -1;
	s = end + 1;
	b = strtol(s, &end, 10);
	if (end == s || *end || a < MF_PLOT_MIN || a > MF_PLOT_MAX || b < MF_PLOT_MIN || b > MF_PLOT_MAX)
		return -1;
	*w = (int)a, *h = (int)b;
	return 0;
}

struct mf_args {
	struct mf_opts o;
	char **files;
	int nfiles;
	int sep;                /* --diff: files before a "--" that follows a file, else -1 */
};

/* --depth and --top: a whole number from 1 to MF_SITES_MAX. */
static int mf_parse_count(const char *s, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v < 1 || v > MF_SITES_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

static int mf_set_value(struct mf_args *a, int k, const char *v, FILE *err)
{
	switch (k) {
	case 0: a->o.stage = v; break;
	case 1: a->o.json_dir = v; break;
	case 3: a->o.plot = v; break;
	case 4:
		return mf_parse_size(v, &a->o.plot_w, &a->o.plot_h) ?
			mf_usage_error(err, "bad size (want WxH, each 200 to 16000)", v) : MF_OK;
	case 5: a->o.compare = v; break;
	case 6: a->o.flame = v; break;
	case 7:
	case 8:
		return mf_parse_count(v, k == 7 ? &a->o.depth : &a->o.top) ?
			mf_usage_error(err, k == 7 ? "bad --depth (want 1 to 1000 frames)" :
				       "bad --top (want 1 to 1000 sites)", v) : MF_OK;
	default:
		if (a->o.threshold_text)
			return mf_usage_error(err, "--threshold given twice (combine as 5%,1MB)", v);
		if (mf_parse_threshold(v, &a->o.threshold))
			return mf_usage_error(err, "bad threshold (want N%, N MB/KB/GB/B, or both as 5%,1MB)", v);
		a->o.threshold_text = v;
	}
	return MF_OK;
}

static int mf_value_opt(int argc, char **argv, int *i, struct mf_args *a, FILE *err, int *used)
{
	static const char *const names[] = { "--stage", "--json-dir", "--threshold", "--plot",
					     "--size", "--compare", "--flame", "--depth", "--top" };
	for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++) {
		int m;
		const char *v = mf_optval(argc, argv, i, names[k], &m);
		if (!m)
			continue;
		*used = 1;
		if (!v || !*v)
			return mf_usage_error(err, "missing value for", names[k]);
		return mf_set_value(a, k, v, err);
	}
	*used = 0;
	return MF_OK;
}

static int mf_parse_args(int argc, char **argv, struct mf_args *a, FILE *out, FILE *err)
{
	int only_files = 0;
	memset(a, 0, sizeof *a);
	a->sep = -1;
	a->files = mf_xmalloc((size_t)argc * sizeof *a->files);
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		int used, rc;
		if (!strcmp(s, "--") && a->nfiles && a->sep < 0) {
			a->sep = a->nfiles; /* OLD... -- NEW... (for --diff; elsewhere just more files) */
			only_files = 1;
			continue;
		}
		if (only_files || s[0] != '-' || !s[1]) {
			a->files[a->nfiles++] = argv[i];
			continue;
		}
		if (!strcmp(s, "--"))
			only_files = 1;
		else if (!strcmp(s, "-h") || !strcmp(s, "--help"))
			return fputs(mf_usage, out), -1;
		else if (!strcmp(s, "--version"))
			return fprintf(out, "memshim-format %s\n", mf_version()), -1;
		else if (!strcmp(s, "--all"))
			a->o.all = 1;
		else if (!strcmp(s, "--auto-merge"))
			a->o.auto_merge = 1;
		else if (!strcmp(s, "--csv"))
			a->o.csv = 1;
		else if (!strcmp(s, "--calls"))
			a->o.calls = 1;
		else if (!strcmp(s, "--merge"))
			a->o.merge = 1;
		else if (!strcmp(s, "--diff"))
			a->o.diff = 1;
		else if (!strcmp(s, "--allow-missing"))
			a->o.allow_missing = 1;
		else if (!strcmp(s, "--sites"))
			a->o.sites = 1;
		else if (!strcmp(s, "--gpu"))
			a->o.flame_gpu = 1;
		else if ((rc = mf_value_opt(argc, argv, &i, a, err, &used)) || !used)
			return used ? rc : mf_usage_error(err, "unknown option", s);
	}
	return MF_OK;
}

/* --sites and --flame are modes of their own. */
static int mf_check_sites(const struct mf_args *a, FILE *err)
{
	const struct mf_opts *o = &a->o;
	int others = o->diff || o->merge || o->calls || o->json_dir || o->csv || o->plot || o->compare;
	if (o->sites && (others || o->flame))
		return mf_usage_error(err, "--sites takes no other mode (only --stage, --top, --depth, "
				      "--all)", NULL);
	if (o->flame && (others || o->auto_merge || o->all))
		return mf_usage_error(err, "--flame takes no other mode (only --stage, --gpu, --size)",
				      NULL);
	if (o->flame && !mf_plot_kind(o->flame))
		return mf_usage_error(err, "--flame wants a file name ending in .svg or .png", o->flame);
	if (o->flame_gpu && !o->flame)
		return mf_usage_error(err, "--gpu only applies to --flame", NULL);
	if ((o->depth || o->top) && !o->sites)
		return mf_usage_error(err, "--depth and --top only apply to --sites", NULL);
	return MF_OK;
}

static int mf_check_args(struct mf_args *a, FILE *err)
{
	if (!a->nfiles)
		return mf_usage_error(err, "no metrics file given", NULL);
	if (mf_check_sites(a, err))
		return MF_BAD;
	if (a->o.diff && a->sep < 0 && a->nfiles != 2)
		return mf_usage_error(err, "--diff takes OLD NEW, or OLD_FILE... -- NEW_FILE...", NULL);
	if (a->o.diff && a->sep >= a->nfiles)
		return mf_usage_error(err, "--diff: no NEW file after --", NULL);
	if (a->o.diff && (a->o.merge || a->o.calls || a->o.json_dir || a->o.auto_merge || a->o.csv))
		return mf_usage_error(err, "--diff does not combine with --merge, --calls, --json-dir "
				      "or --csv", NULL);
	if ((a->o.merge || a->o.auto_merge) && a->o.calls)
		return mf_usage_error(err, "--calls does not combine with --merge", NULL);
	if (a->o.csv && (a->o.merge || a->o.auto_merge || a->o.calls || a->o.json_dir || a->o.plot ||
			 a->o.compare))
		return mf_usage_error(err, "--csv takes no other mode (only --stage)", NULL);
	if (a->o.plot_w && !a->o.plot && !a->o.flame)
		return mf_usage_error(err, "--size only applies to --plot and --flame", NULL);
	if (a->o.plot && !mf_plot_kind(a->o.plot))
		return mf_usage_error(err, "--plot wants a file name ending in .svg or .png", a->o.plot);
	if (a->o.plot && (a->o.diff || a->o.merge || a->o.auto_merge || a->o.calls || a->o.json_dir ||
			  a->o.stage))
		return mf_usage_error(err, "--plot does not combine with --diff, --merge, --calls, "
				      "--json-dir or --stage", NULL);
	if (a->o.compare && (a->nfiles != 1 || a->o.diff || a->o.merge || a->o.auto_merge ||
			     a->o.calls || a->o.plot || a->o.json_dir || a->o.stage))
		return mf_usage_error(err, "--compare takes one metrics file and no other mode", NULL);
	if (a->o.all && (a->o.diff || a->o.csv || a->o.compare))
		return mf_usage_error(err, "--all only applies to the dump, --merge, --plot and --sites",
				      NULL);
	if (a->o.threshold_text && !a->o.diff)
		return mf_usage_error(err, "--threshold only applies to --diff", NULL);
	if (a->o.allow_missing && !a->o.diff)
		return mf_usage_error(err, "--allow-missing only applies to --diff", NULL);
	if (!a->o.threshold_text) /* the default: 5% of the old value and at least 1 MiB */
		mf_parse_threshold(a->o.threshold_text = "5%,1MB", &a->o.threshold);
	return MF_OK;
}

/* Loads every file so that all bad ones are reported, not only the first. */
static struct mf_file *mf_load_paths(char **paths, size_t n, FILE *err)
{
	struct mf_file *files = mf_xmalloc((n ? n : 1) * sizeof *files);
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		bad |= mf_load(paths[i], &files[i], err) != 0;
	if (!bad) {
		mf_infer_lightning_ranks(files, n);
		return files;
	}
	for (size_t i = 0; i < n; i++)
		mf_file_free(&files[i]);
	free(files);
	return NULL;
}

static void mf_free_files(struct mf_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mf_file_free(&files[i]);
	free(files);
}

static int mf_stage_in(struct mf_file *files, size_t n, const char *stage)
{
	for (size_t i = 0; i < n; i++)
		if (mf_has_stage(&files[i], stage))
			return 1;
	return 0;
}

static void mf_no_stage(const char *stage, const char *path, size_t n, FILE *err)
{
	fprintf(err, "memshim-format: no stage \"%s\" in %s%s\n", stage, path,
		n > 1 ? " or the other files" : "");
}

static int mf_stage_known(struct mf_file *files, size_t n, const char *stage, FILE *err)
{
	if (mf_stage_in(files, n, stage))
		return 1;
	mf_no_stage(stage, files[0].path, n, err);
	return 0;
}

/* Several files: each under its header; launchers and shells summarised in one line at the end. */
static void mf_dump_all(FILE *out, struct mf_file *files, size_t n,
			const struct mf_opts *o)
{
	int *keep = mf_xmalloc(n * sizeof *keep), first = 1;
	size_t hidden = mf_hide_minor(files, n, o->all, keep);
	for (size_t i = 0; i < n; i++) {
		if (!keep[i])
			continue;
		if (n > 1) {
			fprintf(out, "%s", first ? "" : "\n");
			mf_print_header(out, &files[i]);
		}
		mf_dump_file(out, &files[i], o);
		first = 0;
	}
	if (hidden) {
		fputc('\n', out);
		mf_print_hidden(out, files, n, keep, hidden, "shows them");
	}
	free(keep);
}

/* --auto-merge (what `memshim run` prints): one merged table for a multi-rank run. */
static void mf_dump_or_merge(FILE *out, struct mf_file *files, size_t n, const struct mf_opts *o)
{
	size_t ranks = mf_count_ranks(files, n);
	if (!o->merge && (!o->auto_merge || ranks < 2)) {
		mf_dump_all(out, files, n, o);
		return;
	}
	mf_merge(out, files, n, o);
	if (!o->merge)
		fprintf(out, "\nmemshim: one table for the %zu ranks; memshim-format FILE... prints each "
			"process's own dump\n", ranks);
}

/* The rank with the highest CPU peak that has call sites (the first on ties), or -1. */
static long mf_highest_rank(const struct mf_file *files, size_t n)
{
	long best = -1;
	double bv = -1, x;
	for (size_t i = 0; i < n; i++) {
		if (!mf_own_rank(&files[i], files, n) || !mf_file_has_sites(&files[i]))
			continue;
		if (!mf_num(json_object_get(files[i].file_metrics, "process_mem_cpu_peak"), &x))
			x = 0;
		if (best < 0 || x > bv)
			best = (long)i, bv = x;
	}
	return best;
}

/* --sites over several files: each under its header, launchers and shells in one line; with
 * --auto-merge (memshim run) and two or more ranks, the rank that peaked highest stands for them. */
static void mf_sites_all(FILE *out, struct mf_file *files, size_t n, const struct mf_opts *o)
{
	int *keep = mf_xmalloc(n * sizeof *keep), first = 1;
	size_t hidden = mf_hide_minor(files, n, o->all, keep), ranks = mf_count_ranks(files, n);
	long one = o->auto_merge && ranks >= 2 ? mf_highest_rank(files, n) : -1;
	for (size_t i = 0; i < n; i++) {
		if (one >= 0 ? (long)i != one : !keep[i])
			continue;
		if (n > 1) {
			fprintf(out, "%s", first ? "" : "\n");
			mf_print_header(out, &files[i]);
		}
		mf_print_sites(out, &files[i], o);
		first = 0;
	}
	if (one >= 0)
		fprintf(out, "\nmemshim: call sites of rank %lld only, the highest CPU peak of the %zu "
			"ranks; memshim-format --sites FILE... shows every process\n", files[one].rank,
			ranks);
	else if (hidden) {
		fputc('\n', out);
		mf_print_hidden(out, files, n, keep, hidden, "shows them");
	}
	free(keep);
}

/* --json-dir: DIR itself for one file, DIR/rank<N> or DIR/pid<N> for each of several. */
static int mf_results_all(FILE *err, struct mf_file *files, size_t n, const char *dir)
{
	int rc = MF_OK;
	for (size_t i = 0; i < n && dir; i++) {
		const struct mf_file *f = &files[i];
		char *sub = n == 1 ? mf_xstrdup(dir) : mf_xasprintf("%s/%s%lld", dir,
			f->has_rank ? "rank" : "pid", f->has_rank ? f->rank : f->pid);
		struct mf_groups gs;
		mf_group_metrics(f->file_metrics, f->stages, &gs);
		if (mf_write_results(err, sub, f->file_metrics, &gs))
			rc = MF_BAD;
		mf_groups_free(&gs);
		free(sub);
	}
	return rc;
}

/* The processes that matter, one panel each (launchers and shells only with --all). */
static int mf_plot_files(FILE *err, struct mf_file *files, size_t n, const struct mf_opts *o)
{
	int *keep = mf_xmalloc(n * sizeof *keep);
	struct mf_file *shown = mf_xmalloc(n * sizeof *shown);
	size_t m = 0;
	mf_sort_files(files, n);
	mf_hide_minor(files, n, o->all, keep);
	for (size_t i = 0; i < n; i++)
		if (keep[i])
			shown[m++] = files[i];
	double h = MF_PLOT_H0 + (double)MF_PLOT_HP * m;
	int rc = mf_plot(err, shown, m, o->plot, o->plot_w ? o->plot_w : MF_PLOT_W,
			 o->plot_h ? o->plot_h : (int)(h < MF_PLOT_MAX ? h : MF_PLOT_MAX));
	free(shown);
	free(keep);
	return rc;
}

/* --diff's sides: OLD... -- NEW..., or OLD NEW where each may be a directory of a run's files. */
static int mf_diff_files(const struct mf_args *a, FILE *out, FILE *err)
{
	struct mf_paths side[2];
	int sep = a->sep >= 0 ? a->sep : 1, rc = MF_OK;
	memset(side, 0, sizeof side);
	for (int i = 0; i < a->nfiles && rc == MF_OK; i++)
		rc = mf_paths_add(&side[i >= sep], a->files[i], err);
	struct mf_file *f[2] = { NULL, NULL };
	for (int s = 0; s < 2 && rc == MF_OK; s++) /* both sides, so every bad file is reported */
		f[s] = mf_load_paths(side[s].p, side[s].n, err);
	if (rc == MF_OK && (!f[0] || !f[1]))
		rc = MF_BAD;
	if (rc == MF_OK && a->o.stage && !mf_stage_in(f[0], side[0].n, a->o.stage) &&
	    !mf_stage_in(f[1], side[1].n, a->o.stage)) {
		mf_no_stage(a->o.stage, f[0][0].path, side[0].n + side[1].n, err);
		rc = MF_BAD;
	}
	if (rc == MF_OK && side[0].n == 1 && side[1].n == 1) {
		rc = mf_diff(out, f[0], f[1], &a->o);
	} else if (rc == MF_OK) {
		mf_sort_files(f[0], side[0].n);
		mf_sort_files(f[1], side[1].n);
		rc = mf_diff_runs(out, f[0], side[0].n, f[1], side[1].n, &a->o, err);
	}
	for (int s = 0; s < 2; s++) {
		if (f[s])
			mf_free_files(f[s], side[s].n);
		mf_paths_free(&side[s]);
	}
	return rc;
}

static int mf_run(const struct mf_args *a, FILE *out, FILE *err)
{
	if (a->o.diff)
		return mf_diff_files(a, out, err);
	struct mf_file *files = mf_load_paths(a->files, (size_t)a->nfiles, err);
	size_t n = (size_t)a->nfiles;
	int rc;
	if (!files)
		return MF_BAD;
	if (a->o.stage && !mf_stage_known(files, n, a->o.stage, err))
		rc = MF_BAD;
	else if (a->o.compare)
		rc = mf_compare(out, err, a->o.compare, &files[0]);
	else if (a->o.plot)
		rc = mf_plot_files(err, files, n, &a->o);
	else if (a->o.flame) {
		mf_sort_files(files, n);
		rc = mf_flame(err, files, n, &a->o);
	} else if (a->o.sites) {
		mf_sort_files(files, n);
		mf_sites_all(out, files, n, &a->o);
		rc = MF_OK;
	}
	else if (a->o.csv) {
		mf_sort_files(files, n);
		mf_csv(out, files, n, a->o.stage);
		rc = MF_OK;
	} else {
		mf_sort_files(files, n);
		mf_dump_or_merge(out, files, n, &a->o);
		rc = mf_results_all(err, files, n, a->o.json_dir);
	}
	mf_free_files(files, n);
	return rc;
}

int mf_main(int argc, char **argv, FILE *out, FILE *err)
{
	for (int i = 1; i < argc; i++) { /* modes of their own (formatter/live.c) */
		if (!strcmp(argv[i], "--recover"))
			return mf_recover_main(argc, argv, out, err);
		if (!strcmp(argv[i], "--recover-under"))
			return mf_recover_under_main(argc, argv, out, err);
	}
	struct mf_args a;
	int rc = mf_parse_args(argc, argv, &a, out, err);
	if (rc == MF_OK)
		rc = mf_check_args(&a, err);
	if (rc == MF_OK)
		rc = mf_run(&a, out, err);
	free(a.files);
	return rc < 0 ? MF_OK : rc;
}
