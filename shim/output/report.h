/* The metrics file: JSON assembled from the stage engine and counters (doc/metrics-format.md). */
#ifndef MS_REPORT_H
#define MS_REPORT_H

#include <stddef.h>

/* Captures argv (at start). */
void ms_report_init(void);

/* At start: falls back to $TMPDIR (or /tmp) when the output directory cannot take the file (one
 * warning); returns 1 when the output moved. */
int ms_report_check_output(void);

/* Writes the metrics file.  REASON: exit, _exit, snapshot, signal; SIG only for signal.
 * Returns 0, or -1 after one warning naming the path. */
int ms_report_write(const char *reason, int sig, int complete);

/* The metrics so far as the file's JSON ("reason": "live", open stages as they stand) into BUF,
 * NUL-terminated when SIZE > 0; returns the whole length (more than SIZE - 1: it was cut). */
long ms_report_to_buffer(char *buf, size_t size);

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

/* The output path of this process: placeholders expanded (output/outpath.c), ".<pid>" appended
 * for children that write a path inherited from their parent unless it names them already. */
void ms_report_path(char *out, size_t size);

#endif
