/* --sites: the call sites live at each stage's peak, as the shim sampled them (stages[].peak_sites,
 * peak_sites_gpu and the top-level "sites"), one aligned table per stage and device; the lists and
 * what is said about them are model/sites.c's. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/sites.h"

#include <stdlib.h>
#include <string.h>

static const enum mf_align mf_sites_align[] = { MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_RIGHT, MF_LEFT };
static const char *const mf_sites_seps[] = { "  ", "  ", "  ", "  " };

static char *mf_share(double part, double total)
{
	return mf_xasprintf("%.1f%%", total > 0 ? 100 * part / total : 0.0);
}

static void mf_text_row(struct mf_table *t, char *c0, char *c1, char *c2, char *c3, char *site)
{
	char *cells[5] = { c0, c1, c2, c3, site };
	mf_table_row(t, cells);
}

static char *mf_samples_cell(long long samples)
{
	return samples >= 0 ? mf_xasprintf("%lld", samples) : mf_xstrdup("?");
}

/* One site (STACKS stacks that show the same): its lines (model/frames.c) up to DEPTH, the first on
 * the row, the rest indented below. */
static void mf_site_rows(struct mf_table *t, const struct mf_site *s, size_t stacks, size_t rank, double base,
			 size_t depth, int native)
{
	char **lines;
	size_t n = mf_site_lines(s, native, &lines), shown = n < depth ? n : depth;
	char *first = stacks > 1 ? mf_xasprintf("%s  (%zu stacks)", lines[0], stacks) : lines[0];
	if (first != lines[0])
		free(lines[0]);
	mf_text_row(t, mf_xasprintf("%zu", rank), mf_mb(s->bytes), mf_share(s->bytes, base),
		    mf_samples_cell(s->samples), first);
	for (size_t i = 1; i < shown; i++) {
		mf_text_row(t, NULL, NULL, NULL, NULL, mf_xasprintf("  %s", lines[i]));
		free(lines[i]);
	}
	for (size_t i = shown > 1 ? shown : 1; i < n; i++)
		free(lines[i]);
	if (n > shown) {
		const char *what = mf_site_python_first(s, native) ? "line" : "frame";
		mf_text_row(t, NULL, NULL, NULL, NULL,
			    mf_xasprintf("  … %zu more %s%s", n - shown, what, n - shown == 1 ? "" : "s"));
	}
	free(lines);
}

/* Blocks the shim recorded without their stack (its stack table was full), in the closing entries. */
static long long mf_unkept(const struct mf_file *f)
{
	json_t *u = json_object_get(json_object_get(f->root, "sites"), "unkept");
	return json_is_integer(u) ? (long long)json_integer_value(u) : 0;
}

/* The closing entry: every stack the file did not keep apart, in one row. */
static void mf_closing_row(struct mf_table *t, const struct mf_sites *s, double base, long long unkept)
{
	if (s->named == s->n)
		return;
	const struct mf_site *c = &s->s[s->n - 1];
	mf_text_row(t, mf_xstrdup("+"), mf_mb(c->bytes), mf_share(c->bytes, base), mf_samples_cell(c->samples),
		    mf_xasprintf("%lld other stack%s together (%s; their frames are not "
				 "kept)",
				 c->others, c->others == 1 ? "" : "s",
				 unkept > 0 ? "among them the blocks whose stack the "
					      "full stack table could not keep"
					    : "each smaller than the sites above"));
}

/* The named sites past --top, in one row. */
static void mf_rest_row(struct mf_table *t, const struct mf_sites *s, size_t top, double base)
{
	double rest = 0;
	long long samples = 0;
	if (s->named <= top)
		return;
	for (size_t i = top; i < s->named; i++) {
		rest += s->s[i].bytes;
		samples += s->s[i].samples > 0 ? s->s[i].samples : 0;
	}
	size_t more = s->named - top, all = s->named <= MF_SITES_MAX ? s->named : MF_SITES_MAX;
	mf_text_row(t, mf_xstrdup("…"), mf_mb(rest), mf_share(rest, base), mf_samples_cell(samples),
		    mf_xasprintf("%zu more site%s (--top %zu shows %s)", more, more == 1 ? "" : "s", all,
				 s->named <= MF_SITES_MAX ? "them" : "more"));
}

/* The named sites summed per key, largest first: --by's key, or else what the site shows at
 * DEPTH (stacks that differ only below what is shown are one row to their user). */
struct mf_group_row {
	char *key;
	struct mf_site sum; /* the first site of the key, its bytes and samples the key's sums */
	size_t stacks;
};

static int mf_group_row_cmp(const void *a, const void *b)
{
	const struct mf_group_row *x = a, *y = b;
	if (x->sum.bytes != y->sum.bytes)
		return x->sum.bytes < y->sum.bytes ? 1 : -1;
	return x->sum.order < y->sum.order ? -1 : x->sum.order > y->sum.order;
}

/* What site S shows at DEPTH, as one string. */
static char *mf_shown_key(const struct mf_site *s, size_t depth, int native)
{
	char **lines;
	size_t n = mf_site_lines(s, native, &lines), shown = n < depth ? n : depth, len = 24;
	for (size_t i = 0; i < shown; i++)
		len += strlen(lines[i]) + 1;
	char *key = mf_xmalloc(len), *at = key;
	for (size_t i = 0; i < n; i++) {
		if (i < shown)
			at += sprintf(at, "%s\n", lines[i]);
		free(lines[i]);
	}
	sprintf(at, "%zu", n - shown);
	free(lines);
	return key;
}

static size_t mf_group_sites(const struct mf_sites *s, const struct mf_opts *o, size_t depth, struct mf_group_row *g)
{
	size_t n = 0;
	for (size_t i = 0; i < s->named; i++) {
		char *key = o->by ? mf_site_key(&s->s[i], (enum mf_by)o->by, o->native)
				  : mf_shown_key(&s->s[i], depth, o->native);
		size_t k = 0;
		while (k < n && strcmp(g[k].key, key))
			k++;
		if (k == n) {
			g[n++] = (struct mf_group_row){ key, s->s[i], 1 };
			continue;
		}
		free(key);
		long long more = s->s[i].samples, *sum = &g[k].sum.samples;
		*sum = more < 0 ? *sum : *sum < 0 ? more : *sum + more; /* "?" only when no site says */
		g[k].sum.bytes += s->s[i].bytes;
		g[k].stacks++;
	}
	qsort(g, n, sizeof *g, mf_group_row_cmp);
	return n;
}

/* The rows of the named sites: per --by key, else per site as shown. */
static void mf_group_rows(struct mf_table *t, const struct mf_sites *s, const struct mf_opts *o, double base)
{
	struct mf_group_row *g = mf_xmalloc((s->named ? s->named : 1) * sizeof *g);
	size_t depth = o->depth > 0 ? (size_t)o->depth : MF_SITES_DEPTH;
	size_t n = mf_group_sites(s, o, depth, g), top = o->top > 0 ? (size_t)o->top : MF_SITES_TOP;
	struct mf_sites rest = { .s = NULL, .named = n };
	for (size_t i = 0; i < n; i++) {
		if (i < top && o->by)
			mf_text_row(t, mf_xasprintf("%zu", i + 1), mf_mb(g[i].sum.bytes),
				    mf_share(g[i].sum.bytes, base), mf_samples_cell(g[i].sum.samples),
				    g[i].stacks > 1 ? mf_xasprintf("%s  (%zu stacks)", g[i].key, g[i].stacks)
						    : mf_xstrdup(g[i].key));
		else if (i < top)
			mf_site_rows(t, &g[i].sum, g[i].stacks, i + 1, base, depth, o->native);
		free(g[i].key);
	}
	if (n > top) { /* the groups past --top, summed as the sites are */
		rest.s = mf_xmalloc(n * sizeof *rest.s);
		for (size_t i = 0; i < n; i++)
			rest.s[i] = g[i].sum;
		mf_rest_row(t, &rest, top, base);
		free(rest.s);
	}
	free(g);
}

/* What the list is and what its shares are of (*BASE: those bytes); then how much is exact. */
static void mf_print_view_head(FILE *out, json_t *stage, int gpu, enum mf_view view, const struct mf_sites *s,
			       double *base)
{
	char *head = mf_sites_summary(stage, gpu, view, s, mf_mb, base), *exact = mf_sites_exact_text(s, mf_mb, 0);
	fprintf(out, "  %s\n", head);
	if (exact)
		fprintf(out, "  %s\n", exact);
	free(head), free(exact);
}

/* One list of a stage: what it is and what its shares are of, then its table. */
static void mf_print_view(FILE *out, const struct mf_file *f, json_t *stage, int gpu, enum mf_view view,
			  const struct mf_sites *s, const struct mf_opts *o)
{
	struct mf_table t;
	double base;
	mf_print_view_head(out, stage, gpu, view, s, &base);
	mf_table_init(&t, 5, mf_sites_align, mf_sites_seps);
	static const char *const by[] = { "", "line", "function", "file", "the framework's line" };
	mf_text_row(&t, mf_xstrdup("#"), mf_xstrdup("bytes"), mf_xstrdup("share"),
		    mf_xstrdup(mf_sites_every_allocation(f, stage, gpu, view) ? "allocs" : "samples"),
		    o->by ? mf_xasprintf("sites grouped by %s", by[o->by]) : mf_xstrdup("site, then its callers"));
	mf_group_rows(&t, s, o, base);
	mf_closing_row(&t, s, base, mf_unkept(f));
	mf_table_print(out, &t, "  ");
	mf_table_free(&t);
}

/* What was live from before the stage: its table (--all), else one line saying what it holds. */
static void mf_print_before(FILE *out, const struct mf_file *f, json_t *stage, int gpu, const struct mf_opts *o)
{
	struct mf_sites b;
	mf_sites_view(stage, gpu, MF_BEFORE, &b);
	if (o->all && b.n) {
		fputc('\n', out);
		mf_sites_lead(&b);
		mf_print_view(out, f, stage, gpu, MF_BEFORE, &b, o);
	} else if (o->all) {
		fputs("  nothing from before the stage was live at its peak\n", out);
	} else if (b.n) {
		char *mb = mf_mb(b.total);
		fprintf(out, "  --all also shows the %s live from before the stage\n", mb);
		free(mb);
	}
	mf_sites_free(&b);
}

/* One device's lists: the line that says how it was measured, then the table of what the stage
 * added (an older file: of all that was live), then what it inherited. */
static void mf_print_site_list(FILE *out, const struct mf_file *f, json_t *stage, int gpu, const struct mf_opts *o)
{
	struct mf_sites s;
	mf_sites_get(stage, gpu, &s);
	if (!s.n) {
		char *peak = mf_stage_peak_text(stage, gpu);
		fprintf(out, "  %s: no %s allocation%s was live at the peak\n", peak,
			mf_sites_every_allocation(f, stage, gpu, MF_ADDED) ? "recorded" : "sampled",
			s.split ? " made in the stage" : "");
		free(peak);
	} else {
		char *about = mf_sites_about(f, stage, gpu, &s);
		fprintf(out, "  %s\n", about);
		free(about);
		mf_sites_lead(&s);
		mf_print_view(out, f, stage, gpu, MF_ADDED, &s, o);
	}
	if (s.split)
		mf_print_before(out, f, stage, gpu, o);
	mf_sites_free(&s);
}

/* A stage's block: its header, CPU first, then GPU when there is anything to say about it. */
static int mf_print_stage_sites(FILE *out, const struct mf_file *f, json_t *s, int asked, int first)
{
	const char *name = json_string_value(json_object_get(s, "name"));
	json_t *cpu = json_object_get(s, "peak_sites"), *gpu = json_object_get(s, "peak_sites_gpu");
	int has_cpu = json_is_array(cpu), has_gpu = json_is_array(gpu) && (json_array_size(gpu) || f->gpu_used);
	if (!has_cpu && !has_gpu && !asked)
		return 0;
	fprintf(out, "%s***** %s%s call sites at the peak *****\n", first ? "" : "\n", name,
		json_is_true(json_object_get(s, "open")) ? " (open)" : "");
	if (!has_cpu && !has_gpu)
		fputs("  no call sites recorded for this stage\n", out);
	return 1;
}

/* What one record of the CPU lists is: "allocation" (exact mode), "sample", or "block" with exact
 * stages (an allocation inside them, a sample elsewhere). */
static const char *mf_cpu_record(const struct mf_file *f)
{
	json_t *sites = json_object_get(f->root, "sites");
	const char *mode = json_string_value(json_object_get(sites, "mode"));
	if (mode && !strcmp(mode, "exact"))
		return "allocation";
	return json_array_size(json_object_get(sites, "exact_stages")) ? "block" : "sample";
}

/* What the shim's bounded tables could not hold is missing from every list: the samples it did
 * not record (samples_dropped, each standing for `rate` bytes), else the stacks it did not keep. */
static void mf_print_dropped(FILE *out, const struct mf_file *f)
{
	json_t *sites = json_object_get(f->root, "sites");
	json_t *sd = json_object_get(sites, "samples_dropped"), *d = json_object_get(sites, "stacks_dropped");
	long long ns = json_is_integer(sd) ? (long long)json_integer_value(sd) : 0;
	long long nd = json_is_integer(d) ? (long long)json_integer_value(d) : 0;
	double rate;
	long long nu = mf_unkept(f);
	if (nu > 0) /* recorded, so counted: only their frames are missing */
		fprintf(out,
			"\nmemshim: the stack table was full: %lld %s%s recorded without %s stack; %s bytes are "
			"in the closing rows (+)\n",
			nu, mf_cpu_record(f), nu == 1 ? " was" : "s were", nu == 1 ? "its" : "their",
			nu == 1 ? "its" : "their");
	if (ns > 0 && strcmp(mf_cpu_record(f), "sample")) { /* allocations of any size: no bound to give */
		fprintf(out,
			"\nmemshim: %lld %s%s not recorded (the shim's stack or live-block table "
			"was full): the sites above miss %s bytes\n",
			ns, mf_cpu_record(f), ns == 1 ? " was" : "s were", ns == 1 ? "its" : "their");
	} else if (ns > 0 && mf_num(json_object_get(sites, "rate"), &rate) && rate > 0) {
		char *b = mf_fmt_bytes((double)ns * rate);
		fprintf(out,
			"\nmemshim: %lld sample%s not recorded (the shim's stack or sample table was "
			"full): the sites above miss up to about %s\n",
			ns, ns == 1 ? " was" : "s were", b);
		free(b);
	} else if (ns > 0) {
		fprintf(out,
			"\nmemshim: %lld sample%s not recorded (the shim's stack or sample table was "
			"full): the sites above miss %s bytes\n",
			ns, ns == 1 ? " was" : "s were", ns == 1 ? "its" : "their");
	} else if (nd > 0 && nu == 0) { /* an older file: the samples of stacks not kept were dropped */
		fprintf(out,
			"\nmemshim: the stack table was full: %lld sampled stack%s not kept; the "
			"sites above miss %s bytes\n",
			nd, nd == 1 ? " was" : "s were", nd == 1 ? "its" : "their");
	}
}

void mf_print_sites(FILE *out, const struct mf_file *f, const struct mf_opts *o)
{
	size_t i, shown = 0;
	json_t *s;
	if (!mf_file_has_sites(f)) {
		fprintf(out,
			"memshim: %s has no call sites: sampling was off (MEMSHIM_SITES=0), or the "
			"file predates call-site sampling\n",
			f->path);
		return;
	}
	if (!f->complete) {
		mf_print_status(out, f);
		fputc('\n', out);
	}
	json_array_foreach(f->stages, i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		int asked = o->stage && !strcmp(name, o->stage);
		if ((o->stage && !asked) || !mf_print_stage_sites(out, f, s, asked, !shown))
			continue;
		shown++;
		if (json_is_array(json_object_get(s, "peak_sites")))
			mf_print_site_list(out, f, s, 0, o);
		json_t *gpu = json_object_get(s, "peak_sites_gpu");
		if (json_is_array(gpu) && (json_array_size(gpu) || f->gpu_used)) {
			fputc('\n', out);
			mf_print_site_list(out, f, s, 1, o);
		}
	}
	if (!shown && o->stage)
		fprintf(out, "memshim: no stage \"%s\" in %s\n", o->stage, f->path);
	else if (!shown)
		fprintf(out, "memshim: no stage in %s has call sites\n", f->path);
	else
		mf_print_dropped(out, f);
}
