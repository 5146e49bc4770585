/* Between the dlsym wrapper (intercept/dl.c) and the CUDA driver wrappers (cuda/wrappers.c). */
#ifndef MS_CUDA_H
#define MS_CUDA_H

/* Index of the driver function named exactly NAME that the shim wraps, or -1. */
int ms_cuda_hook_index(const char *name);

/* dlsym(HANDLE, NAME) for a wrapped driver function IDX: looks the real one up, remembers it, and
 * returns the shim's wrapper when the library has the function (NULL, like dlsym, when not). */
void *ms_cuda_dlsym(void *handle, const char *name, int idx);

#endif
