/* A sorted set of disjoint address ranges: the anonymous mappings the program made, so partial
 * munmap and mremap are counted right.  Pure logic; the caller serialises access. */
#ifndef MS_RANGES_H
#define MS_RANGES_H

#include <stddef.h>
#include <stdint.h>

struct ms_range {
	uintptr_t start, end; /* [start, end) */
};

struct ms_ranges {
	struct ms_range *v;
	size_t n, cap;
	/* Grows V to at least NEED entries; returns 0 or -1.  NULL: fixed capacity. */
	int (*grow)(struct ms_ranges *r, size_t need);
};

/* Adds [start, end), which must not overlap a tracked range; -1 when the table is full. */
int ms_ranges_add(struct ms_ranges *r, uintptr_t start, uintptr_t end);

/* Removes whatever is tracked inside [start, end), splitting ranges as needed; returns the
 * number of bytes removed.  *UNTRACKED receives bytes dropped because a split found no room. */
uint64_t ms_ranges_remove(struct ms_ranges *r, uintptr_t start, uintptr_t end, uint64_t *untracked);

/* Moves whatever FROM tracks inside [start, end) into TO; returns the bytes moved.  Bytes TO has no
 * room for leave FROM all the same and are added to *UNTRACKED. */
uint64_t ms_ranges_move(struct ms_ranges *from, struct ms_ranges *to, uintptr_t start, uintptr_t end,
			uint64_t *untracked);

/* Bytes tracked inside [start, end). */
uint64_t ms_ranges_overlap(const struct ms_ranges *r, uintptr_t start, uintptr_t end);

#endif
