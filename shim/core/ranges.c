/* Sorted disjoint ranges (see ranges.h).  Binary search keeps lookups cheap for many mappings. */
#include <string.h>
#include "core/ranges.h"

/* Index of the first range whose end is above ADDR. */
static size_t first_after(const struct ms_ranges *r, uintptr_t addr)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t ms_ranges_find(const struct ms_ranges *r, uintptr_t addr)
{
	return first_after(r, addr);
}

static int reserve(struct ms_ranges *r, size_t need)
{
	if (need <= r->cap)
		return 0;
	return r->grow ? r->grow(r, need) : -1;
}

static int insert_at(struct ms_ranges *r, size_t i, uintptr_t start, uintptr_t end, uint32_t tag, uint32_t pages)
{
	if (reserve(r, r->n + 1) < 0)
		return -1;
	memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
	r->v[i].start = start;
	r->v[i].end = end;
	r->v[i].tag = tag;
	r->v[i].pages = pages;
	r->n++;
	return 0;
}

int ms_ranges_add_tagged(struct ms_ranges *r, uintptr_t start, uintptr_t end, uint32_t tag)
{
	if (start >= end)
		return 0;
	return insert_at(r, first_after(r, start), start, end, tag, 0);
}

int ms_ranges_add(struct ms_ranges *r, uintptr_t start, uintptr_t end)
{
	return ms_ranges_add_tagged(r, start, end, 0);
}

uint64_t ms_ranges_overlap(const struct ms_ranges *r, uintptr_t start, uintptr_t end)
{
	uint64_t bytes = 0;
	for (size_t i = first_after(r, start); i < r->n && r->v[i].start < end; i++) {
		uintptr_t b = r->v[i].start > start ? r->v[i].start : start;
		uintptr_t e = r->v[i].end < end ? r->v[i].end : end;
		bytes += e - b;
	}
	return bytes;
}

uint64_t ms_ranges_remove(struct ms_ranges *r, uintptr_t start, uintptr_t end, uint64_t *untracked)
{
	uint64_t removed = 0;
	size_t i = first_after(r, start);
	while (i < r->n && r->v[i].start < end) {
		struct ms_range *g = &r->v[i];
		uintptr_t b = g->start > start ? g->start : start;
		uintptr_t e = g->end < end ? g->end : end;
		removed += e - b;
		if (g->start < b && g->end > e) { /* a hole in the middle: keep both sides */
			uintptr_t tail_end = g->end;
			g->end = b;
			if (insert_at(r, i + 1, e, tail_end, g->tag, g->pages) < 0)
				*untracked += tail_end - e, removed += tail_end - e;
			return removed;
		}
		if (g->start < b) {
			g->end = b;
			i++;
		} else if (g->end > e) {
			g->start = e;
			i++;
		} else {
			memmove(g, g + 1, (r->n - i - 1) * sizeof *g);
			r->n--;
		}
	}
	return removed;
}

uint64_t ms_ranges_move(struct ms_ranges *from, struct ms_ranges *to, uintptr_t start, uintptr_t end,
			uint64_t *untracked)
{
	uint64_t moved = 0;
	for (size_t i = first_after(from, start); i < from->n && from->v[i].start < end; i = first_after(from, start)) {
		uintptr_t b = from->v[i].start > start ? from->v[i].start : start;
		uintptr_t e = from->v[i].end < end ? from->v[i].end : end;
		uint32_t tag = from->v[i].tag;
		ms_ranges_remove(from, b, e, untracked);
		if (ms_ranges_add_tagged(to, b, e, tag) == 0)
			moved += e - b;
		else
			*untracked += e - b;
		start = e;
	}
	return moved;
}
