/* Lineage records: what a tracked process hands the processes it execs (the run's root, where the
 * run writes, the rank it held, which process speaks about Python targets) without touching the
 * environment, which the program would see (os.environ, env, /proc/self/environ, every child's
 * envp) and which a child built from scratch (env -i, subprocess.run(env={...}), Go's exec) would
 * not pass on.
 *
 * A process that has such facts of its own writes them into a record in a directory of the
 * user's own, mode 0700, found without the environment: /dev/shm/memshim-lineage-<uid>/
 * <pid>.<written>.lineage, WRITTEN the time since boot (CLOCK_BOOTTIME, ns) when it wrote it.  The
 * record is a symbolic link whose target is the text (one system call to write, one to read, one
 * to remove; a regular file with the same text when it is too long for a link).  A process at
 * start takes the record of the nearest process above it that left one: itself before an exec in
 * place, then its parent, its parent's parent, ... (/proc/PID/stat), each only when the record
 * was written after that process started (the 22nd field of /proc/PID/stat, the same clock in
 * 10 ms ticks: an exec in place keeps it; a recycled pid's process started after every record of
 * the pid's earlier owner).  An empty directory is seen from its size (tmpfs: 40 bytes; checked to
 * be tmpfs) without being listed.  Records are removed at exit; one left by a killed process is
 * never taken and is removed by the next walk that found nothing.  Only system calls: no
 * allocation, no stdio. */
#ifndef MS_LINEAGE_H
#define MS_LINEAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "core/config.h"

#define MS_LINEAGE_SUFFIX ".lineage"
#define MS_LINEAGE_RANK 96
/* The record's text: this, then "<root_pid> <output_pid> <py_root_pid> ", then the output, the
 * setting and the rank held, each as "<length>:<bytes>"; nothing after them. */
#define MS_LINEAGE_TAG "LINEAGE1 "
/* The longest text: the tag, three numbers and their spaces (12 bytes each), three lengths and
 * their colons (6 each), the strings. */
#define MS_LINEAGE_TEXT_MAX (sizeof MS_LINEAGE_TAG + (size_t)54 + 2 * (size_t)MS_PATH_MAX + MS_LINEAGE_RANK)

/* What a process hands on: what it inherited, changed where it has facts of its own. */
struct ms_lineage {
	pid_t root_pid;                   /* the run's first tracked process */
	pid_t output_pid;                 /* the process that writes OUTPUT as it is (the others add ".<pid>") */
	pid_t py_root_pid;                /* the Python process that speaks about targets; 0: none */
	char output[MS_PATH_MAX];         /* OUTPUT_PID's file, placeholders not expanded */
	char output_setting[MS_PATH_MAX]; /* the MEMSHIM_OUTPUT value it saw ("" when unset) */
	char rank_held[MS_LINEAGE_RANK];  /* "torchrun/1/0": the launcher's rank held; "" none */
};

/* Fills *L from the record of the nearest process that left one: this pid (before an exec in
 * place), then its ancestors.  Returns 1 when one was found, else 0 (*L untouched). */
int ms_lineage_find(struct ms_lineage *l);
/* Writes *L as this process's record (replacing the one it left before an exec in place).
 * Returns 0, or an errno value (nothing is left behind). */
int ms_lineage_publish(const struct ms_lineage *l);
/* Removes the record this process wrote or took over (never one a forked child inherited the name
 * of); safe in a signal handler. */
void ms_lineage_remove(void);

/* The directory the records are in (/dev/shm/memshim-lineage-<uid>). */
const char *ms_lineage_dir(void);
/* *L as a record's text into OUT of SIZE bytes (at least MS_LINEAGE_TEXT_MAX): its length. */
size_t ms_lineage_encode(const struct ms_lineage *l, char *out, size_t size);
/* The record's text of N bytes into *L: 0, or -1 when it is not one. */
int ms_lineage_decode(const char *text, size_t n, struct ms_lineage *l);
/* The parent pid and start time in the text of a /proc/PID/stat of N bytes (the command's name may
 * hold spaces and parentheses): 0, or -1 when it is not such a line. */
int ms_lineage_parse_stat(const char *text, size_t n, long *ppid, uint64_t *start);

#endif
