/* A stand-in libcuda.so.1 for machines without a GPU: host-side bookkeeping of the memory calls
 * memshim wraps, fake device addresses, two devices, and cuGetProcAddress/_v2 with the real
 * driver's version and per-thread-stream selection.  Linked with -Bsymbolic so the pointers it
 * hands out are its own functions, like the real driver's.
 *
 * STANDIN_CUDA_MEM_LIMIT: bytes per device before CUDA_ERROR_OUT_OF_MEMORY (default 80 GiB).
 * cuMemGetInfo: a device's total is that limit plus CTX_OVERHEAD, which a device's context takes
 * once retained or made current and never hands out; free shrinks as memory is handed out.
 * standin_cuda_footprint (for the stand-in NVML) is what the device holds for this process: its
 * allocations plus the context.  PCI bus ids are 0000:0<device + 1>:00.0.
 * STANDIN_CUDA_NESTED=1: some entry points are built on other exported ones, called through their
 * global symbols (as a layered driver or interposer may): a preloaded wrapper of the inner one is
 * then reached from inside the outer one.  cuMemAlloc_v2 also keeps a malloc'ed host record of
 * each allocation, which cuMemFree_v2 frees.
 * STANDIN_CUDA_FORK_ABORT=1: cuMemGetInfo called in a forked child of the process that called
 * cuInit aborts (the real driver's state does not cross fork: nothing may call it there).
 * Stream capture as the real driver rules it: each thread's capture mode (global by default,
 * cuThreadExchangeStreamCaptureMode), one capture at a time (cuStreamBeginCapture_v2 with its mode,
 * cuStreamEndCapture), and cuMemGetInfo, a call a capture prohibits, failing with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidating the capture when the calling thread's mode
 * prohibits it: its own capture not begun relaxed, or another thread's begun in global mode while
 * its own mode is global (the end then returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED).
 * standin_cuda_hold(which) makes the next call of one function (STANDIN_HOLD_POOL_ATTR:
 * cuMemPoolGetAttribute, STANDIN_HOLD_MEM_INFO: cuMemGetInfo) wait until standin_cuda_release()
 * (at most 10 s); standin_cuda_held() waits for such a call: a fixture forces an interleaving of
 * threads with it. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define NDEV 2
#define ALIGN 512
#define GRANULARITY (2u << 20)
#define TAB_BITS 20
#define MAX_HANDLES 16384
#define MAX_MAPS 16384
#define MAX_POOLS 16
#define MAX_STREAMS 64
#define CTX_OVERHEAD (32ull << 20)

enum kind { K_DEVICE = 1, K_MANAGED, K_HOST, K_REGISTERED, K_LEGACY };

struct alloc {
	uint64_t addr;
	uint64_t size;
	int device;
	int kind;
	int pool; /* index + 1 for stream-ordered allocations */
};

struct ctx { int device; };
struct stream { int device; int used; };
struct pool { int device; int used; uint64_t live, reserved, high; };
struct handle { uint64_t size; int device; int refs; int used; };
struct map { uint64_t va, size; int handle; int used; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc tab[1u << TAB_BITS];
static struct ctx ctxs[NDEV] = { { 0 }, { 1 } };
static struct stream streams[MAX_STREAMS];
static struct pool pools[MAX_POOLS];
static int current_pool[NDEV] = { 1, 2 }; /* pools[0], pools[1] are the default pools */
static struct handle handles[MAX_HANDLES];
static struct map maps[MAX_MAPS];
static uint64_t dev_used[NDEV];
static int ctx_made[NDEV]; /* the device's context exists: it holds CTX_OVERHEAD */
static uint64_t limit;
static uint64_t next_addr[NDEV] = { 0x100000000000ull, 0x200000000000ull };
static uint64_t next_managed = 0x300000000000ull, next_host = 0x400000000000ull;
static uint64_t next_va = 0x500000000000ull, next_legacy = 0x10000000ull;
static uint64_t recent_addr[NDEV], recent_size[NDEV]; /* last freed block, reused like a real heap */
static int initialized;
static pid_t init_pid; /* STANDIN_CUDA_FORK_ABORT: who called cuInit */
static __thread struct ctx *current;
static __thread int capture_mode; /* CU_STREAM_CAPTURE_MODE_GLOBAL until exchanged */
static struct {
	CUstream stream; /* the stream capturing while on */
	int on, mode, invalidated;
	pthread_t thread;
} capture; /* under mu */

/* ---- bookkeeping (under mu) ---- */

static uint32_t slot_of(uint64_t addr)
{
	return (uint32_t)(((addr >> 9) * 0x9E3779B97F4A7C15ull) >> (64 - TAB_BITS));
}

static struct alloc *find(uint64_t addr)
{
	uint32_t mask = (1u << TAB_BITS) - 1;
	for (uint32_t i = slot_of(addr);; i = (i + 1) & mask) {
		if (tab[i].addr == addr)
			return &tab[i];
		if (!tab[i].addr)
			return NULL;
	}
}

static void insert(const struct alloc *a)
{
	uint32_t mask = (1u << TAB_BITS) - 1, i = slot_of(a->addr);
	while (tab[i].addr)
		i = (i + 1) & mask;
	tab[i] = *a;
}

/* Backward-shift deletion keeps probe chains without tombstones. */
static void erase(struct alloc *a)
{
	uint32_t mask = (1u << TAB_BITS) - 1, i = (uint32_t)(a - tab), j = i;
	tab[i].addr = 0;
	for (;;) {
		j = (j + 1) & mask;
		if (!tab[j].addr)
			return;
		uint32_t home = slot_of(tab[j].addr);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			tab[i] = tab[j];
			tab[j].addr = 0;
			i = j;
		}
	}
}

static uint64_t mem_limit(void)
{
	if (!limit) {
		const char *s = getenv("STANDIN_CUDA_MEM_LIMIT");
		limit = s && *s ? strtoull(s, NULL, 0) : (80ull << 30);
	}
	return limit;
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

static int device_reserve(int dev, uint64_t size)
{
	if (dev_used[dev] + size > mem_limit())
		return -1;
	dev_used[dev] += size;
	return 0;
}

static uint64_t device_address(int dev, uint64_t size)
{
	if (recent_size[dev] >= size) {
		uint64_t a = recent_addr[dev];
		recent_size[dev] = 0;
		return a;
	}
	uint64_t a = next_addr[dev];
	next_addr[dev] += round_up(size ? size : 1, ALIGN);
	return a;
}

static CUresult ctx_device(int *dev)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = current->device;
	return CUDA_SUCCESS;
}

/* ---- initialisation, devices, contexts, streams ---- */

EXPORT CUresult cuInit(unsigned int flags)
{
	(void)flags;
	init_pid = getpid();
	__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
	*n = NDEV;
	return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= NDEV)
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= NDEV)
		return CUDA_ERROR_INVALID_DEVICE;
	*pctx = (CUcontext)&ctxs[dev];
	__atomic_store_n(&ctx_made[dev], 1, __ATOMIC_RELAXED);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return dev >= 0 && dev < NDEV ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	current = (struct ctx *)ctx;
	if (current)
		__atomic_store_n(&ctx_made[current->device], 1, __ATOMIC_RELAXED);
	return CUDA_SUCCESS;
}

/* ---- holding a call, so that a test orders threads ---- */

#define STANDIN_HOLD_POOL_ATTR 1
#define STANDIN_HOLD_MEM_INFO 2
static int hold_armed, holding, released;

EXPORT void standin_cuda_hold(int which);
EXPORT void standin_cuda_hold(int which)
{
	__atomic_store_n(&released, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&hold_armed, which, __ATOMIC_RELEASE);
}

EXPORT void standin_cuda_release(void);
EXPORT void standin_cuda_release(void)
{
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
}

static void pause_ms(void)
{
	struct timespec ms = { 0, 1000000 };
	nanosleep(&ms, NULL);
}

/* 1 once a call is held (0 after 10 s without one). */
EXPORT int standin_cuda_held(void);
EXPORT int standin_cuda_held(void)
{
	for (int i = 0; i < 10000 && !__atomic_load_n(&holding, __ATOMIC_ACQUIRE); i++)
		pause_ms();
	return __atomic_load_n(&holding, __ATOMIC_ACQUIRE);
}

/* The call WHICH waits here when it was armed (outside mu: the other threads go on). */
static void maybe_hold(int which)
{
	int armed = which;
	if (!__atomic_compare_exchange_n(&hold_armed, &armed, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&holding, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 10000 && !__atomic_load_n(&released, __ATOMIC_ACQUIRE); i++)
		pause_ms();
	__atomic_store_n(&holding, 0, __ATOMIC_RELEASE);
}

/* ---- stream capture ---- */

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	if (!mode || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	int old = capture_mode;
	capture_mode = (int)*mode;
	*mode = (CUstreamCaptureMode)old;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
	if (!s || mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	CUresult r = capture.on ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
	if (!r) {
		capture.stream = s;
		capture.on = 1;
		capture.mode = (int)mode;
		capture.invalidated = 0;
		capture.thread = pthread_self();
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *graph)
{
	static int a_graph;
	pthread_mutex_lock(&mu);
	CUresult r = !capture.on || capture.stream != s ? CUDA_ERROR_ILLEGAL_STATE
		     : capture.mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(capture.thread, pthread_self())
			     ? CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
		     : capture.invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
					   : CUDA_SUCCESS;
	if (r != CUDA_ERROR_ILLEGAL_STATE && r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
		capture.on = 0;
	pthread_mutex_unlock(&mu);
	*graph = r ? NULL : (CUgraph)&a_graph;
	return r;
}

/* Whether the calling thread's mode prohibits a potentially unsafe call now (under mu). */
static int prohibited(void)
{
	if (!capture.on || capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return 0;
	int own = pthread_equal(capture.thread, pthread_self());
	if (own)
		return capture.mode != CU_STREAM_CAPTURE_MODE_RELAXED;
	return capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && capture.mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
	int dev;
	if (getenv("STANDIN_CUDA_FORK_ABORT") && init_pid && getpid() != init_pid)
		abort(); /* a forked child's call: the real driver's state is not usable there */
	maybe_hold(STANDIN_HOLD_MEM_INFO);
	CUresult r = ctx_device(&dev);
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	if (prohibited()) {
		capture.invalidated = 1;
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	*total_b = mem_limit() + CTX_OVERHEAD;
	*free_b = *total_b - CTX_OVERHEAD - dev_used[dev];
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
	if (dev < 0 || dev >= NDEV || len < 13)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(id, "0000:01:00.0", 13);
	id[6] = (char)('1' + dev);
	return CUDA_SUCCESS;
}

/* What device DEV holds for this process (the stand-in NVML's usedGpuMemory): 0 without a context. */
EXPORT uint64_t standin_cuda_footprint(int dev);
EXPORT uint64_t standin_cuda_footprint(int dev)
{
	if (dev < 0 || dev >= NDEV || !__atomic_load_n(&ctx_made[dev], __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&mu);
	uint64_t v = dev_used[dev] + CTX_OVERHEAD;
	pthread_mutex_unlock(&mu);
	return v;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	*ctx = (CUcontext)current;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
	return ctx_device(dev);
}

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	(void)flags;
	int dev;
	CUresult r = ctx_device(&dev);
	if (r)
		return r;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_STREAMS; i++) {
		if (!streams[i].used) {
			streams[i] = (struct stream){ dev, 1 };
			*s = (CUstream)&streams[i];
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
	((struct stream *)s)->used = 0;
	return CUDA_SUCCESS;
}

static int is_special(CUstream s)
{
	return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

EXPORT CUresult cuStreamGetDevice(CUstream s, CUdevice *dev)
{
	if (is_special(s))
		return ctx_device(dev);
	*dev = ((struct stream *)s)->device;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *dev)
{
	return cuStreamGetDevice(s, dev);
}

/* ---- STANDIN_CUDA_NESTED: the entry points inner calls go through, and host records ---- */

#define MAX_RECORDS 64
#define RECORD_SIZE 4096

static struct {
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
	CUresult (*free_async)(CUdeviceptr, CUstream);
	CUresult (*alloc_host)(void **, size_t);
} global;
static struct { uint64_t addr; void *host; } records[MAX_RECORDS];

/* Looked up at load, so no lookup runs (or allocates) inside a call.  In the program's global
 * scope, where a plain call from a library without -Bsymbolic binds (RTLD_DEFAULT would search
 * this -Bsymbolic library first). */
__attribute__((constructor)) static void nested_init(void)
{
	const char *s = getenv("STANDIN_CUDA_NESTED");
	void *scope = s && strcmp(s, "1") == 0 ? dlopen(NULL, RTLD_LAZY) : NULL;
	if (!scope)
		return;
	global.alloc = (CUresult (*)(CUdeviceptr *, size_t))dlsym(scope, "cuMemAlloc_v2");
	global.alloc_async = (CUresult (*)(CUdeviceptr *, size_t, CUstream))dlsym(scope, "cuMemAllocAsync");
	global.free_async = (CUresult (*)(CUdeviceptr, CUstream))dlsym(scope, "cuMemFreeAsync");
	global.alloc_host = (CUresult (*)(void **, size_t))dlsym(scope, "cuMemAllocHost_v2");
}

static void record_add(uint64_t addr)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_RECORDS; i++) {
		if (!records[i].addr) {
			records[i].addr = addr;
			records[i].host = malloc(RECORD_SIZE);
			break;
		}
	}
	pthread_mutex_unlock(&mu);
}

static void record_drop(uint64_t addr)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; addr && i < MAX_RECORDS; i++) {
		if (records[i].addr == addr) {
			free(records[i].host);
			records[i].addr = 0;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
}

/* ---- plain device memory ---- */

static CUresult alloc_on(int dev, uint64_t size, int kind, int pool, CUdeviceptr *out)
{
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (kind == K_DEVICE && device_reserve(dev, size) < 0) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	struct alloc a = { 0, size, dev, kind, pool };
	if (kind == K_DEVICE) {
		a.addr = device_address(dev, size);
	} else if (kind == K_MANAGED) {
		a.addr = next_managed;
		next_managed += round_up(size, ALIGN);
	} else if (kind == K_LEGACY) {
		a.addr = next_legacy;
		next_legacy += round_up(size, ALIGN);
		a.kind = K_DEVICE;
	} else {
		a.addr = next_host;
		next_host += round_up(size, 4096);
	}
	insert(&a);
	*out = a.addr;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

static CUresult alloc_current(uint64_t size, int kind, CUdeviceptr *out)
{
	int dev;
	CUresult r = ctx_device(&dev);
	return r ? r : alloc_on(dev, size, kind, 0, out);
}

static void release_pool_bytes(const struct alloc *a)
{
	struct pool *p = &pools[a->pool - 1];
	p->live -= a->size;
}

static CUresult free_kind(uint64_t addr, int kinds)
{
	pthread_mutex_lock(&mu);
	struct alloc *a = addr ? find(addr) : NULL;
	if (!a || !((1 << a->kind) & kinds)) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a->pool) {
		release_pool_bytes(a);
	} else if (a->kind == K_DEVICE) {
		dev_used[a->device] -= a->size;
		if (a->addr < 0x100000000000ull) {
			/* legacy 32-bit addresses are not reused */
		} else {
			recent_addr[a->device] = a->addr;
			recent_size[a->device] = a->size;
		}
	}
	erase(a);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

#define DEVICE_KINDS ((1 << K_DEVICE) | (1 << K_MANAGED))

/* Nested: stream-ordered memory of the legacy stream, through the global cuMemAllocAsync. */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	if (!global.alloc_async)
		return alloc_current(size, K_DEVICE, dptr);
	CUresult r = global.alloc_async(dptr, size, CU_STREAM_LEGACY);
	if (r == CUDA_SUCCESS)
		record_add(*dptr);
	return r;
}

/* Nested: through the global cuMemAlloc_v2 (itself nested once more). */
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem)
{
	(void)elem;
	if (!width || !height)
		return CUDA_ERROR_INVALID_VALUE;
	*pitch = round_up(width, ALIGN);
	if (global.alloc)
		return global.alloc(dptr, *pitch * height);
	return alloc_current(*pitch * height, K_DEVICE, dptr);
}

/* Nested: through the global cuMemFreeAsync. */
EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	if (!global.free_async)
		return free_kind(dptr, DEVICE_KINDS);
	record_drop(dptr);
	return global.free_async(dptr, CU_STREAM_LEGACY);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	(void)flags;
	return alloc_current(size, K_MANAGED, dptr);
}

/* ---- legacy (pre-3.2) entry points: 32-bit addresses and sizes ---- */

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int size)
{
	int dev;
	CUdeviceptr a;
	CUresult r = ctx_device(&dev);
	if (!r)
		r = alloc_on(dev, size, K_LEGACY, 0, &a);
	if (!r)
		*dptr = (CUdeviceptr_v1)a;
	return r;
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width, unsigned int height,
				unsigned int elem)
{
	(void)elem;
	*pitch = (unsigned int)round_up(width, ALIGN);
	return cuMemAlloc(dptr, *pitch * height);
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	return free_kind(dptr, DEVICE_KINDS);
}

/* ---- pinned host memory (fake addresses: fixtures never touch them) ---- */

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
	CUdeviceptr a;
	CUresult r = alloc_current(size, K_HOST, &a);
	if (!r)
		*pp = (void *)(uintptr_t)a;
	return r;
}

EXPORT CUresult cuMemAllocHost(void **pp, unsigned int size)
{
	return cuMemAllocHost_v2(pp, size);
}

/* Nested: through the global cuMemAllocHost_v2. */
EXPORT CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	(void)flags;
	return global.alloc_host ? global.alloc_host(pp, size) : cuMemAllocHost_v2(pp, size);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	return free_kind((uint64_t)(uintptr_t)p, 1 << K_HOST);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
	(void)flags;
	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (find((uint64_t)(uintptr_t)p)) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	}
	struct alloc a = { (uint64_t)(uintptr_t)p, size, -1, K_REGISTERED, 0 };
	insert(&a);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister(void *p, size_t size, unsigned int flags)
{
	return cuMemHostRegister_v2(p, size, flags);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
	CUresult r = free_kind((uint64_t)(uintptr_t)p, 1 << K_REGISTERED);
	return r ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED : r;
}

/* ---- memory pools and stream-ordered allocation ---- */

static struct pool *pool_of(CUmemoryPool p)
{
	struct pool *q = (struct pool *)p;
	return q >= pools && q < pools + MAX_POOLS && q->used ? q : NULL;
}

static void default_pools(void)
{
	for (int d = 0; d < NDEV; d++)
		if (!pools[d].used)
			pools[d] = (struct pool){ d, 1, 0, 0, 0 };
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *out, CUdevice dev)
{
	if (dev < 0 || dev >= NDEV)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	default_pools();
	pthread_mutex_unlock(&mu);
	*out = (CUmemoryPool)&pools[dev];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *out, CUdevice dev)
{
	if (dev < 0 || dev >= NDEV)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	default_pools();
	*out = (CUmemoryPool)&pools[current_pool[dev] - 1];
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *out, const CUmemPoolProps *props)
{
	if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 || props->location.id >= NDEV)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	default_pools();
	for (int i = NDEV; i < MAX_POOLS; i++) {
		if (!pools[i].used) {
			pools[i] = (struct pool){ props->location.id, 1, 0, 0, 0 };
			*out = (CUmemoryPool)&pools[i];
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool p)
{
	struct pool *q = pool_of(p);
	if (!q || q < pools + NDEV)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	dev_used[q->device] -= q->reserved;
	q->used = 0;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool p, CUmemPool_attribute attr, void *value)
{
	maybe_hold(STANDIN_HOLD_POOL_ATTR);
	struct pool *q = pool_of(p);
	if (!q)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	cuuint64_t v = attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ? q->reserved
		     : attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH  ? q->high
		     : attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT   ? q->live
								  : 0;
	pthread_mutex_unlock(&mu);
	memcpy(value, &v, sizeof v);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool p, size_t keep)
{
	struct pool *q = pool_of(p);
	if (!q)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	uint64_t want = round_up(q->live, GRANULARITY);
	if (want < keep)
		want = keep < q->reserved ? keep : q->reserved;
	dev_used[q->device] -= q->reserved - want;
	q->reserved = want;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

/* Reserves pool memory in 2 MiB steps (device memory, with the out-of-memory limit). */
static CUresult pool_alloc(struct pool *q, uint64_t size, CUdeviceptr *out)
{
	pthread_mutex_lock(&mu);
	uint64_t need = round_up(q->live + size, GRANULARITY);
	if (need > q->reserved) {
		if (device_reserve(q->device, need - q->reserved) < 0) {
			pthread_mutex_unlock(&mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		q->reserved = need;
		if (need > q->high)
			q->high = need;
	}
	q->live += size;
	struct alloc a = { next_addr[q->device], size, q->device, K_DEVICE, (int)(q - pools) + 1 };
	next_addr[q->device] += round_up(size, ALIGN);
	insert(&a);
	*out = a.addr;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s)
{
	int dev;
	CUresult r = cuStreamGetDevice(s, &dev);
	if (r)
		return r;
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	default_pools();
	struct pool *q = &pools[current_pool[dev] - 1];
	pthread_mutex_unlock(&mu);
	return pool_alloc(q, size, dptr);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
	return alloc_async(dptr, size, s);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
	return alloc_async(dptr, size, s);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool p)
{
	struct pool *q = pool_of(p);
	if (!q || !size)
		return CUDA_ERROR_INVALID_VALUE;
	return pool_alloc(q, size, dptr);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool p, CUstream s)
{
	(void)s;
	return alloc_from_pool(dptr, size, p);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool p, CUstream s)
{
	(void)s;
	return alloc_from_pool(dptr, size, p);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
	(void)s;
	return free_kind(dptr, DEVICE_KINDS);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
	(void)s;
	return free_kind(dptr, DEVICE_KINDS);
}

/* ---- virtual memory management: handles live while referenced (create, retain, map) ---- */

static struct handle *handle_of(CUmemGenericAllocationHandle h)
{
	if (h < 0x1000 || h >= 0x1000 + MAX_HANDLES)
		return NULL;
	struct handle *x = &handles[h - 0x1000];
	return x->used ? x : NULL;
}

static void handle_unref(struct handle *x)
{
	if (--x->refs == 0) {
		if (x->device >= 0)
			dev_used[x->device] -= x->size;
		x->used = 0;
	}
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
					       CUmemAllocationGranularity_flags option)
{
	(void)prop;
	(void)option;
	*g = GRANULARITY;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				    unsigned long long flags)
{
	(void)alignment;
	(void)addr;
	(void)flags;
	if (!size || size % GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	*ptr = next_va;
	next_va += size;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	(void)ptr;
	(void)size;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
			    unsigned long long flags)
{
	(void)flags;
	int dev = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
	if (!size || size % GRANULARITY || dev >= NDEV || (dev < 0 && prop->location.type != CU_MEM_LOCATION_TYPE_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (dev >= 0 && device_reserve(dev, size) < 0) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < MAX_HANDLES; i++) {
		if (!handles[i].used) {
			handles[i] = (struct handle){ size, dev, 1, 1 };
			*h = 0x1000 + (CUmemGenericAllocationHandle)i;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	}
	if (dev >= 0)
		dev_used[dev] -= size;
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
	pthread_mutex_lock(&mu);
	struct handle *x = handle_of(h);
	if (x)
		handle_unref(x);
	pthread_mutex_unlock(&mu);
	return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
			 unsigned long long flags)
{
	(void)offset;
	(void)flags;
	pthread_mutex_lock(&mu);
	struct handle *x = handle_of(h);
	if (!x || size > x->size) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (int i = 0; i < MAX_MAPS; i++) {
		if (!maps[i].used) {
			maps[i] = (struct map){ ptr, size, (int)(x - handles), 1 };
			x->refs++;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	int n = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_MAPS; i++) {
		if (maps[i].used && maps[i].va >= ptr && maps[i].va < ptr + size) {
			maps[i].used = 0;
			handle_unref(&handles[maps[i].handle]);
			n++;
		}
	}
	pthread_mutex_unlock(&mu);
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	(void)ptr;
	(void)size;
	(void)desc;
	(void)count;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
	uint64_t a = (uint64_t)(uintptr_t)addr;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_MAPS; i++) {
		if (maps[i].used && a >= maps[i].va && a < maps[i].va + maps[i].size) {
			handles[maps[i].handle].refs++;
			*h = 0x1000 + (CUmemGenericAllocationHandle)maps[i].handle;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- functions memshim must leave alone ---- */

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
			       unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params, void **extra)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)s, (void)params, (void)extra;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
				    unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
				    void **extra)
{
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

/* A "cu"-prefixed name that is not a driver function (cuDNN's): must reach us untouched. */
EXPORT size_t cudnnGetVersion(void);
EXPORT size_t cudnnGetVersion(void)
{
	return 90100;
}

/* ---- cuGetProcAddress: highest entry not newer than the requested version ---- */

struct proc {
	const char *name;
	int version;
	void *fn;
	void *ptsz;
};

#define P(name, ver, fn) { #name, ver, (void *)fn, NULL }
#define PZ(name, ver, fn) { #name, ver, (void *)fn, (void *)fn##_ptsz }

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status);

static const struct proc procs[] = {
	P(cuInit, 2000, cuInit),
	P(cuDriverGetVersion, 2020, cuDriverGetVersion),
	P(cuDeviceGet, 2000, cuDeviceGet),
	P(cuDeviceGetCount, 2000, cuDeviceGetCount),
	P(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
	P(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
	P(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
	P(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
	P(cuCtxGetDevice, 2000, cuCtxGetDevice),
	P(cuMemGetInfo, 3020, cuMemGetInfo_v2),
	P(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId),
	P(cuStreamCreate, 2000, cuStreamCreate),
	P(cuStreamDestroy, 4000, cuStreamDestroy_v2),
	P(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2),
	P(cuStreamEndCapture, 10000, cuStreamEndCapture),
	P(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
	PZ(cuStreamGetDevice, 12080, cuStreamGetDevice),
	P(cuMemAlloc, 2000, cuMemAlloc),
	P(cuMemAlloc, 3020, cuMemAlloc_v2),
	P(cuMemAllocPitch, 2000, cuMemAllocPitch),
	P(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
	P(cuMemFree, 2000, cuMemFree),
	P(cuMemFree, 3020, cuMemFree_v2),
	P(cuMemAllocHost, 2000, cuMemAllocHost),
	P(cuMemAllocHost, 3020, cuMemAllocHost_v2),
	P(cuMemHostAlloc, 2020, cuMemHostAlloc),
	P(cuMemFreeHost, 2000, cuMemFreeHost),
	P(cuMemHostRegister, 4000, cuMemHostRegister),
	P(cuMemHostRegister, 6050, cuMemHostRegister_v2),
	P(cuMemHostUnregister, 4000, cuMemHostUnregister),
	P(cuMemAllocManaged, 6000, cuMemAllocManaged),
	PZ(cuMemAllocAsync, 11020, cuMemAllocAsync),
	PZ(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync),
	PZ(cuMemFreeAsync, 11020, cuMemFreeAsync),
	P(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
	P(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
	P(cuMemPoolCreate, 11020, cuMemPoolCreate),
	P(cuMemPoolDestroy, 11020, cuMemPoolDestroy),
	P(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute),
	P(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo),
	P(cuMemAddressReserve, 10020, cuMemAddressReserve),
	P(cuMemAddressFree, 10020, cuMemAddressFree),
	P(cuMemCreate, 10020, cuMemCreate),
	P(cuMemRelease, 10020, cuMemRelease),
	P(cuMemMap, 10020, cuMemMap),
	P(cuMemUnmap, 10020, cuMemUnmap),
	P(cuMemSetAccess, 10020, cuMemSetAccess),
	P(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
	P(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle),
	PZ(cuLaunchKernel, 4000, cuLaunchKernel),
	P(cuGetProcAddress, 11030, cuGetProcAddress),
	P(cuGetProcAddress, 12000, cuGetProcAddress_v2),
};

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	const struct proc *best = NULL;
	int known = 0;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
		if (strcmp(procs[i].name, symbol) != 0)
			continue;
		known = 1;
		if (procs[i].version <= version)
			best = &procs[i];
	}
	*pfn = NULL;
	if (!best) {
		if (status)
			*status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->ptsz ? best->ptsz : best->fn;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return lookup(symbol, pfn, version, flags, NULL);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	return lookup(symbol, pfn, version, flags, status);
}
