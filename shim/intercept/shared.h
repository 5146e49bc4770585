/* Shared memory segments (shared.c): which MAP_SHARED mappings are memory rather than a file's page
 * cache, what object each maps (its identity, the same in every process that maps it), and the
 * table of the segments this process maps, which mmap.c keeps under its mapping lock and the report
 * copies without it. */
#ifndef MS_SHARED_H
#define MS_SHARED_H

#include <stdint.h>
#include "intercept/hooks.h"

/* What a shared mapping maps, as far as it is known before the mapping is made. */
struct ms_shared_id {
	int kind;              /* enum ms_shared_kind; MS_SHARED_NONE: not memory, not counted */
	uint32_t major, minor; /* st_dev of the object, as /proc/PID/maps shows it */
	uint64_t ino;
	int known; /* dev and ino are read (else after the mapping, from /proc/self/maps) */
	char name[MS_SHARED_NAME];
};

/* The mapping that MAP_SHARED FLAGS of FD (-1 with MAP_ANONYMOUS) makes: fills ID and returns its
 * kind.  Regular files on disk, devices and sockets are MS_SHARED_NONE (page cache or device
 * memory); tmpfs, hugetlbfs and ramfs files (memfd, /dev/shm), /dev/zero and anonymous shared
 * memory are memory.  A few system calls (fstatfs, fstat, readlink), no lock, no allocation. */
int ms_shared_classify(int flags, int fd, struct ms_shared_id *id);
/* The device and inode of the mapping at ADDR, from /proc/self/maps (anonymous shared memory and
 * SysV segments, whose object has no descriptor); 0, or -1 when not found. */
int ms_shared_identify(uintptr_t addr, struct ms_shared_id *id);

/* The segment table, under the mapping lock.  A segment's tag (1 + its slot) is the tag of the
 * ranges that map it; 0: the table had no room (counted all the same, listed in "dropped"). */
uint32_t ms_shared_segment(const struct ms_shared_id *id);
/* BYTES more (or fewer) of segment TAG are mapped; at 0 it is retired (listed, its slot reusable). */
void ms_shared_mapped(uint32_t tag, int64_t bytes);
/* Every segment's resident bytes start again from 0 (a full read adds them back). */
void ms_shared_resident_clear(void);
/* BYTES more (or fewer) of segment TAG are resident; its peak follows. */
void ms_shared_resident_add(uint32_t tag, int64_t bytes);
/* A forked child: its own history starts (peaks at the live values, retired segments gone). */
void ms_shared_fork_child(void);

#endif
