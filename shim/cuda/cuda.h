/* The CUDA layer as the rest of the shim sees it: memory pools sampled at stage boundaries, the
 * numbers the report writes (output/report.c), and the observer a layer above sets to hear of every
 * device allocation (sites/: their stacks). */
#ifndef MS_CUDA_H
#define MS_CUDA_H

#include <stdint.h>
#include "core/stages.h"

#define MS_CUDA_MAX_POOLS 8 /* pools sampled */

/* Reserved memory of one pool: at the latest boundary, and at the outermost begin and end of every
 * stage (HAVE_END: both sampled). */
struct ms_pool_sample {
	uint64_t pool;
	int device;
	int64_t reserved, high; /* at the latest boundary */
	int64_t begin[MS_MAX_STAGES], end[MS_MAX_STAGES], end_high[MS_MAX_STAGES];
	unsigned char have_begin[MS_MAX_STAGES], have_end[MS_MAX_STAGES];
};

/* After stage STAGE opened (END 0) or closed (END 1), outside the engine lock, never from a signal
 * handler or at exit (the driver may be gone by then): samples the pools in use (pools.c). */
void ms_cuda_boundary(int stage, int end);

/* Copies the pools sampled so far into OUT; returns how many.  Stored values only: safe at exit
 * and in a signal handler (pools.c). */
int ms_cuda_pools_copy(struct ms_pool_sample out[MS_CUDA_MAX_POOLS]);

/* Successful allocations the full pointer table could not hold, and their bytes (wrappers.c). */
void ms_cuda_untracked(uint64_t *allocs, int64_t *bytes);

/* Every device allocation (DPTR, BYTES) and free is told to ALLOC and RELEASE from now on, after it
 * was counted, outside any lock of ours (wrappers.c; sites/sample.c sets them at start). */
void ms_cuda_set_observer(void (*alloc)(uint64_t dptr, int64_t bytes), void (*release)(uint64_t dptr));

#endif
