/* Python 3.8-3.11: a PEP 523 frame evaluation hook.  Every Python frame (function call, generator
 * or coroutine resumption) on every thread passes through it; a matched code object enters its
 * stages before the frame runs and leaves them when it returns, raises or yields, so entry and
 * exit are paired by the C call itself.  Cheaper than a profile function (which on 3.11 turns off
 * the specialising interpreter) and independent of sys.setprofile / cProfile.
 *
 * A returning function's locals are released before its stages are left (python/py.h, "what the
 * call left behind"): its caller would release them right after the hook returns, with nothing in
 * between (3.8-3.10: the frame object's deallocation; 3.11: _PyEvalFrameClearAndPop).
 *
 * Layouts relied on (checked against each version's headers): the code object is the fifth
 * pointer of both PyFrameObject (3.8-3.10) and _PyInterpreterFrame (3.11); in 3.11 f_func and
 * f_globals are the first two pointers, frame_obj the sixth, stacktop the int at offset 64, the
 * owner byte at offset 69, localsplus at 72, and co_nlocalsplus the int at offset 76 of the code
 * object. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "python/py.h"

typedef ms_pyobj *(*eval38_fn)(void *frame, int throwflag);
typedef ms_pyobj *(*eval39_fn)(void *tstate, void *frame, int throwflag);

static eval38_fn prev38;
static eval39_fn prev39;
static void **slot38;  /* 3.8: &interp->eval_frame, found by scanning */
static void *interp;
static eval39_fn (*get_eval)(void *interp);
static void (*set_eval)(void *interp, eval39_fn fn);

/* Every frame evaluated through the hook is a C recursion (on 3.11 the hook also turns off the
 * inlined Python-to-Python calls), so a program recursing far deeper than the default limit could
 * run out of C stack where it would not without memshim.  Below this thread's floor the hook takes
 * itself out (warning once); 0 = not measured yet for this thread. */
static __thread uintptr_t stack_floor MS_TLS;
static __thread uintptr_t stack_lo MS_TLS; /* the stack's real end, below the floor */
static int stopped_deep;
static int enabled; /* the hook went in (ms_py_frame_enable) */
static void *default_eval; /* _PyEval_EvalFrameDefault (3.9-3.11) */
static unsigned lost; /* times another tool held the hook and gave it back (ms_py_frame_reclaim) */

unsigned ms_py_frame_hook_lost(void)
{
	return __atomic_load_n(&lost, __ATOMIC_RELAXED);
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

/* Leaves the stages of classification V after the frame's evaluation: R NULL means an exception
 * left it (the thread's current exception, whose type names it). */
static inline void leave(uintptr_t v, ms_pyobj *r)
{
	uint32_t mask = ms_py_leaving(v);
	if (MS_LIKELY(r != NULL))
		ms_py_leave(mask);
	else
		ms_py_leave_raised(mask, ms_py.ErrOccurred());
}

/* Whether the C stack of this thread is close to its end (measures the thread on first use). */
static inline int stack_low(void)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	uintptr_t floor = stack_floor;
	if (MS_LIKELY(here > floor && floor))
		return 0;
	if (!floor) {
		pthread_attr_t attr;
		void *lo = NULL;
		size_t size = 0;
		floor = 1; /* unknown bounds: never trigger */
		int saved = errno;
		ms_tls_guard++; /* it allocates (a CPU set; the main thread's reads /proc/self/maps) */
		if (pthread_getattr_np(pthread_self(), &attr) == 0) {
			if (pthread_attr_getstack(&attr, &lo, &size) == 0 && lo && size) {
				floor = (uintptr_t)lo + (size / 4 < (256u << 10) ? size / 4 : (256u << 10));
				stack_lo = (uintptr_t)lo;
			}
			pthread_attr_destroy(&attr);
		}
		ms_tls_guard--;
		errno = saved;
		stack_floor = floor;
		if (here > floor)
			return 0;
	}
	if (here < stack_lo || floor == 1)
		return 0; /* running on some other stack (a coroutine library's): not ours to judge */
	deep_recursion();
	return 1;
}

/* 3.8-3.10: the frame of a function that returned (R) holds its locals until its caller drops it,
 * right after the hook returns; when that reference is the only one (no traceback, generator or
 * sys._getframe() holds it), frame.clear() releases them now, as the deallocation would. */
static void release_locals_310(ms_pyobj *frame, uintptr_t v, ms_pyobj *r)
{
	if (!r || (v & MS_PY_GENLIKE) || REFCNT(frame) != 1)
		return;
	ms_pyobj *clear = ms_py.GetAttrString(frame, "clear");
	ms_pyobj *done = clear ? ms_py.CallFunctionObjArgs(clear, NULL) : NULL;
	if (!done)
		ms_py.ErrClear(); /* R is a value: no exception was pending */
	else
		ms_py.DecRef(done);
	if (clear)
		ms_py.DecRef(clear);
	ms_py_release_locals_dict(FRAME_CODE(frame), &((ms_pyobj **)frame)[7]); /* f_locals */
}

static ms_pyobj *hook38(void *frame, int throwflag)
{
	if (MS_UNLIKELY(stack_low()))
		return prev38(frame, throwflag);
	uintptr_t v = lookup(FRAME_CODE(frame), frame, NULL, NULL);
	uint32_t mask = ms_py_mask(v);
	if (MS_LIKELY(!mask))
		return prev38(frame, throwflag);
	ms_py_enter(v);
	ms_pyobj *r = prev38(frame, throwflag);
	release_locals_310(frame, v, r);
	leave(v, r);
	ms_py_frame_reclaim(); /* a tool that set the default back inside the call */
	return r;
}

static ms_pyobj *hook310(void *tstate, void *frame, int throwflag)
{
	if (MS_UNLIKELY(stack_low()))
		return prev39(tstate, frame, throwflag);
	uintptr_t v = lookup(FRAME_CODE(frame), frame, NULL, NULL);
	uint32_t mask = ms_py_mask(v);
	if (MS_LIKELY(!mask))
		return prev39(tstate, frame, throwflag);
	ms_py_enter(v);
	ms_pyobj *r = prev39(tstate, frame, throwflag);
	release_locals_310(frame, v, r);
	leave(v, r);
	ms_py_frame_reclaim(); /* a tool that set the default back inside the call */
	return r;
}

/* 3.11: a function frame that returned (R) keeps its locals in localsplus until its caller clears
 * it (_PyEvalFrameClearAndPop, right after the hook returns; the frame is already unlinked from the
 * thread's current frame).  Released here in the same way, unless a frame object that someone
 * else holds (a traceback, sys._getframe()) will take them over.  The stack is empty at a return:
 * stacktop equals co_nlocalsplus, which checks the layout. */
static void release_locals_311(void *frame, ms_pyobj *r)
{
	ms_pyobj *fo = FRAME311_OBJ(frame);
	int n = FRAME311_STACKTOP(frame);
	if (!r || FRAME311_OWNER(frame) != OWNED_BY_THREAD || (fo && REFCNT(fo) != 1) || n <= 0 ||
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

static ms_pyobj *hook311(void *tstate, void *frame, int throwflag)
{
	if (MS_UNLIKELY(stack_low()))
		return prev39(tstate, frame, throwflag);
	uintptr_t v = lookup(FRAME_CODE(frame), NULL, FRAME311_FUNC(frame), FRAME311_GLOBALS(frame));
	uint32_t mask = ms_py_mask(v);
	/* a generator function's call only builds the generator: its body runs on later frames */
	if (MS_LIKELY(!mask) || ((v & MS_PY_GENLIKE) && FRAME311_OWNER(frame) == OWNED_BY_THREAD))
		return prev39(tstate, frame, throwflag);
	ms_py_enter(v);
	ms_pyobj *r = prev39(tstate, frame, throwflag);
	release_locals_311(frame, r);
	leave(v, r);
	ms_py_frame_reclaim(); /* a tool that set the default back inside the call */
	return r;
}

/* 3.8 has no setter: the field holds _PyEval_EvalFrameDefault; it must be the only match in the
 * first 2 KiB of the (2.7 KiB) interpreter state.  Finds the slot; 0 on success. */
static int find_slot38(void)
{
	void *(*get_interp)(void) = (void *(*)(void))ms_py_sym("_PyInterpreterState_Get");
	void *dflt = ms_py_sym("_PyEval_EvalFrameDefault");
	if (!get_interp || !dflt || !(interp = get_interp()))
		return -1;
	void **words = interp;
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
	slot38 = &words[found];
	prev38 = (eval38_fn)dflt;
	return 0;
}

int ms_py_frame_prepare(void)
{
	if (ms_py.minor < 8 || ms_py.minor > 11)
		return -1;
	if (ms_py.minor == 8) {
		if (find_slot38() == 0)
			return 0;
		ms_warn("Python stages disabled: the frame evaluation hook of this Python 3.8 was not found");
		return -1;
	}
	void *(*get_interp)(void) = (void *(*)(void))ms_py_sym("PyInterpreterState_Get");
	default_eval = ms_py_sym("_PyEval_EvalFrameDefault");
	*(void **)&set_eval = ms_py_sym("_PyInterpreterState_SetEvalFrameFunc");
	*(void **)&get_eval = ms_py_sym("_PyInterpreterState_GetEvalFrameFunc");
	if (!get_interp || !set_eval || !get_eval || !(interp = get_interp())) {
		ms_warn("Python stages disabled: no frame evaluation hook in this Python");
		return -1;
	}
	return 0;
}

/* The previous function is read now, not at prepare: something may have set one in between. */
int ms_py_frame_enable(const char *why)
{
	if (enabled)
		return 0;
	if (ms_py.minor == 8) {
		if (*slot38 != (void *)prev38)
			return -1; /* someone else's hook moved in since: leave it be */
		__atomic_store_n(slot38, (void *)hook38, __ATOMIC_RELEASE);
	} else {
		prev39 = get_eval(interp);
		if (!prev39)
			prev39 = (eval39_fn)ms_py_sym("_PyEval_EvalFrameDefault");
		if (!prev39)
			return -1;
		if ((void *)prev39 != ms_py_sym("_PyEval_EvalFrameDefault"))
			ms_debug("another frame evaluation hook is installed; memshim's runs before it");
		set_eval(interp, ms_py.minor == 11 ? hook311 : hook310);
	}
	enabled = 1;
	ms_debug("python frame hook installed (Python 3.%d): %s", ms_py.minor, why);
	return 0;
}

/* Puts the previous frame evaluation function back (GIL held): frames already inside the hook
 * still leave their stages as they unwind; new frames run without the hook. */
static void deep_recursion(void)
{
	if (stopped_deep)
		return;
	stopped_deep = 1;
	if (ms_py.minor == 8 && slot38)
		__atomic_store_n(slot38, (void *)prev38, __ATOMIC_RELEASE);
	else if (set_eval && interp)
		set_eval(interp, prev39);
	ms_py_warn_once(4, "Python recursion went deeper than the C stack allows with memshim's frame "
			   "hook: Python stage detection stopped here (open stages still close)");
}

/* An audit event of the main interpreter (GIL held): a tool that put its own hook in and later the
 * default back (a PEP 523 test, a debugger detaching) gave the place up, so memshim's goes back in;
 * stages that began while the other tool held it were not seen. */
void ms_py_frame_reclaim(void)
{
	if (!enabled || stopped_deep)
		return;
	if (ms_py.minor == 8) {
		if (slot38 && __atomic_load_n(slot38, __ATOMIC_ACQUIRE) == (void *)prev38) {
			__atomic_store_n(slot38, (void *)hook38, __ATOMIC_RELEASE);
			__atomic_add_fetch(&lost, 1, __ATOMIC_RELAXED);
		}
		return;
	}
	eval39_fn now = get_eval(interp), ours = ms_py.minor == 11 ? hook311 : hook310;
	if (now == ours || (now && (void *)now != default_eval))
		return; /* ours, or the other tool still holds it */
	prev39 = (eval39_fn)default_eval;
	set_eval(interp, ours);
	__atomic_add_fetch(&lost, 1, __ATOMIC_RELAXED);
	ms_debug("python frame hook: another tool gave the default back; memshim's is in again");
}

/* At interpreter finalisation: was the hook replaced by another tool since?  Then stages after
 * that point were missed; say so once. */
void ms_py_frame_check(void)
{
	if (!enabled)
		return;
	void *now = ms_py.minor == 8 ? (slot38 ? *slot38 : NULL) : (interp && get_eval ? (void *)get_eval(interp) : NULL);
	void *ours = ms_py.minor == 8 ? (void *)hook38 : ms_py.minor == 11 ? (void *)hook311 : (void *)hook310;
	if (now && now != ours && !stopped_deep)
		ms_py_warn_once(1, "another tool replaced the Python frame evaluation hook: Python stages "
				   "that began after that were not seen");
}
