/* Which function a code object runs: its qualified name (3.11+: co_qualname; 3.8-3.10 rebuilt
 * from the frame, the globals or the function objects that run it) and its module (the globals'
 * __name__), matched against the targets (python/targets.c) once per code object; the answer is
 * kept for the detectors (python/evalhook.c, python/monitor.c) to read on every call. */
#include <string.h>
#include "core/config.h"
#include "core/ms.h"
#include "python/py.h"

/* Whether V is a plain function (or a classmethod/staticmethod around one) running CODE.  Only
 * built-in types are inspected, so no user code (__getattr__, descriptors) runs. */
static int runs_code(ms_pyobj *v, ms_pyobj *code)
{
	if (!v)
		return 0;
	ms_pyobj *t = ms_py_type_of(v);
	ms_pyobj *f = NULL;
	if (t == ms_py.ClassMethodType || t == ms_py.StaticMethodType)
		f = ms_py_attr(v, "__func__");
	else if (t == ms_py.FunctionType) {
		f = v;
		ms_py.IncRef(f);
	}
	if (!f)
		return 0;
	int r = 0;
	if (ms_py_type_of(f) == ms_py.FunctionType) {
		ms_pyobj *c = ms_py_attr(f, "__code__");
		r = c == code;
		ms_py_decref(c);
	}
	ms_py_decref(f);
	return r;
}

/* Finds the class in CLS's MRO whose own namespace defines NAME as CODE: "Class.name". */
static int qual_from_mro(ms_pyobj *cls, ms_pyobj *name, const char *co_name, ms_pyobj *code, char *out, size_t size)
{
	ms_pyobj *mro = ms_py_attr(cls, "__mro__");
	int found = -1;
	if (!mro)
		return -1;
	ms_pyssize n = ms_py.TupleSize(mro);
	if (n < 0)
		ms_py.ErrClear();
	for (ms_pyssize i = 0; i < n && found < 0; i++) {
		ms_pyobj *c = ms_py.TupleGetItem(mro, i);
		ms_pyobj *ns = ms_py_attr(c, "__dict__");
		ms_pyobj *v = ns ? ms_py.GetItem(ns, name) : NULL;
		if (ns && !v)
			ms_py.ErrClear();
		if (runs_code(v, code)) {
			char cq[200];
			if (ms_py_attr_text(c, "__qualname__", cq, sizeof cq) == 0 &&
			    strlen(cq) + 1 + strlen(co_name) < size) {
				ms_format(out, size, "%s.%s", cq, co_name);
				found = 0;
			}
		}
		ms_py_decref(v);
		ms_py_decref(ns);
	}
	ms_py_decref(mro);
	return found;
}

/* The name of __main__'s spec (GLOBALS its namespace) into OUT: "pkg.mod" under python -m pkg.mod;
 * 0 when there is one (a script run by path has __spec__ None). */
static int main_spec_name(ms_pyobj *globals, char *out, size_t size)
{
	ms_pyobj *spec = ms_py.DictGetItemString(globals, "__spec__"); /* borrowed */
	if (!spec)
		return -1;
	ms_pyobj *name = ms_py_attr(spec, "name"); /* None has none: an error, cleared by the caller */
	int rc = name ? ms_py_text(name, out, size) : -1;
	ms_py_decref(name);
	return rc;
}

/* Before 3.11 code objects have no co_qualname: rebuild it from the frame (a method's first
 * argument names its class; a module-level function is in the globals), or, for nested
 * functions, from the function object that runs CODE.  Called once per candidate code object. */
static int rebuild_qualname(ms_pyobj *code, ms_pyobj *frame, ms_pyobj *globals, ms_pyobj *name, const char *co_name,
			    char *out, size_t size)
{
	if (frame && ms_py_attr_long(code, "co_argcount", 0) + ms_py_attr_long(code, "co_kwonlyargcount", 0) >= 1) {
		ms_pyobj *varnames = ms_py_attr(code, "co_varnames");
		/* A function frame has no f_locals dict until someone asks; asking makes one that holds
		 * every argument until the frame ends (an argument the function drops would stay alive).
		 * When this call made it, it is taken back: f_locals is the eighth pointer of
		 * PyFrameObject in 3.8-3.10, used only when it holds exactly the dict just returned. */
		ms_pyobj **frame_words = (ms_pyobj **)frame;
		int had_locals = frame_words[7] != NULL;
		ms_pyobj *locals = ms_py_attr(frame, "f_locals");
		if (!had_locals && locals && frame_words[7] == locals) {
			frame_words[7] = NULL;
			ms_py.DecRef(locals); /* the frame's reference; ours goes below */
		}
		ms_pyobj *first = NULL;
		if (varnames && locals && ms_py.TupleSize(varnames) > 0) {
			first = ms_py.GetItem(locals, ms_py.TupleGetItem(varnames, 0));
			if (!first)
				ms_py.ErrClear();
		}
		int found = -1;
		if (first) {
			ms_pyobj *type = ms_py.Type(first);
			if (ms_py.TypeIsSubtype(type, ms_py.TypeType))
				found = qual_from_mro(first, name, co_name, code, out, size);
			if (found < 0)
				found = qual_from_mro(type, name, co_name, code, out, size);
			ms_py_decref(type);
		}
		ms_py_decref(first);
		ms_py_decref(locals);
		ms_py_decref(varnames);
		if (found == 0)
			return 0;
	}
	if (globals && runs_code(ms_py.DictGetItemString(globals, co_name), code)) {
		ms_format(out, size, "%s", co_name);
		return 0;
	}
	/* nested functions and other rare shapes: the function objects that refer to CODE */
	int found = -1;
	ms_pyobj *gc = ms_py.ImportModule("gc");
	ms_pyobj *get = ms_py_attr(gc, "get_referrers");
	ms_pyobj *refs = get ? ms_py.CallFunctionObjArgs(get, code, NULL) : NULL;
	if (get && !refs)
		ms_py.ErrClear();
	if (!gc)
		ms_py.ErrClear();
	ms_pyssize n = refs ? ms_py.ListSize(refs) : 0;
	if (n < 0) {
		ms_py.ErrClear();
		n = 0;
	}
	for (ms_pyssize i = 0; i < n && found < 0; i++) {
		ms_pyobj *f = ms_py.ListGetItem(refs, i);
		if (f && ms_py_type_of(f) == ms_py.FunctionType && runs_code(f, code))
			found = ms_py_attr_text(f, "__qualname__", out, size);
	}
	ms_py_decref(refs);
	ms_py_decref(get);
	ms_py_decref(gc);
	return found;
}

/* CODE (named CO_NAME) runs and its name is near an unmatched target's: its qualified name (3.11+;
 * before, its name) is noted with whether it is the program's own. */
static void note_near(ms_pyobj *code, const char *co_name)
{
	char qual[256], file[MS_PATH_MAX];
	if (ms_py.minor < 11 || ms_py_attr_text(code, "co_qualname", qual, sizeof qual) != 0)
		ms_strlcpy(qual, co_name, sizeof qual);
	ms_py_near(qual, ms_py_attr_text(code, "co_filename", file, sizeof file) == 0 && ms_py_user_file(file));
}

uintptr_t ms_py_classify(ms_pyobj *code, ms_pyobj *frame, ms_pyobj *func, ms_pyobj *globals)
{
	ms_pyobj *et, *ev, *etb;
	ms_py.ErrFetch(&et, &ev, &etb);
	uintptr_t value = MS_PY_SEEN;
	char co_name[128], qual[256], module[256];
	ms_pyobj *name = ms_py_attr(code, "co_name");
	int have_name = ms_py_text(name, co_name, sizeof co_name) == 0;
	if (have_name && !ms_py_is_candidate(co_name) && ms_py_near_wanted(co_name))
		note_near(code, co_name); /* a function that runs, named near a target that matched nothing */
	if (have_name && ms_py_is_candidate(co_name)) {
		ms_pyobj *own_globals = NULL;
		if (!globals && func)
			globals = own_globals = ms_py_attr(func, "__globals__");
		if (!globals && frame)
			globals = own_globals = ms_py_attr(frame, "f_globals");
		int have_qual = ms_py.minor >= 11
					? ms_py_attr_text(code, "co_qualname", qual, sizeof qual)
					: rebuild_qualname(code, frame, globals, name, co_name, qual, sizeof qual);
		int have_module = -1, have_alias = -1;
		char alias[256];
		if (globals)
			have_module = ms_py_text(ms_py.DictGetItemString(globals, "__name__"), module, sizeof module);
		if (have_module == 0 && !strcmp(module, "__main__")) /* python -m pkg.mod: its spec says pkg.mod */
			have_alias = main_spec_name(globals, alias, sizeof alias);
		if (ms_py.ErrOccurred())
			ms_py.ErrClear();
		int entry_index = -1;
		char file[MS_PATH_MAX];
		int user = ms_py_attr_text(code, "co_filename", file, sizeof file) == 0 && ms_py_user_file(file);
		uint32_t mask = have_qual == 0 ? ms_py_match(qual, have_module == 0 ? module : NULL,
							     have_alias == 0 ? alias : NULL, user, &entry_index)
					       : 0;
		if (mask) {
			value |= (uintptr_t)mask << MS_PY_SHIFT;
			if (entry_index >= 0)
				value |= (uintptr_t)(entry_index + 1) << MS_PY_FUNC_SHIFT;
			if (ms_py_attr_long(code, "co_flags", 0) & (0x20 | 0x80 | 0x100 | 0x200))
				value |= MS_PY_GENLIKE;
			ms_debug("python stage target found: %s%s%s", have_module == 0 ? module : "",
				 have_module == 0 ? ":" : "", qual);
		}
		ms_py_decref(own_globals);
	}
	ms_py_decref(name);
	ms_py_code_put(code, value);
	ms_py.ErrRestore(et, ev, etb);
	return value;
}

void ms_py_release_locals_dict(ms_pyobj *code, ms_pyobj **slot)
{
	ms_pyobj *d = *slot;
	/* a class body's or module's namespace is held elsewhere too; only a function's is a copy */
	if (!d || *(const ms_pyssize *)d != 1 || !(ms_py_attr_long(code, "co_flags", 0) & 0x1 /* CO_OPTIMIZED */))
		return;
	*slot = NULL;
	ms_py.DecRef(d);
}
