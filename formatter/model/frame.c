/* One frame's text as the file records it and as it is shown: whether it is a Python frame
 * ("func (/path/file.py:12)"), where its location " (object)" or " (file:line)" starts, and a
 * native frame's source line ("sym file.c:42 (obj)") put in or taken out. Pure text: the
 * display of sites (frames.c), the DWARF reader (input/lines.c) and the exports all ask here. */
#include "base/base.h"
#include "model/sites.h"

#include <stdlib.h>
#include <string.h>

/* "func (/path/file.py:12)": a name, " (", a path, ':', digits, ')'. */
int mf_frame_is_python(const char *frame)
{
	size_t n = strlen(frame);
	const char *open = strstr(frame, " (");
	if (n < 5 || frame[n - 1] != ')' || !open || frame[n - 2] < '0' || frame[n - 2] > '9')
		return 0;
	const char *p = frame + n - 2;
	while (p > open && *p >= '0' && *p <= '9')
		p--;
	return *p == ':' && p > open + 2 && strncmp(frame, "0x", 2) && !strstr(frame, "+0x");
}

/* FRAME demangled and made printable (malloc'd). */
char *mf_clean_frame(const char *frame)
{
	char *shown = mf_frame_display(frame), *clean = mf_clean_text(shown);
	free(shown);
	return clean;
}

const char *mf_frame_where(const char *frame)
{
	size_t n = strlen(frame);
	if (!n || frame[n - 1] != ')')
		return NULL;
	const char *at = NULL;
	for (const char *p = strstr(frame, " ("); p; p = strstr(p + 1, " ("))
		at = p;
	return at;
}

const char *mf_frame_line_at(const char *frame)
{
	const char *where = mf_frame_where(frame), *end = where ? where : frame + strlen(frame);
	const char *p = end;
	if (strstr(frame, "+0x") || mf_frame_is_python(frame))
		return NULL;
	while (p > frame && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p == end || p == frame || p[-1] != ':')
		return NULL;
	for (p--; p > frame && p[-1] != ' '; p--)
		;
	return p > frame + 1 && p[-2] != ' ' ? p - 1 : NULL;
}

char *mf_frame_with_line(const char *frame, const char *function, const char *file, long line)
{
	const char *where = mf_frame_where(frame), *off = strstr(frame, "+0x");
	const char *slash = strrchr(file, '/'), *base = slash && slash[1] ? slash + 1 : file;
	size_t n = where ? (size_t)(where - frame) : strlen(frame);
	if (off && (size_t)(off - frame) < n)
		n = (size_t)(off - frame);
	if (!off && function && *function) /* an address alone: the function libdw names */
		return mf_xasprintf("%s %s:%ld%s", function, base, line, where ? where : "");
	return mf_xasprintf("%.*s %s:%ld%s", (int)n, frame, base, line, where ? where : "");
}

char *mf_frame_without_line(const char *shown)
{
	const char *line = mf_frame_line_at(shown), *where = mf_frame_where(shown);
	if (!line)
		return mf_xstrdup(shown);
	return mf_xasprintf("%.*s%s", (int)(line - shown), shown, where ? where : "");
}
