/* memshim-top (`memshim top`): this user's running memshim processes on this host, one row per
 * process (a rank is a process), read from their live records (shim/output/live_record.h through
 * formatter/input/live.c): open stages, CPU and GPU live and peak, runtime, the age of the last update.
 * Processes killed with SIGKILL keep their record and stay, marked, with their last numbers, after
 * the running ones; those gone for over an hour are counted, not listed, unless asked (--all, DIR).
 * Above them, the host's memory (/proc/meminfo's total and available), read at every refresh.
 * A curses view refreshed every second; --once prints one table, --json one JSON document. */
#include "base/base.h"
#include "input/live.h"
#include "input/meminfo.h"

#include <curses.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char top_usage[] =
	"usage: memshim top [--once | --json] [--sort KEY] [--all] [DIR...]\n"
	"Shows this user's running memshim processes on this host from their live records: pid, rank,\n"
	"command, open stages (outermost first), CPU and GPU memory live and peak (GPU per device),\n"
	"the memory cgroup's headroom, runtime and the time since the last update, under a line with\n"
	"the host's memory (\"host 24.0GB, 19.3GB available\": MemTotal and MemAvailable of\n"
	"/proc/meminfo, read at every refresh; --once prints it first).  Processes killed with\n"
	"SIGKILL are kept, marked \"killed\", with their last numbers, listed after the running ones;\n"
	"those gone for over an hour are only counted unless --all or a DIR is given (memshim-format\n"
	"--recover RECORD -o FILE writes one out; removing the record forgets it).  Records are read\n"
	"from $MEMSHIM_LIVE_DIR, $XDG_RUNTIME_DIR/memshim or /dev/shm/memshim-<uid>; each DIR adds\n"
	"the records in DIR (a MEMSHIM_LIVE_DIR) and shows only records in DIR or of processes\n"
	"writing their metrics file under DIR (a run directory).\n"
	"  --once       prints one table and exits\n"
	"  --json       prints one JSON array (one object per process) and exits\n"
	"  --sort KEY   cpu (live CPU, the default), peak, gpu, pid, rank, time, update\n"
	"  --all        also lists processes gone for over an hour\n"
	"Keys in the live view: c p P g r t u sort as above (p: pid, P: peak), R reverses, a shows\n"
	"all, q quits.\n";

/* A gone process's record is listed for this long after its last update (longer with --all). */
#define GONE_LISTED_S 3600.0

enum key { K_CPU, K_PEAK, K_GPU, K_PID, K_RANK, K_TIME, K_UPDATE };
static const char *const key_names[] = { "cpu", "peak", "gpu", "pid", "rank", "time", "update" };

struct row {
	char *path;
	struct ms_live_record *r;
	int alive, torn;
};

struct rows {
	struct row *v;
	size_t n, cap;
	size_t bad;          /* records that could not be read */
	size_t hidden;       /* records of processes gone for over GONE_LISTED_S, not listed */
};

struct top {
	char **dirs;         /* where records are read */
	size_t ndirs;
	char **runs;         /* DIR arguments: only records in or writing under them */
	size_t nruns;
	enum key sort;
	int reverse;
	int all;             /* --all: list every gone process, however old */
};

static double now_unix(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- reading ---------------------------------------------------------------------------------- */

static int has_prefix_dir(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return !strncmp(path, dir, n) && (path[n] == '/' || (n && dir[n - 1] == '/'));
}

/* Whether a record in IN_DIR, of a process writing OUTPUT, is wanted. */
static int wanted(const struct top *t, const char *in_dir, const char *output)
{
	if (!t->nruns)
		return 1;
	for (size_t i = 0; i < t->nruns; i++)
		if (!strcmp(in_dir, t->runs[i]) || has_prefix_dir(output, t->runs[i]))
			return 1;
	return 0;
}

static int seen(const struct rows *rs, const char *path)
{
	for (size_t i = 0; i < rs->n; i++)
		if (!strcmp(rs->v[i].path, path))
			return 1;
	return 0;
}

/* A gone process stays listed for an hour, or always with --all or when a run directory is named. */
static int listed_when_gone(const struct top *t, const struct ms_live_record *r)
{
	return t->all || t->nruns || now_unix() - r->update_unix <= GONE_LISTED_S;
}

static void read_dir(const struct top *t, const char *dir, struct rows *rs, FILE *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name), sl = strlen(MS_LIVE_SUFFIX);
		if (len <= sl || strcmp(e->d_name + len - sl, MS_LIVE_SUFFIX))
			continue;
		char *path = mf_xasprintf("%s/%s", dir, e->d_name);
		struct ms_live_record *r = mf_xmalloc(sizeof *r);
		int torn = 0, ok = !seen(rs, path) && mf_live_read(path, r, &torn, err) == 0;
		rs->bad += !ok && !seen(rs, path);
		int alive = ok && mf_live_alive(r), old = ok && !alive && !listed_when_gone(t, r);
		rs->hidden += ok && old && wanted(t, dir, r->output);
		if (!ok || old || !wanted(t, dir, r->output)) {
			free(path);
			free(r);
			continue;
		}
		if (rs->n == rs->cap)
			rs->v = mf_xrealloc(rs->v, (rs->cap = rs->cap ? rs->cap * 2 : 16) * sizeof *rs->v);
		rs->v[rs->n++] = (struct row){ path, r, alive, torn };
	}
	if (d)
		closedir(d);
}

static void rows_free(struct rows *rs)
{
	for (size_t i = 0; i < rs->n; i++) {
		free(rs->v[i].path);
		free(rs->v[i].r);
	}
	free(rs->v);
	memset(rs, 0, sizeof *rs);
}

static int64_t gpu_live(const struct ms_live_record *r)
{
	return r->gpu_used ? r->live[MS_LIVE_GPU] : -1;
}

static double runtime(const struct row *w, double now)
{
	return w->alive ? now - w->r->start_unix : w->r->elapsed;
}

static const struct top *sorting;

static int cmp_num(double a, double b)
{
	return a < b ? -1 : a > b;
}

/* Running processes first; then largest first for memory and time, smallest first for pid and rank. */
static int by_key(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	double now = now_unix();
	int c = 0;
	if (a->alive != b->alive)
		return b->alive - a->alive;
	switch (sorting->sort) {
	case K_CPU: c = cmp_num((double)b->r->live[MS_LIVE_CPU], (double)a->r->live[MS_LIVE_CPU]); break;
	case K_PEAK: c = cmp_num((double)b->r->peak[MS_LIVE_CPU], (double)a->r->peak[MS_LIVE_CPU]); break;
	case K_GPU: c = cmp_num((double)gpu_live(b->r), (double)gpu_live(a->r)); break;
	case K_PID: c = cmp_num(a->r->pid, b->r->pid); break;
	case K_RANK: c = cmp_num(a->r->rank, b->r->rank); break;
	case K_TIME: c = cmp_num(runtime(b, now), runtime(a, now)); break;
	case K_UPDATE: c = cmp_num(b->r->update_unix, a->r->update_unix); break;
	}
	if (!c)
		c = cmp_num(a->r->pid, b->r->pid);
	return sorting->reverse ? -c : c;
}

static void collect(const struct top *t, struct rows *rs, FILE *err)
{
	memset(rs, 0, sizeof *rs);
	for (size_t i = 0; i < t->ndirs; i++)
		read_dir(t, t->dirs[i], rs, err);
	sorting = t;
	if (rs->n)
		qsort(rs->v, rs->n, sizeof *rs->v, by_key);
}

/* ---- cells ------------------------------------------------------------------------------------ */

static char *bytes(int64_t v)
{
	static const char units[] = "BKMGTP";
	double x = (double)(v < 0 ? 0 : v);
	int u = 0;
	while (x >= 1024 && u < 5)
		x /= 1024, u++;
	return u == 0 ? mf_xasprintf("%lldB", (long long)v) : mf_xasprintf(x < 10 ? "%.1f%c" : "%.0f%c", x, units[u]);
}

static char *duration(double s)
{
	if (!(s >= 0)) /* negative or NaN: a clock or a record gone wrong */
		s = 0;
	if (s > 1e9)
		s = 1e9;
	long v = (long)s;
	if (v < 60)
		return mf_xasprintf("%.1fs", s);
	if (v < 3600)
		return mf_xasprintf("%ldm%02lds", v / 60, v % 60);
	return mf_xasprintf("%ldh%02ldm", v / 3600, v % 3600 / 60);
}

/* The program's own name, then its arguments, space-separated. */
static char *command(const struct ms_live_record *r)
{
	size_t len = r->argv_len < sizeof r->argv ? r->argv_len : sizeof r->argv;
	size_t first = strnlen(r->argv, len);
	char *prog = mf_xasprintf("%.*s", (int)first, r->argv), *slash = strrchr(prog, '/');
	char *out = mf_xstrdup(slash && slash[1] ? slash + 1 : prog);
	free(prog);
	for (size_t i = first + 1; i < len;) {
		size_t n = strnlen(r->argv + i, len - i);
		char *s = mf_xasprintf("%s %.*s", out, (int)n, r->argv + i);
		free(out);
		out = s;
		i += n + 1;
	}
	return out;
}

static char *stages(const struct ms_live_record *r)
{
	char *out = mf_xstrdup("");
	for (int i = 0; i < r->nopen && i < MS_LIVE_STAGES; i++) {
		int id = r->open[i];
		if (id < 0 || id >= MS_LIVE_STAGES)
			continue;
		char *s = mf_xasprintf("%s%s%.*s", out, *out ? " > " : "", MS_LIVE_NAME, r->stage[id].name);
		free(out);
		out = s;
	}
	if (!*out) {
		free(out);
		out = mf_xstrdup("-");
	}
	return out;
}

static char *gpu(const struct ms_live_record *r)
{
	if (!r->gpu_used)
		return mf_xstrdup("-");
	char *out = mf_xstrdup("");
	for (int d = 0; d < MS_LIVE_DEVICES; d++) {
		if (!(r->devices_used & (1u << d)))
			continue;
		char *l = bytes(r->live[MS_LIVE_DEV0 + d]), *p = bytes(r->peak[MS_LIVE_DEV0 + d]);
		char *s = mf_xasprintf("%s%s%d:%s/%s", out, *out ? " " : "", d, l, p);
		free(l), free(p), free(out);
		out = s;
	}
	if (!*out) {
		free(out);
		char *l = bytes(r->live[MS_LIVE_GPU]), *p = bytes(r->peak[MS_LIVE_GPU]);
		out = mf_xasprintf("%s/%s", l, p);
		free(l), free(p);
	}
	return out;
}

static const char *state(const struct row *w)
{
	static char sig[32];
	if (!w->alive && w->r->state == MS_LIVE_SIGNALED) {
		snprintf(sig, sizeof sig, "signal %d", w->r->signal);
		return sig;
	}
	return w->alive ? "running" : w->r->state == MS_LIVE_ENDED ? "ended" : "killed";
}

enum { C_PID, C_RANK, C_STATE, C_CPU, C_GPU, C_CGROUP, C_TIME, C_UPD, C_STAGES, C_CMD, NCOLS };
static const char *const heads[NCOLS] = { "PID", "RANK", "STATE", "CPU LIVE/PEAK", "GPU LIVE/PEAK",
					   "CGROUP HEADROOM", "RUNTIME", "UPDATED", "STAGES", "COMMAND" };

/* The memory cgroup's headroom, its limit less its usage at the last reading ("1.9G of 24G"); "-"
 * without a limit or a reading. */
static char *headroom(const struct ms_live_record *r)
{
	if (!r->cgroup_version || r->cgroup_limit < 0)
		return mf_xstrdup("-");
	int64_t room = r->cgroup_limit - r->cgroup_usage;
	char *h = bytes(room > 0 ? room : 0), *l = bytes(r->cgroup_limit), *out = mf_xasprintf("%s of %s", h, l);
	free(h), free(l);
	return out;
}

/* The cgroup for --json: its usage, peak, limit and headroom as last read; null without a reading. */
static json_t *cgroup_json(const struct ms_live_record *r)
{
	if (!r->cgroup_version)
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "path", mf_live_text(r->cgroup_dir, strnlen(r->cgroup_dir, sizeof r->cgroup_dir)));
	json_object_set_new(o, "usage", json_integer(r->cgroup_usage));
	json_object_set_new(o, "peak", json_integer(r->cgroup_peak));
	json_object_set_new(o, "limit", r->cgroup_limit >= 0 ? json_integer(r->cgroup_limit) : json_null());
	json_object_set_new(o, "headroom",
			    r->cgroup_limit >= 0 ? json_integer(r->cgroup_limit - r->cgroup_usage) : json_null());
	return o;
}

static void cells(const struct row *w, double now, char *c[NCOLS])
{
	const struct ms_live_record *r = w->r;
	char *l = bytes(r->live[MS_LIVE_CPU]), *p = bytes(r->peak[MS_LIVE_CPU]), *age = duration(now - r->update_unix);
	c[C_PID] = mf_xasprintf("%d", r->pid);
	c[C_RANK] = r->rank >= 0 ? mf_xasprintf("%d", r->rank) : mf_xstrdup("-");
	c[C_STATE] = mf_xstrdup(state(w));
	c[C_CPU] = mf_xasprintf("%s/%s", l, p);
	c[C_GPU] = gpu(r);
	c[C_CGROUP] = headroom(r);
	c[C_TIME] = duration(runtime(w, now));
	c[C_UPD] = mf_xasprintf("%s ago", age);
	c[C_STAGES] = stages(r);
	c[C_CMD] = command(r);
	free(l), free(p), free(age);
}

static void cells_free(char *c[NCOLS])
{
	for (int i = 0; i < NCOLS; i++)
		free(c[i]);
}

/* "24.0GB": three significant digits, no space, as the dump's cgroup line writes bytes. */
static char *host_bytes(long long v)
{
	char *t = mf_fmt_bytes((double)v), *sp = strchr(t, ' ');
	if (sp)
		memmove(sp, sp + 1, strlen(sp));
	return t;
}

/* "host 24.0GB, 19.3GB available" from /proc/meminfo as it is now ("host 24.0GB" on a kernel
 * without MemAvailable); NULL when it cannot be read. */
static char *host_line(void)
{
	struct mf_meminfo m;
	if (mf_meminfo_read(NULL, &m))
		return NULL;
	char *total = host_bytes(m.total), *line;
	if (m.available >= 0) {
		char *avail = host_bytes(m.available);
		line = mf_xasprintf("host %s, %s available", total, avail);
		free(avail);
	} else {
		line = mf_xasprintf("host %s", total);
	}
	free(total);
	return line;
}

/* ---- --once and --json -------------------------------------------------------------------------- */

/* One line of cells, each padded to its column's display width, the last (the command) as it is. */
static void print_line(FILE *out, const size_t *w, const char *const *c)
{
	for (int k = 0; k < NCOLS - 1; k++)
		fprintf(out, "%s%*s  ", c[k], (int)(w[k] - mf_width(c[k])), "");
	fprintf(out, "%s\n", c[NCOLS - 1]);
}

static void print_table(FILE *out, const struct rows *rs)
{
	double now = now_unix();
	size_t w[NCOLS];
	char *host = host_line();
	if (host)
		fprintf(out, "%s\n", host);
	free(host);
	char *(*all)[NCOLS] = mf_xmalloc((rs->n ? rs->n : 1) * sizeof *all);
	for (int k = 0; k < NCOLS; k++)
		w[k] = strlen(heads[k]);
	for (size_t i = 0; i < rs->n; i++) {
		cells(&rs->v[i], now, all[i]);
		for (int k = 0; k < NCOLS; k++)
			if (mf_width(all[i][k]) > w[k])
				w[k] = mf_width(all[i][k]);
	}
	print_line(out, w, heads);
	for (size_t i = 0; i < rs->n; i++) {
		print_line(out, w, (const char *const *)all[i]);
		cells_free(all[i]);
	}
	free(all);
	if (!rs->n)
		fprintf(out, "(no memshim process with a live record)\n");
	if (rs->hidden)
		fprintf(out, "(%zu more of processes gone for over an hour: memshim top --all lists them)\n", rs->hidden);
}

static json_t *comp(int64_t live, int64_t peak)
{
	json_t *o = json_object();
	json_object_set_new(o, "live", json_integer(live));
	json_object_set_new(o, "peak", json_integer(peak));
	return o;
}

static json_t *row_json(const struct row *w, double now)
{
	const struct ms_live_record *r = w->r;
	json_t *o = json_object(), *argv = json_array(), *st = json_array(), *devs = json_array();
	size_t len = r->argv_len < sizeof r->argv ? r->argv_len : sizeof r->argv;
	for (size_t i = 0; i < len;) {
		size_t n = strnlen(r->argv + i, len - i);
		json_array_append_new(argv, mf_live_text(r->argv + i, n));
		i += n + 1;
	}
	for (int i = 0; i < r->nopen && i < MS_LIVE_STAGES; i++)
		if (r->open[i] >= 0 && r->open[i] < MS_LIVE_STAGES)
			json_array_append_new(st, mf_live_text(r->stage[r->open[i]].name,
							       strnlen(r->stage[r->open[i]].name, MS_LIVE_NAME)));
	json_object_set_new(o, "pid", json_integer(r->pid));
	json_object_set_new(o, "rank", r->rank >= 0 ? json_integer(r->rank) : json_null());
	json_object_set_new(o, "state", json_string(state(w)));
	json_object_set_new(o, "argv", argv);
	json_object_set_new(o, "open_stages", st);
	json_object_set_new(o, "cpu", comp(r->live[MS_LIVE_CPU], r->peak[MS_LIVE_CPU]));
	if (r->gpu_used) {
		json_t *g = comp(r->live[MS_LIVE_GPU], r->peak[MS_LIVE_GPU]);
		for (int d = 0; d < MS_LIVE_DEVICES; d++) {
			if (!(r->devices_used & (1u << d)))
				continue;
			json_t *dev = comp(r->live[MS_LIVE_DEV0 + d], r->peak[MS_LIVE_DEV0 + d]);
			json_object_set_new(dev, "device", json_integer(d));
			json_array_append_new(devs, dev);
		}
		json_object_set_new(g, "devices", devs);
		json_object_set_new(o, "gpu", g);
	} else {
		json_decref(devs);
		json_object_set_new(o, "gpu", json_null());
	}
	json_object_set_new(o, "cgroup", cgroup_json(r));
	json_object_set_new(o, "start_time", json_real(r->start_unix));
	json_object_set_new(o, "runtime", json_real(runtime(w, now)));
	json_object_set_new(o, "updated", json_real(r->update_unix));
	json_object_set_new(o, "record", mf_live_text(w->path, strlen(w->path)));
	json_object_set_new(o, "output", mf_live_text(r->output, strnlen(r->output, sizeof r->output)));
	json_object_set_new(o, "torn", json_boolean(w->torn));
	return o;
}

static void print_json(FILE *out, const struct rows *rs)
{
	double now = now_unix();
	json_t *a = json_array();
	for (size_t i = 0; i < rs->n; i++)
		json_array_append_new(a, row_json(&rs->v[i], now));
	json_dumpf(a, out, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
	fputc('\n', out);
	json_decref(a);
}

/* ---- the curses view ------------------------------------------------------------------------- */

/* One row at the cursor, cut at the screen's right edge (a long command never wraps). */
static void draw_line(const size_t *w, const char *const *c)
{
	char *line = mf_xstrdup("");
	for (int k = 0; k < NCOLS; k++) {
		int pad = k < NCOLS - 1 ? (int)(w[k] - mf_width(c[k])) + 2 : 0;
		char *s = mf_xasprintf("%s%s%*s", line, c[k], pad, "");
		free(line);
		line = s;
	}
	int y, x;
	getyx(stdscr, y, x);
	(void)y;
	addnstr(line, COLS > x ? COLS - x : 0);
	free(line);
}

static void draw(const struct top *t, const struct rows *rs)
{
	double now = now_unix();
	size_t w[NCOLS], killed = 0;
	char *(*all)[NCOLS] = mf_xmalloc((rs->n ? rs->n : 1) * sizeof *all);
	for (int k = 0; k < NCOLS; k++)
		w[k] = strlen(heads[k]);
	for (size_t i = 0; i < rs->n; i++) {
		cells(&rs->v[i], now, all[i]);
		killed += !rs->v[i].alive;
		for (int k = 0; k < NCOLS - 1; k++)
			if (mf_width(all[i][k]) > w[k])
				w[k] = mf_width(all[i][k]);
	}
	erase();
	char more[64] = "";
	if (rs->hidden)
		snprintf(more, sizeof more, "; %zu more gone over an hour ago", rs->hidden);
	mvprintw(0, 0, "memshim top: %zu process%s (%zu gone%s)%s, sorted by %s%s; q quits, c p P g r t u sort, "
		 "R reverses, a lists all", rs->n, rs->n == 1 ? "" : "es", killed, more,
		 rs->bad ? " + unreadable records" : "", key_names[t->sort], t->reverse ? " (reversed)" : "");
	char *host = host_line(); /* read at every refresh, as the rows are */
	if (host)
		mvprintw(1, 0, "%s", host);
	free(host);
	attron(A_REVERSE);
	move(2, 0);
	draw_line(w, heads);
	clrtoeol();
	attroff(A_REVERSE);
	for (size_t i = 0; i < rs->n && (int)i + 3 < LINES; i++) {
		int dim = !rs->v[i].alive;
		if (dim)
			attron(A_BOLD);
		move((int)i + 3, 0);
		draw_line(w, (const char *const *)all[i]);
		if (dim)
			attroff(A_BOLD);
		cells_free(all[i]);
	}
	for (size_t i = (size_t)(LINES > 3 ? LINES - 3 : 0); i < rs->n; i++)
		cells_free(all[i]);
	if (!rs->n)
		mvprintw(3, 0, "(no memshim process with a live record)");
	free(all);
	refresh();
}

/* Returns 0 to go on, 1 to quit. */
static int key(struct top *t, int ch)
{
	switch (ch) {
	case 'q': case 'Q': case 27: return 1;
	case 'c': t->sort = K_CPU; break;
	case 'P': t->sort = K_PEAK; break;
	case 'g': t->sort = K_GPU; break;
	case 'p': t->sort = K_PID; break;
	case 'r': t->sort = K_RANK; break;
	case 't': t->sort = K_TIME; break;
	case 'u': t->sort = K_UPDATE; break;
	case 'R': t->reverse = !t->reverse; break;
	case 'a': t->all = !t->all; break;
	default: break;
	}
	return 0;
}

static int live_view(struct top *t)
{
	if (!initscr())
		return fputs("memshim top: cannot start the terminal (try --once)\n", stderr), MF_BAD;
	cbreak();
	noecho();
	curs_set(0);
	keypad(stdscr, TRUE);
	timeout(1000);
	for (int quit = 0; !quit;) {
		struct rows rs;
		collect(t, &rs, NULL);
		draw(t, &rs);
		rows_free(&rs);
		int ch = getch();
		while (ch != ERR && !quit) {
			quit = key(t, ch);
			ch = quit ? ERR : (timeout(0), getch());
		}
		timeout(1000);
	}
	endwin();
	return MF_OK;
}

/* ---- the command line -------------------------------------------------------------------------- */

static void add(char ***v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i], s))
			return;
	*v = mf_xrealloc(*v, (*n + 1) * sizeof **v);
	(*v)[(*n)++] = mf_xstrdup(s);
}

int main(int argc, char **argv)
{
	struct top t = { 0 };
	int once = 0, as_json = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--once"))
			once = 1;
		else if (!strcmp(a, "--json"))
			as_json = 1;
		else if (!strcmp(a, "--all"))
			t.all = 1;
		else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return fputs(top_usage, stdout), MF_OK;
		else if (!strcmp(a, "--sort") && i + 1 < argc) {
			size_t k = 0;
			while (k < sizeof key_names / sizeof *key_names && strcmp(key_names[k], argv[i + 1]))
				k++;
			if (k == sizeof key_names / sizeof *key_names)
				return fprintf(stderr, "memshim top: unknown sort key %s (cpu, peak, gpu, pid, rank, "
					       "time, update)\n", argv[i + 1]), MF_BAD;
			t.sort = (enum key)k;
			i++;
		} else if (a[0] == '-')
			return fprintf(stderr, "memshim top: unknown option %s (see memshim top --help)\n", a), MF_BAD;
		else {
			char real[PATH_MAX];
			if (!realpath(a, real))
				return fprintf(stderr, "memshim top: %s: %s\n", a, strerror(errno)), MF_BAD;
			add(&t.runs, &t.nruns, real);
			add(&t.dirs, &t.ndirs, real);
		}
	}
	char *dflt = mf_live_default_dir();
	const char *env = getenv("MEMSHIM_LIVE_DIR");
	if (env && *env)
		add(&t.dirs, &t.ndirs, env);
	add(&t.dirs, &t.ndirs, dflt);
	free(dflt);
	int rc = MF_OK;
	if (once || as_json || !isatty(STDOUT_FILENO)) {
		struct rows rs;
		collect(&t, &rs, stderr);
		if (as_json)
			print_json(stdout, &rs);
		else
			print_table(stdout, &rs);
		rows_free(&rs);
	} else {
		rc = live_view(&t);
	}
	for (size_t i = 0; i < t.ndirs; i++)
		free(t.dirs[i]);
	for (size_t i = 0; i < t.nruns; i++)
		free(t.runs[i]);
	free(t.dirs);
	free(t.runs);
	return rc;
}
