/* Command line of memshim-format: options, loading every file, then one of dump, merge or diff. */
#include "mf.h"
#include "plot/plot.h"

#include <stdlib.h>
#include <string.h>

static const char mf_usage[] =
	"usage: memshim-format [--stage NAME] [--calls] [--json-dir DIR] FILE...\n"
	"       memshim-format --merge [--stage NAME] FILE...\n"
	"       memshim-format --diff [--threshold 5%|10MB] [--stage NAME] OLD NEW\n"
	"       memshim-format --plot FILE.svg|FILE.png [--size WxH] FILE...\n"
	"Prints memshim metrics files as the Hugging Face Trainer memory-metrics dump, or draws them.\n"
	"  --stage NAME     only that stage's group\n"
	"  --calls          per stage, min/max over its calls\n"
	"  --json-dir DIR   also write {stage}_results.json and update all_results.json in DIR\n"
	"  --merge          one table per stage over all files: min, max, mean, who had the max\n"
	"  --diff OLD NEW   old, new and change per key; exit 1 when a memory metric grew past\n"
	"  --threshold T    the --diff threshold: N% of the old value or N MB/KB/GB/B (default 5%)\n"
	"  --plot OUT       draws memory over time with the stages into OUT (.svg or .png), one\n"
	"                   panel per file on a shared time axis; prints nothing\n"
	"  --size WxH       the picture's size in pixels (default 1200 x 300+250 per file)\n"
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
};

static int mf_value_opt(int argc, char **argv, int *i, struct mf_args *a, FILE *err, int *used)
{
	static const char *const names[] = { "--stage", "--json-dir", "--threshold", "--plot",
					     "--size" };
	for (int k = 0; k < 5; k++) {
		int m;
		const char *v = mf_optval(argc, argv, i, names[k], &m);
		if (!m)
			continue;
		*used = 1;
		if (!v || !*v)
			return mf_usage_error(err, "missing value for", names[k]);
		if (k == 4)
			return mf_parse_size(v, &a->o.plot_w, &a->o.plot_h) ?
				mf_usage_error(err, "bad size (want WxH, each 200 to 16000)", v) : MF_OK;
		if (k == 0)
			a->o.stage = v;
		else if (k == 1)
			a->o.json_dir = v;
		else if (k == 3)
			a->o.plot = v;
		else if (mf_parse_threshold(v, &a->o.threshold, &a->o.threshold_pct))
			return mf_usage_error(err, "bad threshold (want N% or N MB, KB, GB, B)", v);
		else
			a->o.threshold_text = v;
		return MF_OK;
	}
	*used = 0;
	return MF_OK;
}

static int mf_parse_args(int argc, char **argv, struct mf_args *a, FILE *out, FILE *err)
{
	int only_files = 0;
	memset(a, 0, sizeof *a);
	a->files = mf_xmalloc((size_t)argc * sizeof *a->files);
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		int used, rc;
		if (only_files || s[0] != '-' || !s[1]) {
			a->files[a->nfiles++] = argv[i];
			continue;
		}
		if (!strcmp(s, "--"))
			only_files = 1;
		else if (!strcmp(s, "-h") || !strcmp(s, "--help"))
			return fputs(mf_usage, out), -1;
		else if (!strcmp(s, "--calls"))
			a->o.calls = 1;
		else if (!strcmp(s, "--merge"))
			a->o.merge = 1;
		else if (!strcmp(s, "--diff"))
			a->o.diff = 1;
		else if ((rc = mf_value_opt(argc, argv, &i, a, err, &used)) || !used)
			return used ? rc : mf_usage_error(err, "unknown option", s);
	}
	return MF_OK;
}

static int mf_check_args(struct mf_args *a, FILE *err)
{
	if (!a->nfiles)
		return mf_usage_error(err, "no metrics file given", NULL);
	if (a->o.diff && a->nfiles != 2)
		return mf_usage_error(err, "--diff takes exactly two files, OLD and NEW", NULL);
	if (a->o.diff && (a->o.merge || a->o.calls || a->o.json_dir))
		return mf_usage_error(err, "--diff does not combine with --merge, --calls or --json-dir",
				      NULL);
	if (a->o.merge && a->o.calls)
		return mf_usage_error(err, "--calls does not combine with --merge", NULL);
	if (a->o.plot_w && !a->o.plot)
		return mf_usage_error(err, "--size only applies to --plot", NULL);
	if (a->o.plot && !mf_plot_kind(a->o.plot))
		return mf_usage_error(err, "--plot wants a file name ending in .svg or .png", a->o.plot);
	if (a->o.plot && (a->o.diff || a->o.merge || a->o.calls || a->o.json_dir || a->o.stage))
		return mf_usage_error(err, "--plot does not combine with --diff, --merge, --calls, "
				      "--json-dir or --stage", NULL);
	if (a->o.threshold_text && !a->o.diff)
		return mf_usage_error(err, "--threshold only applies to --diff", NULL);
	if (!a->o.threshold_text) /* the default: 5% of the old value */
		a->o.threshold = 5, a->o.threshold_pct = 1, a->o.threshold_text = "5%";
	return MF_OK;
}

/* Loads every file so that all bad ones are reported, not only the first. */
static struct mf_file *mf_load_all(const struct mf_args *a, FILE *err)
{
	struct mf_file *files = mf_xmalloc((size_t)a->nfiles * sizeof *files);
	int bad = 0;
	for (int i = 0; i < a->nfiles; i++)
		bad |= mf_load(a->files[i], &files[i], err) != 0;
	if (!bad)
		return files;
	for (int i = 0; i < a->nfiles; i++)
		mf_file_free(&files[i]);
	free(files);
	return NULL;
}

static int mf_stage_known(struct mf_file *files, size_t n, const char *stage, FILE *err)
{
	for (size_t i = 0; i < n; i++)
		if (mf_has_stage(&files[i], stage))
			return 1;
	fprintf(err, "memshim-format: no stage \"%s\" in %s%s\n", stage, files[0].path,
		n > 1 ? " or the other files" : "");
	return 0;
}

/* Several files: each under its header. */
static void mf_dump_all(FILE *out, struct mf_file *files, size_t n,
			const struct mf_opts *o)
{
	for (size_t i = 0; i < n; i++) {
		if (n > 1) {
			fprintf(out, "%s", i ? "\n" : "");
			mf_print_header(out, &files[i]);
		}
		mf_dump_file(out, &files[i], o);
	}
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
		mf_group_metrics(f->metrics, f->stages, &gs);
		if (mf_write_results(err, sub, f->metrics, &gs))
			rc = MF_BAD;
		mf_groups_free(&gs);
		free(sub);
	}
	return rc;
}

static int mf_plot_files(FILE *err, struct mf_file *files, size_t n, const struct mf_opts *o)
{
	double h = MF_PLOT_H0 + (double)MF_PLOT_HP * n;
	mf_sort_files(files, n);
	return mf_plot(err, files, n, o->plot, o->plot_w ? o->plot_w : MF_PLOT_W,
		       o->plot_h ? o->plot_h : (int)(h < MF_PLOT_MAX ? h : MF_PLOT_MAX));
}

static int mf_run(const struct mf_args *a, FILE *out, FILE *err)
{
	struct mf_file *files = mf_load_all(a, err);
	size_t n = (size_t)a->nfiles;
	int rc;
	if (!files)
		return MF_BAD;
	if (a->o.stage && !mf_stage_known(files, n, a->o.stage, err))
		rc = MF_BAD;
	else if (a->o.diff)
		rc = mf_diff(out, &files[0], &files[1], &a->o);
	else if (a->o.plot)
		rc = mf_plot_files(err, files, n, &a->o);
	else {
		mf_sort_files(files, n);
		if (a->o.merge)
			mf_merge(out, files, n, &a->o);
		else
			mf_dump_all(out, files, n, &a->o);
		rc = mf_results_all(err, files, n, a->o.json_dir);
	}
	for (size_t i = 0; i < n; i++)
		mf_file_free(&files[i]);
	free(files);
	return rc;
}

int mf_main(int argc, char **argv, FILE *out, FILE *err)
{
	struct mf_args a;
	int rc = mf_parse_args(argc, argv, &a, out, err);
	if (rc == MF_OK)
		rc = mf_check_args(&a, err);
	if (rc == MF_OK)
		rc = mf_run(&a, out, err);
	free(a.files);
	return rc < 0 ? MF_OK : rc;
}
