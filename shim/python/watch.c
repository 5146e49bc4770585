/* The detector is not free: the 3.8-3.11 frame hook sees every call (and on 3.11 CPython stops
 * inlining Python-to-Python calls: +52% instructions on a recursive fib), 3.12+'s PY_START event
 * fires once per code object and costs each call a little (+3%).  So the hook goes in, or the
 * events go on, only once a function that some target can name exists in the process.
 *
 * Python code reaches the interpreter through the "exec" audit event: the main script, -c, stdin,
 * runpy (-m), every module import (source, .pyc or frozen), exec()/eval() of a string or a code
 * object.  The event's code object is searched, with the code objects among its constants (the
 * functions and classes it defines, nested), before it runs.  types.CodeType / code.replace raise
 * "code.__new__" with the new code's name (3.9+).  What exists before the detector starts (site,
 * .pth files, sitecustomize) is looked up by name in sys.modules, and a main program read from a
 * .pyc (no "exec" event) puts the hook in at once.
 *
 * "Can name": 3.11 matches co_qualname, so the code's co_qualname must be a target's name.
 * 3.8-3.10 rebuild the qualified name when called (the class in the first argument's MRO that
 * holds the function, else the module global of that name), so besides the compiler's qualified
 * name (parent names joined with "." and ".<locals>.") a class body named like a target's class
 * part counts (a function assigned into that class later would match), and for a target without a
 * dot any code object of that name does. */
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/ms.h"
#include "intercept/hooks.h"
#include "python/py.h"

#define CO_NEWLOCALS 0x2
#define QUAL_MAX 512
#define DEPTH_MAX 64

static char why[QUAL_MAX + 64] MS_LARGE;

/* Targets, copied at start (asked for once per code object searched). */
#define MAX_TARGETS (MS_SPEC_MAX_STAGES * MS_SPEC_MAX_TARGETS)
static const char *t_qual[MAX_TARGETS] MS_LARGE, *t_last[MAX_TARGETS] MS_LARGE;

/* The search's state (the tables above are apart: 1 KiB and more go to .lbss). */
static struct {
	int nt; /* targets in t_qual, t_last */
	/* Offsets of co_consts and co_name (co_qualname: 3.11) in PyCodeObject, from each version's
	 * headers; read directly (an attribute lookup is ~1K instructions) once a code object with
	 * constants has shown the same objects through its attributes.  LAYOUT: 0 not yet, 1
	 * verified, -1 different (attributes only). */
	size_t off_consts, off_name, off_qualname;
	int layout;
	void (*each_code)(ms_pyobj *code); /* ms_py_watch_event's EACH, while it searches */
	/* The event's code is the program's own (the main script, a file under the working
	 * directory): the functions a target without a module names there are the program's, which
	 * win over an installed package's (python/targets.c). */
	int event_user;
	/* Walk the whole tree even after a find: the program's own definitions (they win over a
	 * package's function of the same name) and the names near a target that matched nothing yet
	 * (the exit's "did you mean") are noted along. */
	int walk_all;
	char main_file[QUAL_MAX]; /* the main script's path (cpython.run_file), or "" */
} watching;

static ms_pyobj *field(ms_pyobj *code, size_t off)
{
	return *(ms_pyobj **)((char *)code + off);
}

static void check_layout(ms_pyobj *code)
{
	watching.off_consts = ms_py.minor >= 11 ? 24 : 56;
	watching.off_name = ms_py.minor >= 11 ? 120 : 112;
	watching.off_qualname = 128;
	ms_pyobj *consts = ms_py.GetAttrString(code, "co_consts");
	ms_pyobj *name = ms_py.GetAttrString(code, "co_name");
	ms_pyobj *qual = ms_py.minor >= 11 ? ms_py.GetAttrString(code, "co_qualname") : NULL;
	if (!consts || !name || (ms_py.minor >= 11 && !qual)) {
		ms_py.ErrClear();
		watching.layout = -1;
	} else if (field(code, watching.off_consts) != consts || field(code, watching.off_name) != name ||
		   (qual && field(code, watching.off_qualname) != qual)) {
		watching.layout = -1;
	} else if (ms_py.TupleSize(consts) > 0) {
		watching.layout = 1; /* an empty tuple is shared: it proves nothing */
	}
	ms_pyobj *objs[3] = { consts, name, qual };
	for (int i = 0; i < 3; i++)
		if (objs[i])
			ms_py.DecRef(objs[i]);
	if (watching.layout)
		ms_debug("code objects searched %s", watching.layout > 0 ? "directly" : "through their attributes");
}

/* The text of string V copied into BUF; 0 on success, no exception left. */
static int text(ms_pyobj *v, char *buf, size_t size)
{
	const char *s = v ? ms_py.UnicodeAsUTF8(v) : NULL;
	size_t n = s ? strlen(s) : 0;
	if (!s)
		ms_py.ErrClear();
	if (!s || n >= size)
		return -1;
	memcpy(buf, s, n + 1);
	return 0;
}

/* The text of CODE's string field at OFF, or attribute NAME. */
static int code_text(ms_pyobj *code, size_t off, const char *name, char *buf, size_t size)
{
	if (watching.layout > 0)
		return text(field(code, off), buf, size);
	ms_pyobj *v = ms_py.GetAttrString(code, name);
	int r = text(v, buf, size);
	if (v)
		ms_py.DecRef(v);
	else
		ms_py.ErrClear();
	return r;
}

static long attr_long(ms_pyobj *o, const char *name)
{
	ms_pyobj *v = ms_py.GetAttrString(o, name);
	long r = v ? ms_py.LongAsLong(v) : -1;
	if (r == -1)
		ms_py.ErrClear();
	if (v)
		ms_py.DecRef(v);
	return r;
}

/* Whether a target's last component is NAME (LOOSE: a target without a dot is NAME). */
static int named(const char *name, int loose)
{
	for (int i = 0; i < watching.nt; i++)
		if (strcmp(t_last[i], name) == 0 && (!loose || t_last[i] == t_qual[i]))
			return 1;
	return 0;
}

/* Whether QUAL is a target's qualified name, or (CLASS_PART) all of it before the last dot. */
static int qual_is(const char *qual, int class_part)
{
	size_t n = strlen(qual);
	for (int i = 0; i < watching.nt; i++) {
		const char *q = t_qual[i], *last = t_last[i];
		if (!class_part && strcmp(q, qual) == 0)
			return 1;
		if (class_part && last > q && (size_t)(last - q) == n + 1 && memcmp(q, qual, n) == 0)
			return 1;
	}
	return 0;
}

static const char *found(const char *what, const char *qual)
{
	ms_format(why, sizeof why, "%s %s", what, qual);
	return why;
}

/* 3.8-3.10: whether the code named NAME under PREFIX (its parent's qualified name and a dot, LEN
 * bytes, in a QUAL_MAX buffer) can be named, leaving its qualified name in PREFIX. */
static const char *check_rebuilt(ms_pyobj *code, const char *name, char *prefix, size_t len)
{
	size_t n = strlen(name);
	if (len + n + 16 > QUAL_MAX)
		return found("a function nested too deep to name,", name);
	memcpy(prefix + len, name, n + 1);
	if (named(name, 1))
		return found("a function named", name);
	if (qual_is(prefix, 0))
		return found("the function", prefix);
	if (qual_is(prefix, 1) && !(attr_long(code, "co_flags") & CO_NEWLOCALS))
		return found("the class", prefix);
	return NULL;
}

/* Searches CODE and, depth first, the code objects among its constants.  PREFIX: see above
 * (3.8-3.10 only; "" for the code an event brings: it runs at module level). */

/* What the walk notes about a function: a definition of a target's name in the program's own code,
 * and a name near an unmatched target's.  QUAL: its qualified name (NULL: not known). */
static void note(const char *name, const char *qual)
{
	if (!qual)
		return;
	if (watching.event_user && named(name, 0) && qual_is(qual, 0))
		ms_py_user_defines(qual);
	if (ms_py_near_wanted(name))
		ms_py_near(qual, watching.event_user);
}

static const char *search(ms_pyobj *code, char *prefix, size_t len, int depth)
{
	char name[256], qual[QUAL_MAX];
	if (depth > DEPTH_MAX)
		return found("code nested too deep to search:", prefix);
	if (!watching.layout)
		check_layout(code);
	if (code_text(code, watching.off_name, "co_name", name, sizeof name) != 0)
		return NULL;
	const char *r = NULL;
	if (ms_py.minor >= 11) {
		int have = (named(name, 0) || watching.walk_all) &&
			   code_text(code, watching.off_qualname, "co_qualname", qual, sizeof qual) == 0;
		if (have && watching.walk_all)
			note(name, qual);
		if (have && named(name, 0) && qual_is(qual, 0)) {
			if (!watching.each_code)
				r = found("the function", qual);
			else
				watching.each_code(code); /* and on: every one of them is wanted */
		}
	} else if (depth > 0) {
		r = check_rebuilt(code, name, prefix, len);
		if (watching.walk_all && len + strlen(name) + 16 <= QUAL_MAX)
			note(name, prefix); /* check_rebuilt left the rebuilt qualified name there */
	}
	if (r && !watching.walk_all)
		return r;
	int owned = watching.layout <= 0; /* a new reference */
	ms_pyobj *consts = owned ? ms_py.GetAttrString(code, "co_consts") : field(code, watching.off_consts);
	ms_pyssize n = consts ? ms_py.TupleSize(consts) : -1;
	if (n < 0)
		ms_py.ErrClear();
	size_t child_len = 0;
	for (ms_pyssize i = 0; i < n && (!r || watching.walk_all); i++) {
		ms_pyobj *c = ms_py.TupleGetItem(consts, i);
		if (!c || ms_py_type_of(c) != ms_py.CodeType)
			continue;
		if (ms_py.minor < 11 && depth > 0 && !child_len) {
			/* children of a function are "f.<locals>.g", of a class body "C.g" */
			child_len = strlen(prefix);
			const char *sep = attr_long(code, "co_flags") & CO_NEWLOCALS ? ".<locals>." : ".";
			memcpy(prefix + child_len, sep, strlen(sep) + 1);
			child_len += strlen(sep);
		}
		const char *cr = search(c, prefix, child_len, depth + 1);
		r = r ? r : cr;
		if (child_len)
			prefix[child_len] = '\0';
	}
	if (consts && owned)
		ms_py.DecRef(consts);
	return r;
}

/* Whether the main program FILE is compiled code: CPython's own test (a .pyc name, or its magic
 * number at the start). */
static int pyc_file(const char *file)
{
	size_t n = strlen(file);
	if (n > 4 && strcmp(file + n - 4, ".pyc") == 0)
		return 1;
	long (*magic)(void) = NULL;
	*(void **)&magic = ms_real_dlsym(RTLD_DEFAULT, "PyImport_GetMagicNumber");
	unsigned char head[2];
	struct stat st;
	if (ms_sys_stat(file, &st) != 0 || !S_ISREG(st.st_mode))
		return 0; /* a pipe (python <(...), /dev/stdin): reading would take the program's bytes */
	int fd = ms_sys_open(file, O_RDONLY | O_CLOEXEC, 0);
	int got = fd >= 0 && ms_sys_read(fd, head, 2) == 2;
	if (fd >= 0)
		ms_sys_close(fd);
	return got && magic && (head[0] | head[1] << 8) == (magic() & 0xffff);
}

/* Whether a module holds a global named HEAD (a new string; target MODULE only, when given). */
static const char *defined_before(ms_pyobj *modules, const char *module, size_t mlen, ms_pyobj *head)
{
	ms_pyssize pos = 0;
	ms_pyobj *key, *mod;
	while (ms_py.DictNext(modules, &pos, &key, &mod)) {
		const char *k = ms_py.UnicodeAsUTF8(key);
		if (!k) {
			ms_py.ErrClear();
			continue;
		}
		if (module && (strlen(k) != mlen || memcmp(k, module, mlen) != 0))
			continue;
		ms_pyobj *t = ms_py_type_of(mod);
		if (t != ms_py.ModuleType && !ms_py.TypeIsSubtype(t, ms_py.ModuleType))
			continue;
		ms_pyobj *d = ms_py.ModuleGetDict(mod);
		if (d && ms_py.DictGetItem(d, head))
			return found("a module loaded before the program started defines", k);
	}
	return NULL;
}

/* Whether a target before I has the same first name (QUAL's first N bytes) and module: the
 * Trainer's five methods are one search of sys.modules, not five. */
static int searched_before(int i, const char *qual, size_t n, const char *module, size_t mlen)
{
	const char *m, *l, *q;
	size_t ml;
	for (int j = 0; j < i && (q = ms_py_target(j, &m, &ml, &l)); j++)
		if (strcspn(q, ".") == n && !memcmp(q, qual, n) && ml == mlen && (!mlen || !memcmp(m, module, mlen)) &&
		    !m == !module)
			return 1;
	return 0;
}

const char *ms_py_watch_start(const char *event, ms_pyobj *args)
{
	const char *module, *last, *qual, *r = NULL;
	size_t mlen;
	int count = 0;
	for (; count < MAX_TARGETS && (qual = ms_py_target(count, &module, &mlen, &last)); count++) {
		t_qual[count] = qual;
		t_last[count] = last;
	}
	watching.nt = count;
	if (strcmp(event, "cpython.run_file") == 0 && args && ms_py.TupleSize(args) > 0) {
		const char *file = ms_py.UnicodeAsUTF8(ms_py.TupleGetItem(args, 0));
		if (!file)
			ms_py.ErrClear();
		else if (pyc_file(file))
			return "the main program is compiled code (no exec event to search)";
		else
			ms_strlcpy(watching.main_file, file, sizeof watching.main_file);
	}
	ms_pyobj *modules = ms_py.GetModuleDict();
	for (int i = 0; !r && modules && (qual = ms_py_target(i, &module, &mlen, &last)); i++) {
		char head[QUAL_MAX];
		size_t n = strcspn(qual, ".");
		if (n >= sizeof head || searched_before(i, qual, n, module, mlen))
			continue;
		memcpy(head, qual, n);
		head[n] = '\0';
		ms_pyobj *key = ms_py.UnicodeFromString(head);
		if (!key) {
			ms_py.ErrClear();
			continue;
		}
		r = defined_before(modules, module, mlen, key);
		ms_py.DecRef(key);
	}
	return r;
}

const char *ms_py_watch_event(const char *event, ms_pyobj *args, void (*each)(ms_pyobj *code))
{
	if (event[0] == 'e' && strcmp(event, "exec") == 0) {
		ms_pyobj *code = args && ms_py.TupleSize(args) > 0 ? ms_py.TupleGetItem(args, 0) : NULL;
		if (!code || ms_py_type_of(code) != ms_py.CodeType) {
			ms_py.ErrClear();
			return NULL;
		}
		char prefix[QUAL_MAX] = "", file[QUAL_MAX];
		watching.each_code = ms_py.minor >= 11 ? each : NULL;
		watching.event_user =
			ms_py_attr_text(code, "co_filename", file, sizeof file) == 0 &&
			((watching.main_file[0] && !strcmp(file, watching.main_file)) || ms_py_user_file(file));
		watching.walk_all = watching.event_user || ms_py_unmatched_any();
		const char *r = search(code, prefix, 0, 0);
		watching.each_code = NULL;
		watching.event_user = watching.walk_all = 0;
		return r;
	}
	/* 3.8 raises it for every code object unmarshalled too; there exec follows */
	if (event[0] == 'c' && ms_py.minor >= 9 && strcmp(event, "code.__new__") == 0 && args &&
	    ms_py.TupleSize(args) > 2) {
		const char *name = ms_py.UnicodeAsUTF8(ms_py.TupleGetItem(args, 2));
		if (!name)
			ms_py.ErrClear();
		else if (named(name, 0))
			return found("a code object built at run time named", name);
	}
	return NULL;
}
