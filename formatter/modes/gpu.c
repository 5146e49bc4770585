/* The dump's GPU lines beyond the counted numbers: each GPU out-of-memory burst first (what was
 * asked, free, held by this process and by others, the stages open, the GPU sites at the stage's
 * peak, whether the program went on), and after the groups what memshim did not count of each
 * device's footprint (NVML's usage of this process against memshim's count). */
#include "modes/modes.h"

#include <stdlib.h>
#include <string.h>

#define MF_OOM_SITES 5 /* sites printed under a burst */

/* Bytes in one short word: "2.0GB" from 1 GiB up, whole "MB" (then "KB", "B") below. */
static char *mf_size(double v)
{
	if (v >= 1073741824.0)
		return mf_xasprintf("%.1fGB", v / 1073741824.0);
	if (v >= 1048576.0)
		return mf_xasprintf("%lldMB", (long long)(v / 1048576.0));
	if (v >= 1024.0)
		return mf_xasprintf("%lldKB", (long long)(v / 1024.0));
	return mf_xasprintf("%lldB", (long long)v);
}

/* KEY of OBJ as bytes; 0 when it is absent. */
static int mf_bytes_of(json_t *obj, const char *key, double *out)
{
	return mf_num(json_object_get(obj, key), out);
}

/* "; others: pid 4242 2.0GB, pid 17 1.1GB", or what is known of them. */
static void mf_print_others(FILE *out, json_t *others)
{
	size_t i;
	json_t *o;
	if (!json_is_array(others)) {
		fputs("; others: not known (no NVML)", out);
		return;
	}
	if (!json_array_size(others)) {
		fputs("; others: none", out);
		return;
	}
	fputs("; others:", out);
	json_array_foreach(others, i, o) {
		double used;
		char *u = mf_bytes_of(o, "used", &used) && used >= 0 ? mf_size(used) : mf_xstrdup("?");
		fprintf(out, "%s pid %lld %s", i ? "," : "", (long long)json_integer_value(json_object_get(o, "pid")),
			u);
		free(u);
	}
}

/* "GPU 0 out of memory in train: asked 2.0GB, 1.2GB free of 79.6GB; this process 76.1GB (counted
 * 75.4GB); others: pid 4242 2.1GB" */
static void mf_print_oom_line(FILE *out, json_t *e)
{
	const char *stage = json_string_value(json_object_get(e, "stage"));
	double asked = 0, free_b, total, fp, counted = 0;
	mf_bytes_of(e, "asked", &asked);
	mf_bytes_of(e, "counted", &counted);
	char *a = mf_size(asked), *c = mf_size(counted);
	fprintf(out, "GPU %lld out of memory %s%s: asked %s",
		(long long)json_integer_value(json_object_get(e, "device")), stage ? "in " : "outside any stage",
		stage ? stage : "", a);
	if (mf_bytes_of(e, "free", &free_b) && mf_bytes_of(e, "total", &total)) {
		char *f = mf_size(free_b), *t = mf_size(total);
		fprintf(out, ", %s free of %s", f, t);
		free(f);
		free(t);
	} else {
		fputs(", free not read (the thread's current context was another device's)", out);
	}
	if (mf_bytes_of(e, "footprint", &fp)) {
		char *p = mf_size(fp);
		fprintf(out, "; this process %s (counted %s)", p, c);
		free(p);
	} else {
		fprintf(out, "; this process counted %s", c);
	}
	mf_print_others(out, json_object_get(e, "others"));
	if (json_is_false(json_object_get(e, "self_listed")))
		fputs(" (this pid is not in NVML's list: in a container NVML names host pids, so this process "
		      "may be one of the others)",
		      out);
	fputc('\n', out);
	free(a);
	free(c);
}

/* "  live per open stage: init +0MB, train +40MB" */
static void mf_print_oom_stages(FILE *out, json_t *e)
{
	size_t i;
	json_t *s;
	json_t *open = json_object_get(e, "open_stages");
	if (!json_array_size(open))
		return;
	fputs("  added on the device by each open stage:", out);
	json_array_foreach(open, i, s) {
		double added = 0;
		mf_bytes_of(s, "added", &added);
		char *t = mf_size(added < 0 ? -added : added);
		const char *name = json_string_value(json_object_get(s, "stage"));
		fprintf(out, "%s %s %s%s", i ? "," : "", name ? name : "?", added < 0 ? "-" : "+", t);
		free(t);
	}
	fputc('\n', out);
}

static json_t *mf_stage_of(const struct mf_file *f, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(f->stages, i, s) {
		const char *n = json_string_value(json_object_get(s, "name"));
		if (name && n && !strcmp(n, name))
			return s;
	}
	return NULL;
}

/* The GPU sites live at the stage's peak (what it added, then what it held from before). */
static void mf_print_oom_sites(FILE *out, const struct mf_file *f, const char *stage)
{
	json_t *s = mf_stage_of(f, stage);
	for (int view = MF_ADDED; s && view <= MF_BEFORE; view++) {
		struct mf_sites list;
		mf_sites_view(s, 1, (enum mf_view)view, &list);
		for (size_t i = 0; i < list.named && i < MF_OOM_SITES; i++) {
			json_t *frames = list.s[i].frames;
			char *b = mf_size(list.s[i].bytes);
			if (!i)
				fprintf(out, "  GPU sites (all devices) live at %s's peak%s:\n", stage,
					view == MF_ADDED ? "" : ", from before it");
			fprintf(out, "    %8s  %s\n", b, json_string_value(json_array_get(frames, 0)) ?: "?");
			free(b);
		}
		mf_sites_free(&list);
	}
}

/* The GPU sites live at the burst's first failure (the record's own list), largest first. */
static int mf_print_oom_own_sites(FILE *out, json_t *e)
{
	size_t i;
	json_t *site;
	json_t *sites = json_object_get(e, "sites");
	if (!json_is_array(sites))
		return 0;
	fputs("  GPU sites live then (all devices):\n", out);
	json_array_foreach(sites, i, site) {
		double bytes = 0;
		if (i >= MF_OOM_SITES)
			break;
		mf_bytes_of(site, "bytes", &bytes);
		char *b = mf_size(bytes);
		const char *top = json_string_value(json_array_get(json_object_get(site, "frames"), 0));
		fprintf(out, "    %8s  %s\n", b, top ? top : "?");
		free(b);
	}
	return 1;
}

void mf_print_gpu_oom(FILE *out, const struct mf_file *f)
{
	size_t i;
	json_t *e;
	json_t *all = json_object_get(f->root, "gpu_oom");
	json_array_foreach(all, i, e) {
		long long n = json_integer_value(json_object_get(e, "failures"));
		mf_print_oom_line(out, e);
		mf_print_oom_stages(out, e);
		if (!mf_print_oom_own_sites(out, e)) /* an older file: the stage's peak */
			mf_print_oom_sites(out, f, json_string_value(json_object_get(e, "stage")));
		fprintf(out, "  %lld failed allocation%s in this burst; %s\n", n, n == 1 ? "" : "s",
			json_is_true(json_object_get(e, "went_on"))
				? "the program went on (a later allocation on the device succeeded, or a further "
				  "stage began)"
				: "the program did not go on after it");
	}
	long long dropped = json_integer_value(json_object_get(f->root, "gpu_oom_dropped"));
	if (dropped > 0)
		fprintf(out, "  %lld more out-of-memory burst%s not kept\n", dropped, dropped == 1 ? "" : "s");
	if (json_array_size(all))
		fputc('\n', out);
}

/* "GPU 0 footprint 3.2GB: 2.6GB counted + 0.6GB context, modules and driver; free at least 1.2GB of
 * 79.6GB" */
static void mf_print_device_footprint(FILE *out, json_t *d)
{
	double fp, counted = 0, free_min, total;
	long long dev = json_integer_value(json_object_get(d, "device"));
	if (mf_bytes_of(d, "footprint_peak", &fp)) {
		mf_bytes_of(d, "counted_at_peak", &counted);
		double rest = fp - counted;
		char *a = mf_size(fp), *c = mf_size(counted), *r = mf_size(rest < 0 ? -rest : rest);
		fprintf(out, "GPU %lld footprint %s: %s counted %s %s context, modules and driver", dev, a, c,
			rest < 0 ? "-" : "+", r);
		free(a);
		free(c);
		free(r);
	} else {
		fprintf(out, "GPU %lld footprint not read", dev);
	}
	if (mf_bytes_of(d, "free_min", &free_min) && mf_bytes_of(d, "total", &total)) {
		char *m = mf_size(free_min), *t = mf_size(total);
		fprintf(out, "; free at least %s of %s", m, t);
		free(m);
		free(t);
	}
	fputc('\n', out);
}

void mf_print_gpu_footprint(FILE *out, const struct mf_file *f)
{
	size_t i;
	json_t *d;
	json_t *g = json_object_get(json_object_get(f->root, "process"), "gpu_footprint");
	if (!json_is_object(g))
		return;
	fputc('\n', out);
	const char *nvml = json_string_value(json_object_get(g, "nvml"));
	if (nvml && !strcmp(nvml, "ok") && !json_is_integer(json_object_get(g, "peak")))
		fputs("GPU footprint: this pid is not in NVML's list (in a container NVML names host pids)\n", out);
	if (nvml && strcmp(nvml, "ok"))
		fprintf(out,
			"GPU footprint: NVML %s, so what this process holds beyond its counted "
			"allocations is unknown\n",
			nvml);
	json_t *devices = json_object_get(g, "devices");
	json_array_foreach(devices, i, d) {
		mf_print_device_footprint(out, d);
	}
}
