/* A streaming JSON writer into a fixed buffer flushed with write(2): async-signal-safe, no
 * allocation, so the report can be written at exit, on _exit and from a signal handler. */
#ifndef MS_JSON_H
#define MS_JSON_H

#include <stddef.h>
#include <stdint.h>

#define MS_JSON_DEPTH 16

struct ms_json {
	int fd;
	int to_memory;           /* into MEM instead of FD (ms_json_init_memory) */
	char *mem;               /* the caller's buffer, or NULL for a size query */
	size_t mem_cap, mem_len; /* its size; the bytes produced so far, stored or not (written, for FD) */
	int err;                 /* 0, or errno of the first failed write (EIO: bad nesting) */
	int depth;
	int first[MS_JSON_DEPTH]; /* no member written yet at this depth */
	size_t len;
	char buf[8192];
};

void ms_json_init(struct ms_json *w, int fd);
/* Writes into DST (CAP bytes, always NUL-terminated when CAP > 0) instead of a file; the whole
 * length is counted even when it does not fit, in W->mem_len after ms_json_finish. */
void ms_json_init_memory(struct ms_json *w, char *dst, size_t cap);
/* KEY is the member name inside an object, NULL inside an array or at top level. */
void ms_json_object(struct ms_json *w, const char *key);
void ms_json_array(struct ms_json *w, const char *key);
void ms_json_end_object(struct ms_json *w);
void ms_json_end_array(struct ms_json *w);
void ms_json_int(struct ms_json *w, const char *key, int64_t value);
void ms_json_uint(struct ms_json *w, const char *key, uint64_t value);
/* Finite values with 6 decimals (trailing zeros kept off); NaN and infinities as null. */
void ms_json_double(struct ms_json *w, const char *key, double value);
/* An array element [X, Y] on one line (timeline points: thousands of them). */
void ms_json_pair(struct ms_json *w, double x, int64_t y);
/* The same for two integers (call sites' locations: one per frame). */
void ms_json_int_pair(struct ms_json *w, int64_t x, uint64_t y);
void ms_json_bool(struct ms_json *w, const char *key, int value);
void ms_json_null(struct ms_json *w, const char *key);
/* Escapes quotes, backslashes and control bytes; invalid UTF-8 becomes U+FFFD. */
void ms_json_string(struct ms_json *w, const char *key, const char *value);
void ms_json_string_n(struct ms_json *w, const char *key, const char *value, size_t n);
/* How many of the N bytes at S go into a string (KEY 0) or a key (KEY 1) as they are, before the
 * first that is escaped or checked as UTF-8 (json.c's own scan, eight bytes at a time). */
size_t ms_json_plain_prefix(const char *s, size_t n, int key);
/* Flushes; returns 0, or -1 when anything failed (the cause in W->err). */
int ms_json_finish(struct ms_json *w);

#endif
