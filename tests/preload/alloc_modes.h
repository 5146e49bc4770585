/* alloc_fixture, the program most preload suites drive: one of its modes run under the shim, its
 * metrics file read back. */
#ifndef MS_TEST_ALLOC_MODES_H
#define MS_TEST_ALLOC_MODES_H

#include "harness.h"

/* alloc_fixture MODE under the shim into R; its metrics file or NULL. */
json_t *run_alloc_mode(struct run *r, const char *mode, const char *const *env);

/* As run_alloc_mode, for a run that must exit normally with STATUS and leave a metrics file. */
json_t *run_alloc_mode_exited(struct run *r, const char *mode, const char *const *env, int status);

#endif
