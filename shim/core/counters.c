/* Counter storage, the CPU word, GPU bookkeeping and peak windows (see counters.h). */
#include <string.h>
#include "core/counters.h"
#include "core/ms.h"

void (*ms_watch_fn)(enum ms_comp comp, int64_t now);
void (*ms_refresh_fn)(enum ms_refresh_reason why);

/* The counters of CPU components share one cache line: malloc updates touch only it. */
static struct ms_counter counters[MS_NCOMP] __attribute__((aligned(64)));

static inline void raise_peak(int64_t *peak, int64_t value)
{
	int64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
	while (value > seen && !__atomic_compare_exchange_n(peak, &seen, value, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static inline int64_t counter_add(enum ms_comp comp, int64_t bytes)
{
	struct ms_counter *c = &counters[comp];
	int64_t now = __atomic_add_fetch(&c->live, bytes, __ATOMIC_RELAXED);
	if (bytes > 0)
		raise_peak(&c->win_peak, now);
	return now;
}

/* A watch on live values (the timeline sets it): when a component's live leaves [watch_lo,
 * watch_hi], the slow path calls ms_watch_fn.  The thresholds are read on every move; a window
 * of INT64_MIN..INT64_MAX watches nothing. */
static int64_t watch_hi[MS_NCOMP] = { [0 ... MS_NCOMP - 1] = INT64_MAX };
static int64_t watch_lo[MS_NCOMP] = { [0 ... MS_NCOMP - 1] = INT64_MIN };

static inline void watch_check(enum ms_comp comp, int64_t now)
{
	/* clang-format off */
	if (__builtin_expect(now > __atomic_load_n(&watch_hi[comp], __ATOMIC_RELAXED) ||
			     now < __atomic_load_n(&watch_lo[comp], __ATOMIC_RELAXED), 0)) {
		/* clang-format on */
		void (*fn)(enum ms_comp, int64_t) = __atomic_load_n(&ms_watch_fn, __ATOMIC_RELAXED);
		if (fn)
			fn(comp, now);
	}
}

/* Highest live over all closed windows; only touched under the stage engine lock. */
static int64_t closed_peaks[MS_NCOMP];
/* Live when a forked child started its report: the parent's memory it shares copy-on-write. */
static int64_t inherited_live[MS_NCOMP];
static int gpu_used;
static uint32_t devices_used;
/* Components whose counters ever moved (bit per ms_comp): a cut exchanges only their windows. */
static uint32_t moved = (1u << MS_CPU) | (1u << MS_MALLOC);

static void mark_moved(uint32_t bits)
{
	if ((__atomic_load_n(&moved, __ATOMIC_RELAXED) & bits) != bits)
		__atomic_fetch_or(&moved, bits, __ATOMIC_RELAXED);
}

/* The components that move only where they are read or mapped, not on any fast path: a cut
 * exchanges their window only when they were touched since the last one.  The window of one that
 * was not is its live value, unchanged (a cut starts it there and never raises it). */
#define TRACKED ((1u << MS_MMAP) | (1u << MS_RESERVE) | (1u << MS_SHARED) | (1u << MS_RSS) | (1u << MS_CGROUP))
static uint32_t touched = TRACKED;

/* After a tracked component's live or window moved: a change racing with a cut is in the next one. */
static void mark_touched(uint32_t bits)
{
	__atomic_fetch_or(&touched, bits, __ATOMIC_SEQ_CST);
}

/* ---- the CPU word (see counters.h) ------------------------------------------------------------- */

#define PAGE_SHIFT 12
#define EPOCH_OF(x) ((uint16_t)((x) >> MS_CPU_VALUE_BITS))
#define RING 1024 /* mmap changes a stalled add may lag behind and still find its epoch's bytes */
#define FIRST_EPOCH UINT64_C(0xffff)
/* Lowered gate values stay below this: far under any biased live value. */
#define LOWERED_LIMIT MS_CPU_LOWERED_LIMIT

struct ms_cpu_word ms_cpu = {
	.word = (FIRST_EPOCH << MS_CPU_VALUE_BITS) | MS_CPU_BIAS,
	.gate_hi = (FIRST_EPOCH << MS_CPU_VALUE_BITS) | MS_CPU_BIAS,
	.gate_lo = FIRST_EPOCH << MS_CPU_VALUE_BITS,
	.raise_max = (FIRST_EPOCH << MS_CPU_VALUE_BITS) | MS_CPU_VALUE_MASK,
};
/* The current epoch and its mmap pages in one word (epoch << 48 | pages), and the recent ones. */
static uint64_t mmap_now = FIRST_EPOCH << MS_CPU_VALUE_BITS;
static uint64_t mmap_ring[RING] = { [FIRST_EPOCH % RING] = FIRST_EPOCH << MS_CPU_VALUE_BITS };
/* The pages of the parts read rather than counted, reserve and shared, of each epoch in the ring
 * (same tag): mmap = the entry's pages - these.  A ring entry of another epoch (the shared ring's
 * zeros before its first change) reads as the current value. */
enum { READ_RESERVE, READ_SHARED, READ_PARTS };
static uint64_t read_now[READ_PARTS] = { FIRST_EPOCH << MS_CPU_VALUE_BITS, FIRST_EPOCH << MS_CPU_VALUE_BITS };
static uint64_t reserve_ring[RING] = { [FIRST_EPOCH % RING] = FIRST_EPOCH << MS_CPU_VALUE_BITS };
static uint64_t shared_ring[RING] MS_LARGE;
static uint64_t *const read_ring[READ_PARTS] = { reserve_ring, shared_ring };
static uint64_t ring_misses;
/* Changes that may lower gate_hi in progress; while non-zero nobody raises it. */
static uint64_t lowering;
/* Makes every lowered gate value unique, so a raise computed before a lowering cannot land on it. */
static uint64_t lowered_tag;

static int64_t mmap_bytes_of(uint64_t entry)
{
	return (int64_t)((entry & MS_CPU_VALUE_MASK) << PAGE_SHIFT);
}

static int64_t cpu_of(uint64_t word)
{
	return (int64_t)((word & MS_CPU_VALUE_MASK) - MS_CPU_BIAS);
}

/* Biased value V of epoch E as a gate, clamped into the value bits. */
static uint64_t gate_value(uint64_t epoch_word, int64_t v)
{
	uint64_t base = epoch_word & ~MS_CPU_VALUE_MASK;
	if (v <= -(int64_t)MS_CPU_BIAS)
		return base;
	if (v >= (int64_t)MS_CPU_BIAS)
		return base | MS_CPU_VALUE_MASK;
	return base | ((uint64_t)v + MS_CPU_BIAS);
}

/* mmap bytes of the epoch in WORD: from the ring, or the current ones when it moved on that far. */
static int64_t mmap_at(uint64_t word)
{
	uint16_t e = EPOCH_OF(word);
	uint64_t entry = __atomic_load_n(&mmap_ring[e % RING], __ATOMIC_ACQUIRE);
	if (EPOCH_OF(entry) == e)
		return mmap_bytes_of(entry);
	__atomic_add_fetch(&ring_misses, 1, __ATOMIC_RELAXED);
	return mmap_bytes_of(__atomic_load_n(&mmap_now, __ATOMIC_ACQUIRE));
}

/* Bytes of read part PART of the epoch in WORD, the current ones when the ring moved on (only
 * reports read it). */
static int64_t read_at(uint64_t word, int part)
{
	uint16_t e = EPOCH_OF(word);
	uint64_t entry = __atomic_load_n(&read_ring[part][e % RING], __ATOMIC_ACQUIRE);
	if (EPOCH_OF(entry) == e)
		return mmap_bytes_of(entry);
	return mmap_bytes_of(__atomic_load_n(&read_now[part], __ATOMIC_ACQUIRE));
}

static int64_t load_peak(enum ms_comp c)
{
	return __atomic_load_n(&counters[c].win_peak, __ATOMIC_RELAXED);
}

/* A gate that is neither lowered nor clamped may be a CPU high the fast path set (ms_cpu_raise_gate)
 * and no peak holds yet: whoever replaces or reads the gate for the peaks folds it in first.  Any
 * other gate came from the peaks (a minimum of them), so folding it changes nothing. */
static void fold_gate(uint64_t gate)
{
	uint64_t v = gate & MS_CPU_VALUE_MASK;
	if (v < LOWERED_LIMIT || v == MS_CPU_VALUE_MASK)
		return;
	int64_t cpu = cpu_of(gate);
	raise_peak(&counters[MS_CPU].win_peak, cpu);
	raise_peak(&counters[MS_MALLOC].win_peak, cpu - mmap_at(gate));
}

static uint64_t gate_hi_for(uint64_t mm)
{
	int64_t limit = load_peak(MS_CPU);
	int64_t malloc_limit = load_peak(MS_MALLOC) + mmap_bytes_of(mm);
	int64_t watch = __atomic_load_n(&watch_hi[MS_CPU], __ATOMIC_RELAXED);
	if (malloc_limit < limit)
		limit = malloc_limit;
	if (watch < limit)
		limit = watch;
	uint64_t g = gate_value(mm, limit);
	return (g & MS_CPU_VALUE_MASK) < LOWERED_LIMIT ? (g & ~MS_CPU_VALUE_MASK) : g;
}

static uint64_t gate_lo_for(uint64_t mm)
{
	return gate_value(mm, __atomic_load_n(&watch_lo[MS_CPU], __ATOMIC_RELAXED));
}

static uint64_t raise_max_for(uint64_t mm)
{
	return gate_value(mm, __atomic_load_n(&watch_hi[MS_CPU], __ATOMIC_RELAXED));
}

/* gate_hi back up to what the state allows, unless a lowering is in progress.  A raise computed
 * from a state a lowering has since changed fails its compare-and-swap: lowerings store first. */
static void raise_gates(void)
{
	for (int tries = 0; tries < 4; tries++) {
		uint64_t old = __atomic_load_n(&ms_cpu.gate_hi, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&lowering, __ATOMIC_SEQ_CST))
			return;
		fold_gate(old); /* before the peaks it is computed from are read */
		uint64_t mm = __atomic_load_n(&mmap_now, __ATOMIC_SEQ_CST);
		uint64_t lo = gate_lo_for(mm), max = raise_max_for(mm);
		if (__atomic_load_n(&ms_cpu.gate_lo, __ATOMIC_RELAXED) != lo)
			__atomic_store_n(&ms_cpu.gate_lo, lo, __ATOMIC_RELAXED);
		if (__atomic_load_n(&ms_cpu.raise_max, __ATOMIC_RELAXED) != max)
			__atomic_store_n(&ms_cpu.raise_max, max, __ATOMIC_RELAXED);
		uint64_t want = gate_hi_for(mm);
		if (want == old ||
		    __atomic_compare_exchange_n(&ms_cpu.gate_hi, &old, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			return;
	}
}

/* Every add of the current epoch takes the slow path until the lowering ends. */
static void store_lowered(void)
{
	uint64_t tag = __atomic_add_fetch(&lowered_tag, 1, __ATOMIC_RELAXED) % LOWERED_LIMIT;
	uint64_t mm = __atomic_load_n(&mmap_now, __ATOMIC_SEQ_CST);
	fold_gate(__atomic_exchange_n(&ms_cpu.gate_hi, (mm & ~MS_CPU_VALUE_MASK) | tag, __ATOMIC_SEQ_CST));
}

static void lower_begin(void)
{
	__atomic_add_fetch(&lowering, 1, __ATOMIC_SEQ_CST);
	store_lowered();
}

static void lower_end(void)
{
	if (__atomic_sub_fetch(&lowering, 1, __ATOMIC_SEQ_CST) == 0) {
		store_lowered(); /* a raise that began inside the lowering fails on this new value */
		raise_gates();
	}
}

void ms_cpu_slow_general(uint64_t result)
{
	int64_t cpu = cpu_of(result);
	raise_peak(&counters[MS_CPU].win_peak, cpu);
	raise_peak(&counters[MS_MALLOC].win_peak, cpu - mmap_at(result));
	watch_check(MS_CPU, cpu);
	raise_gates();
}

void ms_cpu_slow(uint64_t result)
{
	if (!ms_cpu_raise_gate(result))
		ms_cpu_slow_general(result);
}

void ms_cpu_mmap_add(enum ms_comp part, int64_t bytes)
{
	if (!bytes)
		return;
	mark_moved((1u << MS_MMAP) | (1u << MS_RESERVE) | (part == MS_SHARED ? 1u << MS_SHARED : 0));
	lower_begin();
	uint64_t old = __atomic_load_n(&mmap_now, __ATOMIC_RELAXED);
	int64_t mm = mmap_bytes_of(old) + bytes;
	uint64_t epoch = (old - MS_CPU_EPOCH_STEP) & ~MS_CPU_VALUE_MASK;
	uint64_t entry = epoch | ((uint64_t)(mm < 0 ? 0 : mm) >> PAGE_SHIFT);
	int64_t rd[READ_PARTS];
	for (int k = 0; k < READ_PARTS; k++) {
		rd[k] = mmap_bytes_of(__atomic_load_n(&read_now[k], __ATOMIC_RELAXED));
		if (part == (k == READ_RESERVE ? MS_RESERVE : MS_SHARED))
			rd[k] += bytes;
		uint64_t rentry = epoch | ((uint64_t)(rd[k] < 0 ? 0 : rd[k]) >> PAGE_SHIFT);
		__atomic_store_n(&read_ring[k][EPOCH_OF(entry) % RING], rentry, __ATOMIC_SEQ_CST);
		__atomic_store_n(&read_now[k], rentry, __ATOMIC_SEQ_CST);
	}
	__atomic_store_n(&mmap_ring[EPOCH_OF(entry) % RING], entry, __ATOMIC_SEQ_CST);
	__atomic_store_n(&mmap_now, entry, __ATOMIC_SEQ_CST);
	raise_peak(&counters[MS_MMAP].win_peak, mm - rd[READ_RESERVE] - rd[READ_SHARED]);
	raise_peak(&counters[MS_RESERVE].win_peak, rd[READ_RESERVE]);
	raise_peak(&counters[MS_SHARED].win_peak, rd[READ_SHARED]);
	store_lowered(); /* the new epoch's adds take the slow path from the moment the word has it */
	__atomic_store_n(&ms_cpu.gate_lo, gate_lo_for(entry), __ATOMIC_RELAXED);
	__atomic_store_n(&ms_cpu.raise_max, raise_max_for(entry), __ATOMIC_RELAXED);
	uint64_t r = __atomic_add_fetch(&ms_cpu.word, (uint64_t)bytes - MS_CPU_EPOCH_STEP, __ATOMIC_SEQ_CST);
	int64_t cpu = cpu_of(r);
	raise_peak(&counters[MS_CPU].win_peak, cpu);
	mark_touched((1u << MS_MMAP) | (1u << MS_RESERVE) | (1u << MS_SHARED));
	watch_check(MS_CPU, cpu);
	lower_end();
}

void ms_cpu_live(int64_t *cpu, int64_t *malloc_part, int64_t *mmap_part, int64_t *reserve_part, int64_t *shared_part)
{
	uint64_t w = __atomic_load_n(&ms_cpu.word, __ATOMIC_SEQ_CST);
	int64_t mm = mmap_at(w), rs = read_at(w, READ_RESERVE), sh = read_at(w, READ_SHARED);
	if (cpu)
		*cpu = cpu_of(w);
	if (malloc_part)
		*malloc_part = cpu_of(w) - mm;
	if (mmap_part)
		*mmap_part = mm - rs - sh;
	if (reserve_part)
		*reserve_part = rs;
	if (shared_part)
		*shared_part = sh;
}

void ms_counter_set(enum ms_comp comp, int64_t value)
{
	struct ms_counter *c = &counters[comp];
	mark_moved(1u << comp);
	__atomic_store_n(&c->live, value, __ATOMIC_RELAXED);
	raise_peak(&c->win_peak, value);
	mark_touched(1u << comp);
}

void ms_counter_raise_peak(enum ms_comp comp, int64_t value)
{
	mark_moved(1u << comp);
	raise_peak(&counters[comp].win_peak, value);
	mark_touched(1u << comp);
}

uint64_t ms_cpu_ring_misses(void)
{
	return __atomic_load_n(&ring_misses, __ATOMIC_RELAXED);
}

void ms_cpu_fork_child(void)
{
	__atomic_store_n(&lowering, 0, __ATOMIC_RELAXED);
	store_lowered();
	raise_gates();
}

int64_t ms_live(enum ms_comp comp)
{
	int64_t v[MS_SHARED + 1];
	if (comp == MS_CPU) /* the word alone: no ring to read (call sites ask at every sample) */
		return cpu_of(__atomic_load_n(&ms_cpu.word, __ATOMIC_SEQ_CST));
	if (comp <= MS_MMAP || comp == MS_RESERVE || comp == MS_SHARED) {
		ms_cpu_live(&v[MS_CPU], &v[MS_MALLOC], &v[MS_MMAP], &v[MS_RESERVE], &v[MS_SHARED]);
		return v[comp];
	}
	return comp < MS_NCOMP ? __atomic_load_n(&counters[comp].live, __ATOMIC_RELAXED) : 0;
}

void ms_watch_set(enum ms_comp comp, int64_t lo, int64_t hi)
{
	if (comp == MS_CPU)
		lower_begin();
	__atomic_store_n(&watch_hi[comp], hi, __ATOMIC_RELAXED);
	__atomic_store_n(&watch_lo[comp], lo, __ATOMIC_RELAXED);
	if (comp == MS_CPU)
		lower_end(); /* raise_gates: raise_max and gate_lo follow */
}

void ms_gpu_mark_used(void)
{
	if (!__atomic_load_n(&gpu_used, __ATOMIC_RELAXED)) {
		mark_moved((1u << MS_GPU) | (1u << MS_MANAGED) | (1u << MS_PINNED));
		__atomic_store_n(&gpu_used, 1, __ATOMIC_RELAXED);
	}
}

int ms_gpu_used(void)
{
	return __atomic_load_n(&gpu_used, __ATOMIC_RELAXED);
}

uint32_t ms_gpu_devices_used(void)
{
	return __atomic_load_n(&devices_used, __ATOMIC_RELAXED);
}

void ms_gpu_add(int device, int64_t bytes)
{
	ms_gpu_mark_used();
	if (device >= 0 && device < MS_MAX_DEVICES) {
		uint32_t bit = 1u << device;
		if (!(__atomic_load_n(&devices_used, __ATOMIC_RELAXED) & bit)) {
			mark_moved(1u << (MS_DEV0 + device));
			__atomic_fetch_or(&devices_used, bit, __ATOMIC_RELAXED);
		}
		enum ms_comp dev = (enum ms_comp)(MS_DEV0 + device);
		watch_check(dev, counter_add(dev, bytes));
	}
	counter_add(MS_GPU, bytes);
}

void ms_gpu_side_add(enum ms_comp comp, int64_t bytes)
{
	ms_gpu_mark_used();
	counter_add(comp, bytes);
}

int ms_counters_used(void)
{
	uint32_t d = ms_gpu_devices_used();
	return d ? MS_DEV0 + 32 - __builtin_clz(d) : MS_DEV0;
}

uint32_t ms_counters_moved(void)
{
	return __atomic_load_n(&moved, __ATOMIC_RELAXED);
}

#define CPU_PARTS ((1u << MS_CPU) | (1u << MS_MALLOC) | (1u << MS_MMAP) | (1u << MS_RESERVE) | (1u << MS_SHARED))
/* The components whose window the last cut exchanged (under the stage engine's lock). */
static uint32_t last_cut;

uint32_t ms_counters_last_cut(void)
{
	return last_cut;
}

/* Live of the first N components but the CPU ones, which the caller reads as one set. */
static inline __attribute__((always_inline)) void live_but_cpu(int64_t live[MS_NCOMP], int n)
{
	if (n == MS_DEV0) /* a component that never moved is 0; fixed sizes are written inline */
		memset(live, 0, sizeof *live * MS_DEV0);
	else
		memset(live, 0, sizeof *live * (size_t)n);
	uint32_t others = __atomic_load_n(&moved, __ATOMIC_RELAXED) & ~CPU_PARTS & ((UINT32_C(1) << n) - 1);
	for (; others; others &= others - 1) {
		int c = __builtin_ctz(others);
		live[c] = __atomic_load_n(&counters[c].live, __ATOMIC_RELAXED);
	}
}

/* Live of the first N components, the CPU ones as one consistent set. */
static void live_all(int64_t live[MS_NCOMP], int n)
{
	live_but_cpu(live, n);
	ms_cpu_live(&live[MS_CPU], &live[MS_MALLOC], &live[MS_MMAP], &live[MS_RESERVE], &live[MS_SHARED]);
}

/* The mmap, reserve and shared bytes of the epoch the last cut read them for (cuts run under the
 * stage engine's lock): while the word is of that epoch and no mapping changed since, the ring
 * need not be read again (an epoch number comes back only after 65536 changes). */
static struct {
	uint64_t epoch;
	int64_t mm, rs, sh;
} cut_parts = { .epoch = ~UINT64_C(0) };

/* live_all for a cut; WAS: the tracked components touched since the last one. */
static void cut_live(int64_t live[MS_NCOMP], int n, uint32_t was)
{
	live_but_cpu(live, n);
	uint64_t w = __atomic_load_n(&ms_cpu.word, __ATOMIC_SEQ_CST);
	if (EPOCH_OF(w) != cut_parts.epoch || (was & (1u << MS_MMAP))) {
		cut_parts.mm = mmap_at(w);
		cut_parts.rs = read_at(w, READ_RESERVE);
		cut_parts.sh = read_at(w, READ_SHARED);
		cut_parts.epoch = EPOCH_OF(w);
	}
	live[MS_CPU] = cpu_of(w);
	live[MS_MALLOC] = cpu_of(w) - cut_parts.mm;
	live[MS_MMAP] = cut_parts.mm - cut_parts.rs - cut_parts.sh;
	live[MS_RESERVE] = cut_parts.rs;
	live[MS_SHARED] = cut_parts.sh;
}

int ms_counters_cut_window(int64_t peaks[MS_NCOMP], int64_t live[MS_NCOMP], int open_after)
{
	int n = ms_counters_used(); /* a device never used has 0 everywhere: nothing to cut */
	lower_begin();              /* adds during the cut take the slow path: none is missed by the new window */
	uint32_t was =
		__atomic_load_n(&touched, __ATOMIC_RELAXED) ? __atomic_exchange_n(&touched, 0, __ATOMIC_SEQ_CST) : 0;
	cut_live(live, n, was);
	if (n == MS_DEV0)
		memcpy(peaks, live, sizeof *peaks * MS_DEV0);
	else
		memcpy(peaks, live, sizeof *peaks * (size_t)n);
	uint32_t cut = __atomic_load_n(&moved, __ATOMIC_RELAXED) & (~TRACKED | was) & ((UINT32_C(1) << n) - 1);
	last_cut = cut;
	for (; cut; cut &= cut - 1) {
		int c = __builtin_ctz(cut);
		struct ms_counter *k = &counters[c];
		int64_t now = live[c];
		int64_t old = __atomic_exchange_n(&k->win_peak, now, __ATOMIC_RELAXED);
		/* an allocation racing with the exchange re-raises the new window itself */
		peaks[c] = old > now ? old : now;
		if (peaks[c] > closed_peaks[c])
			closed_peaks[c] = peaks[c];
		if (!open_after && !((TRACKED >> c) & 1)) /* only the process peak reads it: adds below stay fast */
			raise_peak(&k->win_peak, closed_peaks[c]);
	}
	lower_end();
	return n;
}

void ms_counters_process_peaks(int64_t peaks[MS_NCOMP])
{
	int64_t live[MS_NCOMP];
	fold_gate(__atomic_load_n(&ms_cpu.gate_hi, __ATOMIC_SEQ_CST));
	live_all(live, MS_NCOMP);
	for (int c = 0; c < MS_NCOMP; c++) {
		int64_t win = __atomic_load_n(&counters[c].win_peak, __ATOMIC_RELAXED);
		int64_t now = live[c];
		int64_t p = closed_peaks[c];
		if (win > p)
			p = win;
		peaks[c] = now > p ? now : p;
	}
}

void ms_counters_reset_peaks(void)
{
	int64_t live[MS_NCOMP];
	lower_begin();
	live_all(live, MS_NCOMP);
	for (int c = 0; c < MS_NCOMP; c++) {
		__atomic_store_n(&counters[c].win_peak, live[c], __ATOMIC_RELAXED);
		closed_peaks[c] = live[c];
		inherited_live[c] = live[c];
	}
	mark_touched(TRACKED);
	lower_end();
}

void ms_counters_inherited(int64_t live[MS_NCOMP])
{
	memcpy(live, inherited_live, sizeof inherited_live);
}

void ms_counters_clear(void)
{
	lower_begin();
	memset(counters, 0, sizeof counters);
	memset(mmap_ring, 0, sizeof mmap_ring);
	memset(reserve_ring, 0, sizeof reserve_ring);
	memset(shared_ring, 0, sizeof shared_ring);
	__atomic_store_n(&mmap_now, FIRST_EPOCH << MS_CPU_VALUE_BITS, __ATOMIC_SEQ_CST);
	__atomic_store_n(&mmap_ring[FIRST_EPOCH % RING], FIRST_EPOCH << MS_CPU_VALUE_BITS, __ATOMIC_SEQ_CST);
	for (int k = 0; k < READ_PARTS; k++)
		__atomic_store_n(&read_now[k], FIRST_EPOCH << MS_CPU_VALUE_BITS, __ATOMIC_SEQ_CST);
	__atomic_store_n(&reserve_ring[FIRST_EPOCH % RING], FIRST_EPOCH << MS_CPU_VALUE_BITS, __ATOMIC_SEQ_CST);
	__atomic_store_n(&ms_cpu.word, (FIRST_EPOCH << MS_CPU_VALUE_BITS) | MS_CPU_BIAS, __ATOMIC_SEQ_CST);
	memset(closed_peaks, 0, sizeof closed_peaks);
	memset(inherited_live, 0, sizeof inherited_live);
	cut_parts.epoch = ~UINT64_C(0);
	mark_touched(TRACKED);
	lower_end();
}
