/* Build-ids from note bytes: the notes as linkers lay them out (4- and 8-aligned segments), and
 * notes that run past their segment. */
#include <check.h>
#include <elf.h>
#include <string.h>
#include "suite.h"
#include "core/elfnote.h"

/* Appends one note (TYPE, NAME, DESC of N bytes) at AT in BUF, padded to ALIGN; the new end. */
static size_t put_note(unsigned char *buf, size_t at, size_t align, unsigned type, const char *name,
		       const unsigned char *desc, size_t n)
{
	Elf64_Nhdr nh = { (Elf64_Word)strlen(name) + 1, (Elf64_Word)n, type };
	memcpy(buf + at, &nh, sizeof nh);
	memcpy(buf + at + sizeof nh, name, nh.n_namesz);
	size_t d = (at + sizeof nh + nh.n_namesz + align - 1) & ~(align - 1);
	memcpy(buf + d, desc, n);
	return (d + n + align - 1) & ~(align - 1);
}

static const unsigned char id[20] = { 0xe4, 0x5e, 0x20, 0xa2, 0x63, 0xd8, 0xc5, 0xf5, 0xca, 0xbd,
				      0x47, 0x01, 0x49, 0x5e, 0x63, 0x37, 0x49, 0x49, 0x2d, 0xeb };

START_TEST(build_id_after_an_abi_tag)
{
	unsigned char buf[256] = { 0 }, tag[16] = { 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0 };
	size_t len = 0, end = put_note(buf, 0, 4, NT_GNU_ABI_TAG, "GNU", tag, sizeof tag);
	end = put_note(buf, end, 4, NT_GNU_BUILD_ID, "GNU", id, sizeof id);
	const unsigned char *got = ms_note_build_id(buf, end, 4, &len);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(len, sizeof id);
	ck_assert(!memcmp(got, id, sizeof id));
	char hex[64];
	ck_assert_uint_eq(ms_hex(got, len, hex, sizeof hex), 40);
	ck_assert_str_eq(hex, "e45e20a263d8c5f5cabd4701495e633749492deb");
}
END_TEST

START_TEST(build_id_in_an_eight_aligned_segment)
{
	unsigned char buf[256] = { 0 }, prop[16] = { 2, 0, 0, 0xc0, 4, 0, 0, 0, 3, 0, 0, 0 };
	size_t len = 0, end = put_note(buf, 0, 8, NT_GNU_PROPERTY_TYPE_0, "GNU", prop, 12); /* padded to 32 */
	end = put_note(buf, end, 8, NT_GNU_BUILD_ID, "GNU", id, 8);
	const unsigned char *got = ms_note_build_id(buf, end, 8, &len);
	ck_assert_ptr_eq(got, buf + 48); /* the second note at 32: its descriptor after 12 + 4 bytes */
	ck_assert_uint_eq(len, 8);
}
END_TEST

START_TEST(notes_past_the_segment_or_not_gnu_give_none)
{
	unsigned char buf[256] = { 0 };
	size_t len = 0, end = put_note(buf, 0, 4, NT_GNU_BUILD_ID, "GNU", id, sizeof id);
	ck_assert_ptr_null(ms_note_build_id(buf, end - 4, 4, &len)); /* descriptor cut */
	ck_assert_ptr_null(ms_note_build_id(buf, 11, 4, &len));      /* not even a header */
	Elf64_Nhdr huge = { 0xfffffff0u, 20, NT_GNU_BUILD_ID };
	memcpy(buf, &huge, sizeof huge);
	ck_assert_ptr_null(ms_note_build_id(buf, end, 4, &len));
	end = put_note(buf, 0, 4, NT_GNU_BUILD_ID, "Go", id, sizeof id);
	ck_assert_ptr_null(ms_note_build_id(buf, end, 4, &len));
}
END_TEST

START_TEST(hex_cuts_at_a_whole_byte)
{
	char hex[6];
	ck_assert_uint_eq(ms_hex(id, sizeof id, hex, sizeof hex), 4);
	ck_assert_str_eq(hex, "e45e");
	ck_assert_uint_eq(ms_hex(id, 0, hex, sizeof hex), 0);
	ck_assert_str_eq(hex, "");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("elfnote");
	TCase *tc = tcase_create("build_id");
	tcase_add_test(tc, build_id_after_an_abi_tag);
	tcase_add_test(tc, build_id_in_an_eight_aligned_segment);
	tcase_add_test(tc, notes_past_the_segment_or_not_gnu_give_none);
	tcase_add_test(tc, hex_cuts_at_a_whole_byte);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
