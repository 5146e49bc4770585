/* What the GPU suites that run fixtures share: the build directory as an absolute path (the
 * fixtures run from directories of their own) and Check's runner. */
#ifndef MS_TEST_GPU_SUITE_H
#define MS_TEST_GPU_SUITE_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include "suite.h"

/* Where the fixtures and the shim were built: BUILD, default "build", made absolute. */
static char build_dir[PATH_MAX];

/* Fills build_dir, then runs every test of S; 1 (S left unrun) when there is no build directory. */
static inline int run_gpu_suite(Suite *s)
{
	const char *b = getenv("BUILD");
	if (!realpath(b && *b ? b : "build", build_dir)) {
		perror("build directory");
		return 1;
	}
	return run_suite(s);
}

#endif
