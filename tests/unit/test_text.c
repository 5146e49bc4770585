/* core/text.h: the frame texts it builds are byte for byte what ms_format gives for the same
 * "%s", "%lx" and "%u", truncation and returned length included. */
#include <check.h>
#include <stdint.h>
#include <string.h>
#include "suite.h"
#include "core/ms.h"
#include "core/text.h"

static const uint64_t numbers[] = { 0,          1,          9,           10,
				    15,         16,         99,          100,
				    255,        4095,       65535,       123456789,
				    0xdeadbeef, 0xffffffff, 0x100000000, 0x7fffffffffffffff,
				    UINT64_MAX };

/* "NAME+0xV (OBJ)" both ways into SIZE bytes: the same bytes and length. */
static void same_as_format(const char *name, uint64_t v, const char *obj, size_t size)
{
	char a[96], b[96];
	memset(a, 'x', sizeof a);
	memset(b, 'x', sizeof b);
	size_t n = ms_format(a, size, "%s+0x%lx (%s)", name, (unsigned long)v, obj);
	struct ms_text t = ms_text_start(b, size);
	ms_text_str(&t, name);
	ms_text_put(&t, "+0x", 3);
	ms_text_num(&t, v, 4);
	ms_text_put(&t, " (", 2);
	ms_text_str(&t, obj);
	ms_text_put(&t, ")", 1);
	size_t m = ms_text_end(&t);
	ck_assert_uint_eq(n, m);
	ck_assert_msg(memcmp(a, b, sizeof a) == 0, "size %zu, value %llx: \"%s\" vs \"%s\"", size,
		      (unsigned long long)v, size ? a : "", size ? b : "");
}

START_TEST(hex_frames_match_ms_format)
{
	for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
		for (size_t size = 0; size <= 64; size++)
			same_as_format("PyObject_Malloc", numbers[i], "python3.11", size);
	same_as_format("", 0, "", 1);
	same_as_format("", 0, "", 8);
}
END_TEST

START_TEST(decimal_lines_match_ms_format)
{
	for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++) {
		unsigned v = (unsigned)numbers[i];
		for (size_t size = 0; size <= 48; size++) {
			char a[64], b[64];
			memset(a, 'x', sizeof a);
			memset(b, 'x', sizeof b);
			size_t n = ms_format(a, size, "%s (%s:%u)", "run", "x.py", v);
			struct ms_text t = ms_text_start(b, size);
			ms_text_str(&t, "run");
			ms_text_put(&t, " (", 2);
			ms_text_str(&t, "x.py");
			ms_text_put(&t, ":", 1);
			ms_text_num(&t, v, 0);
			ms_text_put(&t, ")", 1);
			ck_assert_uint_eq(n, ms_text_end(&t));
			ck_assert_msg(memcmp(a, b, sizeof a) == 0, "size %zu, value %u", size, v);
		}
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("text");
	tcase_add_test(tc, hex_frames_match_ms_format);
	tcase_add_test(tc, decimal_lines_match_ms_format);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
