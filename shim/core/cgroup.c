/* The memory cgroup's files parsed (see cgroup.h): the formats are the kernel's
 * (Documentation/admin-guide/cgroup-v1/memory.rst, cgroup-v2.rst, proc(5) for mountinfo). */
#include "core/cgroup.h"

#include <string.h>

/* v1 states "no limit" as PAGE_COUNTER_MAX pages in bytes (9223372036854771712 with 4 KiB pages):
 * anything from 2^62 up is no real limit (no machine has 4 EiB). */
#define V1_UNLIMITED (INT64_C(1) << 62)

static const char *line_end(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl : end;
}

/* Whether the comma-separated LIST (N bytes) holds WORD. */
static int has_word(const char *list, size_t n, const char *word)
{
	size_t w = strlen(word);
	for (const char *p = list, *end = list + n; p < end;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;
		if ((size_t)(stop - p) == w && !memcmp(p, word, w))
			return 1;
		p = stop + 1;
	}
	return 0;
}

static int copy_path(char *path, size_t size, const char *p, size_t n)
{
	if (n + 1 > size)
		return 0;
	memcpy(path, p, n);
	path[n] = '\0';
	return 1;
}

int ms_cgroup_group(const char *text, size_t len, char *path, size_t size)
{
	int found = 0;
	for (const char *p = text, *end = text + len; p < end;) {
		const char *e = line_end(p, end), *c1 = memchr(p, ':', (size_t)(e - p));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(e - c1 - 1)) : NULL;
		if (c2 && has_word(c1 + 1, (size_t)(c2 - c1 - 1), "memory"))
			return copy_path(path, size, c2 + 1, (size_t)(e - c2 - 1)) ? 1 : 0;
		if (c2 && c2 == c1 + 1 && c1 - p == 1 && *p == '0' && !found) /* "0::/path": v2 */
			found = copy_path(path, size, c2 + 1, (size_t)(e - c2 - 1)) ? 2 : 0;
		p = e + 1;
	}
	return found;
}

/* Field I (from 0, space-separated) of LINE into *F and *N; 0 when there is none. */
static int field(const char *line, const char *end, int i, const char **f, size_t *n)
{
	const char *p = line;
	for (int k = 0;; k++) {
		while (p < end && *p == ' ')
			p++;
		const char *s = p;
		while (p < end && *p != ' ')
			p++;
		if (s == p)
			return 0;
		if (k == i) {
			*f = s;
			*n = (size_t)(p - s);
			return 1;
		}
	}
}

/* Mountinfo escapes space, tab, newline and backslash as \ooo. */
static size_t unescape(char *out, size_t size, const char *p, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < size; i++, o++) {
		if (p[i] == '\\' && i + 3 < n && p[i + 1] >= '0' && p[i + 1] <= '3') {
			out[o] = (char)((p[i + 1] - '0') * 64 + (p[i + 2] - '0') * 8 + (p[i + 3] - '0'));
			i += 3;
		} else {
			out[o] = p[i];
		}
	}
	out[o] = '\0';
	return o;
}

int ms_cgroup_mount_line(const char *line, size_t len, int version, const char *group, char *dir, size_t size)
{
	const char *end = line + len, *root, *point, *sep = NULL, *type, *opts;
	size_t nroot, npoint, ntype, nopts;
	if (!field(line, end, 3, &root, &nroot) || !field(line, end, 4, &point, &npoint))
		return 0;
	for (int i = 5; field(line, end, i, &sep, &ntype); i++) /* optional fields end at "-" */
		if (ntype == 1 && *sep == '-')
			break;
	if (!sep || *sep != '-' || !field(sep, end, 1, &type, &ntype) || !field(sep, end, 3, &opts, &nopts))
		return 0;
	if (version == 2 ? !(ntype == 7 && !memcmp(type, "cgroup2", 7))
			 : !(ntype == 6 && !memcmp(type, "cgroup", 6) && has_word(opts, nopts, "memory")))
		return 0;
	char r[MS_CGROUP_PATH];
	size_t rl = unescape(r, sizeof r, root, nroot);
	if (rl == 1 && r[0] == '/')
		rl = 0; /* the hierarchy's root: the group's path as it is */
	size_t gl = strlen(group);
	if (gl < rl || memcmp(group, r, rl) || (group[rl] && group[rl] != '/'))
		return 0; /* a bind mount of another part of the hierarchy */
	size_t pl = unescape(dir, size, point, npoint);
	const char *rest = group + rl;
	size_t restl = strlen(rest);
	if (restl == 1 && rest[0] == '/')
		restl = 0;
	if (pl + restl + 1 > size)
		return 0;
	memcpy(dir + pl, rest, restl);
	dir[pl + restl] = '\0';
	return 1;
}

int64_t ms_cgroup_number(const char *text, size_t len)
{
	size_t i = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t'))
		i++;
	if (i == len || text[i] < '0' || text[i] > '9')
		return MS_CGROUP_NONE;
	uint64_t v = 0;
	for (; i < len && text[i] >= '0' && text[i] <= '9'; i++)
		v = v > UINT64_MAX / 10 ? UINT64_MAX : v * 10 + (uint64_t)(text[i] - '0');
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

int64_t ms_cgroup_limit(const char *text, size_t len)
{
	int64_t v = ms_cgroup_number(text, len);
	return v >= V1_UNLIMITED ? MS_CGROUP_NONE : v;
}

int64_t ms_cgroup_key(const char *text, size_t len, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = text, *end = text + len; p < end;) {
		const char *e = line_end(p, end);
		if ((size_t)(e - p) > k && !memcmp(p, key, k) && p[k] == ' ')
			return ms_cgroup_number(p + k + 1, (size_t)(e - p - k - 1));
		p = e + 1;
	}
	return MS_CGROUP_NONE;
}
