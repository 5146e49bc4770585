/* Exact live and high-water counters per memory component.  Pure logic: no libc calls, so unit
 * tests link it directly.  Hot path: one atomic add and a compare-and-swap max per component. */
#ifndef MS_COUNTERS_H
#define MS_COUNTERS_H

#include <stdint.h>

#define MS_MAX_DEVICES 16

enum ms_comp {
	MS_CPU,     /* malloc + mmap */
	MS_MALLOC,  /* the malloc family, usable size */
	MS_MMAP,    /* anonymous private mappings made by the program */
	MS_GPU,     /* device memory, all devices */
	MS_MANAGED, /* cuMemAllocManaged */
	MS_PINNED,  /* page-locked host memory */
	MS_DEV0,    /* device memory of device 0 .. MS_MAX_DEVICES-1 */
	MS_NCOMP = MS_DEV0 + MS_MAX_DEVICES
};

struct ms_counter {
	int64_t live;     /* bytes live now */
	int64_t win_peak; /* highest live since the last stage boundary */
};

/* The counters of CPU components share one cache line: malloc updates touch only it. */
extern struct ms_counter ms_counters[MS_NCOMP] __attribute__((aligned(64)));

static inline void ms_raise_peak(int64_t *peak, int64_t value)
{
	int64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
	while (value > seen &&
	       !__atomic_compare_exchange_n(peak, &seen, value, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static inline int64_t ms_counter_add(enum ms_comp comp, int64_t bytes)
{
	struct ms_counter *c = &ms_counters[comp];
	int64_t now = __atomic_add_fetch(&c->live, bytes, __ATOMIC_RELAXED);
	if (bytes > 0)
		ms_raise_peak(&c->win_peak, now);
	return now;
}

/* A watch on live values (the timeline sets it): when a component's live leaves [ms_watch_lo,
 * ms_watch_hi], the slow path calls ms_watch_fn.  The thresholds are read on every move; a window
 * of INT64_MIN..INT64_MAX watches nothing. */
extern int64_t ms_watch_hi[MS_NCOMP], ms_watch_lo[MS_NCOMP];
extern void (*ms_watch_fn)(enum ms_comp comp, int64_t now);

static inline void ms_watch_check(enum ms_comp comp, int64_t now)
{
	if (__builtin_expect(now > __atomic_load_n(&ms_watch_hi[comp], __ATOMIC_RELAXED) ||
			     now < __atomic_load_n(&ms_watch_lo[comp], __ATOMIC_RELAXED), 0)) {
		void (*fn)(enum ms_comp, int64_t) = __atomic_load_n(&ms_watch_fn, __ATOMIC_RELAXED);
		if (fn)
			fn(comp, now);
	}
}

static inline void ms_watch_set(enum ms_comp comp, int64_t lo, int64_t hi)
{
	__atomic_store_n(&ms_watch_hi[comp], hi, __ATOMIC_RELAXED);
	__atomic_store_n(&ms_watch_lo[comp], lo, __ATOMIC_RELAXED);
}

/* A CPU component and the CPU total move together. */
static inline void ms_cpu_add(enum ms_comp part, int64_t bytes)
{
	ms_counter_add(part, bytes);
	ms_watch_check(MS_CPU, ms_counter_add(MS_CPU, bytes));
}

/* Device memory of DEVICE (negative or >= MS_MAX_DEVICES: total only) and the GPU total. */
void ms_gpu_add(int device, int64_t bytes);
/* Managed or pinned memory (MS_MANAGED / MS_PINNED). */
void ms_gpu_side_add(enum ms_comp comp, int64_t bytes);
/* Non-zero once any GPU counter moved or ms_gpu_mark_used was called: GPU keys are reported. */
int ms_gpu_used(void);
void ms_gpu_mark_used(void);
/* Bit mask of devices that had memory counted. */
uint32_t ms_gpu_devices_used(void);

static inline int64_t ms_live(enum ms_comp comp)
{
	return __atomic_load_n(&ms_counters[comp].live, __ATOMIC_RELAXED);
}

/* Closes the current peak window: PEAKS receives each component's highest live since the previous
 * boundary (at least its live now) and a new window starts at the live values, stored in LIVE. */
void ms_counters_cut_window(int64_t peaks[MS_NCOMP], int64_t live[MS_NCOMP]);

/* Highest live of each component over the whole process (all windows so far, current included). */
void ms_counters_process_peaks(int64_t peaks[MS_NCOMP]);

/* Forget the process peaks (a forked child starts its report at its live memory). */
void ms_counters_reset_peaks(void);

#endif
