/* dlopen, dlmopen, dlclose: told to the native stage detector, which keeps its stack check off
 * until a target function is loaded (ms_on_dlopen, ms_after_dlclose).  dlclose is also counted, so
 * the next look at the stack re-reads the set of loaded objects (an object loaded later at the same
 * addresses must not be taken for the old one).  dlopen depends on its caller (the calling object's
 * RUNPATH and $ORIGIN, its namespace): its wrappers tail-call the real function, which so sees the
 * program's return address, and nothing runs after it.  The shim's own dlclose calls go to the real
 * one, uncounted.  (The dlsym wrapper is cuda/lookup.c's: it exists for the driver functions.) */
#include <dlfcn.h>
#include "core/ms.h"
#include "intercept/hooks.h"

unsigned ms_dlclose_calls;
void (*ms_on_dlopen)(uintptr_t *slot);
void (*ms_after_dlclose)(void);
void *(*ms_on_dlsym)(void *handle, const char *name);

/* Tells the hook (the wrapper's frame is gone before the real function runs: a tail call). */
#define BEFORE_DLOPEN() do { \
		void (*hook_)(uintptr_t *) = __atomic_load_n(&ms_on_dlopen, __ATOMIC_ACQUIRE); \
		if (hook_) \
			hook_(MS_RA_SLOT()); \
	} while (0)

EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlopen(const char *file, int mode)
{
	BEFORE_DLOPEN();
	void *(*real)(const char *, int) = MS_REAL_LAZY(dlopen);
	return real ? real(file, mode) : NULL; /* never missing: the C library (or libdl, linked) has it */
}

EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlmopen(Lmid_t lmid, const char *file,
									    int mode)
{
	BEFORE_DLOPEN();
	void *(*real)(Lmid_t, const char *, int) = MS_REAL_LAZY(dlmopen);
	return real ? real(lmid, file, mode) : NULL;
}

EXPORT int dlclose(void *handle)
{
	int (*real)(void *) = MS_REAL_LAZY(dlclose);
	int rc = real ? real(handle) : -1;
	__atomic_add_fetch(&ms_dlclose_calls, 1, __ATOMIC_RELEASE);
	void (*hook)(void) = __atomic_load_n(&ms_after_dlclose, __ATOMIC_ACQUIRE);
	if (hook)
		hook();
	return rc;
}
