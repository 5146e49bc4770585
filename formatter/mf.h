/* memshim-format internals: shared types and the pure functions tests link directly. */
#ifndef MF_H
#define MF_H

#include <stdio.h>
#include <stddef.h>
#include <jansson.h>

/* Exit statuses of memshim-format. */
enum { MF_OK = 0, MF_REGRESSION = 1, MF_BAD = 2 };

/* The metrics format version this reader understands. */
#define MF_VERSION 1

/* One loaded, validated metrics file. */
struct mf_file {
	char *path;
	json_t *root;           /* owned */
	json_t *metrics;        /* owned: the file's metrics, plus the numbers so far (current span) of
				 * every stage open in a snapshot that had finished no call yet */
	json_t *file_metrics;   /* borrowed from root: the metrics as written (--json-dir, --compare) */
	json_t *stages;         /* borrowed from root */
	long long pid, ppid, root_pid;
	int has_rank;
	long long rank, local_rank, world_size;
	const char *rank_source; /* may be NULL */
	int complete, is_child, forked;
	const char *reason;     /* may be NULL */
	long long signal;       /* 0 when none */
	int has_times;
	double start_time, end_time;
	int gpu_used;           /* "gpu_used", or GPU keys in the metrics */
	const char *prog;       /* argv[0], may be NULL */
	double inherited_cpu;   /* a forked child: inherited_mem_cpu (CPU live at the fork), or -1; its
				 * process peaks are above it */
};

/* One printed group: a stage (or "init", "process", "main") and its sorted metric keys. */
struct mf_group {
	char *name;
	const char **keys;      /* borrowed from the file's metrics object */
	size_t nkeys, cap;
	json_t *open;           /* one file's groups: the stage's entry when it is open, else NULL */
};

struct mf_groups {
	struct mf_group *g;
	size_t n;
	struct mf_group init;   /* init_* and before_init_* keys, wherever they were folded */
};

/* read.c: loads PATH; on failure writes one "memshim-format: PATH: problem" line to ERR. */
int mf_load(const char *path, struct mf_file *f, FILE *err);
/* load.c: the same for a document already parsed (ROOT is taken over, also on failure). */
int mf_load_json(const char *path, json_t *root, struct mf_file *f, FILE *err);
void mf_file_free(struct mf_file *f);
/* The one "memshim-format: PATH: problem" line on ERR; returns -1. */
int mf_file_problem(FILE *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* open.c: stages still open in a snapshot. */
json_t *mf_open_stage(json_t *stages, const char *name); /* the open entry of NAME, or NULL */
void mf_add_so_far(json_t *metrics, json_t *stages);       /* S_* keys of open stages without calls */
long long mf_calls_of(json_t *stage);                   /* finished calls */
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

/* pyfloat.c: Python's repr(float) and round(x, 4). */
#define MF_REPR_MAX 48
void mf_py_repr(double x, char out[MF_REPR_MAX]);
double mf_py_round4(double x);

/* pyjson.c: json.dumps(v, indent=4, sort_keys=True), no trailing newline. */
void mf_py_json(FILE *out, json_t *v);

/* value.c: metric value formatting of the Trainer dump; returns malloc'd text. */
char *mf_format_value(const char *key, json_t *v);
int mf_is_mem_key(const char *key);   /* a byte count of memory (a `_mem_` key, not a count) */
/* V exactly as Hugging Face's metrics_format prints it: `_mem_` as v >> 20 "MB" (floor, also for
 * negatives), `_runtime` as _secs2timedelta ("0:00:26.20"), the rest as the dump. */
char *mf_hf_format_value(const char *key, json_t *v);
char *mf_hf_runtime_change(double seconds);   /* "+0:00:15.19", "-0:00:01.05" */
/* A change of D bytes, without a '+': whole MB (toward zero) from 1 MiB, below it whole KB
 * ("972KB"), below 1 KiB bytes ("24B"); no change "0MB". */
char *mf_bytes_change(double d);
size_t mf_width(const char *s);       /* display width: UTF-8 code points */

/* text.c: bytes in binary units, named as the Trainer dump names them (MB is 2^20 bytes), and
 * printable text. */
#define MF_BYTE_UNITS 6
extern const char *const mf_byte_units[MF_BYTE_UNITS]; /* "B", "KB", ... "PB" */
char *mf_fmt_bytes(double v);               /* "106 MB", "1.23 GB", "512 B" */
/* The same digits cut, not rounded (155.6 MiB: "155 MB"), so they read as the dump's whole MB
 * ("155MB") with decimals added: the flame graph's bytes beside --sites's. */
char *mf_fmt_bytes_cut(double v);
char *mf_clean_text(const char *s);          /* control characters become '?' */

/* table.c: aligned rows of cells. */
enum mf_align { MF_LEFT, MF_RIGHT };
struct mf_table {
	size_t ncols, nrows, cap;
	char **cells;           /* nrows * ncols, owned, NULL prints as "" */
	const enum mf_align *align;
	const char *const *seps; /* ncols - 1 separators */
};
void mf_table_init(struct mf_table *t, size_t ncols, const enum mf_align *align,
		   const char *const *seps);
void mf_table_row(struct mf_table *t, char **cells); /* takes ownership of the cells */
void mf_table_print(FILE *out, const struct mf_table *t, const char *indent);
void mf_table_free(struct mf_table *t);

/* util.c */
__attribute__((noreturn)) void mf_oom(void); /* "out of memory", exit 2 */
void *mf_xmalloc(size_t n);
void *mf_xrealloc(void *p, size_t n);
char *mf_xstrdup(const char *s);
char *mf_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int mf_num(json_t *v, double *out);   /* 1 when V is a number */
char *mf_proc_label(const struct mf_file *f); /* "rank 1" or "pid 4242" */

/* options.c: the modes (modes.def) and the options of the command line, one table each. */
enum mf_mode {
#define MF_MODE(id, name, pick, run, synopsis) MF_##id,
#include "modes.def"
#undef MF_MODE
	MF_NMODES
};

/* Which of a run's files a mode shows (select.c). */
enum mf_pick {
	MF_PICK_EVERY,          /* every file */
	MF_PICK_SHOWN,          /* all but the launchers, shells and small forked workers (--all: every) */
	MF_PICK_RANKS,          /* the ranks when there are any (--all: every), else as SHOWN */
	MF_PICK_COMPARED,       /* --diff: the ranks, else the one process that is not minor */
	MF_PICK_TOP_RANK,       /* the rank with call sites that peaked highest, else as SHOWN */
	MF_PICK_OWN,            /* no files: the mode reads its own arguments */
};

struct mf_opts {
	enum mf_mode mode;      /* MF_DUMP unless an option selects another */
	const char *mode_arg;   /* --plot, --flame: the picture to write; --compare: HF's file */
	const char *stage;      /* --stage, or NULL */
	int calls;              /* --calls */
	int all;                /* --all: no process is left out or summarised */
	int auto_merge;         /* --auto-merge: --merge when the files hold two or more ranks */
	const char *json_dir;
	struct mf_threshold {
		double pct;     /* growth must exceed this % of |old| (< 0: no percent part) */
		double bytes;   /* and this many bytes (< 0: no byte part) */
	} threshold;            /* --threshold 5%,1MB */
	const char *threshold_text;
	int allow_missing;      /* --allow-missing: a stage gone from NEW is no regression */
	int plot_w, plot_h;     /* --size, 0 for the default */
	int flame_gpu;          /* --gpu: the flame graph of the GPU sites */
	int depth, top;         /* --depth, --top (0: the default) */
	int by;                 /* --by: enum mf_by */
	int native;             /* --native: every frame as recorded, no Python-first folding */
	int no_lines;           /* --no-lines: native frames without their source lines */
};

/* --by: how --sites groups the sites (by the innermost Python frame, else the innermost frame). */
enum mf_by { MF_BY_NONE, MF_BY_LINE, MF_BY_FUNCTION, MF_BY_FILE, MF_BY_FRAMEWORK };

/* How a value is read (the option table's kinds). */
enum mf_kind {
	MF_FLAG,                /* no value: sets an int field to 1 (or only selects its mode) */
	MF_TEXT,                /* any non-empty text */
	MF_PICTURE,             /* a file name ending in .svg or .png */
	MF_COUNT,               /* a whole number from 1 to MF_SITES_MAX */
	MF_CHOICE,              /* one of the option's choices: its index + 1 in an int field */
	MF_SIZE,                /* WxH, each MF_PLOT_MIN to MF_PLOT_MAX: plot_w and plot_h */
	MF_THRESHOLD,           /* 5%,1MB (mf_parse_threshold), at most once */
	MF_OWN,                 /* selects a mode that reads the whole command line itself */
	MF_SHOW_HELP,           /* prints --help and stops */
	MF_SHOW_VERSION,        /* prints the version and stops */
};

#define MF_MODE_BIT(id) (1u << MF_##id)
#define MF_NO_FIELD ((size_t)-1)

/* One option: what it reads, where it goes, which modes take it, and its --help entry. */
struct mf_option {
	const char *name;       /* "--stage" */
	const char *alias;      /* "-h", or NULL */
	const char *arg;        /* what --help shows after the name ("NAME"), or NULL */
	enum mf_kind kind;
	size_t field;           /* offsetof(struct mf_opts, ...), or MF_NO_FIELD */
	unsigned modes;         /* MF_MODE_BIT of each mode that takes it */
	int selects;            /* it selects its one mode (--merge, --plot OUT) */
	const char *bad;        /* the usage error of a bad value (MF_COUNT, MF_CHOICE, MF_SIZE, ...) */
	const char *const *choices; /* MF_CHOICE: the values it takes, NULL-terminated */
	const char *help;       /* --help text, lines after the first indented; NULL: not listed */
};
extern const struct mf_option mf_options[];
extern const size_t mf_noptions;

struct mf_run;
/* One mode: its name in messages, which files it shows, what prints it, its usage lines. */
struct mf_mode_def {
	const char *name;
	enum mf_pick pick;
	int (*run)(const struct mf_run *r, FILE *out, FILE *err);
	const char *synopsis;
};
extern const struct mf_mode_def mf_modes[MF_NMODES];

/* The command line as parsed. */
struct mf_args {
	struct mf_opts o;
	char **files;
	int nfiles;
	int sep;                /* --diff: files before a "--" that follows a file, else -1 */
	size_t *given;          /* every option given, in order: its index in mf_options */
	int ngiven;
};

/* Fills A (free it with mf_args_free, also on failure); MF_OK, MF_BAD after one usage error on
 * ERR, or -1 when --help or --version printed to OUT and nothing is left to do. */
int mf_parse_args(int argc, char **argv, struct mf_args *a, FILE *out, FILE *err);
/* What the tables rule out: an option given to a mode that does not take it (one error naming
 * both), then the mode's operands; sets the default threshold. MF_OK or MF_BAD. */
int mf_check_args(struct mf_args *a, FILE *err);
void mf_args_free(struct mf_args *a);
/* The option named exactly S (or its alias), or NULL. */
const struct mf_option *mf_option_named(const char *s);
/* The mode OP selects (MF_DUMP for one that selects none). */
enum mf_mode mf_option_mode(const struct mf_option *op);
/* The --help text, made from the two tables. */
void mf_print_help(FILE *out);
int mf_usage_error(FILE *err, const char *what, const char *arg);

/* One side of a run through the pipeline: its files, sorted, and which of them the mode shows. */
struct mf_set {
	struct mf_file *f;
	size_t n;
	int *keep;              /* keep[i]: f[i] is shown */
	size_t left_out;        /* how many are not */
	enum mf_pick how;       /* the selection made (MF_PICK_TOP_RANK falls back to SHOWN) */
};

/* What a mode's run function gets: the options, the files read and selected (side[1]: --diff's
 * NEW), or for a mode that reads its own arguments the command line. */
struct mf_run {
	const struct mf_opts *o;
	struct mf_set side[2];
	size_t nsides;
	enum mf_mode mode;      /* the mode run: --auto-merge makes the dump a --merge */
	int argc;
	char **argv;
};

/* modes.c: each mode's run function (modes.def). */
#define MF_MODE(id, name, pick, run, synopsis) int run(const struct mf_run *r, FILE *out, FILE *err);
#include "modes.def"
#undef MF_MODE

/* dump.c */
void mf_print_status(FILE *out, const struct mf_file *f);
/* One group; STAGES gives the hint when the stage's last call (its flat keys) is not its largest. */
int mf_print_group(FILE *out, json_t *metrics, json_t *stages, const struct mf_group *g, int first);
void mf_dump_file(FILE *out, const struct mf_file *f, const struct mf_opts *o);
void mf_print_header(FILE *out, const struct mf_file *f);
void mf_sort_files(struct mf_file *files, size_t n);
int mf_has_stage(const struct mf_file *f, const char *stage);

/* targets.c: over all the files of a run, once: the stage targets no process matched, and the
 * stages a bare target opened from a function outside the program's __main__; 1 when it printed. */
int mf_print_targets(FILE *out, const struct mf_file *files, size_t n);

/* calls.c: --calls tables. */
void mf_print_calls(FILE *out, json_t *stages, const char *only_stage);
/* The file's labelled calls (of ONLY_STAGE when given), those that needed most CPU memory first:
 * ten of them, or ALL. */
void mf_print_labelled(FILE *out, const struct mf_file *f, const char *only_stage, int all);

/* sites.c: the call sites live at the stages' peaks (stages[].peak_sites, peak_sites_gpu). */
enum { MF_SITES_TOP = 10, MF_SITES_DEPTH = 5, MF_SITES_MAX = 1000 };
struct mf_site {
	double bytes;
	long long samples;      /* -1 when the file does not say */
	json_t *frames;         /* borrowed: innermost first; NULL when the entry has none */
	size_t order;           /* its index in the file */
	double exact;           /* exact_bytes: the part counted at true size, -1 when not said */
	long long others;       /* the closing entry: the stacks it stands for; -1 for a site */
	json_t *lines;          /* borrowed: [file, line] or null per frame (lines.c), or NULL */
	int framework_first;    /* leads with the framework's own line that allocated (mf_sites_lead) */
};
/* Which list of a stage: what the stage added (peak_sites), or what it inherited (_before). */
enum mf_view { MF_ADDED, MF_BEFORE };
struct mf_sites {
	struct mf_site *s;      /* owned, largest first, the closing entry (if any) last */
	size_t n;
	size_t named;           /* the sites before the closing entry */
	double total;           /* the bytes of all entries */
	double exact;           /* their exact_bytes */
	int exact_known;        /* some entry says its exact_bytes */
	long long samples;      /* their samples (GPU: allocations) */
	int present;            /* the stage has the list */
	int split;              /* the stage has the _before list: peak_sites is only what it added */
	double lag;             /* how far the list may lag the peak, -1 when not said */
};
/* STAGE's CPU (GPU != 0: GPU) sites that the stage added (an older file: all live at the peak);
 * entries that are not sites are left out. */
void mf_sites_get(json_t *stage, int gpu, struct mf_sites *out);
/* The same for either list. */
void mf_sites_view(json_t *stage, int gpu, enum mf_view view, struct mf_sites *out);
/* Bytes as text (malloc'd): "47MB" as the dump prints memory, or "47.0 MB" (plot/scale.c). */
typedef char *mf_bytes_fn(double bytes);
char *mf_mb(double bytes);
/* "added by the stage, live at its peak: 47MB in 5 sites and 7 other stacks; shares are of its
 * need, 42MB (alloc_delta + peaked_delta)" (malloc'd); *BASE (when not NULL): what the shares
 * are of. */
char *mf_sites_summary(json_t *stage, int gpu, enum mf_view view, const struct mf_sites *s,
		       mf_bytes_fn *fmt, double *base);
/* "40MB exact (blocks counted at their size), 7MB sampled (estimated)" (SHARES: "40MB exact
 * (85.1%, blocks ...), 7MB sampled (14.9%, estimated)"), "all of it exact: ...", or NULL when the
 * entries do not say (malloc'd). */
char *mf_sites_exact_text(const struct mf_sites *s, mf_bytes_fn *fmt, int shares);
/* frames.c: what --sites shows of a site's frames. */
int mf_frame_is_python(const char *frame);     /* "func (/path/file.py:12)" */
char *mf_clean_frame(const char *frame);       /* demangled and printable (malloc'd) */
const char *mf_frame_where(const char *frame); /* where " (object)" or " (file:line)" starts, or NULL */

/* lines.c: native frames' source lines from the objects' DWARF line tables (elfutils' libdw).
 * F's frames that have a location and a line become "sym file.c:42 (obj)"; the objects stay open
 * for the next file until mf_lines_end. */
void mf_lines_resolve(struct mf_file *f);
void mf_lines_end(void);
/* FRAME ("sym+0x1f (obj)" or "0x.. (obj)") shown with its line: "sym file.c:42 (obj)", the file's
 * base name; an address alone takes FUNCTION's name when there is one (malloc'd). */
char *mf_frame_with_line(const char *frame, const char *function, const char *file, long line);
/* Where " file.c:42" starts in a native frame shown with its line, or NULL. */
const char *mf_frame_line_at(const char *frame);
char *mf_frame_without_line(const char *shown); /* SHOWN without " file.c:42" (malloc'd) */
/* Frame K of S's source file (the full path) and line: 1, or 0 when it has none. */
int mf_site_source(const struct mf_site *s, size_t k, const char **file, long *line);
/* The lines --sites shows for S, innermost first (*LINES and each line malloc'd): with Python
 * frames (and not NATIVE), the innermost one, "[native: ...]" for the frames it called, then its
 * Python callers; else every frame. Returns how many. */
size_t mf_site_lines(const struct mf_site *s, int native, char ***lines);
int mf_site_python_first(const struct mf_site *s, int native); /* S shows a Python frame first */
/* The group --by BY puts S in: its innermost Python frame's line, "func (file)" or file; a
 * native-only stack (or NATIVE) by its innermost frame: as shown, "function (object)" or object;
 * MF_BY_FRAMEWORK: the framework's own line that allocated (the innermost library Python frame
 * inside the user's line), else the user's line. */
char *mf_site_key(const struct mf_site *s, enum mf_by by, int native);
/* When every site of S that has a line of the user's own leads with the same one (a Trainer run:
 * main's trainer.train(), one call into a framework), the sites with library frames inside it
 * lead with the framework's own line that allocated instead, the user's line under it. */
void mf_sites_lead(struct mf_sites *s);
/* The stage's need of CPU (GPU) memory, which the added view's shares are of: alloc_delta + peaked_delta, or
 * -1 when the stage does not say or it is not positive. */
double mf_stage_need(json_t *stage, int gpu);
/* What a list's shares are of: the stage's need (what it added, when it says), else its peak (an
 * older file, or what it inherited), else the bytes listed; returns those bytes. */
enum mf_base { MF_BASE_NEED, MF_BASE_PEAK, MF_BASE_LISTED };
double mf_sites_base(json_t *stage, int gpu, enum mf_view view, const struct mf_sites *s,
		     enum mf_base *kind);
void mf_sites_free(struct mf_sites *s);
size_t mf_site_nframes(const struct mf_site *s);
const char *mf_site_frame(const struct mf_site *s, size_t i); /* "?" for what is not a string */
/* FRAME as shown: a C++ symbol ("_Z...+0x1f (lib.so)") demangled when the C++ runtime's demangler
 * can be loaded, else FRAME as it is (malloc'd). */
char *mf_frame_display(const char *frame);
int mf_file_has_sites(const struct mf_file *f);
double mf_stage_peak(json_t *stage, int gpu);  /* its "peak", or -1 */
/* "CPU peak 150MB; sampled every 512 KB on average, 240 samples at the peak; ..." (malloc'd). */
char *mf_sites_about(const struct mf_file *f, json_t *stage, int gpu, const struct mf_sites *s);
/* One file's tables (only O->stage when set), or the line saying it has none. */
void mf_print_sites(FILE *out, const struct mf_file *f, const struct mf_opts *o);

/* compare.c: --compare HF.json, Hugging Face's own memory metrics beside F's. */
int mf_compare(FILE *out, FILE *err, const char *hf_path, const struct mf_file *f);

/* select.c: the processes that matter. A minor process (a launcher, a shell) opened no stage of
 * its own, used no GPU, is not a rank, and peaked under MF_MINOR_PEAK bytes of CPU memory or ran the
 * command it was given as another process (its argv ends with that process's: `time python st.py`,
 * `conda run python st.py`); or it is a small forked worker (mf_small_fork). */
#define MF_MINOR_PEAK (16 << 20)
int mf_is_minor(const struct mf_file *f, const struct mf_file *files, size_t n);
/* A forked child (its file says what it inherited: inherited_mem_cpu) that opened no stage of its
 * own (only stages open in its parent at the fork, or the implicit init), used no GPU, is not a
 * rank, and whose own peak added under max(MF_FORK_ADDED, 5% of its parent's peak). */
#define MF_FORK_ADDED (8 << 20)
int mf_small_fork(const struct mf_file *f, const struct mf_file *files, size_t n);
/* What F's CPU peak added to the memory it inherited at the fork (its process_mem_cpu_peak, which
 * is above it), or -1 for a file that does not say what it inherited. */
double mf_fork_added(const struct mf_file *f);
/* F has a rank that its parent (when among FILES) does not share: a rank, not its worker. */
int mf_own_rank(const struct mf_file *f, const struct mf_file *files, size_t n);
size_t mf_count_ranks(const struct mf_file *files, size_t n);
/* Lightning's ddp: the process you start is local rank 0, but gets its variables only after start
 * (its file has no rank); the ranks it starts (exec'd, LOCAL_RANK 1..) have theirs.  A file without
 * a rank whose exec'd children have Lightning ranks gets rank child - child's local rank. */
void mf_infer_lightning_ranks(struct mf_file *files, size_t n);
/* "pid 1 (bash), pid 2 (timeout)" for the files whose KEEP is 0; more than 8 of them by what they
 * ran, with counts ("22 bash, 6 readlink"). */
char *mf_proc_list(const struct mf_file *files, size_t n, const int *keep);
/* What F ran as it named itself last (its "comm", else its first argument at its end, without the
 * directory), or NULL (malloc'd). */
char *mf_proc_prog(const struct mf_file *f);
/* KEEP[i] = 0 for the minor processes to leave out (none with ALL or with a single file; when every
 * file is minor, all but the one that did the work: the highest CPU peak among those that launched
 * no other); returns how many are left out. */
size_t mf_hide_minor(const struct mf_file *files, size_t n, int all, int *keep);
/* The lines naming the processes left out (launchers and shells in one, small forked workers in
 * another); HOW follows "--all" ("shows them"). */
void mf_print_hidden(FILE *out, const struct mf_file *files, size_t n, const int *keep,
		     size_t hidden, const char *how);
/* The one selection of every mode: S->keep and S->left_out as HOW says (ALL: --all), S->how the
 * selection made. */
void mf_select(struct mf_set *s, enum mf_pick how, int all);

/* merge.c, diff.c, results.c */
/* One table per stage over the files S keeps (S->how MF_PICK_RANKS or SHOWN). */
void mf_merge(FILE *out, const struct mf_set *s, const struct mf_opts *o);
int mf_diff(FILE *out, struct mf_file *oldf, struct mf_file *newf,
	    const struct mf_opts *o);
/* Several files on a side (a multi-rank run): rank by rank, then the max over the ranks. */
int mf_diff_runs(FILE *out, const struct mf_set *olds, const struct mf_set *news,
		 const struct mf_opts *o, FILE *err);
/* "5%", "1MB" or both, comma-separated ("5%,1MB": growth must exceed both); 0 or -1. */
int mf_parse_threshold(const char *text, struct mf_threshold *t);
int mf_write_results(FILE *err, const char *dir, json_t *metrics, struct mf_groups *gs);

/* csv.c: --csv, and one RFC 4180 field (LAST: ends the record with CRLF). */
void mf_csv(FILE *out, const struct mf_file *files, size_t n, const char *only_stage);
void mf_csv_field(FILE *out, const char *s, int last);

/* paths.c: the files of one side of --diff (a directory: its *.json and *.json.<pid> metrics
 * files, in name order; other JSON there is passed over). */
struct mf_paths {
	char **p;
	size_t n;
};
int mf_paths_add(struct mf_paths *ps, const char *path, FILE *err);
void mf_paths_free(struct mf_paths *ps);

/* export.c: DATA into PATH through a temporary file beside it (whole or not at all); one line on
 * ERR when it cannot be written. */
int mf_write_whole(FILE *err, const char *path, const void *data, size_t n);
/* flame_html.c: --flame OUT.html, every stage's sites in one interactive page. */
int mf_html_name(const char *path);     /* PATH ends in .html (any case) */
int mf_flame_html(FILE *err, const struct mf_set *s, const struct mf_opts *o);

/* version.c: "MAJOR.MINOR" from shim/memshim.h. */
const char *mf_version(void);

/* cli.c: the whole program, with its streams, so tests run it in-process. */
int mf_main(int argc, char **argv, FILE *out, FILE *err);

#endif
