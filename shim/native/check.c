/* The check before a count (native/check.h): the common case in a few loads and no frame of its
 * own.  An allocation made again from the innermost known frame at a call site seen before (same
 * return-address slot and return address) is decided at once: that frame carries a trampoline, so
 * nothing new can be on the stack.  One made through frames not taken in is confirmed by the chain
 * expected next (native/chains.h: one load a frame), or one looked up; only what neither decides
 * looks at the stack (native/look.c).  Runs inside allocation hooks: no allocation, no lock, errno
 * preserved; a signal handler that interrupts it changes nothing (the thread's state is busy). */
#include <errno.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "native/chains.h"
#include "native/check.h"
#include "native/look.h"
#include "native/selfsize.h"

/* Whether a call from SLOT with return address IP comes through a chain remembered for the
 * innermost known frame (still watched), every frame of it still in place.  Every ADOPT_HITS hits
 * of the thread's chains, the chain hit is forgotten instead and its frames taken in at the next
 * look (the chain used most is likely a loop's frames, whose calls are then seen in a few loads);
 * a helper called from a loop looks the same but leaves at once, so each adoption waits longer.
 * A chain through a target's frame is replayed. */
static int chain_seen(struct tstate *s, uintptr_t slot, uintptr_t ip)
{
	struct chain_key *k = expected(s);
	if (chain_holds(k, slot, ip, s->top, unloads_now()))
		trace_follow(s, k);
	else
		k = ms_chain_lookup(s, slot, ip);
	if (!k)
		return 0;
	if (MS_UNLIKELY(k->target))
		return ms_frames_replay(s, k);
	if (MS_LIKELY(!adopt_due(s)))
		return 1;
	ms_chain_adopt(s, k);
	return 0;
}

/* The frame that called into the shim: its return-address slot and return address, found through
 * the cached sizes of the shim frames in between; 0 when one is not known yet. */
static inline int entry_frame(uintptr_t cfa, uintptr_t *slot, uintptr_t *ip)
{
	uintptr_t sp = cfa, ra = load(cfa - 8);
	for (int k = 0; in_self(ra); k++) {
		uintptr_t off = off_lookup(ra);
		if (!off || k == 4)
			return 0;
		sp += off;
		ra = load(sp - 8);
	}
	*slot = sp - 8;
	*ip = ra;
	return 1;
}

/* Whether the innermost known frame is still watched and has called into the shim from SLOT with
 * return address IP before (nothing new can be on the stack in between). */
static inline int seen_before(const struct tstate *s, uintptr_t slot, uintptr_t ip)
{
	const struct frame *top = s->top;
	_Static_assert(NKEYS == 4, "the comparison below names each key");
	return top->key_slot == slot && load(top->slot) == top->watched &&
	       (top->key_ip[0] == ip || top->key_ip[1] == ip || top->key_ip[2] == ip || top->key_ip[3] == ip);
}

/* Everything but a call from a place seen before: the entry frame found through the shim's own
 * frames (SLOT was not the program's), the thread's state made, or a look at the stack. */
static __attribute__((noinline)) void check_slow(uintptr_t *wrapper_slot)
{
	struct tstate *s = ms_tls_frames;
	int saved = errno;
	if (MS_UNLIKELY(!s)) {
		ms_tls_guard++;
		s = state();
		ms_tls_guard--;
		errno = saved;
		if (!s)
			return;
	}
	if (s->busy)
		return;
	uintptr_t slot, ip;
	if (s->n > 0 && entry_frame((uintptr_t)(wrapper_slot + 1), &slot, &ip) && slot < s->f[s->n - 1].slot &&
	    (seen_before(s, slot, ip) || chain_seen(s, slot, ip)))
		return;
	s->busy = 1;
	ms_tls_guard++;
	ms_frames_look(s);
	ms_tls_guard--;
	s->busy = 0;
	errno = saved;
}

/* A call through chain K (verified, found in the trace) that is not a plain hit: a target's
 * frame on the way is taken in, or the chain adopted (its ADOPT_HITS-th hit); else the slow way. */
static __attribute__((noinline)) void check_chains_after(struct tstate *s, uintptr_t *slot, struct chain_key *k)
{
	if (k && k->target && ms_frames_replay(s, k))
		return;
	if (k && !k->target)
		ms_chain_adopt(s, k);
	check_slow(slot);
}

/* A call through chain K, the one expected (verified), that is not a plain hit: a target's frame on
 * the way is taken in, or the chain adopted (its ADOPT_HITS-th hit). */
static __attribute__((noinline)) void check_expected_rare(uintptr_t *slot, struct tstate *s, struct chain_key *k)
{
	trace_follow(s, k);
	check_chains_after(s, slot, k);
}

/* Not the plain chain expected: the one expected through a target's frame, or a chain looked up (no
 * call on the way), else the slow way. */
static __attribute__((noinline)) void check_chains_lookup(uintptr_t *slot, struct tstate *s)
{ /* SLOT first: it stays where ms_native_check received it */
	struct chain_key *k = expected(s);
	if (chain_holds_key(k, (uintptr_t)slot | 1, *slot, s->top, unloads_now())) {
		check_expected_rare(slot, s, k);
		return;
	}
	k = ms_chain_lookup(s, (uintptr_t)slot, *slot);
	if (MS_LIKELY(k && !k->target && !adopt_due(s)))
		return;
	check_chains_after(s, slot, k);
}

/* The common case in a few loads (no frame of its own): the wrapper called again from a place seen
 * before, or through the chain of frames expected next (through no target's frame: see
 * entry_key); else through any chain, or slowly.  Never called while every stage is open on the
 * thread (ms_tls_before_count_idle): no look could change a count then, and no key is added. */
void ms_native_check(uintptr_t *slot)
{
	struct tstate *s = ms_tls_frames;
	if (MS_UNLIKELY(s == NULL)) {
		check_slow(slot);
		return;
	}
	if (seen_before(s, (uintptr_t)slot, *slot)) /* no frame known: top is none, never matching */
		return;
	struct chain_key *k = expected(s);
	if (MS_LIKELY(chain_holds_key(k, (uintptr_t)slot, *slot, s->top, unloads_now()))) {
		if (MS_LIKELY(!adopt_due(s))) {
			trace_follow(s, k);
			return;
		}
		check_expected_rare(slot, s, k);
		return;
	}
	check_chains_lookup(slot, s);
}
