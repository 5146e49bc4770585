/* /proc/meminfo's total and available memory (input/meminfo.h): a pure parse of its text, and the
 * file read whole (a few kB, one read). */
#include "input/meminfo.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A line's value after its colon, in bytes: kB means KiB, no unit bytes; -1 when it is not a
 * number or names another unit. */
static long long mf_meminfo_value(const char *p)
{
	char *end;
	errno = 0;
	long long v = strtoll(p, &end, 10);
	if (errno || end == p || v < 0)
		return -1;
	while (*end == ' ' || *end == '\t')
		end++;
	if (!strncmp(end, "kB", 2))
		return v > LLONG_MAX / 1024 ? -1 : v * 1024;
	return *end == '\n' || !*end ? v : -1;
}

/* The value of the line NAME (the whole name before the colon), or -1 when there is none. */
static long long mf_meminfo_field(const char *text, const char *name)
{
	size_t n = strlen(name);
	for (const char *line = text; line && *line;) {
		if (!strncmp(line, name, n) && line[n] == ':')
			return mf_meminfo_value(line + n + 1);
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return -1;
}

int mf_meminfo_parse(const char *text, struct mf_meminfo *m)
{
	m->total = mf_meminfo_field(text, "MemTotal");
	m->available = mf_meminfo_field(text, "MemAvailable");
	return m->total >= 0 ? 0 : -1;
}

int mf_meminfo_read(const char *path, struct mf_meminfo *m)
{
	char text[16384];
	int fd = open(path ? path : "/proc/meminfo", O_RDONLY | O_CLOEXEC);
	ssize_t len = 0, got;
	m->total = m->available = -1;
	if (fd < 0)
		return -1;
	while (len < (ssize_t)sizeof text - 1 && (got = read(fd, text + len, sizeof text - 1 - (size_t)len)) > 0)
		len += got;
	close(fd);
	text[len] = '\0';
	return mf_meminfo_parse(text, m);
}
