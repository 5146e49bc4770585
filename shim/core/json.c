/* Streaming JSON writer (see json.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/json.h"
#include "core/ms.h"

void ms_json_init(struct ms_json *w, int fd)
{
	w->fd = fd;
	w->to_memory = 0;
	w->mem = NULL;
	w->mem_cap = w->mem_len = 0;
	w->err = 0;
	w->depth = 0;
	w->first[0] = 1;
	w->len = 0;
}

void ms_json_init_memory(struct ms_json *w, char *dst, size_t cap)
{
	ms_json_init(w, -1);
	w->to_memory = 1;
	w->mem = dst;
	w->mem_cap = cap;
	if (cap)
		dst[0] = '\0';
}

static void flush_memory(struct ms_json *w)
{
	if (w->mem_len + 1 < w->mem_cap) {
		size_t room = w->mem_cap - 1 - w->mem_len;
		memcpy(w->mem + w->mem_len, w->buf, w->len < room ? w->len : room);
	}
	w->mem_len += w->len;
	if (w->mem_cap)
		w->mem[w->mem_len < w->mem_cap ? w->mem_len : w->mem_cap - 1] = '\0';
	w->len = 0;
}

static __attribute__((noinline)) void flush(struct ms_json *w)
{
	size_t off = 0;
	if (w->to_memory) {
		flush_memory(w);
		return;
	}
	/* blocks allocated before the data is written: otherwise ext4 (delayed allocation) writes a new
	 * file out synchronously when it replaces an old one by rename (auto_da_alloc: about 40 us for
	 * a small file, most of a short process's cost).  A file system without it says so; the write
	 * reports real errors. */
	if (w->len && !w->err)
		ms_sys_fallocate(w->fd, FALLOC_FL_KEEP_SIZE, (off_t)w->mem_len, (off_t)w->len);
	w->mem_len += w->len;
	while (off < w->len && !w->err) {
		ssize_t n = ms_sys_write(w->fd, w->buf + off, w->len - off);
		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else
			w->err = n < 0 && errno ? errno : EIO; /* kept: the caller reports the real cause */
	}
	w->len = 0;
}

/* Bytes that do not fit in one piece: flushed as the buffer fills. */
static __attribute__((noinline)) void put_long(struct ms_json *w, const char *s, size_t n)
{
	while (n) {
		if (w->len == sizeof w->buf)
			flush(w);
		size_t room = sizeof w->buf - w->len;
		size_t k = n < room ? n : room;
		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
}

/* N <= 16 bytes from S to D in fixed-size copies that may overlap: no byte loop, no call. */
static inline __attribute__((always_inline)) void copy_short(char *d, const char *s, size_t n)
{
	if (n >= 8) {
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else {
		for (size_t i = 0; i < n; i++) /* 0 to 3 bytes */
			d[i] = s[i];
	}
}

/* The usual case inline: a few bytes (a report is mostly short members). */
static inline __attribute__((always_inline)) void put(struct ms_json *w, const char *s, size_t n)
{
	if (MS_UNLIKELY(n > 16 || n > sizeof w->buf - w->len)) {
		put_long(w, s, n);
		return;
	}
	copy_short(w->buf + w->len, s, n);
	w->len += n;
}

static inline __attribute__((always_inline)) void puts_(struct ms_json *w, const char *s)
{
	put(w, s, strlen(s));
}

/* "00".."99": two digits per division (a report is mostly numbers: the timeline's points). */
static const char digit_pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
				  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
				  "8081828384858687888990919293949596979899";

/* The decimal digits of V, ending at END; returns where they start (at most 20 bytes before). */
static char *u64_digits(char *end, uint64_t v)
{
	while (v >= 100) {
		uint64_t q = v / 100;
		end -= 2;
		memcpy(end, digit_pairs + 2 * (v - q * 100), 2);
		v = q;
	}
	if (v >= 10) {
		end -= 2;
		memcpy(end, digit_pairs + 2 * v, 2);
	} else {
		*--end = (char)('0' + v);
	}
	return end;
}

static void put_u64(struct ms_json *w, uint64_t v)
{
	char d[24];
	char *start = u64_digits(d + sizeof d, v);
	put(w, start, (size_t)(d + sizeof d - start));
}

static int utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
	if (!len || (size_t)len > n || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4))
		return 0;
	for (int i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (len == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
		return 0; /* overlong or surrogate */
	if (len == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))
		return 0;
	return len;
}

/* Bytes a string (PLAIN_IN_STRING) or a key written in one copy (PLAIN_IN_KEY) takes as they are:
 * ASCII from the space up, but the quote and the backslash (and DEL in a key). */
#define PLAIN_IN_STRING 1
#define PLAIN_IN_KEY 2
static const unsigned char plain[256] = {
	[0x20 ... 0x21] = PLAIN_IN_STRING | PLAIN_IN_KEY, /* 0x22 the quote */
	[0x23 ... 0x5b] = PLAIN_IN_STRING | PLAIN_IN_KEY, /* 0x5c the backslash */
	[0x5d ... 0x7e] = PLAIN_IN_STRING | PLAIN_IN_KEY,
	[0x7f] = PLAIN_IN_STRING,
};

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* The high bit of each byte of X (eight bytes of text, the first lowest) that a string or a key
 * cannot take as it is: below the space, the quote, the backslash, past ASCII, and DEL in a key.
 * The lowest bit set is the first such byte: a borrow or carry only runs on from a byte that is
 * set itself. */
static uint64_t not_plain8(uint64_t x, int key)
{
	uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');
	uint64_t m = ((x - ONES * 0x20) & ~x) | ((q - ONES) & ~q) | ((b - ONES) & ~b) | x;
	if (key)
		m |= x + ONES; /* 0x7f becomes 0x80 (a byte past it is set already) */
	return m & HIGHS;
}

static uint64_t load8(const char *s)
{
	uint64_t x;
	memcpy(&x, s, 8);
	return x;
}

static uint64_t load4(const char *s)
{
	uint32_t x;
	memcpy(&x, s, 4);
	return x;
}

/* ms_json_plain_prefix inline: whole words, then the last eight (or two overlapping fours) again,
 * whose bytes before I are known plain; three bytes or fewer one at a time. */
static inline __attribute__((always_inline)) size_t plain_prefix(const char *s, size_t n, int key)
{
	size_t i = 0;
	uint64_t m;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; i + 8 <= n; i += 8)
		if ((m = not_plain8(load8(s + i), key)) != 0)
			return i + (size_t)__builtin_ctzll(m) / 8;
	if (i == n)
		return n;
	if (n >= 8) {
		m = not_plain8(load8(s + n - 8), key);
		return m ? n - 8 + (size_t)__builtin_ctzll(m) / 8 : n;
	}
	if (n >= 4) {
		m = not_plain8(load4(s) | load4(s + n - 4) << 32, key);
		size_t at = m ? (size_t)__builtin_ctzll(m) / 8 : 8;
		return at < 4 ? at : at < 8 ? n - 8 + at : n;
	}
#endif
	unsigned want = key ? PLAIN_IN_KEY : PLAIN_IN_STRING;
	while (i < n && (plain[(unsigned char)s[i]] & want))
		i++;
	return i;
}

size_t ms_json_plain_prefix(const char *s, size_t n, int key)
{
	return plain_prefix(s, n, key);
}

static void put_escaped(struct ms_json *w, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	put(w, "\"", 1);
	for (size_t i = 0; i < n;) {
		/* a run of printable ASCII needing no escape goes in one piece */
		size_t run = i + plain_prefix(str + i, n - i, 0);
		if (run > i) {
			put(w, (const char *)s + i, run - i);
			i = run;
			continue;
		}
		unsigned c = s[i];
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			put(w, e, 2);
			i++;
		} else if (c < 0x20) {
			char e[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15] };
			put(w, e, 6);
			i++;
		} else {
			int len = utf8_len(s + i, n - i);
			if (len)
				put(w, (const char *)s + i, (size_t)len);
			else
				puts_(w, "\\ufffd");
			i += len ? (size_t)len : 1;
		}
	}
	put(w, "\"", 1);
}

/* "KEY": in one copy when KEY needs no escape (our keys never do; a label may). */
static void put_key(struct ms_json *w, const char *key)
{
	size_t n = 0; /* byte by byte: keys are short, a strlen and the word scan cost more */
	while (plain[(unsigned char)key[n]] & PLAIN_IN_KEY)
		n++;
	if (key[n] || n + 4 > sizeof w->buf - w->len) {
		put_escaped(w, key, n + strlen(key + n));
		put(w, ": ", 2);
		return;
	}
	char *d = w->buf + w->len;
	d[0] = '"';
	if (n <= 16)
		copy_short(d + 1, key, n);
	else
		memcpy(d + 1, key, n);
	d[n + 1] = '"';
	d[n + 2] = ':';
	d[n + 3] = ' ';
	w->len += n + 4;
}

/* ",\n" and the indentation of the deepest level: a prefix of it is every separator. */
#define SPACES "                                "
_Static_assert(sizeof SPACES - 1 == 2 * (size_t)MS_JSON_DEPTH, "two spaces per level");
static const char separator[] = ",\n" SPACES;

/* Newline and indentation for depth DEPTH, after a comma when COMMA. */
static void newline(struct ms_json *w, int comma, int depth)
{
	put(w, separator + !comma, 1 + (size_t)comma + 2 * (size_t)depth);
}

/* Comma, newline and indentation before a member or element, then its key. */
static void member(struct ms_json *w, const char *key)
{
	if (w->depth > 0)
		newline(w, !w->first[w->depth], w->depth);
	w->first[w->depth] = 0;
	if (key)
		put_key(w, key);
}

static void open_(struct ms_json *w, const char *key, char bracket)
{
	member(w, key);
	put(w, &bracket, 1);
	if (w->depth + 1 >= MS_JSON_DEPTH) {
		w->err = EIO;
		return;
	}
	w->first[++w->depth] = 1;
}

static void close_(struct ms_json *w, char bracket)
{
	if (w->depth == 0) {
		w->err = EIO;
		return;
	}
	int empty = w->first[w->depth];
	w->depth--;
	if (!empty)
		newline(w, 0, w->depth);
	put(w, &bracket, 1);
}

/* clang-format off */
void ms_json_object(struct ms_json *w, const char *key) { open_(w, key, '{'); }
void ms_json_array(struct ms_json *w, const char *key) { open_(w, key, '['); }
void ms_json_end_object(struct ms_json *w) { close_(w, '}'); }
void ms_json_end_array(struct ms_json *w) { close_(w, ']'); }
/* clang-format on */

void ms_json_uint(struct ms_json *w, const char *key, uint64_t value)
{
	member(w, key);
	put_u64(w, value);
}

static void put_int(struct ms_json *w, int64_t value)
{
	if (value < 0) {
		put(w, "-", 1);
		put_u64(w, 0 - (uint64_t)value);
	} else {
		put_u64(w, (uint64_t)value);
	}
}

/* Microsecond precision, trailing zeros dropped; null for NaN and magnitudes past 9e15. */
static void put_double(struct ms_json *w, double value)
{
	if (value != value || value > 9e15 || value < -9e15) {
		puts_(w, "null");
		return;
	}
	char d[32];
	char *frac = d + sizeof d - 7; /* ".ffffff" */
	int neg = value < 0;
	if (neg)
		value = -value;
	uint64_t whole = (uint64_t)value; /* apart: whole seconds x 1e6 overflows past 1.8e13 */
	uint64_t f = (uint64_t)((value - (double)whole) * 1e6 + 0.5);
	if (f >= 1000000)
		whole++, f -= 1000000;
	frac[0] = '.';
	memcpy(frac + 1, digit_pairs + 2 * (f / 10000), 2);
	memcpy(frac + 3, digit_pairs + 2 * (f / 100 % 100), 2);
	memcpy(frac + 5, digit_pairs + 2 * (f % 100), 2);
	int n = 7;
	while (n > 2 && frac[n - 1] == '0')
		n--;
	char *start = u64_digits(frac, whole);
	if (neg)
		*--start = '-';
	put(w, start, (size_t)(frac + n - start));
}

void ms_json_int(struct ms_json *w, const char *key, int64_t value)
{
	member(w, key);
	put_int(w, value);
}

void ms_json_double(struct ms_json *w, const char *key, double value)
{
	member(w, key);
	put_double(w, value);
}

void ms_json_pair(struct ms_json *w, double x, int64_t y)
{
	member(w, NULL);
	put(w, "[", 1);
	put_double(w, x);
	put(w, ", ", 2);
	put_int(w, y);
	put(w, "]", 1);
}

void ms_json_int_pair(struct ms_json *w, int64_t x, uint64_t y)
{
	member(w, NULL);
	put(w, "[", 1);
	put_int(w, x);
	put(w, ", ", 2);
	put_u64(w, y);
	put(w, "]", 1);
}

void ms_json_bool(struct ms_json *w, const char *key, int value)
{
	member(w, key);
	puts_(w, value ? "true" : "false");
}

void ms_json_null(struct ms_json *w, const char *key)
{
	member(w, key);
	puts_(w, "null");
}

void ms_json_string_n(struct ms_json *w, const char *key, const char *value, size_t n)
{
	member(w, key);
	put_escaped(w, value, n);
}

void ms_json_string(struct ms_json *w, const char *key, const char *value)
{
	ms_json_string_n(w, key, value ? value : "", value ? strlen(value) : 0);
}

int ms_json_finish(struct ms_json *w)
{
	if (w->depth != 0 && !w->err)
		w->err = EIO;
	put(w, "\n", 1);
	flush(w);
	return w->err ? -1 : 0;
}
