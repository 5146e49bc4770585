/* The metrics file (doc/metrics-format.md): its one writer, the file's atomic replacement and the
 * writer's lock across fork; the JSON is output/document.c's, the path output/identity.c's. */
#ifndef MS_REPORT_H
#define MS_REPORT_H

#include <stddef.h>

#define MS_HELPER_PEAK ((long long)16 << 20) /* memshim-format's MF_MINOR_PEAK */

/* Writes the metrics file.  REASON: exit, _exit, snapshot, signal; SIG only for signal.
 * Returns 0, or -1 after one warning naming the path.  The last file of a helper goes elsewhere:
 * a child that writes its parent's name with ".<pid>" and began no stage of its own, used no GPU,
 * is no rank of its own, wrote no snapshot and peaked under MS_HELPER_PEAK of CPU memory (a forked
 * one: added that much, or under 5% of what it inherited) writes it into MEMSHIM_RUN_DIR (memshim
 * run's directory of the run, which it reads and removes), else nowhere: a shell's subshells and
 * the readlink and uname a launcher runs leave nothing in the user's directory. */
int ms_report_write(const char *reason, int sig, int complete);

/* The metrics so far as the file's JSON ("reason": "live", open stages as they stand) into BUF,
 * NUL-terminated when SIZE > 0; returns the whole length (more than SIZE - 1: it was cut).  BRIEF:
 * without the timeline, call sites and labelled calls. */
long ms_report_to_buffer(char *buf, size_t size, int brief);

/* A snapshot from wherever memory moved: gives up at once when another file is being written or
 * the final file was, and reads the engine as a handler does.  0, or -1 (nothing written). */
int ms_report_try_snapshot(void);

/* From a signal handler: a snapshot marked with SIG, never waiting long for locks. */
void ms_report_signal(int sig);

/* Non-zero once the final file (at exit or _exit) was written. */
int ms_report_finished(void);
/* Fork: waits (at most ~100 ms) for a file being written, so none is written across the fork. */
void ms_report_fork_prepare(void);
void ms_report_fork_parent(void);
/* A forked child that goes on TRACKING writes its own file from scratch. */
void ms_report_fork_child(int tracking);
/* At a stage boundary: notes that this process (a forked child: since its fork) began a stage of
 * its own, which makes it more than a helper (see ms_report_write). */
void ms_report_boundary(int stage, int end);

#endif
