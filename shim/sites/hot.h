/* The hot-path face of call-site sampling (sites/): what the wrappers in intercept/ and cuda/ call.
 * The one header of sites/ that lower layers may include (tools/lint.sh lets them): it depends on
 * core/ only, and everything past one subtraction and one test is out of line in sites/sample.c.
 *
 *   ms_sites_alloc(p, usable)   after counting a new block (malloc family): one TLS subtraction and
 *                               a branch; a thread whose byte budget runs out takes a sample;
 *   ms_sites_free(p)            before a block is released: one multiply, one load, one bit test
 *                               (a filter of sampled addresses); a hit looks the block up;
 *   ms_sites_cpu_high(now)      optional: the CPU counter reached a new high NOW (a hot path that
 *                               detects new highs may call it to tighten the copy at a stage's
 *                               peak; samples call it themselves);
 *   ms_sites_gpu_alloc/free     every device allocation and free (unsampled). */
#ifndef MS_SITES_HOT_H
#define MS_SITES_HOT_H

#include <stdint.h>
#include "core/ms.h"

#define MS_SITES_FILTER_BITS 16

/* Bytes this thread may still allocate before its next sample (drawn from an exponential
 * distribution; INT64_MAX/2 while sampling is off). */
extern __thread int64_t ms_sites_left MS_TLS;
/* One bit per address hash, set while a sampled block may live there (no false negatives): 8 KiB,
 * so the read on every free stays in the L1 cache (a byte per hash, 64 KiB, did not). */
extern uint64_t ms_sites_filter[(1u << MS_SITES_FILTER_BITS) / 64];

void ms_sites_sample(void *p, int64_t usable);
void ms_sites_forget(void *p);
void ms_sites_cpu_high(int64_t now);
void ms_sites_gpu_alloc(uint64_t dptr, int64_t bytes);
void ms_sites_gpu_free(uint64_t dptr);

/* An address mixed: the filter takes its leading bits, and so does the live table (sample.c). */
static inline uint64_t ms_sites_mix(uintptr_t p)
{
	return p * 0x9e3779b97f4a7c15ULL;
}

static inline unsigned ms_sites_hash(uintptr_t p)
{
	return (unsigned)(ms_sites_mix(p) >> (64 - MS_SITES_FILTER_BITS));
}

static inline void ms_sites_alloc(void *p, int64_t usable)
{
	if (MS_UNLIKELY((ms_sites_left -= usable) < 0))
		ms_sites_sample(p, usable);
}

/* Non-zero when P may be a sampled block (the filter: no false negatives). */
static inline int ms_sites_maybe_sampled(const void *p)
{
	unsigned h = ms_sites_hash((uintptr_t)p);
	return (__atomic_load_n(&ms_sites_filter[h / 64], __ATOMIC_RELAXED) >> (h % 64)) & 1;
}

static inline void ms_sites_free(void *p)
{
	if (MS_UNLIKELY(ms_sites_maybe_sampled(p)))
		ms_sites_forget(p);
}

#endif
