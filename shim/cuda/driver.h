/* Between the CUDA files: the driver functions by index (cuda/driver.def), their real functions
 * (lookup.c), and the memory pool table (pools.c). */
#ifndef MS_CUDA_DRIVER_H
#define MS_CUDA_DRIVER_H

#include "cuda/min.h"
#include "cuda/table.h"

/* H_<name>: every driver function we wrap (exported), then the helpers we only call. */
enum {
#define MS_CUDA_HOOK(name) H_##name,
#define MS_CUDA_HELPER(name)
#include "cuda/driver.def"
#undef MS_CUDA_HELPER
#undef MS_CUDA_HOOK
	H_NHOOKS,
	H_LAST_HOOK = H_NHOOKS - 1, /* the helpers are numbered from H_NHOOKS on */
#define MS_CUDA_HOOK(name)
#define MS_CUDA_HELPER(name) H_##name,
#include "cuda/driver.def"
#undef MS_CUDA_HELPER
#undef MS_CUDA_HOOK
	H_COUNT
};

/* ---- lookup.c ---------------------------------------------------------------------------------- */

/* The real function IDX, or NULL when no driver is loaded. */
void *ms_cuda_real(int idx);
/* A helper the driver may lack: looked up once, then remembered as absent. */
void *ms_cuda_real_optional(int idx);

/* The calling thread's stream capture mode set to relaxed for a reading of ours: a call a capture
 * prohibits (cuMemGetInfo, NVML's) in global mode would invalidate the graph some thread of the
 * program is capturing.  Returns the mode to restore, MS_CAPTURE_NONE when the driver has no such
 * function (the reading runs as it is), or MS_CAPTURE_FAILED (no reading). */
#define MS_CAPTURE_NONE (-1)
#define MS_CAPTURE_FAILED (-2)
int ms_cuda_relax_capture(void);
/* Puts back MODE (ms_cuda_relax_capture's). */
void ms_cuda_restore_capture(int mode);

#define REAL(name, type) ((type)ms_cuda_real(H_##name))
#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED

/* ---- pools.c: which device and kind a pool's allocations are ----------------------------------- */

/* Remembers POOL (created, or handed out for DEVICE) unless known already. */
void ms_cuda_pool_note(CUmemoryPool pool, int device, unsigned kind);
/* The entry of POOL, or NULL. */
const struct ms_centry *ms_cuda_pool_find(CUmemoryPool pool);
/* Before cuMemPoolDestroy: takes POOL out (into OUT; 0, or -1 when unknown) once no boundary is
 * sampling; ms_cuda_pool_restore puts it back when the driver refused. */
int ms_cuda_pool_forget(CUmemoryPool pool, struct ms_centry *out);
void ms_cuda_pool_restore(const struct ms_centry *e);
/* Stream-ordered memory was allocated on DEV: boundaries sample that device's current pool. */
void ms_cuda_pool_async_device(int dev);

#endif
