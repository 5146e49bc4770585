/* A sorted set of disjoint address ranges: the anonymous mappings the program made, so partial
 * munmap and mremap are counted right.  Each range carries a tag (what the caller keeps per
 * mapping: the shared memory segment it maps), kept by both pieces of a split and by a move, and a
 * count of pages (the caller's: its resident pages at the last read), 0 when added or moved, kept
 * by both pieces of a split (the caller reads them again).  Pure logic; the caller serialises
 * access. */
#ifndef MS_RANGES_H
#define MS_RANGES_H

#include <stddef.h>
#include <stdint.h>

struct ms_range {
	uintptr_t start, end; /* [start, end) */
	uint32_t tag;
	uint32_t pages;
};

struct ms_ranges {
	struct ms_range *v;
	size_t n, cap;
	/* Grows V to at least NEED entries; returns 0 or -1.  NULL: fixed capacity. */
	int (*grow)(struct ms_ranges *r, size_t need);
};

/* Adds [start, end), which must not overlap a tracked range; -1 when the table is full. */
int ms_ranges_add(struct ms_ranges *r, uintptr_t start, uintptr_t end);
/* The same with TAG (ms_ranges_add's ranges have tag 0). */
int ms_ranges_add_tagged(struct ms_ranges *r, uintptr_t start, uintptr_t end, uint32_t tag);

/* Index of the first range whose end is above ADDR (r->n: none): the ranges inside [start, end)
 * are those from ms_ranges_find(r, start) while v[i].start < end. */
size_t ms_ranges_find(const struct ms_ranges *r, uintptr_t addr);

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
