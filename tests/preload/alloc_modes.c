/* alloc_fixture's modes run under the shim, as the preload suites call them (alloc_modes.h). */

#include "alloc_modes.h"

json_t *run_alloc_mode(struct run *r, const char *mode, const char *const *env)
{
	const char *args[] = { mode, NULL };
	return run_built(r, "preload/alloc_fixture", args, env);
}

json_t *run_alloc_mode_exited(struct run *r, const char *mode, const char *const *env, int status)
{
	return exited_with_file(r, run_alloc_mode(r, mode, env), status, mode);
}
