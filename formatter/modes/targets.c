/* What the stage targets of MEMSHIM_STAGES matched, said once for all the files shown together
 * (memshim run's, or several given): a target matched nothing only when no process of the run
 * matched it (a parent whose child ran train_loop is no typo), and a bare target that opened its
 * stage from a function outside the program's __main__ (multiprocessing.spawn:prepare for
 * "prepare" in spawned workers) is named with the function, which the file keeps per stage. */
#include "modes/modes.h"
#include "model/document.h"
#include "model/select.h"

#include <stdlib.h>
#include <string.h>

static int mf_same(json_t *v, const char *s)
{
	const char *t = json_string_value(v);
	return t && s && !strcmp(t, s);
}

/* Whether F's unmatched_targets lists STAGE=TARGET. */
static int mf_lists_unmatched(const struct mf_file *f, const char *stage, const char *target)
{
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(f->root, "unmatched_targets"), i, t)
		if (mf_same(json_object_get(t, "stage"), stage) && mf_same(json_object_get(t, "target"), target))
			return 1;
	return 0;
}

/* Whether F ran STAGE (a finished call, or open in a snapshot) and does not list TARGET of it as
 * unmatched: a stage of two targets ran from the other one when it does. */
static int mf_matched_in(const struct mf_file *f, const char *stage, const char *target)
{
	size_t i;
	json_t *s;
	if (mf_lists_unmatched(f, stage, target))
		return 0;
	json_array_foreach(f->stages, i, s)
		if (mf_same(json_object_get(s, "name"), stage) &&
		    (mf_calls_of(s) > 0 || json_is_true(json_object_get(s, "open"))))
			return 1;
	return 0;
}

/* Whether STAGE=TARGET is listed before entry J of file I (printed already). */
static int mf_listed_before(const struct mf_file *files, size_t i, size_t j, const char *stage, const char *target)
{
	for (size_t k = 0; k <= i; k++) {
		json_t *list = json_object_get(files[k].root, "unmatched_targets");
		for (size_t e = 0; e < (k < i ? json_array_size(list) : j); e++) {
			json_t *t = json_array_get(list, e);
			if (mf_same(json_object_get(t, "stage"), stage) &&
			    mf_same(json_object_get(t, "target"), target))
				return 1;
		}
	}
	return 0;
}

/* "memshim: stage targets that matched no function that ran: eval=evalute": most often a typo,
 * which would leave no trace; listed by a process, matched by none. */
static int mf_print_unmatched_run(FILE *out, const struct mf_file *files, size_t n)
{
	size_t shown = 0;
	int stopped = 0; /* a process's detection stopped (3.11, a deep recursion): they may have run after */
	for (size_t i = 0; i < n; i++)
		stopped |= json_is_true(json_object_get(files[i].root, "python_detection_stopped"));
	const char *line = stopped ? "memshim: stage targets not matched before Python stage detection stopped (a "
				     "deep recursion): "
				   : "memshim: stage targets that matched no function that ran: ";
	for (size_t i = 0; i < n; i++) {
		size_t j;
		json_t *t;
		json_array_foreach(json_object_get(files[i].root, "unmatched_targets"), j, t) {
			const char *stage = json_string_value(json_object_get(t, "stage"));
			const char *target = json_string_value(json_object_get(t, "target"));
			int matched = 0;
			for (size_t k = 0; k < n && !matched; k++)
				matched = mf_matched_in(&files[k], stage, target);
			if (!stage || !target || matched || mf_listed_before(files, i, j, stage, target))
				continue;
			const char *near = json_string_value(json_object_get(t, "did_you_mean"));
			fprintf(out, "%s%s=%s", shown++ ? ", " : line, stage, target);
			if (near)
				fprintf(out, " (did you mean %s?)", near);
		}
	}
	if (shown)
		fputc('\n', out);
	return shown > 0;
}

/* Whether FUNCTION ("module:qualname") is the program's own script: __main__, or __mp_main__ in a
 * spawned worker. */
static int mf_own_main(const char *function)
{
	return !strncmp(function, "__main__:", 9) || !strncmp(function, "__mp_main__:", 12);
}

/* The functions STAGE's TARGET matched in F (matched_functions), and the one of them (or NULL). */
static size_t mf_functions_of(json_t *stage, const char *target, const char **one)
{
	size_t i, n = 0;
	json_t *e;
	*one = NULL;
	json_array_foreach(json_object_get(stage, "matched_functions"), i, e) {
		if (!mf_same(json_object_get(e, "target"), target) ||
		    !json_string_value(json_object_get(e, "function")))
			continue;
		*one = json_string_value(json_object_get(e, "function"));
		n++;
	}
	return n;
}

/* A bare target whose stage in F was opened by FUNCTION alone, a function outside the program's
 * __main__; several functions are the dump's line under the stage (mf_print_functions).  A forked
 * child's stages came with its parent's counts: the parent says it. */
static int mf_opened_outside(const struct mf_file *f, const char *stage, const char *target, const char *function)
{
	size_t i;
	json_t *s;
	const char *one;
	if (f->forked)
		return 0;
	json_array_foreach(f->stages, i, s)
		if (mf_same(json_object_get(s, "name"), stage) && mf_functions_of(s, target, &one) == 1 &&
		    !strcmp(one, function))
			return 1;
	return 0;
}

/* Whether a process of the run ran TARGET of STAGE as the program's own __main__ function. */
static int mf_ran_own(const struct mf_file *files, size_t n, const char *stage, const char *target)
{
	for (size_t k = 0; k < n; k++) {
		size_t i, j;
		json_t *s, *e;
		json_array_foreach(files[k].stages, i, s) {
			if (!mf_same(json_object_get(s, "name"), stage))
				continue;
			json_array_foreach(json_object_get(s, "matched_functions"), j, e)
				if (mf_same(json_object_get(e, "target"), target) &&
				    json_string_value(json_object_get(e, "function")) &&
				    mf_own_main(json_string_value(json_object_get(e, "function"))))
					return 1;
		}
	}
	return 0;
}

/* Whether file I's stage S is the first of the run to have been opened by FUNCTION for TARGET. */
static int mf_first_opened(const struct mf_file *files, size_t i, const char *stage, const char *target,
			   const char *function)
{
	for (size_t k = 0; k < i; k++)
		if (mf_opened_outside(&files[k], stage, target, function))
			return 0;
	return 1;
}

/* " (in pid 6547, pid 6548)": the processes where it happened, when several files are shown. */
static void mf_print_where(FILE *out, const struct mf_file *files, size_t n, const char *stage, const char *target,
			   const char *function)
{
	size_t named = 0, count = 0;
	if (n < 2)
		return;
	for (size_t k = 0; k < n; k++) {
		if (!mf_opened_outside(&files[k], stage, target, function))
			continue;
		if (named < 3) {
			char *who = mf_proc_label(&files[k]);
			fprintf(out, "%s%s", named++ ? ", " : " (in ", who);
			free(who);
		}
		count++;
	}
	if (count > named)
		fprintf(out, " and %zu more", count - named);
	fputc(')', out);
}

/* "memshim: prep was opened by multiprocessing.spawn:prepare (in pid 6547, pid 6548); pin yours as
 * __main__:prepare": once per stage and function over the run. */
static int mf_print_outside(FILE *out, const struct mf_file *files, size_t n)
{
	int printed = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j, k;
		json_t *s, *e;
		json_array_foreach(files[i].stages, j, s) {
			const char *stage = json_string_value(json_object_get(s, "name"));
			json_array_foreach(json_object_get(s, "matched_functions"), k, e) {
				const char *target = json_string_value(json_object_get(e, "target"));
				const char *function = json_string_value(json_object_get(e, "function"));
				if (!stage || !target || !function || strchr(target, ':') || !strchr(function, ':') ||
				    mf_own_main(function) || !mf_opened_outside(&files[i], stage, target, function) ||
				    !mf_first_opened(files, i, stage, target, function))
					continue;
				int own = mf_ran_own(files, n, stage, target);
				if (strchr(target, '.') && !own)
					continue; /* Trainer.fit: a method named with its class means the library's */
				fprintf(out, "memshim: %s was opened by %s", stage, function);
				mf_print_where(out, files, n, stage, target, function);
				if (own)
					fprintf(out, "; pin yours as __main__:%s\n", target);
				else
					fputs("; if it is not yours, pin yours as module:qualname\n", out);
				printed = 1;
			}
		}
	}
	return printed;
}

/* Whether some file binds STAGE's native TARGET (native_targets: "plt" or "stack"), or a Python
 * process took it as a Python function (it lists it in unmatched_targets, whose line is the Python
 * side's, or ran STAGE: a plain name is native in a shell, Python's in a Python process). */
static int mf_native_found(const struct mf_file *files, size_t n, const char *stage, const char *target)
{
	for (size_t k = 0; k < n; k++) {
		size_t j;
		json_t *t;
		json_array_foreach(json_object_get(files[k].root, "native_targets"), j, t)
			if (mf_same(json_object_get(t, "stage"), stage) &&
			    mf_same(json_object_get(t, "target"), target) &&
			    !mf_same(json_object_get(t, "bound"), "none") &&
			    !mf_same(json_object_get(t, "bound"), "runtime"))
				return 1;
		if (mf_lists_unmatched(&files[k], stage, target) || mf_has_stage(&files[k], stage))
			return 1;
	}
	return 0;
}

/* Whether STAGE's native TARGET is listed before entry J of file I (printed already). */
static int mf_native_listed_before(const struct mf_file *files, size_t i, size_t j, const char *stage,
				   const char *target)
{
	for (size_t k = 0; k <= i; k++) {
		json_t *list = json_object_get(files[k].root, "native_targets");
		for (size_t e = 0; e < (k < i ? json_array_size(list) : j); e++) {
			json_t *t = json_array_get(list, e);
			if (mf_same(json_object_get(t, "stage"), stage) &&
			    mf_same(json_object_get(t, "target"), target))
				return 1;
		}
	}
	return 0;
}

/* "memshim: native stage q: 'exec_simple_query' was not found in any loaded object (in none of the
 * 7 processes)": a native target no process of the run found (each process judging alone, `time ./prog`
 * would say prog's function was not found, `time` having none); under memshim run the library leaves it to this line. */
static int mf_print_native_unfound(FILE *out, const struct mf_file *files, size_t n)
{
	int printed = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j;
		json_t *t;
		json_array_foreach(json_object_get(files[i].root, "native_targets"), j, t) {
			const char *stage = json_string_value(json_object_get(t, "stage"));
			const char *target = json_string_value(json_object_get(t, "target"));
			if (!stage || !target || mf_native_found(files, n, stage, target) ||
			    mf_native_listed_before(files, i, j, stage, target))
				continue;
			if (mf_same(json_object_get(t, "bound"), "runtime")) {
				const char *object = json_string_value(json_object_get(t, "object"));
				fprintf(out,
					"memshim: native stage %s: '%s' is a function of %s, which a plain name does "
					"not bind (a function of the program's own, or a Python function, of that "
					"name is what it names); to mean that one, name it %s:%s\n",
					stage, target, object ? object : "the C runtime", object ? object : "libc.so.6",
					target);
				printed = 1;
				continue;
			}
			fprintf(out, "memshim: native stage %s: '%s' was not found in any loaded object", stage,
				target);
			if (n > 1)
				fprintf(out, " (in none of the %zu processes)", n);
			fputc('\n', out);
			printed = 1;
		}
	}
	return printed;
}

int mf_print_targets(FILE *out, const struct mf_file *files, size_t n)
{
	int any = mf_print_unmatched_run(out, files, n);
	any |= mf_print_native_unfound(out, files, n);
	return mf_print_outside(out, files, n) | any;
}
