/* Exact live and high-water counters per memory component.  Pure logic: no libc calls, so unit
 * tests link it directly.  CPU hot path: one atomic add and one compare (the CPU word below);
 * the rarer components: an atomic add and a compare-and-swap max each. */
#ifndef MS_COUNTERS_H
#define MS_COUNTERS_H

#include <stdint.h>

#define MS_MAX_DEVICES 16

enum ms_comp {
	MS_CPU,     /* malloc + mmap + reserve + shared */
	MS_MALLOC,  /* the malloc family, usable size */
	MS_MMAP,    /* anonymous private mappings made by the program */
	MS_GPU,     /* device memory, all devices */
	MS_MANAGED, /* cuMemAllocManaged */
	MS_PINNED,  /* page-locked host memory */
	MS_RESERVE, /* resident pages of reservations (MAP_NORESERVE, large mappings): read, not counted */
	MS_RSS,     /* the kernel's resident set size: read, not counted, not part of MS_CPU */
	MS_SHARED,  /* resident pages of shared memory mappings (memfd, shm, anonymous shared): read */
	MS_CGROUP,  /* the memory cgroup's usage (intercept/cgroup.c): read, not counted, not part of MS_CPU */
	MS_DEV0,    /* device memory of device 0 .. MS_MAX_DEVICES-1 */
	MS_NCOMP = MS_DEV0 + MS_MAX_DEVICES
};

struct ms_counter {
	int64_t live;     /* bytes live now (unused for MS_CPU, MS_MALLOC, MS_MMAP: see ms_cpu) */
	int64_t win_peak; /* highest live since the last stage boundary (or more: ms_counters_cut_window) */
};

/* A watch on live values (ms_watch_set; the timeline sets it): when a component's live leaves
 * its window, the slow path calls ms_watch_fn. */
extern void (*ms_watch_fn)(enum ms_comp comp, int64_t now);

/* The components read rather than counted (MS_RESERVE, MS_SHARED, MS_RSS) brought up to date: set at start by
 * intercept/mmap.c, called before a stage boundary, a timeline point and a report.  Cheap and
 * skipped where reading is unsafe (inside the mapping lock, inside a hook). */
enum ms_refresh_reason {
	MS_REFRESH_BOUNDARY,
	MS_REFRESH_POINT,
	MS_REFRESH_REPORT,
	MS_REFRESH_FORK /* a forked child, before its report starts: only this thread
					  * runs, holding every lock since fork_prepare */
};
extern void (*ms_refresh_fn)(enum ms_refresh_reason why);

static inline void ms_refresh(enum ms_refresh_reason why)
{
	void (*fn)(enum ms_refresh_reason) = __atomic_load_n(&ms_refresh_fn, __ATOMIC_RELAXED);
	if (fn)
		fn(why);
}

/* Sets COMP's watch window (MS_CPU: the gates follow). */
void ms_watch_set(enum ms_comp comp, int64_t lo, int64_t hi);

/* ---- the CPU word: one atomic per malloc-family call --------------------------------------------
 * Bits 0..47 hold the CPU live bytes (malloc + mmap + reserve + shared) plus MS_CPU_BIAS; bits
 * 48..63 the mmap epoch, counted down and changed only under the mapping lock together with the
 * mmap, reserve and shared bytes it stands for
 * (kept in a ring for the slow path).  So each xadd returns an exact (cpu, epoch) pair, malloc =
 * cpu - mmap(epoch), and an add made under an older epoch compares above the current gate.  The
 * gates fold every reason to leave the fast path into one compare: gate_hi = min(cpu peak, malloc
 * peak + mmap, timeline high) of the current epoch, or a small "lowered" value while a boundary,
 * timeline window or mmap change is in progress; gate_lo the timeline's low bound. */
#define MS_CPU_VALUE_BITS 48
#define MS_CPU_VALUE_MASK ((UINT64_C(1) << MS_CPU_VALUE_BITS) - 1)
#define MS_CPU_BIAS (UINT64_C(1) << 47)
#define MS_CPU_EPOCH_STEP (UINT64_C(1) << MS_CPU_VALUE_BITS)

struct ms_cpu_word {
	uint64_t word;
	uint64_t gate_hi;   /* an add whose result is above it takes the slow path */
	uint64_t gate_lo;   /* a release whose result is below it takes the slow path */
	uint64_t raise_max; /* the watch's high as a word of the current epoch: a new high above it is no
			     * common one (ms_cpu_raise_gate), nor one of an older epoch */
} __attribute__((aligned(64)));
extern struct ms_cpu_word ms_cpu;

/* Gate values below this (in the value bits) are "lowered": every add takes the slow path. */
#define MS_CPU_LOWERED_LIMIT (UINT64_C(1) << 40)

/* The common new high: of the current epoch, inside the watch, while no boundary or mmap change
 * holds the gate lowered.  The gate itself becomes the high, one compare-and-swap; the peaks take
 * it when the gate is next replaced or read for them (counters.c folds it).  0: ms_cpu_slow_general
 * must run.  Inline, so a wrapper's way out for a new high calls nothing. */
static inline int ms_cpu_raise_gate(uint64_t result)
{
	if (result > __atomic_load_n(&ms_cpu.raise_max, __ATOMIC_RELAXED) ||
	    result < __atomic_load_n(&ms_cpu.gate_lo, __ATOMIC_RELAXED))
		return 0; /* outside the watch, or of another epoch */
	uint64_t old = __atomic_load_n(&ms_cpu.gate_hi, __ATOMIC_SEQ_CST);
	do {
		if ((old ^ result) >> MS_CPU_VALUE_BITS || (old & MS_CPU_VALUE_MASK) < MS_CPU_LOWERED_LIMIT)
			return 0; /* another epoch, or lowered */
		if (result <= old)
			return 1; /* another thread's high is above it */
	} while (!__atomic_compare_exchange_n(&ms_cpu.gate_hi, &old, result, 1, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return 1;
}

/* New highs, timeline crossings, adds of an older epoch: the exact bookkeeping, out of line. */
void ms_cpu_slow(uint64_t result);
/* The same past ms_cpu_raise_gate (what it declined). */
void ms_cpu_slow_general(uint64_t result);

/* The CPU word after adding BYTES to the malloc component (one xadd). */
static inline uint64_t ms_cpu_word_add(int64_t bytes)
{
	return __atomic_add_fetch(&ms_cpu.word, (uint64_t)bytes, __ATOMIC_RELAXED);
}

/* An add of RESULT must take the slow path: growing past gate_hi, shrinking below gate_lo. */
static inline int ms_cpu_grew_past(uint64_t result)
{
	return __builtin_expect(result > __atomic_load_n(&ms_cpu.gate_hi, __ATOMIC_RELAXED), 0);
}

static inline int ms_cpu_shrank_below(uint64_t result)
{
	return __builtin_expect(result < __atomic_load_n(&ms_cpu.gate_lo, __ATOMIC_RELAXED), 0);
}

/* The malloc component grows by BYTES (> 0). */
static inline void ms_cpu_grow(uint64_t bytes)
{
	uint64_t r = ms_cpu_word_add((int64_t)bytes);
	if (ms_cpu_grew_past(r))
		ms_cpu_slow(r);
}

/* The malloc component shrinks by BYTES (> 0): never a new high. */
static inline void ms_cpu_shrink(uint64_t bytes)
{
	uint64_t r = ms_cpu_word_add(-(int64_t)bytes);
	if (ms_cpu_shrank_below(r))
		ms_cpu_slow(r);
}

/* The mmap, reserve or shared component (PART) by BYTES (a multiple of the page size); the caller
 * holds the mapping lock (mappings change one at a time).  All three ride the CPU word's mmap epoch. */
void ms_cpu_mmap_add(enum ms_comp part, int64_t bytes);

/* PART (MS_MALLOC, or MS_MMAP / MS_RESERVE / MS_SHARED under the mapping lock) and the CPU total
 * move together. */
static inline void ms_cpu_add(enum ms_comp part, int64_t bytes)
{
	if (part == MS_MMAP || part == MS_RESERVE || part == MS_SHARED)
		ms_cpu_mmap_add(part, bytes);
	else if (bytes > 0)
		ms_cpu_grow((uint64_t)bytes);
	else if (bytes < 0)
		ms_cpu_shrink((uint64_t)-bytes);
}

/* Live CPU, malloc, mmap, reserve and shared bytes as one consistent set (any may be NULL). */
void ms_cpu_live(int64_t *cpu, int64_t *malloc_part, int64_t *mmap_part, int64_t *reserve_part, int64_t *shared_part);

/* The kernel's own high of a component read rather than counted (MS_CGROUP's memory.peak of our
 * fd) raises the window's peak without a live value: the stages open now get it. */
void ms_counter_raise_peak(enum ms_comp comp, int64_t value);

/* A component read rather than counted (MS_RSS) is now VALUE; one writer at a time. */
void ms_counter_set(enum ms_comp comp, int64_t value);
/* Adds that found their epoch gone from the ring (a thread stalled across many mmap changes): their
 * malloc share was taken at the current mmap bytes. */
uint64_t ms_cpu_ring_misses(void);
/* A forked child: no other thread is halfway through a change. */
void ms_cpu_fork_child(void);

/* Device memory of DEVICE (negative or >= MS_MAX_DEVICES: total only) and the GPU total. */
void ms_gpu_add(int device, int64_t bytes);
/* Managed or pinned memory (MS_MANAGED / MS_PINNED). */
void ms_gpu_side_add(enum ms_comp comp, int64_t bytes);
/* Non-zero once any GPU counter moved or ms_gpu_mark_used was called: GPU keys are reported. */
int ms_gpu_used(void);
void ms_gpu_mark_used(void);
/* Bit mask of devices that had memory counted. */
uint32_t ms_gpu_devices_used(void);
/* Components that may be non-zero: those below MS_DEV0 and the devices up to the highest used (a
 * loop over components at each stage boundary can stop there). */
int ms_counters_used(void);
/* The components whose counters ever moved, a bit per ms_comp: the others are 0 everywhere (live,
 * peaks, every span), so per-call loops can skip them. */
uint32_t ms_counters_moved(void);

/* Live bytes of COMP now. */
int64_t ms_live(enum ms_comp comp);

/* Closes the current peak window: PEAKS receives each component's highest live since the previous
 * boundary (at least its live now) and a new window starts at the live values, stored in LIVE.
 * OPEN_AFTER 0 (no stage is open after this boundary): only the process peaks read the new window,
 * so it starts at them instead, and adds below them stay on the fast path, as before any stage
 * (PEAKS of the next cut may then be up to the process peak: fold them into no stage); the
 * components only read or mapped (RSS, cgroup, mmap parts) start at their live values all the same.
 * Returns N, the components written (ms_counters_used()): the others are 0 and left unwritten. */
int ms_counters_cut_window(int64_t peaks[MS_NCOMP], int64_t live[MS_NCOMP], int open_after);

/* The components whose window the last cut exchanged, a bit per ms_comp (the others' peaks were
 * their live values, unchanged since a cut that did): folding and checking those alone is exact. */
uint32_t ms_counters_last_cut(void);

/* Highest live of each component over the whole process (all windows so far, current included). */
void ms_counters_process_peaks(int64_t peaks[MS_NCOMP]);

/* Forget the process peaks (a forked child starts its report at its live memory, which
 * ms_counters_inherited then gives: what it shares with its parent). */
void ms_counters_reset_peaks(void);
void ms_counters_inherited(int64_t live[MS_NCOMP]);
/* Every counter back to zero (tests). */
void ms_counters_clear(void);

#endif
