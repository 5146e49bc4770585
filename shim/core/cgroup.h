/* The memory cgroup's files parsed (intercept/cgroup.c reads them): which group /proc/self/cgroup
 * names, where /proc/self/mountinfo mounts its hierarchy, and the values of its files, v1 and v2.
 * Pure logic on text the caller read: no system call, no allocation. */
#ifndef MS_CORE_CGROUP_H
#define MS_CORE_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#define MS_CGROUP_PATH 512  /* the group's directory, NUL included */
#define MS_CGROUP_NONE (-1) /* a value not given: no limit, a file missing or unreadable */

/* The memory controller's group in the text of /proc/self/cgroup (LEN bytes): a cgroup v1 line
 * naming "memory" wins over the v2 line ("0::/path"), as the kernel charges there.  Its path into
 * PATH (SIZE bytes); returns 1 or 2 (the version), 0 when neither is there or the path is too long. */
int ms_cgroup_group(const char *text, size_t len, char *path, size_t size);

/* One line of /proc/self/mountinfo (no newline, LEN bytes): for a mount of VERSION's hierarchy
 * (v1: fstype cgroup with the memory option; v2: cgroup2) whose root is a prefix of GROUP, the
 * group's directory (mount point + the rest of GROUP, octal escapes undone) into DIR (SIZE bytes);
 * returns 1, else 0. */
int ms_cgroup_mount_line(const char *line, size_t len, int version, const char *group, char *dir, size_t size);

/* A file's number (memory.current, memory.usage_in_bytes, ...): leading digits, MS_CGROUP_NONE when
 * there are none ("max", an empty file). */
int64_t ms_cgroup_number(const char *text, size_t len);

/* A limit as the file states it: v2 "max", and v1's "unlimited" (the page counter's largest value
 * in bytes, near 2^63), are MS_CGROUP_NONE. */
int64_t ms_cgroup_limit(const char *text, size_t len);

/* The value of the line "KEY N" in a flat keyed file (memory.events, memory.oom_control), KEY
 * whole (oom_kill, not oom_group_kill); MS_CGROUP_NONE when absent. */
int64_t ms_cgroup_key(const char *text, size_t len, const char *key);

#endif
