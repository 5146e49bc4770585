/* The GPU's footprint, read, not counted: per device the total and free memory (cuMemGetInfo on
 * the calling thread's current context) and this process's usage by NVML, at stage boundaries,
 * GPU timeline points and exit; and a record of each GPU out-of-memory burst.  The report writer
 * copies the state (output/report.c); nothing here runs on the allocation path but one load. */
#ifndef MS_CUDA_FOOTPRINT_H
#define MS_CUDA_FOOTPRINT_H

#include <stdint.h>
#include "core/counters.h"
#include "core/ms.h"
#include "core/stages.h"

#define MS_FP_OTHERS 8 /* other processes kept per out-of-memory record */
#define MS_FP_OOMS 8   /* out-of-memory bursts kept */
#define MS_FP_OPEN 8   /* open stages kept per out-of-memory record */

/* NVML as this process found it. */
enum ms_nvml_state { MS_NVML_UNTRIED, MS_NVML_OK, MS_NVML_ABSENT, MS_NVML_FAILED };

/* The latest reading of one device and its extremes over the process. */
struct ms_fp_device {
	int64_t total, free, free_min;     /* cuMemGetInfo; valid when have_mem */
	int64_t footprint, footprint_peak; /* NVML's usedGpuMemory of this pid; valid when have_fp */
	int64_t counted_at_peak;           /* memshim's count of the device when footprint_peak was read */
	uint8_t have_mem, have_fp;
};

/* One stage call's readings (the open call's, else the last one's), reset at its outermost begin. */
struct ms_fp_stage {
	int64_t peak; /* the largest sum of the devices' footprints read during the call */
	int64_t total[MS_MAX_DEVICES], free_min[MS_MAX_DEVICES], footprint_peak[MS_MAX_DEVICES];
	int64_t counted_begin[MS_MAX_DEVICES]; /* memshim's count of each device at the begin */
	uint32_t have_mem, have_fp;            /* bit d: device d read during the call */
};

struct ms_fp_other {
	uint32_t pid;
	int64_t used;
};

/* One out-of-memory burst: the first failure's moment, then how many followed and whether the
 * program went on (a later successful allocation on the device, or a further stage begun). */
struct ms_fp_oom {
	double time;
	int device, result, stage; /* stage: the innermost open one, or -1 */
	int64_t asked;
	int64_t free, total; /* valid when have_mem */
	int64_t footprint;   /* this process, by NVML; valid when have_fp */
	int64_t counted;     /* memshim's count of the device */
	uint8_t have_mem, have_fp, went_on, others_known;
	uint32_t failures; /* in the burst, the first included */
	int nopen;
	int open[MS_FP_OPEN];           /* open stages, outermost first */
	int64_t open_added[MS_FP_OPEN]; /* what each added on the device since its begin */
	int nothers;
	struct ms_fp_other others[MS_FP_OTHERS];
};

struct ms_gpu_footprint {
	int nvml;      /* enum ms_nvml_state */
	uint32_t read; /* bit d: device d was read at least once */
	int64_t peak;  /* the largest sum of the devices' footprints at one reading */
	struct ms_fp_device dev[MS_MAX_DEVICES];
	struct ms_fp_stage stage[MS_MAX_STAGES];
	uint32_t noom, oom_dropped;
	struct ms_fp_oom oom[MS_FP_OOMS];
};

/* Subsystem steps (subsystems.def): reads at a boundary that begins or ends a stage's call, as the
 * engine's calls tell (outside its lock), on the calling thread, only in a process that used the
 * driver; never at exit, where the runtime's exit handlers and libcuda's destructors have run
 * before ours: the last reading stands. */
void ms_gpufp_boundary(int stage, int end);
/* A forked child of a process that used the driver never reads: CUDA's state does not cross fork. */
void ms_gpufp_fork_child(int tracking);

/* A timeline point at NOW: reads when the point was raised by a device allocation this thread's
 * wrapper counted (outside every driver call) and the last point's reading is 100 ms old. */
void ms_gpufp_point(double now);

/* Copies the state into OUT; returns 0 when nothing was ever read or recorded (no keys). */
int ms_gpufp_copy(struct ms_gpu_footprint *out);

/* After out-of-memory burst INDEX (in oom[]) was recorded, outside every lock of ours:
 * output/snapshots.c keeps the GPU sites live then and writes a snapshot (set once at start). */
void ms_cuda_set_oom_observer(void (*fn)(int index));

/* ---- between the CUDA files (wrappers.c calls them) ------------------------------------------ */

/* A failed device allocation of BYTES on DEVICE with driver result RESULT (outside the driver). */
void ms_gpufp_failed(int device, int64_t bytes, int result);
/* Non-zero while a burst is open on some device: the wrappers then report successes on it. */
extern uint32_t ms_gpufp_bursts;
/* A successful device allocation on DEVICE ended its burst: the program went on. */
void ms_gpufp_succeeded(int device);
/* Non-zero while this thread's wrapper is counting a device allocation or free (wrappers.c raises
 * it): outside every driver call, where a reading is safe. */
extern __thread int ms_gpufp_counting MS_TLS;

/* ---- nvml.c: NVML, loaded at the first reading ------------------------------------------------ */

/* Loads NVML once (LOAD 0: only report what an earlier load found); returns enum ms_nvml_state. */
int ms_nvml_state(int load);
/* This process's usage of CUDA device DEV into *MINE (-1 when NVML does not list it), the other
 * processes into OTHERS (at most MAX; their number into *NOTHERS).  0, or -1 when NVML cannot say. */
int ms_nvml_usage(int dev, int64_t *mine, struct ms_fp_other *others, int max, int *nothers);

#endif
