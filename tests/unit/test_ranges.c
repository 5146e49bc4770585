/* The mapping range table: partial unmaps, splits, overlap, a full table. */
#include <check.h>
#include "suite.h"
#include "core/ranges.h"

static struct ms_range storage[8];

static struct ms_ranges fixed(size_t cap)
{
	struct ms_ranges r = { storage, 0, cap, NULL };
	return r;
}

START_TEST(partial_unmaps_and_splits)
{
	struct ms_ranges r = fixed(8);
	uint64_t lost = 0;
	ck_assert_int_eq(ms_ranges_add(&r, 0x10000, 0x20000), 0);
	ck_assert_int_eq(ms_ranges_add(&r, 0x40000, 0x50000), 0);
	ck_assert_uint_eq(ms_ranges_remove(&r, 0x10000, 0x11000, &lost), 0x1000); /* head */
	ck_assert_uint_eq(ms_ranges_remove(&r, 0x1f000, 0x30000, &lost), 0x1000); /* tail */
	ck_assert_uint_eq(ms_ranges_remove(&r, 0x14000, 0x15000, &lost), 0x1000); /* middle */
	ck_assert_uint_eq(r.n, 3);
	ck_assert_uint_eq(ms_ranges_overlap(&r, 0, ~(uintptr_t)0), 0xd000 + 0x10000);
	ck_assert_uint_eq(ms_ranges_remove(&r, 0x0, 0x100000, &lost), 0xd000 + 0x10000); /* spans all */
	ck_assert_uint_eq(r.n, 0);
	ck_assert_uint_eq(lost, 0);
}
END_TEST

START_TEST(untracked_addresses_remove_nothing)
{
	struct ms_ranges r = fixed(8);
	uint64_t lost = 0;
	ms_ranges_add(&r, 0x10000, 0x20000);
	ck_assert_uint_eq(ms_ranges_remove(&r, 0x30000, 0x40000, &lost), 0);
	ck_assert_uint_eq(ms_ranges_overlap(&r, 0x8000, 0x12000), 0x2000);
}
END_TEST

START_TEST(full_table_refuses_and_split_drops_the_tail)
{
	struct ms_ranges r = fixed(2);
	uint64_t lost = 0;
	ck_assert_int_eq(ms_ranges_add(&r, 0x10000, 0x20000), 0);
	ck_assert_int_eq(ms_ranges_add(&r, 0x30000, 0x40000), 0);
	ck_assert_int_eq(ms_ranges_add(&r, 0x50000, 0x60000), -1);
	ck_assert_uint_eq(ms_ranges_remove(&r, 0x14000, 0x15000, &lost), 0x1000 + 0xb000);
	ck_assert_uint_eq(lost, 0xb000);
	ck_assert_uint_eq(ms_ranges_overlap(&r, 0, ~(uintptr_t)0), 0x4000 + 0x10000);
}
END_TEST

START_TEST(many_ranges_stay_sorted)
{
	static struct ms_range big[4096];
	struct ms_ranges r = { big, 0, 4096, NULL };
	uint64_t lost = 0;
	for (uintptr_t i = 0; i < 4000; i++)
		ck_assert_int_eq(ms_ranges_add(&r, ((i * 7919) % 4000) * 0x2000, ((i * 7919) % 4000) * 0x2000 + 0x1000), 0);
	for (size_t i = 1; i < r.n; i++)
		ck_assert(r.v[i - 1].end <= r.v[i].start);
	ck_assert_uint_eq(ms_ranges_remove(&r, 0, 4000 * 0x2000, &lost), 4000 * 0x1000);
}
END_TEST

START_TEST(moves_only_the_tracked_pieces)
{
	static struct ms_range a_store[8], b_store[8];
	struct ms_ranges a = { a_store, 0, 8, NULL }, b = { b_store, 0, 8, NULL };
	uint64_t lost = 0;
	ms_ranges_add(&a, 0x10000, 0x20000);
	ms_ranges_add(&a, 0x30000, 0x40000);
	ms_ranges_add(&b, 0x50000, 0x60000);
	/* from the middle of the first range to the middle of the second: two pieces, a gap between */
	ck_assert_uint_eq(ms_ranges_move(&a, &b, 0x18000, 0x34000, &lost), 0x8000 + 0x4000);
	ck_assert_uint_eq(ms_ranges_overlap(&a, 0, ~(uintptr_t)0), 0x8000 + 0xc000);
	ck_assert_uint_eq(ms_ranges_overlap(&b, 0, ~(uintptr_t)0), 0x10000 + 0xc000);
	ck_assert_uint_eq(ms_ranges_overlap(&b, 0x20000, 0x30000), 0); /* the gap stays untracked */
	ck_assert_uint_eq(ms_ranges_move(&b, &a, 0x18000, 0x34000, &lost), 0xc000); /* and back */
	ck_assert_uint_eq(ms_ranges_overlap(&a, 0, ~(uintptr_t)0), 0x20000);
	ck_assert_uint_eq(ms_ranges_move(&a, &b, 0x70000, 0x80000, &lost), 0);
	ck_assert_uint_eq(lost, 0);
}
END_TEST

START_TEST(move_into_a_full_table_counts_the_loss)
{
	static struct ms_range a_store[4], b_store[1];
	struct ms_ranges a = { a_store, 0, 4, NULL }, b = { b_store, 0, 1, NULL };
	uint64_t lost = 0;
	ms_ranges_add(&a, 0x10000, 0x20000);
	ms_ranges_add(&b, 0x50000, 0x60000);
	ck_assert_uint_eq(ms_ranges_move(&a, &b, 0x10000, 0x20000, &lost), 0);
	ck_assert_uint_eq(lost, 0x10000);
	ck_assert_uint_eq(a.n, 0);
}
END_TEST

/* A range's tag (the shared segment it maps) stays with both pieces of a split and with a move. */
START_TEST(tags_follow_splits_and_moves)
{
	static struct ms_range a_store[8], b_store[8];
	struct ms_ranges a = { a_store, 0, 8, NULL }, b = { b_store, 0, 8, NULL };
	uint64_t lost = 0;
	ck_assert_int_eq(ms_ranges_add_tagged(&a, 0x10000, 0x20000, 7), 0);
	ck_assert_int_eq(ms_ranges_add(&a, 0x30000, 0x40000), 0);
	ms_ranges_remove(&a, 0x14000, 0x15000, &lost); /* a hole: two pieces of segment 7 */
	ck_assert_uint_eq(a.n, 3);
	ck_assert_uint_eq(a.v[0].tag, 7);
	ck_assert_uint_eq(a.v[1].tag, 7);
	ck_assert_uint_eq(a.v[2].tag, 0);
	ck_assert_uint_eq(ms_ranges_find(&a, 0x14800), 1);
	ck_assert_uint_eq(ms_ranges_find(&a, 0x50000), 3);
	ck_assert_uint_eq(ms_ranges_move(&a, &b, 0x18000, 0x20000, &lost), 0x8000);
	ck_assert_uint_eq(b.n, 1);
	ck_assert_uint_eq(b.v[0].tag, 7);
	ck_assert_uint_eq(lost, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ranges");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, partial_unmaps_and_splits);
	tcase_add_test(tc, untracked_addresses_remove_nothing);
	tcase_add_test(tc, full_table_refuses_and_split_drops_the_tail);
	tcase_add_test(tc, many_ranges_stay_sorted);
	tcase_add_test(tc, moves_only_the_tracked_pieces);
	tcase_add_test(tc, move_into_a_full_table_counts_the_loss);
	tcase_add_test(tc, tags_follow_splits_and_moves);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
