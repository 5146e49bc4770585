/* Counter storage, GPU bookkeeping and peak windows (see counters.h). */
#include <string.h>
#include "core/counters.h"

struct ms_counter ms_counters[MS_NCOMP] __attribute__((aligned(64)));
int64_t ms_watch_hi[MS_NCOMP] = { [0 ... MS_NCOMP - 1] = INT64_MAX };
int64_t ms_watch_lo[MS_NCOMP] = { [0 ... MS_NCOMP - 1] = INT64_MIN };
void (*ms_watch_fn)(enum ms_comp comp, int64_t now);

/* Highest live over all closed windows; only touched under the stage engine lock. */
static int64_t closed_peaks[MS_NCOMP];
static int gpu_used;
static uint32_t devices_used;

void ms_gpu_mark_used(void)
{
	if (!__atomic_load_n(&gpu_used, __ATOMIC_RELAXED))
		__atomic_store_n(&gpu_used, 1, __ATOMIC_RELAXED);
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
		if (!(__atomic_load_n(&devices_used, __ATOMIC_RELAXED) & bit))
			__atomic_fetch_or(&devices_used, bit, __ATOMIC_RELAXED);
		enum ms_comp dev = (enum ms_comp)(MS_DEV0 + device);
		ms_watch_check(dev, ms_counter_add(dev, bytes));
	}
	ms_counter_add(MS_GPU, bytes);
}

void ms_gpu_side_add(enum ms_comp comp, int64_t bytes)
{
	ms_gpu_mark_used();
	ms_counter_add(comp, bytes);
}

void ms_counters_cut_window(int64_t peaks[MS_NCOMP], int64_t live[MS_NCOMP])
{
	for (int c = 0; c < MS_NCOMP; c++) {
		struct ms_counter *k = &ms_counters[c];
		int64_t now = __atomic_load_n(&k->live, __ATOMIC_RELAXED);
		int64_t old = __atomic_exchange_n(&k->win_peak, now, __ATOMIC_RELAXED);
		/* an allocation racing with the exchange re-raises the new window itself */
		peaks[c] = old > now ? old : now;
		live[c] = now;
		if (peaks[c] > closed_peaks[c])
			closed_peaks[c] = peaks[c];
	}
}

void ms_counters_process_peaks(int64_t peaks[MS_NCOMP])
{
	for (int c = 0; c < MS_NCOMP; c++) {
		int64_t win = __atomic_load_n(&ms_counters[c].win_peak, __ATOMIC_RELAXED);
		int64_t now = __atomic_load_n(&ms_counters[c].live, __ATOMIC_RELAXED);
		int64_t p = closed_peaks[c];
		if (win > p)
			p = win;
		peaks[c] = now > p ? now : p;
	}
}

void ms_counters_reset_peaks(void)
{
	for (int c = 0; c < MS_NCOMP; c++) {
		int64_t now = __atomic_load_n(&ms_counters[c].live, __ATOMIC_RELAXED);
		__atomic_store_n(&ms_counters[c].win_peak, now, __ATOMIC_RELAXED);
		closed_peaks[c] = now;
	}
}
