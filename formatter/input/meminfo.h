/* The host's memory as the kernel reports it in /proc/meminfo (meminfo.c): what memshim top shows
 * above its table, the total and what is still available to a new program. */
#ifndef MF_MEMINFO_H
#define MF_MEMINFO_H

struct mf_meminfo {
	long long total;     /* MemTotal, bytes */
	long long available; /* MemAvailable, bytes; -1 where the kernel has no such line (before 3.14) */
};

/* MemTotal and MemAvailable out of TEXT, /proc/meminfo's lines ("MemTotal:  24576000 kB", in any
 * order, kB meaning KiB); 0, or -1 when TEXT has no MemTotal.  Reads nothing else: unit-tested. */
int mf_meminfo_parse(const char *text, struct mf_meminfo *m);

/* PATH (NULL: /proc/meminfo) read and parsed; -1 when it cannot be read or has no MemTotal. */
int mf_meminfo_read(const char *path, struct mf_meminfo *m);

#endif
