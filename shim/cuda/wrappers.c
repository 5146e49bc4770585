/* CUDA driver wrappers: device, managed and pinned memory per device, VMM reference counting,
 * failed allocations, and the cuGetProcAddress substitution.  The driver is never loaded by us:
 * real functions come from the library the program loaded (RTLD_NOLOAD, RTLD_NEXT, or the
 * pointers dlsym and cuGetProcAddress hand out). */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "core/counters.h"
#include "cuda/min.h"
#include "cuda/table.h"
#include "intercept/hooks.h"
#include "core/json.h"
#include "core/ms.h"
#include "core/stages.h"

#define ABSENT ((void *)1) /* a helper the driver does not have */

/* Every driver function we wrap (exported) followed by helpers we only call. */
enum {
#define MS_CUDA_HOOK(name) H_##name,
#include "cuda/hooks.def"
#undef MS_CUDA_HOOK
	H_NHOOKS,
	H_cuCtxGetDevice = H_NHOOKS,
	H_cuStreamGetDevice,
	H_cuMemPoolGetAttribute,
	H_COUNT
};

static const char *const hook_name[H_COUNT] = {
#define MS_CUDA_HOOK(name) #name,
#include "cuda/hooks.def"
#undef MS_CUDA_HOOK
	"cuCtxGetDevice", "cuStreamGetDevice", "cuMemPoolGetAttribute",
};

static void *const hook_wrapper[H_NHOOKS] = {
#define MS_CUDA_HOOK(name) (void *)name,
#include "cuda/hooks.def"
#undef MS_CUDA_HOOK
};

static void *real_fn[H_COUNT];     /* the driver's functions, filled as they become known */
static void *drv_handle;           /* the program's libcuda, once known */
static int all_resolved;           /* every slot looked up in drv_handle */
static uint64_t untracked_allocs;  /* successful allocations the full table could not hold */
static int64_t untracked_bytes;
static int full_warned;

static int pools_seen;        /* a pool was created, handed out or used: boundaries sample them */
static pid_t pools_pid;       /* ... in this process (a forked child must not query the parent's) */

static void note_async_device(int dev);
static void wait_for_sampling(void);

static void mark_pools_seen(void)
{
	if (__atomic_load_n(&pools_seen, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&pools_pid, (pid_t)syscall(SYS_getpid), __ATOMIC_RELAXED);
	__atomic_store_n(&pools_seen, 1, __ATOMIC_RELEASE);
}

MS_CTAB_DEFINE(ptr_tab, 16);    /* device, managed and host pointers (2 MiB of zero pages) */
MS_CTAB_DEFINE(handle_tab, 14); /* cuMemCreate handles with their reference counts */
MS_CTAB_DEFINE(map_tab, 14);    /* cuMemMap address -> handle */
MS_CTAB_DEFINE(pool_tab, 8);    /* memory pool -> device and kind */

/* ---- finding the driver's functions ---- */

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
	if (!p || (idx < H_NHOOKS && p == hook_wrapper[idx]))
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

static void *lookup(int idx)
{
	void *h = driver_handle();
	void *p = h ? ms_real_dlsym(h, hook_name[idx]) : NULL;
	if (!p || (idx < H_NHOOKS && p == hook_wrapper[idx]))
		p = ms_real_dlsym(RTLD_NEXT, hook_name[idx]);
	return p;
}

/* The real function IDX, or NULL when no driver is loaded.  Resolution runs with the guard up so
 * the loader's own allocations are not counted. */
static void *resolve(int idx)
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

/* A helper the driver may lack: looked up once, then remembered as absent. */
static void *resolve_helper(int idx)
{
	void *p = resolve(idx);
	if (!p && __atomic_load_n(&drv_handle, __ATOMIC_ACQUIRE))
		remember(idx, ABSENT);
	return p;
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
			remember(i, ms_real_dlsym(h, hook_name[i]));
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
	if (!p || p == hook_wrapper[idx])
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
	return hook_wrapper[idx];
}

/* dlsym(handle, ...) searches only that library, so a program (or the CUDA runtime) asking libcuda
 * for a driver function would bypass the preload.  Only the exact names of driver functions we
 * wrap, asked of a real library handle, are changed; everything else is a tail call into the real
 * dlsym, so it still sees the caller's return address (RTLD_NEXT and RTLD_DEFAULT stay relative to
 * the caller).  The pseudo-handles are never answered from here: the real dlsym would search
 * relative to the shim instead, and a tool preloaded after it that looks up its next cuMemAlloc_v2
 * would get the shim's wrapper, which calls the tool's own function: a loop.  They need no help
 * either: RTLD_DEFAULT already finds the preloaded wrappers first.  The pass-through must stay a
 * tail call in every build (-O0, sanitizers): the real dlsym reads its caller's address (the
 * helpers stay out of line, so the pass-through is a few instructions). */
EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlsym(void *handle, const char *name)
{
	int idx = ms_tls_guard || handle == RTLD_NEXT || handle == RTLD_DEFAULT ? -1 : hook_index(name);
	if (MS_LIKELY(idx < 0))
		return ms_libc_dlsym()(handle, name);
	return driver_dlsym(handle, name, idx);
}

/* Our wrapper when P is exactly a real driver function we wrap, else P. */
static void *substitute(void *p)
{
	for (int i = 0; i < H_NHOOKS; i++)
		if (__atomic_load_n(&real_fn[i], __ATOMIC_ACQUIRE) == p)
			return hook_wrapper[i];
	return p;
}

/* ---- bookkeeping ---- */

/* Wrapped driver calls this thread is inside.  A driver (or a layer under us) may implement one
 * entry point by calling another exported one, which then resolves to our wrapper: only the
 * outermost call counts.  Not ms_tls_guard: host memory the driver allocates and frees inside a
 * call is the program's, and the malloc hooks must keep counting it. */
static __thread int driver_depth MS_TLS;

/* Runs CALL (the real driver function) with nested wrapped calls passing straight through. */
#define OUTERMOST(call) do { driver_depth++; call; driver_depth--; } while (0)

static inline int tracking(void)
{
	return ms_tls_guard == 0 && driver_depth == 0 && ms_counting;
}

static int current_device(void)
{
	CUresult (*get)(CUdevice *) = (CUresult (*)(CUdevice *))resolve(H_cuCtxGetDevice);
	CUdevice dev = -1;
	int saved = errno;
	if (!get || get(&dev) != CUDA_SUCCESS)
		dev = -1;
	errno = saved;
	return dev;
}

/* The device a stream belongs to (its context's), else the current one. */
static int stream_device(CUstream stream)
{
	CUresult (*get)(CUstream, CUdevice *) = (CUresult (*)(CUstream, CUdevice *))resolve_helper(H_cuStreamGetDevice);
	CUdevice dev = -1;
	int saved = errno;
	if (!get || get(stream, &dev) != CUDA_SUCCESS)
		dev = -1;
	errno = saved;
	return dev >= 0 ? dev : current_device();
}

/* Physical memory from cuMemCreate is device memory when it has a device, else pinned host memory. */
static void count(const struct ms_centry *e, int sign)
{
	int64_t bytes = sign * e->size;
	if (e->kind == MS_CK_DEVICE || (e->kind == MS_CK_VMM && e->device >= 0))
		ms_gpu_add(e->device, bytes);
	else if (e->kind == MS_CK_MANAGED)
		ms_gpu_side_add(MS_MANAGED, bytes);
	else /* host, registered, VMM on the host */
		ms_gpu_side_add(MS_PINNED, bytes);
}

static void note_untracked(int64_t bytes)
{
	__atomic_add_fetch(&untracked_allocs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&untracked_bytes, bytes, __ATOMIC_RELAXED);
	if (!__atomic_exchange_n(&full_warned, 1, __ATOMIC_RELAXED))
		ms_warn("CUDA allocation table full: further allocations are not counted");
}

/* A successful allocation of KIND at KEY: into TAB, then counted. */
static void note_alloc(struct ms_ctab *tab, uint64_t key, int64_t size, int device, unsigned kind)
{
	struct ms_centry e = { .key = key, .size = size, .device = (int16_t)device, .kind = (uint16_t)kind, .refs = 1 };
	if (ms_ctab_insert(tab, &e) < 0) {
		note_untracked(size);
		return;
	}
	count(&e, 1);
}

static void note_failure(int device, int64_t bytes, CUresult r)
{
	ms_gpu_mark_used();
	ms_stages_note_gpu_failure(device, bytes, (int)r, ms_elapsed());
}

/* After an allocation call: counts it or records its failure; errno stays as the driver left it. */
static void after_alloc(CUresult r, struct ms_ctab *tab, uint64_t key, int64_t size, int device, unsigned kind)
{
	int saved = errno;
	if (r == CUDA_SUCCESS)
		note_alloc(tab, key, size, device, kind);
	else if (kind != MS_CK_REGISTERED) /* registering allocates nothing */
		note_failure(kind == MS_CK_DEVICE || kind == MS_CK_VMM ? device : -1, size, r);
	errno = saved;
}

/* Frees are looked up before the real call (another thread may get the same address right after
 * it) and put back if the driver refuses. */
static int before_free(struct ms_ctab *tab, uint64_t key, unsigned kinds, struct ms_centry *e)
{
	return tracking() && ms_ctab_take(tab, key, kinds, e) == 0;
}

static void after_free(CUresult r, int taken, struct ms_ctab *tab, const struct ms_centry *e)
{
	if (!taken)
		return;
	int saved = errno;
	if (r == CUDA_SUCCESS || ms_ctab_insert(tab, e) < 0) /* refused, but cannot be kept: forgotten */
		count(e, -1);
	errno = saved;
}

#define REAL(name, type) ((type)resolve(H_##name))
#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED

/* ---- device memory ---- */

static CUresult alloc_device(CUresult (*real)(CUdeviceptr *, size_t), CUdeviceptr *dptr, size_t size)
{
	if (!tracking())
		return real(dptr, size);
	int dev = current_device();
	CUresult r;
	OUTERMOST(r = real(dptr, size));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? *dptr : 0, (int64_t)size, dev, MS_CK_DEVICE);
	return r;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	CUresult (*real)(CUdeviceptr *, size_t) = REAL(cuMemAlloc_v2, CUresult (*)(CUdeviceptr *, size_t));
	return real ? alloc_device(real, dptr, bytesize) : NO_DRIVER;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height, unsigned int elem)
{
	typedef CUresult (*fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
	fn real = REAL(cuMemAllocPitch_v2, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(dptr, pPitch, width, height, elem);
	int dev = current_device();
	CUresult r;
	OUTERMOST(r = real(dptr, pPitch, width, height, elem));
	int ok = r == CUDA_SUCCESS;
	after_alloc(r, &ptr_tab, ok ? *dptr : 0, ok ? (int64_t)(*pPitch * height) : (int64_t)(width * height),
		    dev, MS_CK_DEVICE);
	return r;
}

static CUresult free_device(CUresult (*real)(CUdeviceptr), CUdeviceptr dptr)
{
	struct ms_centry e;
	int taken = before_free(&ptr_tab, dptr, MS_CK_DEVICE | MS_CK_MANAGED | MS_CK_HOST, &e);
	CUresult r;
	OUTERMOST(r = real(dptr));
	after_free(r, taken, &ptr_tab, &e);
	return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult (*real)(CUdeviceptr) = REAL(cuMemFree_v2, CUresult (*)(CUdeviceptr));
	return real ? free_device(real, dptr) : NO_DRIVER;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	typedef CUresult (*fn)(CUdeviceptr *, size_t, unsigned int);
	fn real = REAL(cuMemAllocManaged, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(dptr, bytesize, flags);
	int dev = current_device();
	CUresult r;
	OUTERMOST(r = real(dptr, bytesize, flags));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? *dptr : 0, (int64_t)bytesize, dev, MS_CK_MANAGED);
	return r;
}

/* ---- stream-ordered allocation ---- */

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

static CUresult alloc_async(alloc_async_fn real, CUdeviceptr *dptr, size_t size, CUstream stream)
{
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(dptr, size, stream);
	int dev = stream_device(stream);
	CUresult r;
	OUTERMOST(r = real(dptr, size, stream));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? *dptr : 0, (int64_t)size, dev, MS_CK_DEVICE);
	note_async_device(dev);
	return r;
}

/* Pools we saw created or handed out carry their device and kind; others: the stream's device. */
static CUresult alloc_pool(alloc_pool_fn real, CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream)
{
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(dptr, size, pool, stream);
	struct ms_centry *p = ms_ctab_find(&pool_tab, (uint64_t)(uintptr_t)pool);
	int dev = p ? p->device : stream_device(stream);
	unsigned kind = p ? p->kind : MS_CK_DEVICE;
	CUresult r;
	OUTERMOST(r = real(dptr, size, pool, stream));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? *dptr : 0, (int64_t)size, dev, kind);
	return r;
}

static CUresult free_async(free_async_fn real, CUdeviceptr dptr, CUstream stream)
{
	if (!real)
		return NO_DRIVER;
	struct ms_centry e;
	int taken = before_free(&ptr_tab, dptr, MS_CK_DEVICE | MS_CK_MANAGED | MS_CK_HOST, &e);
	CUresult r;
	OUTERMOST(r = real(dptr, stream));
	after_free(r, taken, &ptr_tab, &e);
	return r;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(REAL(cuMemAllocAsync, alloc_async_fn), dptr, bytesize, hStream);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(REAL(cuMemAllocAsync_ptsz, alloc_async_fn), dptr, bytesize, hStream);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	return alloc_pool(REAL(cuMemAllocFromPoolAsync, alloc_pool_fn), dptr, bytesize, pool, hStream);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	return alloc_pool(REAL(cuMemAllocFromPoolAsync_ptsz, alloc_pool_fn), dptr, bytesize, pool, hStream);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(REAL(cuMemFreeAsync, free_async_fn), dptr, hStream);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(REAL(cuMemFreeAsync_ptsz, free_async_fn), dptr, hStream);
}

/* ---- memory pools: which device (and kind) their allocations are ---- */

static unsigned location_kind(const CUmemLocation *loc, CUmemAllocationType type)
{
	if (type == CU_MEM_ALLOCATION_TYPE_MANAGED)
		return MS_CK_MANAGED;
	return loc->type == CU_MEM_LOCATION_TYPE_DEVICE ? MS_CK_DEVICE : MS_CK_HOST;
}

static void note_pool(CUmemoryPool pool, int device, unsigned kind)
{
	uint64_t key = (uint64_t)(uintptr_t)pool;
	if (ms_ctab_find(&pool_tab, key))
		return;
	struct ms_centry e = { .key = key, .device = (int16_t)device, .kind = (uint16_t)kind, .refs = 1 };
	if (ms_ctab_insert(&pool_tab, &e) == 0)
		mark_pools_seen();
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	typedef CUresult (*fn)(CUmemoryPool *, const CUmemPoolProps *);
	fn real = REAL(cuMemPoolCreate, fn);
	if (!real)
		return NO_DRIVER;
	CUresult r;
	OUTERMOST(r = real(pool, props));
	if (r == CUDA_SUCCESS && tracking()) {
		int saved = errno;
		unsigned kind = location_kind(&props->location, props->allocType);
		note_pool(*pool, kind == MS_CK_DEVICE ? props->location.id : -1, kind);
		errno = saved;
	}
	return r;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	typedef CUresult (*fn)(CUmemoryPool);
	fn real = REAL(cuMemPoolDestroy, fn);
	if (!real)
		return NO_DRIVER;
	struct ms_centry e;
	int taken = ms_ctab_take(&pool_tab, (uint64_t)(uintptr_t)pool, MS_CK_DEVICE | MS_CK_MANAGED | MS_CK_HOST, &e) == 0;
	if (taken)
		wait_for_sampling();
	CUresult r;
	OUTERMOST(r = real(pool));
	if (r != CUDA_SUCCESS && taken) {
		int saved = errno;
		ms_ctab_insert(&pool_tab, &e);
		errno = saved;
	}
	return r;
}

static CUresult device_pool(CUresult (*real)(CUmemoryPool *, CUdevice), CUmemoryPool *pool, CUdevice dev)
{
	if (!real)
		return NO_DRIVER;
	CUresult r;
	OUTERMOST(r = real(pool, dev));
	if (r == CUDA_SUCCESS && tracking()) {
		int saved = errno;
		note_pool(*pool, dev, MS_CK_DEVICE);
		errno = saved;
	}
	return r;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	return device_pool(REAL(cuDeviceGetDefaultMemPool, CUresult (*)(CUmemoryPool *, CUdevice)), pool_out, dev);
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	return device_pool(REAL(cuDeviceGetMemPool, CUresult (*)(CUmemoryPool *, CUdevice)), pool, dev);
}

/* ---- virtual memory management: physical memory lives while any reference does (the handle
 * from cuMemCreate, each cuMemRetainAllocationHandle, each mapping) ---- */

/* Drops one reference of HANDLE before the driver sees it.  Returns 1 when it was the last (the
 * entry is then in GONE), 0 when others remain, -1 for an unknown handle. */
static int handle_unref(uint64_t handle, struct ms_centry *gone)
{
	struct ms_centry *e = ms_ctab_find(&handle_tab, handle);
	if (!e)
		return -1;
	if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return 0;
	return ms_ctab_take(&handle_tab, handle, MS_CK_VMM, gone) == 0 ? 1 : 0;
}

/* Undoes handle_unref after the driver refused. */
static void handle_reref(uint64_t handle, int state, struct ms_centry *gone)
{
	if (state == 1) {
		gone->refs = 1;
		if (ms_ctab_insert(&handle_tab, gone) < 0)
			count(gone, -1);
	} else if (state == 0) {
		struct ms_centry *e = ms_ctab_find(&handle_tab, handle);
		if (e)
			__atomic_add_fetch(&e->refs, 1, __ATOMIC_ACQ_REL);
	}
}

static void handle_ref(uint64_t handle)
{
	struct ms_centry *e = ms_ctab_find(&handle_tab, handle);
	if (e)
		__atomic_add_fetch(&e->refs, 1, __ATOMIC_ACQ_REL);
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			    unsigned long long flags)
{
	typedef CUresult (*fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	fn real = REAL(cuMemCreate, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking() || !prop)
		return real(handle, size, prop, flags);
	int dev = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
	CUresult r;
	OUTERMOST(r = real(handle, size, prop, flags));
	after_alloc(r, &handle_tab, r == CUDA_SUCCESS ? *handle : 0, (int64_t)size, dev, MS_CK_VMM);
	return r;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	typedef CUresult (*fn)(CUmemGenericAllocationHandle);
	fn real = REAL(cuMemRelease, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(handle);
	struct ms_centry gone;
	int state = handle_unref(handle, &gone);
	CUresult r;
	OUTERMOST(r = real(handle));
	int saved = errno;
	if (r != CUDA_SUCCESS)
		handle_reref(handle, state, &gone);
	else if (state == 1)
		count(&gone, -1);
	errno = saved;
	return r;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	typedef CUresult (*fn)(CUmemGenericAllocationHandle *, void *);
	fn real = REAL(cuMemRetainAllocationHandle, fn);
	if (!real)
		return NO_DRIVER;
	CUresult r;
	OUTERMOST(r = real(handle, addr));
	if (r == CUDA_SUCCESS && tracking())
		handle_ref(*handle);
	return r;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			 unsigned long long flags)
{
	typedef CUresult (*fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	fn real = REAL(cuMemMap, fn);
	if (!real)
		return NO_DRIVER;
	CUresult r;
	OUTERMOST(r = real(ptr, size, offset, handle, flags));
	if (r != CUDA_SUCCESS || !tracking() || !ms_ctab_find(&handle_tab, handle))
		return r;
	int saved = errno;
	struct ms_centry m = { .key = ptr, .size = (int64_t)size, .aux = handle, .kind = MS_CK_MAPPING, .refs = 1 };
	if (ms_ctab_insert(&map_tab, &m) == 0)
		handle_ref(handle);
	errno = saved;
	return r;
}

#define UNMAP_BATCH 64

struct unmapped {
	struct ms_centry map, gone;
	int state;
};

/* Takes the mappings that tile [*AT, END) in order, dropping their handle references; stops at a
 * gap or after UNMAP_BATCH of them.  Returns how many. */
static int take_mappings(uint64_t *at, uint64_t end, struct unmapped *out)
{
	int n = 0;
	while (*at < end && n < UNMAP_BATCH && ms_ctab_take(&map_tab, *at, MS_CK_MAPPING, &out[n].map) == 0) {
		out[n].state = handle_unref(out[n].map.aux, &out[n].gone);
		*at += out[n].map.size > 0 ? (uint64_t)out[n].map.size : end - *at;
		n++;
	}
	return n;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	typedef CUresult (*fn)(CUdeviceptr, size_t);
	fn real = REAL(cuMemUnmap, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(ptr, size);
	struct unmapped batch[UNMAP_BATCH];
	uint64_t at = ptr, end = ptr + size;
	int n = take_mappings(&at, end, batch);
	CUresult r;
	OUTERMOST(r = real(ptr, size));
	int saved = errno;
	for (int i = n - 1; i >= 0; i--) {
		if (r != CUDA_SUCCESS) {
			handle_reref(batch[i].map.aux, batch[i].state, &batch[i].gone);
			ms_ctab_insert(&map_tab, &batch[i].map);
		} else if (batch[i].state == 1) {
			count(&batch[i].gone, -1);
		}
	}
	while (r == CUDA_SUCCESS && n == UNMAP_BATCH) { /* more mappings than one batch holds */
		n = take_mappings(&at, end, batch);
		for (int i = 0; i < n; i++)
			if (batch[i].state == 1)
				count(&batch[i].gone, -1);
	}
	errno = saved;
	return r;
}

/* ---- pinned host memory ---- */

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	typedef CUresult (*fn)(void **, size_t);
	fn real = REAL(cuMemAllocHost_v2, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(pp, bytesize);
	CUresult r;
	OUTERMOST(r = real(pp, bytesize));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, (int64_t)bytesize, -1, MS_CK_HOST);
	return r;
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
	typedef CUresult (*fn)(void **, size_t, unsigned int);
	fn real = REAL(cuMemHostAlloc, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(pp, bytesize, flags);
	CUresult r;
	OUTERMOST(r = real(pp, bytesize, flags));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, (int64_t)bytesize, -1, MS_CK_HOST);
	return r;
}

/* Host-pointer releases (pinned memory, registrations): one path, the kind tells them apart. */
static CUresult release_host(CUresult (*real)(void *), void *p, unsigned kinds)
{
	if (!real)
		return NO_DRIVER;
	struct ms_centry e;
	int taken = before_free(&ptr_tab, (uint64_t)(uintptr_t)p, kinds, &e);
	CUresult r;
	OUTERMOST(r = real(p));
	after_free(r, taken, &ptr_tab, &e);
	return r;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	return release_host(REAL(cuMemFreeHost, CUresult (*)(void *)), p, MS_CK_HOST);
}

static CUresult host_register(CUresult (*real)(void *, size_t, unsigned int), void *p, size_t size, unsigned int flags)
{
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(p, size, flags);
	CUresult r;
	OUTERMOST(r = real(p, size, flags));
	after_alloc(r, &ptr_tab, (uint64_t)(uintptr_t)p, (int64_t)size, -1, MS_CK_REGISTERED);
	return r;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(REAL(cuMemHostRegister_v2, CUresult (*)(void *, size_t, unsigned int)), p, bytesize, Flags);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
	return release_host(REAL(cuMemHostUnregister, CUresult (*)(void *)), p, MS_CK_REGISTERED);
}

/* ---- legacy entry points (ABI before CUDA 3.2: 32-bit sizes and device pointers) ---- */

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	typedef CUresult (*fn)(CUdeviceptr_v1 *, unsigned int);
	fn real = REAL(cuMemAlloc, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(dptr, bytesize);
	int dev = current_device();
	CUresult r;
	OUTERMOST(r = real(dptr, bytesize));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? *dptr : 0, bytesize, dev, MS_CK_DEVICE);
	return r;
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int width, unsigned int height,
				unsigned int elem)
{
	typedef CUresult (*fn)(CUdeviceptr_v1 *, unsigned int *, unsigned int, unsigned int, unsigned int);
	fn real = REAL(cuMemAllocPitch, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(dptr, pPitch, width, height, elem);
	int dev = current_device();
	CUresult r;
	OUTERMOST(r = real(dptr, pPitch, width, height, elem));
	int ok = r == CUDA_SUCCESS;
	after_alloc(r, &ptr_tab, ok ? *dptr : 0, (int64_t)(ok ? *pPitch : width) * height, dev, MS_CK_DEVICE);
	return r;
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	typedef CUresult (*fn)(CUdeviceptr_v1);
	fn real = REAL(cuMemFree, fn);
	if (!real)
		return NO_DRIVER;
	struct ms_centry e;
	int taken = before_free(&ptr_tab, dptr, MS_CK_DEVICE | MS_CK_MANAGED, &e);
	CUresult r;
	OUTERMOST(r = real(dptr));
	after_free(r, taken, &ptr_tab, &e);
	return r;
}

EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
	typedef CUresult (*fn)(void **, unsigned int);
	fn real = REAL(cuMemAllocHost, fn);
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(pp, bytesize);
	CUresult r;
	OUTERMOST(r = real(pp, bytesize));
	after_alloc(r, &ptr_tab, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, bytesize, -1, MS_CK_HOST);
	return r;
}

EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(REAL(cuMemHostRegister, CUresult (*)(void *, size_t, unsigned int)), p, bytesize, Flags);
}

/* ---- entry point lookup: the real driver answers, we only swap exact matches ---- */

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

/* ---- memory pools' reserved memory at stage boundaries (what stream-ordered allocation really
 * holds on the device), and the JSON the report writer asks for ---- */

#define MAX_SAMPLED_POOLS 8
#define SAMPLE_WAIT_SPINS 100000

struct pool_sample {
	uint64_t pool;
	int device;
	int64_t reserved, high; /* at the latest boundary */
	int64_t begin[MS_MAX_STAGES], end[MS_MAX_STAGES], end_high[MS_MAX_STAGES];
	unsigned char have_begin[MS_MAX_STAGES], have_end[MS_MAX_STAGES];
};

static struct pool_sample samples[MAX_SAMPLED_POOLS];
static int nsamples;
static int sampling;          /* boundaries querying pools now: cuMemPoolDestroy waits for them */
static uint32_t async_devices; /* devices whose current pool served cuMemAllocAsync */

static void note_async_device(int dev)
{
	uint32_t bit = dev >= 0 && dev < 32 ? 1u << dev : 0;
	if (bit && !(__atomic_load_n(&async_devices, __ATOMIC_RELAXED) & bit)) {
		__atomic_fetch_or(&async_devices, bit, __ATOMIC_RELAXED);
		mark_pools_seen();
	}
}

/* The sample slot of POOL, made on first sight; NULL when all are taken. */
static struct pool_sample *sample_of(uint64_t pool, int device)
{
	int n = __atomic_load_n(&nsamples, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		if (samples[i].pool == pool)
			return &samples[i];
	if (n == MAX_SAMPLED_POOLS)
		return NULL;
	samples[n].pool = pool; /* boundaries are rare: a lost race only skips one sample */
	samples[n].device = device;
	__atomic_store_n(&nsamples, n + 1, __ATOMIC_RELEASE);
	return &samples[n];
}

struct boundary {
	int stage, end;
	CUresult (*get)(CUmemoryPool, CUmemPool_attribute, void *);
};

static void sample_pool(const struct ms_centry *e, void *arg)
{
	const struct boundary *b = arg;
	cuuint64_t cur = 0, high = 0;
	if (e->kind != MS_CK_DEVICE || !ms_ctab_find(&pool_tab, e->key)) /* destroyed meanwhile */
		return;
	CUmemoryPool pool = (CUmemoryPool)(uintptr_t)e->key;
	if (b->get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &cur) != CUDA_SUCCESS ||
	    b->get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high) != CUDA_SUCCESS)
		return;
	struct pool_sample *s = sample_of(e->key, e->device);
	if (!s)
		return;
	s->reserved = (int64_t)cur;
	s->high = (int64_t)high;
	if (b->end) {
		s->end[b->stage] = (int64_t)cur;
		s->end_high[b->stage] = (int64_t)high;
		s->have_end[b->stage] = s->have_begin[b->stage];
	} else {
		s->begin[b->stage] = (int64_t)cur;
		s->have_begin[b->stage] = 1;
		s->have_end[b->stage] = 0;
	}
}

/* The current pool of every device that allocated stream-ordered memory joins the pool table. */
static void add_async_pools(void)
{
	uint32_t devs = __atomic_load_n(&async_devices, __ATOMIC_RELAXED);
	CUresult (*get)(CUmemoryPool *, CUdevice) = (CUresult (*)(CUmemoryPool *, CUdevice))resolve(H_cuDeviceGetMemPool);
	for (int d = 0; devs && get && d < 32; d++) {
		CUmemoryPool pool;
		if ((devs & (1u << d)) && get(&pool, d) == CUDA_SUCCESS)
			note_pool(pool, d, MS_CK_DEVICE);
	}
}

/* Called by the stage code after stage STAGE opened (END 0) or closed (END 1), outside the engine
 * lock, never from a signal handler or at exit (the driver may be gone by then). */
void ms_cuda_stage_boundary(int stage, int end);
void ms_cuda_stage_boundary(int stage, int end)
{
	if (stage < 0 || stage >= MS_MAX_STAGES || !__atomic_load_n(&pools_seen, __ATOMIC_ACQUIRE) ||
	    (pid_t)syscall(SYS_getpid) != __atomic_load_n(&pools_pid, __ATOMIC_RELAXED))
		return;
	int depth = __atomic_load_n(&ms_st.stage[stage].depth, __ATOMIC_RELAXED);
	if (end ? depth != 0 : depth != 1) /* only the outermost call of a recursive stage */
		return;
	int saved = errno;
	ms_tls_guard++;
	struct boundary b = { stage, end, (CUresult (*)(CUmemoryPool, CUmemPool_attribute, void *))resolve(H_cuMemPoolGetAttribute) };
	if (b.get) {
		add_async_pools();
		__atomic_add_fetch(&sampling, 1, __ATOMIC_SEQ_CST); /* ordered against destroy's removal */
		ms_ctab_each(&pool_tab, sample_pool, &b);
		__atomic_sub_fetch(&sampling, 1, __ATOMIC_SEQ_CST);
	}
	ms_tls_guard--;
	errno = saved;
}

/* cuMemPoolDestroy: a boundary still querying pools finishes first (bounded: a forked child may
 * have inherited a count that never drops). */
static void wait_for_sampling(void)
{
	for (int i = 0; i < SAMPLE_WAIT_SPINS && __atomic_load_n(&sampling, __ATOMIC_SEQ_CST); i++)
		sched_yield();
}

static void write_pool(struct ms_json *w, const struct pool_sample *s, int index)
{
	ms_json_object(w, NULL);
	ms_json_int(w, "pool", index);
	ms_json_int(w, "device", s->device);
	ms_json_int(w, "reserved", s->reserved);
	ms_json_int(w, "reserved_high", s->high);
	ms_json_array(w, "stages");
	for (int st = 0; st < MS_MAX_STAGES; st++) {
		if (!s->have_end[st] || !ms_st.stage[st].used)
			continue;
		ms_json_object(w, NULL);
		ms_json_string(w, "stage", ms_st.stage[st].name);
		ms_json_int(w, "reserved_begin", s->begin[st]);
		ms_json_int(w, "reserved_end", s->end[st]);
		ms_json_int(w, "reserved_high", s->end_high[st]);
		ms_json_end_object(w);
	}
	ms_json_end_array(w);
	ms_json_end_object(w);
}

/* Called by the report writer (only when the GPU was used); reads stored values only, so it is
 * safe at exit and in a signal handler. */
void ms_cuda_report(struct ms_json *w);
void ms_cuda_report(struct ms_json *w)
{
	int n = __atomic_load_n(&nsamples, __ATOMIC_ACQUIRE);
	if (n > 0) {
		ms_json_array(w, "gpu_pools");
		for (int i = 0; i < n; i++)
			write_pool(w, &samples[i], i);
		ms_json_end_array(w);
	}
	uint64_t lost = __atomic_load_n(&untracked_allocs, __ATOMIC_RELAXED);
	if (lost) {
		ms_json_uint(w, "gpu_untracked_allocs", lost);
		ms_json_int(w, "gpu_untracked_bytes", __atomic_load_n(&untracked_bytes, __ATOMIC_RELAXED));
	}
}
