/* The streaming JSON writer: its output parses, escapes are right, numbers keep their type. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "suite.h"
#include "core/json.h"

static struct ms_json w;
static char out[1 << 20];

static json_t *finish_and_parse(FILE *tmp)
{
	ck_assert_int_eq(ms_json_finish(&w), 0);
	rewind(tmp);
	size_t n = fread(out, 1, sizeof out - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	json_error_t err;
	json_t *root = json_loads(out, JSON_ALLOW_NUL, &err);
	ck_assert_msg(root != NULL, "parse error: %s in %s", err.text, out);
	return root;
}

START_TEST(values_round_trip)
{
	FILE *tmp = tmpfile();
	ms_json_init(&w, fileno(tmp));
	ms_json_object(&w, NULL);
	ms_json_int(&w, "neg", -9223372036854775807LL - 1);
	ms_json_uint(&w, "big", 9223372036854775807ULL);
	ms_json_double(&w, "half", 2.5);
	ms_json_double(&w, "whole", 3.0);
	ms_json_double(&w, "small", -0.0000004);
	ms_json_double(&w, "nan", 0.0 / 0.0);
	ms_json_bool(&w, "t", 1);
	ms_json_null(&w, "z");
	ms_json_array(&w, "empty");
	ms_json_end_array(&w);
	ms_json_array(&w, "list");
	ms_json_int(&w, NULL, 1);
	ms_json_object(&w, NULL);
	ms_json_end_object(&w);
	ms_json_end_array(&w);
	ms_json_end_object(&w);
	json_t *root = finish_and_parse(tmp);
	ck_assert(json_integer_value(json_object_get(root, "neg")) == -9223372036854775807LL - 1);
	ck_assert(json_is_real(json_object_get(root, "half")));
	ck_assert(json_real_value(json_object_get(root, "half")) == 2.5);
	ck_assert(json_is_real(json_object_get(root, "whole")));
	ck_assert(json_is_null(json_object_get(root, "nan")));
	ck_assert(json_is_true(json_object_get(root, "t")));
	ck_assert_uint_eq(json_array_size(json_object_get(root, "list")), 2);
	ck_assert(strstr(out, "\"big\": 9223372036854775807") != NULL);
	json_decref(root);
}
END_TEST

START_TEST(strings_are_escaped_and_valid_utf8)
{
	FILE *tmp = tmpfile();
	ms_json_init(&w, fileno(tmp));
	ms_json_object(&w, NULL);
	ms_json_string(&w, "quote", "a\"b\\c\n\t\x01");
	ms_json_string(&w, "utf8", "caf\xc3\xa9 \xe2\x82\xac");
	ms_json_string(&w, "bad", "x\xff\xc3(\xed\xa0\x80y");
	ms_json_string_n(&w, "nul", "a\0b", 3);
	ms_json_end_object(&w);
	json_t *root = finish_and_parse(tmp);
	ck_assert_str_eq(json_string_value(json_object_get(root, "quote")), "a\"b\\c\n\t\x01");
	ck_assert_str_eq(json_string_value(json_object_get(root, "utf8")), "caf\xc3\xa9 \xe2\x82\xac");
	ck_assert_str_eq(json_string_value(json_object_get(root, "bad")),
			 "x\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdy");
	ck_assert_uint_eq(json_string_length(json_object_get(root, "nul")), 3);
	json_decref(root);
}
END_TEST

/* Pairs (timeline points, call sites' locations) are one line each: [seconds, bytes], [object, offset]. */
START_TEST(pairs_are_one_line_each)
{
	char mem[256];
	ms_json_init_memory(&w, mem, sizeof mem);
	ms_json_object(&w, NULL);
	ms_json_array(&w, "points");
	ms_json_pair(&w, 0.0, 632);
	ms_json_pair(&w, 1.25, -4096);
	ms_json_pair(&w, 0.0000004, INT64_MAX);
	ms_json_int_pair(&w, -1, UINT64_MAX);
	ms_json_int_pair(&w, 3, 0);
	ms_json_end_array(&w);
	ms_json_end_object(&w);
	ck_assert_int_eq(ms_json_finish(&w), 0);
	mem[w.mem_len] = 0;
	ck_assert_str_eq(mem,
			 "{\n  \"points\": [\n    [0.0, 632],\n    [1.25, -4096],\n    [0.0, 9223372036854775807],\n"
			 "    [-1, 18446744073709551615],\n    [3, 0]\n  ]\n}\n");
}
END_TEST

/* Numbers as text, digit by digit: every digit pair, the microseconds rounded and their trailing
 * zeros dropped (one kept), signs, the null past 9e15. */
START_TEST(numbers_are_written_exactly)
{
	char mem[512];
	ms_json_init_memory(&w, mem, sizeof mem);
	ms_json_array(&w, NULL);
	ms_json_uint(&w, NULL, 0);
	ms_json_uint(&w, NULL, 9);
	ms_json_uint(&w, NULL, 10);
	ms_json_uint(&w, NULL, 1203456789012345678ULL);
	ms_json_uint(&w, NULL, UINT64_MAX);
	ms_json_int(&w, NULL, -100);
	ms_json_double(&w, NULL, 1234567.000123);
	ms_json_double(&w, NULL, 0.1);
	ms_json_double(&w, NULL, 100.0);
	ms_json_double(&w, NULL, -0.5);
	ms_json_double(&w, NULL, 98.0654329);
	ms_json_double(&w, NULL, 0.9999996);
	ms_json_double(&w, NULL, 12345678.5);
	ms_json_double(&w, NULL, -1e16);
	ms_json_double(&w, NULL, 2e13 + 0.25);
	ms_json_double(&w, NULL, -8.5e15);
	ms_json_end_array(&w);
	ck_assert_int_eq(ms_json_finish(&w), 0);
	ck_assert_str_eq(mem, "[\n  0,\n  9,\n  10,\n  1203456789012345678,\n  18446744073709551615,\n  -100,\n"
			      "  1234567.000123,\n  0.1,\n  100.0,\n  -0.5,\n  98.065433,\n  1.0,\n"
			      "  12345678.5,\n  null,\n  20000000000000.25,\n  -8500000000000000.0\n]\n");
}
END_TEST

START_TEST(large_documents_flush_through_the_buffer)
{
	FILE *tmp = tmpfile();
	ms_json_init(&w, fileno(tmp));
	ms_json_array(&w, NULL);
	for (int i = 0; i < 20000; i++)
		ms_json_int(&w, NULL, i);
	ms_json_end_array(&w);
	json_t *root = finish_and_parse(tmp);
	ck_assert_uint_eq(json_array_size(root), 20000);
	ck_assert_int_eq(json_integer_value(json_array_get(root, 19999)), 19999);
	json_decref(root);
}
END_TEST

/* Into a caller's buffer: the whole length is counted, what fits is stored, always terminated. */
START_TEST(memory_sink_counts_the_whole_document)
{
	static char mem[1 << 18], small[64];
	ms_json_init_memory(&w, mem, sizeof mem);
	ms_json_array(&w, NULL);
	for (int i = 0; i < 20000; i++)
		ms_json_int(&w, NULL, i);
	ms_json_end_array(&w);
	ck_assert_int_eq(ms_json_finish(&w), 0);
	size_t whole = w.mem_len;
	ck_assert_uint_eq(strlen(mem), whole);
	json_error_t err;
	json_t *root = json_loads(mem, 0, &err);
	ck_assert_ptr_nonnull(root);
	ck_assert_uint_eq(json_array_size(root), 20000);
	json_decref(root);
	ms_json_init_memory(&w, small, sizeof small);
	ms_json_array(&w, NULL);
	for (int i = 0; i < 20000; i++)
		ms_json_int(&w, NULL, i);
	ms_json_end_array(&w);
	ck_assert_int_eq(ms_json_finish(&w), 0);
	ck_assert_uint_eq(w.mem_len, whole);
	ck_assert_uint_eq(strlen(small), sizeof small - 1);
	ck_assert(!strncmp(small, mem, sizeof small - 1));
	ms_json_init_memory(&w, NULL, 0); /* a size query */
	ms_json_int(&w, NULL, 12345);
	ck_assert_int_eq(ms_json_finish(&w), 0);
	ck_assert_uint_eq(w.mem_len, 6);
}
END_TEST

START_TEST(write_errors_and_unbalanced_nesting_are_reported)
{
	ms_json_init(&w, -1);
	ms_json_object(&w, NULL);
	ms_json_end_object(&w);
	ck_assert_int_eq(ms_json_finish(&w), -1);
	ck_assert_int_eq(w.err, EBADF); /* the write's own errno, for the warning */
	FILE *tmp = tmpfile();
	ms_json_init(&w, fileno(tmp));
	ms_json_object(&w, NULL);
	ck_assert_int_eq(ms_json_finish(&w), -1);
	fclose(tmp);
}
END_TEST

/* The reference: byte by byte, as the writer took them before the eight-byte scan. */
static size_t plain_prefix_bytes(const char *s, size_t n, int key)
{
	size_t i = 0;
	for (; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || (key && c == 0x7f))
			break;
	}
	return i;
}

START_TEST(plain_prefix_matches_the_byte_loop)
{
	char s[48];
	for (int key = 0; key <= 1; key++)
		for (size_t n = 0; n <= 40; n++)
			for (size_t at = 0; at <= n; at++)
				for (int c = 0; c < 256; c++) {
					for (size_t k = 0; k < n; k++)
						s[k] = (char)('a' + (k * 7) % 26);
					if (at < n)
						s[at] = (char)c;
					if (at + 1 < n)
						s[at + 1] =
							(char)(255 - c); /* what follows a bad byte changes nothing */
					ck_assert_uint_eq(ms_json_plain_prefix(s, n, key),
							  plain_prefix_bytes(s, n, key));
				}
	unsigned r = 12345; /* and arbitrary bytes */
	for (int round = 0; round < 200000; round++) {
		size_t n = (r = r * 1103515245 + 12345) >> 16 & 31;
		for (size_t k = 0; k < n; k++) {
			r = r * 1103515245 + 12345;
			unsigned v = r >> 16 & 255;
			s[k] = (char)(v < 200 ? 0x20 + v % 0x60 : v); /* mostly printable */
		}
		ck_assert_uint_eq(ms_json_plain_prefix(s, n, round & 1), plain_prefix_bytes(s, n, round & 1));
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("writer");
	tcase_add_test(tc, values_round_trip);
	tcase_add_test(tc, strings_are_escaped_and_valid_utf8);
	tcase_add_test(tc, pairs_are_one_line_each);
	tcase_add_test(tc, numbers_are_written_exactly);
	tcase_add_test(tc, large_documents_flush_through_the_buffer);
	tcase_add_test(tc, write_errors_and_unbalanced_nesting_are_reported);
	tcase_add_test(tc, memory_sink_counts_the_whole_document);
	tcase_add_test(tc, plain_prefix_matches_the_byte_loop);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
