/* Allocations made before the real malloc is known (dlsym may allocate while the resolver looks
 * the real functions up): a static buffer whose blocks free() recognises and never releases. */
#include <errno.h>
#include <string.h>
#include "core/ms.h"
#include "intercept/hooks.h"

char ms_boot[MS_BOOT_SIZE] __attribute__((aligned(64))) MS_LARGE;
static size_t boot_used;

void *ms_bootstrap_alloc(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	if (size > MS_BOOT_SIZE || align > 4096) {
		errno = ENOMEM;
		return NULL;
	}
	size_t old = __atomic_load_n(&boot_used, __ATOMIC_RELAXED), start, end;
	do {
		start = (old + 16 + align - 1) & ~(align - 1); /* 16 bytes before the block hold its size */
		end = start + ((size + 15) & ~(size_t)15);
		if (end > MS_BOOT_SIZE) {
			errno = ENOMEM;
			return NULL;
		}
	} while (!__atomic_compare_exchange_n(&boot_used, &old, end, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	memcpy(ms_boot + start - sizeof(size_t), &size, sizeof size);
	return ms_boot + start; /* static storage is already zeroed: calloc needs nothing more */
}

size_t ms_bootstrap_size(const void *p)
{
	size_t n;
	memcpy(&n, (const char *)p - sizeof n, sizeof n);
	return n;
}
