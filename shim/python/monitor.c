/* Python 3.12+: sys.monitoring.  PY_START is enabled globally and answered with DISABLE for code
 * objects that match no target, so they cost nothing afterwards; matched code objects get local
 * PY_RETURN / PY_YIELD / PY_RESUME events, and PY_UNWIND / PY_THROW (global-only events) close and
 * reopen them on exceptions.  Sees every thread.  A tool id is taken only once a function some
 * target can name exists (python/watch.c): before that the program sees sys.monitoring exactly as
 * without memshim.  If the program then asks for the tool id memshim holds, memshim moves to
 * another free id first (warning once), so the program's request succeeds. */
#include <dlfcn.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "python/py.h"

static int tool = -1;
/* Set once a function some target can name exists: the tool id is taken and the events go on then
 * (PY_START on every code object costs each call a little, +3% on fib). */
static int events_on;
static ms_pyobj *mon;      /* sys.monitoring */
static ms_pyobj *disable;  /* sys.monitoring.DISABLE */
static ms_pyobj *matched;  /* list of matched code objects (kept alive: their local events) */
static ms_pyobj *orig_use_tool_id;
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

/* Calls sys.monitoring.NAME(args...) and drops the result; 0 on success. */
static int call(const char *name, ms_pyobj *a, ms_pyobj *b, ms_pyobj *c)
{
	ms_pyobj *f = ms_py.GetAttrString(mon, name);
	ms_pyobj *r = f ? ms_py.CallFunctionObjArgs(f, a, b, c, NULL) : NULL;
	if (f)
		ms_py.DecRef(f);
	if (!r) {
		ms_py.ErrClear();
		return -1;
	}
	ms_py.DecRef(r);
	return 0;
}

/* The same with integer arguments (C, when given, is an object). */
static int call_ints(const char *name, long a, int nb, long b, ms_pyobj *c)
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
	int r = ido && evo ? call("set_local_events", ido, code, evo) : -1;
	if (!ido || !evo)
		ms_py.ErrClear();
	if (ido)
		ms_py.DecRef(ido);
	if (evo)
		ms_py.DecRef(evo);
	return r;
}

#define LOCAL_EVENTS (ev_return | ev_yield | ev_resume)

static ms_pyobj *cb_start(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	if (nargs < 1)
		return none();
	ms_pyobj *code = args[0];
	uintptr_t v = extra_of(code);
	if (!v && ms_py_type_of(code) == ms_py.CodeType) {
		v = ms_py_classify(code, NULL, NULL, ms_py.EvalGetGlobals());
		if (ms_py_mask(v)) {
			/* this very frame's return/yield fire too: the instrumentation is in place at once */
			if (set_local(tool, code, LOCAL_EVENTS) != 0 || list_append(matched, code) != 0) {
				ms_py.ErrClear();
				ms_py_warn_once(2, "could not follow a matched Python function's exits; its stage is skipped");
				v = MS_PY_SEEN;
				ms_py_code_put(code, v);
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
	uint32_t mask = nargs >= 1 ? ms_py_mask(extra_of(args[0])) : 0;
	if (mask)
		ms_py_leave(mask);
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
static ms_pyobj *fn_get_tool, *fn_get_events, *fn_get_local_events; /* sys.monitoring's, kept */

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
		fn_get_tool = ms_py.GetAttrString(mon, "get_tool");
		fn_get_events = ms_py.GetAttrString(mon, "get_events");
		fn_get_local_events = ms_py.GetAttrString(mon, "get_local_events");
		if (ms_py.ErrOccurred())
			ms_py.ErrClear();
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
	uint32_t mask = ms_py_mask(v);
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
static struct ms_pymethoddef def_return = { "memshim_py_return", (void *)cb_return, MS_METH_FASTCALL, NULL };
static ms_pyobj *fn_start, *fn_enter, *fn_leave, *fn_return;

static int tool_free(int id)
{
	ms_pyobj *ido = ms_py.LongFromLong(id);
	ms_pyobj *f = ido ? ms_py.GetAttrString(mon, "get_tool") : NULL;
	ms_pyobj *r = f ? ms_py.CallFunctionObjArgs(f, ido, NULL) : NULL;
	int free_ = r == ms_py.None;
	if (!r)
		ms_py.ErrClear();
	if (r)
		ms_py.DecRef(r);
	if (f)
		ms_py.DecRef(f);
	if (ido)
		ms_py.DecRef(ido);
	return free_;
}

static void stop_tool(void);

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
	int ok = name && ido && call("use_tool_id", ido, name, NULL) == 0;
	if (name)
		ms_py.DecRef(name);
	if (ido)
		ms_py.DecRef(ido);
	if (!ok) {
		ms_py.ErrClear();
		return -2;
	}
	tool = id;
	ok = call_ints("register_callback", id, 1, ev_start, fn_start) == 0 &&
	     call_ints("register_callback", id, 1, ev_resume, fn_enter) == 0 &&
	     call_ints("register_callback", id, 1, ev_throw, fn_enter) == 0 &&
	     call_ints("register_callback", id, 1, ev_return, fn_return) == 0 &&
	     call_ints("register_callback", id, 1, ev_yield, fn_leave) == 0 &&
	     call_ints("register_callback", id, 1, ev_unwind, fn_leave) == 0;
	ms_pyssize n = ok ? ms_py.ListSize(matched) : 0;
	for (ms_pyssize i = 0; i < n && ok; i++)
		ok = set_local(id, ms_py.ListGetItem(matched, i), LOCAL_EVENTS) == 0;
	ok = ok && (!events_on || call_ints("set_events", id, 1, ev_start | ev_unwind | ev_throw, NULL) == 0);
	return ok ? 0 : -2;
}

static void wrap_use_tool_id(void);

int ms_py_monitor_enable(const char *why)
{
	if (events_on)
		return 0;
	events_on = 1;
	int r = start_tool(-1);
	if (r != 0) {
		stop_tool();
		if (r == -1)
			ms_warn("Python stages disabled: no free sys.monitoring tool id (3, 4 and 5 are taken)");
		else
			ms_warn("Python stages disabled: sys.monitoring refused memshim's events");
		return -1;
	}
	wrap_use_tool_id();
	ms_debug("python monitoring events on (Python 3.%d, tool id %d): %s", ms_py.minor, tool, why);
	return 0;
}

/* Turns memshim's events off and gives its tool id back. */
static void stop_tool(void)
{
	int id = tool;
	if (id < 0)
		return;
	tool = -1;
	call_ints("set_events", id, 1, 0, NULL);
	ms_pyssize n = ms_py.ListSize(matched);
	for (ms_pyssize i = 0; i < n; i++)
		set_local(id, ms_py.ListGetItem(matched, i), 0);
	const long evs[] = { ev_start, ev_resume, ev_throw, ev_return, ev_yield, ev_unwind };
	for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
		call_ints("register_callback", id, 1, evs[i], ms_py.None);
	call_ints("free_tool_id", id, 0, 0, NULL);
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
}

/* sys.monitoring.use_tool_id as the program sees it: memshim's id is handed over first. */
static ms_pyobj *use_tool_id(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	if (nargs >= 1 && tool >= 0) {
		ms_pyobj *et, *ev, *etb;
		ms_py.ErrFetch(&et, &ev, &etb);
		long id = ms_py.LongAsLong(args[0]);
		if (id == -1 && ms_py.ErrOccurred())
			ms_py.ErrClear();
		if (id == tool) {
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
		ms_py.ErrRestore(et, ev, etb);
	}
	return vectorcall(orig_use_tool_id, args, (size_t)nargs, NULL);
}

static struct ms_pymethoddef def_use = { "use_tool_id", (void *)use_tool_id, MS_METH_FASTCALL,
					 "use_tool_id(tool_id, name, /) (memshim hands its own id over first)" };

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
	matched = list_new ? list_new(0) : NULL;
	fn_start = ms_py.CFunctionNewEx(&def_start, NULL, NULL);
	fn_enter = ms_py.CFunctionNewEx(&def_enter, NULL, NULL);
	fn_leave = ms_py.CFunctionNewEx(&def_leave, NULL, NULL);
	fn_return = ms_py.CFunctionNewEx(&def_return, NULL, NULL);
	if (!list_append || !vectorcall || !disable || !matched || !fn_start || !fn_enter || !fn_leave || !fn_return ||
	    !ev_start || !ev_resume || !ev_return || !ev_yield || !ev_unwind || !ev_throw) {
		ms_py.ErrClear();
		ms_warn("Python stages disabled: sys.monitoring is not usable here");
		return -1;
	}
	return 0;
}

/* sys.monitoring.use_tool_id is replaced while memshim holds an id, so the program's request for it
 * hands it over first. */
static void wrap_use_tool_id(void)
{
	if (orig_use_tool_id)
		return;
	orig_use_tool_id = ms_py.GetAttrString(mon, "use_tool_id");
	ms_pyobj *wrapper = orig_use_tool_id ? ms_py.CFunctionNewEx(&def_use, NULL, NULL) : NULL;
	if (!wrapper || ms_py.SetAttrString(mon, "use_tool_id", wrapper) != 0)
		ms_py.ErrClear(); /* detection still works; a clash would then be the program's ValueError */
	if (wrapper)
		ms_py.DecRef(wrapper);
}
