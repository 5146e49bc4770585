/* --speedscope and --pprof: the call sites at the stages' peaks as profiles the usual viewers open.
 * One profile per process shown and stage with sites (--stage: that one; --gpu: the GPU sites):
 * speedscope's JSON (a "sampled" profile each, weights in bytes) and pprof's profile.proto,
 * gzipped (samples labelled with their stage and process). Both files are written whole or not
 * at all. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "model/sites.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Calls EACH for every (file shown, stage) with sites, as the options say; returns how many. */
typedef void mf_each_fn(void *arg, const struct mf_file *f, const char *stage, const struct mf_sites *s);
static size_t mf_each_stage(const struct mf_set *set, const struct mf_opts *o, mf_each_fn *each, void *arg)
{
	size_t n = 0;
	for (size_t i = 0; i < set->n; i++) {
		size_t k;
		json_t *st;
		if (!set->keep[i])
			continue;
		json_array_foreach(set->f[i].stages, k, st) {
			const char *name = json_string_value(json_object_get(st, "name"));
			struct mf_sites s;
			if (!name || (o->stage && strcmp(name, o->stage)))
				continue;
			mf_sites_get(st, o->flame_gpu, &s);
			if (s.n) {
				each(arg, &set->f[i], name, &s);
				n++;
			}
			mf_sites_free(&s);
		}
	}
	return n;
}

/* FRAME as the viewers show it: demangled, or "(no frames)" for a site without any. */
static char *mf_export_frame(const struct mf_site *site, size_t k)
{
	return mf_site_nframes(site) ? mf_frame_display(mf_site_frame(site, k)) : mf_xstrdup("(no frames)");
}

/* Frame K as the viewers name it, and its source line apart (FILE NULL when it has none): the
 * name without " file.c:42", which they show from the file and line themselves (malloc'd). */
struct mf_export_frame {
	char *key, *name; /* key: the frame as shown, one per line */
	const char *file;
	long line;
};
static void mf_export_frame_of(const struct mf_site *site, size_t k, struct mf_export_frame *x)
{
	x->key = mf_export_frame(site, k);
	x->file = NULL;
	x->line = 0;
	if (mf_site_nframes(site) && mf_site_source(site, k, &x->file, &x->line))
		x->name = mf_frame_without_line(x->key);
	else
		x->name = mf_xstrdup(x->key), x->file = NULL;
}

static void mf_export_frame_free(struct mf_export_frame *x)
{
	free(x->key), free(x->name);
}

static long long mf_weight(double bytes)
{
	return (long long)(bytes + 0.5);
}

/* ---- speedscope ---------------------------------------------------------------------------- */

struct mf_speedscope {
	json_t *frames, *index, *profiles;
	int gpu;
};

static json_int_t mf_ss_frame(struct mf_speedscope *d, const struct mf_export_frame *x)
{
	json_t *at = json_object_get(d->index, x->key);
	if (at)
		return json_integer_value(at);
	json_int_t k = (json_int_t)json_array_size(d->frames);
	json_t *frame = json_pack("{s:s}", "name", x->name);
	if (x->file) /* speedscope shows them beside the name */
		json_object_set_new(frame, "file", json_string(x->file)),
			json_object_set_new(frame, "line", json_integer(x->line));
	json_array_append_new(d->frames, frame);
	json_object_set_new(d->index, x->key, json_integer(k));
	return k;
}

static void mf_ss_profile(void *arg, const struct mf_file *f, const char *stage, const struct mf_sites *s)
{
	struct mf_speedscope *d = arg;
	json_t *samples = json_array(), *weights = json_array();
	long long total = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct mf_site *site = &s->s[i];
		size_t nf = mf_site_nframes(site);
		json_t *stack = json_array();
		for (size_t k = nf ? nf : 1; k-- > 0;) { /* speedscope: the outermost frame first */
			struct mf_export_frame x;
			mf_export_frame_of(site, k, &x);
			json_array_append_new(stack, json_integer(mf_ss_frame(d, &x)));
			mf_export_frame_free(&x);
		}
		json_array_append_new(samples, stack);
		json_array_append_new(weights, json_integer(mf_weight(site->bytes)));
		total += mf_weight(site->bytes);
	}
	char *proc = mf_proc_label(f);
	char *name = mf_xasprintf("%s · %s · %s", proc, stage, d->gpu ? "GPU" : "CPU");
	json_array_append_new(d->profiles, json_pack("{s:s, s:s, s:s, s:i, s:I, s:o, s:o}", "type", "sampled", "name",
						     name, "unit", "bytes", "startValue", 0, "endValue",
						     (json_int_t)total, "samples", samples, "weights", weights));
	free(proc);
	free(name);
}

/* ---- pprof: profile.proto written by hand (github.com/google/pprof/proto/profile.proto) ------ */

struct mf_pb {
	unsigned char *p;
	size_t n, cap;
};

static void mf_pb_raw(struct mf_pb *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = mf_xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

static void mf_pb_varint(struct mf_pb *b, uint64_t v)
{
	unsigned char c[10];
	size_t n = 0;
	do {
		c[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	mf_pb_raw(b, c, n);
}

enum { MF_PB_VARINT = 0, MF_PB_LEN = 2 };

static void mf_pb_int(struct mf_pb *b, unsigned field, uint64_t v)
{
	mf_pb_varint(b, (uint64_t)field << 3 | MF_PB_VARINT);
	mf_pb_varint(b, v);
}

static void mf_pb_bytes(struct mf_pb *b, unsigned field, const void *data, size_t n)
{
	mf_pb_varint(b, (uint64_t)field << 3 | MF_PB_LEN);
	mf_pb_varint(b, n);
	mf_pb_raw(b, data, n);
}

/* A sub-message (or packed numbers) in SUB, emptied for the next. */
static void mf_pb_msg(struct mf_pb *b, unsigned field, struct mf_pb *sub)
{
	mf_pb_bytes(b, field, sub->p, sub->n);
	sub->n = 0;
}

/* Profile's fields. */
enum {
	PB_SAMPLE_TYPE = 1,
	PB_SAMPLE = 2,
	PB_LOCATION = 4,
	PB_FUNCTION = 5,
	PB_STRINGS = 6,
	PB_PERIOD_TYPE = 11,
	PB_COMMENT = 13,
	PB_DEFAULT_TYPE = 14
};

struct mf_pprof {
	struct mf_pb out, sub, tmp;
	json_t *strings; /* text -> index in the string table */
	json_t *frames;  /* frame -> location and function id */
};

static uint64_t mf_pp_str(struct mf_pprof *d, const char *s)
{
	json_t *at = json_object_get(d->strings, s);
	if (at)
		return (uint64_t)json_integer_value(at);
	uint64_t k = json_object_size(d->strings);
	json_object_set_new(d->strings, s, json_integer((json_int_t)k));
	mf_pb_bytes(&d->out, PB_STRINGS, s, strlen(s));
	return k;
}

/* A ValueType {type, unit}. */
static void mf_pp_type(struct mf_pprof *d, unsigned field, const char *type, const char *unit)
{
	uint64_t t = mf_pp_str(d, type), u = mf_pp_str(d, unit);
	mf_pb_int(&d->sub, 1, t);
	mf_pb_int(&d->sub, 2, u);
	mf_pb_msg(&d->out, field, &d->sub);
}

/* The location (and its function, same id) of frame X. */
static uint64_t mf_pp_location(struct mf_pprof *d, const struct mf_export_frame *x)
{
	json_t *at = json_object_get(d->frames, x->key);
	if (at)
		return (uint64_t)json_integer_value(at);
	uint64_t id = json_object_size(d->frames) + 1, s = mf_pp_str(d, x->name);
	uint64_t file = x->file ? mf_pp_str(d, x->file) : 0;
	json_object_set_new(d->frames, x->key, json_integer((json_int_t)id));
	/* clang-format off */
	mf_pb_int(&d->sub, 1, id);          /* Function.id */
	mf_pb_int(&d->sub, 2, s);           /* .name */
	mf_pb_int(&d->sub, 3, s);           /* .system_name */
	if (x->file)
		mf_pb_int(&d->sub, 4, file); /* .filename */
	mf_pb_msg(&d->out, PB_FUNCTION, &d->sub);
	mf_pb_int(&d->tmp, 1, id);          /* Line.function_id */
	if (x->file)
		mf_pb_int(&d->tmp, 2, (uint64_t)x->line); /* Line.line */
	mf_pb_int(&d->sub, 1, id);          /* Location.id */
	mf_pb_msg(&d->sub, 4, &d->tmp);     /* .line */
	/* clang-format on */
	mf_pb_msg(&d->out, PB_LOCATION, &d->sub);
	return id;
}

/* A Label {key, str}. */
static void mf_pp_label(struct mf_pprof *d, struct mf_pb *sample, const char *key, const char *val)
{
	uint64_t k = mf_pp_str(d, key), v = mf_pp_str(d, val);
	mf_pb_int(&d->tmp, 1, k);
	mf_pb_int(&d->tmp, 2, v);
	mf_pb_msg(sample, 3, &d->tmp);
}

static void mf_pp_profile(void *arg, const struct mf_file *f, const char *stage, const struct mf_sites *s)
{
	struct mf_pprof *d = arg;
	char *proc = mf_proc_label(f);
	struct mf_pb sample = { 0 }, ids = { 0 };
	for (size_t i = 0; i < s->n; i++) {
		const struct mf_site *site = &s->s[i];
		size_t nf = mf_site_nframes(site);
		for (size_t k = 0; k < (nf ? nf : 1); k++) { /* pprof: the leaf first */
			struct mf_export_frame x;
			mf_export_frame_of(site, k, &x);
			mf_pb_varint(&ids, mf_pp_location(d, &x));
			mf_export_frame_free(&x);
		}
		mf_pb_msg(&sample, 1, &ids); /* location_id, packed */
		mf_pb_varint(&ids, (uint64_t)mf_weight(site->bytes));
		mf_pb_varint(&ids, (uint64_t)(site->samples > 0 ? site->samples : 0));
		mf_pb_msg(&sample, 2, &ids); /* value, packed */
		mf_pp_label(d, &sample, "stage", stage);
		mf_pp_label(d, &sample, "process", proc);
		mf_pb_msg(&d->out, PB_SAMPLE, &sample);
	}
	free(sample.p), free(ids.p), free(proc);
}

/* ---- gzip of stored deflate blocks (RFC 1951/1952): no compression library needed ---------- */

static uint32_t mf_crc32(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = c >> 1 ^ (0xedb88320u & -(c & 1));
	}
	return ~c;
}

static void mf_le32(struct mf_pb *b, uint32_t v)
{
	unsigned char c[4] = { v & 0xff, v >> 8 & 0xff, v >> 16 & 0xff, v >> 24 & 0xff };
	mf_pb_raw(b, c, 4);
}

static void mf_gzip(const struct mf_pb *in, struct mf_pb *out)
{
	static const unsigned char head[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255 };
	size_t at = 0;
	mf_pb_raw(out, head, sizeof head);
	do {
		size_t n = in->n - at < 65535 ? in->n - at : 65535;
		unsigned char block[5] = { at + n == in->n, n & 0xff, n >> 8, ~n & 0xff, (~n >> 8) & 0xff };
		mf_pb_raw(out, block, sizeof block);
		mf_pb_raw(out, in->p + at, n);
		at += n;
	} while (at < in->n);
	mf_le32(out, mf_crc32(in->p, in->n));
	mf_le32(out, (uint32_t)in->n);
}

/* ---- writing ------------------------------------------------------------------------------- */

int mf_write_whole(FILE *err, const char *path, const void *data, size_t n)
{
	char *tmp = mf_xasprintf("%s.tmp.%d", path, (int)getpid());
	FILE *fp = fopen(tmp, "wb");
	int ok = fp && fwrite(data, 1, n, fp) == n;
	ok = fp && !fclose(fp) && ok && !rename(tmp, path);
	if (!ok) {
		fprintf(err, "memshim-format: cannot write %s\n", path);
		unlink(tmp);
	}
	free(tmp);
	return ok ? MF_OK : MF_BAD;
}

static int mf_export_none(FILE *err, const struct mf_run *r)
{
	const struct mf_set *s = &r->side[0];
	fprintf(err, "memshim-format: no %s call sites%s%s%s to export in %s%s\n", r->o->flame_gpu ? "GPU" : "CPU",
		r->o->stage ? " for stage \"" : "", r->o->stage ? r->o->stage : "", r->o->stage ? "\"" : "",
		s->f[0].path, s->n > 1 ? " or the other files" : "");
	return MF_BAD;
}

int mf_run_speedscope(const struct mf_run *r, FILE *out, FILE *err)
{
	struct mf_speedscope d = { json_array(), json_object(), json_array(), r->o->flame_gpu };
	int rc;
	if (!mf_each_stage(&r->side[0], r->o, mf_ss_profile, &d)) {
		rc = mf_export_none(err, r);
		json_decref(d.frames), json_decref(d.profiles);
	} else {
		char *exporter = mf_xasprintf("memshim-format %s", mf_version());
		json_t *doc =
			json_pack("{s:s, s:{s:o}, s:o, s:s, s:i, s:s}", "$schema",
				  "https://www.speedscope.app/file-format-schema.json", "shared", "frames", d.frames,
				  "profiles", d.profiles, "name", "memshim: call sites at the stages' peaks",
				  "activeProfileIndex", 0, "exporter", exporter);
		char *text = json_dumps(doc, JSON_COMPACT);
		if (!text)
			mf_oom();
		rc = mf_write_whole(err, r->o->mode_arg, text, strlen(text));
		free(text), free(exporter);
		json_decref(doc);
	}
	json_decref(d.index);
	return rc;
}

int mf_run_pprof(const struct mf_run *r, FILE *out, FILE *err)
{
	struct mf_pprof d;
	memset(&d, 0, sizeof d);
	d.strings = json_object(), d.frames = json_object();
	mf_pp_str(&d, ""); /* string_table[0] is always "" */
	mf_pp_type(&d, PB_SAMPLE_TYPE, "inuse_space", "bytes");
	mf_pp_type(&d, PB_SAMPLE_TYPE, "samples", "count");
	mf_pp_type(&d, PB_PERIOD_TYPE, "space", "bytes");
	mf_pb_int(&d.out, PB_DEFAULT_TYPE, mf_pp_str(&d, "inuse_space"));
	mf_pb_int(
		&d.out, PB_COMMENT,
		mf_pp_str(&d, r->o->flame_gpu
				      ? "memshim: GPU allocations live at each stage's peak (every allocation recorded)"
				      : "memshim: CPU bytes live at each stage's peak, as sampled by the shim"));
	int rc;
	if (!mf_each_stage(&r->side[0], r->o, mf_pp_profile, &d)) {
		rc = mf_export_none(err, r);
	} else {
		struct mf_pb gz = { 0 };
		mf_gzip(&d.out, &gz);
		rc = mf_write_whole(err, r->o->mode_arg, gz.p, gz.n);
		free(gz.p);
	}
	free(d.out.p), free(d.sub.p), free(d.tmp.p);
	json_decref(d.strings), json_decref(d.frames);
	return rc;
}
