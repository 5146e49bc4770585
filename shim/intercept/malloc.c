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
#include "sites/hot.h"

/* Not declared by every C library's headers. */
void cfree(void *ptr);
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t align, size_t size);

void (*ms_before_count)(void);

static inline __attribute__((always_inline)) void count(void *p, int sign)
{
	ms_before_counting();
	int64_t n = (int64_t)malloc_usable_size(p);
	ms_cpu_add(MS_MALLOC, sign * n);
	ms_sites_alloc(p, n);
}

/* glibc rejects a pointer it never gave out ("free(): invalid pointer") by two cheap checks on its
 * chunk header before using it; malloc_usable_size trusts the header and may fault first.  Such a
 * pointer is left uncounted for glibc to diagnose. */
static inline int glibc_would_reject(const void *p)
{
	uintptr_t chunk = (uintptr_t)p - 16;
	uint64_t size;
	memcpy(&size, (const char *)p - 8, sizeof size);
	size &= ~(uint64_t)7;
	return ((uintptr_t)p & 15) || chunk > (uintptr_t)0 - size;
}

/* Usable bytes of a block about to be freed or resized (0: not countable). */
static inline int64_t usable_before_release(void *p)
{
	if (ms_allocator_is_glibc && MS_UNLIKELY(glibc_would_reject(p)))
		return 0;
	return (int64_t)malloc_usable_size(p);
}

/* Real function ready?  If not, the caller serves the request from the bootstrap buffer. */
#define READY(fn) (MS_LIKELY(ms_real_##fn != NULL) || (ms_resolve(), ms_real_##fn != NULL))

/* Runs CALL with the guard raised (an allocator underneath calling mmap is not counted twice),
 * then counts RESULT when this is the outermost wrapped call. */
#define GUARDED(call) do { ms_tls_guard++; call; ms_tls_guard--; } while (0)
#define COUNTABLE() (ms_tls_guard == 0 && ms_counting)

EXPORT void *malloc(size_t size)
{
	if (!READY(malloc))
		return ms_bootstrap_alloc(size, 0);
	void *p;
	GUARDED(p = ms_real_malloc(size));
	if (p && COUNTABLE())
		count(p, 1);
	return p;
}

EXPORT void *calloc(size_t n, size_t size)
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
		count(p, 1);
	return p;
}

static inline __attribute__((always_inline)) void uncount(void *p)
{
	int64_t n = usable_before_release(p);
	if (n) {
		ms_sites_free(p);
		ms_before_counting();
		ms_cpu_add(MS_MALLOC, -n);
	}
}

static void release(void *ptr, void (*real)(void *))
{
	if (!ptr || ms_bootstrap_owns(ptr))
		return;
	while (!ms_real_free) /* only while another thread publishes the real functions */
		ms_resolve();
	if (COUNTABLE())
		uncount(ptr);
	GUARDED(real ? real(ptr) : ms_real_free(ptr));
}

EXPORT void free(void *ptr)
{
	release(ptr, NULL);
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
		int64_t n = (int64_t)malloc_usable_size(q);
		ms_cpu_add(MS_MALLOC, n - old);
		ms_sites_alloc(q, n);
	} else if (ptr && size == 0)
		ms_cpu_add(MS_MALLOC, -old);
}

EXPORT void *realloc(void *ptr, size_t size)
{
	if (ptr && ms_bootstrap_owns(ptr))
		return move_from_bootstrap(ptr, size);
	if (!READY(realloc))
		return ms_bootstrap_alloc(size, 0);
	int countable = COUNTABLE();
	int64_t old = ptr && countable ? usable_before_release(ptr) : 0;
	if (old)
		ms_sites_free(ptr); /* before the block can go to another thread */
	void *q;
	GUARDED(q = ms_real_realloc(ptr, size));
	if (countable)
		count_resize(ptr, old, q, size);
	return q;
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
		ms_sites_free(ptr);
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
		count(*out, 1);
	return rc;
}

#define ALIGNED_WRAPPER(name, params, args, boot_align, boot_size)        \
	EXPORT void *name params                                           \
	{                                                                  \
		if (!READY(name))                                          \
			return ms_bootstrap_alloc(boot_size, boot_align);  \
		void *p;                                                   \
		GUARDED(p = ms_real_##name args);                          \
		if (p && COUNTABLE())                                      \
			count(p, 1);                                       \
		return p;                                                  \
	}

ALIGNED_WRAPPER(aligned_alloc, (size_t align, size_t size), (align, size), align, size)
ALIGNED_WRAPPER(memalign, (size_t align, size_t size), (align, size), align, size)
ALIGNED_WRAPPER(valloc, (size_t size), (size), 4096, size)
ALIGNED_WRAPPER(pvalloc, (size_t size), (size), 4096, (size + 4095) & ~(size_t)4095)
