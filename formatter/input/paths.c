/* The files of one side of --diff: paths as given, a directory standing for the metrics files of
 * a run in it. */
#include "input/input.h"
#include "base/base.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void mf_paths_push(struct mf_paths *ps, char *path)
{
	ps->p = mf_xrealloc(ps->p, (ps->n + 1) * sizeof *ps->p);
	ps->p[ps->n++] = path;
}

/* The names the shim writes: NAME.json, NAME.json.<pid> (children), not hidden files. */
static int mf_metrics_name(const char *name)
{
	const char *j = strstr(name, ".json");
	if (name[0] == '.' || !j)
		return 0;
	while (strstr(j + 1, ".json"))
		j = strstr(j + 1, ".json");
	j += 5;
	if (*j == '.' && j[1])
		for (j++; *j >= '0' && *j <= '9'; j++)
			;
	return *j == '\0';
}

/* Whether a file there is one to load: a memshim metrics file, or JSON that does not even parse
 * (reported when loaded). Other JSON (a results file, a config) is passed over. */
static int mf_wanted(const char *path)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	if (!root)
		return 1;
	const char *fmt = json_string_value(json_object_get(root, "format"));
	int yes = fmt && !strcmp(fmt, "memshim-metrics");
	json_decref(root);
	return yes;
}

static int mf_cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int mf_paths_dir(struct mf_paths *ps, const char *dir, FILE *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t first = ps->n;
	if (!d) {
		fprintf(err, "memshim-format: %s: cannot open: %s\n", dir, strerror(errno));
		return MF_BAD;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (!mf_metrics_name(e->d_name))
			continue;
		char *path = mf_xasprintf("%s/%s", dir, e->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && mf_wanted(path))
			mf_paths_push(ps, path);
		else
			free(path);
	}
	closedir(d);
	if (ps->n == first) {
		fprintf(err,
			"memshim-format: %s: no metrics files (*.json, *.json.<pid>) in this "
			"directory\n",
			dir);
		return MF_BAD;
	}
	qsort(ps->p + first, ps->n - first, sizeof *ps->p, mf_cmp_path);
	return MF_OK;
}

int mf_paths_add(struct mf_paths *ps, const char *path, FILE *err)
{
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return mf_paths_dir(ps, path, err);
	mf_paths_push(ps, mf_xstrdup(path));
	return MF_OK;
}

/* Whether the metrics file PATH names ROOT_PID as its run's root. */
static int mf_rooted_at(const char *path, long long root_pid)
{
	json_t *root = json_load_file(path, 0, NULL);
	json_t *r = json_object_get(root, "root_pid");
	int yes = json_is_integer(r) && json_integer_value(r) == root_pid;
	json_decref(root);
	return yes;
}

void mf_paths_children(struct mf_paths *ps, const char *path, long long root_pid)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? mf_xasprintf("%.*s", (int)(slash - path + (slash == path)), path) : mf_xstrdup(".");
	const char *base = slash ? slash + 1 : path;
	size_t len = strlen(base), first = ps->n;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		const char *n = e->d_name;
		if (strncmp(n, base, len) || n[len] != '.' || !n[len + 1] ||
		    strspn(n + len + 1, "0123456789") != strlen(n + len + 1))
			continue;
		char *p = slash ? mf_xasprintf("%s/%s", dir, n) : mf_xstrdup(n); /* named as PATH is */
		if (mf_rooted_at(p, root_pid))
			mf_paths_push(ps, p);
		else
			free(p);
	}
	if (d)
		closedir(d);
	free(dir);
	if (ps->n > first) /* none found: ps->p may be NULL, which qsort must not get */
		qsort(ps->p + first, ps->n - first, sizeof *ps->p, mf_cmp_path);
}

void mf_paths_free(struct mf_paths *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		free(ps->p[i]);
	free(ps->p);
	memset(ps, 0, sizeof *ps);
}
