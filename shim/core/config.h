/* The one table of settings (config.c) and the MEMSHIM_STAGES parser.  Every environment variable
 * the shim reads is a row of that table, read once at start (ms_config_start: one pass over environ, none when AT_SECURE) into
 * ms_cfg, which the shim only reads afterwards, its text rows through ms_setting_text
 * (tools/settings_lint.sh fails on any other read of the environment).  Pure logic otherwise:
 * tests load their own tables through a getter, warnings go through ms_log. */
#ifndef MS_CONFIG_H
#define MS_CONFIG_H

#include <stddef.h>

#define MS_PATH_MAX 4096
#define MS_STAGE_NAME_MAX 64 /* including the NUL */
#define MS_SPEC_MAX_STAGES 32
#define MS_SPEC_MAX_TARGETS 32  /* per stage */
#define MS_SPEC_POOL 32768      /* bytes for all target strings (a literal: messages say it) */
#define MS_SNAPSHOT_AUTO (-1.0) /* snapshots when memory moved or a stage changed (no thread) */
#define MS_TEXT_SETTINGS 32     /* variables kept as text (the table's K_TEXT rows) */
#define MS_TEXT_POOL 16384      /* bytes for their copies */
#define MS_SITES_EXACT_MAX 8    /* stages MEMSHIM_SITES=exact:STAGE,... may name */

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

/* MEMSHIM_SITES: off (0), sampled (1, the default), or every allocation recorded (exact).
 * "exact:STAGE,..." is sampled, with the stages it names in sites_exact. */
enum ms_sites_mode { MS_SITES_OFF, MS_SITES_SAMPLED, MS_SITES_EXACT };

struct ms_config {
	int disabled;             /* MEMSHIM_DISABLE */
	int log_level;            /* MEMSHIM_LOG: enum ms_log_level */
	int follow_children;      /* MEMSHIM_FOLLOW_CHILDREN */
	int timeline;             /* MEMSHIM_TIMELINE */
	int sites;                /* MEMSHIM_SITES: enum ms_sites_mode */
	long sites_rate;          /* MEMSHIM_SITES_RATE: mean bytes between samples */
	double snapshot_interval; /* MEMSHIM_SNAPSHOT_INTERVAL: seconds, 0 off, MS_SNAPSHOT_AUTO */
	int live;                 /* MEMSHIM_LIVE: the live record (output/live.c) */
	int native_plt;           /* MEMSHIM_NATIVE_PLT: native targets bound to their calls (GOT) */
	int nsites_exact;         /* MEMSHIM_SITES=exact:STAGE,...: how many stages it names */
	char sites_exact[MS_SITES_EXACT_MAX][MS_STAGE_NAME_MAX]; /* while one is open, every allocation is recorded */
	char output[MS_PATH_MAX];       /* MEMSHIM_OUTPUT, made absolute, %p not yet expanded */
	char children_dir[MS_PATH_MAX]; /* MEMSHIM_CHILDREN_DIR, made absolute, or "" */
	char live_dir[MS_PATH_MAX];     /* MEMSHIM_LIVE_DIR made absolute; empty: the default place */
	struct ms_spec spec;            /* MEMSHIM_STAGES */
	/* The variables kept as text, as they were at start (NULL: unset; "" stays ""): the user's
	 * MEMSHIM_OUTPUT as typed, the launchers' rank variables, the system's (TMPDIR,
	 * XDG_RUNTIME_DIR, LD_PRELOAD) and memshim run's MEMSHIM_RUN_DUMP.  Read with
	 * ms_setting_text.  The shim sets none: what its exec'd children need goes through lineage
	 * records (core/lineage.h). */
	const char *text[MS_TEXT_SETTINGS];
	size_t text_used;
	char text_pool[MS_TEXT_POOL]; /* their copies; a value that does not fit points into the
				       * environment as it was at start */
};

extern struct ms_config ms_cfg;

typedef const char *(*ms_getenv_fn)(const char *name);

/* Fills CFG from the environment through GET; every bad value gets one warning and its default. */
void ms_config_load(struct ms_config *cfg, ms_getenv_fn get);
/* Loads ms_cfg from the process's environment (lifecycle.c, once at start; a forked child keeps
 * its parent's): the only read of the environment in the shim.  INHERITED (asked at the first bad
 * value, may be NULL): whether the process is not its run's first, which inherited the settings
 * and said what is wrong with them; then it is said only with MEMSHIM_LOG=debug. */
void ms_config_start(int (*inherited)(void));
/* How many MEMSHIM_ names the environment holds that are no setting (a misspelt MEMSHIM_STAGE
 * would leave the defaults without a word), and one warning for each, with the setting it is
 * closest to: lifecycle.c gives them once per run, in its first process. */
int ms_config_unknown_settings(void);
void ms_config_warn_unknown(void);
/* With MEMSHIM_LOG=debug: one line per setting, "setting NAME=VALUE (source: default or env)",
 * the value as it is used (lifecycle.c: at start, in the run's first process). */
void ms_config_log_effective(void);

/* Non-zero when MEMSHIM_SITES=exact:... names stage NAME (the engine never makes its calls quiet:
 * call sites must see each of their boundaries). */
int ms_sites_exact_names(const char *name);

/* The text variable NAME as it was when ms_cfg was loaded, or NULL when it was unset or is not a
 * text row of the table.  An ms_getenv_fn: core/process.c reads the launchers' ranks through it. */
const char *ms_setting_text(const char *name);
/* The same from CFG (tests load their own). */
const char *ms_config_text(const struct ms_config *cfg, const char *name);

/* MEMSHIM_STAGES when unset: the Hugging Face Trainer's methods. */
extern const char ms_default_stages[];

/* Parses TEXT into SPEC; bad entries get one warning each and are skipped.  Returns the number of
 * bad entries. */
int ms_spec_parse(struct ms_spec *spec, const char *text);

/* Whether NAME may name a stage ([A-Za-z0-9_]+, short enough, not "process": the prefix of the
 * process-wide metrics, which a stage's keys would join): the same rule for MEMSHIM_STAGES and the
 * API. */
int ms_stage_name_valid(const char *name);

/* Whether the N bytes before a target's ':' name a native object ("lib.so", a path): the target is
 * then native only (native/detect.c), never a Python "module:qualname". */
int ms_target_names_object(const char *text, size_t n);

/* Edits (insert, delete, replace) from A[0, N) to B, or a large number when either has 63 bytes or
 * more: how near a misspelt name is (an unknown MEMSHIM_ setting, a Python target). */
int ms_edit_distance(const char *a, size_t n, const char *b);
/* The same when it is at most MOST, else MOST + 1: only a band of the table, so a name far from B
 * costs a few steps (names the program defines are compared with every target). */
int ms_edit_distance_at_most(const char *a, size_t n, const char *b, int most);

/* Index of the spec stage named NAME, or -1. */
int ms_spec_find(const struct ms_spec *spec, const char *name);

/* Targets of ms_cfg.spec a native detector found (stage index STAGE, TARGET as written there): a
 * plain name that is native here is not also "a Python target that matched nothing". */
void ms_spec_note_native(int stage, const char *target);
int ms_spec_native(int stage, const char *target);

#endif
