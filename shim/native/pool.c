/* The trampoline pool: which trampolines are taken, and the return address each one stands for
 * (ms_tramp_ra[i], the word trampoline i and every unwinder read, so they can never disagree). */
#include <string.h>
#include "core/ms.h"
#include "native/native.h"

#define WORDS (MS_NTRAMP / 64)
#define BLOCK_WORD 8 /* offset of the block's link-time distance to its return-address word */

static uint64_t used[WORDS] MS_LARGE;
static unsigned hint;

uintptr_t ms_pool_ra(int i)
{
	return __atomic_load_n(&ms_tramp_ra[i], __ATOMIC_RELAXED);
}

void ms_pool_set_ra(int i, uintptr_t ra)
{
	__atomic_store_n(&ms_tramp_ra[i], ra, __ATOMIC_RELAXED);
}

int ms_pool_take(void)
{
	unsigned start = __atomic_fetch_add(&hint, 1, __ATOMIC_RELAXED);
	for (unsigned k = 0; k < WORDS; k++) {
		unsigned w = (start + k) % WORDS;
		uint64_t v = __atomic_load_n(&used[w], __ATOMIC_RELAXED);
		while (~v) {
			int bit = __builtin_ctzll(~v);
			if (__atomic_compare_exchange_n(&used[w], &v, v | (1ULL << bit), 0, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				return (int)(w * 64 + (unsigned)bit);
		}
	}
	return -1;
}

void ms_pool_give(int i)
{
	if (i >= 0 && i < MS_NTRAMP)
		__atomic_fetch_and(&used[i / 64], ~(1ULL << (i % 64)), __ATOMIC_RELEASE);
}

/* Block I's word must lead to ms_tramp_ra[I], as the unwind data reads it. */
static int block_ok(int i)
{
	const unsigned char *word = (const unsigned char *)ms_tramp_base + (size_t)i * MS_TRAMP_SIZE + BLOCK_WORD;
	int64_t dist;
	memcpy(&dist, word, sizeof dist);
	return (uintptr_t)word + (uintptr_t)dist == (uintptr_t)&ms_tramp_ra[i];
}

int ms_pool_init(void)
{
	for (int i = 0; i < MS_NTRAMP; i++)
		if (!block_ok(i))
			return -1;
	return 0;
}
