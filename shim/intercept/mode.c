/* The malloc family's mode (ms_malloc_fast: intercept/hooks.h) and the hook before counting it
 * follows (ms_before_count): the fast path while the real functions are glibc's, counting is on
 * and no hook is set; the checked fast path with a hook; else the general path.  Below the
 * wrappers and the resolver both: intercept/resolve.c tells it when the real functions are known,
 * and never calls the wrappers' file. */
#include <stdint.h>
#include "core/ms.h"
#include "core/process.h"
#include "intercept/hooks.h"

void (*ms_before_count)(uintptr_t *slot);
__thread int ms_tls_before_count_idle MS_TLS;
int ms_malloc_fast;

static struct {
	int glibc_resolved; /* the real functions are published, and glibc's allocator is underneath */
} mode_st;

void ms_malloc_fast_update(void)
{
	int fast = 0;
	if (__atomic_load_n(&mode_st.glibc_resolved, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&ms_counting, __ATOMIC_ACQUIRE))
		fast = __atomic_load_n(&ms_before_count, __ATOMIC_ACQUIRE) ? MS_FAST_CHECKED : MS_FAST_ON;
	__atomic_store_n(&ms_malloc_fast, fast, __ATOMIC_RELEASE);
}

void ms_malloc_fast_resolved(int glibc)
{
	__atomic_store_n(&mode_st.glibc_resolved, glibc, __ATOMIC_RELEASE);
	ms_malloc_fast_update();
}

void ms_set_before_count(void (*fn)(uintptr_t *slot))
{
	__atomic_store_n(&ms_before_count, fn, __ATOMIC_RELEASE);
	ms_malloc_fast_update();
}
