/* The live record of this process (layout in output/live_record.h): a small file mapped
 * MAP_SHARED and updated in place at stage boundaries and timeline points, so a process killed
 * with SIGKILL leaves its numbers up to the kill, and `memshim top` sees running processes. */
#ifndef MS_LIVE_H
#define MS_LIVE_H

/* At start: when MEMSHIM_LIVE is on, the record is made at the first stage other than init. */
void ms_live_init(void);

/* After a timeline point at T (output/snapshots.c's observer, after the snapshot policy): updates
 * the record, or creates it when the run is worth one.  Nothing while it is off. */
void ms_live_moved(double t);

/* After a stage boundary: creates the record at the first stage other than init, then updates it. */
void ms_live_boundary(int stage, int end);

/* A forked child: lets go of its parent's record; when TRACKING it gets its own later. */
void ms_live_fork_child(int tracking);

/* A fatal signal (default action) is ending the process: a last update if no other is in
 * progress, and the record marked with SIG.  Async-signal-safe. */
void ms_live_signal(int sig);

/* After the final metrics file (exit or _exit): removes the record. */
void ms_live_finish(void);

/* The program is entering a seccomp sandbox, or left the attempt (ms_proc.leaves_raw says which):
 * the record made now if it was due to be, its leaves_raw written, a full update. */
void ms_live_sandbox(void);
/* The sandboxed process ends: a last full update (no file is written, the record stays). */
void ms_live_sandbox_end(void);

#endif
