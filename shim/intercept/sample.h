/* The hot half of call-site sampling, owned by the wrappers that run it (malloc.c, mmap.c): a
 * per-thread countdown of bytes to the next sample and a one-bit filter of sampled addresses.  What
 * a sample is (the stack, the tables) is sites/'s: it registers its slow paths with ms_set_sampler
 * at start, the way native/ registers ms_before_count, so these wrappers never call up.
 *
 *   ms_sample_alloc(p, usable)  after counting a new block: one TLS subtraction, a compare with
 *                               the floor and a branch; a thread whose byte budget falls below the
 *                               floor enters ms_sample_take;
 *   ms_sample_free(p)           before a block is released: one multiply, one load, one bit test;
 *                               a hit enters ms_sample_forget.
 * Only those two slow entries make an indirect call (to the registered sampler): nothing is added
 * to the unsampled path. */
#ifndef MS_INTERCEPT_SAMPLE_H
#define MS_INTERCEPT_SAMPLE_H

#include <stdint.h>
#include "core/ms.h"

#define MS_SAMPLE_FILTER_BITS 16

/* Bytes this thread may still allocate before its next sample (the sampler draws them; INT64_MAX/2
 * while sampling is off). */
extern __thread int64_t ms_sample_left MS_TLS;
/* The countdown's floor, one for every thread: 0, or MS_SAMPLE_EVERY while every allocation is
 * recorded (MEMSHIM_SITES=exact, or a stage of exact:STAGE open), so each thread's next allocation
 * enters the sampler at once, whatever its countdown (a thread can reset only its own).  Element
 * 0; the rest pads its line, so no variable written often shares the line every allocation reads. */
#define MS_SAMPLE_EVERY INT64_MAX
extern int64_t ms_sample_floor[8] __attribute__((visibility("hidden"))); /* read without the GOT */
/* One bit per address hash, set by the sampler while a sampled block may live there (no false
 * negatives): 8 KiB, so the read on every free stays in the L1 cache (a byte per hash, 64 KiB, did
 * not). */
extern uint64_t ms_sample_filter[(1u << MS_SAMPLE_FILTER_BITS) / 64];

/* The sampler's slow paths (sites/sample.c registers them):
 *   take(p, usable, sp, rbp)  the countdown ran out at block P of USABLE bytes; SP is the wrapper's
 *                             stack pointer after ms_sample_take returns and RBP its rbp, so a stack
 *                             walk starts at the wrapper, not in the sampling code; returns P (a
 *                             wrapper that returns the block can enter it by a tail call);
 *   forget(p)                 block P, whose filter bit is set, is being released. */
typedef void *(*ms_sample_take_fn)(void *p, int64_t usable, uintptr_t sp, uintptr_t rbp);
typedef void (*ms_sample_forget_fn)(void *p);
void ms_set_sampler(ms_sample_take_fn take, ms_sample_forget_fn forget);

/* The slow entries: an assembly stub that passes SP and RBP on to the registered take (or, while
 * none is, to ms_sample_rest), and forget's, called from the wrapper itself (no stub between). */
void *ms_sample_take(void *p, int64_t usable);
extern ms_sample_forget_fn ms_sample_forget_hook __attribute__((visibility("hidden")));
static inline void ms_sample_forget(void *p)
{
	ms_sample_forget_fn f = __atomic_load_n(&ms_sample_forget_hook, __ATOMIC_ACQUIRE);
	if (f) /* always set once a filter bit is */
		f(p);
}
/* No sampler yet, or sampling off: this thread looks again after 1 MiB, or never when MEMSHIM_SITES
 * or MEMSHIM_DISABLE say it is off for good. */
void ms_sample_rest(void);

/* An address mixed: the filter takes its leading bits, and so does the sampler's live table. */
static inline uint64_t ms_sample_mix(uintptr_t p)
{
	return p * 0x9e3779b97f4a7c15ULL;
}

static inline unsigned ms_sample_hash(uintptr_t p)
{
	return (unsigned)(ms_sample_mix(p) >> (64 - MS_SAMPLE_FILTER_BITS));
}

/* Takes USABLE bytes off this thread's countdown: non-zero when the sampler must see the block. */
static inline int ms_sample_due(int64_t usable)
{
	/* a plain read (an aligned word: atomic on x86), so it is one cmp with memory */
	return (ms_sample_left -= usable) < ms_sample_floor[0];
}

/* Whether every allocation is recorded now (the sampler's take looks). */
static inline int ms_sample_every(void)
{
	return __atomic_load_n(&ms_sample_floor[0], __ATOMIC_RELAXED) != 0; /* 0 or MS_SAMPLE_EVERY */
}

/* Every allocation of every thread recorded from now on (EVERY), or sampling as before. */
void ms_sample_set_every(int every);

static inline void ms_sample_alloc(void *p, int64_t usable)
{
	if (MS_UNLIKELY(ms_sample_due(usable)))
		ms_sample_take(p, usable);
}

/* Non-zero when P may be a sampled block (the filter: no false negatives). */
static inline int ms_sample_maybe(const void *p)
{
	unsigned h = ms_sample_hash((uintptr_t)p);
	return (__atomic_load_n(&ms_sample_filter[h / 64], __ATOMIC_RELAXED) >> (h % 64)) & 1;
}

static inline void ms_sample_free(void *p)
{
	if (MS_UNLIKELY(ms_sample_maybe(p)))
		ms_sample_forget(p);
}

#endif
