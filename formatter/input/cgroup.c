/* The memory cgroup in what memshim-format reads: a live record's (shim/intercept/cgroup.c read it)
 * in the document made from it, and for an incomplete file or record whose process is gone, the
 * group's files read again now, when they are still there: its OOM kill count gone up says the
 * group's OOM killer ended the process (which the process could not write), and its high-water then
 * is the one the kill happened at.  Only the same group on the same boot is read again (the boot
 * id and the directory's device and inode the file recorded): a file read on another host, after
 * a reboot, or once the group was made again under its path says only what it recorded. */
#include "input/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void mf_live_cgroup_stage(json_t *o, const struct ms_live_record *r, const struct ms_live_span *sp)
{
	if (!r->cgroup_version || !sp->peak[MS_LIVE_CGROUP])
		return;
	json_t *c = json_object();
	json_object_set_new(c, "begin", json_integer(sp->begin[MS_LIVE_CGROUP]));
	json_object_set_new(c, "end", json_integer(sp->end[MS_LIVE_CGROUP]));
	json_object_set_new(c, "peak", json_integer(sp->peak[MS_LIVE_CGROUP]));
	json_object_set_new(c, "peak_kind", json_string(r->cgroup_per_reader ? "kernel" : "reads"));
	json_object_set_new(o, "cgroup", c);
}

static int64_t mf_cgroup_peak(const struct ms_live_record *r)
{
	return r->cgroup_peak > r->cgroup_usage ? r->cgroup_peak : r->cgroup_usage;
}

void mf_live_cgroup_flat(json_t *m, const struct ms_live_record *r)
{
	if (!r->cgroup_version)
		return;
	json_object_set_new(m, "process_mem_cgroup_peak", json_integer(mf_cgroup_peak(r)));
	if (r->cgroup_limit >= 0)
		json_object_set_new(m, "process_mem_cgroup_limit", json_integer(r->cgroup_limit));
}

void mf_live_cgroup_process(json_t *p, const struct ms_live_record *r, int64_t peak_read)
{
	if (!r->cgroup_version)
		return;
	int v2 = r->cgroup_version == 2;
	json_t *c = json_object();
	json_object_set_new(c, "version", json_integer(r->cgroup_version));
	json_t *path = json_stringn(r->cgroup_dir, strnlen(r->cgroup_dir, sizeof r->cgroup_dir));
	json_object_set_new(c, "path", path ? path : json_string("?")); /* not UTF-8: no path to read */
	size_t boot = strnlen(r->cgroup_boot_id, sizeof r->cgroup_boot_id);
	if (boot && boot < sizeof r->cgroup_boot_id)
		json_object_set_new(c, "boot_id", json_stringn(r->cgroup_boot_id, boot));
	if (r->cgroup_ino && r->cgroup_ino <= INT64_MAX && r->cgroup_dev <= INT64_MAX) {
		json_object_set_new(c, "dev", json_integer((json_int_t)r->cgroup_dev));
		json_object_set_new(c, "ino", json_integer((json_int_t)r->cgroup_ino));
	}
	json_object_set_new(c, "usage", json_integer(r->cgroup_usage));
	json_object_set_new(c, "peak", json_integer(mf_cgroup_peak(r)));
	json_object_set_new(c, "peak_read", json_integer(peak_read));
	if (r->cgroup_limit >= 0)
		json_object_set_new(c, "limit", json_integer(r->cgroup_limit));
	if (r->cgroup_oom_kills >= 0) {
		json_object_set_new(c, "oom_kills", json_integer(r->cgroup_oom_kills));
		json_object_set_new(c, "oom_kills_at_start",
				    json_integer(r->cgroup_oom_kills_first >= 0 ? r->cgroup_oom_kills_first : 0));
	}
	json_object_set_new(c, "peak_kind", json_string(r->cgroup_per_reader ? "kernel" : "reads"));
	json_object_set_new(c, "read",
			    json_string(v2 ? "cgroup v2 files as the live record last held them"
					   : "cgroup v1 files as the live record last held them"));
	json_object_set_new(p, "cgroup", c);
}

/* The number in FILE of the group at DIR (the value of the line KEY when KEY is not NULL), or -1. */
static int64_t mf_cgroup_file(const char *dir, const char *file, const char *key)
{
	char path[PATH_MAX], text[1024];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, sizeof text - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	const char *p = text;
	if (key) {
		size_t k = strlen(key);
		while (p && !(strncmp(p, key, k) == 0 && p[k] == ' ')) {
			p = strchr(p, '\n');
			p = p ? p + 1 : NULL;
		}
		if (!p)
			return -1;
		p += k + 1;
	}
	char *end;
	long long v = strtoll(p, &end, 10);
	return end == p || v < 0 ? -1 : (int64_t)v;
}

/* This boot's id into OUT (SIZE bytes, the newline dropped); 0, or -1 when it cannot be read. */
static int mf_boot_id(char *out, size_t size)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, out, size - 1);
	close(fd);
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
		n--;
	if (n <= 0)
		return -1;
	out[n] = '\0';
	return 0;
}

/* Whether the group CG recorded is the one at DIR now: this boot's, and the same directory (a
 * group removed and made again under the path is another).  A file without them: not known. */
static int mf_same_group(json_t *cg, const char *dir)
{
	const char *boot = json_string_value(json_object_get(cg, "boot_id"));
	json_t *dev = json_object_get(cg, "dev"), *ino = json_object_get(cg, "ino");
	char now[64];
	struct stat st;
	if (!boot || !json_is_integer(dev) || !json_is_integer(ino) || mf_boot_id(now, sizeof now) != 0 ||
	    strcmp(boot, now) != 0 || stat(dir, &st) != 0)
		return 0;
	return (uint64_t)json_integer_value(dev) == (uint64_t)st.st_dev &&
	       (uint64_t)json_integer_value(ino) == (uint64_t)st.st_ino;
}

/* Whether process PID of this host still runs (or is another user's). */
static int mf_pid_runs(json_int_t pid)
{
	return pid > 0 && pid <= INT_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Whether nothing says the process ended otherwise than by SIGKILL: no file its signal handler wrote,
 * no record of a fatal signal (the OOM killer's SIGKILL runs no handler; a Go program's record that
 * says "exited" cannot tell its exit from one). */
static int mf_sigkilled(json_t *root)
{
	const char *reason = json_string_value(json_object_get(root, "reason"));
	const char *state = json_string_value(json_object_get(json_object_get(root, "live_record"), "state"));
	return !(reason && !strcmp(reason, "signal")) && !(state && strcmp(state, "killed") && strcmp(state, "exited"));
}

void mf_cgroup_after_exit(json_t *root)
{
	json_t *cg = json_object_get(json_object_get(root, "process"), "cgroup");
	const char *dir = json_string_value(json_object_get(cg, "path"));
	const char *reason = json_string_value(json_object_get(root, "reason"));
	if (!dir || json_is_true(json_object_get(root, "complete")) || (reason && !strcmp(reason, "live")) ||
	    !mf_same_group(cg, dir) || mf_pid_runs(json_integer_value(json_object_get(root, "pid"))))
		return;
	int v2 = json_integer_value(json_object_get(cg, "version")) == 2;
	json_t *before = json_object_get(cg, "oom_kills");
	int64_t after = mf_cgroup_file(dir, v2 ? "memory.events" : "memory.oom_control", "oom_kill");
	int64_t peak = mf_cgroup_file(dir, v2 ? "memory.peak" : "memory.max_usage_in_bytes", NULL);
	if (after < 0 || !json_is_integer(before))
		return; /* the group is gone (or states no kills): the last reading is all there is */
	json_object_set_new(cg, "oom_kills_after", json_integer(after));
	json_object_set_new(cg, "oom_killed", json_boolean(after > json_integer_value(before) && mf_sigkilled(root)));
	if (peak > json_integer_value(json_object_get(cg, "peak"))) {
		json_object_set_new(cg, "peak", json_integer(peak));
		json_object_set_new(json_object_get(root, "metrics"), "process_mem_cgroup_peak", json_integer(peak));
	}
}
