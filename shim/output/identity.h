/* Who writes the metrics file and where: the program's arguments, the output path's placeholders
 * (%p the pid, %r/%l the rank core/process.c derived, %h the host) and the directory checked at
 * start.  The rank itself is core/process.c's: every layer reads it from ms_proc. */
#ifndef MS_IDENTITY_H
#define MS_IDENTITY_H

#include <stddef.h>

/* Captures the program's arguments (at start; a forked child keeps its parent's). */
void ms_identity_init(void);

/* The arguments, each ending in NUL: *LEN bytes at the returned address; *TRUNCATED when they did
 * not all fit.  As the process set them last: a program that overwrote them to retitle itself
 * (PostgreSQL's children: "postgres: checkpointer") is read again from /proc/self/cmdline.  The
 * one writer at a time calls it (it may refresh the copy). */
const char *ms_identity_argv(size_t *len, int *truncated);

/* The main thread's name (prctl PR_SET_NAME, /proc/PID/comm) into OUT when the program renamed
 * itself since it started, else NULL (also when asked from another thread). */
const char *ms_identity_comm(char out[16]);

/* TMPL (MEMSHIM_OUTPUT) into OUT of SIZE bytes: %p the pid, %r the rank and %l the local rank
 * (struct ms_rank; "pid<N>" where the launcher gave none), %h the host name, %% a '%'.  Returns 1
 * when the name is this process's alone (%p; %r or %l of a rank of its own, or "pid<N>"), so a
 * child needs no ".<pid>" after it.  Async-signal-safe. */
int ms_identity_expand(char *out, size_t size, const char *tmpl);

/* The output path of this process: placeholders expanded, ".<pid>" appended for children that
 * write a path inherited from their parent unless it names them already; returns 1 when it
 * appended it (the child writes its parent's name). */
int ms_identity_output_path(char *out, size_t size);

/* At start: falls back to $TMPDIR (or /tmp) when the output directory cannot take the file or the
 * output is a directory (one warning; ".<pid>" added where that name is taken already); returns 1
 * when the output moved. */
int ms_identity_check_output(void);

/* When writing the file failed with errno E where the start found nothing wrong (/proc/x.json for
 * root, a directory removed or made read-only since): the same fallback as at start, with one
 * warning (a child's in MEMSHIM_LOG=debug only); returns 1 when the output moved. */
int ms_identity_fall_back(int e);

#endif
