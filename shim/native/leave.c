/* Leaving (native/leave.h): a known frame's stage closes exactly when its function returns (its
 * trampoline fires), unwinds (an exception, a Rust panic, a forced unwind: the personality the
 * trampolines' unwind entries name) or is jumped over (longjmp); the frames above it went before
 * it.  A trampoline the unwinder has still to read is given back only after (deferred).  Runs in
 * trampolines, the unwinder's personality calls and longjmp wrappers: no allocation, no lock,
 * errno preserved. */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "native/frames.h"
#include "native/leave.h"

/* Frame K has gone (returned or unwound): everything above it went before it. */
static void drop_to(struct tstate *s, int k, int t, int unwinding)
{
	while (s->n - 1 > k) /* gone before it without their trampolines: jumped over, or unwound */
		ms_frames_pop_stale(s, unwinding ? MS_END_UNWOUND : MS_END_JUMPED);
	struct frame *f = &s->f[k];
	if (f->stage >= 0)
		ms_frames_leave(s, f->stage, unwinding ? MS_END_UNWOUND : MS_END_RETURNED);
	if (t == s->watch)
		s->watch_at = -1;
	else if (unwinding)
		defer(s, t); /* the unwinder reads the return address after we return */
	else
		give_tramp(s, t);
	set_n(s, k);
}

/* Called by the trampoline (ms_tramp_handlers): the function that returned into trampoline
 * BLOCK_RET - 6 has left; returns the address to continue at. */
static uintptr_t tramp_fired(uintptr_t block_ret)
{
	int t = (int)((block_ret - (uintptr_t)ms_tramp_base - 6) / MS_TRAMP_SIZE);
	uintptr_t ra = ms_pool_ra(t);
	int saved = errno;
	struct tstate *s = ms_tls_frames;
	ms_tls_guard++;
	STAT(fired);
	if (s && !s->busy) {
		s->busy = 1;
		flush_deferred(s);
		int k = find_tramp(s, t);
		if (k >= 0) {
			drop_to(s, k, t, 0);
			if (!s->unwinding)
				ms_frames_ensure_watch(s);
		} else if (t != s->watch) { /* a retired trampoline: its frame did return after all */
			if (t == s->spare)
				s->spare = -1; /* the pool's again, and only the pool's */
			ms_pool_give(t);
		}
		s->busy = 0;
	}
	ms_tls_guard--;
	errno = saved;
	return ra;
}

#define URC_CONTINUE_UNWIND 8
#define UA_CLEANUP_PHASE 2

/* Called by the C++ runtime's unwinder (libgcc) for each trampoline frame an exception or a forced
 * unwind (pthread_exit, cancellation) passes: the function is leaving without returning. */
static int personality(int version, int actions, uint64_t cls, void *exc, void *ctx)
{
	if (!(actions & UA_CLEANUP_PHASE))
		return URC_CONTINUE_UNWIND;
	static struct ms_scoped get_ip_real = MS_SCOPED("_Unwind_GetIP");
	/* the unwinder calling us is the one whose context CTX is (libgcc_s may be loaded locally) */
	uintptr_t (*get_ip)(void *) = (uintptr_t(*)(void *))ms_resolve_scoped(&get_ip_real, MS_CALLER(), NULL);
	int saved = errno;
	ms_tls_guard++;
	struct tstate *s = ms_tls_frames;
	if (s && !s->busy) {
		s->busy = 1;
		STAT(unwound);
		flush_deferred(s);
		int t = get_ip ? ms_tramp_index(get_ip(ctx)) : -1;
		int k = t >= 0 ? find_tramp(s, t) : -1;
		if (!get_ip) /* no way to ask: the innermost trampoline is the one being passed */
			for (k = s->n - 1; k >= 0 && s->f[k].tramp < 0; k--)
				;
		if (k >= 0)
			drop_to(s, k, s->f[k].tramp, 1);
		s->busy = 0;
	}
	ms_tls_guard--;
	errno = saved;
	return URC_CONTINUE_UNWIND;
}

void ms_native_discard_below(uintptr_t target_sp)
{
	struct tstate *s = ms_tls_frames;
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	if (!s || s->busy || target_sp <= here || (target_sp > s->stack_top && (s->n == 0 || target_sp > s->f[0].slot)))
		return; /* not a jump up this thread's stack (another stack: leave everything) */
	int saved = errno;
	ms_tls_guard++;
	s->busy = 1;
	STAT(longjmps);
	flush_deferred(s);
	while (s->n > 0 && s->f[s->n - 1].slot < target_sp) {
		set_n(s, s->n - 1);
		struct frame *f = &s->f[s->n];
		if (f->tramp < 0)
			continue;
		if (f->stage >= 0)
			ms_frames_leave(s, f->stage, MS_END_JUMPED);
		if (f->tramp == s->watch)
			s->watch_at = -1;
		else
			give_tramp(s, f->tramp);
	}
	s->busy = 0;
	ms_tls_guard--;
	errno = saved;
}

/* While a C++ exception is in flight (from _Unwind_RaiseException to __cxa_begin_catch), no return
 * address may be replaced or restored: the unwinder's second phase recognises the handler's frame
 * by its canonical frame address as computed in the first phase, and a trampoline frame appearing
 * or disappearing in between (cleanups allocate) would shift it.  Nested exceptions count. */
void ms_native_unwind_begin(void)
{
	struct tstate *s = ms_tls_frames;
	if (s)
		s->unwinding++;
}

void ms_native_unwind_end(void)
{
	struct tstate *s = ms_tls_frames;
	if (s && s->unwinding > 0)
		s->unwinding--;
}

/* Thread exit: the frames left (the thread's start routine's callers) get their return addresses
 * back and every trampoline returns to the pool. */
static void thread_gone(void *arg)
{
	struct tstate *s = arg;
	if (!s || s != ms_tls_frames)
		return;
	s->busy = 1;
	flush_deferred(s);
	while (s->n > 0) {
		set_n(s, s->n - 1);
		struct frame *f = &s->f[s->n];
		if (f->tramp < 0)
			continue;
		if (load(f->slot) == ms_tramp_addr(f->tramp))
			store(f->slot, f->ra);
		if (f->stage >= 0)
			ms_frames_leave(s, f->stage, MS_END_UNWOUND); /* the thread ended without their return */
		if (f->tramp != s->watch)
			ms_pool_give(f->tramp);
	}
	if (s->watch >= 0)
		ms_pool_give(s->watch);
	if (s->spare >= 0)
		ms_pool_give(s->spare);
	ms_tls_frames = NULL;
	syscall(SYS_munmap, s, sizeof *s);
}

int ms_frames_init(void)
{
	ms_tramp_handlers.on_return = tramp_fired;
	ms_tramp_handlers.on_unwind = personality;
	return ms_frames_state_init(thread_gone);
}
