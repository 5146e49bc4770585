/* Who this process is and whether it is tracked: identity, clock and the switches every layer
 * reads.  lifecycle.c decides; everyone else only reads. */
#ifndef MS_PROCESS_H
#define MS_PROCESS_H

#include <stdint.h>
#include <sys/types.h>
#include "core/config.h"
#include "core/sandbox.h"

/* The rank a launcher gave the process, derived from its variables as each launcher defines it
 * (doc/python.md#ranks): RANK is -1 when they do not give it (local_rank may still be known). */
struct ms_rank {
	const char *source;                           /* "torchrun", "lightning", "openmpi", ...; NULL: no launcher */
	long rank, local_rank, world_size, node_rank; /* -1 when not known */
	long restart; /* torchrun's TORCHELASTIC_RESTART_COUNT: which attempt of the job this is; -1 when not set */
	/* the launcher started this process with it: not inherited from a tracked parent that had the
	 * same rank (a worker, a helper) */
	int own;
};

struct ms_process {
	pid_t pid, ppid, root_pid;
	int is_child;          /* forked or exec'd child of a tracked process */
	int forked;            /* made by fork, not exec */
	int own_output;        /* a child writing its own MEMSHIM_OUTPUT as is, without ".<pid>" */
	int leaves_raw;        /* leaves by its own exit system call, past every exit handler (Go); MS_LIVE_RAW_* */
	uintptr_t main_thread; /* pthread_self() of the thread whose id is the pid: told without a system call */
	double start_monotonic;
	double start_unix;
	char *const *argv; /* the program's arguments as the constructor got them, or NULL */
	struct ms_rank rank;
	/* Where this process writes, placeholders not yet expanded: MEMSHIM_OUTPUT (ms_cfg.output),
	 * or the run's root's file for an exec'd child, in MEMSHIM_CHILDREN_DIR for a child that
	 * writes its parent's name, in $TMPDIR when its directory could not take it
	 * (output/identity.c).  ms_cfg keeps the user's setting. */
	char output[MS_PATH_MAX];
};

extern struct ms_process ms_proc;

/* Non-zero once the library decided to track this process (constructor ran, not disabled). */
extern int ms_active;
/* Zero stops all counting (disabled, secure mode, a sanitizer owns malloc, an unfollowed child). */
extern int ms_counting;

/* Non-zero when the calling process is the one the library tracks (not a vfork child). */
int ms_is_tracked_process(void);

/* Seconds on CLOCK_MONOTONIC, and since the process (or forked child) started tracking. */
double ms_now(void);
double ms_elapsed(void);

/* Starts the clock and records pid and parent (constructor). */
void ms_process_start(void);
/* The process's high-water RSS in bytes: getrusage's when above the one it started with, else
 * /proc/self/status's VmHWM (getrusage keeps a high-water across exec: a 30 MB child of a 400 MB
 * Python said 420 MB).  -1 in a sandbox (not read). */
int64_t ms_process_rss_peak(void);
/* The arguments the C library passed the constructor (ARGC, ARGV, ENVP), kept when they are laid
 * out as the kernel starts a process (the environment right after the arguments' NULL): reading
 * them costs nothing, /proc/self/cmdline an open of procfs. */
void ms_process_args(int argc, char *const *argv, char *const *envp);
/* The program's arguments as /proc/self/cmdline has them (each ending in NUL) into BUF of SIZE
 * bytes: from those the constructor got when kept, else from that file (an open of procfs).
 * Returns the length; *TRUNCATED when they did not all fit. */
size_t ms_process_cmdline(char *buf, size_t size, int *truncated);
/* Exec'd children inherit the identity of the first tracked process of the run and where it
 * writes: from the lineage record of the nearest process above them that left one
 * (core/lineage.h), never from the environment.  Sets ms_proc.output from ms_cfg.output or the
 * root's file. */
void ms_process_identify(void);
/* Whether a process above this one (or this pid before an exec in place) left a lineage record:
 * then this process is not the first of its run.  Looked up once. */
int ms_process_lineage_found(void);
/* Where this process writes from now on (at start: output/identity.c's fallback directory); call
 * ms_process_export_output after it so exec'd children follow. */
void ms_process_set_output(const char *path);
/* Tells exec'd children where this process writes (after its output changed). */
void ms_process_export_output(void);
/* The Python process that speaks about targets, as a process above this one recorded it (0:
 * none); ms_process_claim_py_root makes it this one, for the processes it execs. */
pid_t ms_process_py_root(void);
void ms_process_claim_py_root(void);
/* End of start: writes this process's lineage record when it has facts of its own to hand on
 * (from then on each change is written at once; one warning when it cannot be).  Unpublish
 * removes it (exit, a fatal signal; never a forked child's). */
void ms_process_publish(void);
void ms_process_unpublish(void);
/* The rank the launchers' variables give, read through GET (ms_setting_text, or a test's table). */
void ms_rank_detect(struct ms_rank *r, ms_getenv_fn get);
/* A forked child that goes on tracking: its own clock, pid and parent. */
void ms_process_forked(void);

#endif
