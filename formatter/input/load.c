/* A parsed metrics document checked and filled into struct mf_file: every problem becomes one
 * message naming the file. */
#include "input/input.h"
#include "input/cgroup.h"
#include "base/base.h"
#include "model/document.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int mf_file_problem(FILE *err, const char *path, const char *fmt, ...)
{
	va_list ap;
	fprintf(err, "memshim-format: %s: ", path);
	va_start(ap, fmt);
	vfprintf(err, fmt, ap);
	va_end(ap);
	fputc('\n', err);
	return -1;
}

static int mf_check_format(const char *path, json_t *root, FILE *err)
{
	json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
	if (!fmt)
		return mf_file_problem(err, path, "not a memshim metrics file (no \"format\" key)");
	if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "memshim-metrics"))
		return mf_file_problem(err, path, "not a memshim metrics file (\"format\" is not \"memshim-metrics\")");
	if (!ver)
		return mf_file_problem(err, path, "missing key \"version\"");
	if (!json_is_integer(ver) || json_integer_value(ver) < 1)
		return mf_file_problem(err, path, "bad \"version\" (expected a whole number from 1)");
	if (json_integer_value(ver) > MF_VERSION)
		return mf_file_problem(err, path,
				       "metrics format version %lld is newer than this memshim-format reads (%d)",
				       (long long)json_integer_value(ver), MF_VERSION);
	return 0;
}

/* A required key of a given JSON type; TYPE_NAME is for the message. */
static json_t *mf_need(const char *path, json_t *obj, const char *key, json_type type, const char *type_name, FILE *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		mf_file_problem(err, path, "missing key \"%s\"", key);
	else if (json_typeof(v) != type)
		mf_file_problem(err, path, "\"%s\" is not %s", key, type_name);
	else
		return v;
	return NULL;
}

static int mf_check_stages(const char *path, json_t *stages, FILE *err)
{
	size_t i;
	json_t *s;
	json_array_foreach(stages, i, s) {
		if (!json_is_object(s))
			return mf_file_problem(err, path, "stages[%zu] is not an object", i);
		if (!json_is_string(json_object_get(s, "name")))
			return mf_file_problem(err, path, "stages[%zu] has no \"name\" string", i);
	}
	return 0;
}

static long long mf_int(json_t *obj, const char *key, long long dflt)
{
	json_t *v = json_object_get(obj, key);
	return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

/* Optional keys: absent or of another type leaves the default (readers ignore what they do not know). */
static void mf_fill_optional(struct mf_file *f)
{
	json_t *r = f->root, *rank = json_object_get(r, "rank"), *c = json_object_get(r, "complete");
	json_t *st = json_object_get(r, "start_time"), *et = json_object_get(r, "end_time");
	f->ppid = mf_int(r, "ppid", 0);
	f->root_pid = mf_int(r, "root_pid", f->pid);
	f->complete = json_is_boolean(c) ? json_is_true(c) : 1;
	f->is_child = json_is_true(json_object_get(r, "is_child"));
	f->forked = json_is_true(json_object_get(r, "forked"));
	f->reason = json_string_value(json_object_get(r, "reason"));
	f->signal = mf_int(r, "signal", 0);
	f->has_times = json_is_number(st) && json_is_number(et);
	f->start_time = f->has_times ? json_number_value(st) : 0;
	f->end_time = f->has_times ? json_number_value(et) : 0;
	f->has_rank = json_is_integer(json_object_get(rank, "rank"));
	f->rank = mf_int(rank, "rank", 0);
	f->local_rank = mf_int(rank, "local_rank", -1);
	f->world_size = mf_int(rank, "world_size", 0);
	f->rank_source = json_string_value(json_object_get(rank, "source"));
	f->gpu_used = json_is_true(json_object_get(r, "gpu_used")) ||
		      json_object_get(f->file_metrics, "process_mem_gpu_peak") != NULL;
	f->prog = json_string_value(json_array_get(json_object_get(r, "argv"), 0));
	json_t *inh = json_object_get(f->file_metrics, "inherited_mem_cpu");
	if (!inh)
		inh = json_object_get(json_object_get(json_object_get(r, "process"), "inherited"), "cpu");
	f->inherited_cpu = json_is_number(inh) && json_number_value(inh) >= 0 ? json_number_value(inh) : -1;
}

int mf_load_json(const char *path, json_t *root, struct mf_file *f, FILE *err)
{
	memset(f, 0, sizeof *f);
	f->root = root;
	f->path = mf_xstrdup(path);
	json_t *pid;
	if (mf_check_format(path, f->root, err) ||
	    !(pid = mf_need(path, f->root, "pid", JSON_INTEGER, "a whole number", err)) ||
	    !(f->file_metrics = mf_need(path, f->root, "metrics", JSON_OBJECT, "an object", err)) ||
	    !(f->stages = mf_need(path, f->root, "stages", JSON_ARRAY, "an array", err)) ||
	    mf_check_stages(path, f->stages, err)) {
		mf_file_free(f);
		return -1;
	}
	f->pid = json_integer_value(pid);
	mf_cgroup_after_exit(f->root);
	f->metrics = json_copy(f->file_metrics);
	if (!f->metrics)
		mf_oom();
	mf_add_so_far(f->metrics, f->stages);
	mf_fill_optional(f);
	return 0;
}

void mf_file_free(struct mf_file *f)
{
	json_decref(f->metrics);
	json_decref(f->root);
	free(f->path);
	memset(f, 0, sizeof *f);
}
