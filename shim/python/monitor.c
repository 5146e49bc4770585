/* Python 3.12+: sys.monitoring.  Only the code objects a target can name get memshim's events:
 * python/watch.c finds them in the code each "exec" audit event brings (its co_qualname is a
 * target's), before it runs, and ms_py_monitor_watch gives them local PY_START / PY_RETURN /
 * PY_YIELD / PY_RESUME events; at their first call the module is checked (python/classify.c), and
 * a code object that matches no target loses its events.  PY_UNWIND and PY_THROW (global-only
 * events, no instrumentation) close and reopen stages on exceptions.  Where the code cannot be
 * found before it runs (a compiled main program, an embedded interpreter, code built at run time,
 * functions defined before the program started), ms_py_monitor_enable turns PY_START on globally
 * instead, answered with DISABLE for code objects that match no target.  Sees every thread.  A
 * call's end, however it came (PY_RETURN, PY_YIELD, PY_UNWIND), takes the leave path the frame
 * hook's route shares (ms_py_exit, python/targets.c).
 *
 * A tool id is taken only with the first such code object: before that the program sees
 * sys.monitoring exactly as without memshim.  From then on the program's calls of sys.monitoring
 * see memshim's id as free: get_tool, get_events, get_local_events and _all_events answer for it
 * as for an unused id, and any call that would use or change it (use_tool_id, set_events,
 * register_callback, ...) first moves memshim to another free id (warning once), so the program's
 * call does what it would do without memshim. */
#include <dlfcn.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "python/py.h"

/* sys.monitoring's functions memshim calls (the originals) and shows the program wrapped. */
enum {
	F_USE,
	F_FREE,
	F_CLEAR,
	F_GET_TOOL,
	F_GET_EVENTS,
	F_SET_EVENTS,
	F_GET_LOCAL,
	F_SET_LOCAL,
	F_REGISTER,
	F_ALL,
	NF
};
static const char *const fn_names[NF] = { "use_tool_id",       "free_tool_id", "clear_tool_id",    "get_tool",
					  "get_events",        "set_events",   "get_local_events", "set_local_events",
					  "register_callback", "_all_events" };
/* The originals memshim cannot work without (clear_tool_id is 3.13+'s; the readers are asked only
 * whether a later tool watches a return, and a missing one answers "cannot tell"). */
#define F_NEEDED                                                                                                       \
	((1u << F_USE) | (1u << F_FREE) | (1u << F_GET_TOOL) | (1u << F_SET_EVENTS) | (1u << F_SET_LOCAL) |            \
	 (1u << F_REGISTER))
/* Whether the program's call of F only reads (memshim's id answers as an unused one) or would use
 * or change an id (memshim moves away from it first). */
#define F_READS ((1u << F_GET_TOOL) | (1u << F_GET_EVENTS) | (1u << F_GET_LOCAL) | (1u << F_ALL))

/* memshim's callbacks: built-in functions sys.monitoring calls. */
enum { CB_START, CB_ENTER, CB_LEAVE, CB_UNWIND, CB_RETURN, NCB };

/* The events memshim takes, in the order their callbacks are registered, each with its callback:
 * a resumption (PY_RESUME, PY_THROW) enters again, a yield leaves as a return does. */
enum { E_START, E_RESUME, E_THROW, E_RETURN, E_YIELD, E_UNWIND, NE };
static const struct {
	const char *name;
	int callback;
} events[NE] = {
	[E_START] = { "PY_START", CB_START }, [E_RESUME] = { "PY_RESUME", CB_ENTER },
	[E_THROW] = { "PY_THROW", CB_ENTER }, [E_RETURN] = { "PY_RETURN", CB_RETURN },
	[E_YIELD] = { "PY_YIELD", CB_LEAVE }, [E_UNWIND] = { "PY_UNWIND", CB_UNWIND },
};

/* 0-2 are debuggers', coverage's, profilers'; 3 and 4 are the free ones tools and tests take
 * first (CPython's test_monitoring asserts them free), 5 is named for optimizers, none ships */
static const int preferred_ids[] = { 5, 4, 3 };

/* What this route holds of sys.monitoring. */
static struct {
	int tool; /* the id memshim holds, or -1 */
	/* PY_START on every code object (ms_py_monitor_enable: +3% on fib), else only on the watched ones */
	int global_start;
	ms_pyobj *mon;     /* sys.monitoring */
	ms_pyobj *disable; /* sys.monitoring.DISABLE */
	ms_pyobj *watched; /* code objects with local events (kept alive: their events, our table) */
	/* Watched code objects not called yet, and whether any matched: while neither, no target can
	 * match (the watched names ran in other modules) and the tool id is given back. */
	int waiting, matched_any;
	ms_pyobj *orig[NF]; /* sys.monitoring's own functions */
	long ev[NE];        /* the events' bits */
	ms_pyobj *callback[NCB];
	int code_layout; /* 0 not checked, 1 verified, -1 different (a returning frame's locals) */
	int wrapped;     /* sys.monitoring's functions replaced by memshim's (wrap_functions) */
	struct ms_pymethoddef wrapper_defs[NF]; /* the originals' names and documentation, memshim's functions */
	ms_pyobj *(*list_new)(ms_pyssize n);
	int (*list_append)(ms_pyobj *l, ms_pyobj *o);
	ms_pyobj *(*vectorcall)(ms_pyobj *f, ms_pyobj *const *args, size_t nargsf, ms_pyobj *kw);
	ms_pyobj *(*dict_new)(void);
	int (*dict_set)(ms_pyobj *d, ms_pyobj *k, ms_pyobj *v);
} m = { .tool = -1 };

#define LOCAL_EVENTS (m.ev[E_START] | m.ev[E_RETURN] | m.ev[E_YIELD] | m.ev[E_RESUME])
#define GLOBAL_EVENTS (m.ev[E_UNWIND] | m.ev[E_THROW]) /* global-only events, no instrumentation */

static ms_pyobj *none(void)
{
	ms_py.IncRef(ms_py.None);
	return ms_py.None;
}

static inline uintptr_t extra_of(ms_pyobj *code)
{
	return ms_py_type_of(code) == ms_py.CodeType ? ms_py_code_get(code) : 0;
}

/* A new integer object, or NULL with no exception left. */
static ms_pyobj *number(long v)
{
	ms_pyobj *o = ms_py.LongFromLong(v);
	if (!o)
		ms_py.ErrClear();
	return o;
}

/* Calls sys.monitoring's original function F(args...) and drops the result; 0 on success. */
static int call(int f, ms_pyobj *a, ms_pyobj *b, ms_pyobj *c)
{
	ms_pyobj *r = m.orig[f] ? ms_py.CallFunctionObjArgs(m.orig[f], a, b, c, NULL) : NULL;
	if (!r) {
		ms_py.ErrClear();
		return -1;
	}
	ms_py.DecRef(r);
	return 0;
}

/* F(ID[, N][, C]): the tool id ID, the integer N when HAS_N, then C when given (an object). */
static int call_ints(int f, long id, int has_n, long n, ms_pyobj *c)
{
	ms_pyobj *ido = number(id);
	ms_pyobj *no = has_n ? number(n) : NULL;
	int r = ido && (!has_n || no) ? call(f, ido, no, c) : -1;
	ms_py_decref(ido);
	ms_py_decref(no);
	return r;
}

/* set_local_events(ID, CODE, BITS). */
static int set_local(int id, ms_pyobj *code, long bits)
{
	ms_pyobj *ido = number(id);
	ms_pyobj *evo = number(bits);
	int r = ido && evo ? call(F_SET_LOCAL, ido, code, evo) : -1;
	ms_py_decref(ido);
	ms_py_decref(evo);
	return r;
}

static void stop_tool(void);

/* Follows a matched CODE's exits: its local events on, and kept in the watched list; 0 on success
 * (else warned once, and the stage is skipped). */
static int follow(ms_pyobj *code)
{
	if (set_local(m.tool, code, LOCAL_EVENTS) == 0 && m.list_append(m.watched, code) == 0)
		return 0;
	ms_py.ErrClear();
	ms_py_warn_once(2, "could not follow a matched Python function's exits; its stage is skipped");
	return -1;
}

/* CODE's first call: classified (python/classify.c); returns its classification, or 0 when the
 * tool id was just given back (no DISABLE then for an id no longer held). */
static uintptr_t first_call(ms_pyobj *code)
{
	m.waiting -= !m.global_start && m.waiting > 0;
	uintptr_t v = ms_py_classify(code, NULL, NULL, ms_py.EvalGetGlobals());
	int matched = ms_py_mask(v) != 0;
	m.matched_any |= matched;
	/* this very frame's return/yield fire too: the instrumentation is in place at once */
	if (matched && m.global_start && follow(code) != 0) {
		v = MS_PY_SEEN;
		ms_py_code_put(code, v);
	}
	if (matched || m.global_start)
		return v;
	set_local(m.tool, code, 0); /* a watched name in another module: nothing more to see */
	if (m.waiting || m.matched_any)
		return v;
	stop_tool();
	ms_debug("python monitoring: no watched function can match now: tool id given back");
	return 0;
}

/* PY_START (code, offset): a call begins; code that matches no target loses the event. */
static ms_pyobj *cb_start(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	if (nargs < 1)
		return none();
	ms_pyobj *code = args[0];
	uintptr_t v = extra_of(code);
	if (!v && ms_py_type_of(code) == ms_py.CodeType && !(v = first_call(code)))
		return none();
	if (!ms_py_mask(v)) {
		ms_py.IncRef(m.disable);
		return m.disable;
	}
	ms_py_enter(v);
	return none();
}

/* The classification of the code a callback names (ARGS[0]) when it is a matched one, else 0. */
static inline uintptr_t matched(ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = nargs >= 1 ? extra_of(args[0]) : 0;
	return ms_py_mask(v) ? v : 0;
}

/* PY_RESUME, PY_THROW: a generator or coroutine runs again. */
static ms_pyobj *cb_enter(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = matched(args, nargs);
	if (v)
		ms_py_enter(v);
	return none();
}

/* PY_YIELD: a generator or coroutine suspends. */
static ms_pyobj *cb_leave(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = matched(args, nargs);
	if (v)
		ms_py_exit(v, MS_PY_RETURNED, NULL);
	return none();
}

/* PY_UNWIND (code, offset, exception): an exception leaves the function. */
static ms_pyobj *cb_unwind(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = matched(args, nargs);
	if (v)
		ms_py_exit(v, MS_PY_RAISED, nargs >= 3 && args[2] ? ms_py_type_of(args[2]) : NULL);
	return none();
}

/* ---- a returning function's locals -------------------------------------------------------
 * PY_RETURN fires inside the frame; the interpreter clears it right after the callbacks, with
 * nothing in between, so its locals would be freed just after the stage ends.  They are released
 * here instead, when nothing can tell: the frame belongs to the thread (not a generator's), no
 * frame object someone else holds will take the locals over, and no tool called after memshim
 * (the lower ids: callbacks run from the highest id down) watches this return.  Layouts, from the
 * 3.12 and 3.13 headers: _PyInterpreterFrame's code first, frame_obj the seventh pointer, the owner
 * byte at 70, localsplus at 72, f_locals the sixth pointer; co_firstlineno and co_nlocalsplus the
 * ints at 68 and 72 of the code object (checked on the first matched code object against its
 * attributes). */
#define FRAME_CODE(f) (((ms_pyobj **)(f))[0])
#define FRAME_LOCALS_DICT(f) (&((ms_pyobj **)(f))[5])
#define FRAME_OBJ(f) (((ms_pyobj **)(f))[6])
#define FRAME_OWNER(f) (((const char *)(f))[70])
#define FRAME_LOCALS(f) ((ms_pyobj **)((char *)(f) + 72))
#define CODE_INT(c, off) (*(const int *)((const char *)(c) + (off)))
#define OWNED_BY_THREAD 0
#define REFCNT(o) (*(const ms_pyssize *)(o))

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
	long line = ms_py_attr_long(code, "co_firstlineno", -1);
	long vars = attr_len(code, "co_varnames"), cells = attr_len(code, "co_cellvars");
	long frees = attr_len(code, "co_freevars");
	long n = CODE_INT(code, 72);
	/* a cell that is also an argument has one slot */
	/* clang-format off */
	m.code_layout = line >= 0 && vars >= 0 && cells >= 0 && frees >= 0 && CODE_INT(code, 68) == line &&
		n >= vars + frees && n <= vars + cells + frees ? 1 : -1;
	/* clang-format on */
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
	ms_debug("python frames' locals released at return: %s", m.code_layout > 0 ? "yes" : "no (layout differs)");
}

/* The original F(ID[, CODE]) as a C long; -2 when the call failed, *IS_NONE (when given, instead
 * of the value) whether it answered None (no exception left). */
static long call_long(int f, long id, ms_pyobj *code, int *is_none)
{
	ms_pyobj *args[2] = { ms_py.LongFromLong(id), code };
	ms_pyobj *r = m.orig[f] && args[0] ? m.vectorcall(m.orig[f], args, code ? 2 : 1, NULL) : NULL;
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

/* Whether a tool that runs after memshim watches CODE's returns. */
static int later_tool_sees_return(ms_pyobj *code)
{
	for (int id = 0; id < m.tool; id++) {
		int idle = 0;
		if (call_long(F_GET_TOOL, id, NULL, &idle) == -2)
			return 1; /* cannot tell: leave the locals */
		if (idle)
			continue;
		long global = call_long(F_GET_EVENTS, id, NULL, NULL);
		long local = call_long(F_GET_LOCAL, id, code, NULL);
		if (global < 0 || local < 0 || ((global | local) & m.ev[E_RETURN]))
			return 1;
	}
	return 0;
}

/* The frame of CODE returning on this thread, when its locals may be released now (else NULL). */
static void *releasable_frame(ms_pyobj *code)
{
	void *frame = ms_py_current_frame();
	if (!frame || FRAME_CODE(frame) != code || FRAME_OWNER(frame) != OWNED_BY_THREAD)
		return NULL;
	ms_pyobj *fo = FRAME_OBJ(frame);
	if (fo && REFCNT(fo) != 1)
		return NULL;
	if (!m.code_layout)
		check_code_layout(code);
	if (m.code_layout < 0 || CODE_INT(code, 72) <= 0 || later_tool_sees_return(code))
		return NULL;
	return frame;
}

static void release_locals(ms_pyobj *code)
{
	void *frame = releasable_frame(code);
	if (!frame)
		return;
	int n = CODE_INT(code, 72);
	ms_pyobj **slot = FRAME_LOCALS(frame);
	for (int i = 0; i < n; i++) {
		ms_pyobj *o = slot[i];
		slot[i] = NULL;
		if (o)
			ms_py.DecRef(o);
	}
	ms_py_release_locals_dict(code, FRAME_LOCALS_DICT(frame));
}

/* PY_RETURN (code, offset, value): the function returns; its locals go first (a generator's stay
 * with it). */
static ms_pyobj *cb_return(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)
{
	uintptr_t v = matched(args, nargs);
	if (!v)
		return none();
	if (!(v & MS_PY_GENLIKE)) {
		ms_pyobj *et, *ev, *etb;
		ms_py.ErrFetch(&et, &ev, &etb);
		release_locals(args[0]);
		ms_py.ErrRestore(et, ev, etb);
	}
	ms_py_exit(v, MS_PY_RETURNED, NULL);
	return none();
}

static struct ms_pymethoddef callback_defs[NCB] = {
	[CB_START] = { "memshim_py_start", (void *)cb_start, MS_METH_FASTCALL, NULL },
	[CB_ENTER] = { "memshim_py_enter", (void *)cb_enter, MS_METH_FASTCALL, NULL },
	[CB_LEAVE] = { "memshim_py_leave", (void *)cb_leave, MS_METH_FASTCALL, NULL },
	[CB_UNWIND] = { "memshim_py_unwind", (void *)cb_unwind, MS_METH_FASTCALL, NULL },
	[CB_RETURN] = { "memshim_py_return", (void *)cb_return, MS_METH_FASTCALL, NULL },
};

/* ---- the tool id ------------------------------------------------------------------------- */

static int tool_free(int id)
{
	int idle = 0;
	call_long(F_GET_TOOL, id, NULL, &idle);
	return idle;
}

/* Registers every event's callback for ID (NULL: None, the callbacks taken off); 0 when all took. */
static int register_callbacks(int id, int on)
{
	int ok = 1;
	for (int e = 0; e < NE && (ok || !on); e++)
		ok &= call_ints(F_REGISTER, id, 1, m.ev[e], on ? m.callback[events[e].callback] : ms_py.None) == 0;
	return ok ? 0 : -1;
}

/* The first free id of the preferred ones other than AVOID, or -1. */
static int free_id(int avoid)
{
	for (size_t i = 0; i < sizeof preferred_ids / sizeof *preferred_ids; i++)
		if (preferred_ids[i] != avoid && tool_free(preferred_ids[i]))
			return preferred_ids[i];
	return -1;
}

/* use_tool_id(ID, "memshim"); 0 on success. */
static int use_id(int id)
{
	ms_pyobj *name = ms_py.UnicodeFromString("memshim");
	ms_pyobj *ido = ms_py.LongFromLong(id);
	int ok = name && ido && call(F_USE, ido, name, NULL) == 0;
	ms_py_decref(name);
	ms_py_decref(ido);
	if (!ok)
		ms_py.ErrClear();
	return ok ? 0 : -1;
}

/* The watched code objects' local events under ID (none for one known to match nothing); 0 when
 * every call took. */
static int set_watched_events(int id)
{
	ms_pyssize n = ms_py.ListSize(m.watched);
	for (ms_pyssize i = 0; i < n; i++) {
		ms_pyobj *code = ms_py.ListGetItem(m.watched, i);
		uintptr_t v = extra_of(code);
		if (set_local(id, code, !v || ms_py_mask(v) ? LOCAL_EVENTS : 0) != 0)
			return -1;
	}
	return 0;
}

/* Takes a free tool id and turns the events on; 0 on success, -1 when no id is free, -2 when
 * sys.monitoring refused a call. */
static int start_tool(int avoid)
{
	int id = free_id(avoid);
	if (id < 0)
		return -1;
	if (use_id(id) != 0)
		return -2;
	m.tool = id;
	long global = (m.global_start ? m.ev[E_START] : 0) | GLOBAL_EVENTS;
	if (register_callbacks(id, 1) != 0 || set_watched_events(id) != 0 ||
	    call_ints(F_SET_EVENTS, id, 1, global, NULL) != 0)
		return -2;
	return 0;
}

/* Turns memshim's events off and gives its tool id back. */
static void stop_tool(void)
{
	int id = m.tool;
	if (id < 0)
		return;
	m.tool = -1;
	call_ints(F_SET_EVENTS, id, 1, 0, NULL);
	ms_pyssize n = ms_py.ListSize(m.watched);
	for (ms_pyssize i = 0; i < n; i++)
		set_local(id, ms_py.ListGetItem(m.watched, i), 0);
	register_callbacks(id, 0);
	call_ints(F_FREE, id, 0, 0, NULL);
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
}

static void wrap_functions(void);

/* Takes a tool id with the events of this moment (nothing when one is held); 0 on success. */
static int take_tool(void)
{
	if (m.tool >= 0)
		return 0;
	int r = start_tool(-1);
	if (r != 0) {
		stop_tool();
		ms_warn(r == -1 ? "Python stages disabled: no free sys.monitoring tool id (3, 4 and 5 are taken)"
				: "Python stages disabled: sys.monitoring refused memshim's events");
		return -1;
	}
	wrap_functions();
	return 0;
}

int ms_py_monitor_enable(const char *why)
{
	if (m.global_start)
		return 0;
	m.global_start = 1;
	if (m.tool >= 0 && call_ints(F_SET_EVENTS, m.tool, 1, m.ev[E_START] | GLOBAL_EVENTS, NULL) != 0) {
		stop_tool();
		ms_warn("Python stages disabled: sys.monitoring refused memshim's events");
		return -1;
	}
	if (take_tool() != 0)
		return -1;
	ms_debug("python monitoring events on (Python 3.%d, tool id %d): %s", ms_py.minor, m.tool, why);
	return 0;
}

/* Whether CODE is in the watched list already (exec of one code object runs it again). */
static int watched_already(ms_pyobj *code)
{
	ms_pyssize n = ms_py.ListSize(m.watched);
	for (ms_pyssize i = 0; i < n; i++)
		if (ms_py.ListGetItem(m.watched, i) == code)
			return 1;
	return 0;
}

int ms_py_monitor_watch(ms_pyobj *code)
{
	uintptr_t v = extra_of(code);
	if (m.global_start || (v && !ms_py_mask(v)) || watched_already(code))
		return 0; /* seen anyway, known to match nothing, or watched already */
	if (take_tool() != 0)
		return -1;
	if (follow(code) != 0)
		return 0;
	m.waiting += !v;
	char qual[256] = "?";
	ms_py_attr_text(code, "co_qualname", qual, sizeof qual);
	ms_debug("python monitoring events on the function %s (Python 3.%d, tool id %d)", qual, ms_py.minor, m.tool);
	return 0;
}

/* ---- sys.monitoring as the program sees it ------------------------------------------------ */

/* The program names memshim's id to use or change it: memshim moves to another free id first. */
static void move_away(void)
{
	int old = m.tool;
	stop_tool();
	if (start_tool(old) == 0) {
		ms_py_warn_once(3, "the program took sys.monitoring tool id memshim used; memshim moved to another id");
	} else {
		stop_tool(); /* a half-started tool would hold an id with nothing behind it */
		ms_py_warn_once(5, "the program took sys.monitoring tool id memshim used and none is free: "
				   "Python stages are no longer detected");
	}
}

/* Whether O is memshim's tool id (no exception left, a pending one kept). */
static int is_our_id(ms_pyobj *o)
{
	ms_pyobj *et, *ev, *etb;
	ms_py.ErrFetch(&et, &ev, &etb);
	long id = ms_py.LongAsLong(o);
	if (id == -1 && ms_py.ErrOccurred())
		ms_py.ErrClear();
	ms_py.ErrRestore(et, ev, etb);
	return m.tool >= 0 && id == m.tool;
}

/* _all_events() without memshim's id: {event name: tools} with its bit cleared, events that only it
 * has left out.  ALL is the original's answer (consumed). */
static ms_pyobj *all_events_without_us(ms_pyobj *all)
{
	if (!m.dict_new) {
		*(void **)&m.dict_new = ms_py_sym("PyDict_New");
		*(void **)&m.dict_set = ms_py_sym("PyDict_SetItem");
	}
	ms_pyobj *out = all && m.dict_new && m.dict_set ? m.dict_new() : NULL;
	if (!out)
		return all;
	ms_pyssize pos = 0;
	ms_pyobj *key, *value;
	while (ms_py.DictNext(all, &pos, &key, &value)) {
		long tools = ms_py.LongAsLong(value) & ~(1L << m.tool);
		ms_pyobj *v = tools > 0 ? ms_py.LongFromLong(tools) : NULL;
		if (v && m.dict_set(out, key, v) != 0)
			ms_py.ErrClear();
		ms_py_decref(v);
		if (ms_py.ErrOccurred())
			ms_py.ErrClear();
	}
	ms_py.DecRef(all);
	return out;
}

/* The answer to a reading call of F about memshim's id that an unused id gives (NULL: the call is
 * not one of those: get_tool(id), get_events(id), get_local_events(id, code)). */
static ms_pyobj *as_unused(int f, ms_pyobj *const *args, ms_pyssize nargs)
{
	if (f == F_GET_TOOL && nargs == 1)
		return none();
	if ((f == F_GET_EVENTS && nargs == 1) ||
	    (f == F_GET_LOCAL && nargs == 2 && ms_py_type_of(args[1]) == ms_py.CodeType))
		return ms_py.LongFromLong(0);
	return NULL;
}

/* sys.monitoring's function F as the program sees it: memshim's id reads as an unused one, and a
 * call that uses or changes it moves memshim away first. */
static ms_pyobj *as_without_memshim(int f, ms_pyobj *const *args, ms_pyssize nargs)
{
	if (f == F_ALL && m.tool >= 0)
		return all_events_without_us(m.vectorcall(m.orig[f], args, (size_t)nargs, NULL));
	if (nargs >= 1 && m.tool >= 0 && is_our_id(args[0])) {
		ms_pyobj *answer = as_unused(f, args, nargs);
		if (answer)
			return answer;
		if (!(F_READS & (1u << f))) {
			ms_pyobj *et, *ev, *etb;
			ms_py.ErrFetch(&et, &ev, &etb);
			move_away();
			ms_py.ErrRestore(et, ev, etb);
		}
	}
	return m.vectorcall(m.orig[f], args, (size_t)nargs, NULL);
}

/* One entry per function: SELF is sys.monitoring, as for the originals. */
#define WRAPPER(f)                                                                                                     \
	static ms_pyobj *wrapper_##f(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs)                          \
	{                                                                                                              \
		return as_without_memshim(f, args, nargs);                                                             \
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
static const ms_pyfastcall wrappers[NF] = { wrapper_F_USE,       wrapper_F_FREE,       wrapper_F_CLEAR,
					    wrapper_F_GET_TOOL,  wrapper_F_GET_EVENTS, wrapper_F_SET_EVENTS,
					    wrapper_F_GET_LOCAL, wrapper_F_SET_LOCAL,  wrapper_F_REGISTER,
					    wrapper_F_ALL };

/* sys.monitoring's functions are replaced once memshim takes an id (python/py.h's layout of a
 * built-in function: its PyMethodDef is the third word), each keeping its name and documentation. */
static void wrap_functions(void)
{
	if (m.wrapped)
		return;
	m.wrapped = 1;
	void *builtin = ms_py_sym("PyCFunction_Type");
	for (int f = 0; f < NF; f++) {
		if (!m.orig[f])
			continue;
		/* another tool may have put a function of its own there: its documentation is not ours to read */
		const struct ms_pymethoddef *def =
			ms_py_type_of(m.orig[f]) == builtin ? ((struct ms_pymethoddef *const *)m.orig[f])[2] : NULL;
		m.wrapper_defs[f] = (struct ms_pymethoddef){ .name = fn_names[f],
							     .meth = (void *)wrappers[f],
							     .flags = MS_METH_FASTCALL,
							     .doc = def ? def->doc : NULL };
		ms_pyobj *module = ms_py_attr(m.orig[f], "__module__");
		ms_pyobj *w = ms_py.CFunctionNewEx(&m.wrapper_defs[f], m.mon, module);
		ms_py_decref(module);
		if (!w || ms_py.SetAttrString(m.mon, fn_names[f], w) != 0)
			ms_py.ErrClear(); /* detection still works; the program would see memshim's id */
		ms_py_decref(w);
	}
}

/* ---- install ------------------------------------------------------------------------------ */

/* Whether everything the route needs was found. */
static int usable(void)
{
	int ok = m.list_append && m.vectorcall && m.disable && m.watched;
	for (int f = 0; f < NF; f++)
		ok &= !(F_NEEDED & (1u << f)) || m.orig[f] != NULL;
	for (int c = 0; c < NCB; c++)
		ok &= m.callback[c] != NULL;
	for (int e = 0; e < NE; e++)
		ok &= m.ev[e] != 0;
	return ok;
}

int ms_py_monitor_install(void)
{
	*(void **)&m.list_new = ms_real_dlsym(RTLD_DEFAULT, "PyList_New");
	*(void **)&m.list_append = ms_real_dlsym(RTLD_DEFAULT, "PyList_Append");
	*(void **)&m.vectorcall = ms_real_dlsym(RTLD_DEFAULT, "PyObject_Vectorcall");
	ms_pyobj *sys = ms_py.ImportModule("sys");
	m.mon = ms_py_attr(sys, "monitoring");
	ms_py_decref(sys);
	ms_pyobj *evs = ms_py_attr(m.mon, "events");
	m.disable = ms_py_attr(m.mon, "DISABLE");
	for (int e = 0; evs && e < NE; e++) {
		long bit = ms_py_attr_long(evs, events[e].name, 0);
		m.ev[e] = bit > 0 ? bit : 0;
	}
	ms_py_decref(evs);
	m.watched = m.list_new ? m.list_new(0) : NULL;
	for (int f = 0; m.mon && f < NF; f++)
		m.orig[f] = ms_py.GetAttrString(m.mon, fn_names[f]); /* clear_tool_id: 3.13+ */
	ms_py.ErrClear();
	for (int c = 0; c < NCB; c++)
		m.callback[c] = ms_py.CFunctionNewEx(&callback_defs[c], NULL, NULL);
	if (!usable()) {
		ms_py.ErrClear();
		ms_warn("Python stages disabled: sys.monitoring is not usable here");
		return -1;
	}
	return 0;
}
