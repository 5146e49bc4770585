/* What --sites shows of a site's frames: the user's line first. A stack with Python frames shows
 * its innermost Python frame, the native frames it called folded into one line, then its Python
 * callers (the interpreter's own frames between them left out); --native shows every frame as
 * recorded. Also the keys --by groups sites under. */
#include "base/base.h"
#include "model/opts.h"
#include "model/sites.h"

#include <stdlib.h>
#include <string.h>

enum { MF_FOLD_NAMES = 3 }; /* native names on the folded line before "… N more" */

/* A native frame's function alone: demangled, without its parameters, offset, line and object
 * ("c10::alloc_cpu"); an address without a symbol stays as recorded (malloc'd). */
static char *mf_native_name(const char *frame)
{
	char *shown = mf_clean_frame(frame);
	if (!strncmp(shown, "0x", 2))
		return shown;
	const char *where = mf_frame_where(shown), *off = strstr(shown, "+0x"), *line = mf_frame_line_at(shown);
	size_t n = where ? (size_t)(where - shown) : strlen(shown);
	if (off && (size_t)(off - shown) < n)
		n = (size_t)(off - shown);
	if (line && (size_t)(line - shown) < n)
		n = (size_t)(line - shown);
	if (n && shown[n - 1] == ')') /* the parameters: back to the '(' that opens them */
		for (size_t k = n, depth = 0; k-- > 0;) {
			depth += shown[k] == ')';
			depth -= shown[k] == '(';
			if (!depth) {
				n = k ? k : n;
				break;
			}
		}
	shown[n] = '\0';
	return shown;
}

/* A Python frame's function alone ("backward"; malloc'd). */
static char *mf_python_name(const char *frame)
{
	const char *where = mf_frame_where(frame);
	return mf_xasprintf("%.*s", (int)(where ? where - frame : (long)strlen(frame)), frame);
}

/* A native frame of the interpreter itself: libpython, or a python executable linked statically. */
static int mf_frame_is_interpreter(const char *frame)
{
	const char *where = mf_frame_where(frame);
	return where && (!strncmp(where, " (libpython", 11) || !strncmp(where, " (python", 8));
}

/* The native frames FROM..TO-1 the fold names: those the innermost Python frame called (before
 * it), then any but the interpreter's own frames between the library's Python frames. */
static size_t mf_fold_nameable(const struct mf_site *s, size_t from, size_t to, size_t *total)
{
	size_t n = 0;
	int above = 0;
	*total = 0;
	for (size_t k = from; k < to; k++) {
		const char *f = mf_site_frame(s, k);
		int py = mf_frame_is_python(f);
		above |= py;
		*total += !py;
		n += !py && (!above || !mf_frame_is_interpreter(f));
	}
	return n;
}

/* "[native: a <- b <- c <- … 4 more]" for the native frames among FROM..TO-1 (malloc'd), or NULL
 * when there is none; the interpreter's frames between Python frames are only counted. */
static char *mf_fold_native(const struct mf_site *s, size_t from, size_t to)
{
	size_t total, done = 0, nameable = mf_fold_nameable(s, from, to, &total);
	if (!total)
		return NULL;
	if (!nameable)
		return mf_xasprintf("[native: %zu frame%s of the interpreter]", total, total == 1 ? "" : "s");
	size_t named = nameable < total             ? (nameable < MF_FOLD_NAMES ? nameable : MF_FOLD_NAMES)
		       : total <= MF_FOLD_NAMES + 1 ? total
						    : MF_FOLD_NAMES; /* never "… 1 more" of nameable ones */
	char *line = mf_xstrdup("[native: ");
	int above = 0;
	for (size_t k = from; k < to && done < named; k++) {
		const char *f = mf_site_frame(s, k);
		above |= mf_frame_is_python(f);
		if (mf_frame_is_python(f) || (above && mf_frame_is_interpreter(f)))
			continue;
		char *name = mf_native_name(f), *next = mf_xasprintf("%s%s%s", line, done ? " <- " : "", name);
		free(line), free(name);
		line = next, done++;
	}
	char *more = total > named ? mf_xasprintf(" <- … %zu more", total - named) : mf_xstrdup("");
	char *all = mf_xasprintf("%s%s]", line, more);
	free(line), free(more);
	return all;
}

/* A Python frame in an installed library or the standard library, not the user's own code. */
static int mf_frame_is_library(const char *frame)
{
	const char *where = mf_frame_where(frame);
	return where && (strstr(where, "/site-packages/") || strstr(where, "/dist-packages/") ||
			 strstr(where, "/lib/python3") || strstr(where, "(<frozen "));
}

/* The innermost Python frame of S that is the user's own code, else the innermost Python frame,
 * or -1 (with no Python frame). */
static long mf_first_python(const struct mf_site *s)
{
	long first = -1;
	for (size_t k = 0; k < mf_site_nframes(s); k++) {
		const char *f = mf_site_frame(s, k);
		if (!mf_frame_is_python(f))
			continue;
		if (first < 0)
			first = (long)k;
		if (!mf_frame_is_library(f))
			return (long)k;
	}
	return first;
}

/* The innermost Python frame of S before USER (the user's line) when it is a library's: the
 * framework's own line that allocated, or -1. */
static long mf_framework_line(const struct mf_site *s, long user)
{
	for (long k = 0; k < user; k++)
		if (mf_frame_is_python(mf_site_frame(s, (size_t)k)))
			return mf_frame_is_library(mf_site_frame(s, (size_t)k)) ? k : -1;
	return -1;
}

/* "[library: _engine_run_backward (torch/autograd/graph.py:979) <- backward <- … 2 more]": the
 * Python frames of installed libraries FROM..TO-1 inside the user's line (malloc'd), or NULL; the
 * first with its place only when FULL_FIRST (else it is the line above, and only names follow). */
static char *mf_fold_library(const struct mf_site *s, size_t from, size_t to, int full_first)
{
	char *line = NULL;
	size_t shown = 0, left = 0;
	for (size_t k = from; k < to; k++)
		left += mf_frame_is_python(mf_site_frame(s, k));
	for (size_t k = from; k < to && left; k++) {
		if (!mf_frame_is_python(mf_site_frame(s, k)))
			continue;
		char *name = shown == MF_FOLD_NAMES && left > 1 ? mf_xasprintf("… %zu more", left)
			     : shown || !full_first             ? mf_python_name(mf_site_frame(s, k))
								: mf_clean_frame(mf_site_frame(s, k));
		char *next = mf_xasprintf("%s%s%s", line ? line : "[library: ", shown ? " <- " : "", name);
		free(line), free(name);
		line = next, left--;
		if (shown++ == MF_FOLD_NAMES)
			break;
	}
	if (!line)
		return NULL;
	char *done = mf_xasprintf("%s]", line);
	free(line);
	return done;
}

size_t mf_site_lines(const struct mf_site *s, int native, char ***lines)
{
	size_t nf = mf_site_nframes(s), n = 0;
	long py = native ? -1 : mf_first_python(s);
	*lines = mf_xmalloc((nf + 2) * sizeof **lines); /* the user's line, two folded lines, callers */
	if (!nf) {
		(*lines)[n++] = mf_xstrdup("(no frames)");
		return n;
	}
	if (py < 0) {
		for (size_t k = 0; k < nf; k++)
			(*lines)[n++] = mf_clean_frame(mf_site_frame(s, k));
		return n;
	}
	long lib = s->framework_first ? mf_framework_line(s, py) : -1;
	if (lib >= 0) { /* the framework's own line leads, what it called, the frames up to the user's line */
		(*lines)[n++] = mf_clean_frame(mf_site_frame(s, (size_t)lib));
		char *called = mf_fold_native(s, 0, (size_t)lib);
		if (called)
			(*lines)[n++] = called;
		char *between = mf_fold_library(s, (size_t)lib + 1, (size_t)py, 0);
		if (between)
			(*lines)[n++] = between;
		(*lines)[n++] = mf_clean_frame(mf_site_frame(s, (size_t)py));
	} else {
		(*lines)[n++] = mf_clean_frame(mf_site_frame(s, (size_t)py));
		char *library = mf_fold_library(s, 0, (size_t)py, 1);
		if (library)
			(*lines)[n++] = library;
		char *native_line = mf_fold_native(s, 0, (size_t)py); /* also those under the library's frames */
		if (native_line)
			(*lines)[n++] = native_line;
	}
	for (size_t k = (size_t)py + 1; k < nf; k++)
		if (mf_frame_is_python(mf_site_frame(s, k)))
			(*lines)[n++] = mf_clean_frame(mf_site_frame(s, k));
	return n;
}

int mf_site_python_first(const struct mf_site *s, int native)
{
	return !native && mf_first_python(s) >= 0;
}

/* FRAME's text inside its last " (...)": the object, or "file:line" (malloc'd); FRAME when none. */
static char *mf_frame_place(const char *frame)
{
	const char *where = mf_frame_where(frame);
	if (!where)
		return mf_xstrdup(frame);
	return mf_xasprintf("%.*s", (int)(strlen(where) - 3), where + 2);
}

/* A Python frame under BY: "func (file:12)", "func (file)" or "file" (malloc'd). */
static char *mf_python_key(const char *frame, enum mf_by by)
{
	char *clean = mf_clean_frame(frame), *place = mf_frame_place(clean), *key;
	char *colon = strrchr(place, ':');
	if (colon)
		*colon = '\0';
	if (by == MF_BY_FILE)
		key = mf_xstrdup(place);
	else if (by == MF_BY_FUNCTION)
		key = mf_xasprintf("%.*s (%s)", (int)(mf_frame_where(clean) - clean), clean, place);
	else
		key = mf_xstrdup(clean);
	free(clean), free(place);
	return key;
}

/* A native frame under BY: as shown, "function (object)" or "object" (malloc'd). */
static char *mf_native_key(const char *frame, enum mf_by by)
{
	char *clean = mf_clean_frame(frame), *key;
	if (by == MF_BY_LINE || !mf_frame_where(clean))
		return clean;
	char *place = mf_frame_place(clean);
	if (by == MF_BY_FILE || !strncmp(clean, "0x", 2)) {
		key = by == MF_BY_FILE ? mf_xstrdup(place) : mf_xstrdup(clean);
	} else {
		char *name = mf_native_name(frame);
		key = mf_xasprintf("%s (%s)", name, place);
		free(name);
	}
	free(clean), free(place);
	return key;
}

char *mf_site_key(const struct mf_site *s, enum mf_by by, int native)
{
	long py = native ? -1 : mf_first_python(s);
	if (!mf_site_nframes(s))
		return mf_xstrdup("(no frames)");
	long lib = by == MF_BY_FRAMEWORK && py >= 0 ? mf_framework_line(s, py) : -1;
	if (by == MF_BY_FRAMEWORK)
		by = MF_BY_LINE;
	if (lib >= 0)
		return mf_python_key(mf_site_frame(s, (size_t)lib), by);
	if (py >= 0)
		return mf_python_key(mf_site_frame(s, (size_t)py), by);
	return mf_native_key(mf_site_frame(s, 0), by);
}

void mf_sites_lead(struct mf_sites *s)
{
	const char *user = NULL;
	size_t with_user = 0;
	for (size_t i = 0; i < s->named; i++) {
		long py = mf_first_python(&s->s[i]);
		const char *f = py >= 0 ? mf_site_frame(&s->s[i], (size_t)py) : NULL;
		if (!f || mf_frame_is_library(f))
			continue; /* no Python frames, or none of the user's own */
		if (user && strcmp(user, f))
			return; /* the user's lines tell the sites apart: they lead */
		user = f;
		with_user++;
	}
	for (size_t i = 0; i < s->named && with_user >= 2; i++) {
		long py = mf_first_python(&s->s[i]);
		s->s[i].framework_first = py >= 0 && !mf_frame_is_library(mf_site_frame(&s->s[i], (size_t)py)) &&
					  mf_framework_line(&s->s[i], py) >= 0;
	}
}
