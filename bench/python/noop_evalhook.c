/* A PEP 523 frame evaluation hook that does nothing but hand each frame to the default evaluator
 * (Python 3.9-3.11): the least any frame hook costs, the floor memshim's hook is compared with
 * (bench_ir.py --noop-hook).  fib_child.py installs it through ctypes when BENCH_NOOP_EVALHOOK names
 * this library. */
#include <dlfcn.h>

typedef void *(*eval_fn)(void *tstate, void *frame, int throwflag);
int noop_evalhook_install(void);

static eval_fn default_eval;

static void *noop(void *tstate, void *frame, int throwflag)
{
	return default_eval(tstate, frame, throwflag);
}

/* Puts the hook in (GIL held: ctypes.PyDLL); 0 on success. */
int noop_evalhook_install(void)
{
	void *(*get)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyInterpreterState_Get");
	void (*set)(void *, eval_fn) =
		(void (*)(void *, eval_fn))dlsym(RTLD_DEFAULT, "_PyInterpreterState_SetEvalFrameFunc");
	*(void **)&default_eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	if (!get || !set || !default_eval)
		return -1;
	set(get(), noop);
	return 0;
}
