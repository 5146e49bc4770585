/* The real functions behind every wrapper (filled by resolve.c from hooks.def). */
#ifndef MS_HOOKS_H
#define MS_HOOKS_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include "core/ms.h"

#define MS_HOOK(ret, name, params, args) extern ret (*ms_real_##name) params;
#include "intercept/hooks.def"
#undef MS_HOOK

/* Finds the real functions once; before that, allocations come from a static buffer. */
void ms_resolve(void);
int ms_resolved(void);
/* Resolves, or waits for the thread that is resolving; 0 once the real functions are known. */
int ms_resolve_wait(void);
/* The sanitizer whose runtime owns malloc ("AddressSanitizer", ...), or NULL. */
const char *ms_sanitizer(void);
/* The C library's own dlsym (ours wraps the public one), found without any failing lookup. */
typedef void *(*ms_dlsym_fn)(void *, const char *);
ms_dlsym_fn ms_libc_dlsym(void);
void *ms_bootstrap_alloc(size_t size, size_t align);
int ms_bootstrap_owns(const void *p);
size_t ms_bootstrap_size(const void *p);

/* Non-zero when the real malloc is the C library's own (glibc's chunk layout may be relied on). */
extern int ms_allocator_is_glibc;

/* Zero stops all counting (disabled, secure mode, or an unfollowed child). */
extern int ms_counting;

/* Native stages (native_stages.c): set once symbols named in MEMSHIM_STAGES were resolved.  Every
 * counted allocation or free first lets the detector look at the stack, so memory moved inside a
 * stage function is attributed to its stage. */
extern int ms_native_active;
void ms_native_check(void) __attribute__((weak));

static inline void ms_native_before_count(void)
{
	if (MS_UNLIKELY(__atomic_load_n(&ms_native_active, __ATOMIC_RELAXED)) && ms_native_check)
		ms_native_check();
}

#endif
