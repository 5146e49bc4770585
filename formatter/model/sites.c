/* The call sites live at each stage's peak as the file lists them (stages[].peak_sites,
 * peak_sites_gpu, their _before lists and the top-level "sites"): read into struct mf_sites, what
 * their shares are of, and the lines that say what a list is; --sites's tables (modes/sites.c) and
 * the flame graphs print them. */
#include "base/base.h"
#include "model/document.h"
#include "model/sites.h"

#include <stdlib.h>
#include <string.h>

/* [gpu][view]: the list, then the key of its lag. */
static const char *const mf_site_keys[2][2] = { { "peak_sites", "peak_sites_before" },
						{ "peak_sites_gpu", "peak_sites_gpu_before" } };
static const char *const mf_lag_keys[2] = { "peak_sites_lag", "peak_sites_gpu_lag" };

static int mf_site_cmp(const void *a, const void *b)
{
	const struct mf_site *x = a, *y = b;
	if ((x->others >= 0) != (y->others >= 0)) /* the closing entry last */
		return x->others >= 0 ? 1 : -1;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->order < y->order ? -1 : x->order > y->order; /* stable: the file's order on ties */
}

/* The stacks a closing entry stands for ("other_stacks", or its one frame "(N other stacks)"),
 * or -1 for a site. */
static long long mf_closing_count(json_t *e, json_t *frames)
{
	json_t *n = json_object_get(e, "other_stacks");
	const char *f = json_string_value(json_array_get(frames, 0));
	long long k;
	char tail;
	if (json_is_integer(n) && json_integer_value(n) >= 0)
		return json_integer_value(n);
	if (json_array_size(frames) == 1 && f && sscanf(f, "(%lld other stacks%c", &k, &tail) == 2 && tail == ')' &&
	    k >= 0)
		return k;
	return -1;
}

static void mf_site_read(json_t *e, size_t i, struct mf_sites *out)
{
	struct mf_site st = { 0, -1, NULL, i, -1, -1, NULL, 0 };
	json_t *n = json_object_get(e, "samples"), *fr = json_object_get(e, "frames");
	/* entries that are not sites are passed over: readers ignore what they do not know */
	if (!mf_num(json_object_get(e, "bytes"), &st.bytes) || st.bytes < 0)
		return;
	st.samples = json_is_integer(n) && json_integer_value(n) >= 0 ? json_integer_value(n) : -1;
	st.frames = json_is_array(fr) ? fr : NULL;
	st.lines = json_is_array(json_object_get(e, "mf_lines")) ? json_object_get(e, "mf_lines") : NULL;
	if (mf_num(json_object_get(e, "exact_bytes"), &st.exact) && st.exact >= 0) {
		st.exact = st.exact < st.bytes ? st.exact : st.bytes;
		out->exact += st.exact;
		out->exact_known = 1;
	} else {
		st.exact = -1;
	}
	st.others = mf_closing_count(e, st.frames);
	out->s[out->n++] = st;
	out->named += st.others < 0;
	out->total += st.bytes;
	out->samples += st.samples > 0 ? st.samples : 0;
}

void mf_sites_view(json_t *stage, int gpu, enum mf_view view, struct mf_sites *out)
{
	json_t *list = json_object_get(stage, mf_site_keys[gpu != 0][view]), *e;
	json_t *lag = json_object_get(stage, mf_lag_keys[gpu != 0]);
	size_t i;
	memset(out, 0, sizeof *out);
	out->present = json_is_array(list);
	out->split = json_is_array(json_object_get(stage, mf_site_keys[gpu != 0][MF_BEFORE]));
	out->lag = json_is_number(lag) && json_number_value(lag) >= 0 ? json_number_value(lag) : -1;
	out->s = mf_xmalloc((json_array_size(list) ? json_array_size(list) : 1) * sizeof *out->s);
	json_array_foreach(list, i, e) {
		mf_site_read(e, i, out);
	}
	if (out->n)
		qsort(out->s, out->n, sizeof *out->s, mf_site_cmp);
}

void mf_sites_get(json_t *stage, int gpu, struct mf_sites *out)
{
	mf_sites_view(stage, gpu, MF_ADDED, out);
}

double mf_stage_need(json_t *stage, int gpu)
{
	json_t *comp = json_object_get(stage, gpu ? "gpu" : "cpu");
	double alloc, peaked;
	if (!mf_num(json_object_get(comp, "alloc_delta"), &alloc) ||
	    !mf_num(json_object_get(comp, "peaked_delta"), &peaked) || alloc + peaked <= 0)
		return -1;
	return alloc + peaked;
}

double mf_sites_base(json_t *stage, int gpu, enum mf_view view, const struct mf_sites *s, enum mf_base *kind)
{
	double need = mf_stage_need(stage, gpu), peak = mf_stage_peak(stage, gpu);
	if (view == MF_ADDED && s->split && need > 0)
		return *kind = MF_BASE_NEED, need;
	if (peak > 0 && (view == MF_BEFORE || !s->split))
		return *kind = MF_BASE_PEAK, peak;
	return *kind = MF_BASE_LISTED, s->total;
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

char *mf_mb(double bytes)
{
	json_t *v = json_real(bytes);
	char *s = mf_format_value("x_mem_", v); /* whole MB, as the dump prints memory */
	json_decref(v);
	return s;
}

/* "CPU peak 150MB" or "GPU peak unknown". */
char *mf_stage_peak_text(json_t *stage, int gpu)
{
	double peak = mf_stage_peak(stage, gpu);
	if (peak < 0)
		return mf_xasprintf("%s peak unknown", gpu ? "GPU" : "CPU");
	char *mb = mf_mb(peak), *s = mf_xasprintf("%s peak %s", gpu ? "GPU" : "CPU", mb);
	free(mb);
	return s;
}

/* Whether the file names STAGE in sites.exact_stages (MEMSHIM_SITES=exact:STAGE,...: every CPU
 * allocation made while one of them was open was recorded at its size). */
static int mf_exact_stage(const struct mf_file *f, json_t *stage)
{
	json_t *names = json_object_get(json_object_get(f->root, "sites"), "exact_stages"), *e;
	const char *name = json_string_value(json_object_get(stage, "name"));
	size_t i;
	json_array_foreach(names, i, e)
		if (name && json_is_string(e) && !strcmp(json_string_value(e), name))
			return 1;
	return 0;
}

/* Every allocation is in the list (GPU; CPU with MEMSHIM_SITES=exact, or what an exact stage
 * added): a row counts allocations. */
int mf_sites_every_allocation(const struct mf_file *f, json_t *stage, int gpu, enum mf_view view)
{
	const char *mode = json_string_value(json_object_get(json_object_get(f->root, "sites"), "mode"));
	return gpu || (mode && !strcmp(mode, "exact")) || (view == MF_ADDED && mf_exact_stage(f, stage));
}

char *mf_sites_about(const struct mf_file *f, json_t *stage, int gpu, const struct mf_sites *s)
{
	json_t *sites = json_object_get(f->root, "sites");
	double rate = 0;
	char *how, *lag;
	const char *mode = json_string_value(json_object_get(sites, "mode"));
	if (gpu || (mode && !strcmp(mode, "exact"))) {
		how = mf_xasprintf("every allocation recorded%s, %lld allocation%s at the peak",
				   gpu ? "" : " (MEMSHIM_SITES=exact)", s->samples, s->samples == 1 ? "" : "s");
	} else if (mf_exact_stage(f, stage)) {
		how = mf_xasprintf("every allocation recorded (an exact stage: MEMSHIM_SITES=exact:%s), %lld "
				   "allocation%s at the peak",
				   json_string_value(json_object_get(stage, "name")), s->samples,
				   s->samples == 1 ? "" : "s");
	} else if (mf_num(json_object_get(sites, "rate"), &rate) && rate > 0) {
		char *r = mf_fmt_bytes(rate);
		how = mf_xasprintf("sampled every %s on average, %lld sample%s at the peak", r, s->samples,
				   s->samples == 1 ? "" : "s");
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
	char *peak_text = mf_stage_peak_text(stage, gpu);
	char *line = mf_xasprintf("%s; %s%s", peak_text, how, lag);
	free(how), free(lag), free(peak_text);
	return line;
}

/* "shares are of its need, ..."; and when reservations (pyarrow's mimalloc arena, OpenBLAS's buffers)
 * moved by a tenth of it or more, that they did: their pages are read at boundaries, not sampled,
 * so no site stands for them. */
static char *mf_need_text(json_t *stage, int gpu, double need, const char *mb, mf_bytes_fn *fmt)
{
	json_t *r = gpu ? NULL : json_object_get(json_object_get(stage, "cpu"), "reservations");
	double alloc = 0, peaked = 0;
	mf_num(json_object_get(r, "alloc_delta"), &alloc);
	mf_num(json_object_get(r, "peaked_delta"), &peaked);
	double moved = (alloc > 0 ? alloc : 0) + peaked;
	if (moved < 1048576 || moved < need / 10)
		return mf_xasprintf("shares are of its need, %s (alloc_delta + peaked_delta)", mb);
	char *res = fmt(moved);
	char *text =
		mf_xasprintf("shares are of its need, %s (alloc_delta + peaked_delta), of which its "
			     "reservations' touched pages moved by %s: read at boundaries, they have no call sites",
			     mb, res);
	free(res);
	return text;
}

char *mf_sites_summary(json_t *stage, int gpu, enum mf_view view, const struct mf_sites *s, mf_bytes_fn *fmt,
		       double *base)
{
	static const char *const what[] = { "added by the stage, live at its peak",
					    "live from before the stage, still live at its peak" };
	enum mf_base kind;
	double b = mf_sites_base(stage, gpu, view, s, &kind);
	char *listed = fmt(s->total), *mb = fmt(b), *of;
	if (kind == MF_BASE_NEED)
		of = mf_need_text(stage, gpu, b, mb, fmt);
	else if (kind == MF_BASE_PEAK)
		of = mf_xasprintf("shares are of the peak, %s", mb);
	else
		of = mf_xstrdup("shares are of the bytes listed");
	long long others = s->named < s->n ? s->s[s->n - 1].others : -1;
	char *more =
		others >= 0 ? mf_xasprintf(" and %lld other stack%s", others, others == 1 ? "" : "s") : mf_xstrdup("");
	char *line = mf_xasprintf("%s: %s in %zu site%s%s; %s",
				  s->split ? what[view]
					   : "everything "
					     "live at the peak (an older file: it does not tell what the stage added)",
				  listed, s->named, s->named == 1 ? "" : "s", more, of);
	free(more), free(listed), free(mb), free(of);
	if (base)
		*base = b;
	return line;
}

char *mf_sites_exact_text(const struct mf_sites *s, mf_bytes_fn *fmt, int shares)
{
	if (!s->exact_known)
		return NULL;
	if (s->exact >= s->total)
		return mf_xstrdup("all of it exact: every block counted at its size");
	char *exact = fmt(s->exact), *est = fmt(s->total - s->exact);
	char *pe = shares ? mf_xasprintf("%.1f%%, ", 100 * s->exact / s->total) : mf_xstrdup("");
	char *ps = shares ? mf_xasprintf("%.1f%%, ", 100 - 100 * s->exact / s->total) : mf_xstrdup("");
	char *line =
		mf_xasprintf("%s exact (%sblocks counted at their size), %s sampled (%sestimated)", exact, pe, est, ps);
	free(exact), free(est), free(pe), free(ps);
	return line;
}

int mf_site_source(const struct mf_site *s, size_t k, const char **file, long *line)
{
	json_t *at = json_array_get(s->lines, k);
	*file = json_string_value(json_array_get(at, 0));
	*line = (long)json_integer_value(json_array_get(at, 1));
	return *file && *line > 0;
}
