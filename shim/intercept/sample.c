/* The hot state of call-site sampling and its two slow entries (see sample.h).  The sampler itself
 * (sites/sample.c) is registered at start; until then, and in a process that never samples, the
 * countdown only rests. */
#include "core/config.h"
#include "intercept/sample.h"

__thread int64_t ms_sample_left MS_TLS;
uint64_t ms_sample_filter[(1u << MS_SAMPLE_FILTER_BITS) / 64] __attribute__((aligned(4096))) MS_LARGE;

/* Read on every allocation, written only when an exact window opens or closes. */
int64_t ms_sample_floor[8] __attribute__((aligned(64)));

void ms_sample_set_every(int every)
{
	__atomic_store_n(&ms_sample_floor[0], every ? MS_SAMPLE_EVERY : 0, __ATOMIC_RELAXED);
}

void ms_sample_rest(void)
{
	ms_sample_left = ms_cfg.sites && !ms_cfg.disabled ? 1 << 20 : INT64_MAX / 2;
}

static void *take_none(void *p, int64_t usable, uintptr_t sp, uintptr_t rbp)
{
	(void)usable, (void)sp, (void)rbp;
	ms_sample_rest();
	return p;
}

/* Read by the stub below (one indirect jump, on the sampled path only); not static, so the
 * assembly can name it (hidden like every symbol of ours). */
ms_sample_take_fn ms_sample_take_hook = take_none;
ms_sample_forget_fn ms_sample_forget_hook;

void ms_set_sampler(ms_sample_take_fn take, ms_sample_forget_fn forget)
{
	__atomic_store_n(&ms_sample_forget_hook, forget, __ATOMIC_RELEASE);
	__atomic_store_n(&ms_sample_take_hook, take ? take : take_none, __ATOMIC_RELEASE);
}

/* ms_sample_take(p, usable): passes the caller's stack pointer after return and rbp on to the
 * registered take, so its stack walk starts at the wrapper instead of stepping through the
 * sampling code's own frames. */
__asm__(".pushsection .text\n"
	".globl ms_sample_take\n"
	".hidden ms_sample_take\n"
	".type ms_sample_take, @function\n"
	"ms_sample_take:\n"
	"	.cfi_startproc\n"
	"	leaq 8(%rsp), %rdx\n"
	"	movq %rbp, %rcx\n"
	"	jmp *ms_sample_take_hook(%rip)\n"
	"	.cfi_endproc\n"
	".size ms_sample_take, .-ms_sample_take\n"
	".popsection\n");
