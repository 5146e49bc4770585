/* The few CUDA driver declarations the shim needs, so it builds where no CUDA toolkit is
 * installed.  Names, values and layouts are cuda.h's (CUDA 13); the GPU tests compile the CUDA
 * files against the real cuda.h (MS_CUDA_H_CHECK) and check every value and offset here. */
#ifndef MS_CUDA_MIN_H
#define MS_CUDA_MIN_H

#include <stddef.h>
#include <stdint.h>

/* name, value: every constant the shim uses */
#define MS_CU_CONSTANTS(X)                                                                                             \
	X(CUDA_SUCCESS, 0)                                                                                             \
	X(CUDA_ERROR_NOT_INITIALIZED, 3)                                                                               \
	X(CU_MEM_LOCATION_TYPE_DEVICE, 1)                                                                              \
	X(CU_MEM_ALLOCATION_TYPE_MANAGED, 2)                                                                           \
	X(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, 5)                                                                     \
	X(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 6)                                                                        \
	X(CU_STREAM_CAPTURE_MODE_RELAXED, 2)

/* struct, field, offset: every field the shim reads */
#define MS_CU_OFFSETS(X)                                                                                               \
	X(CUmemLocation, type, 0)                                                                                      \
	X(CUmemLocation, id, 4)                                                                                        \
	X(CUmemAllocationProp, type, 0)                                                                                \
	X(CUmemAllocationProp, location, 8)                                                                            \
	X(CUmemPoolProps, allocType, 0)                                                                                \
	X(CUmemPoolProps, location, 8)

#ifdef MS_CUDA_H_CHECK
#define __CUDA_API_VERSION_INTERNAL 1 /* the versioned and legacy names side by side */
#include <cuda.h>
#else

typedef int CUresult;
typedef int CUdevice;
typedef int CUmemPool_attribute;
typedef int CUmemAllocationType;
typedef int CUdriverProcAddressQueryResult;
typedef int CUstreamCaptureMode;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef uint64_t cuuint64_t;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

#define MS_CU_ENUM(name, value) name = value,
enum { MS_CU_CONSTANTS(MS_CU_ENUM) };
#undef MS_CU_ENUM

typedef struct CUmemLocation_st {
	int type;
	int id;
} CUmemLocation;

/* Leading fields only: the shim reads these through the caller's pointer, never copies one. */
typedef struct CUmemAllocationProp_st {
	CUmemAllocationType type;
	int requestedHandleTypes;
	CUmemLocation location;
} CUmemAllocationProp;

typedef struct CUmemPoolProps_st {
	CUmemAllocationType allocType;
	int handleTypes;
	CUmemLocation location;
} CUmemPoolProps;

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height, unsigned int elem);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev);
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
		     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
CUresult cuMemHostUnregister(void *p);
CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,
			 unsigned int ElementSizeBytes);
CUresult cuMemFree(CUdeviceptr_v1 dptr);
CUresult cuMemAllocHost(void **pp, unsigned int bytesize);
CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus);

#endif /* MS_CUDA_H_CHECK */

#endif
