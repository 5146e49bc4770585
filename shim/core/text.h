/* A line built in a caller's buffer without format parsing: what ms_format does for "%s", "%lx" and
 * "%u", with its truncation (at most SIZE - 1 bytes, always NUL-terminated when SIZE > 0, the
 * length written returned).  For texts made by the thousand (call-site frames in a report). */
#ifndef MS_TEXT_H
#define MS_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct ms_text {
	char *buf;
	size_t size, len;
};

static inline struct ms_text ms_text_start(char *buf, size_t size)
{
	if (size)
		buf[0] = '\0';
	return (struct ms_text){ buf, size, 0 };
}

/* N bytes of S, as many as fit. */
static inline void ms_text_put(struct ms_text *t, const char *s, size_t n)
{
	size_t room = t->len + 1 < t->size ? t->size - t->len - 1 : 0;
	n = n < room ? n : room;
	if (n)
		memcpy(t->buf + t->len, s, n);
	t->len += n;
}

static inline void ms_text_str(struct ms_text *t, const char *s)
{
	ms_text_put(t, s, strlen(s));
}

/* V in lowercase hexadecimal (BITS 4) or decimal (BITS 0), no leading zeros. */
static inline void ms_text_num(struct ms_text *t, uint64_t v, unsigned bits)
{
	char d[24], *p = d + sizeof d;
	do {
		*--p = "0123456789abcdef"[bits ? v & 15 : v % 10];
		v = bits ? v >> 4 : v / 10;
	} while (v);
	ms_text_put(t, p, (size_t)(d + sizeof d - p));
}

/* The length written; the text is NUL-terminated. */
static inline size_t ms_text_end(struct ms_text *t)
{
	if (t->size)
		t->buf[t->len] = '\0';
	return t->len;
}

#endif
