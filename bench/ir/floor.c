/* The floor a counting wrapper cannot go below: forwards malloc and free to the C library, reads
 * the usable size at both ends, one relaxed atomic add on a live counter and a compare-and-swap max
 * on a peak.  Built by the benchmark only (with -fno-plt); bench-ir divides by it. */
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

/* glibc's own entry points: no lookup, no bootstrap. */
void *__libc_malloc(size_t size);
void __libc_free(void *ptr);

static int64_t live, peak;

static void add(int64_t n)
{
	int64_t now = __atomic_add_fetch(&live, n, __ATOMIC_RELAXED);
	int64_t seen = __atomic_load_n(&peak, __ATOMIC_RELAXED);
	while (now > seen && !__atomic_compare_exchange_n(&peak, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

EXPORT void *malloc(size_t size)
{
	void *p = __libc_malloc(size);
	if (p)
		add((int64_t)malloc_usable_size(p));
	return p;
}

EXPORT void free(void *p)
{
	if (!p)
		return;
	add(-(int64_t)malloc_usable_size(p));
	__libc_free(p);
}
