/* Which processes of a run matter (select.c): ranks, the launchers and shells around them, small
 * forked workers; the one selection every mode makes, and how a process is named. */
#ifndef MF_SELECT_H
#define MF_SELECT_H

#include "model/document.h"

#include <stdio.h>

/* Which of a run's files a mode shows (select.c). */
enum mf_pick {
	MF_PICK_EVERY,    /* every file */
	MF_PICK_SHOWN,    /* all but the launchers, shells and small forked workers (--all: every) */
	MF_PICK_RANKS,    /* the ranks when there are any (--all: every), else as SHOWN */
	MF_PICK_COMPARED, /* --diff: the ranks, else the one process that is not minor */
	MF_PICK_TOP_RANK, /* the rank with call sites that peaked highest, else as SHOWN */
	MF_PICK_OWN,      /* no files: the mode reads its own arguments */
};

/* One side of a run through the pipeline: its files, sorted, and which of them the mode shows. */
struct mf_set {
	struct mf_file *f;
	size_t n;
	int *keep;        /* keep[i]: f[i] is shown */
	size_t left_out;  /* how many are not */
	enum mf_pick how; /* the selection made (MF_PICK_TOP_RANK falls back to SHOWN) */
};

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
void mf_print_hidden(FILE *out, const struct mf_file *files, size_t n, const int *keep, size_t hidden, const char *how);
/* The one selection of every mode: S->keep and S->left_out as HOW says (ALL: --all), S->how the
 * selection made. */
void mf_select(struct mf_set *s, enum mf_pick how, int all);
/* "rank 1" or "pid 4242". */
char *mf_proc_label(const struct mf_file *f);

#endif
