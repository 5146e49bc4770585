/* A stand-in libnvidia-ml.so.1 for machines without a GPU: two devices in the reverse of CUDA's
 * order (NVML index 0 is CUDA device 1, found by PCI bus id 0000:02:00.0), and on each device this
 * process with what the stand-in libcuda.so.1 holds for it (standin_cuda_footprint: its allocations
 * plus the context) and one other process, pid 4242 with 2 GiB.  Built into build/gpu/nvml/ so
 * that a test chooses whether a process finds it (LD_LIBRARY_PATH).
 * STANDIN_NVML_HOST_PIDS=1: this process is listed under another pid (its pid + 100000), as NVML
 * lists host pids to a process in a container's pid namespace. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define NDEV 2
#define OTHER_PID 4242u
#define OTHER_BYTES (2ull << 30)
#define SUCCESS 0
#define ERROR_INVALID_ARGUMENT 2
#define ERROR_UNINITIALIZED 1
#define ERROR_NOT_FOUND 6
#define ERROR_INSUFFICIENT_SIZE 7

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} proc_info; /* nvmlProcessInfo_v2_t */

struct dev {
	int cuda; /* the CUDA ordinal this NVML device is */
};

static struct dev devs[NDEV] = { { 1 }, { 0 } };
static int inited;

EXPORT int nvmlInit_v2(void);
EXPORT int nvmlInit_v2(void)
{
	inited = 1;
	return SUCCESS;
}

EXPORT int nvmlShutdown(void);
EXPORT int nvmlShutdown(void)
{
	inited = 0;
	return SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct dev **out);
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct dev **out)
{
	if (!inited)
		return ERROR_UNINITIALIZED;
	if (index >= NDEV || !out)
		return ERROR_INVALID_ARGUMENT;
	*out = &devs[index];
	return SUCCESS;
}

/* Accepts "0000:0B:00.0" and NVML's own "00000000:0B:00.0". */
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *id, struct dev **out);
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *id, struct dev **out)
{
	if (!inited)
		return ERROR_UNINITIALIZED;
	const char *colon = id ? strchr(id, ':') : NULL;
	if (!colon || !out)
		return ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < NDEV; i++)
		if (colon[1] == '0' && colon[2] == '1' + devs[i].cuda && colon[3] == ':') {
			*out = &devs[i];
			return SUCCESS;
		}
	return ERROR_NOT_FOUND;
}

static uint64_t footprint(int cuda)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	uint64_t (*fn)(int) = h ? (uint64_t(*)(int))dlsym(h, "standin_cuda_footprint") : NULL;
	uint64_t v = fn ? fn(cuda) : 0;
	if (h)
		dlclose(h);
	return v;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v2(struct dev *d, unsigned int *count, proc_info *infos);
EXPORT int nvmlDeviceGetComputeRunningProcesses_v2(struct dev *d, unsigned int *count, proc_info *infos)
{
	if (!inited)
		return ERROR_UNINITIALIZED;
	if (!d || !count)
		return ERROR_INVALID_ARGUMENT;
	uint64_t mine = footprint(d->cuda);
	unsigned int n = mine ? 2 : 1;
	if (*count < n || !infos) {
		*count = n;
		return ERROR_INSUFFICIENT_SIZE;
	}
	memset(infos, 0, n * sizeof *infos);
	infos[0].pid = OTHER_PID;
	infos[0].usedGpuMemory = OTHER_BYTES;
	if (mine) {
		const char *host = getenv("STANDIN_NVML_HOST_PIDS");
		infos[1].pid = (unsigned int)getpid() + (host && *host == '1' ? 100000u : 0u);
		infos[1].usedGpuMemory = mine;
	}
	*count = n;
	return SUCCESS;
}

/* _v3 as some R535 drivers fill it: 32-byte records (usedGpuCcProtectedMemory added), which a
 * reader of 24-byte ones decodes wrong from the second record on. */
typedef struct {
	proc_info v2;
	unsigned long long usedGpuCcProtectedMemory;
} proc_info_r535;

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(struct dev *d, unsigned int *count, proc_info_r535 *infos);
EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(struct dev *d, unsigned int *count, proc_info_r535 *infos)
{
	proc_info v2[2];
	unsigned int n = *count < 2 ? *count : 2;
	int r = nvmlDeviceGetComputeRunningProcesses_v2(d, &n, v2);
	*count = n;
	for (unsigned int i = 0; r == SUCCESS && i < n; i++)
		infos[i] = (proc_info_r535){ v2[i], 0 };
	return r;
}
