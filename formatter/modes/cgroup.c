/* The memory cgroup in the dump: how close the job's group came to its limit, under the process
 * group (saying so when the figure is the group's high-water from before what the process read),
 * and the line that says the group's OOM killer ended a process (doc/format.md). */
#include "modes/modes.h"

#include <stdlib.h>
#include <string.h>

/* Bytes in three significant digits without the space: "22.1GB", "64.0MB". */
static char *mf_cgroup_bytes(json_int_t v)
{
	char *t = mf_fmt_bytes((double)v), *sp = strchr(t, ' ');
	if (sp)
		memmove(sp, sp + 1, strlen(sp));
	return t;
}

/* "cgroup peak 22.1GB of 24.0GB (92%)", or "cgroup peak 22.1GB, no limit"; NULL without a peak. */
static char *mf_cgroup_text(json_t *peak, json_t *limit)
{
	if (!json_is_integer(peak))
		return NULL;
	json_int_t p = json_integer_value(peak), l = json_is_integer(limit) ? json_integer_value(limit) : 0;
	char *pt = mf_cgroup_bytes(p), *t;
	if (l > 0) {
		char *lt = mf_cgroup_bytes(l);
		t = mf_xasprintf("cgroup peak %s of %s (%d%%)", pt, lt, (int)((double)p * 100.0 / (double)l + 0.5));
		free(lt);
	} else {
		t = mf_xasprintf("cgroup peak %s, no limit", pt);
	}
	free(pt);
	return t;
}

/* The group's high-water (memory.peak, memory.max_usage_in_bytes) counts from the group's creation,
 * which may be long before this process: when it is above the highest usage the process read
 * (process.cgroup.peak_read), the line says whose figure it is, the contract's prefix unchanged. */
void mf_print_cgroup(FILE *out, json_t *metrics, json_t *cgroup)
{
	json_t *peak = json_object_get(metrics, "process_mem_cgroup_peak");
	json_t *read = json_object_get(cgroup, "peak_read");
	char *t = mf_cgroup_text(peak, json_object_get(metrics, "process_mem_cgroup_limit"));
	if (!t)
		return;
	if (json_is_integer(read) && json_integer_value(peak) > json_integer_value(read)) {
		char *r = mf_cgroup_bytes(json_integer_value(read));
		fprintf(out, "  %s, the group's high-water since it was created (this process read at most %s)\n", t,
			r);
		free(r);
	} else {
		fprintf(out, "  %s\n", t);
	}
	free(t);
}

void mf_print_cgroup_killed(FILE *out, const struct mf_file *f)
{
	json_t *cg = json_object_get(json_object_get(f->root, "process"), "cgroup");
	if (!json_is_true(json_object_get(cg, "oom_killed")))
		return;
	char *t = mf_cgroup_text(json_object_get(cg, "peak"), json_object_get(cg, "limit"));
	const char *path = json_string_value(json_object_get(cg, "path"));
	fprintf(out, "memshim: %s: killed by its memory cgroup's OOM killer (oom_kill %lld -> %lld): %s (%s)\n",
		f->path, (long long)json_integer_value(json_object_get(cg, "oom_kills")),
		(long long)json_integer_value(json_object_get(cg, "oom_kills_after")), t ? t : "cgroup peak unknown",
		path ? path : "?");
	free(t);
}
