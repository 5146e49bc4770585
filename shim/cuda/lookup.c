/* Finding the driver's functions.  The driver is never loaded by us: real functions come from the
 * library the program loaded (RTLD_NOLOAD, the loaded objects' own tables, or the pointers dlsym
 * and cuGetProcAddress hand out), through the shim's one resolver (intercept/resolve.c).  dlsym (claimed from
 * intercept/dl.c's wrapper) and cuGetProcAddress (wrapped here) hand out our wrappers for exactly
 * the driver functions we wrap. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include "core/ms.h"
#include "cuda/driver.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"

#define ABSENT ((void *)1) /* a helper the driver does not have */

/* Names by index: the wrapped functions, then the helpers (cuda/driver.h numbers them alike). */
static const char *const hook_name[H_COUNT] = {
#define MS_CUDA_HOOK(name) #name,
#define MS_CUDA_HELPER(name)
#include "cuda/driver.def"
#undef MS_CUDA_HELPER
#undef MS_CUDA_HOOK
#define MS_CUDA_HOOK(name)
#define MS_CUDA_HELPER(name) #name,
#include "cuda/driver.def"
#undef MS_CUDA_HELPER
#undef MS_CUDA_HOOK
};

/* Our wrapper for driver function IDX, found in our own symbol table at its first use: a table of
 * their addresses would be 31 symbol lookups at load in every process, CUDA or not. */
static void *hook_wrapper(int idx)
{
	static void *found[H_NHOOKS];
	void *w = __atomic_load_n(&found[idx], __ATOMIC_ACQUIRE);
	if (MS_LIKELY(w != NULL))
		return w;
	w = ms_elf_own_symbol(ms_elf_object_of((const void *)hook_wrapper), hook_name[idx]);
	__atomic_store_n(&found[idx], w, __ATOMIC_RELEASE);
	return w;
}

static void *real_fn[H_COUNT]; /* the driver's functions, filled as they become known */
static void *drv_handle;       /* the program's libcuda, once known */
static int all_resolved;       /* every slot looked up in drv_handle */

/* Index of the driver function named exactly NAME that the shim wraps, or -1. */
static __attribute__((noinline)) int hook_index(const char *name)
{
	if (!name || name[0] != 'c' || name[1] != 'u')
		return -1;
	for (int i = 0; i < H_NHOOKS; i++)
		if (strcmp(name, hook_name[i]) == 0)
			return i;
	return -1;
}

/* Keeps P as the real function IDX unless it is our own wrapper (that would loop). */
static void remember(int idx, void *p)
{
	if (!p || (idx < H_NHOOKS && p == hook_wrapper(idx)))
		return;
	void *none = NULL;
	__atomic_compare_exchange_n(&real_fn[idx], &none, p, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* Drops a reference taken here, through the real dlclose: the wrapper would count an unload. */
static void drop_handle(void *h)
{
	int (*real)(void *) = MS_REAL_LAZY(dlclose);
	if (real)
		real(h);
}

/* Holds a reference to the library containing ADDR (already loaded: RTLD_NOLOAD). */
static void learn_handle(const void *addr)
{
	Dl_info info;
	if (__atomic_load_n(&drv_handle, __ATOMIC_ACQUIRE) || !dladdr(addr, &info) || !info.dli_fname)
		return;
	void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	void *none = NULL;
	if (h && !__atomic_compare_exchange_n(&drv_handle, &none, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		drop_handle(h);
}

static void *driver_handle(void)
{
	void *h = __atomic_load_n(&drv_handle, __ATOMIC_ACQUIRE);
	if (h)
		return h;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *none = NULL;
	if (h && !__atomic_compare_exchange_n(&drv_handle, &none, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		drop_handle(h);
		h = none;
	}
	return h;
}

/* NAME in the driver's own table: a glibc handle is its link_map, and a miss sets no dlerror. */
static void *driver_symbol(void *h, const char *name)
{
	return ms_elf_own_symbol((const struct link_map *)h, name);
}

/* The program's driver by its usual name, else whichever loaded object defines the function, as the
 * dynamic linker would bind it (never a failing dlsym: its error would be the program's dlerror). */
static void *lookup(int idx)
{
	static struct ms_scoped anywhere[H_COUNT];
	void *h = driver_handle();
	void *p = h ? driver_symbol(h, hook_name[idx]) : NULL;
	if (!p || (idx < H_NHOOKS && p == hook_wrapper(idx))) {
		__atomic_store_n(&anywhere[idx].name, hook_name[idx], __ATOMIC_RELAXED);
		p = ms_resolve_scoped(&anywhere[idx], NULL, NULL);
	}
	return p;
}

/* Resolution runs with the guard up so the loader's own allocations are not counted. */
void *ms_cuda_real(int idx)
{
	void *p = __atomic_load_n(&real_fn[idx], __ATOMIC_ACQUIRE);
	if (MS_LIKELY(p != NULL))
		return p == ABSENT ? NULL : p;
	int saved = errno;
	ms_tls_guard++;
	remember(idx, lookup(idx));
	ms_tls_guard--;
	errno = saved;
	p = __atomic_load_n(&real_fn[idx], __ATOMIC_ACQUIRE);
	return p == ABSENT ? NULL : p;
}

void *ms_cuda_real_optional(int idx)
{
	void *p = ms_cuda_real(idx);
	if (!p && __atomic_load_n(&drv_handle, __ATOMIC_ACQUIRE))
		remember(idx, ABSENT);
	return p;
}

/* ---- stream capture: our readings never count as the program's calls ---- */

typedef CUresult (*exchange_fn)(CUstreamCaptureMode *);

int ms_cuda_relax_capture(void)
{
	exchange_fn swap = (exchange_fn)ms_cuda_real_optional(H_cuThreadExchangeStreamCaptureMode);
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (!swap)
		return MS_CAPTURE_NONE;
	return swap(&mode) == CUDA_SUCCESS ? (int)mode : MS_CAPTURE_FAILED;
}

void ms_cuda_restore_capture(int mode)
{
	exchange_fn swap = (exchange_fn)ms_cuda_real_optional(H_cuThreadExchangeStreamCaptureMode);
	CUstreamCaptureMode back = (CUstreamCaptureMode)mode;
	if (swap && mode >= 0)
		swap(&back);
}

/* Looks every slot up in the library that holds ADDR (the real cuGetProcAddress). */
static void resolve_all(const void *addr)
{
	if (__atomic_load_n(&all_resolved, __ATOMIC_ACQUIRE))
		return;
	int saved = errno;
	ms_tls_guard++;
	learn_handle(addr);
	void *h = __atomic_load_n(&drv_handle, __ATOMIC_ACQUIRE);
	if (h) {
		for (int i = 0; i < H_COUNT; i++)
			remember(i, driver_symbol(h, hook_name[i]));
		__atomic_store_n(&all_resolved, 1, __ATOMIC_RELEASE);
	}
	ms_tls_guard--;
	errno = saved;
}

/* dlsym(HANDLE, NAME) for the wrapped driver function IDX: looks the real one up, remembers it, and
 * returns the shim's wrapper when the library has the function (NULL, like dlsym, when not).
 * Resolves every slot now, from the library that had NAME: later wrapper calls then never need
 * the loader (and its lock).  The wrapper stands in for P only when it calls exactly P: a function
 * of the same name in another library (a second tool's wrapper, a stub) is handed out as it is. */
static __attribute__((noinline)) void *driver_dlsym(void *handle, const char *name, int idx)
{
	void *p = ms_real_dlsym(handle, name);
	if (!p || p == hook_wrapper(idx))
		return p;
	int saved = errno;
	ms_tls_guard++;
	if (!__atomic_load_n(&real_fn[idx], __ATOMIC_ACQUIRE))
		remember(idx, lookup(idx)); /* the driver's own, where it is loaded */
	remember(idx, p);
	ms_tls_guard--;
	errno = saved;
	if (__atomic_load_n(&real_fn[idx], __ATOMIC_ACQUIRE) != p)
		return p;
	resolve_all(p);
	return hook_wrapper(idx);
}

/* intercept/dl.c's dlsym asks this for a real library handle: the exact names of driver functions
 * we wrap get our wrapper (driver_dlsym), every other name passes through. */
static void *claim_dlsym(void *handle, const char *name)
{
	int idx = hook_index(name);
	return idx < 0 ? MS_DLSYM_PASS : driver_dlsym(handle, name, idx);
}
MS_DLSYM_CLAIM(claim_dlsym);

/* Our wrapper when P is exactly a real driver function we wrap, else P. */
static void *substitute(void *p)
{
	for (int i = 0; i < H_NHOOKS; i++)
		if (__atomic_load_n(&real_fn[i], __ATOMIC_ACQUIRE) == p)
			return hook_wrapper(i);
	return p;
}

/* ---- cuGetProcAddress: the real driver answers, we only swap exact matches ---- */

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *symbolStatus)
{
	typedef CUresult (*fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
	fn real = REAL(cuGetProcAddress_v2, fn);
	if (!real)
		return NO_DRIVER;
	CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS && pfn && *pfn && ms_tls_guard == 0) {
		resolve_all((void *)real);
		*pfn = substitute(*pfn);
	}
	return r;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	typedef CUresult (*fn)(const char *, void **, int, cuuint64_t);
	fn real = REAL(cuGetProcAddress, fn);
	if (!real)
		return NO_DRIVER;
	CUresult r = real(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS && pfn && *pfn && ms_tls_guard == 0) {
		resolve_all((void *)real);
		*pfn = substitute(*pfn);
	}
	return r;
}
