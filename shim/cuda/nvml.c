/* NVML (libnvidia-ml.so.1), loaded at the first GPU reading of a process that used the driver and
 * never before: this process's footprint on a device and the other processes there.  A CUDA
 * ordinal is matched to NVML's device by its PCI bus id (CUDA_VISIBLE_DEVICES and CUDA's order
 * differ from NVML's indices).  The layouts are nvml.h's (CUDA toolkit); only what is read is
 * declared here, so the shim builds without it. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/ms.h"
#include "cuda/driver.h"
#include "cuda/footprint.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define MAX_PROCS 64  /* processes read per device */
#define BUS_ID_LEN 32 /* "0000:65:00.0" and room to spare */

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

/* nvmlProcessInfo_v2_t (what _v2 fills, 24 bytes on every driver); _v1_t is its first two fields.
 * _v3's records are not used: some R535 drivers fill them 32 bytes long, others 24. */
struct nvml_proc_v2 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
};
struct nvml_proc_v1 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
};

static struct {
	int state; /* enum ms_nvml_state */
	nvmlReturn_t (*by_bus_id)(const char *, nvmlDevice_t *);
	nvmlReturn_t (*procs)(nvmlDevice_t, unsigned int *, void *);
	int v1; /* procs takes struct nvml_proc_v1 */
	nvmlDevice_t dev[MS_MAX_DEVICES];
	uint8_t dev_tried[MS_MAX_DEVICES];
} nv;

/* room for 32-byte records too (a driver's other layout must not write past it) */
static struct nvml_proc_v2 procs_buf[2 * MAX_PROCS] MS_LARGE;
static struct nvml_proc_v1 *const procs_v1 = (struct nvml_proc_v1 *)procs_buf; /* same storage */

static void *sym(void *h, const char *name)
{
	return ms_elf_own_symbol((const struct link_map *)h, name);
}

/* The process query whose records have one size on every driver: _v2, else the first. */
static void pick_procs(void *h)
{
	nv.procs = sym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
	if (!nv.procs) {
		nv.procs = sym(h, "nvmlDeviceGetComputeRunningProcesses");
		nv.v1 = 1;
	}
}

/* Loads and initialises NVML; a failing dlopen's message is taken back out of dlerror. */
static int load(void)
{
	void *(*real_dlopen)(const char *, int) = MS_REAL_LAZY(dlopen);
	void *h = real_dlopen ? real_dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL) : NULL;
	if (!h) {
		dlerror();
		return MS_NVML_ABSENT;
	}
	nvmlReturn_t (*init)(void) = sym(h, "nvmlInit_v2");
	nv.by_bus_id = sym(h, "nvmlDeviceGetHandleByPciBusId_v2");
	pick_procs(h);
	if (!init || !nv.by_bus_id || !nv.procs || init() != NVML_SUCCESS)
		return MS_NVML_FAILED; /* kept loaded: unloading a library that ran may not be safe */
	return MS_NVML_OK;
}

int ms_nvml_state(int do_load)
{
	int s = __atomic_load_n(&nv.state, __ATOMIC_ACQUIRE);
	if (s != MS_NVML_UNTRIED || !do_load)
		return s;
	int saved = errno;
	ms_tls_guard++;
	s = load();
	ms_tls_guard--;
	errno = saved;
	__atomic_store_n(&nv.state, s, __ATOMIC_RELEASE);
	return s;
}

/* NVML's handle of CUDA device DEV, found by its PCI bus id once; NULL when none matches. */
static nvmlDevice_t device_of(int dev)
{
	if (dev < 0 || dev >= MS_MAX_DEVICES)
		return NULL;
	if (nv.dev_tried[dev])
		return nv.dev[dev];
	CUresult (*bus)(char *, int, CUdevice) =
		(CUresult(*)(char *, int, CUdevice))ms_cuda_real_optional(H_cuDeviceGetPCIBusId);
	char id[BUS_ID_LEN];
	nvmlDevice_t h = NULL;
	if (bus && bus(id, (int)sizeof id, dev) == CUDA_SUCCESS && nv.by_bus_id(id, &h) != NVML_SUCCESS)
		h = NULL;
	nv.dev[dev] = h;
	nv.dev_tried[dev] = 1;
	return h;
}

static void entry(unsigned i, unsigned *pid, int64_t *used)
{
	unsigned long long u = nv.v1 ? procs_v1[i].usedGpuMemory : procs_buf[i].usedGpuMemory;
	*pid = nv.v1 ? procs_v1[i].pid : procs_buf[i].pid;
	*used = u == NVML_VALUE_NOT_AVAILABLE ? -1 : (int64_t)u;
}

int ms_nvml_usage(int dev, int64_t *mine, struct ms_fp_other *others, int max, int *nothers)
{
	*mine = -1;
	*nothers = 0;
	if (ms_nvml_state(1) != MS_NVML_OK)
		return -1;
	nvmlDevice_t h = device_of(dev);
	unsigned int n = MAX_PROCS;
	if (!h || nv.procs(h, &n, procs_buf) != NVML_SUCCESS) /* more than MAX_PROCS: not read */
		return -1;
	unsigned self = (unsigned)syscall(SYS_getpid);
	for (unsigned i = 0; i < n && i < MAX_PROCS; i++) {
		unsigned pid;
		int64_t used;
		entry(i, &pid, &used);
		if (pid == self)
			*mine = used;
		else if (*nothers < max)
			others[(*nothers)++] = (struct ms_fp_other){ pid, used };
	}
	return 0;
}
