/* The malloc family.  Usable size is counted at both ends so the counters always balance. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "intercept/hooks.h"
#include "intercept/sample.h"

/* Not declared by every C library's headers. */
void cfree(void *ptr);
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t align, size_t size);

/* The mode and this thread's guard (never negative): MODE > GUARD is MS_FAST_ON outside the shim;
 * MODE == MS_FAST_CHECKED with GUARD 0 the checked fast path. */
#define LOAD_MODE(mode, guard) ((mode) = __atomic_load_n(&ms_malloc_fast, __ATOMIC_RELAXED), (guard) = ms_tls_guard)
#define CHECKED(mode, guard) ((mode) == MS_FAST_CHECKED && (guard) == 0)

/* glibc's chunk header: the size word before the block (low bits: flags, 2 = mmapped). */
static inline uint64_t glibc_head(const void *p)
{
	uint64_t head;
	memcpy(&head, (const char *)p - 8, sizeof head);
	return head;
}

/* Usable size of a glibc block, as malloc_usable_size computes it for a block in use. */
static inline uint64_t glibc_usable(uint64_t head)
{
	return (head & ~(uint64_t)7) - 8 - ((head & 2) << 2);
}

/* glibc rejects a pointer it never gave out ("free(): invalid pointer") by two cheap checks on its
 * chunk header before using it; malloc_usable_size trusts the header and may fault first.  Such a
 * pointer is left uncounted for glibc to diagnose. */
static inline int glibc_would_reject(const void *p, uint64_t head)
{
	uint64_t size = head & ~(uint64_t)7;
	return ((uintptr_t)p & 15) || (uintptr_t)p - 16 > (uintptr_t)0 - size;
}

/* The rare ends of the fast path, out of line and entered by tail calls, so the common path keeps
 * nothing across a call (no registers saved). */
/* A tail call: the sampler's walk starts in the wrapper's caller, with no frame of ours between. */
static __attribute__((noinline)) void *new_sampled(void *p, uint64_t usable)
{
	return ms_sample_take(p, (int64_t)usable);
}

static __attribute__((noinline)) void *new_past_watch(void *p, uint64_t result, uint64_t usable)
{
	ms_cpu_slow_general(result);
	ms_sample_alloc(p, (int64_t)usable);
	return p;
}

/* A new high (every allocation of a call whose memory climbs): the gate raised inline, no frame. */
static __attribute__((noinline)) void *new_past_gate(void *p, uint64_t result, uint64_t usable)
{
	if (MS_UNLIKELY(!ms_cpu_raise_gate(result)))
		return new_past_watch(p, result, usable);
	if (MS_UNLIKELY(ms_sample_due((int64_t)usable)))
		return new_sampled(p, usable);
	return p;
}

static __attribute__((noinline)) void free_below_gate(void *ptr, uint64_t result)
{
	ms_cpu_slow(result);
	ms_real_free(ptr);
}

/* The fast path's free of a block that may have been sampled: the sampler forgets it first (before
 * another thread can be given its address), then it is uncounted and freed as on the fast path. */
static __attribute__((noinline)) void free_sampled(void *ptr);

/* The fast path's count of a new block P (CHECK: the native stage check first). */
static inline __attribute__((always_inline)) void *fast_new(void *p, int check)
{
	if (MS_UNLIKELY(p == NULL))
		return p;
	if (check)
		ms_before_counting();
	uint64_t n = glibc_usable(glibc_head(p));
	uint64_t r = ms_cpu_word_add((int64_t)n);
	if (ms_cpu_grew_past(r))
		return new_past_gate(p, r, n);
	if (MS_UNLIKELY(ms_sample_due((int64_t)n)))
		return new_sampled(p, n);
	return p;
}

/* The fast path's free: 1 when done, 0 when the general path must take PTR (NULL, a bootstrap
 * block, a pointer glibc will reject).  CHECK comes first, so only PTR is kept across its call
 * (the general path checks again: a rare second look). */
static inline __attribute__((always_inline)) int fast_free(void *ptr, int check)
{
	if (check)
		ms_before_counting();
	if (ms_bootstrap_owns(ptr) || !ptr)
		return 0;
	if (MS_UNLIKELY(ms_sample_maybe(ptr))) {
		free_sampled(ptr);
		return 1;
	}
	uint64_t head = glibc_head(ptr);
	if (MS_UNLIKELY(glibc_would_reject(ptr, head)))
		return 0;
	uint64_t r = ms_cpu_word_add(-(int64_t)glibc_usable(head));
	if (ms_cpu_shrank_below(r))
		free_below_gate(ptr, r);
	else
		ms_real_free(ptr);
	return 1;
}

/* The fast path's realloc of a block it can read: 1 and *OUT set when done, else 0. */
static inline __attribute__((always_inline)) int fast_realloc(void *ptr, size_t size, int check, void **out)
{
	if (ms_bootstrap_owns(ptr) || !ptr || MS_UNLIKELY(ms_sample_maybe(ptr)))
		return 0;
	uint64_t head = glibc_head(ptr);
	if (MS_UNLIKELY(glibc_would_reject(ptr, head)))
		return 0;
	int64_t old = (int64_t)glibc_usable(head);
	if (check)
		ms_before_counting();
	void *q = ms_real_realloc(ptr, size);
	if (q) {
		int64_t n = (int64_t)glibc_usable(glibc_head(q));
		ms_cpu_add(MS_MALLOC, n - old);
		ms_sample_alloc(q, n);
	} else if (size == 0) {
		ms_cpu_shrink((uint64_t)old);
	}
	*out = q;
	return 1;
}

/* The allocator's usable size of P, asked with the guard raised: tcmalloc's calls operator new the
 * first time (MallocExtension::instance), which must not be counted, nor count again. */
static inline int64_t usable(void *p)
{
	ms_tls_guard++;
	int64_t n = (int64_t)malloc_usable_size(p);
	ms_tls_guard--;
	return n;
}

/* Counts new block P (the general path). */
static inline __attribute__((always_inline)) void count(void *p)
{
	ms_before_counting();
	int64_t n = usable(p);
	ms_cpu_add(MS_MALLOC, n);
	ms_sample_alloc(p, n);
}

/* Usable bytes of a block about to be freed or resized (0: not countable). */
static inline int64_t usable_before_release(void *p)
{
	if (ms_allocator_is_glibc && MS_UNLIKELY(glibc_would_reject(p, glibc_head(p))))
		return 0;
	return usable(p);
}

/* Real function ready?  If not, the caller serves the request from the bootstrap buffer. */
#define READY(fn) (MS_LIKELY(ms_real_##fn != NULL) || (ms_resolve(), ms_real_##fn != NULL))

/* Runs CALL with the guard raised (an allocator underneath calling mmap is not counted twice),
 * then counts RESULT when this is the outermost wrapped call. */
#define GUARDED(call)                                                                                                  \
	do {                                                                                                           \
		ms_tls_guard++;                                                                                        \
		call;                                                                                                  \
		ms_tls_guard--;                                                                                        \
	} while (0)
#define COUNTABLE() (ms_tls_guard == 0 && ms_counting)

static __attribute__((noinline)) void *malloc_general(size_t size)
{
	if (!READY(malloc))
		return ms_bootstrap_alloc(size, 0);
	void *p;
	GUARDED(p = ms_real_malloc(size));
	if (p && COUNTABLE())
		count(p);
	return p;
}

static __attribute__((noinline)) void *malloc_other(size_t size, int mode, int guard)
{
	if (CHECKED(mode, guard))
		return fast_new(ms_real_malloc(size), 1);
	return malloc_general(size);
}

EXPORT void *malloc(size_t size)
{
	int mode, guard;
	LOAD_MODE(mode, guard);
	if (MS_LIKELY(mode > guard))
		return fast_new(ms_real_malloc(size), 0);
	return malloc_other(size, mode, guard);
}

static __attribute__((noinline)) void *calloc_general(size_t n, size_t size)
{
	if (!READY(calloc)) {
		if (size && n > SIZE_MAX / size) {
			errno = ENOMEM;
			return NULL;
		}
		return ms_bootstrap_alloc(n * size, 0);
	}
	void *p;
	GUARDED(p = ms_real_calloc(n, size));
	if (p && COUNTABLE())
		count(p);
	return p;
}

static __attribute__((noinline)) void *calloc_other(size_t n, size_t size, int mode, int guard)
{
	if (CHECKED(mode, guard))
		return fast_new(ms_real_calloc(n, size), 1);
	return calloc_general(n, size);
}

EXPORT void *calloc(size_t n, size_t size)
{
	int mode, guard;
	LOAD_MODE(mode, guard);
	if (MS_LIKELY(mode > guard))
		return fast_new(ms_real_calloc(n, size), 0);
	return calloc_other(n, size, mode, guard);
}

static inline __attribute__((always_inline)) void uncount(void *p)
{
	int64_t n = usable_before_release(p);
	if (n) {
		ms_sample_free(p);
		ms_before_counting();
		ms_cpu_add(MS_MALLOC, -n);
	}
}

void ms_malloc_counted(void *p)
{
	if (p && !ms_bootstrap_owns(p) && COUNTABLE())
		count(p);
}

void ms_malloc_uncounted(void *p)
{
	if (p && !ms_bootstrap_owns(p) && COUNTABLE())
		uncount(p);
}

static __attribute__((noinline)) void release(void *ptr, void (*real)(void *))
{
	if (!ptr || ms_bootstrap_owns(ptr))
		return;
	while (!ms_real_free) /* only while another thread publishes the real functions */
		ms_resolve();
	if (COUNTABLE())
		uncount(ptr);
	GUARDED(real ? real(ptr) : ms_real_free(ptr));
}

static __attribute__((noinline)) void free_sampled(void *ptr)
{
	uint64_t head = glibc_head(ptr);
	if (MS_UNLIKELY(glibc_would_reject(ptr, head))) {
		release(ptr, NULL);
		return;
	}
	ms_sample_forget(ptr);
	uint64_t r = ms_cpu_word_add(-(int64_t)glibc_usable(head));
	if (ms_cpu_shrank_below(r))
		free_below_gate(ptr, r);
	else
		ms_real_free(ptr);
}

static __attribute__((noinline)) void free_other(void *ptr, int mode, int guard)
{
	if (MS_UNLIKELY(ms_tls_flights) && guard == 0)
		ms_jump_freed(ptr); /* an exception object freed at its catch (Rust) */
	if (!CHECKED(mode, guard) || !fast_free(ptr, 1))
		release(ptr, NULL);
}

EXPORT void free(void *ptr)
{
	int mode, guard;
	LOAD_MODE(mode, guard);
	if (MS_LIKELY(mode > guard)) {
		if (fast_free(ptr, 0))
			return;
		mode = 0;
	}
	free_other(ptr, mode, guard);
}

EXPORT void cfree(void *ptr)
{
	release(ptr, ms_real_cfree);
}

EXPORT void free_sized(void *ptr, size_t size)
{
	if (!ptr || ms_bootstrap_owns(ptr))
		return;
	if (!ms_real_free_sized) {
		release(ptr, NULL);
		return;
	}
	if (COUNTABLE())
		uncount(ptr);
	GUARDED(ms_real_free_sized(ptr, size));
}

EXPORT void free_aligned_sized(void *ptr, size_t align, size_t size)
{
	if (!ptr || ms_bootstrap_owns(ptr))
		return;
	if (!ms_real_free_aligned_sized) {
		release(ptr, NULL);
		return;
	}
	if (COUNTABLE())
		uncount(ptr);
	GUARDED(ms_real_free_aligned_sized(ptr, align, size));
}

/* A block from the bootstrap buffer moves to the real allocator on its first resize. */
static void *move_from_bootstrap(void *ptr, size_t size)
{
	void *q = malloc(size);
	if (q) {
		size_t old = ms_bootstrap_size(ptr);
		memcpy(q, ptr, old < size ? old : size);
	}
	return q;
}

/* Counts a successful resize of PTR (OLD usable bytes) into Q, or a realloc(p, 0) that freed. */
static void count_resize(void *ptr, int64_t old, void *q, size_t size)
{
	ms_before_counting();
	if (q) {
		int64_t n = usable(q);
		ms_cpu_add(MS_MALLOC, n - old);
		ms_sample_alloc(q, n);
	} else if (ptr && size == 0)
		ms_cpu_add(MS_MALLOC, -old);
}

static __attribute__((noinline)) void *realloc_general(void *ptr, size_t size)
{
	void *q;
	if (ptr && ms_bootstrap_owns(ptr))
		return move_from_bootstrap(ptr, size);
	if (!READY(realloc))
		return ms_bootstrap_alloc(size, 0);
	int countable = COUNTABLE();
	int64_t old = ptr && countable ? usable_before_release(ptr) : 0;
	if (old)
		ms_sample_free(ptr); /* before the block can go to another thread */
	GUARDED(q = ms_real_realloc(ptr, size));
	if (countable)
		count_resize(ptr, old, q, size);
	return q;
}

static __attribute__((noinline)) void *realloc_other(void *ptr, size_t size, int mode, int guard)
{
	void *q;
	if (CHECKED(mode, guard) && fast_realloc(ptr, size, 1, &q))
		return q;
	return realloc_general(ptr, size);
}

EXPORT void *realloc(void *ptr, size_t size)
{
	void *q;
	int mode, guard;
	LOAD_MODE(mode, guard);
	if (MS_LIKELY(mode > guard)) {
		if (fast_realloc(ptr, size, 0, &q))
			return q;
		mode = 0;
	}
	return realloc_other(ptr, size, mode, guard);
}

EXPORT void *reallocarray(void *ptr, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	if (!ms_real_reallocarray || (ptr && ms_bootstrap_owns(ptr)))
		return realloc(ptr, n * size); // NOLINT(clang-analyzer-optin.portability.UnixAPI): size 0 means free
	int countable = COUNTABLE();
	int64_t old = ptr && countable ? usable_before_release(ptr) : 0;
	if (old)
		ms_sample_free(ptr);
	void *q;
	GUARDED(q = ms_real_reallocarray(ptr, n, size));
	if (countable)
		count_resize(ptr, old, q, n * size);
	return q;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (!READY(posix_memalign)) {
		if (!align || (align & (align - 1)) || align % sizeof(void *))
			return EINVAL;
		*out = ms_bootstrap_alloc(size, align);
		return *out ? 0 : ENOMEM;
	}
	int rc;
	GUARDED(rc = ms_real_posix_memalign(out, align, size));
	if (rc == 0 && *out && COUNTABLE())
		count(*out);
	return rc;
}

#define ALIGNED_WRAPPER(name, params, args, boot_align, boot_size)                                                     \
	EXPORT void *name params                                                                                       \
	{                                                                                                              \
		if (!READY(name))                                                                                      \
			return ms_bootstrap_alloc(boot_size, boot_align);                                              \
		void *p;                                                                                               \
		GUARDED(p = ms_real_##name args);                                                                      \
		if (p && COUNTABLE())                                                                                  \
			count(p);                                                                                      \
		return p;                                                                                              \
	}

ALIGNED_WRAPPER(aligned_alloc, (size_t align, size_t size), (align, size), align, size)
ALIGNED_WRAPPER(memalign, (size_t align, size_t size), (align, size), align, size)
ALIGNED_WRAPPER(valloc, (size_t size), (size), 4096, size)
ALIGNED_WRAPPER(pvalloc, (size_t size), (size), 4096, (size + 4095) & ~(size_t)4095)
