/* --json-dir: {stage}_results.json per group and an updated all_results.json, as HF's save_metrics;
 * for a run of several processes also the whole job's combined peaks (job_results.json). */
#include "modes/modes.h"
#include "base/base.h"
#include "model/combined.h"
#include "model/document.h"
#include "model/select.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p, so a fresh results directory needs no preparation. */
static int mf_mkdirs(const char *dir)
{
	char *p = mf_xstrdup(dir);
	int rc = 0;
	for (char *s = p + 1; *s && !rc; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0777) && errno != EEXIST)
			rc = -1;
		*s = '/';
	}
	if (!rc && mkdir(p, 0777) && errno != EEXIST)
		rc = -1;
	free(p);
	return rc;
}

/* Written to a temporary name and renamed, so a reader never sees half a file. */
static int mf_write_json(FILE *err, const char *path, json_t *obj)
{
	char *tmp = mf_xasprintf("%s.tmp.%ld", path, (long)getpid());
	FILE *fp = fopen(tmp, "w");
	int rc = -1;
	if (fp) {
		mf_py_json(fp, obj);
		int bad = ferror(fp);
		if (fclose(fp) == 0 && !bad && rename(tmp, path) == 0)
			rc = 0;
	}
	if (rc) {
		fprintf(err, "memshim-format: %s: cannot write: %s\n", path, strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

/* A stage name as a file name: no directory separators. */
static char *mf_results_path(const char *dir, const char *name)
{
	char *path = mf_xasprintf("%s/%s_results.json", dir, name);
	for (char *s = path + strlen(dir) + 1; *s; s++)
		if (*s == '/')
			*s = '_';
	return path;
}

static int mf_write_group(FILE *err, const char *dir, json_t *metrics, const struct mf_group *g)
{
	json_t *obj = json_object();
	for (size_t i = 0; i < g->nkeys; i++)
		json_object_set(obj, g->keys[i], json_object_get(metrics, g->keys[i]));
	char *path = mf_results_path(dir, g->name);
	int rc = mf_write_json(err, path, obj);
	free(path);
	json_decref(obj);
	return rc;
}

/* The existing all_results.json, or an empty object when there is none. */
static json_t *mf_read_all(FILE *err, const char *path)
{
	json_error_t je;
	if (access(path, F_OK) != 0)
		return json_object();
	json_t *all = json_load_file(path, 0, &je);
	if (!all) {
		fprintf(err, "memshim-format: %s: cannot update, not valid JSON (%s)\n", path, je.text);
		return NULL;
	}
	if (!json_is_object(all)) {
		fprintf(err, "memshim-format: %s: cannot update, not a JSON object\n", path);
		json_decref(all);
		return NULL;
	}
	return all;
}

/* all_results.json in DIR, updated with METRICS (new keys win). */
static int mf_update_all(FILE *err, const char *dir, json_t *metrics)
{
	char *path = mf_xasprintf("%s/all_results.json", dir);
	json_t *all = mf_read_all(err, path);
	int rc = -1;
	if (all) {
		json_object_update(all, metrics);
		rc = mf_write_json(err, path, all);
		json_decref(all);
	}
	free(path);
	return rc;
}

int mf_write_results(FILE *err, const char *dir, json_t *metrics, struct mf_groups *gs)
{
	if (mf_mkdirs(dir)) {
		fprintf(err, "memshim-format: %s: cannot create directory: %s\n", dir, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < gs->n; i++)
		if (mf_write_group(err, dir, metrics, &gs->g[i]))
			return -1;
	return mf_update_all(err, dir, metrics);
}

char *mf_results_label(const struct mf_file *files, size_t n, size_t i)
{
	int ranked = mf_own_rank(&files[i], files, n);
	for (size_t j = 0; j < n && ranked; j++)
		if (j != i && files[j].rank == files[i].rank && mf_own_rank(&files[j], files, n))
			ranked = 0;
	return ranked ? mf_xasprintf("rank%lld", files[i].rank) : mf_xasprintf("pid%lld", files[i].pid);
}

static void mf_job_bytes(json_t *o, const char *key, double v)
{
	json_object_set_new(o, key, json_integer((json_int_t)llround(v)));
}

json_t *mf_job_metrics(const struct mf_set *s)
{
	struct mf_file *shown = mf_xmalloc((s->n ? s->n : 1) * sizeof *shown);
	size_t *at = mf_xmalloc((s->n ? s->n : 1) * sizeof *at), m = 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->keep[i])
			at[m] = i, shown[m++] = s->f[i];
	struct mf_combined *c;
	size_t nc = mf_combined_build(shown, m, &c);
	json_t *o = nc ? json_object() : NULL;
	for (size_t k = 0; k < nc; k++) {
		char *what = c[k].gpu ? mf_xasprintf("gpu%lld", c[k].device) : mf_xstrdup("cpu");
		char *key = mf_xasprintf("job_mem_%s_peak", what);
		mf_job_bytes(o, key, c[k].peak);
		free(key);
		key = mf_xasprintf("job_mem_%s_peak_at", what);
		json_object_set_new(o, key, json_real(round(c[k].at * 1e6) / 1e6)); /* the file's 6 decimals */
		free(key);
		key = mf_xasprintf("job_mem_%s_peak_within", what);
		mf_job_bytes(o, key, c[k].slack);
		free(key);
		key = mf_xasprintf("job_mem_%s_own_peaks_sum", what);
		mf_job_bytes(o, key, c[k].own_sum);
		free(key);
		for (size_t i = 0; i < c[k].n; i++) {
			if (!c[k].has[i])
				continue;
			char *who = mf_results_label(s->f, s->n, at[i]); /* named as its directory */
			key = mf_xasprintf("job_mem_%s_peak_%s", what, who);
			mf_job_bytes(o, key, c[k].held[i]);
			free(key);
			free(who);
		}
		free(what);
	}
	mf_combined_free(c, nc);
	free(shown);
	free(at);
	return o;
}

int mf_write_job_results(FILE *err, const char *dir, const struct mf_set *s)
{
	json_t *job = mf_job_metrics(s);
	int rc = 0;
	if (!job)
		return 0;
	if (mf_mkdirs(dir)) {
		fprintf(err, "memshim-format: %s: cannot create directory: %s\n", dir, strerror(errno));
		rc = -1;
	} else {
		char *path = mf_results_path(dir, "job");
		rc = mf_write_json(err, path, job) || mf_update_all(err, dir, job) ? -1 : 0;
		free(path);
	}
	json_decref(job);
	return rc;
}
