/* The dynamic loader's wrappers.  dlopen, dlmopen, dlclose: told to the native stage detector,
 * which keeps its stack check off until a target function is loaded (ms_on_dlopen,
 * ms_after_dlclose).  dlclose is also counted, so the next look at the stack re-reads the set of
 * loaded objects (an object loaded later at the same addresses must not be taken for the old one).
 * dlopen depends on its caller (the calling object's RUNPATH and $ORIGIN, its namespace): its
 * wrappers tail-call the real function, which so sees the program's return address, and nothing
 * runs after it.  The shim's own dlclose calls go to the real one, uncounted.  dlsym hands a name
 * asked of a real library to the layers' claims (MS_DLSYM_CLAIM: the CUDA driver functions, so
 * that a program asking libcuda for one gets the shim's wrapper) and passes everything else on. */
#include <dlfcn.h>
#include "core/ms.h"
#include "intercept/hooks.h"

unsigned ms_dlclose_calls;
unsigned ms_dl_generation;
void (*ms_on_dlopen)(uintptr_t *slot);
void (*ms_after_dlclose)(void);
void *(*ms_on_dlsym)(void *handle, const char *name);

/* Tells the hook (the wrapper's frame is gone before the real function runs: a tail call). */
#define BEFORE_DLOPEN()                                                                                                \
	do {                                                                                                           \
		__atomic_add_fetch(&ms_dl_generation, 1, __ATOMIC_RELEASE);                                            \
		void (*hook_)(uintptr_t *) = __atomic_load_n(&ms_on_dlopen, __ATOMIC_ACQUIRE);                         \
		if (hook_)                                                                                             \
			hook_(MS_RA_SLOT());                                                                           \
	} while (0)

EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlopen(const char *file, int mode)
{
	BEFORE_DLOPEN();
	void *(*real)(const char *, int) = MS_REAL_LAZY(dlopen);
	return real ? real(file, mode) : NULL; /* never missing: the C library (or libdl, linked) has it */
}

EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlmopen(Lmid_t lmid, const char *file, int mode)
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
	__atomic_add_fetch(&ms_dl_generation, 1, __ATOMIC_RELEASE);
	void (*hook)(void) = __atomic_load_n(&ms_after_dlclose, __ATOMIC_ACQUIRE);
	if (hook)
		hook();
	return rc;
}

/* The claims, put in their section by the linker (MS_DLSYM_CLAIM): in place from load, before any
 * constructor runs (other libraries' run before ours, and may already look driver functions up). */
extern const ms_dlsym_claim_fn __start_ms_dlsym_claims[] __attribute__((visibility("hidden")));
extern const ms_dlsym_claim_fn __stop_ms_dlsym_claims[] __attribute__((visibility("hidden")));

/* The answer of the first claim that takes NAME, else MS_DLSYM_PASS. */
static __attribute__((noinline)) void *claimed(void *handle, const char *name)
{
	for (const ms_dlsym_claim_fn *c = __start_ms_dlsym_claims; c < __stop_ms_dlsym_claims; c++) {
		void *p = (*c)(handle, name);
		if (p != MS_DLSYM_PASS)
			return p;
	}
	return MS_DLSYM_PASS;
}

/* dlsym(handle, ...) searches only that library, so a program (or the CUDA runtime) asking libcuda
 * for a driver function would bypass the preload.  Only names a claim takes, asked of a real
 * library handle, are changed; everything else is a tail call into the real dlsym, so it still
 * sees the caller's return address (RTLD_NEXT and RTLD_DEFAULT stay relative to the caller).  The
 * pseudo-handles are never answered from here: the real dlsym would search relative to the shim
 * instead, and a tool preloaded after it that looks up its next cuMemAlloc_v2 would get the shim's
 * wrapper, which calls the tool's own function: a loop.  They need no help either: RTLD_DEFAULT
 * already finds the preloaded wrappers first.  The pass-through must stay a tail call in every
 * build (-O0, sanitizers): the real dlsym reads its caller's address (the claims stay out of line,
 * so the pass-through is a few instructions). */
EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlsym(void *handle, const char *name)
{
	void *p = ms_tls_guard || handle == RTLD_NEXT || handle == RTLD_DEFAULT ? MS_DLSYM_PASS : claimed(handle, name);
	void *(*native)(void *, const char *) = __atomic_load_n(&ms_on_dlsym, __ATOMIC_ACQUIRE);
	if (MS_UNLIKELY(native != NULL) && p == MS_DLSYM_PASS && !ms_tls_guard && handle != RTLD_NEXT)
		p = native(handle, name);
	if (MS_LIKELY(p == MS_DLSYM_PASS))
		return ms_libc_dlsym()(handle, name);
	return p;
}
