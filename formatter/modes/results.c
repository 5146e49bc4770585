/* --json-dir: {stage}_results.json per group and an updated all_results.json, as HF's save_metrics. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"

#include <errno.h>
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

int mf_write_results(FILE *err, const char *dir, json_t *metrics, struct mf_groups *gs)
{
	if (mf_mkdirs(dir)) {
		fprintf(err, "memshim-format: %s: cannot create directory: %s\n", dir, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < gs->n; i++)
		if (mf_write_group(err, dir, metrics, &gs->g[i]))
			return -1;
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
