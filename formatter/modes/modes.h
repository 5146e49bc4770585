/* memshim-format's modes: each mode's run function (model/modes.def, modes.c) and what the modes share
 * (the dump's status line and groups, the --calls tables, the --sites tables, --merge, --diff,
 * --json-dir, --csv, --compare, the exports, --recover). */
#ifndef MF_MODES_H
#define MF_MODES_H

#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "model/sites.h"

#include <stdio.h>
#include <jansson.h>

/* What a mode's run function gets: the options, the files read and selected (side[1]: --diff's
 * NEW), or for a mode that reads its own arguments the command line. */
struct mf_run {
	const struct mf_opts *o;
	struct mf_set side[2];
	size_t nsides;
	enum mf_mode mode; /* the mode run: --auto-merge makes the dump a --merge */
	int argc;
	char **argv;
};

/* modes.c: each mode's run function (model/modes.def). */
#define MF_MODE(id, name, pick, run, synopsis) int run(const struct mf_run *r, FILE *out, FILE *err);
#include "model/modes.def"
#undef MF_MODE

/* dump.c */
void mf_print_status(FILE *out, const struct mf_file *f);
/* One group of F's metrics; its stages give the hint when the stage's last call (its flat keys) is
 * not its largest. */
int mf_print_group(FILE *out, const struct mf_file *f, const struct mf_group *g, int first);
void mf_dump_file(FILE *out, const struct mf_file *f, const struct mf_opts *o);
void mf_print_header(FILE *out, const struct mf_file *f);
void mf_sort_files(struct mf_file *files, size_t n);
/* cgroup.c: "cgroup peak 22.1GB of 24.0GB (92%)" under the process group (from its flat keys; CGROUP,
 * the file's process.cgroup or NULL, says when that is the group's high-water beyond what the
 * process read), and the line saying the memory cgroup's OOM killer ended a process (a record read
 * after the kill). */
void mf_print_cgroup(FILE *out, json_t *metrics, json_t *cgroup);
void mf_print_cgroup_killed(FILE *out, const struct mf_file *f);
int mf_has_stage(const struct mf_file *f, const char *stage);

/* gpu.c: the GPU out-of-memory bursts (first in the dump), and each device's footprint against
 * what memshim counted (after the groups); nothing when the file has none. */
void mf_print_gpu_oom(FILE *out, const struct mf_file *f);
void mf_print_gpu_footprint(FILE *out, const struct mf_file *f);

/* targets.c: over all the files of a run, once: the stage targets no process matched, and the
 * stages a bare target opened from a function outside the program's __main__; 1 when it printed. */
int mf_print_targets(FILE *out, const struct mf_file *files, size_t n);

/* calls.c: --calls tables. */
void mf_print_calls(FILE *out, json_t *stages, const char *only_stage);
/* The file's labelled calls (of ONLY_STAGE when given), those that needed most CPU memory first:
 * ten of them, or ALL. */
void mf_print_labelled(FILE *out, const struct mf_file *f, const char *only_stage, int all);

/* One file's tables (only O->stage when set), or the line saying it has none. */
void mf_print_sites(FILE *out, const struct mf_file *f, const struct mf_opts *o);

/* compare.c: --compare HF.json, Hugging Face's own memory metrics beside F's. */
int mf_compare(FILE *out, FILE *err, const char *hf_path, const struct mf_file *f);

/* merge.c, diff.c, results.c */
/* One table per stage over the files S keeps (S->how MF_PICK_RANKS or SHOWN). */
void mf_merge(FILE *out, const struct mf_set *s, const struct mf_opts *o);
/* The combined peak over time of FILES (each one's timeline on one clock), a table per component. */
void mf_print_combined(FILE *out, const struct mf_file *files, size_t n);
int mf_diff(FILE *out, struct mf_file *oldf, struct mf_file *newf, const struct mf_opts *o);
/* Several files on a side (a multi-rank run): rank by rank, then the max over the ranks. */
int mf_diff_runs(FILE *out, const struct mf_set *olds, const struct mf_set *news, const struct mf_opts *o, FILE *err);
/* "5%", "1MB" or both, comma-separated ("5%,1MB": growth must exceed both); 0 or -1. */
int mf_parse_threshold(const char *text, struct mf_threshold *t);
int mf_write_results(FILE *err, const char *dir, json_t *metrics, struct mf_groups *gs);
/* The name of file I of FILES among several: "rank1", or "pid4242" for a process without a rank of
 * its own (a worker that inherited its parent's) or whose rank another of them has too; its
 * --json-dir directory and its job_mem_*_peak_ key. */
char *mf_results_label(const struct mf_file *files, size_t n, size_t i);
/* The whole job's keys over the files S keeps (a run's processes shown), from their combined peaks
 * (model/combined.h), per component C (cpu, gpu0, ...) with a series in two or more of them:
 * job_mem_C_peak, _peak_at (seconds from the earliest start_time), _peak_within, _own_peaks_sum and
 * job_mem_C_peak_rank<N> / _pid<N> (what each held then); NULL when no component has two. */
json_t *mf_job_metrics(const struct mf_set *s);
/* DIR/job_results.json with those keys, and DIR/all_results.json updated with them; nothing
 * without them. 0 or -1 (a line on ERR). */
int mf_write_job_results(FILE *err, const char *dir, const struct mf_set *s);

/* csv.c: --csv, and one RFC 4180 field (LAST: ends the record with CRLF). */
void mf_csv(FILE *out, const struct mf_file *files, size_t n, const char *only_stage);
void mf_csv_field(FILE *out, const char *s, int last);

/* export.c: DATA into PATH through a temporary file beside it (whole or not at all); one line on
 * ERR when it cannot be written. */
int mf_write_whole(FILE *err, const char *path, const void *data, size_t n);
/* flame_html.c: --flame OUT.html, every stage's sites in one interactive page. */
int mf_html_name(const char *path); /* PATH ends in .html (any case) */
int mf_flame_html(FILE *err, const struct mf_set *s, const struct mf_opts *o);

/* recover.c: memshim-format --recover RECORD -o FILE [--keep]. */
int mf_recover_main(int argc, char **argv, FILE *out, FILE *err);
/* memshim-format --recover-under DIR [--root-pid PID] [--since SECONDS]: every record of this
 * user's (MEMSHIM_LIVE_DIR and the default directory) whose process is gone, whose metrics file is
 * under DIR and does not already hold as much (the process's own final or signal file, a file
 * written at or after the record's last update), is written out as that file, one line each on ERR
 * (`memshim run` after its command died by a signal).  --root-pid: only records whose root_pid is
 * PID; --since: only those of processes started at or after SECONDS since the epoch. */
int mf_recover_under_main(int argc, char **argv, FILE *out, FILE *err);

#endif
