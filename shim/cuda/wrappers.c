/* CUDA driver wrappers: device, managed and pinned memory per device, VMM reference counting,
 * failed allocations.  The real functions come from lookup.c (REAL), the memory pools' devices and
 * kinds from pools.c. */
#include <errno.h>
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "cuda/cuda.h"
#include "cuda/driver.h"
#include "cuda/footprint.h"
#include "cuda/table.h"
#include "intercept/hooks.h"

static void (*observe_alloc)(uint64_t dptr, int64_t bytes);
static void (*observe_free)(uint64_t dptr);

void ms_cuda_set_observer(void (*alloc)(uint64_t dptr, int64_t bytes), void (*release)(uint64_t dptr))
{
	__atomic_store_n(&observe_alloc, alloc, __ATOMIC_RELEASE);
	__atomic_store_n(&observe_free, release, __ATOMIC_RELEASE);
}

/* Tells the observer of device allocation KEY of BYTES (SIGN 1) or its free (-1). */
static void observe(uint64_t key, int64_t bytes, int sign)
{
	if (sign > 0) {
		void (*f)(uint64_t, int64_t) = __atomic_load_n(&observe_alloc, __ATOMIC_ACQUIRE);
		if (f)
			f(key, bytes);
	} else {
		void (*f)(uint64_t) = __atomic_load_n(&observe_free, __ATOMIC_ACQUIRE);
		if (f)
			f(key);
	}
}

static uint64_t untracked_allocs; /* successful allocations the full table could not hold */
static int64_t untracked_bytes;
static int full_warned;

MS_TABLE_DEFINE(ptr_tab, 16);    /* device, managed and host pointers (2 MiB of zero pages) */
MS_TABLE_DEFINE(handle_tab, 14); /* cuMemCreate handles with their reference counts */
MS_TABLE_DEFINE(map_tab, 14);    /* cuMemMap address -> handle */

void ms_cuda_untracked(uint64_t *allocs, int64_t *bytes)
{
	*allocs = __atomic_load_n(&untracked_allocs, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&untracked_bytes, __ATOMIC_RELAXED);
}

/* ---- bookkeeping ---- */

/* Wrapped driver calls this thread is inside.  A driver (or a layer under us) may implement one
 * entry point by calling another exported one, which then resolves to our wrapper: only the
 * outermost call counts.  Not ms_tls_guard: host memory the driver allocates and frees inside a
 * call is the program's, and the malloc hooks must keep counting it. */
static __thread int driver_depth MS_TLS;

/* Runs CALL (the real driver function) with nested wrapped calls passing straight through. */
#define OUTERMOST(call)                                                                                                \
	do {                                                                                                           \
		driver_depth++;                                                                                        \
		call;                                                                                                  \
		driver_depth--;                                                                                        \
	} while (0)

static inline int tracking(void)
{
	return ms_tls_guard == 0 && driver_depth == 0 && ms_counting;
}

static int current_device(void)
{
	CUresult (*get)(CUdevice *) = (CUresult(*)(CUdevice *))ms_cuda_real(H_cuCtxGetDevice);
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
	CUresult (*get)(CUstream, CUdevice *) =
		(CUresult(*)(CUstream, CUdevice *))ms_cuda_real_optional(H_cuStreamGetDevice);
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
	if (e->kind == MS_CK_DEVICE || (e->kind == MS_CK_VMM && e->device >= 0)) {
		ms_gpufp_counting++; /* a timeline point raised here may read the footprint */
		ms_gpu_add(e->device, bytes);
		ms_gpufp_counting--;
		observe(e->key, bytes, sign); /* every device allocation, unsampled */
	} else if (e->kind == MS_CK_MANAGED)
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
static void note_alloc(struct ms_table *tab, uint64_t key, int64_t size, int device, unsigned kind)
{
	struct ms_centry e = { .key = key, .size = size, .device = (int16_t)device, .kind = (uint16_t)kind, .refs = 1 };
	if (ms_table_insert(tab, &e) < 0) {
		note_untracked(size);
		return;
	}
	count(&e, 1);
	if (MS_UNLIKELY(__atomic_load_n(&ms_gpufp_bursts, __ATOMIC_RELAXED)) &&
	    (kind == MS_CK_DEVICE || kind == MS_CK_VMM))
		ms_gpufp_succeeded(device); /* an out-of-memory burst on it ends: the program went on */
}

static void note_failure(int device, int64_t bytes, CUresult r)
{
	ms_gpu_mark_used();
	ms_stages_note_gpu_failure(device, bytes, (int)r, ms_elapsed());
	ms_gpufp_failed(device, bytes, (int)r);
}

/* After an allocation call: counts it or records its failure; errno stays as the driver left it. */
static void after_alloc(CUresult r, struct ms_table *tab, uint64_t key, int64_t size, int device, unsigned kind)
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
static int before_free(struct ms_table *tab, uint64_t key, unsigned kinds, struct ms_centry *e)
{
	return tracking() && ms_table_take(tab, key, kinds, e) == 0;
}

static void after_free(CUresult r, int taken, struct ms_table *tab, const struct ms_centry *e)
{
	if (!taken)
		return;
	int saved = errno;
	if (r == CUDA_SUCCESS || ms_table_insert(tab, e) < 0) /* refused, but cannot be kept: forgotten */
		count(e, -1);
	errno = saved;
}

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
	CUresult (*real)(CUdeviceptr *, size_t) = REAL(cuMemAlloc_v2, CUresult(*)(CUdeviceptr *, size_t));
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
	after_alloc(r, &ptr_tab, ok ? *dptr : 0, ok ? (int64_t)(*pPitch * height) : (int64_t)(width * height), dev,
		    MS_CK_DEVICE);
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
	CUresult (*real)(CUdeviceptr) = REAL(cuMemFree_v2, CUresult(*)(CUdeviceptr));
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
	ms_cuda_pool_async_device(dev);
	return r;
}

/* Pools we saw created or handed out carry their device and kind; others: the stream's device. */
static CUresult alloc_pool(alloc_pool_fn real, CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream)
{
	if (!real)
		return NO_DRIVER;
	if (!tracking())
		return real(dptr, size, pool, stream);
	const struct ms_centry *p = ms_cuda_pool_find(pool);
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
		ms_cuda_pool_note(*pool, kind == MS_CK_DEVICE ? props->location.id : -1, kind);
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
	int taken = ms_cuda_pool_forget(pool, &e) == 0;
	CUresult r;
	OUTERMOST(r = real(pool));
	if (r != CUDA_SUCCESS && taken) {
		int saved = errno;
		ms_cuda_pool_restore(&e);
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
		ms_cuda_pool_note(*pool, dev, MS_CK_DEVICE);
		errno = saved;
	}
	return r;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	return device_pool(REAL(cuDeviceGetDefaultMemPool, CUresult(*)(CUmemoryPool *, CUdevice)), pool_out, dev);
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	return device_pool(REAL(cuDeviceGetMemPool, CUresult(*)(CUmemoryPool *, CUdevice)), pool, dev);
}

/* ---- virtual memory management: physical memory lives while any reference does (the handle
 * from cuMemCreate, each cuMemRetainAllocationHandle, each mapping) ---- */

/* Drops one reference of HANDLE before the driver sees it.  Returns 1 when it was the last (the
 * entry is then in GONE), 0 when others remain, -1 for an unknown handle. */
static int handle_unref(uint64_t handle, struct ms_centry *gone)
{
	struct ms_centry *e = ms_table_find(&handle_tab, handle);
	if (!e)
		return -1;
	if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return 0;
	return ms_table_take(&handle_tab, handle, MS_CK_VMM, gone) == 0 ? 1 : 0;
}

/* Undoes handle_unref after the driver refused. */
static void handle_reref(uint64_t handle, int state, struct ms_centry *gone)
{
	if (state == 1) {
		gone->refs = 1;
		if (ms_table_insert(&handle_tab, gone) < 0)
			count(gone, -1);
	} else if (state == 0) {
		struct ms_centry *e = ms_table_find(&handle_tab, handle);
		if (e)
			__atomic_add_fetch(&e->refs, 1, __ATOMIC_ACQ_REL);
	}
}

static void handle_ref(uint64_t handle)
{
	struct ms_centry *e = ms_table_find(&handle_tab, handle);
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
	if (r != CUDA_SUCCESS || !tracking() || !ms_table_find(&handle_tab, handle))
		return r;
	int saved = errno;
	struct ms_centry m = { .key = ptr, .size = (int64_t)size, .aux = handle, .kind = MS_CK_MAPPING, .refs = 1 };
	if (ms_table_insert(&map_tab, &m) == 0)
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
	while (*at < end && n < UNMAP_BATCH && ms_table_take(&map_tab, *at, MS_CK_MAPPING, &out[n].map) == 0) {
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
			ms_table_insert(&map_tab, &batch[i].map);
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
	return release_host(REAL(cuMemFreeHost, CUresult(*)(void *)), p, MS_CK_HOST);
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
	return host_register(REAL(cuMemHostRegister_v2, CUresult(*)(void *, size_t, unsigned int)), p, bytesize, Flags);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
	return release_host(REAL(cuMemHostUnregister, CUresult(*)(void *)), p, MS_CK_REGISTERED);
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
	return host_register(REAL(cuMemHostRegister, CUresult(*)(void *, size_t, unsigned int)), p, bytesize, Flags);
}
