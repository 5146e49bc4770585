/* Native stage detection on the stack.
 *
 * Each thread keeps the frames it has already seen ("known" frames, outermost first), found by
 * unwinding (the cursor of native/unwinder.c: the quick unwinder, or libunwind where that gives
 * up).  A known frame of a target function has its return address replaced by a trampoline from
 * the pool: the stage opens when the frame is first seen (at an allocation
 * inside the call) and closes exactly when the function returns, unwinds (exception, forced
 * unwind) or is jumped over (longjmp).  The innermost known frame always carries a trampoline too
 * (the thread's "watch" marker when it is not a stage frame), so a frame leaving the stack is
 * always noticed, and an allocation made again from the innermost known frame at a call site seen
 * before (same return-address slot and return address) is decided with a few loads: nothing new
 * can be on the stack.  Only new frames above the innermost known one are ever unwound, and the
 * frames of a library's call tree, rebuilt at the same places call after call, are not taken in:
 * the way from each call site up to the innermost known frame is remembered as a chain (its
 * slots and return addresses, one load each to confirm; calls repeat in the same order, so the
 * chains hit are kept in order in a trace and the one tried first is the one that came after the
 * same point last time), so a target called once per statement or per request costs one replayed
 * walk and one trampoline firing per call, not a walk per allocation (of the frames between a
 * target's and the known ones, only targets' are taken in: known frames need not be contiguous,
 * the ones in between are callers of a known frame, and the marker stays on the one it was on).
 *
 * Everything here runs inside allocation hooks or trampolines: per-thread state in raw mappings,
 * no locks (the stage engine's own short lock aside), errno preserved. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "intercept/hooks.h"
#include "native/native.h"

#define MAX_FRAMES 1024 /* known frames per thread */
#define MAX_SCAN 4096   /* frames unwound in one look at the stack */
#define NKEYS 4         /* call sites remembered per known frame */
#define MAX_DEFERRED 64
#define NOFF 128        /* shim-internal return addresses with known frame sizes */
#define ADOPT_AFTER 3   /* a quick walk over more new frames than this keeps the outer ones */
#define ADOPT_HITS 256  /* a chain used this often is a loop's frames: they are taken in */
#define ADOPT_BACKOFF 8 /* each adoption doubles the hits the next one needs, this many times */

struct frame {
	uintptr_t slot;     /* where this frame's return address lives */
	uintptr_t ra;       /* the return address itself */
	uintptr_t watched;  /* what the slot holds while the frame is there: its trampoline's address */
	int stage;          /* spec stage this frame opened, -1 */
	int tramp;          /* trampoline now in the slot, -1 */
	/* calls into the shim made from this frame (while it has a trampoline; else key_slot is 0):
	 * the slot of their return address, and the return addresses */
	uintptr_t key_slot, key_ip[NKEYS];
	unsigned nkeys;
};

struct cand {
	uintptr_t slot, ra, ip;
};

#define CHAIN_SETS 128 /* chains of new frames remembered per thread, by where they call the shim, */
#define CHAIN_WAYS 8  /* ...several for each place (a function called from several callers) */
#define CHAIN_MAX 16 /* frames in one (a longer way up keeps its outer frames instead) */

/* A call into the shim from frames not taken in (too short-lived to be worth a trampoline each:
 * a library's call tree under a frame that lasts, rebuilt at the same places call after call):
 * from ENTRY_SLOT with return address ENTRY_IP, through N frames (return-address slots and what
 * they held) that are no target's, up to the innermost known frame, whose slot was TOP_SLOT.
 * While every slot still holds its return address, the same call needs no walk. */
struct chain_key {
	uintptr_t entry_ip, top_slot;
	uintptr_t entry_key; /* ENTRY_SLOT, bit 0 set when a frame is a target's (TARGET not 0): slots are
			      * 8-byte aligned, so the check's one compare of it never meets such a chain */
	unsigned unloads;  /* ms_dlclose_calls when it was made */
	int n;
	uint32_t target;   /* a walk that found a target's frame: which of the frames are targets' (a
			    * hit takes them in as that walk did) */
	int8_t stage[CHAIN_MAX]; /* and the spec stage of each (-1: none), at the places of fr */
	unsigned pos;      /* where in the thread's trace it was last found by a look-up (or made) */
	struct chain_frame {
		uintptr_t slot, ra;
	} fr[CHAIN_MAX];   /* the last N, innermost first (the unrolled check starts at CHAIN_MAX - N) */
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
	uint32_t closed;   /* spec stages a look could open that are not open here (0: a check has
			    * nothing to do; see set_open) */
	unsigned adopt_at; /* the trace's place at which the chain hit is adopted */
	unsigned tpos;     /* chains hit so far: the trace's next place */
	unsigned lag;      /* the chain expected next is the one LAG places before that (expected()) */
	struct frame none;       /* key_slot 0: no call matches it */
	struct chain_key nokey;  /* entry_ip 0: no call matches it (what the trace holds at first) */
	int n;             /* known frames */
	int watch;         /* this thread's marker trampoline, -1 */
	int watch_at;      /* frame holding it, -1 */
	uint32_t open;     /* spec stages opened by known frames (a bit while its count is not 0) */
	uint16_t nopen[MS_SPEC_MAX_STAGES]; /* known frames that opened each */
	int busy;          /* inside this file (a signal handler allocating must not re-enter) */
	int unwinding;     /* exceptions in flight: no return address may change (see below) */
	int adopt;         /* a chain came often: the next look takes in all its frames */
	unsigned adoptions; /* so far (short-lived frames taken in come back: each needs more hits) */
	unsigned unloads_seen; /* ms_dlclose_calls at the last walk */
	uintptr_t stack_top;   /* highest address of this thread's stack */
	int ndeferred;
	int deferred[MAX_DEFERRED]; /* trampolines to give back once the unwinder has read them */
	struct frame f[MAX_FRAMES];
	struct cand c[MAX_FRAMES];
	struct chain_set chains[CHAIN_SETS];
	unsigned chain_victim; /* the way a new chain takes when its set is full */
	struct chain_key *trace[TRACE];
};

struct ms_native_stats ms_native_stats;
static __thread struct tstate *ts MS_TLS;
static pthread_key_t state_key;
static int stage_ids[MS_SPEC_MAX_STAGES]; /* engine id + 1 */
static uint32_t native_stages; /* spec stages with a native target: what a look can open */
static uintptr_t off_ip[NOFF] MS_LARGE;
static uintptr_t off_val[NOFF] MS_LARGE;

/* Counted only for MEMSHIM_LOG=debug: a shared counter would be contended by every thread. */
#define STAT(field) do { \
		if (MS_UNLIKELY(ms_cfg.log_level >= MS_LOG_DEBUG)) \
			__atomic_add_fetch(&ms_native_stats.field, 1, __ATOMIC_RELAXED); \
	} while (0)

static int engine_id(int spec)
{
	if (spec < 0 || spec >= MS_SPEC_MAX_STAGES)
		return -1;
	int id = __atomic_load_n(&stage_ids[spec], __ATOMIC_RELAXED) - 1;
	if (id < 0) {
		id = ms_stage_id(ms_cfg.spec.stage[spec].name);
		if (id >= 0)
			__atomic_store_n(&stage_ids[spec], id + 1, __ATOMIC_RELAXED);
	}
	return id;
}

/* The stages open on this thread are OPEN: a check has nothing to do while every stage with a
 * native target is among them (none such: the checks still take frames in). */
static void set_open(struct tstate *s, uint32_t open)
{
	s->open = open;
	s->closed = native_stages ? native_stages & ~open : 1;
}

/* 0 when the stage was entered (refused from a signal handler that interrupted the engine). */
static int enter(struct tstate *s, int spec)
{
	int id = engine_id(spec);
	if (id < 0 || ms_stage_enter(id, ms_elapsed()) < 0)
		return -1;
	if (s->nopen[spec]++ == 0)
		set_open(s, s->open | 1u << spec);
	return 0;
}

/* HOW (enum ms_end): the frame returned, was unwound (a C++ exception, a Rust panic, a forced
 * unwind) or jumped over (longjmp, or found gone without its trampoline firing). */
static void leave(struct tstate *s, int spec, int how)
{
	if (spec < MS_SPEC_MAX_STAGES && s->nopen[spec] > 0 && --s->nopen[spec] == 0)
		set_open(s, s->open & ~(1u << spec));
	int id = engine_id(spec);
	if (id >= 0)
		ms_stage_leave_ended(id, ms_elapsed(), how, NULL, NULL, NULL);
}

/* Every stage a look could open is open on this thread already, by a known frame that will close
 * it (its trampoline): a target frame found now would change nothing, so no look is needed. */
static inline int all_open(const struct tstate *s)
{
	return s->closed == 0;
}

/* ---- frame sizes of the shim's own frames (between the hook and the program) ----------------- */

static uintptr_t off_lookup(uintptr_t ip)
{
	unsigned h = (unsigned)(ip >> 2) % NOFF;
	for (int k = 0; k < 8; k++, h = (h + 1) % NOFF) {
		uintptr_t v = __atomic_load_n(&off_ip[h], __ATOMIC_ACQUIRE);
		if (v == ip)
			return __atomic_load_n(&off_val[h], __ATOMIC_RELAXED);
		if (!v)
			return 0;
	}
	return 0;
}

static void off_learn(uintptr_t ip, uintptr_t off)
{
	unsigned h = (unsigned)(ip >> 2) % NOFF;
	for (int k = 0; k < 8; k++, h = (h + 1) % NOFF) {
		uintptr_t v = __atomic_load_n(&off_ip[h], __ATOMIC_ACQUIRE);
		if (v == ip)
			return;
		if (v)
			continue;
		/* the value is published together with its key: a second writer loses the race cleanly */
		if (__atomic_compare_exchange_n(&off_ip[h], &v, (uintptr_t)1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_store_n(&off_val[h], off, __ATOMIC_RELAXED);
			__atomic_store_n(&off_ip[h], ip, __ATOMIC_RELEASE);
			return;
		}
	}
}

static int in_self(uintptr_t ip)
{
	return ip >= ms_self_lo && ip < ms_self_hi;
}

/* ---- per-thread state ------------------------------------------------------------------------ */

/* The number of known frames, and the innermost one with it. */
static void set_n(struct tstate *s, int n)
{
	s->n = n;
	s->top = n > 0 ? &s->f[n - 1] : &s->none;
}

/* glibc keeps a thread's descriptor at the top of its stack (its own or one the program gave it);
 * the program's first thread starts below __libc_stack_end. */
extern void *__libc_stack_end;
static uintptr_t stack_top(void)
{
	if (syscall(SYS_gettid) == syscall(SYS_getpid))
		return (uintptr_t)__libc_stack_end;
	return (uintptr_t)pthread_self();
}

static struct tstate *state(void)
{
	struct tstate *s = ts;
	if (MS_LIKELY(s != NULL))
		return s;
	s = ms_raw_map(sizeof *s);
	if (!s)
		return NULL;
	s->watch = s->watch_at = -1;
	s->adopt_at = ADOPT_HITS;
	s->top = &s->none; /* n is 0 in the fresh mapping */
	set_open(s, 0);
	for (int i = 0; i < TRACE; i++)
		s->trace[i] = &s->nokey;
	s->stack_top = stack_top();
	ts = s;
	pthread_setspecific(state_key, s); /* low key index: no allocation */
	return s;
}

static void flush_deferred(struct tstate *s)
{
	for (int i = 0; i < s->ndeferred; i++)
		ms_pool_give(s->deferred[i]);
	s->ndeferred = 0;
}

static void defer(struct tstate *s, int t)
{
	if (s->ndeferred == MAX_DEFERRED)
		return; /* never given back: a leak, never a reuse too early */
	s->deferred[s->ndeferred++] = t;
}

static uintptr_t load(uintptr_t addr)
{
	return *(volatile uintptr_t *)addr;
}

static void store(uintptr_t addr, uintptr_t v)
{
	*(volatile uintptr_t *)addr = v;
}

/* Frame F now has trampoline T (-1: none; the calls remembered are forgotten with it). */
static void set_tramp(struct frame *f, int t)
{
	f->tramp = t;
	f->watched = t >= 0 ? ms_tramp_addr(t) : 0;
	if (t < 0) {
		f->key_slot = 0;
		f->nkeys = 0;
	}
}

/* The innermost known frame is no longer on the stack (jumped over, or unwound past without a
 * trampoline): its call ended by way HOW.  Its trampoline is given back only when its slot no
 * longer points at it: if our view were wrong and the frame still returned through it, it must
 * still lead home. */
static void pop_stale(struct tstate *s, int how)
{
	set_n(s, s->n - 1);
	struct frame *f = &s->f[s->n];
	if (f->tramp < 0)
		return;
	if (f->stage >= 0)
		leave(s, f->stage, how);
	int still_there = load(f->slot) == ms_tramp_addr(f->tramp);
	if (f->tramp == s->watch) {
		s->watch_at = -1;
		if (still_there)
			s->watch = -1; /* retired: a fresh marker is taken next time */
	} else if (!still_there) {
		ms_pool_give(f->tramp);
	}
}

/* Frame I gives up the marker (it stays on the stack). */
static void unwatch(struct tstate *s)
{
	if (s->watch_at < 0)
		return;
	struct frame *f = &s->f[s->watch_at];
	if (f->tramp == s->watch && load(f->slot) == ms_tramp_addr(s->watch))
		store(f->slot, f->ra);
	set_tramp(f, -1);
	s->watch_at = -1;
}

/* The innermost known frame gets a trampoline: its own stage one, or the marker.  A stage frame's
 * own leaves the marker where it is, on a frame outside it that cannot leave first: when the stage
 * call returns, that frame is the innermost again, watched, its calls and chains still good (a
 * stage called once per statement: no marker moved twice a call). */
static void ensure_watch(struct tstate *s)
{
	while (s->n > 0) {
		struct frame *top = &s->f[s->n - 1];
		if (top->tramp >= 0)
			return;
		if (load(top->slot) != top->ra) { /* not the frame we knew */
			pop_stale(s, MS_END_JUMPED);
			continue;
		}
		unwatch(s);
		if (s->watch < 0)
			s->watch = ms_pool_take();
		if (s->watch < 0)
			return;
		ms_pool_set_ra(s->watch, top->ra);
		store(top->slot, ms_tramp_addr(s->watch));
		set_tramp(top, s->watch);
		s->watch_at = s->n - 1;
		return;
	}
}

static int find_tramp(const struct tstate *s, int t)
{
	for (int k = s->n - 1; k >= 0; k--)
		if (s->f[k].tramp == t)
			return k;
	return -1;
}

/* ---- the look at the stack ------------------------------------------------------------------- */

/* Remembers a call from frame F (watched) into the shim: its return address IP in SLOT.  The
 * calls of one frame share their slot unless its stack pointer moved (alloca): a new slot starts
 * over. */
static void add_key(struct frame *f, uintptr_t slot, uintptr_t ip)
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

/* Pushes a newly seen frame, of spec stage STAGE's target function (-1: none); a target's frame gets
 * a trampoline and opens its stage. */
static void push_stage(struct tstate *s, const struct cand *c, int stage)
{
	struct frame *f = &s->f[s->n];
	f->slot = c->slot;
	f->ra = c->ra;
	f->stage = stage;
	set_tramp(f, -1);
	if (f->stage >= 0) {
		int t = ms_pool_take();
		if (t < 0 || enter(s, f->stage) < 0) {
			ms_pool_give(t);
			f->stage = -1; /* pool exhausted, or the engine busy below us: this call is not seen */
		} else {
			ms_pool_set_ra(t, f->ra);
			store(f->slot, ms_tramp_addr(t));
			set_tramp(f, t);
		}
	}
	set_n(s, s->n + 1);
}

/* Pushes a newly seen frame, its function looked up. */
static void push(struct tstate *s, const struct cand *c)
{
	push_stage(s, c, ms_syms_stage_at(c->ip - 1));
}

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
static inline __attribute__((always_inline)) struct chain_key *chain_find(struct chain_set *set, uint64_t tag,
									  uintptr_t slot, uintptr_t ip,
									  const struct frame *top, unsigned unloads)
{
	for (uint64_t m = chain_candidates(set, tag); m; m &= m - 1) {
		struct chain_key *k = &set->way[__builtin_ctzll(m) >> 3];
		if (chain_holds(k, slot, ip, top, unloads))
			return k;
	}
	return NULL;
}

static void chain_forget(struct chain_set *set, struct chain_key *k)
{
	k->entry_key = 0; /* no expectation meets it either */
	set->tags &= ~(0xffULL << 8 * (k - set->way));
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
static void trace_found(struct tstate *s, struct chain_key *k)
{
	unsigned t = s->tpos, p = k->pos;
	s->lag = s->trace[p % TRACE] == k && t - p < TRACE ? t - p : 0;
	s->trace[t % TRACE] = k;
	k->pos = t;
	s->tpos = t + 1;
}

/* Remembers the call of CH through its N innermost new frames, up to the innermost known frame:
 * in a free way of its set, else in the next one round.  The chain, new or found. */
static struct chain_key *add_chain(struct tstate *s, const struct chain *ch, int n, uint32_t target)
{
	const struct frame *top = &s->f[s->n - 1];
	uint64_t tag;
	struct chain_set *set = chain_set(s, ch->entry_slot, ch->entry_ip, top->slot, &tag);
	struct chain_key *k = chain_find(set, tag, ch->entry_slot, ch->entry_ip, top, s->unloads_seen);
	if (k)
		return k; /* remembered already (a target's frame taken in again) */
	int w = 0;
	while (w < CHAIN_WAYS && (set->tags >> 8 * w & 0xff))
		w++;
	if (w == CHAIN_WAYS)
		w = (int)(s->chain_victim++ % CHAIN_WAYS);
	k = &set->way[w];
	k->top_slot = top->slot;
	k->entry_key = ch->entry_slot | (target != 0);
	k->entry_ip = ch->entry_ip;
	k->unloads = s->unloads_seen;
	k->n = n;
	k->target = target;
	for (int j = 0; j < n; j++) {
		k->fr[CHAIN_MAX - n + j] = (struct chain_frame){ s->c[j].slot, s->c[j].ra };
		k->stage[CHAIN_MAX - n + j] = (int8_t)(target >> j & 1 ? ms_syms_stage_at(s->c[j].ip - 1) : -1);
	}
	set->tags = (set->tags & ~(0xffULL << 8 * w)) | tag << 8 * w;
	return k;
}

/* The chains hit since the last adoption (the trace's places) call for the next one. */
static inline int adopt_due(const struct tstate *s)
{
	return (int)(s->tpos - s->adopt_at) >= 0;
}

/* Chain K was hit ADOPT_HITS times since the last adoption: it is forgotten, and the next look
 * takes its frames in (see chain_seen). */
static void adopt_chain(struct tstate *s, struct chain_key *k)
{
	struct chain_set *set = &s->chains[((char *)k - (char *)s->chains) / sizeof *set];
	chain_forget(set, k);
	s->adopt = 1;
	if (s->adoptions < ADOPT_BACKOFF)
		s->adoptions++;
	s->adopt_at = s->tpos + (ADOPT_HITS << s->adoptions);
}

static inline unsigned unloads_now(void)
{
	return __atomic_load_n(&ms_dlclose_calls, __ATOMIC_ACQUIRE);
}

/* The chain by which a call from SLOT with return address IP comes up to the innermost known frame
 * (still watched), every frame of it still in place, looked up; NULL when none. */
static struct chain_key *chain_lookup(struct tstate *s, uintptr_t slot, uintptr_t ip)
{
	const struct frame *top = s->top;
	if (s->n == 0)
		return NULL;
	uint64_t tag;
	struct chain_set *set = chain_set(s, slot, ip, top->slot, &tag);
	struct chain_key *k = chain_find(set, tag, slot, ip, top, unloads_now());
	if (k) {
		STAT(looked_up);
		trace_found(s, k);
	}
	return k;
}

/* Whether a call from SLOT with return address IP comes through a chain remembered for the
 * innermost known frame (still watched), every frame of it still in place.  Every ADOPT_HITS hits
 * of the thread's chains, the chain hit is forgotten instead and its frames taken in at the next
 * look (the chain used most is likely a loop's frames, whose calls are then seen in a few loads);
 * a helper called from a loop looks the same but leaves at once, so each adoption waits longer.
 * A chain through a target's frame is replayed. */
static int replay(struct tstate *s, const struct chain_key *k);

static int chain_seen(struct tstate *s, uintptr_t slot, uintptr_t ip)
{
	struct chain_key *k = expected(s);
	if (chain_holds(k, slot, ip, s->top, unloads_now()))
		trace_follow(s, k);
	else
		k = chain_lookup(s, slot, ip);
	if (!k)
		return 0;
	if (MS_UNLIKELY(k->target))
		return replay(s, k);
	if (MS_LIKELY(!adopt_due(s)))
		return 1;
	adopt_chain(s, k);
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

/* Takes in what the walk found: known frames no longer there go, new frames come in (outermost
 * first, down to the innermost target frame; target frames get their trampolines and open their
 * stages). */
static void apply(struct tstate *s, const struct chain *ch)
{
	while (s->n > ch->keep)
		pop_stale(s, MS_END_JUMPED);
	int last = ch->targets_known ? __builtin_ctz(ch->targets) : innermost_target(s, ch);
	/* with a target found, only the target frames are taken in: the frames between them are their
	 * callers, gone only after them (each would cost a firing of the marker as it leaves, once a
	 * statement for a target called from a short-lived caller) */
	for (int k = ch->nc - 1; k >= (last > 0 ? last : 0) && s->n < MAX_FRAMES; k--)
		if (last < 0 || (ch->targets_known ? ch->targets >> k & 1 : ms_syms_stage_at(s->c[k].ip - 1) >= 0))
			push(s, &s->c[k]);
	/* the frames a target function called are left out (they come and go call after call): its
	 * trampoline watches them, and the way up to it is remembered (unless every stage is open now:
	 * the checks in there are one compare) */
	if (last > 0 && last <= CHAIN_MAX && s->n > 0 && s->f[s->n - 1].slot == s->c[last].slot && !all_open(s))
		add_chain(s, ch, last, 0);
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
	ensure_watch(s);
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

static void found(struct tstate *s, const struct chain *ch);

/* handler_note: a signal handler changes nothing.  The code it interrupted may be a function that
 * has just returned into its trampoline, before the trampoline read where to go (a window of a few
 * instructions nothing can close); moving that trampoline now would send the return elsewhere.
 * Memory moved by the handler still counts toward the stages open; a stage function entered only
 * inside a handler is not seen. */
static void look(struct tstate *s)
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
			trace_found(s, add_chain(s, &ch, ch.nc, 0));
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
		trace_found(s, add_chain(s, &ch, ch.nc, target_frames(s, &ch)));
	found(s, &ch);
}

/* Takes in what a walk (or its replay) found. */
static void found(struct tstate *s, const struct chain *ch)
{
	int before = s->n;
	apply(s, ch);
	int entry_is_top = ch->nc ? s->n - before >= 0 && s->n > 0 && s->f[s->n - 1].slot == s->c[0].slot
				  : ch->match >= 0 && ch->match == s->n - 1;
	ensure_watch(s);
	if (entry_is_top && s->n > 0 && s->f[s->n - 1].slot > ch->entry_slot)
		add_key(&s->f[s->n - 1], ch->entry_slot, ch->entry_ip);
}

/* A hit of a chain through a target's frame: what the walk that found it did, without walking (its
 * frames are all in place, so a walk would find the same), as found() does with apply(): its target
 * frames taken in, the way up to the innermost one remembered unless every stage is open now, and
 * the call remembered when that frame made it.  0 when this thread may not change its frames now
 * (the slow path decides). */
static __attribute__((noinline)) int replay(struct tstate *s, const struct chain_key *k)
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
		push_stage(s, &(struct cand){ fr[j].slot, fr[j].ra, j ? fr[j - 1].ra : k->entry_ip },
			   k->stage[CHAIN_MAX - k->n + j]);
	}
	uintptr_t top_slot = s->f[s->n - 1].slot;
	if (last > 0 && top_slot == fr[last].slot && !all_open(s)) {
		for (int j = 0; j < last; j++)
			s->c[j] = (struct cand){ fr[j].slot, fr[j].ra, j ? fr[j - 1].ra : k->entry_ip };
		const struct chain inner = { .entry_slot = entry_slot(k), .entry_ip = k->entry_ip };
		add_chain(s, &inner, last, 0);
	}
	ensure_watch(s);
	if (top_slot == fr[0].slot && s->n > 0 && s->f[s->n - 1].slot > entry_slot(k))
		add_key(&s->f[s->n - 1], entry_slot(k), k->entry_ip);
	ms_tls_guard--;
	s->busy = 0;
	errno = saved;
	return 1;
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
	struct tstate *s = ts;
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
	look(s);
	ms_tls_guard--;
	s->busy = 0;
	errno = saved;
}

/* A call through chain K (verified, found in the trace) that is not a plain hit: a target's
 * frame on the way is taken in, or the chain adopted (its ADOPT_HITS-th hit); else the slow way. */
static __attribute__((noinline)) void check_chains_after(struct tstate *s, uintptr_t *slot, struct chain_key *k)
{
	if (k && k->target && replay(s, k))
		return;
	if (k && !k->target)
		adopt_chain(s, k);
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
	k = chain_lookup(s, (uintptr_t)slot, *slot);
	if (MS_LIKELY(k && !k->target && !adopt_due(s)))
		return;
	check_chains_after(s, slot, k);
}

/* The common case in a few loads (no frame of its own): every stage open, or the wrapper called
 * again from a place seen before, or through the chain of frames expected next (through no
 * target's frame: see entry_key); else through any chain, or slowly. */
void ms_native_check(uintptr_t *slot)
{
	struct tstate *s = ts;
	if (MS_UNLIKELY(s == NULL)) {
		check_slow(slot);
		return;
	}
	/* every stage open: no look can change a count (and no key is added then, so this comes first);
	 * no frame known: top is none, which never matches */
	if (all_open(s) || seen_before(s, (uintptr_t)slot, *slot))
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

/* ---- entering: a call bound through the GOT --------------------------------------------------- */

void ms_native_enter_call(int spec, uintptr_t *slot)
{
	struct tstate *s = state();
	if (!s || s->busy || s->unwinding)
		return; /* a signal handler inside this file, or an exception in flight: not seen */
	s->busy = 1;
	flush_deferred(s);
	while (s->n > 0 && s->f[s->n - 1].slot <= (uintptr_t)slot)
		pop_stale(s, MS_END_JUMPED); /* below the caller's stack pointer: gone */
	if (s->n < MAX_FRAMES) {
		if (s->watch_at == s->n - 1)
			unwatch(s); /* the new frame is the innermost: it needs no marker above it */
		struct frame *f = &s->f[s->n];
		f->slot = (uintptr_t)slot;
		f->ra = *slot;
		f->stage = spec;
		set_tramp(f, -1);
		int t = ms_pool_take();
		if (t < 0 || enter(s, spec) < 0) {
			ms_pool_give(t);
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

/* ---- leaving: return, unwinding, longjmp, thread exit ---------------------------------------- */

/* Frame K has gone (returned or unwound): everything above it went before it. */
static void drop_to(struct tstate *s, int k, int t, int unwinding)
{
	while (s->n - 1 > k) /* gone before it without their trampolines: jumped over, or unwound */
		pop_stale(s, unwinding ? MS_END_UNWOUND : MS_END_JUMPED);
	struct frame *f = &s->f[k];
	if (f->stage >= 0)
		leave(s, f->stage, unwinding ? MS_END_UNWOUND : MS_END_RETURNED);
	if (t == s->watch)
		s->watch_at = -1;
	else if (unwinding)
		defer(s, t); /* the unwinder reads the return address after we return */
	else
		ms_pool_give(t);
	set_n(s, k);
}

uintptr_t ms_native_tramp_fire(uintptr_t block_ret)
{
	int t = (int)((block_ret - (uintptr_t)ms_tramp_base - 6) / MS_TRAMP_SIZE);
	uintptr_t ra = ms_pool_ra(t);
	int saved = errno;
	struct tstate *s = ts;
	ms_tls_guard++;
	STAT(fired);
	if (s && !s->busy) {
		s->busy = 1;
		flush_deferred(s);
		int k = find_tramp(s, t);
		if (k >= 0) {
			drop_to(s, k, t, 0);
			if (!s->unwinding)
				ensure_watch(s);
		} else if (t != s->watch) {
			ms_pool_give(t); /* a retired trampoline: its frame did return after all */
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
__attribute__((visibility("hidden"))) int ms_native_personality(int version, int actions, uint64_t cls,
								   void *exc, void *ctx);
int ms_native_personality(int version, int actions, uint64_t cls, void *exc, void *ctx)
{
	if (!(actions & UA_CLEANUP_PHASE))
		return URC_CONTINUE_UNWIND;
	static struct ms_scoped get_ip_real = MS_SCOPED("_Unwind_GetIP");
	/* the unwinder calling us is the one whose context CTX is (libgcc_s may be loaded locally) */
	uintptr_t (*get_ip)(void *) = (uintptr_t(*)(void *))ms_resolve_scoped(&get_ip_real, MS_CALLER(), NULL);
	int saved = errno;
	ms_tls_guard++;
	struct tstate *s = ts;
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
	struct tstate *s = ts;
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	if (!s || s->busy || target_sp <= here ||
	    (target_sp > s->stack_top && (s->n == 0 || target_sp > s->f[0].slot)))
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
			leave(s, f->stage, MS_END_JUMPED);
		if (f->tramp == s->watch)
			s->watch_at = -1;
		else
			ms_pool_give(f->tramp);
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
	struct tstate *s = ts;
	if (s)
		s->unwinding++;
}

void ms_native_unwind_end(void)
{
	struct tstate *s = ts;
	if (s && s->unwinding > 0)
		s->unwinding--;
}

/* Thread exit: the frames left (the thread's start routine's callers) get their return addresses
 * back and every trampoline returns to the pool. */
static void thread_gone(void *arg)
{
	struct tstate *s = arg;
	if (!s || s != ts)
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
			leave(s, f->stage, MS_END_UNWOUND); /* the thread ended without their return */
		if (f->tramp != s->watch)
			ms_pool_give(f->tramp);
	}
	if (s->watch >= 0)
		ms_pool_give(s->watch);
	ts = NULL;
	syscall(SYS_munmap, s, sizeof *s);
}

int ms_stack_init(void)
{
	for (int i = 0; i < ms_native_ntargets; i++)
		if (ms_native_targets[i].stage >= 0 && ms_native_targets[i].stage < MS_SPEC_MAX_STAGES)
			native_stages |= 1u << ms_native_targets[i].stage;
	ms_unwinder_init();
	return pthread_key_create(&state_key, thread_gone) == 0 ? 0 : -1;
}
