/* memshim-format's base: allocation that exits cleanly, Python's float repr and json.dumps, metric
 * values as the Trainer dump prints them, bytes and printable text, aligned tables, the version.
 * Depends on nothing else of the formatter. */
#ifndef MF_BASE_H
#define MF_BASE_H

#include <stdio.h>
#include <stddef.h>
#include <jansson.h>

/* Exit statuses of memshim-format. */
enum { MF_OK = 0, MF_REGRESSION = 1, MF_BAD = 2 };

/* pyfloat.c: Python's repr(float) and round(x, 4). */
#define MF_REPR_MAX 48
void mf_py_repr(double x, char out[MF_REPR_MAX]);
double mf_py_round4(double x);

/* pyjson.c: json.dumps(v, indent=4, sort_keys=True), no trailing newline. */
void mf_py_json(FILE *out, json_t *v);

/* value.c: metric value formatting of the Trainer dump; returns malloc'd text. */
char *mf_format_value(const char *key, json_t *v);
int mf_is_mem_key(const char *key); /* a byte count of memory (a `_mem_` key, not a count) */
/* V exactly as Hugging Face's metrics_format prints it: `_mem_` as v >> 20 "MB" (floor, also for
 * negatives), `_runtime` as _secs2timedelta ("0:00:26.20"), the rest as the dump. */
char *mf_hf_format_value(const char *key, json_t *v);
char *mf_hf_runtime_change(double seconds); /* "+0:00:15.19", "-0:00:01.05" */
/* A change of D bytes, without a '+': whole MB (toward zero) from 1 MiB, below it whole KB
 * ("972KB"), below 1 KiB bytes ("24B"); no change "0MB". */
char *mf_bytes_change(double d);
size_t mf_width(const char *s); /* display width: UTF-8 code points */

/* text.c: bytes in binary units, named as the Trainer dump names them (MB is 2^20 bytes), and
 * printable text. */
#define MF_BYTE_UNITS 6
extern const char *const mf_byte_units[MF_BYTE_UNITS]; /* "B", "KB", ... "PB" */
char *mf_fmt_bytes(double v);                          /* "106 MB", "1.23 GB", "512 B" */
/* The same digits cut, not rounded (155.6 MiB: "155 MB"), so they read as the dump's whole MB
 * ("155MB") with decimals added: the flame graph's bytes beside --sites's. */
char *mf_fmt_bytes_cut(double v);
char *mf_clean_text(const char *s); /* control characters become '?' */

/* table.c: aligned rows of cells. */
enum mf_align { MF_LEFT, MF_RIGHT };
struct mf_table {
	size_t ncols, nrows, cap;
	char **cells; /* nrows * ncols, owned, NULL prints as "" */
	const enum mf_align *align;
	const char *const *seps; /* ncols - 1 separators */
};
void mf_table_init(struct mf_table *t, size_t ncols, const enum mf_align *align, const char *const *seps);
void mf_table_row(struct mf_table *t, char **cells); /* takes ownership of the cells */
void mf_table_print(FILE *out, const struct mf_table *t, const char *indent);
void mf_table_free(struct mf_table *t);

/* util.c: allocation that ends the program cleanly (exit 2) instead of crashing. */
__attribute__((noreturn)) void mf_oom(void); /* "out of memory", exit 2 */
void *mf_xmalloc(size_t n);
void *mf_xrealloc(void *p, size_t n);
char *mf_xstrdup(const char *s);
char *mf_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int mf_num(json_t *v, double *out); /* 1 when V is a number */

/* version.c: "MAJOR.MINOR" from shim/memshim.h. */
const char *mf_version(void);

#endif
