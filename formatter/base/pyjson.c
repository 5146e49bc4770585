/* JSON written byte for byte as Python's json.dumps(v, indent=4, sort_keys=True) writes it. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

static void mf_indent(FILE *out, int depth)
{
	fputc('\n', out);
	for (int i = 0; i < depth * 4; i++)
		fputc(' ', out);
}

/* Next code point of valid UTF-8 (jansson only hands out valid UTF-8). */
static unsigned long mf_utf8_next(const unsigned char **p)
{
	const unsigned char *s = *p;
	unsigned long c = s[0];
	int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
	if (extra)
		c &= 0x3F >> extra;
	for (int i = 1; i <= extra && (s[i] & 0xC0) == 0x80; i++)
		c = (c << 6) | (s[i] & 0x3F);
	*p = s + 1 + extra;
	return c;
}

/* ensure_ascii: everything outside space..'~' becomes \uXXXX (surrogate pairs above U+FFFF). */
static void mf_py_string(FILE *out, const char *str, size_t len)
{
	const unsigned char *p = (const unsigned char *)str, *end = p + len;
	fputc('"', out);
	while (p < end) {
		unsigned long c = mf_utf8_next(&p);
		const char *esc = c == '"'    ? "\\\""
				  : c == '\\' ? "\\\\"
				  : c == '\n' ? "\\n"
				  : c == '\r' ? "\\r"
				  : c == '\t' ? "\\t"
				  : c == '\b' ? "\\b"
				  : c == '\f' ? "\\f"
					      : NULL;
		if (esc)
			fputs(esc, out);
		else if (c >= 0x20 && c <= 0x7E)
			fputc((int)c, out);
		else if (c < 0x10000)
			fprintf(out, "\\u%04lx", c);
		else
			fprintf(out, "\\u%04lx\\u%04lx", 0xD800 + ((c - 0x10000) >> 10),
				0xDC00 + ((c - 0x10000) & 0x3FF));
	}
	fputc('"', out);
}

static void mf_py_value(FILE *out, json_t *v, int depth);

static int mf_cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void mf_py_object(FILE *out, json_t *v, int depth)
{
	size_t n = json_object_size(v), i = 0;
	const char *key;
	json_t *item;
	if (!n) {
		fputs("{}", out);
		return;
	}
	const char **keys = mf_xmalloc(n * sizeof *keys);
	json_object_foreach(v, key, item)
		keys[i++] = key;
	qsort(keys, n, sizeof *keys, mf_cmp_str);
	fputc('{', out);
	for (i = 0; i < n; i++) {
		mf_indent(out, depth + 1);
		mf_py_string(out, keys[i], strlen(keys[i]));
		fputs(": ", out);
		mf_py_value(out, json_object_get(v, keys[i]), depth + 1);
		if (i + 1 < n)
			fputc(',', out);
	}
	mf_indent(out, depth);
	fputc('}', out);
	free(keys);
}

static void mf_py_array(FILE *out, json_t *v, int depth)
{
	size_t n = json_array_size(v);
	if (!n) {
		fputs("[]", out);
		return;
	}
	fputc('[', out);
	for (size_t i = 0; i < n; i++) {
		mf_indent(out, depth + 1);
		mf_py_value(out, json_array_get(v, i), depth + 1);
		if (i + 1 < n)
			fputc(',', out);
	}
	mf_indent(out, depth);
	fputc(']', out);
}

static void mf_py_real(FILE *out, double x)
{
	char buf[MF_REPR_MAX];
	mf_py_repr(x, buf);
	/* json.dumps spells the non-finite floats its own way. */
	if (!strcmp(buf, "nan") || !strcmp(buf, "inf") || !strcmp(buf, "-inf"))
		fputs(buf[0] == 'n' ? "NaN" : buf[0] == 'i' ? "Infinity" : "-Infinity", out);
	else
		fputs(buf, out);
}

static void mf_py_value(FILE *out, json_t *v, int depth)
{
	switch (json_typeof(v)) {
	/* clang-format off */
	case JSON_OBJECT: mf_py_object(out, v, depth); break;
	case JSON_ARRAY: mf_py_array(out, v, depth); break;
	case JSON_STRING: mf_py_string(out, json_string_value(v), json_string_length(v)); break;
	case JSON_INTEGER: fprintf(out, "%lld", (long long)json_integer_value(v)); break;
	case JSON_REAL: mf_py_real(out, json_real_value(v)); break;
	case JSON_TRUE: fputs("true", out); break;
	case JSON_FALSE: fputs("false", out); break;
	case JSON_NULL: fputs("null", out); break;
		/* clang-format on */
	}
}

void mf_py_json(FILE *out, json_t *v)
{
	mf_py_value(out, v, 0);
}
