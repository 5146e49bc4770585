/* Entering a stage at the call (native/enter.h): the known frames below the caller's stack pointer
 * are gone (popped), the new frame becomes the innermost known one with its stage trampoline, so
 * its return, a longjmp over it, an exception or its thread's exit closes the stage as for a frame
 * found on the stack (native/leave.c).  Runs in the GOT entry before the real function: no
 * allocation, no lock; not from a signal handler inside these files or while an exception is in
 * flight. */
#include "native/enter.h"
#include "native/frames.h"

void ms_native_enter_call(int spec, uintptr_t *slot)
{
	struct tstate *s = state();
	if (!s || s->busy || s->unwinding)
		return; /* a signal handler inside these files, or an exception in flight: not seen */
	s->busy = 1;
	flush_deferred(s);
	while (s->n > 0 && s->f[s->n - 1].slot <= (uintptr_t)slot)
		ms_frames_pop_stale(s, MS_END_JUMPED); /* below the caller's stack pointer: gone */
	if (s->n < MAX_FRAMES) {
		if (s->watch_at == s->n - 1)
			ms_frames_unwatch(s); /* the new frame is the innermost: it needs no marker above it */
		struct frame *f = &s->f[s->n];
		f->slot = (uintptr_t)slot;
		f->ra = *slot;
		f->stage = spec;
		set_tramp(f, -1);
		int t = take_tramp(s);
		if (t < 0 || ms_frames_enter(s, spec) < 0) {
			give_tramp(s, t);
			f->stage = -1;
		} else {
			ms_pool_set_ra(t, f->ra);
			store(f->slot, ms_tramp_addr(t));
			set_tramp(f, t);
		}
		set_n(s, s->n + 1);
		STAT(entered);
	}
	s->busy = 0;
}
