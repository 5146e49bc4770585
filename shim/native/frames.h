/* The known frames of a thread: the state every part of native stages on the stack shares.
 *
 * Each thread keeps the frames it has already seen ("known" frames, outermost first), found by
 * unwinding (native/look.c).  A known frame of a target function has its return address replaced
 * by a trampoline from the pool: the stage opens when the frame is first seen (at an allocation
 * inside the call, or at the call itself: native/enter.c) and closes exactly when the function
 * returns, unwinds or is jumped over (native/leave.c).  The innermost known frame always carries
 * a trampoline too (the thread's "watch" marker when it is not a stage frame), so a frame leaving
 * the stack is always noticed, and the check before a count (native/check.c) decides a call from
 * a place seen before with a few loads.  The ways up from a call site to the innermost known
 * frame that are remembered instead of taken in are native/chains.c's.
 *
 * This header holds the per-thread state, the small operations on it that every one of those
 * files inlines, and native/frames.c's functions: the state made, frames pushed and popped, the
 * marker moved, the stages they open.  Everything runs inside allocation hooks or trampolines:
 * per-thread state in raw mappings, no locks (the stage engine's own short lock aside). */
#ifndef MS_NATIVE_FRAMES_H
#define MS_NATIVE_FRAMES_H

#include <stdint.h>
#include <string.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/stages.h"
#include "native/native.h"

#define MAX_FRAMES 1024 /* known frames per thread */
#define MAX_SCAN 4096   /* frames unwound in one look at the stack */
#define NKEYS 4         /* call sites remembered per known frame */
#define MAX_DEFERRED 64
#define ADOPT_AFTER 3   /* a quick walk over more new frames than this keeps the outer ones */
#define ADOPT_HITS 256  /* a chain used this often is a loop's frames: they are taken in */
#define ADOPT_BACKOFF 8 /* each adoption doubles the hits the next one needs, this many times */

struct frame {
	uintptr_t slot;    /* where this frame's return address lives */
	uintptr_t ra;      /* the return address itself */
	uintptr_t watched; /* what the slot holds while the frame is there: its trampoline's address */
	int stage;         /* spec stage this frame opened, -1 */
	int tramp;         /* trampoline now in the slot, -1 */
	/* calls into the shim made from this frame (while it has a trampoline; else key_slot is 0):
	 * the slot of their return address, and the return addresses */
	uintptr_t key_slot, key_ip[NKEYS];
	unsigned nkeys;
};

struct cand {
	uintptr_t slot, ra, ip;
};

#define CHAIN_SETS 128 /* chains of new frames remembered per thread, by where they call the shim, */
#define CHAIN_WAYS 8   /* ...several for each place (a function called from several callers) */
#define CHAIN_MAX 16   /* frames in one (a longer way up keeps its outer frames instead) */

/* A call into the shim from frames not taken in (too short-lived to be worth a trampoline each:
 * a library's call tree under a frame that lasts, rebuilt at the same places call after call):
 * from ENTRY_SLOT with return address ENTRY_IP, through N frames (return-address slots and what
 * they held) that are no target's, up to the innermost known frame, whose slot was TOP_SLOT.
 * While every slot still holds its return address, the same call needs no walk. */
struct chain_key {
	uintptr_t entry_ip, top_slot;
	uintptr_t entry_key; /* ENTRY_SLOT, bit 0 set when a frame is a target's (TARGET not 0): slots are
			      * 8-byte aligned, so the check's one compare of it never meets such a chain */
	unsigned unloads;    /* ms_dlclose_calls when it was made */
	int n;
	/* a walk that found a target's frame: which of the frames are targets' (a hit takes them in as
	 * that walk did) */
	uint32_t target;
	int8_t stage[CHAIN_MAX]; /* and the spec stage of each (-1: none), at the places of fr */
	unsigned pos;            /* where in the thread's trace it was last found by a look-up (or made) */
	struct chain_frame {
		uintptr_t slot, ra;
	} fr[CHAIN_MAX]; /* the last N, innermost first (the unrolled check starts at CHAIN_MAX - N) */
};

/* The chains of one hash: a tag byte per way (0: free) finds the candidates in a few instructions. */
struct chain_set {
	uint64_t tags;
	struct chain_key way[CHAIN_WAYS];
};

/* The chains hit, in order, as a ring: calls repeat in the same order (a library's statements, one
 * like the other, the same chain several times in a row included), so the chain expected next is
 * the one that came after the same point last time, found without a look-up. */
#define TRACE 1024

struct tstate {
	const struct frame *top; /* f[n - 1], or none while n is 0: the check's one load (set_n) */
	/* spec stages a look could open that are not open here (0: a check has nothing to do; see
	 * frames.c's set_open) */
	uint32_t closed;
	unsigned adopt_at;                  /* the trace's place at which the chain hit is adopted */
	unsigned tpos;                      /* chains hit so far: the trace's next place */
	unsigned lag;                       /* the chain expected next is the one LAG places before that (expected()) */
	struct frame none;                  /* key_slot 0: no call matches it */
	struct chain_key nokey;             /* entry_ip 0: no call matches it (what the trace holds at first) */
	int n;                              /* known frames */
	int watch;                          /* this thread's marker trampoline, -1 */
	int spare;                          /* a trampoline its last stage frame gave back, -1 */
	int watch_at;                       /* frame holding it, -1 */
	uint32_t open;                      /* spec stages opened by known frames (a bit while its count is not 0) */
	uint16_t nopen[MS_SPEC_MAX_STAGES]; /* known frames that opened each */
	int busy;                           /* inside these files (a signal handler allocating must not re-enter) */
	int unwinding;                      /* exceptions in flight: no return address may change (leave.c) */
	int adopt;                          /* a chain came often: the next look takes in all its frames */
	unsigned adoptions;                 /* so far (short-lived frames taken in come back: each needs more hits) */
	unsigned unloads_seen;              /* ms_dlclose_calls at the last walk */
	uintptr_t stack_top;                /* highest address of this thread's stack */
	int ndeferred;
	int deferred[MAX_DEFERRED]; /* trampolines to give back once the unwinder has read them */
	struct frame f[MAX_FRAMES];
	struct cand c[MAX_FRAMES];
	struct chain_set chains[CHAIN_SETS];
	unsigned chain_victim; /* the way a new chain takes when its set is full */
	struct chain_key *trace[TRACE];
};

/* What a walk up the stack found: new frames (s->c, innermost first) up to the known frame MATCH. */
struct chain {
	int nc;
	int match;         /* known frame the walk ended on, -1 */
	int keep;          /* known frames [0, keep) are still believed to be on the stack */
	int fresh;         /* met a return address never seen, or objects were unloaded */
	int signal;        /* ended at a signal frame: this is a signal handler running */
	int targets_known; /* a replay: TARGETS has bit k set when c[k] is a target's frame */
	uint32_t targets;
	uintptr_t entry_slot, entry_ip;
};

/* This thread's state (NULL until its first look; initial-exec: one load on the check's path). */
extern __thread struct tstate *ms_tls_frames MS_TLS;

/* Counted only for MEMSHIM_LOG=debug: a shared counter would be contended by every thread. */
#define STAT(field)                                                                                                    \
	do {                                                                                                           \
		if (MS_UNLIKELY(ms_cfg.log_level >= MS_LOG_DEBUG))                                                     \
			__atomic_add_fetch(&ms_native_stats.field, 1, __ATOMIC_RELAXED);                               \
	} while (0)

/* Every stage a look could open is open on this thread already, by a known frame that will close
 * it (its trampoline): a target frame found now would change nothing, so no look is needed. */
static inline int all_open(const struct tstate *s)
{
	return s->closed == 0;
}

/* The number of known frames, and the innermost one with it. */
static inline void set_n(struct tstate *s, int n)
{
	s->n = n;
	s->top = n > 0 ? &s->f[n - 1] : &s->none;
}

/* This thread's state, made at its first use (NULL when no memory is left). */
struct tstate *ms_frames_new_state(void);
static inline struct tstate *state(void)
{
	struct tstate *s = ms_tls_frames;
	if (MS_LIKELY(s != NULL))
		return s;
	return ms_frames_new_state();
}

static inline void flush_deferred(struct tstate *s)
{
	for (int i = 0; i < s->ndeferred; i++)
		ms_pool_give(s->deferred[i]);
	s->ndeferred = 0;
}

/* A trampoline for a new stage frame of this thread: the one the last gave back, else the pool's. */
static inline int take_tramp(struct tstate *s)
{
	int t = s->spare;
	if (t < 0)
		return ms_pool_take();
	s->spare = -1;
	return t;
}

/* Trampoline T (or none, -1) is free again: kept for the thread's next stage frame (a stage called
 * in a loop then takes and gives back nothing through the shared pool's atomics), or given back. */
static inline void give_tramp(struct tstate *s, int t)
{
	if (s->spare < 0)
		s->spare = t;
	else
		ms_pool_give(t);
}

static inline void defer(struct tstate *s, int t)
{
	if (s->ndeferred == MAX_DEFERRED)
		return; /* never given back: a leak, never a reuse too early */
	s->deferred[s->ndeferred++] = t;
}

static inline uintptr_t load(uintptr_t addr)
{
	return *(volatile uintptr_t *)addr;
}

static inline void store(uintptr_t addr, uintptr_t v)
{
	*(volatile uintptr_t *)addr = v;
}

/* Frame F now has trampoline T (-1: none; the calls remembered are forgotten with it). */
static inline void set_tramp(struct frame *f, int t)
{
	f->tramp = t;
	f->watched = t >= 0 ? ms_tramp_addr(t) : 0;
	if (t < 0) {
		f->key_slot = 0;
		f->nkeys = 0;
	}
}

static inline int find_tramp(const struct tstate *s, int t)
{
	for (int k = s->n - 1; k >= 0; k--)
		if (s->f[k].tramp == t)
			return k;
	return -1;
}

/* Remembers a call from frame F (watched) into the shim: its return address IP in SLOT.  The
 * calls of one frame share their slot unless its stack pointer moved (alloca): a new slot starts
 * over. */
static inline void add_key(struct frame *f, uintptr_t slot, uintptr_t ip)
{
	if (f->tramp < 0)
		return;
	if (f->key_slot != slot) {
		memset(f->key_ip, 0, sizeof f->key_ip);
		f->nkeys = 0;
		f->key_slot = slot;
	}
	f->key_ip[f->nkeys++ % NKEYS] = ip;
}

/* Spec stage SPEC opens on this thread (0; -1 when refused from a signal handler that interrupted
 * the engine), or closes by way HOW (enum ms_end: the frame returned, was unwound (a C++
 * exception, a Rust panic, a forced unwind) or jumped over (longjmp, or found gone without its
 * trampoline firing)). */
int ms_frames_enter(struct tstate *s, int spec);
void ms_frames_leave(struct tstate *s, int spec, int how);
/* The innermost known frame is no longer on the stack: its call ended by way HOW. */
void ms_frames_pop_stale(struct tstate *s, int how);
/* The frame holding the marker gives it up (it stays on the stack). */
void ms_frames_unwatch(struct tstate *s);
/* The innermost known frame gets a trampoline: its own stage one, or the marker. */
void ms_frames_ensure_watch(struct tstate *s);
/* Pushes a newly seen frame, of spec stage STAGE's target function (-1: none). */
void ms_frames_push(struct tstate *s, const struct cand *c, int stage);
/* At start: the stages a look can open, the unwinder, and the key whose destructor GONE runs at
 * a thread's exit; 0 when usable. */
int ms_frames_state_init(void (*gone)(void *));

#endif
