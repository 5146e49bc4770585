/* Memory pools: which device and kind each pool's allocations are (the wrappers ask), and the
 * memory each pool holds in reserve, sampled at stage boundaries: what stream-ordered allocation
 * really holds on the device.  The report writer copies the samples (output/report.c).  A call is
 * sampled once at its begin and once at its end, told by the engine's own calls (ms_stages_calls):
 * the depth read after one's boundary may be another thread's. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/ms.h"
#include "core/stages.h"
#include "cuda/cuda.h"
#include "cuda/driver.h"
#include "cuda/table.h"

static int pools_seen;  /* a pool was created, handed out or used: boundaries sample them */
static pid_t pools_pid; /* ... in this process (a forked child must not query the parent's) */

static void mark_pools_seen(void)
{
	if (__atomic_load_n(&pools_seen, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&pools_pid, (pid_t)syscall(SYS_getpid), __ATOMIC_RELAXED);
	__atomic_store_n(&pools_seen, 1, __ATOMIC_RELEASE);
}

MS_TABLE_DEFINE(pool_tab, 8); /* memory pool -> device and kind */

#define SAMPLE_WAIT_SPINS 100000

static struct ms_pool_sample samples[MS_CUDA_MAX_POOLS] MS_LARGE;
static int nsamples;
static int sampling;           /* boundaries querying pools now: cuMemPoolDestroy waits for them */
static uint32_t async_devices; /* devices whose current pool served cuMemAllocAsync */
static uint64_t begun[MS_MAX_STAGES], ended[MS_MAX_STAGES]; /* the begins of the calls sampled */

/* ---- which device and kind ---- */

void ms_cuda_pool_note(CUmemoryPool pool, int device, unsigned kind)
{
	uint64_t key = (uint64_t)(uintptr_t)pool;
	if (ms_table_find(&pool_tab, key))
		return;
	struct ms_centry e = { .key = key, .device = (int16_t)device, .kind = (uint16_t)kind, .refs = 1 };
	if (ms_table_insert(&pool_tab, &e) == 0)
		mark_pools_seen();
}

const struct ms_centry *ms_cuda_pool_find(CUmemoryPool pool)
{
	return ms_table_find(&pool_tab, (uint64_t)(uintptr_t)pool);
}

/* cuMemPoolDestroy: a boundary still querying pools finishes first (bounded: a forked child may
 * have inherited a count that never drops). */
static void wait_for_sampling(void)
{
	for (int i = 0; i < SAMPLE_WAIT_SPINS && __atomic_load_n(&sampling, __ATOMIC_SEQ_CST); i++)
		ms_sys_sched_yield();
}

int ms_cuda_pool_forget(CUmemoryPool pool, struct ms_centry *out)
{
	if (ms_table_take(&pool_tab, (uint64_t)(uintptr_t)pool, MS_CK_DEVICE | MS_CK_MANAGED | MS_CK_HOST, out) < 0)
		return -1;
	wait_for_sampling();
	return 0;
}

void ms_cuda_pool_restore(const struct ms_centry *e)
{
	ms_table_insert(&pool_tab, e);
}

/* ---- reserved memory at stage boundaries ---- */

void ms_cuda_pool_async_device(int dev)
{
	uint32_t bit = dev >= 0 && dev < 32 ? 1u << dev : 0;
	if (bit && !(__atomic_load_n(&async_devices, __ATOMIC_RELAXED) & bit)) {
		__atomic_fetch_or(&async_devices, bit, __ATOMIC_RELAXED);
		mark_pools_seen();
	}
}

/* The sample slot of POOL, made on first sight; NULL when all are taken. */
static struct ms_pool_sample *sample_of(uint64_t pool, int device)
{
	int n = __atomic_load_n(&nsamples, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		if (samples[i].pool == pool)
			return &samples[i];
	if (n == MS_CUDA_MAX_POOLS)
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
	if (e->kind != MS_CK_DEVICE || !ms_table_find(&pool_tab, e->key)) /* destroyed meanwhile */
		return;
	CUmemoryPool pool = (CUmemoryPool)(uintptr_t)e->key;
	if (b->get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &cur) != CUDA_SUCCESS ||
	    b->get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high) != CUDA_SUCCESS)
		return;
	struct ms_pool_sample *s = sample_of(e->key, e->device);
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
	CUresult (*get)(CUmemoryPool *, CUdevice) =
		(CUresult(*)(CUmemoryPool *, CUdevice))ms_cuda_real(H_cuDeviceGetMemPool);
	for (int d = 0; devs && get && d < 32; d++) {
		CUmemoryPool pool;
		if ((devs & (1u << d)) && get(&pool, d) == CUDA_SUCCESS)
			ms_cuda_pool_note(pool, d, MS_CK_DEVICE);
	}
}

/* Whether this boundary of STAGE is the first to see its call begin (END 0) or closed (END 1):
 * only the outermost begin and end of a call, whichever thread's observer comes first. */
static int first_to_see(int stage, int end)
{
	struct ms_stage_call c;
	if (ms_stages_calls(NULL, stage, &c) < 0 || c.id < 0 || c.unheard || !c.begins || c.open == end)
		return 0;
	return __atomic_exchange_n(end ? &ended[stage] : &begun[stage], c.begins, __ATOMIC_RELAXED) != c.begins;
}

void ms_cuda_boundary(int stage, int end)
{
	if (stage < 0 || stage >= MS_MAX_STAGES || !__atomic_load_n(&pools_seen, __ATOMIC_ACQUIRE) ||
	    (pid_t)syscall(SYS_getpid) != __atomic_load_n(&pools_pid, __ATOMIC_RELAXED) || !first_to_see(stage, end))
		return;
	int saved = errno;
	ms_tls_guard++;
	struct boundary b = { stage, end,
			      (CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))ms_cuda_real(
				      H_cuMemPoolGetAttribute) };
	int mode = b.get ? ms_cuda_relax_capture() : MS_CAPTURE_FAILED;
	if (mode != MS_CAPTURE_FAILED) {
		add_async_pools();
		__atomic_add_fetch(&sampling, 1, __ATOMIC_SEQ_CST); /* ordered against destroy's removal */
		ms_table_each(&pool_tab, sample_pool, &b);
		__atomic_sub_fetch(&sampling, 1, __ATOMIC_SEQ_CST);
		ms_cuda_restore_capture(mode);
	}
	ms_tls_guard--;
	errno = saved;
}

int ms_cuda_pools_copy(struct ms_pool_sample out[MS_CUDA_MAX_POOLS])
{
	int n = __atomic_load_n(&nsamples, __ATOMIC_ACQUIRE);
	memcpy(out, samples, (size_t)n * sizeof *samples);
	return n;
}
