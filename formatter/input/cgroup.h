/* The memory cgroup in what memshim-format reads (cgroup.c): a live record's in its metrics document
 * (input/live.c calls these), and the group read again after its process is gone (input/load.c). */
#ifndef MF_INPUT_CGROUP_H
#define MF_INPUT_CGROUP_H

#include "input/live.h"

/* A stage's "cgroup" into O (nothing when the record read no cgroup). */
void mf_live_cgroup_stage(json_t *o, const struct ms_live_record *r, const struct ms_live_span *sp);
/* process_mem_cgroup_peak and _limit into the flat metrics M. */
void mf_live_cgroup_flat(json_t *m, const struct ms_live_record *r);
/* The process's "cgroup" into P; PEAK_READ: the highest usage the process read. */
void mf_live_cgroup_process(json_t *p, const struct ms_live_record *r, int64_t peak_read);
/* ROOT, an incomplete document of a process of this host that is gone (a snapshot, a record): its
 * cgroup's files read again when they are there and the group is the one it recorded (this boot's
 * id, the directory's device and inode), "oom_kills_after", "oom_killed" and the group's peak set
 * from them (process.cgroup and process_mem_cgroup_peak); else ROOT stays as it is. */
void mf_cgroup_after_exit(json_t *root);

#endif
