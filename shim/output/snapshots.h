/* Evidence when a process dies: periodic snapshots (MEMSHIM_SNAPSHOT_INTERVAL) and a final
 * snapshot on fatal signals. */
#ifndef MS_SNAPSHOTS_H
#define MS_SNAPSHOTS_H

/* At start: covers the fatal signals (a last snapshot before the default action) and, when
 * configured, starts the snapshot thread. */
void ms_snapshots_init(void);

/* At a stage boundary: re-creates the thread in a forked child, outside any hook. */
void ms_snapshots_boundary(int stage, int end);

/* A forked child that goes on TRACKING: the thread did not survive the fork; it is re-created at
 * the next stage boundary. */
void ms_snapshots_fork_child(int tracking);

#endif
