/* The process's memory cgroup, read (cgroup.c): what the kernel charges the whole job for and kills
 * it by (every process of the group, their page cache), v1 and v2. */
#ifndef MS_INTERCEPT_CGROUP_H
#define MS_INTERCEPT_CGROUP_H

#include <stdint.h>
#include "core/cgroup.h"
#include "core/counters.h"

#define MS_BOOT_ID_LEN 40 /* /proc/sys/kernel/random/boot_id: a 36-character UUID, NUL-terminated */

struct ms_cgroup {
	int version;             /* 1 or 2 */
	int per_reader;          /* v2 memory.peak of our own fd (Linux 6.12+): each stage's own peak */
	int64_t usage;           /* memory.current / memory.usage_in_bytes at the last read */
	int64_t peak;            /* the group's high-water (memory.peak / max_usage_in_bytes) */
	int64_t limit;           /* memory.max / limit_in_bytes; MS_CGROUP_NONE: no limit */
	int64_t oom_kills;       /* memory.events / oom_control oom_kill; MS_CGROUP_NONE: not stated */
	int64_t oom_kills_first; /* at this process's first read */
	char dir[MS_CGROUP_PATH];
	/* which group on which boot, found with it: a reader elsewhere or after a reboot must not read
	 * another group's files as this one's (boot_id "": unknown; ino 0: unknown) */
	char boot_id[MS_BOOT_ID_LEN];
	uint64_t dev, ino;
};

/* Reads the group now (MS_CGROUP's live value and window peak; the rest of the state on boundaries
 * and reports), the first time finding it.  From the read components' refresh (intercept/mmap.c),
 * inside its CPU-time budget: raw system calls, errno kept.  0 when nothing was read. */
int ms_cgroup_read(enum ms_refresh_reason why);
/* A forked child: the read lock another thread of the parent held is free. */
void ms_cgroup_fork_child(void);
/* Closes the fds kept open for reading (a program out of descriptors: the slots for its file); the
 * number closed. */
int ms_cgroup_release_fds(void);

/* The state as last read, or NULL when this process has no memory cgroup or never read it. */
const struct ms_cgroup *ms_cgroup_state(void);

#endif
