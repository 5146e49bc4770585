/* Which processes of a run matter: ranks, and the launchers and shells around them; the one
 * selection every mode makes (mf_select). */
#include "base/base.h"
#include "model/document.h"
#include "model/select.h"
#include "model/sites.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether every stage entry is an implicit one (the init from load to the first stage). */
static int mf_no_own_stage(const struct mf_file *f)
{
	size_t i;
	json_t *s;
	json_array_foreach(f->stages, i, s)
		if (!json_is_true(json_object_get(s, "implicit")))
			return 0;
	return 1;
}

/* The process's CPU peak as the dump shows it; -1 when the file does not say. */
static double mf_cpu_peak(const struct mf_file *f)
{
	double x;
	return mf_num(json_object_get(f->file_metrics, "process_mem_cpu_peak"), &x) ? x : -1;
}

/* A stage a forked child did not open itself: one that was open in its parent at the fork, so it
 * began with the child (start 0) and its one call was closed at the child's exit. */
static int mf_inherited_stage(json_t *s)
{
	double start;
	return json_is_true(json_object_get(s, "closed_at_exit")) && mf_num(json_object_get(s, "start"), &start) &&
	       start == 0 && mf_calls_of(s) <= 1;
}

static int mf_no_stage_of_its_own(const struct mf_file *f)
{
	size_t i;
	json_t *s;
	json_array_foreach(f->stages, i, s)
		if (!json_is_true(json_object_get(s, "implicit")) && !mf_inherited_stage(s))
			return 0;
	return 1;
}

double mf_fork_added(const struct mf_file *f)
{
	return f->forked && f->inherited_cpu >= 0 ? mf_cpu_peak(f) : -1;
}

static const struct mf_file *mf_parent(const struct mf_file *f, const struct mf_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (&files[i] != f && files[i].pid == f->ppid)
			return &files[i];
	return NULL;
}

int mf_small_fork(const struct mf_file *f, const struct mf_file *files, size_t n)
{
	double added = mf_fork_added(f), limit = MF_FORK_ADDED;
	if (added < 0 || f->gpu_used || !mf_no_stage_of_its_own(f) || mf_own_rank(f, files, n))
		return 0;
	const struct mf_file *parent = mf_parent(f, files, n);
	if (parent && mf_cpu_peak(parent) * 0.05 > limit)
		limit = mf_cpu_peak(parent) * 0.05;
	return added < limit;
}

void mf_infer_lightning_ranks(struct mf_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct mf_file *f = &files[i];
		for (size_t j = 0; j < n && !f->has_rank; j++) {
			const struct mf_file *c = &files[j];
			if (c->ppid != f->pid || c->forked || !c->has_rank || c->local_rank < 1 || !c->rank_source ||
			    strcmp(c->rank_source, "lightning"))
				continue;
			f->has_rank = 1; /* local rank 0 of the node its children are on */
			f->rank = c->rank - c->local_rank;
			f->local_rank = 0;
			f->world_size = c->world_size;
			f->rank_source = "lightning, from its ranks";
		}
	}
}

int mf_own_rank(const struct mf_file *f, const struct mf_file *files, size_t n)
{
	if (!f->has_rank)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct mf_file *p = &files[i];
		if (p != f && p->pid == f->ppid && p->has_rank && p->rank == f->rank &&
		    !strcmp(p->rank_source ? p->rank_source : "", f->rank_source ? f->rank_source : ""))
			return 0; /* a worker or helper its rank started: it inherited the rank */
	}
	return 1;
}

/* ARGV[0] without its directory (a title a process gave itself, "postgres: checkpointer", as it is). */
static const char *mf_base(const char *arg)
{
	const char *slash = strchr(arg, ' ') ? NULL : strrchr(arg, '/');
	return slash && slash[1] ? slash + 1 : arg;
}

/* Whether FA's last N arguments are GA's from its argument FROM on; the first one compared is
 * compared by its base name when FROM is 0 (uv runs the venv's python). */
static int mf_ends_with_args(json_t *fa, json_t *ga, size_t from)
{
	size_t fn = json_array_size(fa), gn = json_array_size(ga), n = gn - from;
	for (size_t k = 0; k < n; k++) {
		const char *a = json_string_value(json_array_get(fa, fn - n + k));
		const char *b = json_string_value(json_array_get(ga, from + k));
		if (!a || !b || strcmp(k || from ? a : mf_base(a), k || from ? b : mf_base(b)))
			return 0;
	}
	return 1;
}

/* Whether process F ran G, an exec'd process started after it, with the command F was given, as
 * launchers do: F's arguments end with G's (time, env, conda run, uv run: `time python st.py` ran
 * `python st.py`), or F, a program run by an interpreter, ran that interpreter on its last
 * arguments (`python accelerate launch --cpu st.py --lr 1` ran `python st.py --lr 1`). */
static int mf_ran_command(const struct mf_file *f, const struct mf_file *g)
{
	json_t *fa = json_object_get(f->root, "argv"), *ga = json_object_get(g->root, "argv");
	size_t fn = json_array_size(fa), gn = json_array_size(ga);
	if (g == f || g->forked || g->pid == f->pid || !gn || gn >= fn || !json_is_string(json_array_get(ga, 0)) ||
	    (f->has_times && g->has_times && g->start_time < f->start_time))
		return 0;
	if (mf_ends_with_args(fa, ga, 0))
		return 1;
	const char *fp = json_string_value(json_array_get(fa, 0)), *gp = json_string_value(json_array_get(ga, 0));
	return gn >= 2 && fn > gn && fp && !strcmp(mf_base(fp), mf_base(gp)) && mf_ends_with_args(fa, ga, 1);
}

/* F launched another process of the run with the command it was given (mf_ran_command). */
static int mf_launcher(const struct mf_file *f, const struct mf_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (mf_ran_command(f, &files[i]))
			return 1;
	return 0;
}

int mf_is_minor(const struct mf_file *f, const struct mf_file *files, size_t n)
{
	double peak = mf_cpu_peak(f);
	if (f->gpu_used || !mf_no_own_stage(f) || mf_own_rank(f, files, n))
		return mf_small_fork(f, files, n);
	/* a launcher is summarised whatever it holds itself (conda run is a Python of its own) */
	return (peak >= 0 && peak < MF_MINOR_PEAK) || mf_launcher(f, files, n) || mf_small_fork(f, files, n);
}

/* The process the run started: its root pid's last image (pyenv's shim execs Python), then through
 * launchers to what they ran (`time python st.py`); -1 when the root left no file. */
static long mf_run_command(const struct mf_file *files, size_t n)
{
	long at = -1;
	for (size_t i = 0; i < n; i++)
		if (files[i].root_pid > 0 && files[i].pid == files[i].root_pid &&
		    (at < 0 || files[i].start_time > files[at].start_time))
			at = (long)i;
	for (size_t hops = 0; at >= 0 && hops < n; hops++) {
		size_t j = 0;
		while (j < n && !mf_ran_command(&files[at], &files[j]))
			j++;
		if (j == n)
			break;
		at = (long)j;
	}
	return at;
}

/* When every process of the run is minor (hello world through pyenv's shim, `time python st.py`,
 * a script's spawned pool workers), the command the run started leads; without its file, the
 * highest CPU peak among those that launched no other (the first on ties), else among all. */
static size_t mf_lead(const struct mf_file *files, size_t n)
{
	long command = mf_run_command(files, n);
	if (command >= 0)
		return (size_t)command;
	size_t best = 0;
	int best_launcher = 1;
	double bv = -2;
	for (size_t i = 0; i < n; i++) {
		int launcher = mf_launcher(&files[i], files, n);
		double peak = mf_cpu_peak(&files[i]);
		if ((best_launcher && !launcher) || (launcher == best_launcher && peak > bv))
			best = i, bv = peak, best_launcher = launcher;
	}
	return best;
}

size_t mf_count_ranks(const struct mf_file *files, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += (size_t)mf_own_rank(&files[i], files, n);
	return k;
}

/* What the process ran, as it named itself last: the name it gave itself (prctl PR_SET_NAME: the
 * file's "comm"), else its first argument as it was at its end (PostgreSQL's children retitle
 * themselves "postgres: checkpointer") without the directory; NULL when the file does not say
 * (malloc'd). */
char *mf_proc_prog(const struct mf_file *f)
{
	const char *comm = json_string_value(json_object_get(f->root, "comm"));
	const char *prog = comm && *comm ? comm : f->prog && *f->prog ? mf_base(f->prog) : NULL;
	if (!prog)
		return NULL;
	size_t len = strlen(prog);
	while (len && prog[len - 1] == ' ') /* a title padded to the length of the arguments it replaced */
		len--;
	return len ? mf_xasprintf("%.*s", (int)len, prog) : NULL;
}

/* "pid 5000 (timeout)": what the process ran (mf_proc_prog); a process that inherited a rank from
 * its parent says so ("pid 5050 (python3, child of rank 0)"). */
static char *mf_proc_name(const struct mf_file *f)
{
	char *prog = mf_proc_prog(f);
	char *rank = f->has_rank ? mf_xasprintf("child of rank %lld", f->rank) : NULL;
	char *name;
	if (prog || rank)
		name = mf_xasprintf("pid %lld (%s%s%s)", f->pid, prog ? prog : "", prog && rank ? ", " : "",
				    rank ? rank : "");
	else
		name = mf_xasprintf("pid %lld", f->pid);
	free(rank);
	free(prog);
	return name;
}

/* More processes than this are named by what they ran, with counts ("22 bash, 6 readlink"). */
#define MF_LIST_EACH 8

/* "22 bash, 6 readlink, 1 pid 4242" for the files whose KEEP is 0, most first. */
static char *mf_proc_counts(const struct mf_file *files, size_t n, const int *keep)
{
	char **names = mf_xmalloc((n ? n : 1) * sizeof *names);
	size_t *count = mf_xmalloc((n ? n : 1) * sizeof *count), m = 0;
	for (size_t i = 0; i < n; i++) {
		if (keep[i])
			continue;
		char *prog = mf_proc_prog(&files[i]);
		char *name = prog ? prog : mf_xasprintf("pid %lld", files[i].pid);
		size_t j = 0;
		while (j < m && strcmp(names[j], name))
			j++;
		if (j < m) {
			count[j]++;
			free(name);
		} else {
			names[m] = name;
			count[m++] = 1;
		}
	}
	char *list = mf_xstrdup("");
	for (size_t done = 0; done < m; done++) {
		size_t top = 0;
		for (size_t j = 1; j < m; j++)
			if (count[j] > count[top])
				top = j;
		char *s = mf_xasprintf("%s%s%zu %s", list, *list ? ", " : "", count[top], names[top]);
		free(list);
		list = s;
		count[top] = 0;
	}
	for (size_t j = 0; j < m; j++)
		free(names[j]);
	free(names);
	free(count);
	return list;
}

char *mf_proc_list(const struct mf_file *files, size_t n, const int *keep)
{
	size_t left = 0;
	for (size_t i = 0; i < n; i++)
		left += (size_t)!keep[i];
	if (left > MF_LIST_EACH)
		return mf_proc_counts(files, n, keep);
	char *list = mf_xstrdup("");
	for (size_t i = 0; i < n; i++) {
		if (keep[i])
			continue;
		char *name = mf_proc_name(&files[i]);
		char *s = mf_xasprintf("%s%s%s", list, *list ? ", " : "", name);
		free(name);
		free(list);
		list = s;
	}
	return list;
}

size_t mf_hide_minor(const struct mf_file *files, size_t n, int all, int *keep)
{
	size_t hidden = 0, major = 0;
	for (size_t i = 0; i < n; i++)
		major += (size_t)(keep[i] = all || n < 2 || !mf_is_minor(&files[i], files, n));
	if (!major && n) /* every one minor: the one that did the work stands for the run */
		keep[mf_lead(files, n)] = 1;
	for (size_t i = 0; i < n; i++)
		hidden += (size_t)!keep[i];
	return hidden;
}

/* BYTES in whole MB (UP: rounded up, for a bound), under 1 MiB in KB. */
static char *mf_size_text(double bytes, int up)
{
	if (bytes < 1048576)
		return mf_xasprintf("%.0fKB", up ? ceil(bytes / 1024) : floor(bytes / 1024));
	return mf_xasprintf("%.0fMB", up ? ceil(bytes / 1048576) : floor(bytes / 1048576));
}

/* One line for the small forked workers among those KEEP leaves out (KEEP marks the rest kept). */
static void mf_print_forks(FILE *out, const struct mf_file *files, size_t n, const int *keep, const char *how)
{
	int *other = mf_xmalloc(n * sizeof *other);
	size_t forks = 0;
	double added = 0, inherited = 0, least = -1;
	for (size_t i = 0; i < n; i++) {
		int fork = !keep[i] && mf_small_fork(&files[i], files, n);
		other[i] = !fork;
		forks += (size_t)fork;
		if (fork && mf_fork_added(&files[i]) > added)
			added = mf_fork_added(&files[i]);
		if (fork && files[i].inherited_cpu > inherited)
			inherited = files[i].inherited_cpu;
		if (fork && (least < 0 || files[i].inherited_cpu < least))
			least = files[i].inherited_cpu;
	}
	if (forks) {
		char *list = mf_proc_list(files, n, other), *a = mf_size_text(added, 1);
		char *b = mf_size_text(inherited, 0), *c = mf_size_text(least, 0);
		int same = !strcmp(b, c);
		fprintf(out,
			"memshim: %zu forked worker%s opened no stage of %s own; %s added <= %s to the %s%s "
			"it inherited at the fork: %s; --all %s\n",
			forks, forks == 1 ? "" : "s", forks == 1 ? "its" : "their", forks == 1 ? "it" : "each", a,
			same ? "" : "up to ", b, list, how);
		free(list), free(a), free(b), free(c);
	}
	free(other);
}

void mf_print_hidden(FILE *out, const struct mf_file *files, size_t n, const int *keep, size_t hidden, const char *how)
{
	if (!hidden)
		return;
	int *shown = mf_xmalloc(n * sizeof *shown);
	size_t minor = 0;
	double top = 0; /* a launcher is left out whatever it held itself */
	for (size_t i = 0; i < n; i++) {
		shown[i] = keep[i] || mf_small_fork(&files[i], files, n);
		minor += (size_t)!shown[i];
		if (!shown[i] && mf_cpu_peak(&files[i]) > top)
			top = mf_cpu_peak(&files[i]);
	}
	if (minor) {
		char *list = mf_proc_list(files, n, shown), *peak = mf_size_text(top, 0);
		if (top < MF_MINOR_PEAK)
			fprintf(out,
				"memshim: %zu other process%s (launchers, shells) opened no stage and peaked under "
				"%dMB: %s; --all %s\n",
				minor, minor == 1 ? "" : "es", MF_MINOR_PEAK >> 20, list, how);
		else
			fprintf(out,
				"memshim: %zu other process%s (launchers, shells) opened no stage; %s peaked at %s: "
				"%s; --all %s\n",
				minor, minor == 1 ? "" : "es", minor == 1 ? "it" : "the largest", peak, list, how);
		free(list), free(peak);
	}
	mf_print_forks(out, files, n, keep, how);
	free(shown);
}

/* --merge: the ranks when there are any (with --all every file), else the processes shown. */
static size_t mf_pick_ranks(const struct mf_file *files, size_t n, int all, int *keep)
{
	size_t out = 0;
	if (all || !mf_count_ranks(files, n))
		return mf_hide_minor(files, n, all, keep);
	for (size_t i = 0; i < n; i++) {
		keep[i] = mf_own_rank(&files[i], files, n);
		out += (size_t)!keep[i];
	}
	return out;
}

/* --diff: a run's ranks, else its processes that are not minor (a lone file always). */
static size_t mf_pick_compared(const struct mf_file *files, size_t n, int *keep)
{
	size_t out = 0, ranks = mf_count_ranks(files, n);
	for (size_t i = 0; i < n; i++) {
		keep[i] = ranks ? mf_own_rank(&files[i], files, n) : n == 1 || !mf_is_minor(&files[i], files, n);
		out += (size_t)!keep[i];
	}
	return out;
}

/* The rank with the highest CPU peak that has call sites (the first on ties), or -1. */
static long mf_highest_rank(const struct mf_file *files, size_t n)
{
	long best = -1;
	double bv = -1, x;
	for (size_t i = 0; i < n; i++) {
		if (!mf_own_rank(&files[i], files, n) || !mf_file_has_sites(&files[i]))
			continue;
		if (!mf_num(json_object_get(files[i].file_metrics, "process_mem_cpu_peak"), &x))
			x = 0;
		if (best < 0 || x > bv)
			best = (long)i, bv = x;
	}
	return best;
}

void mf_select(struct mf_set *s, enum mf_pick how, int all)
{
	long one = how == MF_PICK_TOP_RANK ? mf_highest_rank(s->f, s->n) : -1;
	s->keep = mf_xrealloc(s->keep, (s->n ? s->n : 1) * sizeof *s->keep);
	s->how = how == MF_PICK_TOP_RANK && one < 0 ? MF_PICK_SHOWN : how;
	s->left_out = 0;
	switch (s->how) {
	case MF_PICK_SHOWN:
		s->left_out = mf_hide_minor(s->f, s->n, all, s->keep);
		break;
	case MF_PICK_RANKS:
		s->left_out = mf_pick_ranks(s->f, s->n, all, s->keep);
		break;
	case MF_PICK_COMPARED:
		s->left_out = mf_pick_compared(s->f, s->n, s->keep);
		break;
	case MF_PICK_TOP_RANK:
		for (size_t i = 0; i < s->n; i++)
			s->keep[i] = (long)i == one;
		s->left_out = s->n - 1;
		break;
	default: /* MF_PICK_EVERY, and MF_PICK_OWN, which has no files */
		for (size_t i = 0; i < s->n; i++)
			s->keep[i] = 1;
	}
}

char *mf_proc_label(const struct mf_file *f)
{
	if (f->has_rank)
		return mf_xasprintf("rank %lld", f->rank);
	return mf_xasprintf("pid %lld", f->pid);
}
