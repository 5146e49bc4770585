/* The one table of settings (config.c) and the MEMSHIM_STAGES parser.  Pure logic: environment
 * reading goes through a getter the caller supplies, warnings through ms_log. */
#ifndef MS_CONFIG_H
#define MS_CONFIG_H

#include <stddef.h>

#define MS_PATH_MAX 4096
#define MS_STAGE_NAME_MAX 64 /* including the NUL */
#define MS_SPEC_MAX_STAGES 32
#define MS_SPEC_MAX_TARGETS 16   /* per stage */
#define MS_SPEC_POOL 8192        /* bytes for all target strings */
#define MS_SNAPSHOT_AUTO (-1.0)  /* snapshots when memory moved or a stage changed (no thread) */

struct ms_spec_stage {
	char name[64];
	int ntargets;
	const char *targets[MS_SPEC_MAX_TARGETS]; /* point into the spec's pool */
};

/* Counts before tables, small fields before large ones: every process loads the settings, and the
 * fewer pages that writes, the fewer faults. */
struct ms_spec {
	int nstages;
	int is_default; /* MEMSHIM_STAGES was unset: Hugging Face Trainer names */
	size_t pool_used;
	struct ms_spec_stage stage[MS_SPEC_MAX_STAGES];
	char pool[MS_SPEC_POOL];
};

struct ms_config {
	int disabled;            /* MEMSHIM_DISABLE */
	int log_level;           /* MEMSHIM_LOG: enum ms_log_level */
	int follow_children;     /* MEMSHIM_FOLLOW_CHILDREN */
	int timeline;            /* MEMSHIM_TIMELINE */
	int sites;               /* MEMSHIM_SITES: peak call sites sampled */
	long sites_rate;         /* MEMSHIM_SITES_RATE: mean bytes between samples */
	double snapshot_interval;/* MEMSHIM_SNAPSHOT_INTERVAL: seconds, 0 off, MS_SNAPSHOT_AUTO */
	int live;                /* MEMSHIM_LIVE: the live record (output/live.c) */
	char output[MS_PATH_MAX];/* MEMSHIM_OUTPUT, made absolute, %p not yet expanded */
	char children_dir[MS_PATH_MAX]; /* MEMSHIM_CHILDREN_DIR, made absolute, or "" */
	char live_dir[MS_PATH_MAX];/* MEMSHIM_LIVE_DIR made absolute; empty: the default place */
	struct ms_spec spec;     /* MEMSHIM_STAGES */
};

extern struct ms_config ms_cfg;

/* The default stage spec when MEMSHIM_STAGES is unset (Hugging Face Trainer). */
extern const char ms_default_stages[];

typedef const char *(*ms_getenv_fn)(const char *name);

/* Fills CFG from the environment through GET; every bad value gets one warning and its default. */
void ms_config_load(struct ms_config *cfg, ms_getenv_fn get);

/* Parses TEXT into SPEC; bad entries get one warning each and are skipped.  Returns the number of
 * bad entries. */
int ms_spec_parse(struct ms_spec *spec, const char *text);

/* Whether NAME may name a stage ([A-Za-z0-9_]+, short enough): the same rule for MEMSHIM_STAGES and
 * the API. */
int ms_stage_name_valid(const char *name);

/* Whether the N bytes before a target's ':' name a native object ("lib.so", a path): the target is
 * then native only (native/detect.c), never a Python "module:qualname". */
int ms_target_names_object(const char *text, size_t n);

/* Index of the spec stage named NAME, or -1. */
int ms_spec_find(const struct ms_spec *spec, const char *name);

#endif
