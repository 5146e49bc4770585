/* C++ exceptions in flight: from the throw (_Unwind_RaiseException, or a rethrow through
 * _Unwind_Resume_or_Rethrow) to the catch (__cxa_begin_catch), the stack detector changes no return
 * address (native_stack.c says why).  Each wrapper only counts and calls through. */
#include <dlfcn.h>
#include "core/ms.h"
#include "native/native.h"

#define EXPORT __attribute__((visibility("default")))
#define URC_FATAL_PHASE1_ERROR 3

typedef int (*raise_fn)(void *);
typedef void *(*catch_fn)(void *);

int _Unwind_RaiseException(void *exc);
int _Unwind_Resume_or_Rethrow(void *exc);
void *__cxa_begin_catch(void *exc);

static raise_fn real_raise, real_rethrow;
static catch_fn real_catch;

static void *find(void **cache, const char *name)
{
	void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!f) {
		ms_tls_guard++;
		f = ms_real_dlsym(RTLD_NEXT, name);
		if (!f) /* still resolving: our dlsym is a tail call, so "next" is still after us */
			f = dlsym(RTLD_NEXT, name);
		ms_tls_guard--;
		__atomic_store_n(cache, f, __ATOMIC_RELEASE);
	}
	return f;
}

/* Raising and rethrowing run the real unwinder with return addresses frozen (see native_stack.c).
 * Returns only when no handler was found (the caller then terminates) or on an error. */
static int raise_frozen(void **cache, const char *name, void *exc)
{
	raise_fn f = (raise_fn)find(cache, name);
	if (!f)
		return URC_FATAL_PHASE1_ERROR;
	ms_native_unwind_begin();
	int rc = f(exc);
	ms_native_unwind_end();
	return rc;
}

EXPORT int _Unwind_RaiseException(void *exc)
{
	return raise_frozen((void **)&real_raise, "_Unwind_RaiseException", exc);
}

EXPORT int _Unwind_Resume_or_Rethrow(void *exc)
{
	return raise_frozen((void **)&real_rethrow, "_Unwind_Resume_or_Rethrow", exc);
}

EXPORT void *__cxa_begin_catch(void *exc)
{
	catch_fn f = (catch_fn)find((void **)&real_catch, "__cxa_begin_catch");
	ms_native_unwind_end();
	return f ? f(exc) : NULL;
}
