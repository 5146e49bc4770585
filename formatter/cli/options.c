/* memshim-format's command line: the table of modes (model/modes.def), the table of options, reading
 * argv into struct mf_args, the conflicts the tables imply, and --help made from both. */
#include "cli/cli.h"
#include "base/base.h"
#include "model/opts.h"
#include "model/sites.h"
#include "plot/plot.h"
#include "modes/modes.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const struct mf_mode_def mf_modes[MF_NMODES] = {
#define MF_MODE(id, name, pick, run, synopsis) [MF_##id] = { name, pick, run, synopsis },
#include "model/modes.def"
#undef MF_MODE
};

#define F(field) offsetof(struct mf_opts, field)
#define M(id) MF_MODE_BIT(id)

/* --by's values, in enum mf_by's order after MF_BY_NONE. */
static const char *const mf_by_names[] = { "line", "function", "file", "framework", NULL };

/* In the order --help lists them. */
/* clang-format off */
const struct mf_option mf_options[] = {
	{ .name = "--stage", .arg = "NAME", .kind = MF_TEXT, .field = F(stage),
	  .modes = M(DUMP) | M(MERGE) | M(DIFF) | M(CSV) | M(SITES) | M(FLAME) | M(SPEEDSCOPE) |
		   M(PPROF),
	  .help = "only that stage's group" },
	{ .name = "--calls", .kind = MF_FLAG, .field = F(calls), .modes = M(DUMP),
	  .help = "per stage, min/max over its calls" },
	{ .name = "--json-dir", .arg = "DIR", .kind = MF_TEXT, .field = F(json_dir),
	  .modes = M(DUMP) | M(MERGE),
	  .help = "also write {stage}_results.json and update all_results.json in DIR;\n"
		  "several files: DIR/rank<N>/ or DIR/pid<N>/ each, and the job's\n"
		  "combined peaks (job_mem_*) in DIR/job_results.json" },
	{ .name = "--all", .kind = MF_FLAG, .field = F(all),
	  .modes = M(DUMP) | M(MERGE) | M(PLOT) | M(SITES) | M(SPEEDSCOPE) | M(PPROF),
	  .help = "every process: no launcher or shell is summarised in one line, and\n"
		  "--merge merges every file, not only the ranks; --sites: also what\n"
		  "was live from before each stage" },
	{ .name = "--merge", .kind = MF_FLAG, .field = MF_NO_FIELD, .modes = M(MERGE), .selects = 1,
	  .help = "one table per stage over the ranks (else the processes): min, max,\n"
		  "mean, sum, who had the max" },
	{ .name = "--auto-merge", .kind = MF_FLAG, .field = F(auto_merge),
	  .modes = M(DUMP) | M(MERGE) | M(SITES),
	  .help = "--merge when the files hold two or more ranks, else the dump" },
	{ .name = "--diff", .arg = "OLD NEW", .kind = MF_FLAG, .field = MF_NO_FIELD, .modes = M(DIFF),
	  .selects = 1,
	  .help = "old, new and change per key; exit 1 when a memory metric grew past the\n"
		  "threshold or a stage of OLD is missing from NEW or did not finish;\n"
		  "several files or two directories: rank by rank, then the max" },
	{ .name = "--threshold", .arg = "T", .kind = MF_THRESHOLD, .field = F(threshold),
	  .modes = M(DIFF), .bad = "bad threshold (want N%, N MB/KB/GB/B, or both as 5%,1MB)",
	  .help = "growth must exceed N% of the old value and/or N MB/KB/GB/B; both\n"
		  "parts must be exceeded when given as 5%,1MB (the default)" },
	{ .name = "--allow-missing", .kind = MF_FLAG, .field = F(allow_missing), .modes = M(DIFF),
	  .help = "a stage or rank missing from NEW is reported but is no regression" },
	{ .name = "--csv", .kind = MF_FLAG, .field = MF_NO_FIELD, .modes = M(CSV), .selects = 1,
	  .help = "one row per process and stage (RFC 4180), bytes and seconds" },
	{ .name = "--plot", .arg = "OUT", .kind = MF_PICTURE, .field = F(mode_arg), .modes = M(PLOT),
	  .selects = 1,
	  .help = "draws memory over time with the stages into OUT (.svg or .png), one\n"
		  "panel per file on shared time and memory axes; prints nothing" },
	{ .name = "--size", .arg = "WxH", .kind = MF_SIZE, .field = F(plot_w),
	  .modes = M(PLOT) | M(FLAME), .bad = "bad size (want WxH, each 200 to 16000)",
	  .help = "the picture's size in pixels (--plot: 1200 x 300+250 per file by\n"
		  "default; --flame: 1200 x what its rows need)" },
	{ .name = "--compare", .arg = "HF", .kind = MF_TEXT, .field = F(mode_arg), .modes = M(COMPARE),
	  .selects = 1,
	  .help = "Hugging Face's own memory metrics (all_results.json or a\n"
		  "{split}_results.json of the same run) beside memshim's, key by key" },
	{ .name = "--sites", .kind = MF_FLAG, .field = MF_NO_FIELD, .modes = M(SITES), .selects = 1,
	  .help = "per stage, the call sites of what it added that were live at its\n"
		  "peak (CPU, then GPU): bytes, share of the stage's need, the\n"
		  "allocating Python line, the native frames it called in one line,\n"
		  "then its callers" },
	{ .name = "--top", .arg = "N", .kind = MF_COUNT, .field = F(top), .modes = M(SITES),
	  .bad = "bad --top (want 1 to 1000 sites)",
	  .help = "--sites: the N largest sites of each list (default 10)" },
	{ .name = "--depth", .arg = "N", .kind = MF_COUNT, .field = F(depth), .modes = M(SITES),
	  .bad = "bad --depth (want 1 to 1000 frames)",
	  .help = "--sites: N lines of each site, innermost first (default 5)" },
	{ .name = "--by", .arg = "WHAT", .kind = MF_CHOICE, .field = F(by), .modes = M(SITES),
	  .choices = mf_by_names, .bad = "bad --by (want line, function, file or framework)",
	  .help = "--sites: one row per allocating Python line, function or file (a\n"
		  "native-only stack: its innermost frame's), or per framework line that\n"
		  "allocated inside it (framework), bytes summed" },
	{ .name = "--native", .kind = MF_FLAG, .field = F(native), .modes = M(SITES),
	  .help = "--sites: every frame as recorded, native ones unfolded, innermost\n"
		  "first" },
	{ .name = "--no-lines", .kind = MF_FLAG, .field = F(no_lines),
	  .modes = M(SITES) | M(FLAME) | M(SPEEDSCOPE) | M(PPROF),
	  .help = "--sites, --flame, --speedscope, --pprof: native frames without the\n"
		  "source lines of their objects' debug info (symbol+offset only)" },
	{ .name = "--flame", .arg = "OUT", .kind = MF_PICTURE, .field = F(mode_arg), .modes = M(FLAME),
	  .selects = 1,
	  .help = "draws the call sites at a stage's peak as a flame graph into OUT (.svg\n"
		  "with text and a tooltip per frame, or .png), callers at the bottom,\n"
		  "widths in bytes: the --stage, else the stage with the largest peak, of\n"
		  "the process that peaked highest; OUT.html: one page of every stage\n"
		  "with zoom, search and tooltips" },
	{ .name = "--gpu", .kind = MF_FLAG, .field = F(flame_gpu),
	  .modes = M(FLAME) | M(SPEEDSCOPE) | M(PPROF),
	  .help = "--flame: the GPU sites rather than the CPU ones (also --speedscope,\n"
		  "--pprof)" },
	{ .name = "--speedscope", .arg = "OUT", .kind = MF_TEXT, .field = F(mode_arg),
	  .modes = M(SPEEDSCOPE), .selects = 1,
	  .help = "writes the call sites at the stages' peaks as speedscope's JSON into\n"
		  "OUT: one profile per process and stage, weights in bytes" },
	{ .name = "--pprof", .arg = "OUT", .kind = MF_TEXT, .field = F(mode_arg), .modes = M(PPROF),
	  .selects = 1,
	  .help = "the same as pprof's profile.proto, gzipped (pprof -http, speedscope,\n"
		  "IDEs): samples labelled with their stage and process" },
	/* These two read the whole command line themselves (modes/recover.c): mf_main looks for
	 * them first. */
	{ .name = "--recover", .arg = "R", .kind = MF_OWN, .field = MF_NO_FIELD, .modes = M(RECOVER),
	  .selects = 1,
	  .help = "writes live record R (a killed or running process; a FILE argument may\n"
		  "also be a live record) as a metrics file: -o FILE, - for stdout" },
	{ .name = "--recover-under", .arg = "DIR", .kind = MF_OWN, .field = MF_NO_FIELD,
	  .modes = M(RECOVER_UNDER), .selects = 1,
	  .help = "every record of a process gone whose metrics file is under DIR,\n"
		  "written out as that file unless the file already holds as much (the\n"
		  "process's own final or signal file, or one written at or after the\n"
		  "record's last update): memshim run after a kill; --root-pid PID: only\n"
		  "records whose root_pid is PID (a command and its children), --since\n"
		  "SECONDS: only processes started then or later (seconds since the epoch)" },
	{ .name = "--version", .kind = MF_SHOW_VERSION, .field = MF_NO_FIELD,
	  .help = "prints memshim-format's version" },
	{ .name = "--help", .alias = "-h", .kind = MF_SHOW_HELP, .field = MF_NO_FIELD },
};
/* clang-format on */
const size_t mf_noptions = sizeof mf_options / sizeof mf_options[0];

static const char mf_help_about[] =
	"Prints memshim metrics files as the Hugging Face Trainer memory-metrics dump, or draws them.\n";
static const char mf_help_exit[] = "Exit status: 0 ok, 1 --diff found a regression, 2 bad input or usage.\n";
enum { MF_HELP_COL = 19 }; /* where the help texts start */

int mf_usage_error(FILE *err, const char *what, const char *arg)
{
	fprintf(err, "memshim-format: %s%s%s (see memshim-format --help)\n", what, arg ? ": " : "", arg ? arg : "");
	return MF_BAD;
}

/* TEXT with every line after the first indented to the help column. */
static void mf_help_text(FILE *out, const char *text)
{
	for (const char *p = text; *p; p++) {
		fputc(*p, out);
		if (*p == '\n' && p[1])
			fprintf(out, "%*s", MF_HELP_COL, "");
	}
	fputc('\n', out);
}

void mf_print_help(FILE *out)
{
	for (int m = 0; m < MF_NMODES; m++)
		for (const char *p = mf_modes[m].synopsis; *p;) {
			size_t n = strcspn(p, "\n");
			fprintf(out, "%s%.*s\n",
				m || p != mf_modes[m].synopsis ? "       memshim-format " : "usage: memshim-format ",
				(int)n, p);
			p += n + (p[n] == '\n');
		}
	fputs(mf_help_about, out);
	for (size_t i = 0; i < mf_noptions; i++) {
		const struct mf_option *op = &mf_options[i];
		if (!op->help)
			continue;
		char *left = mf_xasprintf("%s%s%s", op->name, op->arg ? " " : "", op->arg ? op->arg : "");
		int pad = MF_HELP_COL - 2 - (int)strlen(left);
		fprintf(out, "  %s%*s", left, pad < 2 ? 2 : pad, "");
		mf_help_text(out, op->help);
		free(left);
	}
	fputs(mf_help_exit, out);
}

const struct mf_option *mf_option_named(const char *s)
{
	for (size_t i = 0; i < mf_noptions; i++)
		if (!strcmp(s, mf_options[i].name) || (mf_options[i].alias && !strcmp(s, mf_options[i].alias)))
			return &mf_options[i];
	return NULL;
}

enum mf_mode mf_option_mode(const struct mf_option *op)
{
	return op->selects ? (enum mf_mode)__builtin_ctz(op->modes) : MF_DUMP;
}

/* The option ARG names: "--opt", or "--opt=VALUE" for one that takes a value (*VALUE set). */
static const struct mf_option *mf_option_of(const char *arg, const char **value)
{
	const struct mf_option *op = mf_option_named(arg);
	*value = NULL;
	if (op)
		return op;
	const char *eq = strchr(arg, '=');
	for (size_t i = 0; eq && i < mf_noptions; i++) {
		op = &mf_options[i];
		if (op->kind != MF_FLAG && op->kind < MF_OWN && strlen(op->name) == (size_t)(eq - arg) &&
		    !strncmp(arg, op->name, (size_t)(eq - arg))) {
			*value = eq + 1;
			return op;
		}
	}
	return NULL;
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

/* Stores V, read as OP's kind says, in OP's field of O. */
static int mf_set_value(struct mf_opts *o, const struct mf_option *op, const char *v, FILE *err)
{
	void *field = op->field == MF_NO_FIELD ? NULL : (char *)o + op->field;
	switch (op->kind) {
	case MF_PICTURE: /* its name is checked with the mode (mf_check_picture) */
	case MF_TEXT:
		if (field)
			*(const char **)field = v;
		return MF_OK;
	case MF_COUNT:
		return field && !mf_parse_count(v, field) ? MF_OK : mf_usage_error(err, op->bad, v);
	case MF_CHOICE:
		for (int k = 0; field && op->choices[k]; k++)
			if (!strcmp(v, op->choices[k]))
				return *(int *)field = k + 1, MF_OK;
		return mf_usage_error(err, op->bad, v);
	case MF_SIZE:
		return mf_parse_size(v, &o->plot_w, &o->plot_h) ? mf_usage_error(err, op->bad, v) : MF_OK;
	case MF_THRESHOLD:
		if (o->threshold_text)
			return mf_usage_error(err, "--threshold given twice (combine as 5%,1MB)", v);
		if (mf_parse_threshold(v, &o->threshold))
			return mf_usage_error(err, op->bad, v);
		o->threshold_text = v;
		return MF_OK;
	default: /* MF_FLAG */
		if (field)
			*(int *)field = 1;
		return MF_OK;
	}
}

/* One option at argv[*I] (its value in the next argument or after '='). */
static int mf_take_option(int argc, char **argv, int *i, struct mf_args *a, FILE *out, FILE *err)
{
	const char *v;
	const struct mf_option *op = mf_option_of(argv[*i], &v);
	if (!op)
		return mf_usage_error(err, "unknown option", argv[*i]);
	if (op->kind == MF_SHOW_HELP)
		return mf_print_help(out), -1;
	if (op->kind == MF_SHOW_VERSION)
		return fprintf(out, "memshim-format %s\n", mf_version()), -1;
	a->given[a->ngiven++] = (size_t)(op - mf_options);
	if (op->selects && a->o.mode == MF_DUMP) /* the first mode given is the mode */
		a->o.mode = mf_option_mode(op);
	if (op->kind != MF_FLAG && !v)
		v = *i + 1 < argc ? argv[++*i] : NULL;
	if (op->kind != MF_FLAG && (!v || !*v))
		return mf_usage_error(err, "missing value for", op->name);
	return mf_set_value(&a->o, op, v, err);
}

int mf_parse_args(int argc, char **argv, struct mf_args *a, FILE *out, FILE *err)
{
	int only_files = 0;
	memset(a, 0, sizeof *a);
	a->sep = -1;
	a->files = mf_xmalloc((size_t)(argc > 0 ? argc : 1) * sizeof *a->files);
	a->given = mf_xmalloc((size_t)(argc > 0 ? argc : 1) * sizeof *a->given);
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		if (!strcmp(s, "--") && a->nfiles && a->sep < 0) {
			a->sep = a->nfiles; /* OLD... -- NEW... (for --diff; elsewhere just more files) */
			only_files = 1;
		} else if (only_files || s[0] != '-' || !s[1]) {
			a->files[a->nfiles++] = argv[i];
		} else if (!strcmp(s, "--")) {
			only_files = 1;
		} else {
			int rc = mf_take_option(argc, argv, &i, a, out, err);
			if (rc)
				return rc;
		}
	}
	return MF_OK;
}

void mf_args_free(struct mf_args *a)
{
	free(a->files);
	free(a->given);
	a->files = NULL;
	a->given = NULL;
}

/* "the dump, --merge, --plot and --sites": the modes in MASK. */
static char *mf_mode_list(unsigned mask)
{
	char *list = mf_xstrdup("");
	int left = __builtin_popcount(mask);
	for (int m = 0; m < MF_NMODES; m++) {
		if (!(mask & (1u << m)))
			continue;
		left--;
		char *s = mf_xasprintf("%s%s%s", list, !*list ? "" : left ? ", " : " and ", mf_modes[m].name);
		free(list);
		list = s;
	}
	return list;
}

/* OP given to mode M, which does not take it. */
static int mf_conflict(FILE *err, const struct mf_option *op, enum mf_mode m)
{
	char *what, *list = mf_mode_list(op->modes);
	if (op->selects)
		what = mf_xasprintf("%s does not combine with %s", mf_modes[m].name, op->name);
	else if (m == MF_DUMP) /* no mode given: the user named only the option */
		what = mf_xasprintf("%s only applies to %s", op->name, list);
	else
		what = mf_xasprintf("%s only applies to %s, not to %s", op->name, list, mf_modes[m].name);
	mf_usage_error(err, what, NULL);
	free(what);
	free(list);
	return MF_BAD;
}

/* Every option given must be one its mode takes; --auto-merge may make the dump a --merge, so
 * beside it only what both take. */
static int mf_check_modes(const struct mf_args *a, FILE *err)
{
	enum mf_mode m = a->o.mode;
	for (int i = 0; i < a->ngiven; i++) {
		const struct mf_option *op = &mf_options[a->given[i]];
		if (!(op->modes & (1u << m)))
			return mf_conflict(err, op, m);
		if (m == MF_DUMP && a->o.auto_merge && !(op->modes & M(MERGE))) {
			char *what = mf_xasprintf("%s does not combine with --auto-merge (a --merge with "
						  "two or more ranks)",
						  op->name);
			mf_usage_error(err, what, NULL);
			free(what);
			return MF_BAD;
		}
	}
	return MF_OK;
}

/* The files each mode reads. */
static int mf_check_operands(const struct mf_args *a, FILE *err)
{
	if (a->o.mode == MF_DIFF && a->sep < 0 && a->nfiles != 2)
		return mf_usage_error(err, "--diff takes OLD NEW, or OLD_FILE... -- NEW_FILE...", NULL);
	if (a->o.mode == MF_DIFF && a->sep >= a->nfiles)
		return mf_usage_error(err, "--diff: no NEW file after --", NULL);
	if (a->o.mode == MF_COMPARE && a->nfiles != 1)
		return mf_usage_error(err, "--compare takes one metrics file and no other mode", NULL);
	return MF_OK;
}

/* The picture a mode draws: a name ending in .svg or .png. */
static int mf_check_picture(const struct mf_args *a, FILE *err)
{
	for (int i = 0; i < a->ngiven; i++) {
		const struct mf_option *op = &mf_options[a->given[i]];
		int page = op->modes == M(FLAME); /* --flame also writes a page */
		if (op->kind != MF_PICTURE || mf_plot_kind(a->o.mode_arg) || (page && mf_html_name(a->o.mode_arg)))
			continue;
		char *what = mf_xasprintf("%s wants a file name ending in .svg%s .png%s", op->name, page ? "," : " or",
					  page ? " or .html" : "");
		mf_usage_error(err, what, a->o.mode_arg);
		free(what);
		return MF_BAD;
	}
	return MF_OK;
}

int mf_check_args(struct mf_args *a, FILE *err)
{
	if (!a->nfiles)
		return mf_usage_error(err, "no metrics file given", NULL);
	if (mf_check_modes(a, err) || mf_check_picture(a, err) || mf_check_operands(a, err))
		return MF_BAD;
	if (!a->o.threshold_text) /* the default: 5% of the old value and at least 1 MiB */
		mf_parse_threshold(a->o.threshold_text = "5%,1MB", &a->o.threshold);
	return MF_OK;
}
