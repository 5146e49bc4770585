/* --sites: the call sites live at each stage's peak, as the shim sampled them (stages[].peak_sites,
 * peak_sites_gpu and the top-level "sites"), one aligned table per stage and device. */
#include "mf.h"
#include "plot/plot.h"

#include <stdlib.h>
#include <string.h>

static const char *const mf_site_keys[2][2] = { { "peak_sites", "peak_sites_lag" },
						{ "peak_sites_gpu", "peak_sites_gpu_lag" } };

static int mf_site_cmp(const void *a, const void *b)
{
	const struct mf_site *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->order < y->order ? -1 : x->order > y->order; /* stable: the file's order on ties */
}

void mf_sites_get(json_t *stage, int gpu, struct mf_sites *out)
{
	json_t *list = json_object_get(stage, mf_site_keys[gpu != 0][0]), *e;
	json_t *lag = json_object_get(stage, mf_site_keys[gpu != 0][1]);
	size_t i;
	memset(out, 0, sizeof *out);
	out->present = json_is_array(list);
	out->lag = json_is_number(lag) && json_number_value(lag) >= 0 ? json_number_value(lag) : -1;
	out->s = mf_xmalloc((json_array_size(list) ? json_array_size(list) : 1) * sizeof *out->s);
	json_array_foreach(list, i, e) {
		struct mf_site st = { 0, -1, NULL, i };
		json_t *n = json_object_get(e, "samples"), *fr = json_object_get(e, "frames");
		/* entries that are not sites are passed over: readers ignore what they do not know */
		if (!mf_num(json_object_get(e, "bytes"), &st.bytes) || st.bytes < 0)
			continue;
		st.samples = json_is_integer(n) && json_integer_value(n) >= 0 ? json_integer_value(n) : -1;
		st.frames = json_is_array(fr) ? fr : NULL;
		out->s[out->n++] = st;
		out->total += st.bytes;
		out->samples += st.samples > 0 ? st.samples : 0;
	}
	if (out->n)
		qsort(out->s, out->n, sizeof *out->s, mf_site_cmp);
}

void mf_sites_free(struct mf_sites *s)
{
	free(s->s);
	memset(s, 0, sizeof *s);
}

size_t mf_site_nframes(const struct mf_site *s)
{
	return json_array_size(s->frames);
}

const char *mf_site_frame(const struct mf_site *s, size_t i)
{
	const char *f = json_string_value(json_array_get(s->frames, i));
	return f && *f ? f : "?";
}

int mf_file_has_sites(const struct mf_file *f)
{
	size_t i;
	json_t *s;
	if (json_is_object(json_object_get(f->root, "sites")))
		return 1;
	json_array_foreach(f->stages, i, s)
		if (json_is_array(json_object_get(s, "peak_sites")) ||
		    json_is_array(json_object_get(s, "peak_sites_gpu")))
			return 1;
	return 0;
}

double mf_stage_peak(json_t *stage, int gpu)
{
	double x;
	json_t *comp = json_object_get(stage, gpu ? "gpu" : "cpu");
	return mf_num(json_object_get(comp, "peak"), &x) && x >= 0 ? x : -1;
}

static char *mf_mb(double bytes)
{
	json_t *v = json_real(bytes);
	char *s = mf_format_value("x_mem_", v); /* whole MB, as the dump prints memory */
	json_decref(v);
	return s;
}

/* "CPU peak 150MB" or "GPU peak unknown". */
static char *mf_peak_text(json_t *stage, int gpu)
{
	double peak = mf_stage_peak(stage, gpu);
	if (peak < 0)
		return mf_xasprintf("%s peak unknown", gpu ? "GPU" : "CPU");
	char *mb = mf_mb(peak), *s = mf_xasprintf("%s peak %s", gpu ? "GPU" : "CPU", mb);
	free(mb);
	return s;
}

char *mf_sites_about(const struct mf_file *f, json_t *stage, int gpu, const struct mf_sites *s)
{
	json_t *sites = json_object_get(f->root, "sites");
	double rate = 0;
	char *how, *lag;
	if (gpu) {
		how = mf_xasprintf("every allocation recorded, %lld allocation%s at the peak", s->samples,
				   s->samples == 1 ? "" : "s");
	} else if (mf_num(json_object_get(sites, "rate"), &rate) && rate > 0) {
		char *r = mf_fmt_bytes(rate);
		how = mf_xasprintf("sampled every %s on average, %lld sample%s at the peak", r,
				   s->samples, s->samples == 1 ? "" : "s");
		free(r);
	} else {
		how = mf_xasprintf("sampled, %lld sample%s at the peak", s->samples, s->samples == 1 ? "" : "s");
	}
	if (s->lag > 0) {
		char *l = mf_fmt_bytes(s->lag);
		lag = mf_xasprintf("; sites may lag the peak by up to %s", l);
		free(l);
	} else {
		lag = mf_xstrdup(s->lag == 0 ? "; sites taken at the peak" : "");
	}
	char *peak_text = mf_peak_text(stage, gpu);
	char *line = mf_xasprintf("%s; %s%s", peak_text, how, lag);
	free(how), free(lag), free(peak_text);
	return line;
}

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

/* FRAME demangled and made printable (malloc'd). */
static char *mf_clean_frame(const char *frame)
{
	char *shown = mf_frame_display(frame), *clean = mf_clean_text(shown);
	free(shown);
	return clean;
}

/* One site: its innermost frame on the row, then up to DEPTH - 1 callers indented below. */
static void mf_site_rows(struct mf_table *t, const struct mf_site *s, size_t rank, double total,
			 size_t depth)
{
	size_t nf = mf_site_nframes(s), shown = nf < depth ? nf : depth;
	char *samples = s->samples >= 0 ? mf_xasprintf("%lld", s->samples) : mf_xstrdup("?");
	char *first = nf ? mf_clean_frame(mf_site_frame(s, 0)) : mf_xstrdup("(no frames)");
	mf_text_row(t, mf_xasprintf("%zu", rank), mf_mb(s->bytes), mf_share(s->bytes, total), samples,
		    first);
	for (size_t i = 1; i < shown; i++) {
		char *clean = mf_clean_frame(mf_site_frame(s, i));
		mf_text_row(t, NULL, NULL, NULL, NULL, mf_xasprintf("  %s", clean));
		free(clean);
	}
	if (nf > shown)
		mf_text_row(t, NULL, NULL, NULL, NULL, mf_xasprintf("  … %zu more frame%s", nf - shown,
								    nf - shown == 1 ? "" : "s"));
}

/* One device's list: the line that says how it was measured, then the table. */
static void mf_print_site_list(FILE *out, const struct mf_file *f, json_t *stage, int gpu,
			       const struct mf_opts *o)
{
	struct mf_sites s;
	struct mf_table t;
	size_t top = o->top > 0 ? (size_t)o->top : MF_SITES_TOP;
	size_t depth = o->depth > 0 ? (size_t)o->depth : MF_SITES_DEPTH;
	mf_sites_get(stage, gpu, &s);
	if (!s.n) {
		char *peak = mf_peak_text(stage, gpu);
		fprintf(out, "  %s: no %s allocation was live at the peak\n", peak,
			gpu ? "recorded" : "sampled");
		free(peak);
		mf_sites_free(&s);
		return;
	}
	char *about = mf_sites_about(f, stage, gpu, &s);
	fprintf(out, "  %s\n", about);
	free(about);
	mf_table_init(&t, 5, mf_sites_align, mf_sites_seps);
	mf_text_row(&t, mf_xstrdup("#"), mf_xstrdup("bytes"), mf_xstrdup("share"),
		    mf_xstrdup(gpu ? "allocs" : "samples"), mf_xstrdup("site, then its callers"));
	for (size_t i = 0; i < s.n && i < top; i++)
		mf_site_rows(&t, &s.s[i], i + 1, s.total, depth);
	mf_table_print(out, &t, "  ");
	mf_table_free(&t);
	if (s.n > top) {
		double rest = 0;
		for (size_t i = top; i < s.n; i++)
			rest += s.s[i].bytes;
		char *mb = mf_mb(rest), *pct = mf_share(rest, s.total);
		fprintf(out, "  … %zu more site%s: %s, %s (--top %zu shows %s)\n", s.n - top,
			s.n - top == 1 ? "" : "s", mb, pct, s.n <= MF_SITES_MAX ? s.n : MF_SITES_MAX,
			s.n <= MF_SITES_MAX ? "them" : "more");
		free(mb), free(pct);
	}
	mf_sites_free(&s);
}

/* A stage's block: its header, CPU first, then GPU when there is anything to say about it. */
static int mf_print_stage_sites(FILE *out, const struct mf_file *f, json_t *s, int asked, int first)
{
	const char *name = json_string_value(json_object_get(s, "name"));
	json_t *cpu = json_object_get(s, "peak_sites"), *gpu = json_object_get(s, "peak_sites_gpu");
	int has_cpu = json_is_array(cpu), has_gpu = json_is_array(gpu) &&
						    (json_array_size(gpu) || f->gpu_used);
	if (!has_cpu && !has_gpu && !asked)
		return 0;
	fprintf(out, "%s***** %s%s call sites at the peak *****\n", first ? "" : "\n", name,
		json_is_true(json_object_get(s, "open")) ? " (open)" : "");
	if (!has_cpu && !has_gpu)
		fputs("  no call sites recorded for this stage\n", out);
	return 1;
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
	if (ns > 0 && mf_num(json_object_get(sites, "rate"), &rate) && rate > 0) {
		char *b = mf_fmt_bytes((double)ns * rate);
		fprintf(out, "\nmemshim: %lld sample%s not recorded (the shim's stack or sample table was "
			"full): the sites above miss up to about %s\n", ns, ns == 1 ? " was" : "s were", b);
		free(b);
	} else if (ns > 0) {
		fprintf(out, "\nmemshim: %lld sample%s not recorded (the shim's stack or sample table was "
			"full): the sites above miss %s bytes\n", ns, ns == 1 ? " was" : "s were",
			ns == 1 ? "its" : "their");
	} else if (nd > 0) {
		fprintf(out, "\nmemshim: the stack table was full: %lld sampled stack%s not kept; the "
			"sites above miss %s bytes\n", nd, nd == 1 ? " was" : "s were",
			nd == 1 ? "its" : "their");
	}
}

void mf_print_sites(FILE *out, const struct mf_file *f, const struct mf_opts *o)
{
	size_t i, shown = 0;
	json_t *s;
	if (!mf_file_has_sites(f)) {
		fprintf(out, "memshim: %s has no call sites: sampling was off (MEMSHIM_SITES=0), or the "
			"file predates call-site sampling\n", f->path);
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
