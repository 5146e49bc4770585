/* Allocation helpers that end the program cleanly (exit 2) instead of crashing on out-of-memory. */
#include "base/base.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void mf_oom(void)
{
	fputs("memshim-format: out of memory\n", stderr);
	exit(MF_BAD);
}

void *mf_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		mf_oom();
	return p;
}

void *mf_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		mf_oom();
	return q;
}

char *mf_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		mf_oom();
	return p;
}

char *mf_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		mf_oom();
	return s;
}

int mf_num(json_t *v, double *out)
{
	if (json_is_integer(v))
		*out = (double)json_integer_value(v);
	else if (json_is_real(v))
		*out = json_real_value(v);
	else
		return 0;
	return 1;
}
