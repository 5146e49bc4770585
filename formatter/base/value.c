/* One metric value as the Trainer dump shows it (metrics_format), with memshim's exceptions; and
 * exactly as Hugging Face's metrics_format prints it, for tables beside HF's own numbers. */
#include "base/base.h"

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

/* Bytes to whole MiB, truncated toward zero (HF's >> 20 floors negatives; memshim does not); a
 * value under 1 MiB that is not 0 in whole KiB (under 1 KiB in bytes), so it never reads 0MB. */
static char *mf_mib(json_t *v)
{
	if (!json_is_integer(v))
		return mf_bytes_change(json_real_value(v));
	long long x = json_integer_value(v);
	if (x == 0 || x >= 1048576 || x <= -1048576)
		return mf_xasprintf("%lldMB", x / 1048576);
	if (x >= 1024 || x <= -1024)
		return mf_xasprintf("%lldKB", x / 1024);
	return mf_xasprintf("%lldB", x);
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

/* Python's str(datetime.timedelta(seconds=N)) for a whole N: "0:00:26", "1 day, 2:03:04",
 * "-1 day, 23:59:59". */
static char *mf_timedelta(long long n)
{
	long long days = n / 86400 - (n % 86400 < 0), rem = n - days * 86400;
	char *hms = mf_xasprintf("%lld:%02lld:%02lld", rem / 3600, rem / 60 % 60, rem % 60);
	if (!days)
		return hms;
	char *s = mf_xasprintf("%lld day%s, %s", days, days == 1 || days == -1 ? "" : "s", hms);
	free(hms);
	return s;
}

/* transformers' _secs2timedelta: the whole seconds as a timedelta, then ".%02d" of the fraction's
 * hundredths, truncated (26.204 -> "0:00:26.20"). */
static char *mf_secs2timedelta(double secs)
{
	if (!isfinite(secs) || fabs(secs) > 9.0e15)
		return mf_round4_text(secs);
	double whole = trunc(secs);
	int hundredths = (int)(fabs(secs - whole) * 100);
	char *td = mf_timedelta((long long)whole), *s = mf_xasprintf("%s.%02d", td, hundredths);
	free(td);
	return s;
}

/* Python's v >> 20 for an int: floor division, also for negatives (-32.36 MiB is -33MB). */
static char *mf_hf_mib(json_t *v)
{
	if (json_is_integer(v)) {
		long long x = json_integer_value(v), q = x / 1048576;
		if (x % 1048576 && x < 0)
			q--;
		return mf_xasprintf("%lldMB", q);
	}
	return mf_whole(floor(json_real_value(v) / MF_MIB) + 0.0, "MB");
}

char *mf_hf_format_value(const char *key, json_t *v)
{
	if (!json_is_number(v))
		return mf_other(v);
	if (strstr(key, "_mem_"))
		return mf_hf_mib(v);
	if (strstr(key, "_runtime"))
		return mf_secs2timedelta(json_number_value(v));
	return mf_format_value(key, v);
}

char *mf_hf_runtime_change(double d)
{
	char *td = mf_secs2timedelta(fabs(d)), *s = mf_xasprintf("%s%s", d < 0 ? "-" : "+", td);
	free(td);
	return s;
}

char *mf_bytes_change(double d)
{
	double a = fabs(d);
	const char *sign = d < 0 ? "-" : "";
	if (a >= MF_MIB || a == 0)
		return mf_whole(trunc(d / MF_MIB), "MB");
	if (a >= 1024)
		return mf_xasprintf("%s%.0fKB", sign, trunc(a / 1024));
	return mf_xasprintf("%s%.0fB", sign, a);
}
