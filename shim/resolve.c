/* Finding the real functions.  dlsym may allocate before malloc is known: those requests are
 * served from a static buffer whose blocks free() recognises and never releases. */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include "hooks.h"
#include "ms.h"

#define MS_HOOK(ret, name, params, args) ret (*ms_real_##name) params;
#include "hooks.def"
#undef MS_HOOK

int ms_counting = 1;
int ms_native_active;
__thread int ms_tls_guard MS_TLS;

static void *(*real_dlsym)(void *, const char *);
static int state; /* 0 unresolved, 1 resolving, 2 done */

#define BOOT_SIZE ((size_t)256 * 1024)
static char boot[BOOT_SIZE] __attribute__((aligned(64)));
static size_t boot_used;

void *ms_bootstrap_alloc(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	if (size > BOOT_SIZE || align > 4096) {
		errno = ENOMEM;
		return NULL;
	}
	size_t old = __atomic_load_n(&boot_used, __ATOMIC_RELAXED), start, end;
	do {
		start = (old + 16 + align - 1) & ~(align - 1); /* 16 bytes before the block hold its size */
		end = start + ((size + 15) & ~(size_t)15);
		if (end > BOOT_SIZE) {
			errno = ENOMEM;
			return NULL;
		}
	} while (!__atomic_compare_exchange_n(&boot_used, &old, end, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	memcpy(boot + start - sizeof(size_t), &size, sizeof size);
	return boot + start; /* static storage is already zeroed: calloc needs nothing more */
}

int ms_bootstrap_owns(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + BOOT_SIZE;
}

size_t ms_bootstrap_size(const void *p)
{
	size_t n;
	memcpy(&n, (const char *)p - sizeof n, sizeof n);
	return n;
}

int ms_resolved(void)
{
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2;
}

static void *find_dlsym(void)
{
	void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	return f ? f : dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

void ms_resolve(void)
{
	int expected = 0;
	if (!__atomic_compare_exchange_n(&state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* done, or in progress: callers use the bootstrap buffer meanwhile */
	int saved = errno;
	ms_tls_guard++;
	real_dlsym = (void *(*)(void *, const char *))find_dlsym();
	/* publish all at once: a half-resolved family would mix allocators */
#define MS_HOOK(ret, name, params, args) ret (*name##_found) params = real_dlsym ? (ret (*) params)real_dlsym(RTLD_NEXT, #name) : NULL;
#include "hooks.def"
#undef MS_HOOK
#define MS_HOOK(ret, name, params, args) __atomic_store_n(&ms_real_##name, name##_found, __ATOMIC_RELEASE);
#include "hooks.def"
#undef MS_HOOK
	ms_tls_guard--;
	__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
	errno = saved;
}

void *ms_real_dlsym(void *handle, const char *name)
{
	if (!real_dlsym)
		ms_resolve();
	return real_dlsym ? real_dlsym(handle, name) : NULL;
}
