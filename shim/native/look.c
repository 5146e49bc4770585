/* The look at the stack (native/look.h).  Only new frames above the innermost known one are ever
 * unwound, and the frames of a library's call tree, rebuilt at the same places call after call,
 * are not taken in: the way from each call site up to the innermost known frame is remembered as a
 * chain (native/chains.c), so a target called once per statement or per request costs one
 * replayed walk and one trampoline firing per call, not a walk per allocation (of the frames
 * between a target's and the known ones, only targets' are taken in: known frames need not be
 * contiguous, the ones in between are callers of a known frame, and the marker stays on the one
 * it was on).  Runs inside allocation hooks: no allocation, no lock, errno preserved. */
#include <errno.h>
#include <string.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "native/chains.h"
#include "native/look.h"
#include "native/selfsize.h"

struct ms_self_sizes ms_self_sizes MS_LARGE;

static void off_learn(uintptr_t ip, uintptr_t off)
{
	unsigned h = (unsigned)(ip >> 2) % NOFF;
	for (int k = 0; k < 8; k++, h = (h + 1) % NOFF) {
		uintptr_t v = __atomic_load_n(&ms_self_sizes.ip[h], __ATOMIC_ACQUIRE);
		if (v == ip)
			return;
		if (v)
			continue;
		/* the value is published together with its key: a second writer loses the race cleanly */
		if (__atomic_compare_exchange_n(&ms_self_sizes.ip[h], &v, (uintptr_t)1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_store_n(&ms_self_sizes.val[h], off, __ATOMIC_RELAXED);
			__atomic_store_n(&ms_self_sizes.ip[h], ip, __ATOMIC_RELEASE);
			return;
		}
	}
}

/* Pushes a newly seen frame, its function looked up. */
static void push(struct tstate *s, const struct cand *c)
{
	ms_frames_push(s, c, ms_syms_stage_at(c->ip - 1));
}

/* Walks from here to the innermost known frame with the quick unwinder (QUICK) or libunwind,
 * changing nothing.  -1 when the quick unwinder met a frame it does not understand; 1 when the
 * shim was entered by a tail call from a known frame (nothing new can be on the stack). */
static int walk(struct tstate *s, int quick, struct chain *ch)
{
	struct ms_unw_space space;
	struct ms_cursor c;
	ms_cfi_new_ip = 0;
	if (ms_cursor_here(&c, quick ? NULL : &space) < 0)
		return -1;
	ch->nc = 0;
	ch->match = -1;
	ch->signal = 0;
	ch->targets_known = 0;
	/* the shim's own frames first: their sizes are learnt for the quick path */
	for (int d = 0; in_self(c.raw) && c.tramp < 0; d++) {
		uintptr_t here = c.ip, prev_sp = c.sp;
		if (d > 32 || ms_cursor_step(&c) != 1)
			return -1;
		off_learn(here, c.sp - prev_sp);
	}
	if (c.tramp >= 0)
		return 1; /* a tail call from a frame we know: the shim returns straight through its trampoline */
	ch->entry_slot = c.slot;
	ch->entry_ip = c.raw;
	int j = s->n - 1;
	for (int depth = 0; depth < MAX_SCAN; depth++) {
		uintptr_t here = c.ip;
		int got = ms_cursor_step(&c);
		if (got < 0)
			return -1;
		if (got == 2)
			ch->signal = 1;
		if (got != 1)
			break;
		while (j >= 0 && s->f[j].slot < c.slot)
			j--;
		if (j >= 0 && s->f[j].slot == c.slot) {
			const struct frame *f = &s->f[j];
			if (c.raw == (f->tramp >= 0 ? ms_tramp_addr(f->tramp) : f->ra)) {
				ch->match = j;
				break;
			}
			j--;
		}
		if (ch->nc == MAX_FRAMES)
			break;
		s->c[ch->nc++] = (struct cand){ c.slot, c.raw, here };
		if (c.tramp >= 0)
			break; /* a trampoline we do not know: nothing below can be read reliably */
	}
	ch->keep = j + 1;
	unsigned unloads = __atomic_load_n(&ms_dlclose_calls, __ATOMIC_ACQUIRE);
	ch->fresh = ms_cfi_new_ip || unloads != s->unloads_seen;
	s->unloads_seen = unloads;
	return 0;
}

/* The walk ended on the innermost known frame, still watched, through no frame of a target. */
static int nothing_new(struct tstate *s, const struct chain *ch)
{
	if (s->n == 0 || ch->match != s->n - 1)
		return 0;
	const struct frame *top = &s->f[s->n - 1];
	if (top->tramp < 0 || load(top->slot) != ms_tramp_addr(top->tramp))
		return 0;
	for (int k = 0; k < ch->nc; k++)
		if (ms_syms_stage_at(s->c[k].ip - 1) >= 0)
			return 0;
	/* a return address never seen before may be in an object loaded since: read it, look again */
	if (ch->fresh && ms_syms_refresh())
		for (int k = 0; k < ch->nc; k++)
			if (ms_syms_stage_at(s->c[k].ip - 1) >= 0)
				return 0;
	return 1;
}

/* Which of the new frames (at most 32) are target functions': bit k for c[k]. */
static uint32_t target_frames(const struct tstate *s, const struct chain *ch)
{
	uint32_t mask = 0;
	for (int k = 0; k < ch->nc && k < 32; k++)
		if (ms_syms_stage_at(s->c[k].ip - 1) >= 0)
			mask |= 1u << k;
	return mask;
}

/* The innermost of the new frames that is a target function's, or -1. */
static int innermost_target(const struct tstate *s, const struct chain *ch)
{
	for (int k = 0; k < ch->nc; k++)
		if (ms_syms_stage_at(s->c[k].ip - 1) >= 0)
			return k;
	return -1;
}

/* The outermost of the new frames that is a target function's (one is). */
static int outermost_target(const struct tstate *s, const struct chain *ch)
{
	int k = ch->nc - 1;
	while (k > 0 && !(ch->targets_known ? ch->targets >> k & 1 : ms_syms_stage_at(s->c[k].ip - 1) >= 0))
		k--;
	return k;
}

/* Takes in what the walk found: known frames no longer there go, new frames come in (outermost
 * first, down to the innermost target frame; target frames get their trampolines and open their
 * stages). */
static void apply(struct tstate *s, const struct chain *ch)
{
	while (s->n > ch->keep)
		ms_frames_pop_stale(s, MS_END_JUMPED);
	int last = ch->targets_known ? __builtin_ctz(ch->targets) : innermost_target(s, ch);
	/* with a target found, only the target frames are taken in: the frames between them are their
	 * callers, gone only after them (each would cost a firing of the marker as it leaves, once a
	 * statement for a target called from a short-lived caller); with no known frame outside them
	 * (a thread's first look), the callers outside the outermost are taken in too: they outlast its
	 * calls, and the next call's walk ends at them (a chain, then replayed) instead of at the
	 * stack's end */
	int callers = last >= 0 && s->n == 0 ? outermost_target(s, ch) : ch->nc;
	for (int k = ch->nc - 1; k >= (last > 0 ? last : 0) && s->n < MAX_FRAMES; k--)
		if (last < 0 || k > callers ||
		    (ch->targets_known ? ch->targets >> k & 1 : ms_syms_stage_at(s->c[k].ip - 1) >= 0))
			push(s, &s->c[k]);
	/* the frames a target function called are left out (they come and go call after call): its
	 * trampoline watches them, and the way up to it is remembered (unless every stage is open now:
	 * the checks in there are one compare) */
	if (last > 0 && last <= CHAIN_MAX && s->n > 0 && s->f[s->n - 1].slot == s->c[last].slot && !all_open(s))
		ms_chain_add(s, ch, last, 0);
}

#ifdef MS_NATIVE_VERIFY
/* Debug builds only: the quick unwinder must agree with libunwind frame for frame. */
static void verify(struct tstate *s, int quick, const struct chain *ch)
{
	static __thread struct cand saved[MAX_FRAMES];
	struct chain other;
	if (!quick)
		return;
	memcpy(saved, s->c, (size_t)ch->nc * sizeof *saved);
	if (walk(s, 0, &other) != 0)
		return;
	int n = other.nc < ch->nc ? other.nc : ch->nc;
	for (int k = 0; k < n; k++)
		if (saved[k].slot != s->c[k].slot || saved[k].ip != s->c[k].ip) {
			ms_warn("verify: frame %d differs: quick %p/%p libunwind %p/%p", k, (void *)saved[k].slot,
				(void *)saved[k].ip, (void *)s->c[k].slot, (void *)s->c[k].ip);
			break;
		}
	if (other.match != ch->match && other.nc >= ch->nc)
		ms_warn("verify: match %d vs %d (nc %d vs %d)", ch->match, other.match, ch->nc, other.nc);
	memcpy(s->c, saved, (size_t)ch->nc * sizeof *saved);
}
#endif

/* Takes in the new frames of CH from the outermost down to frame LAST; the innermost known frame
 * gets the marker, and, when it is the caller of the shim, remembers this call. */
static void take_in(struct tstate *s, const struct chain *ch, int last)
{
	for (int k = ch->nc - 1; k >= last && s->n < MAX_FRAMES; k--)
		push(s, &s->c[k]);
	ms_frames_ensure_watch(s);
	if (last == 0 && s->n > 0 && s->f[s->n - 1].slot == s->c[0].slot)
		add_key(&s->f[s->n - 1], ch->entry_slot, ch->entry_ip);
}

/* A quick walk that found a target's frame among a few new frames above the innermost known frame
 * (watched), none of them a trampoline: the next call from the same place through the same frames
 * can take them in without walking (a target called once per statement: one walk, not one a call). */
static int replayable(const struct tstate *s, const struct chain *ch)
{
	if (s->n == 0 || ch->match != s->n - 1 || ch->nc == 0 || ch->nc > CHAIN_MAX || ch->fresh || ch->signal)
		return 0;
	const struct frame *top = &s->f[s->n - 1];
	if (top->tramp < 0 || load(top->slot) != top->watched)
		return 0;
	for (int k = 0; k < ch->nc; k++) /* frames found from rsp alone: same return addresses, same frames */
		if (ms_tramp_index(s->c[k].ra) >= 0 || ms_cfi_cfa_from_rbp(s->c[k].ip))
			return 0;
	return !ms_cfi_cfa_from_rbp(s->c[ch->nc - 1].ra) && innermost_target(s, ch) >= 0;
}

/* Takes in what a walk (or its replay) found. */
static void found(struct tstate *s, const struct chain *ch)
{
	int before = s->n;
	apply(s, ch);
	int entry_is_top = ch->nc ? s->n - before >= 0 && s->n > 0 && s->f[s->n - 1].slot == s->c[0].slot
				  : ch->match >= 0 && ch->match == s->n - 1;
	ms_frames_ensure_watch(s);
	if (entry_is_top && s->n > 0 && s->f[s->n - 1].slot > ch->entry_slot)
		add_key(&s->f[s->n - 1], ch->entry_slot, ch->entry_ip);
}

/* handler_note: a signal handler changes nothing.  The code it interrupted may be a function that
 * has just returned into its trampoline, before the trampoline read where to go (a window of a few
 * instructions nothing can close); moving that trampoline now would send the return elsewhere.
 * Memory moved by the handler still counts toward the stages open; a stage function entered only
 * inside a handler is not seen. */
void ms_frames_look(struct tstate *s)
{
	struct chain ch;
	if (s->unwinding)
		return; /* cleanups of an exception in flight: the stack must stay as phase 1 saw it */
	int got = walk(s, 1, &ch);
	if (got > 0 || (got == 0 && ch.signal))
		return; /* in a signal handler: see handler_note */
	int quick = got == 0;
#ifdef MS_NATIVE_VERIFY
	verify(s, quick, &ch);
#endif
	if (quick && nothing_new(s, &ch)) {
		STAT(medium);
		int adopt = s->adopt;
		s->adopt = 0;
		if (ch.nc == 0) {
			add_key(&s->f[s->n - 1], ch.entry_slot, ch.entry_ip);
		} else if (adopt) { /* a hot chain: all its frames, and this call, are known from now on */
			STAT(adopted);
			take_in(s, &ch, 0);
		} else if (ch.nc <= CHAIN_MAX) {
			trace_found(s, ms_chain_add(s, &ch, ch.nc, 0));
		} else { /* a long way up: take in all but the innermost (short-lived) frames */
			take_in(s, &ch, ADOPT_AFTER - 1);
		}
		return;
	}
	STAT(slow);
	flush_deferred(s);
	ms_syms_refresh();
	if (!quick && (walk(s, 0, &ch) != 0 || ch.signal))
		return;
	if (quick && replayable(s, &ch))
		trace_found(s, ms_chain_add(s, &ch, ch.nc, target_frames(s, &ch)));
	found(s, &ch);
}

/* A hit of a chain through a target's frame: what the walk that found it did, without walking (its
 * frames are all in place, so a walk would find the same), as found() does with apply(): its target
 * frames taken in, the way up to the innermost one remembered unless every stage is open now, and
 * the call remembered when that frame made it.  0 when this thread may not change its frames now
 * (the slow path decides). */
__attribute__((noinline)) int ms_frames_replay(struct tstate *s, const struct chain_key *k)
{
	if (s->busy || s->unwinding)
		return 0;
	int saved = errno;
	s->busy = 1;
	ms_tls_guard++;
	STAT(replayed);
	flush_deferred(s);
	/* no re-read of the loaded objects: the frames are the walk's, read since (no dlclose: the
	 * chain's unloads), and a later dlopen cannot make them a target's */
	const struct chain_frame *fr = &k->fr[CHAIN_MAX - k->n];
	int last = __builtin_ctz(k->target);
	for (uint32_t m = k->target; m && s->n < MAX_FRAMES;) { /* outermost first */
		int j = 31 - __builtin_clz(m);
		m &= ~(1u << j); /* a frame's own place: the return address above it */
		ms_frames_push(s, &(struct cand){ fr[j].slot, fr[j].ra, j ? fr[j - 1].ra : k->entry_ip },
			       k->stage[CHAIN_MAX - k->n + j]);
	}
	uintptr_t top_slot = s->f[s->n - 1].slot;
	if (last > 0 && top_slot == fr[last].slot && !all_open(s)) {
		for (int j = 0; j < last; j++)
			s->c[j] = (struct cand){ fr[j].slot, fr[j].ra, j ? fr[j - 1].ra : k->entry_ip };
		const struct chain inner = { .entry_slot = entry_slot(k), .entry_ip = k->entry_ip };
		ms_chain_add(s, &inner, last, 0);
	}
	ms_frames_ensure_watch(s);
	if (top_slot == fr[0].slot && s->n > 0 && s->f[s->n - 1].slot > entry_slot(k))
		add_key(&s->f[s->n - 1], entry_slot(k), k->entry_ip);
	ms_tls_guard--;
	s->busy = 0;
	errno = saved;
	return 1;
}
