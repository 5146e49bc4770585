/* The chains (native/chains.c): the ways up from a call into the shim to the innermost known frame
 * through frames not taken in (a library's call tree under a frame that lasts, rebuilt at the same
 * places call after call), remembered by their slots and return addresses so the same call is
 * confirmed with one load a frame instead of a walk; and the trace, the chains hit in order, so the
 * one expected next is checked without a look-up.  The checks here are inlined into the check
 * before every count (native/check.c): each is a few loads and compares, no call. */
#ifndef MS_NATIVE_CHAINS_H
#define MS_NATIVE_CHAINS_H

#include "intercept/hooks.h"
#include "native/frames.h"

/* Where the chains of calls from SLOT with return address IP under the known frame at TOP_SLOT
 * are kept: their set, and the tag byte (never 0) their ways carry. */
static inline struct chain_set *chain_set(struct tstate *s, uintptr_t slot, uintptr_t ip, uintptr_t top_slot,
					  uint64_t *tag)
{
	_Static_assert(CHAIN_SETS == 128, "the hash's top 7 bits");
	uint64_t h = (ip ^ (slot ^ top_slot) << 9) * 0x9e3779b97f4a7c15ULL;
	*tag = (uint8_t)(h >> 32) | 1u;
	return &s->chains[h >> 57];
}

/* Ways of SET whose tag byte is TAG, a bit 7 of their byte each (a byte above a match may be set
 * too: every candidate is checked in full). */
static inline uint64_t chain_candidates(const struct chain_set *set, uint64_t tag)
{
	const uint64_t ones = 0x0101010101010101ULL;
	uint64_t x = set->tags ^ tag * ones;
	return (x - ones) & ~x & (ones << 7);
}

/* Whether every frame of chain K still holds its return address, innermost first (chains of one
 * call site and known frame part where their callers do): one load and compare a frame, unrolled
 * (this is most of a check through a library's call tree). */
static inline __attribute__((always_inline)) int chain_frames_hold(const struct chain_key *k)
{
	_Static_assert(CHAIN_MAX == 16, "one case per frame below");
	const struct chain_frame *f = k->fr;
/* clang-format off */
#define ONE(i) if (load(f[i].slot) != f[i].ra) return 0; __attribute__((fallthrough))
	switch (k->n) {
	case 16: ONE(0); case 15: ONE(1); case 14: ONE(2); case 13: ONE(3);
	case 12: ONE(4); case 11: ONE(5); case 10: ONE(6); case 9: ONE(7);
	case 8: ONE(8); case 7: ONE(9); case 6: ONE(10); case 5: ONE(11);
	case 4: ONE(12); case 3: ONE(13); case 2: ONE(14); case 1: ONE(15);
	case 0: break;
	default: __builtin_unreachable(); /* add_chain keeps n within CHAIN_MAX: no range check */
	}
#undef ONE
	/* clang-format on */
	return 1;
}

static inline uintptr_t entry_slot(const struct chain_key *k)
{
	return k->entry_key & ~(uintptr_t)1;
}

/* Whether chain K, its entry_key KEY (a slot, bit 0 set for a chain through a target's frame), leads
 * from there and IP to the innermost known frame TOP, still watched, every one of its frames still
 * in place.  TOP's slot is read only once K is known to be made under it (TOP is none, slot 0,
 * while no frame is known: no chain's top_slot is 0). */
static inline __attribute__((always_inline)) int chain_holds_key(const struct chain_key *k, uintptr_t key, uintptr_t ip,
								 const struct frame *top, unsigned unloads)
{
	return k->entry_ip == ip && k->entry_key == key && k->top_slot == top->slot && k->unloads == unloads &&
	       load(top->slot) == top->watched && chain_frames_hold(k);
}

/* The same for a call from SLOT, through a target's frame or not. */
static inline __attribute__((always_inline)) int chain_holds(const struct chain_key *k, uintptr_t slot, uintptr_t ip,
							     const struct frame *top, unsigned unloads)
{
	return chain_holds_key(k, entry_slot(k) == slot ? k->entry_key : ~(uintptr_t)0, ip, top, unloads);
}

/* The way of SET (tag TAG) holding the chain of the call from SLOT with return address IP up to the
 * innermost known frame TOP, intact, or NULL. */
static inline __attribute__((always_inline)) struct chain_key *
chain_find(struct chain_set *set, uint64_t tag, uintptr_t slot, uintptr_t ip, const struct frame *top, unsigned unloads)
{
	for (uint64_t m = chain_candidates(set, tag); m; m &= m - 1) {
		struct chain_key *k = &set->way[__builtin_ctzll(m) >> 3];
		if (chain_holds(k, slot, ip, top, unloads))
			return k;
	}
	return NULL;
}

/* ---- the trace: the chain expected next ------------------------------------------------------ */

/* The chain expected next: the one that came after the same point last time (the place just
 * written when a chain came twice in a row; the next place, still unwritten, when nothing is
 * expected: some older chain or nokey, checked in full like any other). */
static inline struct chain_key *expected(const struct tstate *s)
{
	return s->trace[(s->tpos - s->lag) % TRACE];
}

/* Chain K came where it was expected. */
static inline __attribute__((always_inline)) void trace_follow(struct tstate *s, struct chain_key *k)
{
	unsigned t = s->tpos;
	s->trace[t % TRACE] = k;
	s->tpos = t + 1;
}

/* Chain K came, found otherwise (a look-up, a look): the chains expected next are the ones that
 * came after it the last time it was found so (none when never, or the ring has passed that place). */
static inline void trace_found(struct tstate *s, struct chain_key *k)
{
	unsigned t = s->tpos, p = k->pos;
	s->lag = s->trace[p % TRACE] == k && t - p < TRACE ? t - p : 0;
	s->trace[t % TRACE] = k;
	k->pos = t;
	s->tpos = t + 1;
}

/* The chains hit since the last adoption (the trace's places) call for the next one. */
static inline int adopt_due(const struct tstate *s)
{
	return (int)(s->tpos - s->adopt_at) >= 0;
}

static inline unsigned unloads_now(void)
{
	return __atomic_load_n(&ms_dlclose_calls, __ATOMIC_ACQUIRE);
}

/* Remembers the call of CH through its N innermost new frames, up to the innermost known frame:
 * in a free way of its set, else in the next one round.  The chain, new or found. */
struct chain_key *ms_chain_add(struct tstate *s, const struct chain *ch, int n, uint32_t target);
/* Chain K was hit ADOPT_HITS times since the last adoption: it is forgotten, and the next look
 * takes its frames in. */
void ms_chain_adopt(struct tstate *s, struct chain_key *k);
/* The chain by which a call from SLOT with return address IP comes up to the innermost known frame
 * (still watched), every frame of it still in place, looked up; NULL when none. */
struct chain_key *ms_chain_lookup(struct tstate *s, uintptr_t slot, uintptr_t ip);

#endif
