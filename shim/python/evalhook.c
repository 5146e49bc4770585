/* Python 3.8-3.11: a PEP 523 frame evaluation hook.  Every Python frame (function call, generator
 * or coroutine resumption) on every thread passes through it; a matched code object enters its
 * stages before the frame runs and leaves them when it returns, raises or yields (ms_py_exit, the
 * leave path sys.monitoring's route shares), so entry and exit are paired by the C call itself.
 * Cheaper than a profile function (which on 3.11 turns off the specialising interpreter) and
 * independent of sys.setprofile / cProfile.  A frame whose code has no target's name passes in a
 * few loads; on 3.11, where any hook stops CPython inlining Python-to-Python calls, the hook stays
 * out while every stage is open (below).  Function objects' vectorcall slots were no alternative:
 * 3.11 inlines calls of a plain function whatever its slot holds (doc/internals/python-hook.md).
 *
 * A returning function's locals are released before its stages are left (python/py.h, "what the
 * call left behind"): its caller would release them right after the hook returns, with nothing in
 * between (3.8-3.10: the frame object's deallocation; 3.11: _PyEvalFrameClearAndPop).
 *
 * Layouts relied on (checked against each version's headers): the code object is the fifth
 * pointer of both PyFrameObject (3.8-3.10) and _PyInterpreterFrame (3.11); in 3.11 f_func and
 * f_globals are the first two pointers, frame_obj the sixth, stacktop the int at offset 64, the
 * owner byte at offset 69, localsplus at 72, and co_nlocalsplus the int at offset 76 of the code
 * object; a str's interned bits are the low two of the byte at offset 32 (PyASCIIObject.state). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "python/py.h"

typedef ms_pyobj *(*eval38_fn)(void *frame, int throwflag);
typedef ms_pyobj *(*eval39_fn)(void *tstate, void *frame, int throwflag);

/* The hook's place in the interpreter and what ran there before it. */
static struct {
	eval38_fn prev38; /* 3.8: the evaluator the hook calls */
	eval39_fn prev39; /* 3.9-3.11 */
	void **slot38;    /* 3.8: &interp->eval_frame, found by scanning */
	void *interp;
	eval39_fn (*get_eval)(void *interp);
	void (*set_eval)(void *interp, eval39_fn fn);
	void *default_eval; /* _PyEval_EvalFrameDefault: what a tool that gives the place up puts back */
	int enabled;        /* the hook went in (ms_py_frame_enable) */
	int stopped_deep;   /* taken out for a recursion deeper than the C stack allows */
	unsigned lost;      /* times another tool held the hook and gave it back (ms_py_frame_reclaim) */
} hook;

/* Every frame evaluated through the hook is a C recursion (on 3.11 the hook also turns off the
 * inlined Python-to-Python calls), so a program recursing far deeper than the default limit could
 * run out of C stack where it would not without memshim.  Below this thread's floor the hook takes
 * itself out (warning once); floor 0 = not measured yet for this thread. */
static __thread struct {
	uintptr_t floor;
	uintptr_t lo; /* the stack's real end, below the floor */
} stack MS_TLS;

unsigned ms_py_frame_hook_lost(void)
{
	return __atomic_load_n(&hook.lost, __ATOMIC_RELAXED);
}

/* The targets' names (their last components) as the interpreter's interned strings.  An interned
 * string is the only one of its text, so a code object whose co_name is interned and none of them
 * can match no target: its frame passes with a few loads (most frames), without the table lookup.
 * A name that is not interned (3.11's "<lambda>", namedtuple's methods) is looked up as before. */
static struct {
	uint64_t bloom;  /* one bit per target name object, by address */
	size_t off_name; /* co_name in PyCodeObject */
	int ready;       /* the names were made */
	int fast;        /* the filter applies (READY, and no call adopted from another thread: below) */
} names;

/* While names near a target that matched nothing are wanted, every code object is classified once
 * (python/classify.c notes them): the code objects of no target's name already classified, by
 * address.  One that died and left its address to another of no target's name leaves only that
 * one's name unnoted (a hint at exit), never a target unseen. */
#define NOTED 1024
static const void *noted[NOTED] MS_LARGE;

static inline size_t noted_slot(const void *code)
{
	return ((uintptr_t)code >> 4) & (NOTED - 1);
}

/* PyASCIIObject.state's first byte: the two low bits say interned (3.8-3.11). */
#define STR_STATE 32
#define STR_INTERNED 3

static inline unsigned name_bit(const void *name)
{
	uintptr_t p = (uintptr_t)name;
	return (unsigned)((p >> 4) ^ (p >> 10)) & 63;
}

/* The filter's names, made once (GIL held): a name that cannot be made leaves the filter off. */
static void names_init(void)
{
	size_t file, line;
	const char *module, *last;
	size_t mlen;
	if (ms_py_code_layout(&names.off_name, &file, &line) != 0)
		return;
	for (int i = 0; ms_py_target(i, &module, &mlen, &last); i++) {
		ms_pyobj *s = ms_py.UnicodeInternFromString(last); /* kept: the filter needs it alive */
		if (!s) {
			ms_py.ErrClear();
			return;
		}
		names.bloom |= UINT64_C(1) << name_bit(s);
	}
	names.ready = names.fast = 1;
}

#define FRAME_CODE(f) (((ms_pyobj **)(f))[4])
#define FRAME311_FUNC(f) (((ms_pyobj **)(f))[0])
#define FRAME311_GLOBALS(f) (((ms_pyobj **)(f))[1])
#define FRAME311_OWNER(f) (((const char *)(f))[69])
#define FRAME311_OBJ(f) (((ms_pyobj **)(f))[5])
#define FRAME311_LOCALS_DICT(f) (&((ms_pyobj **)(f))[3])
#define FRAME311_STACKTOP(f) (*(const int *)((const char *)(f) + 64))
#define FRAME311_LOCALS(f) ((ms_pyobj **)((char *)(f) + 72))
#define CODE311_NLOCALSPLUS(c) (*(const int *)((const char *)(c) + 76))
#define OWNED_BY_THREAD 0
#define REFCNT(o) (*(const ms_pyssize *)(o))

/* Whether code object CODE's name is no target's (its filter's answer). */
static inline int unnamed(const ms_pyobj *code)
{
	const char *name = *(const char *const *)((const char *)code + names.off_name);
	return (name[STR_STATE] & STR_INTERNED) && !((names.bloom >> name_bit(name)) & 1);
}

/* Whether FRAME runs code that no target names and nobody waits to classify (names near a target
 * that matched nothing are noted from every code object that runs): the hook's common case. */
static inline int plain(void *frame)
{
	const ms_pyobj *code = FRAME_CODE(frame);
	if (MS_UNLIKELY(!names.fast || !code || ms_py_type_of((ms_pyobj *)code) != ms_py.CodeType))
		return 0;
	if (!unnamed(code))
		return 0;
	return !__atomic_load_n(&ms_py_names_wanted, __ATOMIC_RELAXED) || noted[noted_slot(code)] == code;
}

/* The cached classification of CODE, classifying it on first sight. */
static inline uintptr_t lookup(ms_pyobj *code, ms_pyobj *frame, ms_pyobj *func, ms_pyobj *globals)
{
	if (MS_UNLIKELY(!code || ms_py_type_of(code) != ms_py.CodeType))
		return MS_PY_SEEN; /* not the layout we expect: stay out of the way */
	uintptr_t v = ms_py_code_get(code);
	if (MS_LIKELY(v != 0))
		return v;
	return ms_py_classify(code, frame, func, globals);
}

static void deep_recursion(void);

/* Measures the calling thread's stack: its floor (1: unknown bounds, never trigger) and end. */
static uintptr_t measure_stack(void)
{
	pthread_attr_t attr;
	void *lo = NULL;
	size_t size = 0;
	uintptr_t floor = 1;
	int saved = errno;
	ms_tls_guard++; /* it allocates (a CPU set; the main thread's reads /proc/self/maps) */
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		if (pthread_attr_getstack(&attr, &lo, &size) == 0 && lo && size) {
			floor = (uintptr_t)lo + (size / 4 < (256u << 10) ? size / 4 : (256u << 10));
			stack.lo = (uintptr_t)lo;
		}
		pthread_attr_destroy(&attr);
	}
	ms_tls_guard--;
	errno = saved;
	stack.floor = floor;
	return floor;
}

/* Whether the C stack of this thread is close to its end (measures the thread on first use). */
static inline int stack_low(void)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	uintptr_t floor = stack.floor;
	if (MS_LIKELY(here > floor && floor))
		return 0;
	if (!floor && here > (floor = measure_stack()))
		return 0;
	if (here < stack.lo || floor == 1)
		return 0; /* running on some other stack (a coroutine library's): not ours to judge */
	deep_recursion();
	return 1;
}

/* 3.8-3.10: the frame of a function that returned holds its locals until its caller drops it,
 * right after the hook returns; when that reference is the only one (no traceback, generator or
 * sys._getframe() holds it), frame.clear() releases them now, as the deallocation would. */
static void release_locals_310(ms_pyobj *frame, uintptr_t v)
{
	if ((v & MS_PY_GENLIKE) || REFCNT(frame) != 1)
		return;
	ms_pyobj *clear = ms_py.GetAttrString(frame, "clear");
	ms_pyobj *done = clear ? ms_py.CallFunctionObjArgs(clear, NULL) : NULL;
	if (!done)
		ms_py.ErrClear(); /* the function returned a value: no exception was pending */
	else
		ms_py.DecRef(done);
	if (clear)
		ms_py.DecRef(clear);
	ms_py_release_locals_dict(FRAME_CODE(frame), &((ms_pyobj **)frame)[7]); /* f_locals */
}

/* 3.11: a function frame that returned keeps its locals in localsplus until its caller clears it
 * (_PyEvalFrameClearAndPop, right after the hook returns; the frame is already unlinked from the
 * thread's current frame).  Released here in the same way, unless a frame object that someone
 * else holds (a traceback, sys._getframe()) will take them over.  The stack is empty at a return:
 * stacktop equals co_nlocalsplus, which checks the layout. */
static void release_locals_311(void *frame)
{
	ms_pyobj *fo = FRAME311_OBJ(frame);
	int n = FRAME311_STACKTOP(frame);
	if (FRAME311_OWNER(frame) != OWNED_BY_THREAD || (fo && REFCNT(fo) != 1) || n <= 0 ||
	    n != CODE311_NLOCALSPLUS(FRAME_CODE(frame)))
		return;
	ms_pyobj **slot = FRAME311_LOCALS(frame);
	for (int i = 0; i < n; i++) {
		ms_pyobj *o = slot[i];
		slot[i] = NULL;
		if (o)
			ms_py.DecRef(o);
	}
	ms_py_release_locals_dict(FRAME_CODE(frame), FRAME311_LOCALS_DICT(frame));
}

/* ---- 3.11: the hook out of the way while every stage is open -------------------------------
 * 3.11 inlines Python-to-Python calls only while no frame hook is in (a hook that does nothing
 * costs 1.3-1.4x on call-heavy code).  While every stage a Python target names is open, every target
 * has matched and no function is passed over (ms_py_all_open), no target's call could change a
 * number but a stage depth: the call that made it so takes the hook out (a window) and puts it back
 * when it ends, which its own C frame sees.  A stage can only close at the end of a call the hook
 * saw, so the end of any such call, on any thread, closes the window first.  Other threads may run
 * targets unseen in the window: when it closes, the target frames on their stacks that the hook did
 * not evaluate are adopted (their stages stay open) and left once gone from their thread's stack,
 * looked at on the hook's slow path (every frame's while one is adopted) and at audit events.  A
 * fork in a window leaves the child's stages open for good (their callers' threads are gone), so
 * the hook staying out there changes nothing either. */
static void *ours(void);
static void *in_place(void);
static void put(void *fn);

#define SEEN_MAX 256
#define ADOPTED_MAX 16
#define WALK_MAX 100000 /* frames walked up one thread's stack at most */

struct adopted {
	void *ts, *frame;
	const void *code;
	uintptr_t v;
};

static struct {
	int out;    /* a window is open: the hook is out */
	void *left; /* what was put in the hook's place: the evaluator the hook calls */
	int broken; /* the table of frames in the hook overflowed: the hook stays in from then on */
	int nseen, nadopted;
	unsigned polls;
	void *seen[SEEN_MAX]; /* matched frames the hook evaluates now, on every thread */
	struct adopted adopted[ADOPTED_MAX];
} aside MS_LARGE;

static void seen_push(void *frame)
{
	if (aside.nseen == SEEN_MAX)
		aside.broken = 1; /* a frame not in the table would read as unseen */
	else
		aside.seen[aside.nseen++] = frame;
}

static void seen_pop(void *frame)
{
	for (int i = aside.nseen - 1; i >= 0; i--)
		if (aside.seen[i] == frame) {
			aside.seen[i] = aside.seen[--aside.nseen];
			return;
		}
}

static int seen(const void *frame)
{
	for (int i = 0; i < aside.nseen; i++)
		if (aside.seen[i] == frame)
			return 1;
	for (int i = 0; i < aside.nadopted; i++)
		if (aside.adopted[i].frame == frame)
			return 1;
	return 0;
}

/* Whether thread state TS is still the interpreter's and FRAME, running CODE, on its stack. */
static int on_stack(const struct adopted *a)
{
	void *ts = ms_py.ThreadHead(hook.interp);
	while (ts && ts != a->ts)
		ts = ms_py.ThreadNext(ts);
	void *f = ts ? ms_py_thread_frame(ts) : NULL;
	for (int n = 0; f && n < WALK_MAX; n++, f = ms_py_frame_back(f))
		if (f == a->frame && FRAME_CODE(f) == a->code)
			return 1;
	return 0;
}

/* Leaves the adopted calls gone from their stacks: those of thread TS (the one running: its own
 * can only end while it runs), or of every thread now and then (a thread that ended). */
static void poll_adopted(void *ts)
{
	int all = (++aside.polls & 255) == 0 || !ts;
	for (int i = aside.nadopted - 1; i >= 0; i--) {
		struct adopted *a = &aside.adopted[i];
		if ((!all && a->ts != ts) || on_stack(a))
			continue;
		ms_py_exit(a->v, MS_PY_RETURNED, NULL); /* how it ended is not known: as a return */
		*a = aside.adopted[--aside.nadopted];
	}
	if (!aside.nadopted)
		names.fast = names.ready;
}

/* A target frame of another thread that the hook did not evaluate (its code classified now if
 * it never ran through the hook): its stages are entered for it. */
static void adopt(void *ts, void *frame)
{
	ms_pyobj *code = FRAME_CODE(frame);
	if (!code || ms_py_type_of(code) != ms_py.CodeType || seen(frame))
		return;
	uintptr_t v = ms_py_code_get(code);
	if (!v && !(names.ready && unnamed(code)))
		v = ms_py_classify(code, NULL, FRAME311_FUNC(frame), FRAME311_GLOBALS(frame));
	if (!ms_py_mask(v) || ((v & MS_PY_GENLIKE) && FRAME311_OWNER(frame) == OWNED_BY_THREAD))
		return;
	if (aside.nadopted == ADOPTED_MAX) {
		ms_debug("python frame hook: too many target calls on other threads to follow");
		return;
	}
	ms_py_enter(v);
	ms_debug("python frame hook: a target's call on another thread, run while the hook was out, followed");
	aside.adopted[aside.nadopted++] = (struct adopted){ ts, frame, code, v };
	names.fast = 0; /* every frame takes the slow path, which looks for their end */
}

/* A matched frame's stages were just entered: the window opens when no target's call could
 * change a number now. */
static void step_out(void)
{
	if (aside.out || aside.broken || aside.nadopted || !hook.enabled || hook.stopped_deep || in_place() != ours() ||
	    !ms_py_all_open())
		return;
	aside.out = 1;
	aside.left = (void *)hook.prev39;
	put(aside.left);
}

/* A call the hook saw ended on thread TS, before its stages are left: the window closes, the hook
 * back in unless another tool took the place meanwhile (it comes back when that tool gives the
 * place up), and the targets other threads run unseen are adopted. */
static void step_in(void *ts)
{
	aside.out = 0;
	if (in_place() == aside.left)
		put(ours());
	for (void *t = ms_py.ThreadHead(hook.interp); t; t = ms_py.ThreadNext(t)) {
		void *f = t == ts ? NULL : ms_py_thread_frame(t);
		for (int n = 0; f && n < WALK_MAX; n++, f = ms_py_frame_back(f))
			adopt(t, f);
	}
}

/* ---- the hook: one body, the version's differences as a constant each entry point passes ---- */

/* The frame layouts and evaluator signatures: 3.8 (no thread state argument), 3.9-3.10 (the
 * same frame object), 3.11 (the interpreter's own frames, the function at hand). */
enum version { V38, V310, V311 };

#define HOOK_BODY static inline __attribute__((always_inline))

/* The evaluator that ran before the hook. */
HOOK_BODY ms_pyobj *previous(enum version ver, void *tstate, void *frame, int throwflag)
{
	return ver == V38 ? hook.prev38(frame, throwflag) : hook.prev39(tstate, frame, throwflag);
}

/* FRAME's classification: the frame object, or on 3.11 the function and its globals, names it. */
HOOK_BODY uintptr_t classification(enum version ver, void *frame)
{
	if (ver == V311)
		return lookup(FRAME_CODE(frame), NULL, FRAME311_FUNC(frame), FRAME311_GLOBALS(frame));
	return lookup(FRAME_CODE(frame), frame, NULL, NULL);
}

/* Whether FRAME runs no call of a stage: unmatched code, or on 3.11 a generator function's call,
 * which only builds the generator (its body runs on later frames). */
HOOK_BODY int passes(enum version ver, void *frame, uintptr_t v)
{
	if (MS_LIKELY(!ms_py_mask(v)))
		return 1;
	return ver == V311 && (v & MS_PY_GENLIKE) && FRAME311_OWNER(frame) == OWNED_BY_THREAD;
}

/* A matched frame: its stages entered, the frame evaluated, its locals released when it returned
 * (R), its stages left however it was left (R NULL: the thread's current exception). */
HOOK_BODY ms_pyobj *evaluate(enum version ver, void *tstate, void *frame, int throwflag)
{
	if (ver == V311 && MS_UNLIKELY(aside.nadopted))
		poll_adopted(tstate);
	if (MS_UNLIKELY(stack_low()) || plain(frame))
		return previous(ver, tstate, frame, throwflag);
	uintptr_t v = classification(ver, frame);
	const ms_pyobj *code = FRAME_CODE(frame);
	if (names.ready && code && ms_py_type_of((ms_pyobj *)code) == ms_py.CodeType && unnamed(code))
		noted[noted_slot(code)] = code; /* classified: its name was noted if near a target's */
	if (passes(ver, frame, v))
		return previous(ver, tstate, frame, throwflag);
	if (ver == V311)
		seen_push(frame);
	ms_py_enter(v);
	if (ver == V311)
		step_out();
	ms_pyobj *r = previous(ver, tstate, frame, throwflag);
	if (ver == V311 && aside.out)
		step_in(tstate);
	if (ver == V311)
		seen_pop(frame);
	if (r && ver == V311)
		release_locals_311(frame);
	else if (r)
		release_locals_310(frame, v);
	if (r)
		ms_py_exit(v, MS_PY_RETURNED, NULL);
	else
		ms_py_exit(v, MS_PY_RAISED, ms_py.ErrOccurred());
	ms_py_frame_reclaim(); /* a tool that set the default back inside the call */
	return r;
}

/* Each entry point passes a plain frame straight on (a tail call: no frame of the hook's own, so no
 * C stack either, where 3.8-3.10 use a C frame per Python call anyway); the rest goes out of line. */
static __attribute__((noinline)) ms_pyobj *slow38(void *frame, int throwflag)
{
	return evaluate(V38, NULL, frame, throwflag);
}

static __attribute__((noinline)) ms_pyobj *slow310(void *tstate, void *frame, int throwflag)
{
	return evaluate(V310, tstate, frame, throwflag);
}

static __attribute__((noinline)) ms_pyobj *slow311(void *tstate, void *frame, int throwflag)
{
	return evaluate(V311, tstate, frame, throwflag);
}

static ms_pyobj *hook38(void *frame, int throwflag)
{
	if (MS_LIKELY(plain(frame)))
		return hook.prev38(frame, throwflag);
	return slow38(frame, throwflag);
}

static ms_pyobj *hook310(void *tstate, void *frame, int throwflag)
{
	if (MS_LIKELY(plain(frame)))
		return hook.prev39(tstate, frame, throwflag);
	return slow310(tstate, frame, throwflag);
}

/* 3.11 runs Python calls without C recursion unless a hook is in: the stack is watched on every
 * frame (the floor is measured on the slow path). */
static ms_pyobj *hook311(void *tstate, void *frame, int throwflag)
{
	if (MS_LIKELY(plain(frame) && (uintptr_t)__builtin_frame_address(0) > stack.floor && stack.floor))
		return hook.prev39(tstate, frame, throwflag);
	return slow311(tstate, frame, throwflag);
}

/* This interpreter's hook, and the evaluator in its place now (NULL: unknown). */
static void *ours(void)
{
	return ms_py.minor == 8 ? (void *)hook38 : ms_py.minor == 11 ? (void *)hook311 : (void *)hook310;
}

static void *in_place(void)
{
	if (ms_py.minor == 8)
		return hook.slot38 ? __atomic_load_n(hook.slot38, __ATOMIC_ACQUIRE) : NULL;
	return hook.interp && hook.get_eval ? (void *)hook.get_eval(hook.interp) : NULL;
}

/* Puts FN in the evaluator's place (3.8: the slot; 3.9+: the setter). */
static void put(void *fn)
{
	if (ms_py.minor == 8 && hook.slot38)
		__atomic_store_n(hook.slot38, fn, __ATOMIC_RELEASE);
	else if (ms_py.minor != 8 && hook.set_eval && hook.interp)
		hook.set_eval(hook.interp, (eval39_fn)fn);
}

/* 3.8 has no setter: the field holds _PyEval_EvalFrameDefault; it must be the only match in the
 * first 2 KiB of the (2.7 KiB) interpreter state.  Finds the slot; 0 on success. */
static int find_slot38(void)
{
	void *(*get_interp)(void) = (void *(*)(void))ms_py_sym("_PyInterpreterState_Get");
	void *dflt = ms_py_sym("_PyEval_EvalFrameDefault");
	if (!get_interp || !dflt || !(hook.interp = get_interp()))
		return -1;
	void **words = hook.interp;
	int found = -1;
	for (int i = 0; i < 256; i++) {
		if (words[i] != dflt)
			continue;
		if (found >= 0)
			return -1;
		found = i;
	}
	if (found < 0)
		return -1;
	hook.slot38 = &words[found];
	hook.prev38 = (eval38_fn)dflt;
	hook.default_eval = dflt;
	return 0;
}

int ms_py_frame_prepare(void)
{
	if (ms_py.minor < 8 || ms_py.minor > 11)
		return -1;
	names_init();
	if (ms_py.minor == 8) {
		if (find_slot38() == 0)
			return 0;
		ms_warn("Python stages disabled: the frame evaluation hook of this Python 3.8 was not found");
		return -1;
	}
	void *(*get_interp)(void) = (void *(*)(void))ms_py_sym("PyInterpreterState_Get");
	hook.default_eval = ms_py_sym("_PyEval_EvalFrameDefault");
	*(void **)&hook.set_eval = ms_py_sym("_PyInterpreterState_SetEvalFrameFunc");
	*(void **)&hook.get_eval = ms_py_sym("_PyInterpreterState_GetEvalFrameFunc");
	if (!get_interp || !hook.set_eval || !hook.get_eval || !(hook.interp = get_interp())) {
		ms_warn("Python stages disabled: no frame evaluation hook in this Python");
		return -1;
	}
	return 0;
}

/* 3.9-3.11: the evaluator in place now, which the hook will call (NULL: none found). */
static eval39_fn evaluator_now(void)
{
	eval39_fn now = hook.get_eval(hook.interp);
	if (!now)
		now = (eval39_fn)ms_py_sym("_PyEval_EvalFrameDefault");
	if (now && (void *)now != ms_py_sym("_PyEval_EvalFrameDefault"))
		ms_debug("another frame evaluation hook is installed; memshim's runs before it");
	return now;
}

/* The previous function is read now, not at prepare: something may have set one in between. */
int ms_py_frame_enable(const char *why)
{
	if (hook.enabled)
		return 0;
	if (ms_py.minor == 8 && *hook.slot38 != (void *)hook.prev38)
		return -1; /* someone else's hook moved in since: leave it be */
	if (ms_py.minor != 8 && !(hook.prev39 = evaluator_now()))
		return -1;
	put(ours());
	hook.enabled = 1;
	ms_debug("python frame hook installed (Python 3.%d): %s", ms_py.minor, why);
	return 0;
}

/* Puts the previous frame evaluation function back (GIL held): frames already inside the hook
 * still leave their stages as they unwind; new frames run without the hook. */
static void deep_recursion(void)
{
	if (hook.stopped_deep)
		return;
	hook.stopped_deep = 1;
	ms_py_targets_stopped();
	put(ms_py.minor == 8 ? (void *)hook.prev38 : (void *)hook.prev39);
	ms_py_warn_once(4, "Python recursion went deeper than the C stack allows with memshim's frame "
			   "hook: Python stage detection stopped here (open stages still close)");
}

/* An audit event of the main interpreter (GIL held): a tool that put its own hook in and later the
 * default back (a PEP 523 test, a debugger detaching) gave the place up, so memshim's goes back in;
 * stages that began while the other tool held it were not seen. */
void ms_py_frame_reclaim(void)
{
	if (aside.nadopted)
		poll_adopted(NULL);
	if (!hook.enabled || hook.stopped_deep || aside.out)
		return; /* out: the default is in place by memshim's own choice */
	void *now = in_place();
	if (now == ours() || (now && now != hook.default_eval))
		return; /* ours, or the other tool still holds it */
	if (ms_py.minor != 8)
		hook.prev39 = (eval39_fn)hook.default_eval; /* 3.8's was the default already */
	put(ours());
	__atomic_add_fetch(&hook.lost, 1, __ATOMIC_RELAXED);
	ms_debug("python frame hook: another tool gave the default back; memshim's is in again");
}

/* At interpreter finalisation: was the hook replaced by another tool since?  Then stages after
 * that point were missed; say so once. */
void ms_py_frame_check(void)
{
	if (!hook.enabled)
		return;
	void *now = in_place();
	if (now && now != ours() && !hook.stopped_deep && !(aside.out && now == aside.left))
		ms_py_warn_once(1, "another tool replaced the Python frame evaluation hook: Python stages "
				   "that began after that were not seen");
}
