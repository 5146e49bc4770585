/* Splits the flat metrics into printed groups: stages in first-begin order, init folded into the
 * first group, process-wide keys last. */
#include "base/base.h"
#include "model/document.h"

#include <stdlib.h>
#include <string.h>

enum { MF_FOLD = -1, MF_PROCESS = -2 };

static int mf_prefixed(const char *key, const char *prefix)
{
	size_t n = strlen(prefix);
	return !strncmp(key, prefix, n) && key[n] == '_';
}

void mf_group_add(struct mf_group *g, const char *key)
{
	if (g->nkeys == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 16;
		g->keys = mf_xrealloc(g->keys, g->cap * sizeof *g->keys);
	}
	g->keys[g->nkeys++] = key;
}

static int mf_cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void mf_group_sort(struct mf_group *g)
{
	if (g->nkeys)
		qsort(g->keys, g->nkeys, sizeof *g->keys, mf_cmp_key);
}

/* Index in NAMES of the longest stage name KEY starts with ("train_extra" beats "train"). */
static int mf_stage_of(const char *key, const char **names, size_t n)
{
	int best = -1;
	size_t best_len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]);
		if (mf_prefixed(key, names[i]) && (best < 0 || len > best_len))
			best = (int)i, best_len = len;
	}
	return best;
}

static int mf_classify(const char *key, const char **names, size_t n)
{
	if (mf_prefixed(key, "process"))
		return MF_PROCESS;
	if (mf_prefixed(key, "before_init"))
		return MF_FOLD;
	int s = mf_stage_of(key, names, n);
	if (s < 0 || !strcmp(names[s], "init"))
		return MF_FOLD;
	return s;
}

/* Stage names in order, each once. */
static const char **mf_stage_names(json_t *stages, size_t *n)
{
	const char **names = mf_xmalloc((json_array_size(stages) + 1) * sizeof *names);
	size_t i, k = 0;
	json_t *s;
	json_array_foreach(stages, i, s) {
		const char *name = json_string_value(json_object_get(s, "name"));
		size_t j = 0;
		while (name && j < k && strcmp(names[j], name))
			j++;
		if (name && j == k)
			names[k++] = name;
	}
	*n = k;
	return names;
}

static struct mf_group *mf_new_group(struct mf_groups *gs, const char *name)
{
	gs->g = mf_xrealloc(gs->g, (gs->n + 1) * sizeof *gs->g);
	struct mf_group *g = &gs->g[gs->n++];
	memset(g, 0, sizeof *g);
	g->name = mf_xstrdup(name);
	return g;
}

static void mf_move_keys(struct mf_group *to, struct mf_group *from)
{
	for (size_t i = 0; i < from->nkeys; i++)
		mf_group_add(to, from->keys[i]);
}

/* The fold group's name when no stage group exists to take it. */
static const char *mf_fold_name(const struct mf_group *init, const char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], "init"))
			return "init";
	return init->nkeys ? "init" : "main";
}

void mf_group_metrics(json_t *metrics, json_t *stages, struct mf_groups *out)
{
	size_t n;
	const char **names = mf_stage_names(stages, &n);
	struct mf_group *per = mf_xmalloc((n + 2) * sizeof *per);
	struct mf_group *fold = &per[n], *proc = &per[n + 1];
	const char *key;
	json_t *v;
	memset(out, 0, sizeof *out);
	memset(per, 0, (n + 2) * sizeof *per);
	json_object_foreach(metrics, key, v) {
		int c = mf_classify(key, names, n);
		mf_group_add(c == MF_PROCESS ? proc : c == MF_FOLD ? fold : &per[c], key);
		if (mf_prefixed(key, "init") || mf_prefixed(key, "before_init"))
			mf_group_add(&out->init, key);
	}
	for (size_t i = 0; i < n; i++)
		if (per[i].nkeys) {
			struct mf_group *g = mf_new_group(out, names[i]);
			mf_move_keys(g, &per[i]);
			g->open = mf_open_stage(stages, names[i]);
		}
	if (fold->nkeys && out->n) {
		mf_move_keys(&out->g[0], fold);
	} else if (fold->nkeys) {
		struct mf_group *g = mf_new_group(out, mf_fold_name(&out->init, names, n));
		mf_move_keys(g, fold);
		g->open = mf_open_stage(stages, g->name);
	}
	if (proc->nkeys)
		mf_move_keys(mf_new_group(out, "process"), proc);
	for (size_t i = 0; i < out->n; i++)
		mf_group_sort(&out->g[i]);
	mf_group_sort(&out->init);
	out->init.name = mf_xstrdup("init");
	out->init.open = mf_open_stage(stages, "init");
	for (size_t i = 0; i < n + 2; i++)
		free(per[i].keys);
	free(per);
	free(names);
}

/* The union of every file's groups, in first-seen order; each key only in its first group. */
/* The process-wide group stays last even when a later file adds stages. */
static void mf_process_last(struct mf_groups *u)
{
	struct mf_group *p = mf_groups_find(u, "process");
	if (!p)
		return;
	struct mf_group keep = *p;
	size_t i = (size_t)(p - u->g);
	memmove(&u->g[i], &u->g[i + 1], (u->n - i - 1) * sizeof *u->g);
	u->g[u->n - 1] = keep;
}

void mf_group_union(struct mf_file *files, size_t n, struct mf_groups *u)
{
	json_t *seen = json_object();
	memset(u, 0, sizeof *u);
	for (size_t i = 0; i < n; i++) {
		struct mf_groups gs;
		mf_group_metrics(files[i].metrics, files[i].stages, &gs);
		for (size_t j = 0; j < gs.n; j++) {
			struct mf_group *g = mf_groups_find(u, gs.g[j].name);
			if (!g) {
				u->g = mf_xrealloc(u->g, (u->n + 1) * sizeof *u->g);
				g = &u->g[u->n++];
				memset(g, 0, sizeof *g);
				g->name = mf_xstrdup(gs.g[j].name);
			}
			for (size_t k = 0; k < gs.g[j].nkeys; k++)
				if (!json_object_get(seen, gs.g[j].keys[k])) {
					json_object_set_new(seen, gs.g[j].keys[k], json_true());
					mf_group_add(g, gs.g[j].keys[k]);
				}
		}
		mf_groups_free(&gs);
	}
	/* A group whose keys all came first in another file's groups (init folded elsewhere) is empty. */
	size_t kept = 0;
	for (size_t j = 0; j < u->n; j++) {
		if (!u->g[j].nkeys) {
			free(u->g[j].name);
			free(u->g[j].keys);
			continue;
		}
		mf_group_sort(&u->g[j]);
		u->g[kept++] = u->g[j];
	}
	u->n = kept;
	mf_process_last(u);
	u->init.name = mf_xstrdup("init");
	/* Keys point into the files' own metrics objects, which outlive U. */
	json_decref(seen);
}

struct mf_group *mf_groups_find(struct mf_groups *gs, const char *name)
{
	for (size_t i = 0; i < gs->n; i++)
		if (!strcmp(gs->g[i].name, name))
			return &gs->g[i];
	return NULL;
}

void mf_groups_free(struct mf_groups *gs)
{
	for (size_t i = 0; i < gs->n; i++) {
		free(gs->g[i].name);
		free(gs->g[i].keys);
	}
	free(gs->g);
	free(gs->init.name);
	free(gs->init.keys);
	memset(gs, 0, sizeof *gs);
}
