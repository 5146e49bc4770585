/* Finding the real functions.  dlsym may allocate before malloc is known: those requests are
 * served from a static buffer whose blocks free() recognises and never releases. */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "core/ms.h"

#define MS_HOOK(ret, name, params, args) ret (*ms_real_##name) params;
#include "intercept/hooks.def"
#undef MS_HOOK

int ms_counting = 1;
int ms_allocator_is_glibc;
int ms_native_active;
__thread int ms_tls_guard MS_TLS;

static ms_dlsym_fn real_dlsym;
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

/* dlsym lives beside dladdr1 (libc since 2.34, libdl before); a versioned dlvsym of a version
 * the library lacks would fail and allocate its error message. */
ms_dlsym_fn ms_libc_dlsym(void)
{
	static ms_dlsym_fn found;
	ms_dlsym_fn f = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
	if (MS_LIKELY(f != NULL))
		return f;
	f = (ms_dlsym_fn)ms_elf_own_symbol(ms_elf_object_of((const void *)dladdr1), "dlsym");
	if (!f)
		f = (ms_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	__atomic_store_n(&found, f, __ATOMIC_RELEASE);
	return f;
}

static const char *sanitizer;

/* A sanitizer runtime owns malloc when it is the allocator underneath (gcc's shared runtimes) or
 * is linked into the program (clang's static ones); its allocator cannot be asked about blocks
 * before it has initialised, so the shim steps aside in such a program. */
static int find_sanitizer(const struct link_map *allocator)
{
	static const char *const runtimes[][2] = {
		{ "__asan_init", "AddressSanitizer" }, { "__tsan_init", "ThreadSanitizer" },
		{ "__msan_init", "MemorySanitizer" }, { "__hwasan_init", "HWAddressSanitizer" },
		{ "__lsan_init", "LeakSanitizer" }, { "__memprof_init", "MemProfiler" },
	};
	const struct link_map *program = _r_debug.r_map;
	for (size_t i = 0; i < sizeof runtimes / sizeof *runtimes; i++)
		if (ms_elf_own_symbol(allocator, runtimes[i][0]) || ms_elf_own_symbol(program, runtimes[i][0])) {
			sanitizer = runtimes[i][1];
			return 1;
		}
	return 0;
}

const char *ms_sanitizer(void)
{
	return sanitizer;
}

void ms_resolve(void)
{
	int expected = 0;
	if (!__atomic_compare_exchange_n(&state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* done, or in progress: callers use the bootstrap buffer meanwhile */
	int saved = errno;
	ms_tls_guard++;
	real_dlsym = ms_libc_dlsym();
	/* publish all at once: a half-resolved family would mix allocators.  Every MS_HOOK name exists
	 * in the C library, so no lookup fails (a failing dlsym allocates its error message). */
#define MS_HOOK(ret, name, params, args) ret (*name##_found) params = real_dlsym ? (ret (*) params)real_dlsym(RTLD_NEXT, #name) : NULL;
#define MS_HOOK_OPTIONAL(ret, name, params, args) ret (*name##_found) params = NULL;
#include "intercept/hooks.def"
#undef MS_HOOK_OPTIONAL
#undef MS_HOOK
	const struct link_map *allocator = ms_elf_object_of((const void *)malloc_found);
	ms_allocator_is_glibc = allocator && allocator == ms_elf_object_of((const void *)getpid);
	if (find_sanitizer(allocator))
		__atomic_store_n(&ms_counting, 0, __ATOMIC_RELEASE); /* before any wrapper can count */
#define MS_HOOK(ret, name, params, args)
#define MS_HOOK_OPTIONAL(ret, name, params, args) name##_found = (ret (*) params)ms_elf_own_symbol(allocator, #name);
#include "intercept/hooks.def"
#undef MS_HOOK_OPTIONAL
#undef MS_HOOK
#define MS_HOOK(ret, name, params, args) __atomic_store_n(&ms_real_##name, name##_found, __ATOMIC_RELEASE);
#include "intercept/hooks.def"
#undef MS_HOOK
	ms_tls_guard--;
	__atomic_store_n(&state, 2, __ATOMIC_RELEASE);
	errno = saved;
}

int ms_resolve_wait(void)
{
	ms_resolve();
	for (int i = 0; !ms_resolved() && ms_tls_guard == 0 && i < 100000; i++)
		sched_yield(); /* another thread is publishing them */
	return ms_resolved() ? 0 : -1;
}

void *ms_real_dlsym(void *handle, const char *name)
{
	if (!real_dlsym)
		ms_resolve();
	return real_dlsym ? real_dlsym(handle, name) : NULL;
}
