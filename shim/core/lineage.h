/* Lineage records: what a tracked process hands the processes it execs (the run's root, where the
 * run writes, the rank it held, which process speaks about Python targets) without touching the
 * environment, which the program would see (os.environ, env, /proc/self/environ, every child's
 * envp) and which a child built from scratch (env -i, subprocess.run(env={...}), Go's exec) would
 * not pass on.
 *
 * A process that has such facts of its own writes them into a small file keyed by its pid and its
 * start time (the 22nd field of /proc/PID/stat, which an exec in place keeps and a recycled pid
 * never has) in a directory of the user's own, mode 0700, found without the environment:
 * /dev/shm/memshim-<uid>/<pid>.<start>.lineage.  A process at start takes the record of the
 * nearest process above it that left one: itself before an exec in place, then its parent, its
 * parent's parent, ... (/proc/PID/stat), each checked against its start time.  One listing of the
 * directory first: with no record there the walk is not made at all, and it stops at the first
 * process older than every record (a parent starts before its children).  Records are removed at
 * exit; one left by a killed process is never taken (its start time is no living process's) and
 * is removed by the next walk it made longer.  Only system calls: no allocation, no stdio. */
#ifndef MS_LINEAGE_H
#define MS_LINEAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "core/config.h"

#define MS_LINEAGE_SUFFIX ".lineage"
#define MS_LINEAGE_MAGIC UINT64_C(0x31454741454e494c) /* "LINEAGE1" in the file's first bytes */
#define MS_LINEAGE_RANK 96

/* What a process hands on: what it inherited, changed where it has facts of its own. */
struct ms_lineage {
	pid_t root_pid;     /* the run's first tracked process */
	pid_t output_pid;   /* the process that writes OUTPUT as it is (the others add ".<pid>") */
	pid_t py_root_pid;  /* the Python process that speaks about targets; 0: none */
	char output[MS_PATH_MAX];         /* OUTPUT_PID's file, placeholders not expanded */
	char output_setting[MS_PATH_MAX]; /* the MEMSHIM_OUTPUT value it saw ("" when unset) */
	char rank_held[MS_LINEAGE_RANK];  /* "torchrun/1/0": the launcher's rank held; "" none */
};

/* The file: this header, then OUTPUT, OUTPUT_SETTING and RANK_HELD, each ending in NUL, nothing
 * after them.  Readers are processes of the same build on the same host. */
struct ms_lineage_header {
	uint64_t magic;
	uint32_t size;      /* the whole file */
	int32_t pid;        /* the writer, as in the file's name */
	uint64_t start;     /* its start time, as in the file's name */
	int32_t root_pid, output_pid, py_root_pid, reserved;
};

/* Fills *L from the record of the nearest process that left one: this pid (before an exec in
 * place), then its ancestors.  Returns 1 when one was found, else 0 (*L untouched). */
int ms_lineage_find(struct ms_lineage *l);
/* Writes *L as this process's record (replacing the one it left before an exec in place).
 * Returns 0, or an errno value (nothing is left behind). */
int ms_lineage_publish(const struct ms_lineage *l);
/* Removes the record this process wrote (never one a forked child inherited the name of); safe in
 * a signal handler. */
void ms_lineage_remove(void);
/* A forked child: its own start time is not its parent's. */
void ms_lineage_forked(void);

/* The directory the records are in (/dev/shm/memshim-<uid>). */
const char *ms_lineage_dir(void);
/* The parent pid and start time in the text of a /proc/PID/stat of N bytes (the command's name may
 * hold spaces and parentheses): 0, or -1 when it is not such a line. */
int ms_lineage_parse_stat(const char *text, size_t n, long *ppid, uint64_t *start);

#endif
