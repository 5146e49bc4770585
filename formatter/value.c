/* One metric value as the Trainer dump shows it (metrics_format), with memshim's exceptions. */
#include "mf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MF_MIB 1048576.0
#define MF_GIB 1073741824.0

static int mf_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

int mf_is_mem_key(const char *key)
{
	/* failed_allocs counts allocations, it is not bytes, so it keeps its plain number. */
	return strstr(key, "_mem_") && !mf_ends_with(key, "_failed_allocs");
}

size_t mf_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xC0) != 0x80;
	return w;
}

/* A whole number held in a double, printed without a fraction or a "-0". */
static char *mf_whole(double q, const char *unit)
{
	if (fabs(q) < 9.0e18)
		return mf_xasprintf("%lld%s", (long long)q, unit);
	return mf_xasprintf("%.0f%s", q + 0.0, unit);
}

/* Bytes to whole MiB, truncated toward zero (HF's >> 20 floors negatives; memshim does not). */
static char *mf_mib(json_t *v)
{
	if (json_is_integer(v))
		return mf_xasprintf("%lldMB", (long long)(json_integer_value(v) / 1048576));
	return mf_whole(trunc(json_real_value(v) / MF_MIB), "MB");
}

/* Python's int(v) >> 30: truncate to a whole number, then floor-divide by 2^30. */
static char *mf_gf(json_t *v)
{
	if (json_is_integer(v)) {
		long long x = json_integer_value(v), q = x / 1073741824LL;
		if (x % 1073741824LL && x < 0)
			q--;
		return mf_xasprintf("%lldGF", q);
	}
	return mf_whole(floor(trunc(json_real_value(v)) / MF_GIB) + 0.0, "GF");
}

static char *mf_round4_text(double x)
{
	char buf[MF_REPR_MAX];
	mf_py_repr(mf_py_round4(x), buf);
	return mf_xstrdup(buf);
}

/* Values that are not numbers print as Python's str() would (nested ones as compact JSON). */
static char *mf_other(json_t *v)
{
	if (json_is_string(v))
		return mf_xstrdup(json_string_value(v));
	if (json_is_boolean(v))
		return mf_xstrdup(json_is_true(v) ? "True" : "False");
	if (json_is_null(v))
		return mf_xstrdup("None");
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
	char *r = mf_xstrdup(s ? s : "?");
	free(s);
	return r;
}

char *mf_format_value(const char *key, json_t *v)
{
	if (!json_is_number(v))
		return mf_other(v);
	if (mf_is_mem_key(key))
		return mf_mib(v);
	if (strstr(key, "_runtime"))
		return mf_round4_text(json_number_value(v));
	if (!strcmp(key, "total_flos"))
		return mf_gf(v);
	if (json_is_real(v))
		return mf_round4_text(json_real_value(v));
	return mf_xasprintf("%lld", (long long)json_integer_value(v));
}
