/* Who writes the metrics file and where (see identity.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "output/identity.h"

#define ARGV_MAX 4096

static char argv_buf[ARGV_MAX];
static size_t argv_len;
static int argv_truncated;

void ms_identity_init(void)
{
	argv_len = ms_process_cmdline(argv_buf, sizeof argv_buf, &argv_truncated);
}

const char *ms_identity_argv(size_t *len, int *truncated)
{
	*len = argv_len;
	*truncated = argv_truncated;
	return argv_buf;
}

/* One placeholder C into OUT; *OWN becomes 1 when what it wrote is this process's alone. */
static size_t expand_one(char c, char *out, size_t size, int *own)
{
	struct utsname u;
	const struct ms_rank *r = &ms_proc.rank;
	long v = c == 'r' ? r->rank : r->local_rank;
	switch (c) {
	case 'p':
		*own = 1;
		return ms_format(out, size, "%d", (int)ms_proc.pid);
	case 'r':
	case 'l':
		if (v >= 0) {
			*own |= r->own && r->rank >= 0;
			return ms_format(out, size, "%ld", v);
		}
		*own = 1;
		return ms_format(out, size, "pid%d", (int)ms_proc.pid);
	case 'h':
		return ms_format(out, size, "%s", syscall(SYS_uname, &u) == 0 ? u.nodename : "host");
	default:
		return ms_format(out, size, "%%");
	}
}

int ms_identity_expand(char *out, size_t size, const char *tmpl)
{
	size_t n = 0;
	int own = 0;
	for (; *tmpl && n + 1 < size; tmpl++) {
		if (tmpl[0] == '%' && tmpl[1] && strchr("prlh%", tmpl[1])) {
			n += expand_one(tmpl[1], out + n, size - n, &own);
			tmpl++;
		} else {
			out[n++] = *tmpl;
		}
	}
	out[n < size ? n : size - 1] = '\0';
	return own;
}

void ms_identity_output_path(char *out, size_t size)
{
	int own = ms_identity_expand(out, size, ms_proc.output);
	size_t n = strlen(out);
	if (ms_proc.is_child && !ms_proc.own_output && !own)
		ms_format(out + n, size - n, ".%d", (int)ms_proc.pid);
}

/* At start: an output directory that cannot take the file is found now, not after a six-hour
 * run; the file then goes to $TMPDIR (or /tmp) under the same name.  Returns 1 when it moved. */
int ms_identity_check_output(void)
{
	char dir[MS_PATH_MAX], fallback[MS_PATH_MAX];
	const char *out = ms_proc.output, *slash = strrchr(out, '/');
	for (const char *p = strchr(out, '%'); p; p = strchr(p + 2, '%')) {
		if (!p[1] || !strchr("prlh%", p[1])) { /* written as it is, which may not be what was meant */
			ms_warn("MEMSHIM_OUTPUT %s: %%%c is no placeholder (%%p, %%r, %%l, %%h, %%%%); kept as written", out,
				p[1] ? p[1] : ' ');
			break;
		}
	}
	if (!slash || memchr(out, '%', (size_t)(slash - out)) || (size_t)(slash - out) >= sizeof dir)
		return 0; /* a placeholder in the directory: judged per process when the file is written */
	size_t len = (size_t)(slash - out);
	memcpy(dir, out, len);
	dir[len] = '\0';
	if (!len || syscall(SYS_faccessat, AT_FDCWD, dir, W_OK | X_OK) == 0)
		return 0;
	int e = errno;
	const char *tmp = ms_setting_text("TMPDIR");
	if (!tmp || tmp[0] != '/')
		tmp = "/tmp";
	if (ms_format(fallback, sizeof fallback, "%s/%s", tmp, slash + 1) >= sizeof fallback - 1 ||
	    syscall(SYS_faccessat, AT_FDCWD, tmp, W_OK | X_OK) != 0)
		return 0; /* nowhere better: the warning comes when the file cannot be written */
	ms_warn("cannot write metrics file %s: %s (%s); writing %s instead", out, dir, ms_errno_text(e), fallback);
	ms_process_set_output(fallback);
	return 1;
}
