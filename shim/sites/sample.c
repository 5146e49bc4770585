/* Sampling and the peak copies (see sites.h).  Each thread counts down the bytes to its next
 * sample, drawn from an exponential distribution with mean R (MEMSHIM_SITES_RATE), so every byte
 * has the same chance and a sample stands for R bytes.  A sampled block goes into the live table
 * (address -> stack, weight) and adds its weight to its stack's live bytes; its free takes it out.
 * Each open stage call keeps a copy of the largest stacks' live bytes, refreshed when the CPU (or
 * GPU) live rises more than 2% above the live at the last copy.  A copy splits them into what the
 * call added and what was live from before its begin: every block records the boundary generation
 * it was sampled in, and a copy sums the blocks born since the call's begin from the live table
 * (copies are few: at most one per 2% of growth), so samples and frees do no more work.  One spin
 * lock guards the tables; a thread that finds itself already inside (a signal handler) skips the
 * sample.  The common sample, from where its thread sampled last, takes its stack by id (sites.h's
 * inline check) and calls nothing but a held lock's wait: with its free, about 340 instructions
 * (doc/bench.md, `make bench-sites`).
 * MEMSHIM_SITES=exact records every allocation instead, at its size: intercept's floor is raised,
 * so each allocation of every thread enters take (a stack and the lock each: the cost of exact
 * shares).  MEMSHIM_SITES=exact:STAGE,... raises it only while a call of a named stage is open (each
 * boundary looks at the engine's depths), and take leaves a thread's countdown where it was: the
 * draws are memoryless, so the sampling outside the stages stays unbiased. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/config.h"
#include "core/counters.h"
#include "core/expmath.h"
#include "core/spin.h"
#include "core/stages.h"
#include "cuda/cuda.h"
#include "intercept/sample.h"
#include "python/py.h"
#include "sites/sites.h"

#define LIVE_BITS_FIRST 7      /* 128 slots (4 KiB, a page) at first: the table doubles as samples stay live */
#define LIVE_BITS_MAX 19       /* sampled: 262,144 live blocks, about 128 GiB at the default rate */
#define LIVE_BITS_MAX_EXACT 23 /* exact: 4 Mi live blocks (a 256 MiB table at most, touched as used) */
#define LIVE_SLOTS (1u << live_bits)
#define MAX_LIVE ((1u << live_bits_max) / 2)

struct live {
	uint64_t addr; /* 0: empty */
	int32_t stack;
	uint8_t gpu;
	uint8_t exact;   /* a BLOCK_ kind: counted at its true size unless BLOCK_ESTIMATED */
	uint16_t points; /* the samples it counts for (points()), 0 when that does not fit: no division at its free */
	int64_t weight;
	uint64_t born; /* the boundary generation it was sampled in */
};

/* A CPU block this many times the rate is sampled with probability 1 - e^-14 > 1 - 1e-6 and
 * stands for its own size: exact. */
#define EXACT_RATES 14

/* How a block was recorded: sampled and weighed, sampled and far above the rate (so at its true
 * size, EXACT_RATES), or with every allocation (exact mode or stage, and device blocks: one point each). */
enum { BLOCK_ESTIMATED, BLOCK_AT_SIZE, BLOCK_EVERY };

static int on; /* the tables are mapped and samples are taken */
/* MEMSHIM_SITES: on at the first sample or device allocation (a process that never allocates much
 * maps nothing) */
static int wanted;
static int exact_mode;   /* MEMSHIM_SITES=exact: every allocation recorded at its size */
static int exact_tables; /* the tables at exact mode's bounds (exact mode, or exact:STAGE) */
/* Per stage MEMSHIM_SITES=exact:... names, its engine id; -1 until a call of it begins. */
static int exact_ids[MS_SITES_EXACT_MAX];
static int64_t rate;
static struct live *live;
static unsigned live_bits = LIVE_BITS_FIRST, live_bits_max = LIVE_BITS_MAX;
/* LIVE_SLOTS - 1 and slot_of's shift, kept with live_bits: no computing them at each sample */
static uint32_t live_mask = (1u << LIVE_BITS_FIRST) - 1;
static unsigned live_shift = 64 - LIVE_BITS_FIRST;
/* The table doubles when this many blocks are live: a quarter of a small table (short probe runs:
 * fewer instructions a sample and a free, at most 256 KiB more), half of one of LIVE_BITS_SMALL or more. */
#define LIVE_BITS_SMALL 14
#define LIVE_ROOM(bits) ((1u << (bits)) / ((bits) < LIVE_BITS_SMALL ? 4 : 2))
static uint32_t live_room = LIVE_ROOM(LIVE_BITS_FIRST);
/* Per filter hash, the CPU blocks in the live table with that hash: a free clears the filter bit
 * when the last one goes, without scanning the table. */
static uint32_t *hash_live;
/* Per stack id, side 0 CPU and 1 GPU: live bytes of its samples and the samples they count for
 * (one 32-byte record: a sample and its free touch one line). */
static struct per_stack {
	int64_t bytes[2], points[2];
} * per_stack;
/* Per stack id: the CPU bytes of its exact blocks (apart, so a small sample touches no more). */
static int64_t *cpu_exact;
/* Per stack id, one side at a time: what blocks born since a call's begin hold (a copy's scratch,
 * all zero between copies). */
static struct tally {
	int64_t bytes, points, exact;
} * added_tally;
static int64_t exact_from = INT64_MAX; /* usable bytes from which a CPU block is exact */
/* Bumped at each call's begin; a block born at a generation >= a call's since was sampled in it. */
static uint64_t boundary_gen, newest_born;

static struct ms_sites_copy cur[MS_MAX_STAGES] MS_LARGE, last[MS_MAX_STAGES] MS_LARGE;
static int64_t cpu_next = INT64_MAX, gpu_next = INT64_MAX; /* lowest refresh threshold of open calls */
/* What a sample compares the CPU word's value bits with: cpu_next as the word holds it (biased), or
 * 0 once a device allocation was seen (then each sample looks at both live values): one compare. */
static uint64_t sample_next = UINT64_MAX;

static uint64_t as_word_value(int64_t bytes)
{
	if (bytes >= (int64_t)(MS_CPU_VALUE_MASK - MS_CPU_BIAS))
		return UINT64_MAX;
	return bytes < -(int64_t)MS_CPU_BIAS ? 0 : (uint64_t)(bytes + (int64_t)MS_CPU_BIAS);
}

/* What every sample and sampled free writes, on one line (two threads sampling pass one line
 * between them, not six). */
static struct {
	struct ms_spin lock;
	uint32_t nlive;
	uint64_t samples, gpu_allocs, samples_dropped, unkept;
	uint64_t gen[2]; /* of each side's stack totals (see latest) */
} shared __attribute__((aligned(64))) = { .gen = { 1, 1 } };
/* This thread's flags and generator, together: one thread-pointer offset for all three. */
static __thread struct {
	int lock_mine, busy;
	uint64_t rng;
} me MS_TLS;

/* Stack ids the tables take (stacks.c interns no more); the last one is never interned: blocks
 * whose stack the tables could not keep count under it, in the lists' closing entry. */
#define STACK_IDS ((size_t)(exact_tables ? MS_SITES_STACKS_EXACT : MS_SITES_STACKS_SAMPLED))
#define UNKEPT_ID ((int32_t)STACK_IDS - 1)

int ms_sites_enabled(void)
{
	return on || wanted;
}

int ms_sites_on(void)
{
	return on;
}

/* ---- drawing ------------------------------------------------------------------------------- */

/* The bytes a sampled block of USABLE bytes stands for. */
static int64_t weight_of(int64_t usable)
{
	double p = ms_one_minus_exp_neg((double)usable / (double)rate);
	return p > 0 ? (int64_t)((double)usable / p + 0.5) : rate;
}

/* A 64-bit linear congruential generator (Steele and Vigna's multiplier): its high bits, which
 * the draws use, are well spread; state 0 means this thread has not drawn yet. */
#define LCG_MUL 0xd1342543de82ef95ULL

static uint64_t next_random(void)
{
	uint64_t x = me.rng;
	if (MS_UNLIKELY(!x)) {
		unsigned lo, hi;
		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
		x = ((uint64_t)hi << 32 | lo) ^ (uint64_t)(uintptr_t)&me.rng * 0x9e3779b97f4a7c15ULL;
	}
	x = x * LCG_MUL + 1;
	me.rng = x;
	return x;
}

/* Bytes to the next sample: exponential with mean RATE, at least 1 (before the tables are built). */
static int64_t draw(void)
{
	double u = (double)((next_random() >> 11) + 1) * (1.0 / 9007199254740992.0);
	double d = -ms_ln(u) * (double)rate;
	return d < 1 ? 1 : d > 4e18 ? (int64_t)4e18 : (int64_t)d;
}

/* draw once the tables are built and this thread's generator seeded (about 50 instructions fewer;
 * a rate is at most 2^40 bytes, so 45 rates fit an int64). */
static inline int64_t draw_fast(void)
{
	uint64_t r = me.rng * LCG_MUL + 1;
	me.rng = r;
	int64_t v = (int64_t)(ms_neg_ln(r) * (double)rate);
	return v < 1 ? 1 : v;
}

/* A sampled block's weight x / (1 - e^-x) in rates (x = s / R) from a table with linear steps
 * between entries, built at the first sample: about 45 instructions a sample less than computing
 * it, and within 2e-5 of it (the sampling's own error is 1 / sqrt(samples)). */
#define WEIGHT_STEPS 32 /* entries per rate */
#define WEIGHT_ENTRIES (EXACT_RATES * WEIGHT_STEPS + 1)
/* In bytes: rate x / (1 - e^-x) at x = i / WEIGHT_STEPS, and the step to the next entry (one more
 * than below exact_from needs, for a product rounded up to the last). */
static struct {
	double at, slope;
} weight_table[WEIGHT_ENTRIES] MS_LARGE;
static double steps_per_byte;

static void build_tables(void)
{
	double step = 1.0 / WEIGHT_STEPS, decay = 1 - ms_one_minus_exp_neg(step), e = 1, w = 1;
	ms_touch(weight_table);
	for (int i = 0; i < WEIGHT_ENTRIES; i++) {
		e *= decay; /* e^-((i + 1) step): powers, not an exponential per entry */
		double next = (i + 1) * step / (1 - e);
		weight_table[i].at = w * (double)rate + 0.5; /* rounded to the nearest byte by truncation */
		weight_table[i].slope = (next - w) * (double)rate;
		w = next;
	}
	steps_per_byte = WEIGHT_STEPS / (double)rate;
}

/* The bytes a sampled block of USABLE bytes (below exact_from) stands for, once the table is built. */
static inline int64_t weight_fast(int64_t usable)
{
	double x = (double)usable * steps_per_byte;
	int i = (int)x;
	return (int64_t)(weight_table[i].at + weight_table[i].slope * (x - i));
}

/* ---- the live table ------------------------------------------------------------------------ */

/* The home slot: leading bits of the same mix as the filter's hash. */
static uint32_t slot_of(uint64_t addr)
{
	return (uint32_t)(ms_sample_mix(addr) >> live_shift);
}

static void live_put(const struct live *e)
{
	uint32_t i = slot_of(e->addr);
	while (live[i].addr)
		i = (i + 1) & live_mask;
	live[i] = *e;
}

/* Doubles the table (lock held): the pages touched follow the samples live, not the whole bound;
 * -1 when it holds MAX_LIVE already.  errno is kept (a sample saves it only around walks). */
static __attribute__((noinline)) int live_double(void)
{
	if (live_bits >= live_bits_max)
		return -1;
	int saved = errno;
	struct live *old = live;
	size_t old_slots = LIVE_SLOTS;
	struct live *bigger = ms_raw_map(2 * old_slots * sizeof *live);
	if (!bigger) {
		errno = saved;
		return -1;
	}
	__atomic_store_n(&live, bigger, __ATOMIC_RELAXED); /* prefetch_slot reads both unlocked */
	__atomic_store_n(&live_bits, live_bits + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&live_shift, live_shift - 1, __ATOMIC_RELAXED);
	live_mask = LIVE_SLOTS - 1;
	live_room = LIVE_ROOM(live_bits);
	for (size_t i = 0; i < old_slots; i++)
		if (old[i].addr)
			live_put(&old[i]);
	syscall(SYS_munmap, old, old_slots * sizeof *old);
	errno = saved;
	return 0;
}

/* Room for one more block: the table doubles at live_room (lock held). */
static inline int live_grow(void)
{
	return shared.nlive < live_room ? 0 : live_double();
}

/* Sets or clears filter hash H's bit (lock held: a plain read and write, no locked instruction;
 * the hot path only reads the bit). */
static void filter_set(unsigned h, int set)
{
	uint64_t *word = &ms_sample_filter[h / 64], bit = UINT64_C(1) << (h % 64);
	uint64_t old = __atomic_load_n(word, __ATOMIC_RELAXED);
	__atomic_store_n(word, set ? old | bit : old & ~bit, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) int live_insert(uint64_t addr, int32_t stack, int gpu, int exact,
							     int64_t weight, int64_t k)
{
	if (MS_UNLIKELY(live_grow() < 0))
		return -1;
	uint32_t i = slot_of(addr);
	ms_touch(&live[i]); /* a fresh page: written before it is read */
	for (uint64_t a; (a = live[i].addr) != 0; i = (i + 1) & live_mask)
		if (a == addr) /* a block we never saw freed (a free in a handler): the first stays */
			return -1;
	live[i] = (struct live){ addr,   stack,       (uint8_t)gpu, (uint8_t)exact, k <= UINT16_MAX ? (uint16_t)k : 0,
				 weight, boundary_gen };
	newest_born = boundary_gen;
	shared.nlive++;
	if (!gpu) {
		unsigned h = ms_sample_hash(addr);
		ms_touch(&hash_live[h]); /* a fresh page: written before it is read */
		if (hash_live[h]++ == 0)
			filter_set(h, 1);
	}
	return 0;
}

/* The slot of ADDR on side GPU, or -1. */
static inline __attribute__((always_inline)) int64_t live_find(uint64_t addr, int gpu)
{
	for (uint32_t mask = live_mask, i = slot_of(addr);; i = (i + 1) & mask) {
		uint64_t a = live[i].addr;
		if (a == addr && live[i].gpu == gpu)
			return i;
		if (!a)
			return -1;
	}
}

/* Empties slot I of block ADDR (backward-shift deletion keeps probe chains short). */
static inline __attribute__((always_inline)) void live_remove(uint32_t i, uint64_t addr, int gpu)
{
	uint32_t mask = live_mask, shift = live_shift;
	for (uint32_t j = i;;) {
		j = (j + 1) & mask;
		uint64_t a = live[j].addr;
		if (!a)
			break;
		/* J moves back to the hole at I unless its home K lies cyclically in (I, J] */
		uint32_t k = (uint32_t)(ms_sample_mix(a) >> shift);
		if (((j - k) & mask) >= ((j - i) & mask)) {
			live[i] = live[j];
			i = j;
		}
	}
	live[i].addr = 0;
	shared.nlive--;
	if (!gpu && --hash_live[ms_sample_hash(addr)] == 0)
		filter_set(ms_sample_hash(addr), 0);
}

/* ---- peak copies --------------------------------------------------------------------------- */

/* Samples a block of WEIGHT stands for: one per RATE bytes (a GPU allocation, and every block
 * recorded with every allocation, is one). */
static inline int64_t points(int64_t weight, int gpu, int exact)
{
	int64_t k = gpu || exact == BLOCK_EVERY ? 1 : weight / rate;
	return k > 0 ? k : 1;
}

/* Counts stack entry E into list L: among the MS_SITES_TOP largest, or in the rest (as is the
 * entry it pushes out). */
static void offer(struct ms_sites_list *l, struct ms_sites_entry e)
{
	if (e.bytes <= 0)
		return;
	struct ms_sites_entry out = e;
	int at = l->n, pushed = 0;
	if (e.stack != UNKEPT_ID && at < MS_SITES_TOP) { /* frames not kept: only ever in the closing entry */
		l->n++;
	} else if (e.stack != UNKEPT_ID && e.bytes > l->e[--at].bytes) {
		out = l->e[at];
		pushed = 1;
	} else {
		at = -1; /* not among the largest */
	}
	if (at >= 0) {
		while (at > 0 && l->e[at - 1].bytes < e.bytes) {
			l->e[at] = l->e[at - 1];
			at--;
		}
		l->e[at] = e;
		if (!pushed)
			return;
	}
	l->rest.stack++;
	l->rest.bytes += out.bytes;
	l->rest.samples += out.samples;
	l->rest.exact += out.exact;
}

static void list_clear(struct ms_sites_list *l)
{
	l->n = 0;
	l->rest = (struct ms_sites_entry){ 0, 0, 0, 0 };
}

/* Stack ID's live bytes on SIDE (0 CPU, 1 GPU), less those of T (blocks born since a begin). */
static struct ms_sites_entry stack_entry(uint32_t id, int side, const struct tally *t)
{
	const struct per_stack *p = &per_stack[id];
	int64_t exact = side ? p->bytes[1] : cpu_exact[id];
	return (struct ms_sites_entry){ (int32_t)id, p->bytes[side] - t->bytes, p->points[side] - t->points,
					exact - t->exact };
}

/* Every stack with live bytes on SIDE into L. */
static void list_all(int side, struct ms_sites_list *l)
{
	static const struct tally none;
	uint32_t n = ms_sites_nstacks();
	list_clear(l);
	for (uint32_t id = 0; id < n; id++)
		if (per_stack[id].bytes[side] > 0)
			offer(l, stack_entry(id, side, &none));
	if (per_stack[UNKEPT_ID].bytes[side] > 0)
		offer(l, stack_entry((uint32_t)UNKEPT_ID, side, &none));
}

/* Blocks on SIDE born at generation SINCE or later, summed per stack into added_tally. */
static void tally_since(int side, uint64_t since)
{
	for (uint32_t i = 0; i < LIVE_SLOTS; i++) {
		const struct live *e = &live[i];
		if (!e->addr || e->gpu != side || e->born < since)
			continue;
		struct tally *t = &added_tally[e->stack];
		t->bytes += e->weight;
		t->points += points(e->weight, side, e->exact);
		t->exact += e->exact ? e->weight : 0;
	}
}

/* SIDE's stacks split into what blocks born since SINCE hold (ADDED) and the rest (BEFORE); the
 * scratch tally is left zero again. */
static void split_stack(uint32_t id, int side, struct ms_sites_list *added, struct ms_sites_list *before)
{
	static const struct tally none;
	struct tally *t = &added_tally[id];
	if (per_stack[id].bytes[side] > 0)
		offer(before, stack_entry(id, side, t));
	if (t->bytes) {
		offer(added, (struct ms_sites_entry){ (int32_t)id, t->bytes, t->points, t->exact });
		*t = none;
	}
}

static void list_split(int side, uint64_t since, struct ms_sites_list *added, struct ms_sites_list *before)
{
	uint32_t n = ms_sites_nstacks();
	tally_since(side, since);
	list_clear(added);
	list_clear(before);
	for (uint32_t id = 0; id < n; id++)
		split_stack(id, side, added, before);
	split_stack((uint32_t)UNKEPT_ID, side, added, before);
}

static int64_t threshold(int64_t at)
{
	return at + (int64_t)((double)at * MS_SITES_LAG);
}

/* The last list of every stack of each side (0 CPU, 1 GPU) and the table generation it was made
 * at: the copy at a call's begin (all of it from before) reuses it while nothing was sampled or
 * freed since (stage boundaries come far more often than samples). */
static struct latest {
	uint64_t gen;
	struct ms_sites_list all;
} latest[2] MS_LARGE;

/* Side SIDE of call copy C, remade only when its table changed since C's last copy. */
static void copy_side(struct ms_sites_copy *c, int side)
{
	if (c->gen[side] == shared.gen[side])
		return;
	c->gen[side] = shared.gen[side];
	if (newest_born < c->since) { /* nothing sampled in the call is live: all of it from before */
		struct latest *l = &latest[side];
		ms_touch(l); /* a fresh page: written before it is read */
		if (l->gen != shared.gen[side]) {
			list_all(side, &l->all);
			l->gen = shared.gen[side];
		}
		list_clear(&c->added[side]);
		c->before[side] = l->all;
		return;
	}
	list_split(side, c->since, &c->added[side], &c->before[side]);
}

static void copy_cpu(struct ms_sites_copy *c, int64_t now)
{
	c->cpu_at = now;
	copy_side(c, 0);
}

static void copy_gpu(struct ms_sites_copy *c, int64_t now)
{
	c->gpu_at = now;
	copy_side(c, 1);
}

/* Stage ids with an open call, so boundaries and refreshes look at those only. */
static int open_ids[MS_MAX_STAGES], nopen;

static void recompute_next(void)
{
	int64_t cn = INT64_MAX, gn = INT64_MAX;
	for (int k = 0; k < nopen; k++) {
		const struct ms_sites_copy *c = &cur[open_ids[k]];
		int64_t ct = threshold(c->cpu_at), gt = threshold(c->gpu_at);
		cn = ct < cn ? ct : cn;
		gn = gt < gn ? gt : gn;
	}
	__atomic_store_n(&cpu_next, cn, __ATOMIC_RELAXED);
	__atomic_store_n(&gpu_next, gn, __ATOMIC_RELAXED);
	sample_next = shared.gpu_allocs ? 0 : as_word_value(cn);
}

/* Refreshes the copies of open calls whose peak rose past their threshold (lock held). */
static void refresh(int64_t cpu_now, int64_t gpu_now)
{
	for (int k = 0; k < nopen; k++) {
		struct ms_sites_copy *c = &cur[open_ids[k]];
		if (cpu_now > threshold(c->cpu_at))
			copy_cpu(c, cpu_now);
		if (gpu_now > threshold(c->gpu_at))
			copy_gpu(c, gpu_now);
	}
	recompute_next();
}

/* A call of stage ID begins with a copy of what is live now. */
static void start_call(int id, int64_t cpu_now, int64_t gpu_now)
{
	cur[id].valid = 1;
	cur[id].since = ++boundary_gen;
	cur[id].begins = ms_stage_begins(id);
	cur[id].gen[0] = cur[id].gen[1] = 0; /* table generations start at 1: both sides are copied */
	copy_cpu(&cur[id], cpu_now);
	copy_gpu(&cur[id], gpu_now);
	open_ids[nopen++] = id;
}

/* The call of open_ids[K] ended: a last look at the live values (the end may be its peak). */
static void end_call(int k, int64_t cpu_now, int64_t gpu_now)
{
	int id = open_ids[k];
	if (cpu_now > cur[id].cpu_at)
		copy_cpu(&cur[id], cpu_now);
	if (gpu_now > cur[id].gpu_at)
		copy_gpu(&cur[id], gpu_now);
	last[id] = cur[id];
	cur[id].valid = 0;
	open_ids[k] = open_ids[--nopen];
}

/* Starts and ends calls to match the engine: the open ones are checked, and STAGE (or, with -1,
 * every stage: at start and in a forked child) may have begun. */
static void sync_stages(int stage)
{
	int64_t cpu_now = ms_live(MS_CPU), gpu_now = ms_live(MS_GPU);
	for (int k = nopen; k-- > 0;) {
		int id = open_ids[k];
		if (ms_stage_depth(id) == 0) {
			end_call(k, cpu_now, gpu_now);
		} else if (cur[id].begins != ms_stage_begins(id)) { /* a new call began unseen */
			end_call(k, cpu_now, gpu_now);
			start_call(id, cpu_now, gpu_now);
		}
	}
	/* depth first: copies of stages not open are never read, so their pages stay unfaulted */
	for (int id = stage < 0 ? 0 : stage; id < (stage < 0 ? MS_MAX_STAGES : stage + 1); id++)
		if (id < MS_MAX_STAGES && ms_stage_depth(id) > 0) {
			ms_touch(&cur[id]); /* a fresh page: written before it is read */
			if (!cur[id].valid)
				start_call(id, cpu_now, gpu_now);
		}
	if (cpu_now > cpu_next || gpu_now > gpu_next)
		refresh(cpu_now, gpu_now);
	else
		recompute_next();
}

/* ---- exact stages -------------------------------------------------------------------------- */

/* Whether a stage MEMSHIM_SITES=exact:... names has a call open now (lock held). */
static int exact_stage_open(void)
{
	int open = 0;
	for (int k = 0; k < ms_cfg.nsites_exact; k++) {
		if (exact_ids[k] < 0)
			exact_ids[k] = ms_stage_find(ms_cfg.sites_exact[k]);
		open |= ms_stage_depth(exact_ids[k]) > 0;
	}
	return open;
}

/* Every allocation recorded while an exact stage is open (lock held, or at start): the engine's
 * depths are read after the boundary that changed them, so the last boundary's look wins. */
static void update_window(void)
{
	if (ms_cfg.nsites_exact)
		ms_sample_set_every(exact_stage_open());
}

/* ---- the slow paths ------------------------------------------------------------------------ */

static inline int enter(void)
{
	if (me.busy || me.lock_mine)
		return -1;
	me.busy = 1;
	return 0;
}

/* A boundary this thread had to skip (from a handler inside the sampler) left the exact window as
 * it was: the next leave looks again, so a window never stays open past its stage. */
static int window_stale;

static __attribute__((noinline)) void look_at_window(void)
{
	ms_spin_lock(&shared.lock, &me.lock_mine);
	if (__atomic_exchange_n(&window_stale, 0, __ATOMIC_ACQ_REL))
		update_window();
	ms_spin_unlock(&shared.lock, &me.lock_mine);
}

static inline void leave(void)
{
	if (MS_UNLIKELY(__atomic_load_n(&window_stale, __ATOMIC_ACQUIRE)) && !me.lock_mine)
		look_at_window();
	me.busy = 0;
}

/* A block of WEIGHT bytes standing for K samples, of stack ID (EXACT: counted at its true size),
 * came (SIGN 1) or went (-1) on side GPU (lock held: every reader holds it too). */
static inline __attribute__((always_inline)) void stack_moved(int32_t id, int gpu, int exact, int64_t weight, int64_t k,
							      int sign)
{
	int side = gpu != 0;
	per_stack[id].bytes[side] += sign * weight;
	if (exact && !gpu)
		cpu_exact[id] += sign * weight;
	per_stack[id].points[side] += sign * k;
	shared.gen[side]++;
}

/* Refreshes the copies of open calls when a live value passed their threshold (lock held): the GPU
 * word is read only once a device allocation was seen. */
static __attribute__((noinline)) void refresh_at(int64_t cpu_now)
{
	/* no device allocation yet: no GPU site to copy, and the GPU word is not read */
	int64_t gpu_now = shared.gpu_allocs ? ms_live(MS_GPU) : 0;
	if (cpu_now > cpu_next || gpu_now > gpu_next)
		refresh(cpu_now, gpu_now);
}

static inline void refresh_if_high(void)
{
	/* the CPU word is this thread's own line after its allocation's add: read whether a call is open or not */
	uint64_t v = __atomic_load_n(&ms_cpu.word, __ATOMIC_RELAXED) & MS_CPU_VALUE_MASK;
	if (MS_UNLIKELY(v > sample_next))
		refresh_at((int64_t)(v - MS_CPU_BIAS));
}

/* Starts fetching ADDR's live-table slot, to arrive while the stack is walked: the table is seldom
 * in cache, and that one miss was most of a sample's cost.  Reads the table unlocked: a stale one
 * only wastes the prefetch, which never faults. */
static inline void prefetch_slot(uint64_t addr)
{
	const struct live *t = __atomic_load_n(&live, __ATOMIC_RELAXED);
	unsigned shift = __atomic_load_n(&live_shift, __ATOMIC_RELAXED);
	__builtin_prefetch((const char *)t + (ms_sample_mix(addr) >> shift) * sizeof *t, 1);
}

/* Adds block ADDR of WEIGHT bytes (EXACT: its kind) of stack ID to the tables (lock held). */
static inline __attribute__((always_inline)) void add_block(uint64_t addr, int32_t id, int gpu, int exact,
							    int64_t weight)
{
	int64_t k = points(weight, gpu, exact); /* one division for the stack's total and the count */
	if (MS_LIKELY(live_insert(addr, id, gpu, exact, weight, k) == 0))
		stack_moved(id, gpu, exact, weight, k, 1);
	else
		shared.samples_dropped++;
	if (gpu) {
		shared.gpu_allocs++;
		sample_next = 0;
	} else {
		shared.samples += (uint64_t)k;
	}
}

/* Records block ADDR of WEIGHT bytes (EXACT: its true size) with the calling thread's stack, read
 * by a walk (a device block, or a CPU one from elsewhere than this thread's last sample). */
static __attribute__((noinline)) void record(uint64_t addr, int64_t weight, int gpu, int exact, const uintptr_t *start)
{
	uint64_t frames[2 * MS_SITES_MAX_FRAMES];
	int32_t id;
	int saved = errno; /* the walk may make system calls */
	prefetch_slot(addr);
	int n = ms_sites_capture(frames, MS_SITES_MAX_FRAMES, start, &id);
	ms_spin_lock(&shared.lock, &me.lock_mine);
	if (id < 0) {
		int remember = id == -2;
		id = ms_sites_capture_locked(frames, n);
		if (id >= 0 && remember)
			ms_sites_capture_known(id);
		else if (id < 0)
			id = UNKEPT_ID, shared.unkept++; /* its bytes still count, in the closing entry */
	}
	add_block(addr, id, gpu, exact, weight);
	refresh_if_high();
	ms_spin_unlock(&shared.lock, &me.lock_mine);
	errno = saved;
}

/* Records CPU block P (the sampler entered, busy set), then leaves the sampler: when this thread's
 * last stack is still the one (a sample from the same place), it is taken by id with no frame
 * copied; otherwise walked. */
static inline __attribute__((always_inline)) void *record_cpu(void *p, int64_t weight, int exact, uintptr_t sp,
							      uintptr_t rbp)
{
	uintptr_t ra = *(const uintptr_t *)(sp - 8);
	uint64_t addr = (uint64_t)(uintptr_t)p;
	prefetch_slot(addr);
	int32_t id = ms_sites_known(sp, rbp, ra);
	if (MS_UNLIKELY(id == MS_SITES_CHECK_SLOW))
		id = ms_sites_known_slow();
	if (MS_UNLIKELY(id < 0)) {
		uintptr_t start[3] = { sp, rbp, ra };
		record(addr, weight, 0, exact, start);
	} else {
		ms_spin_lock(&shared.lock, &me.lock_mine);
		add_block(addr, id, 0, exact, weight);
		refresh_if_high();
		ms_spin_unlock(&shared.lock, &me.lock_mine);
	}
	leave();
	return p;
}

/* Maps the tables and picks up the open stages, once (the first sample or device allocation). */
/* The open calls were copied before the record that turned sampling on was made, at a live value
 * that already holds it: that record must refresh them, or a stage's first site is never listed. */
static void copy_again_at_first_record(void)
{
	for (int k = 0; k < nopen; k++)
		cur[open_ids[k]].cpu_at = cur[open_ids[k]].gpu_at = 0;
	recompute_next();
}

static void *take(void *p, int64_t usable, uintptr_t sp, uintptr_t rbp);
static void *take_other(void *p, int64_t usable, uintptr_t sp, uintptr_t rbp);
static void forget(void *p);

/* The wrappers' way up (intercept's hooks): take_other until the tables are on, then take and
 * forget, so neither looks at on (it goes back to 0 only in a forked child, the one thread). */
static void set_sampler(int tables_on)
{
	ms_set_sampler(tables_on ? take : take_other, tables_on ? forget : NULL);
}

static int turn_on(void)
{
	ms_spin_lock(&shared.lock, &me.lock_mine);
	if (!on && wanted) {
		__atomic_store_n(&live, ms_raw_map(LIVE_SLOTS * sizeof *live), __ATOMIC_RELAXED);
		per_stack = ms_raw_map(STACK_IDS * sizeof *per_stack);
		cpu_exact = ms_raw_map(STACK_IDS * sizeof *cpu_exact);
		added_tally = ms_raw_map(STACK_IDS * sizeof *added_tally);
		hash_live = ms_raw_map(sizeof *hash_live << MS_SAMPLE_FILTER_BITS);
		if (live && per_stack && cpu_exact && added_tally && hash_live &&
		    ms_sites_stacks_init(exact_tables) == 0) {
			build_tables();
			sync_stages(-1);
			copy_again_at_first_record();
			__atomic_store_n(&on, 1, __ATOMIC_RELEASE);
			set_sampler(1);
		} else {
			wanted = 0;
			ms_sample_set_every(0); /* nothing to record: the wrappers stop asking */
			ms_warn("call sites are off: could not map their tables");
		}
	}
	ms_spin_unlock(&shared.lock, &me.lock_mine);
	return on;
}

/* take's other cases: not on yet or off, every allocation recorded, this thread's first draw, a
 * countdown not run out (the floor moved), a handler inside the sampler. */
static __attribute__((noinline)) void *take_other(void *p, int64_t usable, uintptr_t sp, uintptr_t rbp)
{
	if (!wanted) { /* off, or not started yet: look again in a while unless it is off for good */
		ms_sample_rest();
		return p;
	}
	int sampled = 1, exact = BLOCK_EVERY;
	int64_t weight = usable;
	if (ms_sample_every()) {
		ms_sample_left += usable; /* the countdown paused: memoryless, so sampling resumes unbiased */
	} else {
		if (MS_UNLIKELY(!me.rng)) /* this thread's first allocation: it starts with a drawn budget */
			ms_sample_left += draw();
		sampled = ms_sample_left < 0; /* the next sample point fell inside this block */
		if (sampled)
			ms_sample_left = draw(); /* memoryless: the next point is a fresh draw from the block's end */
		exact = usable >= exact_from ? BLOCK_AT_SIZE : BLOCK_ESTIMATED;
		weight = exact                                               ? usable
			 : MS_LIKELY(__atomic_load_n(&on, __ATOMIC_ACQUIRE)) ? weight_fast(usable)
									     : weight_of(usable);
	}
	if (!sampled || !p || enter() < 0)
		return p;
	int saved = errno; /* turning on maps the tables */
	if (!on && !turn_on()) {
		errno = saved;
		leave();
		return p;
	}
	errno = saved;
	if (exact != BLOCK_EVERY)
		return record_cpu(p, weight, exact, sp, rbp);
	uintptr_t start[3] = { sp, rbp, *(const uintptr_t *)(sp - 8) };
	record((uint64_t)(uintptr_t)p, weight, 0, exact, start);
	leave();
	return p;
}

/* The countdown ran out at block P (never NULL) (intercept's ms_sample_take, registered once on):
 * SP and RBP are the wrapper's.  The common case first: sampling, this thread's generator seeded,
 * and a sample point in this block. */
static void *take(void *p, int64_t usable, uintptr_t sp, uintptr_t rbp)
{
	if (MS_UNLIKELY(ms_sample_every() || !me.rng || ms_sample_left >= 0 || me.busy || me.lock_mine))
		return take_other(p, usable, sp, rbp);
	ms_sample_left = draw_fast(); /* memoryless: the next point is a fresh draw from the block's end */
	me.busy = 1;
	if (usable >= exact_from)
		return record_cpu(p, usable, BLOCK_AT_SIZE, sp, rbp);
	return record_cpu(p, weight_fast(usable), BLOCK_ESTIMATED, sp, rbp);
}

/* Block ADDR of side GPU leaves the tables (lock held): its stack's totals first, so the shift
 * that follows keeps few values. */
static inline __attribute__((always_inline)) void take_out(uint64_t addr, int gpu)
{
	int64_t i = live_find(addr, gpu);
	if (i < 0)
		return;
	const struct live *e = &live[i];
	stack_moved(e->stack, gpu, e->exact, e->weight, e->points ? e->points : points(e->weight, gpu, e->exact), -1);
	live_remove((uint32_t)i, addr, gpu);
}

/* A block whose filter bit is set is released (intercept's ms_sample_forget, registered while on).
 * Only the lock is taken: nothing of this thread's is written outside it, so busy is neither
 * needed nor touched (a handler freeing during a sample's walk takes its block out). */
static void forget(void *p)
{
	if (me.lock_mine)
		return; /* a handler freeing inside our lock: the block stays counted (rare) */
	ms_spin_lock(&shared.lock, &me.lock_mine);
	take_out((uint64_t)(uintptr_t)p, 0);
	ms_spin_unlock(&shared.lock, &me.lock_mine);
	if (MS_UNLIKELY(__atomic_load_n(&window_stale, __ATOMIC_ACQUIRE)))
		look_at_window();
}

void ms_sites_cpu_high(int64_t now)
{
	if (!on || now <= __atomic_load_n(&cpu_next, __ATOMIC_RELAXED) || enter() < 0)
		return;
	ms_spin_lock(&shared.lock, &me.lock_mine);
	refresh(now, ms_live(MS_GPU));
	ms_spin_unlock(&shared.lock, &me.lock_mine);
	leave();
}

/* Every device allocation and free (cuda/'s observer, unsampled). */
static void gpu_alloc(uint64_t dptr, int64_t bytes)
{
	if (!wanted || !dptr || bytes <= 0 || enter() < 0)
		return;
	if (!on && !turn_on()) {
		leave();
		return;
	}
	int saved = errno;
	record(dptr, bytes, 1, BLOCK_EVERY, NULL);
	errno = saved;
	leave();
}

static void gpu_free(uint64_t dptr)
{
	if (!on || !dptr || enter() < 0)
		return;
	ms_spin_lock(&shared.lock, &me.lock_mine);
	take_out(dptr, 1);
	ms_spin_unlock(&shared.lock, &me.lock_mine);
	leave();
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

void ms_sites_init(void)
{
	if (!ms_cfg.sites)
		return;
	rate = ms_cfg.sites_rate > 0 ? ms_cfg.sites_rate : 524288;
	exact_from = rate <= INT64_MAX / EXACT_RATES ? EXACT_RATES * rate : INT64_MAX;
	exact_mode = ms_cfg.sites == MS_SITES_EXACT;
	exact_tables = exact_mode || ms_cfg.nsites_exact > 0;
	live_bits_max = exact_tables ? LIVE_BITS_MAX_EXACT : LIVE_BITS_MAX;
	for (int k = 0; k < MS_SITES_EXACT_MAX; k++)
		exact_ids[k] = -1;
	__atomic_store_n(&wanted, 1, __ATOMIC_RELEASE); /* the tables come with the first sample */
	set_sampler(0);                                 /* the wrappers below call up only through these */
	/* this thread's countdown was the resting 1 MiB: a draw from the next allocation instead, so the
	 * program's first MiB is sampled like the rest (and recorded, in exact mode) */
	ms_sample_left = 0;
	if (exact_mode)
		ms_sample_set_every(1);
	update_window(); /* exact:init: the implicit init is open from the start */
	ms_cuda_set_observer(gpu_alloc, gpu_free);
}

void ms_sites_boundary(int stage, int end)
{
	(void)end;
	if (!(on || (wanted && ms_cfg.nsites_exact)))
		return;
	if (enter() < 0) {
		if (ms_cfg.nsites_exact)
			__atomic_store_n(&window_stale, 1, __ATOMIC_RELEASE); /* our leave, or the next, looks */
		return;
	}
	ms_spin_lock(&shared.lock, &me.lock_mine);
	__atomic_store_n(&window_stale, 0, __ATOMIC_RELAXED); /* this look is after the skipped one */
	update_window(); /* first: what an opened call adds is recorded from its begin's copy on */
	if (on)
		sync_stages(stage >= 0 && stage < MS_MAX_STAGES ? stage : -1);
	ms_spin_unlock(&shared.lock, &me.lock_mine);
	leave();
}

/* fork_prepare took the lock, and the flag before (ms_spin_lock_for_fork) */
static __thread int took_for_fork MS_TLS, flag_before_fork MS_TLS;

void ms_sites_fork_prepare(void)
{
	took_for_fork = ms_spin_lock_for_fork(&shared.lock, &me.lock_mine, &flag_before_fork);
}

void ms_sites_fork_parent(void)
{
	ms_spin_unlock_after_fork(&shared.lock, &me.lock_mine, took_for_fork, flag_before_fork);
}

/* A child that goes on tracking starts over from nothing sampled: the blocks it inherited were
 * the parent's, and its stages start fresh. */
void ms_sites_fork_child(int tracking)
{
	ms_spin_reset(&shared.lock, &me.lock_mine);
	me.busy = 0;
	if (!tracking) {
		wanted = 0;
		ms_sample_set_every(0); /* untracked: the wrappers stop asking */
	} else {
		update_window(); /* the child's stages (its init reopened with no boundary seen here) */
	}
	if (!on)
		return;
	if (!tracking) {
		on = 0;
		set_sampler(0); /* the parent's filter bits stay: nothing to forget */
		return;
	}
	/* dropped, not written: a write copies each page the parent touched (~1 ms per child) */
	ms_zero(live, LIVE_SLOTS * sizeof *live);
	ms_zero(ms_sample_filter, sizeof ms_sample_filter);
	ms_zero(per_stack, STACK_IDS * sizeof *per_stack);
	ms_zero(cpu_exact, STACK_IDS * sizeof *cpu_exact);
	ms_zero(hash_live, sizeof *hash_live << MS_SAMPLE_FILTER_BITS);
	ms_zero(cur, sizeof cur);
	ms_zero(last, sizeof last);
	shared.nlive = 0;
	nopen = 0;
	shared.samples = shared.gpu_allocs = shared.samples_dropped = shared.unkept = 0;
	shared.gen[0]++;
	shared.gen[1]++;
	ms_sites_stacks_reset();
	sync_stages(-1);
}

/* ---- reading ------------------------------------------------------------------------------- */

void ms_sites_stats(struct ms_sites_stats *out)
{
	*out = (struct ms_sites_stats){ .rate = rate,
					.samples = shared.samples,
					.gpu_allocations = shared.gpu_allocs,
					.stacks = ms_sites_nstacks(),
					.stacks_dropped = ms_sites_stacks_dropped(),
					.samples_dropped = shared.samples_dropped,
					.unkept = shared.unkept,
					.python_frames = ms_py_stack_ready(),
					.exact = exact_mode,
					.exact_stages = ms_cfg.nsites_exact };
}

int ms_sites_gpu_live(struct ms_sites_list *out)
{
	if (!on || me.lock_mine || ms_spin_trylock(&shared.lock, &me.lock_mine, 1 << 20) < 0)
		return 0;
	list_all(1, out);
	ms_spin_unlock(&shared.lock, &me.lock_mine);
	return 1;
}

int ms_sites_stage_copy(int id, struct ms_sites_copy *out, int nowait)
{
	if (!on || id < 0 || id >= MS_MAX_STAGES)
		return 0;
	int locked = nowait ? ms_spin_trylock(&shared.lock, &me.lock_mine, 1 << 20) == 0
			    : (ms_spin_lock(&shared.lock, &me.lock_mine), 1);
	*out = cur[id].valid ? cur[id] : last[id];
	if (locked)
		ms_spin_unlock(&shared.lock, &me.lock_mine);
	return out->valid;
}
