/* C++ exceptions in flight: from the throw (_Unwind_RaiseException, or a rethrow through
 * _Unwind_Resume_or_Rethrow) to the catch (__cxa_begin_catch), the stack detector changes no return
 * address (native/stack.c says why).  Each wrapper only counts and calls through. */
#include "core/ms.h"
#include "intercept/hooks.h"
#include "native/native.h"

#define URC_FATAL_PHASE1_ERROR 3

typedef int (*raise_fn)(void *);

int _Unwind_RaiseException(void *exc);
int _Unwind_Resume_or_Rethrow(void *exc);
void *__cxa_begin_catch(void *exc);

/* Raising and rethrowing run the real unwinder with return addresses frozen (see native/stack.c).
 * Returns only when no handler was found (the caller then terminates) or on an error. */
static int raise_frozen(void **slot, const char *name, void *exc)
{
	raise_fn f = (raise_fn)ms_resolve_lazy(slot, name);
	if (!f)
		return URC_FATAL_PHASE1_ERROR;
	ms_native_unwind_begin();
	int rc = f(exc);
	ms_native_unwind_end();
	return rc;
}

EXPORT int _Unwind_RaiseException(void *exc)
{
	return raise_frozen((void **)&ms_real__Unwind_RaiseException, "_Unwind_RaiseException", exc);
}

EXPORT int _Unwind_Resume_or_Rethrow(void *exc)
{
	return raise_frozen((void **)&ms_real__Unwind_Resume_or_Rethrow, "_Unwind_Resume_or_Rethrow", exc);
}

EXPORT void *__cxa_begin_catch(void *exc)
{
	void *(*f)(void *) = MS_REAL_LAZY(__cxa_begin_catch);
	ms_native_unwind_end();
	return f ? f(exc) : NULL;
}
