/* One metrics file in memory (struct mf_file, filled by input/), the stages still open in a
 * snapshot (open.c), and its flat metrics split into printed groups (group.c). */
#ifndef MF_DOCUMENT_H
#define MF_DOCUMENT_H

#include <jansson.h>
#include <stddef.h>

/* One loaded, validated metrics file. */
struct mf_file {
	char *path;
	json_t *root; /* owned */
	/* owned: the file's metrics, plus the numbers so far (current span) of every stage open in a
	 * snapshot that had finished no call yet */
	json_t *metrics;
	json_t *file_metrics; /* borrowed from root: the metrics as written (--json-dir, --compare) */
	json_t *stages;       /* borrowed from root */
	long long pid, ppid, root_pid;
	int has_rank;
	long long rank, local_rank, world_size;
	const char *rank_source; /* may be NULL */
	int complete, is_child, forked;
	const char *reason; /* may be NULL */
	long long signal;   /* 0 when none */
	int has_times;
	double start_time, end_time;
	int gpu_used;     /* "gpu_used", or GPU keys in the metrics */
	const char *prog; /* argv[0], may be NULL */
	/* a forked child: inherited_mem_cpu (CPU live at the fork), or -1; its process peaks are above
	 * it */
	double inherited_cpu;
	size_t children_beside; /* files of its run's other processes beside it, shown by a dump of it alone */
};

/* One printed group: a stage (or "init", "process", "main") and its sorted metric keys. */
struct mf_group {
	char *name;
	const char **keys; /* borrowed from the file's metrics object */
	size_t nkeys, cap;
	json_t *open; /* one file's groups: the stage's entry when it is open, else NULL */
};

struct mf_groups {
	struct mf_group *g;
	size_t n;
	struct mf_group init; /* init_* and before_init_* keys, wherever they were folded */
};

/* open.c: stages still open in a snapshot. */
json_t *mf_open_stage(json_t *stages, const char *name); /* the open entry of NAME, or NULL */
void mf_add_so_far(json_t *metrics, json_t *stages);     /* S_* keys of open stages without calls */
long long mf_calls_of(json_t *stage);                    /* finished calls */
/* "open: call N had not returned; so far: ..." (malloc'd, no newline); IN_DUMP: worded for the
 * dump, whose keys already are the numbers so far when the stage finished no call. */
char *mf_open_line(json_t *stage, int in_dump);
/* The so-far value of one span member ("cpu", "alloc_delta"), or NULL. */
json_t *mf_span_value(json_t *stage, const char *comp, const char *member);

/* group.c: splits a metrics object into groups following the stage order. */
void mf_group_metrics(json_t *metrics, json_t *stages, struct mf_groups *out);
void mf_groups_free(struct mf_groups *gs);
/* The union of several files' groups (--merge, --diff), in first-seen order. */
void mf_group_union(struct mf_file *files, size_t n, struct mf_groups *u);
struct mf_group *mf_groups_find(struct mf_groups *gs, const char *name);
void mf_group_add(struct mf_group *g, const char *key);
void mf_group_sort(struct mf_group *g);

#endif
