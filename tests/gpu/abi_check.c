/* Compiled twice by gpu.mk: against shim/cuda/min.h alone and with MS_CUDA_H_CHECK (the real
 * cuda.h).  Every constant and field offset the shim relies on must agree in both. */
#include <stddef.h>
#include "cuda/min.h"

#define CHECK_CONST(name, value) _Static_assert((name) == (value), #name " differs");
MS_CU_CONSTANTS(CHECK_CONST)

#define CHECK_OFFSET(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field " moved");
MS_CU_OFFSETS(CHECK_OFFSET)

_Static_assert(sizeof(CUdeviceptr) == 8 && sizeof(CUdeviceptr_v1) == 4, "device pointer sizes");
_Static_assert(sizeof(CUmemGenericAllocationHandle) == 8 && sizeof(CUresult) == 4, "handle and result sizes");
