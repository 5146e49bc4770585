/* Runs fixture programs under the shim and reads their metrics files (integration suites). */
#ifndef MS_HARNESS_H
#define MS_HARNESS_H

#include <jansson.h>
#include <stdint.h>

struct run {
	int status;           /* wait status */
	char dir[256];        /* fresh temporary directory; MEMSHIM_OUTPUT defaults to dir/m.json */
	char out[1 << 16];    /* the program's stdout */
	char err[1 << 16];    /* the program's stderr */
};

/* Runs ARGV with LD_PRELOAD set to the built library, MEMSHIM_OUTPUT=dir/m.json and the "NAME=value"
 * entries of ENV (NULL-terminated; "NAME" alone unsets).  Returns 0 when it could run. */
int run_under_shim(struct run *r, const char *const *argv, const char *const *env);

/* When positive, run_under_shim kills a program still running after this many seconds (a hang then
 * fails the test instead of stalling the suite); its status is then SIGKILL's. */
extern int harness_timeout;

/* Parsed metrics file at DIR/NAME (NULL when missing or invalid). */
json_t *load_metrics(const struct run *r, const char *name);

/* The flat metric KEY (fails the test when missing). */
int64_t metric(json_t *root, const char *key);
int has_metric(json_t *root, const char *key);

/* The stages[] entry called NAME, or NULL. */
json_t *stage_of(json_t *root, const char *name);

/* Path of a built artefact under the build directory (BUILD env, default "build"). */
const char *built(const char *relative);

/* Number of files in DIR whose names start with PREFIX; the first one's name goes to FIRST. */
int count_files(const char *dir, const char *prefix, char *first, size_t size);

#endif
