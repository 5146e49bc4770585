/* The real functions behind every wrapper (filled by resolve.c from hooks.def). */
#ifndef MS_HOOKS_H
#define MS_HOOKS_H

#include <stddef.h>
#include <sys/types.h>
#include "ms.h"

#define MS_HOOK(ret, name, params, args) extern ret (*ms_real_##name) params;
#include "hooks.def"
#undef MS_HOOK

/* Finds the real functions once; before that, allocations come from a static buffer. */
void ms_resolve(void);
int ms_resolved(void);
void *ms_bootstrap_alloc(size_t size, size_t align);
int ms_bootstrap_owns(const void *p);
size_t ms_bootstrap_size(const void *p);

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
