/* The Trainer-style dump of one metrics file: status line, stage groups, optional call tables. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const enum mf_align mf_kv_align[] = { MF_LEFT, MF_RIGHT };
static const char *const mf_kv_seps[] = { " = " };

/* The flat keys of a stage are its last call; "cpu 7MB in call 250 (last 0MB)" when another call
 * needed clearly more on COMP (alloc + peaked, by over max(1 MiB, 5%): the --diff default), else NULL. */
static char *mf_bigger_call(json_t *metrics, json_t *stage, const char *comp)
{
	char key[300];
	json_t *need = json_object_get(stage, "max_needed");
	json_t *most = json_object_get(need, comp);
	snprintf(key, sizeof key, "%s_call", comp);
	long long call = json_integer_value(json_object_get(need, key));
	const char *name = json_string_value(json_object_get(stage, "name"));
	snprintf(key, sizeof key, "%s_mem_%s_alloc_delta", name, comp);
	json_t *alloc = json_object_get(metrics, key);
	snprintf(key, sizeof key, "%s_mem_%s_peaked_delta", name, comp);
	json_t *peaked = json_object_get(metrics, key);
	if (!json_is_integer(most) || !json_is_integer(alloc) || !json_is_integer(peaked) || call <= 0 ||
	    call == mf_calls_of(stage))
		return NULL;
	json_int_t last = json_integer_value(alloc) + json_integer_value(peaked),
		   more = json_integer_value(most) - last;
	if (more < (json_int_t)1 << 20 || more * 20 < (last < 0 ? -last : last))
		return NULL;
	json_t *lastv = json_integer(last);
	char *v = mf_format_value("x_mem_", most), *l = mf_format_value("x_mem_", lastv);
	char *t = mf_xasprintf("%s %s in call %lld (last %s)", comp, v, call, l);
	json_decref(lastv);
	free(v), free(l);
	return t;
}

/* "train_* are the last of 300 calls (12.5000s in all); alloc + peaked was larger before: cpu 7MB in
 * call 250 (last 0MB); --calls shows all": a stage's flat keys are its last call's, so a stage
 * called often says what all its calls took (a native function called 8000 times: its runtime). */
static void mf_print_calls_hint(FILE *out, json_t *metrics, json_t *stage)
{
	if (!stage || mf_calls_of(stage) < 2)
		return;
	char *cpu = mf_bigger_call(metrics, stage, "cpu"), *gpu = mf_bigger_call(metrics, stage, "gpu");
	json_t *total = json_object_get(stage, "runtime_total");
	if (!cpu && !gpu && !json_is_number(total))
		return;
	fprintf(out, "  %s_* are the last of %lld calls", json_string_value(json_object_get(stage, "name")),
		mf_calls_of(stage));
	if (json_is_number(total))
		fprintf(out, " (%.4fs in all)", json_number_value(total));
	if (cpu || gpu)
		fprintf(out, "; alloc + peaked was larger before: %s%s%s", cpu ? cpu : "", cpu && gpu ? ", " : "",
			gpu ? gpu : "");
	fputs("; --calls shows all\n", out);
	free(cpu), free(gpu);
}

/* The count of calls of STAGE that ended by way WAY (its calls_ended), 0 when not said. */
static long long mf_ended(json_t *stage, const char *way)
{
	json_t *v = json_object_get(json_object_get(stage, "calls_ended"), way);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (long long)json_integer_value(v) : 0;
}

/* "  train: 2 of 5 calls ended by an exception (KeyboardInterrupt); the last call (train_*)
 * returned": a call an exception ended leaves what its traceback holds in alloc_delta, which would
 * otherwise read as a leak of every epoch.  Calls a longjmp jumped over are named too. */
static void mf_print_exceptions(FILE *out, json_t *stage)
{
	long long raised = mf_ended(stage, "raised"), unwound = mf_ended(stage, "unwound");
	long long jumped = mf_ended(stage, "jumped"), calls = mf_calls_of(stage);
	if (!stage || calls <= 0 || raised + unwound + jumped == 0)
		return;
	const char *name = json_string_value(json_object_get(stage, "name"));
	fprintf(out, "  %s: ", name);
	if (raised + unwound) {
		fprintf(out, "%lld of %lld call%s ended by an exception (", raised + unwound, calls,
			calls == 1 ? "" : "s");
		size_t i, n = 0;
		json_t *e;
		json_array_foreach(json_object_get(stage, "exceptions"), i, e)
			if (json_is_string(e))
				fprintf(out, "%s%s", n++ ? ", " : "", json_string_value(e));
		if (raised && !n)
			fprintf(out, "%sa Python exception", n++ ? ", " : "");
		if (unwound)
			fprintf(out, "%sa C++ exception or a Rust panic", n++ ? ", " : "");
		fputc(')', out);
	}
	if (jumped)
		fprintf(out, "%s%lld of %lld call%s jumped over by a longjmp", raised + unwound ? "; " : "", jumped,
			calls, calls == 1 ? " was" : "s were");
	const char *last = json_string_value(json_object_get(stage, "ended"));
	if (last && !strcmp(last, "returned"))
		fprintf(out, "; the last call (%s_*) returned\n", name);
	else if (last && (!strcmp(last, "raised") || !strcmp(last, "unwound")))
		fprintf(out, "; %s_* are %s: memory %s still held counts in alloc_delta\n", name,
			raised + unwound == 1 ? "that call" : "one of them",
			!strcmp(last, "raised") ? "its traceback" : "the exception");
	else if (last && !strcmp(last, "jumped"))
		fprintf(out, "; %s_* are %s\n", name, jumped == 1 ? "that call" : "one of them");
	else
		fputc('\n', out);
}

/* How many entries of matched_functions FUNCTIONS name TARGET. */
static size_t mf_target_functions(json_t *functions, const char *target)
{
	size_t i, n = 0;
	json_t *e;
	json_array_foreach(functions, i, e) {
		const char *t = json_string_value(json_object_get(e, "target"));
		n += t && json_string_value(json_object_get(e, "function")) && !strcmp(t, target);
	}
	return n;
}

#define MF_FUNCTIONS_LISTED 5 /* per target, as the shim's warning: "<module>" matches every module */

struct mf_listing {
	int listed, more, more_passed, won;
};

/* TARGET's functions in FUNCTIONS of one kind (PASSED_ONLY: no call of their own, all passed
 * over), at most MF_FUNCTIONS_LISTED in all, the rest counted in L. */
static void mf_list_functions(FILE *out, json_t *functions, const char *target, int passed_only, struct mf_listing *l)
{
	size_t i;
	json_t *e;
	json_array_foreach(functions, i, e) {
		const char *t = json_string_value(json_object_get(e, "target"));
		const char *fn = json_string_value(json_object_get(e, "function"));
		long long calls = (long long)json_integer_value(json_object_get(e, "calls"));
		long long passed = (long long)json_integer_value(json_object_get(e, "passed_over"));
		if (!t || !fn || strcmp(t, target) || (calls == 0) != passed_only)
			continue;
		l->won |= passed > 0;
		if (l->listed == MF_FUNCTIONS_LISTED) {
			l->more++;
			l->more_passed += calls == 0;
			continue;
		}
		fprintf(out, "%s%s (%lld call%s", l->listed++ ? ", " : "", fn, calls, calls == 1 ? "" : "s");
		if (passed > 0)
			fprintf(out, ", %lld passed over", passed);
		fputc(')', out);
	}
}

/* "  eval=evaluate ran __main__:evaluate (2 calls), sympy.core.parameters:evaluate (1 call); name
 * the one meant as module:qualname": a target that matched functions of several modules (the file
 * names the one function of every other target too), those that ran first, five at most. */
static void mf_print_functions(FILE *out, json_t *stage)
{
	size_t i;
	json_t *e;
	json_t *functions = stage ? json_object_get(stage, "matched_functions") : NULL;
	struct mf_listing l = { 0 };
	int targets = 0;
	json_array_foreach(functions, i, e) {
		const char *t = json_string_value(json_object_get(e, "target"));
		int first = 1; /* each target once, where its first function stands */
		for (size_t k = 0; t && k < i && first; k++) {
			const char *earlier =
				json_string_value(json_object_get(json_array_get(functions, k), "target"));
			first = !earlier || strcmp(t, earlier);
		}
		if (!t || !json_string_value(json_object_get(e, "function")) || !first ||
		    mf_target_functions(functions, t) < 2)
			continue;
		fprintf(out, "%s%s=%s ran ", targets++ ? "; " : "  ", json_string_value(json_object_get(stage, "name")),
			t);
		l.listed = l.more = l.more_passed = 0;
		mf_list_functions(out, functions, t, 0, &l);
		mf_list_functions(out, functions, t, 1, &l);
		if (l.more)
			fprintf(out, " and %d more (%d passed over)", l.more, l.more_passed);
	}
	if (targets)
		fprintf(out, "; %sname the one meant as module:qualname\n",
			l.won ? "the program's own function won over the installed package's; " : "");
}

static int mf_ends(const char *s, const char *suffix, size_t *stem)
{
	size_t n = strlen(s), m = strlen(suffix);
	*stem = n >= m ? n - m : 0;
	return n > m && !strcmp(s + n - m, suffix);
}

/* Bytes as the dump writes them (memory keys: whole MB, KB under 1 MB). */
static char *mf_mem_text(json_int_t v)
{
	json_t *j = json_integer(v);
	char *t = mf_format_value("x_mem_", j);
	json_decref(j);
	return t;
}

/* A whole and its two parts, each cut to whole MB, do not always add up (3.6 + 2.7 = 6.3 reads "6MB:
 * 3MB + 2MB"); then the three are written in tenths of a MB, the part with the larger remainder
 * rounded up so that they do.  0 when whole MB add up, or a part is under 1 MB (in KB it invites no
 * sum). */
static int mf_need_tenths(json_int_t whole, json_int_t part1, json_int_t part2, char **wt, char **t1, char **t2)
{
	const json_int_t mib = 1 << 20;
	if (part1 < mib || part2 < mib || part1 / mib + part2 / mib == whole / mib)
		return 0;
	json_int_t w10 = whole * 10 / mib, p10 = part1 * 10 / mib, q10 = part2 * 10 / mib;
	if (p10 + q10 < w10) {
		if (part1 * 10 % mib >= part2 * 10 % mib)
			p10++;
		else
			q10++;
	}
	*wt = mf_xasprintf("%lld.%lldMB", (long long)(w10 / 10), (long long)(w10 % 10));
	*t1 = mf_xasprintf("%lld.%lldMB", (long long)(p10 / 10), (long long)(p10 % 10));
	*t2 = mf_xasprintf("%lld.%lldMB", (long long)(q10 / 10), (long long)(q10 % 10));
	return 1;
}

/* "  train needed 112MB: 33MB kept + 79MB that came and went": what the call of each stage of the
 * group needed above the memory it began with (alloc + peaked, so nobody adds the two up), its CPU
 * and then its GPU; a call that let go of memory it found says so instead of "kept" (its peaked
 * holds what it let go of: only the need came and went).  Nothing for a
 * call that needed nothing and kept nothing. */
static void mf_print_one_need(FILE *out, json_t *metrics, const char *stage, int len, const char *comp,
			      const char *where)
{
	char *ak = mf_xasprintf("%.*s_mem_%s_alloc_delta", len, stage, comp);
	char *pk = mf_xasprintf("%.*s_mem_%s_peaked_delta", len, stage, comp);
	json_t *a = json_object_get(metrics, ak), *p = json_object_get(metrics, pk);
	free(ak), free(pk);
	if (!json_is_integer(a) || !json_is_integer(p))
		return;
	json_int_t alloc = json_integer_value(a), peaked = json_integer_value(p);
	json_int_t need = alloc + peaked > 0 ? alloc + peaked : 0;
	if (!alloc && !peaked)
		return;
	char *nt, *at, *pt;
	if (alloc < 0 || !mf_need_tenths(need, alloc, peaked, &nt, &at, &pt))
		nt = mf_mem_text(need), at = mf_mem_text(alloc < 0 ? -alloc : alloc), pt = mf_mem_text(peaked);
	if (alloc >= 0 && (!alloc || !peaked)) /* "+ 0MB" reads as a rounding, not as nothing */
		fprintf(out, "  %.*s needed %s%s, all of it %s\n", len, stage, nt, where,
			alloc ? "kept" : "came and went");
	else if (alloc >= 0)
		fprintf(out, "  %.*s needed %s%s: %s kept + %s that came and went\n", len, stage, nt, where, at, pt);
	else if (need > 0) /* what rose above its start came and went: it ended below it */
		fprintf(out,
			"  %.*s needed %s%s above what it began with, which came and went, and it let go of %s it found\n",
			len, stage, nt, where, at);
	else
		fprintf(out, "  %.*s needed nothing%s above what it began with, and let go of %s it found\n", len,
			stage, where, at);
	free(nt), free(at), free(pt);
}

static void mf_print_needed(FILE *out, json_t *metrics, const struct mf_group *g)
{
	for (size_t i = 0; i < g->nkeys; i++) {
		size_t stem;
		if (!mf_ends(g->keys[i], "_mem_cpu_alloc_delta", &stem))
			continue;
		mf_print_one_need(out, metrics, g->keys[i], (int)stem, "cpu", "");
		mf_print_one_need(out, metrics, g->keys[i], (int)stem, "gpu", " on the GPU");
	}
}

/* The init stage's entry (its last finished call), or NULL. */
static json_t *mf_init_entry(json_t *stages)
{
	size_t i;
	json_t *s;
	json_array_foreach(stages, i, s)
		if (!strcmp(json_string_value(json_object_get(s, "name"))
				    ? json_string_value(json_object_get(s, "name"))
				    : "",
			    "init"))
			return s;
	return NULL;
}

/* Under the process group: "  process_mem_cpu_peak 130MB: 96MB of it was live when init ended, 34MB
 * came after" (the imports, the model and the data were there before any work began), or "was
 * reached in init" when init itself peaked that high.  Not for a run that is all init. */
static void mf_print_before_work(FILE *out, json_t *metrics, json_t *stages)
{
	json_t *init = mf_init_entry(stages);
	if (!init || json_is_true(json_object_get(init, "open")) ||
	    json_is_true(json_object_get(init, "closed_at_exit")) || mf_calls_of(init) <= 0)
		return;
	static const char *const comps[2] = { "cpu", "gpu" };
	for (int c = 0; c < 2; c++) {
		char key[40];
		snprintf(key, sizeof key, "process_mem_%s_peak", comps[c]);
		json_t *pk = json_object_get(metrics, key), *span = json_object_get(init, comps[c]);
		json_t *end = json_object_get(span, "end"), *ipeak = json_object_get(span, "peak");
		if (!json_is_integer(pk) || !json_is_integer(end) || json_integer_value(pk) <= 0)
			continue;
		json_int_t peak = json_integer_value(pk), live = json_integer_value(end),
			   top = json_integer_value(ipeak);
		json_t *inherited = c ? NULL : json_object_get(metrics, "inherited_mem_cpu");
		if (json_is_integer(inherited)) { /* a forked child's peaks are above what it inherited */
			live -= json_integer_value(inherited);
			top -= json_integer_value(inherited);
		}
		live = live < 0 ? 0 : live > peak ? peak : live;
		char *pt, *lt, *rest;
		int reached_in_init = json_is_integer(ipeak) && top >= peak;
		if (reached_in_init || !mf_need_tenths(peak, live, peak - live, &pt, &lt, &rest))
			pt = mf_mem_text(peak), lt = mf_mem_text(live), rest = mf_mem_text(peak - live);
		if (reached_in_init)
			fprintf(out, "  %s %s was reached in init; %s was still live when init ended\n", key, pt, lt);
		else
			fprintf(out, "  %s %s: %s of it was live when init ended, %s came after\n", key, pt, lt, rest);
		free(pt), free(lt), free(rest);
	}
}

static json_t *mf_stage_named(json_t *stages, const char *name)
{
	size_t i;
	json_t *s;
	json_array_foreach(stages, i, s)
		if (!json_is_true(json_object_get(s, "open")) &&
		    !strcmp(json_string_value(json_object_get(s, "name"))
				    ? json_string_value(json_object_get(s, "name"))
				    : "",
			    name))
			return s;
	return NULL;
}

int mf_print_group(FILE *out, const struct mf_file *f, const struct mf_group *g, int first)
{
	json_t *metrics = f->metrics, *stages = f->stages;
	struct mf_table t;
	if (!first)
		fputc('\n', out);
	fprintf(out, "***** %s%s metrics *****\n", g->name, g->open ? " (open)" : "");
	mf_table_init(&t, 2, mf_kv_align, mf_kv_seps);
	for (size_t i = 0; i < g->nkeys; i++) {
		char *cells[2] = { mf_xstrdup(g->keys[i]),
				   mf_format_value(g->keys[i], json_object_get(metrics, g->keys[i])) };
		mf_table_row(&t, cells);
	}
	mf_table_print(out, &t, "  ");
	mf_table_free(&t);
	if (!strcmp(g->name, "process")) {
		mf_print_before_work(out, metrics, stages);
		mf_print_cgroup(out, metrics, json_object_get(json_object_get(f->root, "process"), "cgroup"));
	} else
		mf_print_needed(out, metrics, g);
	mf_print_calls_hint(out, metrics, mf_stage_named(stages, g->name));
	mf_print_exceptions(out, mf_stage_named(stages, g->name));
	mf_print_functions(out, mf_stage_named(stages, g->name));
	if (g->open) {
		char *line = mf_open_line(g->open, 1);
		fprintf(out, "  %s\n", line);
		free(line);
	}
	return 0;
}

/* Open stages of a snapshot, comma-separated, or "none". */
static char *mf_open_stages(json_t *stages)
{
	size_t i, len = 0;
	json_t *s;
	char *list = mf_xstrdup("");
	json_array_foreach(stages, i, s) {
		if (!json_is_true(json_object_get(s, "open")))
			continue;
		const char *name = json_string_value(json_object_get(s, "name"));
		list = mf_xrealloc(list, len + strlen(name) + 3);
		len += (size_t)sprintf(list + len, "%s%s", len ? ", " : "", name);
	}
	if (!len) {
		free(list);
		list = mf_xstrdup("none");
	}
	return list;
}

static void mf_print_when(FILE *out, const struct mf_file *f)
{
	char when[64];
	struct tm tm;
	/* An absurd end_time must not overflow time_t (undefined behaviour). */
	if (!f->has_times || !(f->end_time > -1e15 && f->end_time < 1e15))
		return;
	time_t t = (time_t)f->end_time;
	if (!localtime_r(&t, &tm) || !strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", &tm))
		return;
	fprintf(out, " written %s, %.3fs after start", when, f->end_time - f->start_time);
}

/* Ended by SIGTERM or SIGINT with no stage of its own open: a shutdown (Jupyter ending a notebook
 * kernel, an idle service stopped), or Ctrl-C, which Python re-raises once it has finished (an
 * uncaught KeyboardInterrupt): numbers that are all final, not a crash in the middle of a stage. */
static int mf_stopped_idle(const struct mf_file *f)
{
	size_t i;
	json_t *s;
	if (!f->reason || strcmp(f->reason, "signal") || (f->signal != 15 && f->signal != 2))
		return 0;
	json_array_foreach(f->stages, i, s)
		if (json_is_true(json_object_get(s, "open")) && !json_is_true(json_object_get(s, "implicit")))
			return 0;
	return 1;
}

/* The stages whose last call Ctrl-C's KeyboardInterrupt ended, innermost (last begun) first, as
 * "eval (call 2), train (call 1)"; NULL when none (a Ctrl-C between stages). */
static char *mf_interrupted_stages(const struct mf_file *f)
{
	char *list = NULL;
	for (size_t i = json_array_size(f->stages); i-- > 0;) {
		json_t *s = json_array_get(f->stages, i);
		const char *e = json_string_value(json_object_get(s, "exception"));
		if (!e || strcmp(e, "KeyboardInterrupt") || !json_is_string(json_object_get(s, "name")))
			continue;
		char *more = mf_xasprintf("%s%s%s (call %lld)", list ? list : "", list ? ", " : "",
					  json_string_value(json_object_get(s, "name")),
					  (long long)json_integer_value(json_object_get(s, "calls")));
		free(list);
		list = more;
	}
	return list;
}

/* ", SIGHUP" after a signal's number: a death by SIGPIPE or SIGHUP is as common as by SIGTERM. */
static void mf_print_signal_name(FILE *out, long long sig)
{
	const char *name = sig > 0 && sig < 65 ? sigabbrev_np((int)sig) : NULL;
	if (name)
		fprintf(out, ", SIG%s", name);
}

void mf_print_status(FILE *out, const struct mf_file *f)
{
	if (f->complete)
		return;
	const char *state = json_string_value(json_object_get(json_object_get(f->root, "live_record"), "state"));
	const char *seccomp = json_string_value(json_object_get(json_object_get(f->root, "live_record"), "seccomp"));
	if (state && !strcmp(state, "exited") && seccomp) { /* input/live.c: its stages closed at exit */
		fprintf(out,
			"memshim: %s: from a live record: the program locked itself into a seccomp sandbox "
			"(%s), after which memshim makes no system call of its own and writes no file, so "
			"these are its numbers at its last update (record",
			f->path,
			!strcmp(seccomp, "strict") ? "strict mode, which also stops memshim's clock: "
						     "times are those of its entry"
						   : "a filter");
		mf_print_when(out, f);
		fprintf(out, ")\n");
		mf_print_cgroup_killed(out, f);
		return;
	}
	if (state && !strcmp(state, "exited")) { /* input/live.c: a Go program gone, its stages closed at exit */
		fprintf(out,
			"memshim: %s: from a live record: a Go program leaves by its own exit system call, past "
			"memshim's exit report, so these are its numbers at its last update (record",
			f->path);
		mf_print_when(out, f);
		fprintf(out, "); a kill -9 would leave the same\n");
		mf_print_cgroup_killed(out, f);
		return;
	}
	char *interrupted = mf_stopped_idle(f) && f->signal == 2 ? mf_interrupted_stages(f) : NULL;
	if (interrupted) {
		fprintf(out, "memshim: %s: ended by SIGINT (Ctrl-C),", f->path);
		mf_print_when(out, f);
		fprintf(out,
			"; its KeyboardInterrupt ended %s, then Python raised SIGINT again with no stage open: "
			"its numbers are final\n",
			interrupted);
		free(interrupted);
		return;
	}
	if (mf_stopped_idle(f)) {
		fprintf(out,
			f->signal == 2 ? "memshim: %s: ended by SIGINT with no stage open (Ctrl-C, between stages; "
					 "Python raises it again once it has finished)"
				       : "memshim: %s: ended by SIGTERM with no stage open (a shutdown: Jupyter's of a "
					 "kernel, docker stop)",
			f->path);
		mf_print_when(out, f);
		fprintf(out, "; its numbers are final\n");
		return;
	}
	char *open = mf_open_stages(f->stages);
	fprintf(out, "memshim: %s: incomplete metrics (a snapshot", f->path);
	json_t *live_sig = json_object_get(json_object_get(f->root, "live_record"), "signal");
	if (state && json_is_integer(live_sig)) { /* a live record (input/live.c) */
		fprintf(out, " from a live record: process ended by signal %lld",
			(long long)json_integer_value(live_sig));
		mf_print_signal_name(out, json_integer_value(live_sig));
	} else if (state) {
		fprintf(out, " from a live record: process %s", state);
	} else if (f->reason && f->signal) {
		fprintf(out, ", reason: %s %lld", f->reason, f->signal);
		mf_print_signal_name(out, f->signal);
	} else if (f->reason) {
		fprintf(out, ", reason: %s", f->reason);
	}
	fputc(')', out);
	mf_print_when(out, f);
	fprintf(out, "; open stages: %s\n", open);
	free(open);
	mf_print_cgroup_killed(out, f);
}

/* A forked child (a DataLoader worker) inherits the stages open at the fork, restarted at its time
 * 0; that they never return in the child is normal, not worth a line. */
static int mf_inherited_at_fork(const struct mf_file *f, json_t *s)
{
	return f->forked && json_number_value(json_object_get(s, "start")) == 0.0;
}

/* Stages whose function never returned: their numbers end at exit, not at a return. */
static void mf_print_unreturned(FILE *out, const struct mf_file *f)
{
	size_t i, n = 0;
	json_t *s;
	json_array_foreach(f->stages, i, s) {
		if (!json_is_true(json_object_get(s, "closed_at_exit")) ||
		    json_is_true(json_object_get(s, "implicit")) || mf_inherited_at_fork(f, s))
			continue;
		fprintf(out, "%s%s", n++ ? ", " : "memshim: closed at exit (never returned): ",
			json_string_value(json_object_get(s, "name")));
	}
	if (n)
		fputs("\n\n", out);
}

/* Python stages begun while another tool held the frame hook were not seen. */
static void mf_print_hook_lost(FILE *out, const struct mf_file *f)
{
	json_t *lost = json_object_get(f->root, "python_hook_lost");
	if (json_is_integer(lost) && json_integer_value(lost) > 0)
		fprintf(out,
			"memshim: another tool held Python's frame evaluation hook %lld time%s and gave it back: "
			"Python stages that began while it held it were not seen\n\n",
			(long long)json_integer_value(lost), json_integer_value(lost) == 1 ? "" : "s");
}

/* A run where no stage began shows only init, from load to exit: say where stages come from.  Not
 * for a child (a spawned DataLoader worker, a compiler's helper): its run's stages are its
 * parent's, and how to name stages is no advice for it. */
static void mf_print_no_stage(FILE *out, const struct mf_file *f)
{
	size_t i;
	json_t *s;
	if (f->forked || f->is_child || !json_array_size(f->stages) ||
	    json_array_size(json_object_get(f->root, "unmatched_targets")))
		return;
	json_array_foreach(f->stages, i, s)
		if (!json_is_true(json_object_get(s, "implicit")) ||
		    !json_is_true(json_object_get(s, "closed_at_exit")))
			return;
	json_t *python = json_object_get(json_object_get(f->root, "sites"), "python_frames");
	if (f->children_beside) /* a launcher: the stages are in what it started */
		fputs("memshim: no stage began in this process, so init is its whole run; the processes it started "
		      "wrote their own files (named at the end)\n\n",
		      out);
	else if (json_is_false(python)) /* a native program: its functions, not the Trainer's */
		fputs("memshim: no stage began, so init is the whole run; stages come from MEMSHIM_STAGES, functions of "
		      "the program or its libraries as nm -C names them, e.g. memshim run --stages step=sqlite3_step -- "
		      "CMD\n\n",
		      out);
	else
		fputs("memshim: no stage began, so init is the whole run; stages come from MEMSHIM_STAGES (unset: "
		      "Hugging Face Trainer's methods), e.g. memshim run --stages train=train_loop -- python script.py\n\n",
		      out);
}

/* Whether F's process named itself: a prctl name ("comm"), or a title written over its arguments
 * ("postgres: checkpointer"), which its file's argv then is. */
static int mf_renamed(const struct mf_file *f)
{
	return json_string_value(json_object_get(f->root, "comm")) || (f->prog && strchr(f->prog, ' '));
}

void mf_print_header(FILE *out, const struct mf_file *f)
{
	fprintf(out, "==> %s: pid %lld", f->path, f->pid);
	char *prog = mf_renamed(f) ? mf_proc_prog(f) : NULL;
	if (prog)
		fprintf(out, " (%s)", prog);
	free(prog);
	if (f->has_rank) {
		fprintf(out, ", rank %lld", f->rank);
		if (f->world_size > 0)
			fprintf(out, " of %lld", f->world_size);
		if (f->local_rank >= 0)
			fprintf(out, ", local rank %lld", f->local_rank);
		json_t *restart = json_object_get(json_object_get(f->root, "rank"), "restart");
		if (f->rank_source && json_integer_value(restart) > 0) /* which attempt of an elastic job */
			fprintf(out, " (%s, restart %lld)", f->rank_source, (long long)json_integer_value(restart));
		else if (f->rank_source)
			fprintf(out, " (%s)", f->rank_source);
	}
	if (f->is_child)
		fprintf(out, ", child of %lld (%s)", f->ppid, f->forked ? "forked" : "exec'd");
	fputs(" <==\n", out);
}

/* --stage: the group of that name, or init's own keys when init was folded elsewhere. */
static const struct mf_group *mf_pick(struct mf_groups *gs, const char *stage)
{
	const struct mf_group *g = mf_groups_find(gs, stage);
	if (!g && !strcmp(stage, "init") && gs->init.nkeys)
		g = &gs->init;
	return g;
}

void mf_dump_file(FILE *out, const struct mf_file *f, const struct mf_opts *o)
{
	struct mf_groups gs;
	mf_group_metrics(f->metrics, f->stages, &gs);
	mf_print_gpu_oom(out, f);
	if (!f->complete) {
		mf_print_status(out, f);
		fputc('\n', out);
	}
	mf_print_unreturned(out, f);
	mf_print_hook_lost(out, f);
	mf_print_no_stage(out, f);
	if (o->stage) {
		const struct mf_group *g = mf_pick(&gs, o->stage);
		if (g)
			mf_print_group(out, f, g, 1);
		else
			fprintf(out, "memshim: no stage \"%s\" in %s\n", o->stage, f->path);
	} else {
		for (size_t i = 0; i < gs.n; i++)
			mf_print_group(out, f, &gs.g[i], i == 0);
		if (!gs.n)
			fprintf(out, "memshim: no metrics in %s\n", f->path);
		mf_print_gpu_footprint(out, f);
	}
	if (o->calls)
		mf_print_calls(out, f->stages, o->stage);
	mf_print_labelled(out, f, o->stage, o->calls);
	mf_groups_free(&gs);
}

/* Ranked files first in rank order, then the rest in the order given (a stable insertion sort). */
static int mf_before(const struct mf_file *a, const struct mf_file *b)
{
	if (a->has_rank != b->has_rank)
		return a->has_rank;
	return a->has_rank && (a->rank < b->rank || (a->rank == b->rank && a->pid < b->pid));
}

void mf_sort_files(struct mf_file *files, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct mf_file x = files[i];
		size_t j = i;
		for (; j > 0 && mf_before(&x, &files[j - 1]); j--)
			files[j] = files[j - 1];
		files[j] = x;
	}
}

int mf_has_stage(const struct mf_file *f, const char *stage)
{
	struct mf_groups gs;
	mf_group_metrics(f->metrics, f->stages, &gs);
	int found = mf_pick(&gs, stage) != NULL;
	mf_groups_free(&gs);
	return found;
}
