/* Python 3.12+: sys.monitoring.  Only the code objects a target can name get memshim's events:
 * python/watch.c finds them in the code each "exec" audit event brings (its co_qualname is a
 * target's), before it runs, and ms_py_monitor_watch gives them local PY_START / PY_RETURN /
 * PY_YIELD / PY_RESUME events; at their first call the module is checked (python/classify.c), and
 * a code object that matches no target loses its events.  PY_UNWIND and PY_THROW (global-only
 * events, no instrumentation) close and reopen stages on exceptions.  Where the code cannot be
 * found before it runs (a compiled main program, an embedded interpreter, code built at run time,
 * functions defined before the program started), ms_py_monitor_enable turns PY_START on globally
 * instead, answered with DISABLE for code objects that match no target.  Sees every thread.
 *
 * A tool id is taken only with the first such code object: before that the program sees
 * sys.monitoring exactly as without memshim.  From then on the program's calls of sys.monitoring
 * see memshim's id as free: get_tool, get_events, get_local_events and _all_events answer for it
 * as for an unused id, and any call that would use or change it (use_tool_id, set_events, register_callback,
 * ...) first moves memshim to another free id (warning once), so the program's call does what it
 * would do without memshim. */
#include <dlfcn.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "python/py.h"

static int tool = -1;
/* PY_START on every code object (ms_py_monitor_enable: +3% on fib), else only on the watched ones. */
static int global_start;
static ms_pyobj *mon;      /* sys.monitoring */
static ms_pyobj *disable;  /* sys.monitoring.DISABLE */
static ms_pyobj *watched;  /* code objects with local events (kept alive: their events, our table) */
/* Watched code objects not called yet, and whether any matched: while neither, no target can
 * match (the watched names ran in other modules) and the tool id is given back. */
static int waiting, matched_any;

/* sys.monitoring's functions memshim calls (the originals) and shows the program wrapped. */
enum { F_USE, F_FREE, F_CLEAR, F_GET_TOOL, F_GET_EVENTS, F_SET_EVENTS, F_GET_LOCAL, F_SET_LOCAL,
       F_REGISTER, F_ALL, NF };
static const char *const fn_names[NF] = { "use_tool_id", "free_tool_id", "clear_tool_id", "get_tool",
					  "get_events", "set_events", "get_local_events",
					  "set_local_events", "register_callback", "_all_events" };
static ms_pyobj *orig[NF];
static int wrapped;
static long ev_start, ev_resume, ev_return, ev_yield, ev_unwind, ev_throw;
static ms_pyobj *(*list_new)(ms_pyssize n);
static int (*list_append)(ms_pyobj *l, ms_pyobj *o);
static ms_pyobj *(*vectorcall)(ms_pyobj *f, ms_pyobj *const *args, size_t nargsf, ms_pyobj *kw);

/* 0-2 are debuggers', coverage's, profilers'; 3 and 4 are the free ones tools and tests take
 * first (CPython's test_monitoring asserts them free), 5 is named for optimizers, none ships */
static const int preferred_ids[] = { 5, 4, 3 };

static ms_pyobj *none(void)
{
	ms_py.IncRef(ms_py.None);
	return ms_py.None;
}

static inline uintptr_t extra_of(ms_pyobj *code)
{
	return ms_py_type_of(code) == ms_py.CodeType ? ms_py_code_get(code) : 0;
}

/* Calls sys.monitoring's original function F(args...) and drops the result; 0 on success. */
static int call(int f, ms_pyobj *a, ms_pyobj *b, ms_pyobj *c)
{
	ms_pyobj *r = orig[f] ? ms_py.CallFunctionObjArgs(orig[f], a, b, c, NULL) : NULL;
	if (!r) {
		ms_py.ErrClear();
		return -1;
	}
	ms_py.DecRef(r);
	return 0;
}

/* The same with integer arguments (C, when given, is an object). */
static int call_ints(int name, long a, int nb, long b, ms_pyobj *c)
{
	ms_pyobj *ao = ms_py.LongFromLong(a);
	ms_pyobj *bo = nb ? ms_py.LongFromLong(b) : NULL;
	int r = -1;
	if (ao && (!nb || bo))
		r = call(name, ao, bo, c);
	else
		ms_py.ErrClear();
	if (ao)
		ms_py.DecRef(ao);
	if (bo)
		ms_py.DecRef(bo);
	return r;
}

static int set_local(int id, ms_pyobj *code, long events)
{
	ms_pyobj *ido = ms_py.LongFromLong(id);
	ms_pyobj *evo = ms_py.LongFromLong(events);
	int r = ido && evo ? call(F_SET_LOCAL, ido, code, evo) : -1;
	if (!ido || !evo)
		ms_py.ErrClear();
	if (ido)
		ms_py.DecRef(ido);
	if (evo)
		ms_py.DecRef(evo);
	return r;
}

#define LOCAL_EVENTS (ev_start | ev_return | ev_yield | ev_resume)

static void stop_tool(void);

static ms_pyobj *cb_start(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	if (nargs < 1)
		return none();
	ms_pyobj *code = args[0];
	uintptr_t v = extra_of(code);
	if (!v && ms_py_type_of(code) == ms_py.CodeType) {
		waiting -= !global_start && waiting > 0;
		v = ms_py_classify(code, NULL, NULL, ms_py.EvalGetGlobals());
		matched_any |= ms_py_mask(v) != 0;
		/* this very frame's return/yield fire too: the instrumentation is in place at once */
		if (ms_py_mask(v) && global_start &&
		    (set_local(tool, code, LOCAL_EVENTS) != 0 || list_append(watched, code) != 0)) {
			ms_py.ErrClear();
			ms_py_warn_once(2, "could not follow a matched Python function's exits; its stage is skipped");
			v = MS_PY_SEEN;
			ms_py_code_put(code, v);
		}
		if (!ms_py_mask(v) && !global_start) {
			set_local(tool, code, 0); /* a watched name in another module: nothing more to see */
			if (!waiting && !matched_any) {
				stop_tool();
				ms_debug("python monitoring: no watched function can match now: tool id given back");
				return none(); /* no DISABLE for an id no longer held */
			}
		}
	}
	uint32_t mask = ms_py_mask(v);
	if (!mask) {
		ms_py.IncRef(disable);
		return disable;
	}
	ms_py_enter(v);
	return none();
}

static ms_pyobj *cb_enter(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = nargs >= 1 ? extra_of(args[0]) : 0;
	if (ms_py_mask(v))
		ms_py_enter(v);
	return none();
}

static ms_pyobj *cb_leave(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = nargs >= 1 ? extra_of(args[0]) : 0;
	uint32_t mask = ms_py_mask(v) ? ms_py_leaving(v) : 0;
	if (mask)
		ms_py_leave(mask);
	return none();
}

/* PY_UNWIND (code, offset, exception): an exception leaves the function. */
static ms_pyobj *cb_unwind(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = nargs >= 1 ? extra_of(args[0]) : 0;
	uint32_t mask = ms_py_mask(v) ? ms_py_leaving(v) : 0;
	if (mask)
		ms_py_leave_raised(mask, nargs >= 3 && args[2] ? ms_py_type_of(args[2]) : NULL);
	return none();
}

/* ---- a returning function's locals -------------------------------------------------------
 * PY_RETURN fires inside the frame; the interpreter clears it right after the callbacks, with
 * nothing in between, so its locals would be freed just after the stage ends.  They are released
 * here instead, when nothing can tell: the frame belongs to the thread (not a generator's), no
 * frame object someone else holds will take the locals over, and no tool called after memshim
 * (the lower ids: callbacks run from the highest id down) watches this return.  Layouts, from the
 * 3.12 and 3.13 headers: _PyInterpreterFrame's code first, frame_obj the seventh pointer, the owner
 * byte at 70, localsplus at 72, f_locals the sixth pointer; co_firstlineno and co_nlocalsplus the ints at 68 and 72 of the code
 * object (checked on the first matched code object against its attributes). */
#define FRAME_CODE(f) (((ms_pyobj **)(f))[0])
#define FRAME_LOCALS_DICT(f) (&((ms_pyobj **)(f))[5])
#define FRAME_OBJ(f) (((ms_pyobj **)(f))[6])
#define FRAME_OWNER(f) (((const char *)(f))[70])
#define FRAME_LOCALS(f) ((ms_pyobj **)((char *)(f) + 72))
#define CODE_INT(c, off) (*(const int *)((const char *)(c) + (off)))
#define OWNED_BY_THREAD 0
#define REFCNT(o) (*(const ms_pyssize *)(o))

static int code_layout; /* 0 not checked, 1 verified, -1 different */

static long attr_len(ms_pyobj *o, const char *name)
{
	ms_pyobj *v = ms_py.GetAttrString(o, name);
	ms_pyssize n = v ? ms_py.TupleSize(v) : -1;
	if (v)
		ms_py.DecRef(v);
	if (n < 0)
		ms_py.ErrClear();
	return (long)n;
}

static void check_code_layout(ms_pyobj *code)
{
	ms_pyobj *first = ms_py.GetAttrString(code, "co_firstlineno");
	long line = first ? ms_py.LongAsLong(first) : -1;
	if (first)
		ms_py.DecRef(first);
	long vars = attr_len(code, "co_varnames"), cells = attr_len(code, "co_cellvars");
	long frees = attr_len(code, "co_freevars");
	long n = CODE_INT(code, 72);
	/* a cell that is also an argument has one slot */
	code_layout = line >= 0 && vars >= 0 && cells >= 0 && frees >= 0 && CODE_INT(code, 68) == line &&
		n >= vars + frees && n <= vars + cells + frees ? 1 : -1;
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
	ms_debug("python frames' locals released at return: %s", code_layout > 0 ? "yes" : "no (layout differs)");
}

/* Whether a tool that runs after memshim watches CODE's returns. */
static ms_pyobj *fn_get_tool, *fn_get_events, *fn_get_local_events; /* sys.monitoring's originals */

/* FN(ID[, CODE]) as a C long, or -1 (no exception left). */
static long call_long(ms_pyobj *fn, long id, ms_pyobj *code, int *is_none)
{
	ms_pyobj *args[2] = { ms_py.LongFromLong(id), code };
	ms_pyobj *r = fn && args[0] ? vectorcall(fn, args, code ? 2 : 1, NULL) : NULL;
	long v = -1;
	if (is_none)
		*is_none = r == ms_py.None;
	else if (r)
		v = ms_py.LongAsLong(r);
	if (r)
		ms_py.DecRef(r);
	else
		v = -2;
	if (args[0])
		ms_py.DecRef(args[0]);
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
	return v;
}

static int later_tool_sees_return(ms_pyobj *code)
{
	if (!fn_get_tool) {
		fn_get_tool = orig[F_GET_TOOL];
		fn_get_events = orig[F_GET_EVENTS];
		fn_get_local_events = orig[F_GET_LOCAL];
	}
	for (int id = 0; id < tool; id++) {
		int idle = 0;
		if (call_long(fn_get_tool, id, NULL, &idle) == -2)
			return 1; /* cannot tell: leave the locals */
		if (idle)
			continue;
		long global = call_long(fn_get_events, id, NULL, NULL);
		long local = call_long(fn_get_local_events, id, code, NULL);
		if (global < 0 || local < 0 || ((global | local) & ev_return))
			return 1;
	}
	return 0;
}

static void release_locals(ms_pyobj *code)
{
	void *frame = ms_py_current_frame();
	if (!frame || FRAME_CODE(frame) != code || FRAME_OWNER(frame) != OWNED_BY_THREAD)
		return;
	ms_pyobj *fo = FRAME_OBJ(frame);
	if (fo && REFCNT(fo) != 1)
		return;
	if (!code_layout)
		check_code_layout(code);
	int n = CODE_INT(code, 72);
	if (code_layout < 0 || n <= 0 || later_tool_sees_return(code))
		return;
	ms_pyobj **slot = FRAME_LOCALS(frame);
	for (int i = 0; i < n; i++) {
		ms_pyobj *o = slot[i];
		slot[i] = NULL;
		if (o)
			ms_py.DecRef(o);
	}
	ms_py_release_locals_dict(code, FRAME_LOCALS_DICT(frame));
}

static ms_pyobj *cb_return(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = nargs >= 1 ? extra_of(args[0]) : 0;
	uint32_t mask = ms_py_mask(v) ? ms_py_leaving(v) : 0;
	if (!mask)
		return none();
	if (!(v & MS_PY_GENLIKE)) {
		ms_pyobj *et, *ev, *etb;
		ms_py.ErrFetch(&et, &ev, &etb);
		release_locals(args[0]);
		ms_py.ErrRestore(et, ev, etb);
	}
	ms_py_leave(mask);
	return none();
}

static struct ms_pymethoddef def_start = { "memshim_py_start", (void *)cb_start, MS_METH_FASTCALL, NULL };
static struct ms_pymethoddef def_enter = { "memshim_py_enter", (void *)cb_enter, MS_METH_FASTCALL, NULL };
static struct ms_pymethoddef def_leave = { "memshim_py_leave", (void *)cb_leave, MS_METH_FASTCALL, NULL };
static struct ms_pymethoddef def_unwind = { "memshim_py_unwind", (void *)cb_unwind, MS_METH_FASTCALL, NULL };
static struct ms_pymethoddef def_return = { "memshim_py_return", (void *)cb_return, MS_METH_FASTCALL, NULL };
static ms_pyobj *fn_start, *fn_enter, *fn_leave, *fn_unwind, *fn_return;

static int tool_free(int id)
{
	ms_pyobj *ido = ms_py.LongFromLong(id);
	ms_pyobj *r = ido && orig[F_GET_TOOL] ? ms_py.CallFunctionObjArgs(orig[F_GET_TOOL], ido, NULL) : NULL;
	int free_ = r == ms_py.None;
	if (!r)
		ms_py.ErrClear();
	if (r)
		ms_py.DecRef(r);
	if (ido)
		ms_py.DecRef(ido);
	return free_;
}

/* Takes a free tool id and turns the events on; 0 on success, -1 when no id is free, -2 when
 * sys.monitoring refused a call. */
static int start_tool(int avoid)
{
	int id = -1;
	for (size_t i = 0; i < sizeof preferred_ids / sizeof *preferred_ids && id < 0; i++)
		if (preferred_ids[i] != avoid && tool_free(preferred_ids[i]))
			id = preferred_ids[i];
	if (id < 0)
		return -1;
	ms_pyobj *name = ms_py.UnicodeFromString("memshim");
	ms_pyobj *ido = ms_py.LongFromLong(id);
	int ok = name && ido && call(F_USE, ido, name, NULL) == 0;
	if (name)
		ms_py.DecRef(name);
	if (ido)
		ms_py.DecRef(ido);
	if (!ok) {
		ms_py.ErrClear();
		return -2;
	}
	tool = id;
	ok = call_ints(F_REGISTER, id, 1, ev_start, fn_start) == 0 &&
	     call_ints(F_REGISTER, id, 1, ev_resume, fn_enter) == 0 &&
	     call_ints(F_REGISTER, id, 1, ev_throw, fn_enter) == 0 &&
	     call_ints(F_REGISTER, id, 1, ev_return, fn_return) == 0 &&
	     call_ints(F_REGISTER, id, 1, ev_yield, fn_leave) == 0 &&
	     call_ints(F_REGISTER, id, 1, ev_unwind, fn_unwind) == 0;
	ms_pyssize n = ok ? ms_py.ListSize(watched) : 0;
	for (ms_pyssize i = 0; i < n && ok; i++) {
		ms_pyobj *code = ms_py.ListGetItem(watched, i);
		uintptr_t v = extra_of(code);
		ok = set_local(id, code, !v || ms_py_mask(v) ? LOCAL_EVENTS : 0) == 0;
	}
	ok = ok && call_ints(F_SET_EVENTS, id, 1, (global_start ? ev_start : 0) | ev_unwind | ev_throw, NULL) == 0;
	return ok ? 0 : -2;
}

static void wrap_functions(void);

/* Takes a tool id with the events of this moment (nothing when one is held); 0 on success. */
static int take_tool(void)
{
	if (tool >= 0)
		return 0;
	int r = start_tool(-1);
	if (r != 0) {
		stop_tool();
		if (r == -1)
			ms_warn("Python stages disabled: no free sys.monitoring tool id (3, 4 and 5 are taken)");
		else
			ms_warn("Python stages disabled: sys.monitoring refused memshim's events");
		return -1;
	}
	wrap_functions();
	return 0;
}

int ms_py_monitor_enable(const char *why)
{
	if (global_start)
		return 0;
	global_start = 1;
	if (tool >= 0 && call_ints(F_SET_EVENTS, tool, 1, ev_start | ev_unwind | ev_throw, NULL) != 0) {
		stop_tool();
		ms_warn("Python stages disabled: sys.monitoring refused memshim's events");
		return -1;
	}
	if (take_tool() != 0)
		return -1;
	ms_debug("python monitoring events on (Python 3.%d, tool id %d): %s", ms_py.minor, tool, why);
	return 0;
}

int ms_py_monitor_watch(ms_pyobj *code)
{
	uintptr_t v = extra_of(code);
	if (global_start || (v && !ms_py_mask(v)))
		return 0; /* seen anyway, or known to match nothing */
	ms_pyssize n = ms_py.ListSize(watched);
	for (ms_pyssize i = 0; i < n; i++)
		if (ms_py.ListGetItem(watched, i) == code)
			return 0; /* the same code run again (exec of one code object) */
	if (take_tool() != 0)
		return -1;
	if (set_local(tool, code, LOCAL_EVENTS) != 0 || list_append(watched, code) != 0) {
		ms_py.ErrClear();
		ms_py_warn_once(2, "could not follow a matched Python function's exits; its stage is skipped");
		return 0;
	}
	waiting += !v;
	char qual[256] = "?";
	ms_py_attr_text(code, "co_qualname", qual, sizeof qual);
	ms_debug("python monitoring events on the function %s (Python 3.%d, tool id %d)", qual, ms_py.minor, tool);
	return 0;
}

/* Turns memshim's events off and gives its tool id back. */
static void stop_tool(void)
{
	int id = tool;
	if (id < 0)
		return;
	tool = -1;
	call_ints(F_SET_EVENTS, id, 1, 0, NULL);
	ms_pyssize n = ms_py.ListSize(watched);
	for (ms_pyssize i = 0; i < n; i++)
		set_local(id, ms_py.ListGetItem(watched, i), 0);
	const long evs[] = { ev_start, ev_resume, ev_throw, ev_return, ev_yield, ev_unwind };
	for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
		call_ints(F_REGISTER, id, 1, evs[i], ms_py.None);
	call_ints(F_FREE, id, 0, 0, NULL);
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
}

/* The program names memshim's id to use or change it: memshim moves to another free id first. */
static void move_away(void)
{
	int old = tool;
	stop_tool();
	if (start_tool(old) == 0) {
		ms_py_warn_once(3, "the program took sys.monitoring tool id memshim used; memshim moved to another id");
	} else {
		stop_tool(); /* a half-started tool would hold an id with nothing behind it */
		ms_py_warn_once(5, "the program took sys.monitoring tool id memshim used and none is free: "
				   "Python stages are no longer detected");
	}
}

/* Whether O is memshim's tool id (no exception left). */
static int is_our_id(ms_pyobj *o)
{
	long id = ms_py.LongAsLong(o);
	if (id == -1 && ms_py.ErrOccurred())
		ms_py.ErrClear();
	return tool >= 0 && id == tool;
}

/* _all_events() without memshim's id: {event name: tools} with its bit cleared, events that only it
 * has left out.  ALL is the original's answer (consumed). */
static ms_pyobj *all_events_without_us(ms_pyobj *all)
{
	static ms_pyobj *(*dict_new)(void);
	static int (*dict_set)(ms_pyobj *d, ms_pyobj *k, ms_pyobj *v);
	if (!dict_new) {
		*(void **)&dict_new = ms_py_sym("PyDict_New");
		*(void **)&dict_set = ms_py_sym("PyDict_SetItem");
	}
	ms_pyobj *out = all && dict_new && dict_set ? dict_new() : NULL;
	if (!out)
		return all;
	ms_pyssize pos = 0;
	ms_pyobj *key, *value;
	while (ms_py.DictNext(all, &pos, &key, &value)) {
		long tools = ms_py.LongAsLong(value) & ~(1L << tool);
		ms_pyobj *v = tools > 0 ? ms_py.LongFromLong(tools) : NULL;
		if (v && dict_set(out, key, v) != 0)
			ms_py.ErrClear();
		ms_py_decref(v);
		if (ms_py.ErrOccurred())
			ms_py.ErrClear();
	}
	ms_py.DecRef(all);
	return out;
}

/* sys.monitoring's function F as the program sees it: memshim's id reads as an unused one, and a
 * call that uses or changes it moves memshim away first. */
static ms_pyobj *as_without_memshim(int f, ms_pyobj *const *args, ms_pyssize nargs)
{
	if (f == F_ALL && tool >= 0)
		return all_events_without_us(vectorcall(orig[f], args, (size_t)nargs, NULL));
	if (nargs >= 1 && tool >= 0) {
		ms_pyobj *et, *ev, *etb;
		ms_py.ErrFetch(&et, &ev, &etb);
		int ours = is_our_id(args[0]);
		ms_py.ErrRestore(et, ev, etb);
		if (ours && f == F_GET_TOOL && nargs == 1)
			return none();
		if (ours && ((f == F_GET_EVENTS && nargs == 1) ||
			     (f == F_GET_LOCAL && nargs == 2 && ms_py_type_of(args[1]) == ms_py.CodeType)))
			return ms_py.LongFromLong(0);
		if (ours && f != F_GET_TOOL && f != F_GET_EVENTS && f != F_GET_LOCAL && f != F_ALL) {
			ms_py.ErrFetch(&et, &ev, &etb);
			move_away();
			ms_py.ErrRestore(et, ev, etb);
		}
	}
	return vectorcall(orig[f], args, (size_t)nargs, NULL);
}

/* One entry per function: SELF is sys.monitoring, as for the originals. */
#define WRAPPER(f)                                                                                    \
	static ms_pyobj *wrapper_##f(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)       \
	{                                                                                             \
		return as_without_memshim(f, args, nargs);                                            \
	}
WRAPPER(F_USE)
WRAPPER(F_FREE)
WRAPPER(F_CLEAR)
WRAPPER(F_GET_TOOL)
WRAPPER(F_GET_EVENTS)
WRAPPER(F_SET_EVENTS)
WRAPPER(F_GET_LOCAL)
WRAPPER(F_SET_LOCAL)
WRAPPER(F_REGISTER)
WRAPPER(F_ALL)
static const ms_pyfastcall wrappers[NF] = { wrapper_F_USE, wrapper_F_FREE, wrapper_F_CLEAR, wrapper_F_GET_TOOL,
					    wrapper_F_GET_EVENTS, wrapper_F_SET_EVENTS, wrapper_F_GET_LOCAL,
					    wrapper_F_SET_LOCAL, wrapper_F_REGISTER, wrapper_F_ALL };

/* The wrappers' definitions: the originals' names and documentation, memshim's functions. */
static struct ms_pymethoddef wrapper_defs[NF];

static long event(ms_pyobj *events, const char *name)
{
	ms_pyobj *v = ms_py.GetAttrString(events, name);
	long r = v ? ms_py.LongAsLong(v) : -1;
	if (v)
		ms_py.DecRef(v);
	if (r == -1)
		ms_py.ErrClear();
	return r > 0 ? r : 0;
}

int ms_py_monitor_install(void)
{
	*(void **)&list_new = ms_real_dlsym(RTLD_DEFAULT, "PyList_New");
	*(void **)&list_append = ms_real_dlsym(RTLD_DEFAULT, "PyList_Append");
	*(void **)&vectorcall = ms_real_dlsym(RTLD_DEFAULT, "PyObject_Vectorcall");
	ms_pyobj *sys = ms_py.ImportModule("sys");
	mon = sys ? ms_py.GetAttrString(sys, "monitoring") : NULL;
	if (sys)
		ms_py.DecRef(sys);
	ms_pyobj *events = mon ? ms_py.GetAttrString(mon, "events") : NULL;
	disable = mon ? ms_py.GetAttrString(mon, "DISABLE") : NULL;
	if (events) {
		ev_start = event(events, "PY_START");
		ev_resume = event(events, "PY_RESUME");
		ev_return = event(events, "PY_RETURN");
		ev_yield = event(events, "PY_YIELD");
		ev_unwind = event(events, "PY_UNWIND");
		ev_throw = event(events, "PY_THROW");
		ms_py.DecRef(events);
	}
	watched = list_new ? list_new(0) : NULL;
	for (int f = 0; mon && f < NF; f++)
		orig[f] = ms_py.GetAttrString(mon, fn_names[f]); /* clear_tool_id: 3.13+ */
	ms_py.ErrClear();
	fn_start = ms_py.CFunctionNewEx(&def_start, NULL, NULL);
	fn_enter = ms_py.CFunctionNewEx(&def_enter, NULL, NULL);
	fn_leave = ms_py.CFunctionNewEx(&def_leave, NULL, NULL);
	fn_unwind = ms_py.CFunctionNewEx(&def_unwind, NULL, NULL);
	fn_return = ms_py.CFunctionNewEx(&def_return, NULL, NULL);
	if (!list_append || !vectorcall || !disable || !watched || !orig[F_USE] || !orig[F_FREE] ||
	    !orig[F_GET_TOOL] || !orig[F_SET_EVENTS] || !orig[F_SET_LOCAL] || !orig[F_REGISTER] || !fn_start || !fn_enter || !fn_leave || !fn_unwind || !fn_return ||
	    !ev_start || !ev_resume || !ev_return || !ev_yield || !ev_unwind || !ev_throw) {
		ms_py.ErrClear();
		ms_warn("Python stages disabled: sys.monitoring is not usable here");
		return -1;
	}
	return 0;
}

/* sys.monitoring's functions are replaced once memshim takes an id (python/py.h's layout of a
 * built-in function: its PyMethodDef is the third word), each keeping its name and documentation. */
static void wrap_functions(void)
{
	if (wrapped)
		return;
	wrapped = 1;
	void *builtin = ms_py_sym("PyCFunction_Type");
	for (int f = 0; f < NF; f++) {
		if (!orig[f])
			continue;
		/* another tool may have put a function of its own there: its documentation is not ours to read */
		const struct ms_pymethoddef *def =
			ms_py_type_of(orig[f]) == builtin ? ((struct ms_pymethoddef *const *)orig[f])[2] : NULL;
		wrapper_defs[f] = (struct ms_pymethoddef){ .name = fn_names[f], .meth = (void *)wrappers[f],
							   .flags = MS_METH_FASTCALL, .doc = def ? def->doc : NULL };
		ms_pyobj *module = ms_py_attr(orig[f], "__module__");
		ms_pyobj *w = ms_py.CFunctionNewEx(&wrapper_defs[f], mon, module);
		ms_py_decref(module);
		if (!w || ms_py.SetAttrString(mon, fn_names[f], w) != 0)
			ms_py.ErrClear(); /* detection still works; the program would see memshim's id */
		if (w)
			ms_py.DecRef(w);
	}
}
