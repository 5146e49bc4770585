/* Text shared by the tables, the notes of --sites and the pictures: bytes in binary units as the
 * plot writes them, and text made printable. */
#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Binary units, named as the Trainer dump names them (MB is 2^20 bytes). */
const char *const mf_byte_units[MF_BYTE_UNITS] = { "B", "KB", "MB", "GB", "TB", "PB" };

/* Three significant digits at most: "106 MB", "45.6 MB", "1.23 GB". */
char *mf_fmt_bytes(double v)
{
	int u = 0;
	double a = fabs(v);
	if (!isfinite(v))
		return mf_xstrdup("?");
	while (u < 5 && a >= 1000)
		a /= 1024, v /= 1024, u++;
	return mf_xasprintf("%.*f %s", u == 0 || a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2, v, mf_byte_units[u]);
}

char *mf_fmt_bytes_cut(double v)
{
	int u = 0;
	if (!isfinite(v))
		return mf_xstrdup("?");
	while (u < 5 && fabs(v) >= 1000)
		v /= 1024, u++;
	int d = u == 0 || fabs(v) >= 100 ? 0 : fabs(v) >= 10 ? 1 : 2;
	char *s = mf_xasprintf("%.*f", d + 6, v); /* six digits more, cut: no rounding up */
	s[strlen(s) - 6 - !d] = '\0';
	char *out = mf_xasprintf("%s %s", s, mf_byte_units[u]);
	free(s);
	return out;
}

/* Jansson hands out valid UTF-8; control characters would still show as boxes or break lines. */
char *mf_clean_text(const char *s)
{
	char *c = mf_xstrdup(s ? s : "");
	for (char *p = c; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return c;
}
