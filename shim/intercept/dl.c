/* dlsym interposition: dlsym(handle, ...) searches only that library, so a program (or the CUDA
 * runtime) asking libcuda for a driver function would bypass the preload.  Only the exact names of
 * driver functions we wrap, asked of a real library handle, are changed; everything else is a tail
 * call into the real dlsym, so it still sees the caller's return address (RTLD_NEXT and RTLD_DEFAULT
 * stay relative to the caller).  The pseudo-handles are never answered from here: the real dlsym
 * would search relative to the shim instead, and a tool preloaded after it that looks up its next
 * cuMemAlloc_v2 would get the shim's wrapper, which calls the tool's own function: a loop.  They
 * need no help either: RTLD_DEFAULT already finds the preloaded wrappers first. */
#include <dlfcn.h>
#include "intercept/hooks.h"
#include "core/ms.h"
#include "cuda/cuda.h"

#define EXPORT __attribute__((visibility("default")))

/* The pass-through must stay a tail call in every build (-O0, sanitizers): the real dlsym reads
 * its caller's address. */
EXPORT __attribute__((optimize("O2", "optimize-sibling-calls"))) void *dlsym(void *handle, const char *name)
{
	int idx = ms_tls_guard || handle == RTLD_NEXT || handle == RTLD_DEFAULT ? -1 : ms_cuda_hook_index(name);
	if (MS_LIKELY(idx < 0))
		return ms_libc_dlsym()(handle, name);
	return ms_cuda_dlsym(handle, name, idx);
}
