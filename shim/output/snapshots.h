/* Evidence when a process dies: periodic snapshots (MEMSHIM_SNAPSHOT_INTERVAL) and a final
 * snapshot on fatal signals. */
#ifndef MS_SNAPSHOTS_H
#define MS_SNAPSHOTS_H

#include <signal.h>

/* Installs the fatal-signal handlers and, when configured, starts the snapshot thread. */
void ms_snapshots_start(void);

/* At a stage boundary: re-creates the thread in a forked child, outside any hook. */
void ms_snapshots_at_boundary(void);

/* A forked child: the thread did not survive the fork; it is re-created at the next stage boundary. */
void ms_snapshots_after_fork_child(void);

/* Fatal signals whose default disposition our handler covers (it writes a last snapshot). */
int ms_signal_managed(int sig);

/* Whether SA is our handler, and what the program would see in its place. */
int ms_signal_is_ours(const struct sigaction *sa);
void ms_signal_view(int sig, struct sigaction *out);
void (*ms_signal_handler(void))(int, siginfo_t *, void *);

/* After the program changed SIG's disposition: a default one is covered again. */
void ms_signal_settled(int sig);

#endif
