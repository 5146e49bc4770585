/* Stages still open in a snapshot (a run killed, or a snapshot taken mid-stage): their entry in
 * stages[] holds the current call's numbers so far; the flat metrics only ever hold finished calls. */
#include "base/base.h"
#include "model/document.h"

#include <stdlib.h>
#include <string.h>

json_t *mf_open_stage(json_t *stages, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(stages, i, s) {
		const char *n = json_string_value(json_object_get(s, "name"));
		if (n && !strcmp(n, name) && json_is_true(json_object_get(s, "open")))
			return s;
	}
	return NULL;
}

long long mf_calls_of(json_t *stage)
{
	json_t *c = json_object_get(stage, "calls");
	return json_is_integer(c) ? (long long)json_integer_value(c) : 0;
}

json_t *mf_span_value(json_t *stage, const char *comp, const char *member)
{
	json_t *v = json_object_get(json_object_get(stage, comp), member);
	return json_is_number(v) ? v : NULL;
}

/* The flat keys the shim writes for a finished call, and where the span keeps each. */
/* clang-format off */
static const char *const mf_span_keys[][3] = {
	{ "mem_cpu_alloc_delta", "cpu", "alloc_delta" },
	{ "mem_cpu_peaked_delta", "cpu", "peaked_delta" },
	{ "mem_gpu_alloc_delta", "gpu", "alloc_delta" },
	{ "mem_gpu_peaked_delta", "gpu", "peaked_delta" },
	{ "mem_gpu_failed_allocs", "gpu", "failed_allocs" },
};
/* clang-format on */

static void mf_set_absent(json_t *metrics, const char *stage, const char *suffix, json_t *v)
{
	char *key = mf_xasprintf("%s_%s", stage, suffix);
	if (!json_object_get(metrics, key))
		json_object_set(metrics, key, v);
	free(key);
}

void mf_add_so_far(json_t *metrics, json_t *stages)
{
	size_t i;
	json_t *s;
	json_array_foreach(stages, i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		if (!json_is_true(json_object_get(s, "open")) || mf_calls_of(s) > 0)
			continue;
		for (size_t k = 0; k < sizeof mf_span_keys / sizeof mf_span_keys[0]; k++) {
			json_t *v = mf_span_value(s, mf_span_keys[k][1], mf_span_keys[k][2]);
			if (v)
				mf_set_absent(metrics, name, mf_span_keys[k][0], v);
		}
		json_t *rt = json_object_get(s, "runtime"), *zero = json_integer(0);
		if (json_is_number(rt))
			mf_set_absent(metrics, name, "runtime", rt);
		mf_set_absent(metrics, name, "calls", zero);
		json_decref(zero);
	}
}

/* ", cpu alloc 20MB" for one span member that is there. */
static void mf_so_far_part(char **text, json_t *stage, const char *comp, const char *member, const char *label)
{
	json_t *v = mf_span_value(stage, comp, member);
	if (!v)
		return;
	char *val = mf_format_value(strcmp(member, "failed_allocs") ? "x_mem_" : "x_mem_failed_allocs", v);
	char *s = mf_xasprintf("%s%s%s %s", *text, **text ? ", " : "", label, val);
	free(val);
	free(*text);
	*text = s;
}

char *mf_open_line(json_t *stage, int in_dump)
{
	const char *name = json_string_value(json_object_get(stage, "name"));
	long long calls = mf_calls_of(stage);
	if (in_dump && calls == 0)
		return mf_xasprintf("open: call 1 had not returned; %s_* are its numbers so far", name);
	char *nums = mf_xstrdup("");
	mf_so_far_part(&nums, stage, "cpu", "alloc_delta", "cpu alloc");
	mf_so_far_part(&nums, stage, "cpu", "peaked_delta", "cpu peaked");
	mf_so_far_part(&nums, stage, "gpu", "alloc_delta", "gpu alloc");
	mf_so_far_part(&nums, stage, "gpu", "peaked_delta", "gpu peaked");
	mf_so_far_part(&nums, stage, "gpu", "failed_allocs", "failed gpu allocs");
	json_t *rt = json_object_get(stage, "runtime");
	if (json_is_number(rt)) {
		char *r = mf_format_value("x_runtime", rt);
		char *s = mf_xasprintf("%s%sruntime %s", nums, *nums ? ", " : "", r);
		free(r);
		free(nums);
		nums = s;
	}
	char *line =
		mf_xasprintf("open: call %lld had not returned; so far: %s", calls + 1, *nums ? nums : "no numbers");
	free(nums);
	if (in_dump) {
		char *s = mf_xasprintf("%s (%s_* above are call %lld)", line, name, calls);
		free(line);
		line = s;
	}
	return line;
}
