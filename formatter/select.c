/* Which processes of a run matter: ranks, and the launchers and shells around them. */
#include "mf.h"

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

int mf_is_minor(const struct mf_file *f, const struct mf_file *files, size_t n)
{
	double peak = mf_cpu_peak(f);
	return !f->gpu_used && mf_no_own_stage(f) && peak >= 0 && peak < MF_MINOR_PEAK &&
	       !mf_own_rank(f, files, n);
}

size_t mf_count_ranks(const struct mf_file *files, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += (size_t)mf_own_rank(&files[i], files, n);
	return k;
}

/* "pid 5000 (timeout)": the program's base name when the file has argv; a process that inherited
 * a rank from its parent says so ("pid 5050 (python3, child of rank 0)"). */
static char *mf_proc_name(const struct mf_file *f)
{
	const char *slash = f->prog ? strrchr(f->prog, '/') : NULL;
	const char *prog = slash && slash[1] ? slash + 1 : f->prog && *f->prog ? f->prog : NULL;
	char *rank = f->has_rank ? mf_xasprintf("child of rank %lld", f->rank) : NULL;
	char *name;
	if (prog || rank)
		name = mf_xasprintf("pid %lld (%s%s%s)", f->pid, prog ? prog : "", prog && rank ? ", " : "",
				    rank ? rank : "");
	else
		name = mf_xasprintf("pid %lld", f->pid);
	free(rank);
	return name;
}

char *mf_proc_list(const struct mf_file *files, size_t n, const int *keep)
{
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
		major += (size_t)!mf_is_minor(&files[i], files, n);
	for (size_t i = 0; i < n; i++) {
		/* nothing is hidden behind a line when no process would be left to show */
		keep[i] = all || n < 2 || !major || !mf_is_minor(&files[i], files, n);
		hidden += (size_t)!keep[i];
	}
	return hidden;
}

void mf_print_hidden(FILE *out, const struct mf_file *files, size_t n, const int *keep,
		     size_t hidden, const char *how)
{
	if (!hidden)
		return;
	char *list = mf_proc_list(files, n, keep);
	fprintf(out, "memshim: %zu other process%s (launchers, shells) opened no stage and peaked under "
		"%dMB: %s; --all %s\n", hidden, hidden == 1 ? "" : "es", MF_MINOR_PEAK >> 20, list,
		how);
	free(list);
}
