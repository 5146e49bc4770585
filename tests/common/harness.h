/* Runs fixture programs under the shim and reads their metrics files (the integration suites:
 * preload, live, sites, native). */
#ifndef MS_HARNESS_H
#define MS_HARNESS_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

struct run {
	int status;        /* wait status */
	char dir[256];     /* fresh temporary directory; MEMSHIM_OUTPUT defaults to dir/m.json */
	char out[1 << 16]; /* the program's stdout */
	char err[1 << 16]; /* the program's stderr */
};

/* Runs ARGV with LD_PRELOAD set to the built library, MEMSHIM_OUTPUT=dir/m.json and the "NAME=value"
 * entries of ENV (NULL-terminated; "NAME" alone unsets).  Returns 0 when it could run. */
int run_under_shim(struct run *r, const char *const *argv, const char *const *env);

/* This environment minus MEMSHIM_* and LD_PRELOAD, then LD_PRELOAD=the built library,
 * MEMSHIM_OUTPUT=DIR/m.json, MEMSHIM_LIVE_DIR=DIR/live and the entries of ENV as run_under_shim
 * takes them.  The array is static: valid until the next call. */
char **shim_env(const char *dir, const char *const *env);

/* Runs the built program PROGRAM (a path under the build directory) with the NULL-terminated ARGS
 * as run_under_shim does (fails the test when it cannot run).  Returns the parsed metrics file
 * dir/m.json, or NULL. */
json_t *run_built(struct run *r, const char *program, const char *const *args, const char *const *env);

/* Fails the test (naming WHAT) unless R exited normally with STATUS and M is its metrics file;
 * returns M. */
json_t *exited_with_file(const struct run *r, json_t *m, int status, const char *what);

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

/* KEY of call CALL (0: the first) in the history of stage STAGE (fails the test when missing). */
int64_t stage_call(json_t *root, const char *stage, int call, const char *key);

/* The integer OBJECT.A.B (0 when missing). */
int64_t member(json_t *object, const char *a, const char *b);

/* Fails the test unless LO <= V <= HI (WHAT names V). */
void assert_between(int64_t v, int64_t lo, int64_t hi, const char *what);

/* How many times "memshim:" occurs in TEXT (the shim's warning lines). */
int memshim_lines(const char *text);

/* memshim-format's output (stdout and stderr) for ARGS, run in R's directory with
 * MEMSHIM_LIVE_DIR=dir/live.  The text is static: valid until the next call. */
const char *format_in_dir(const struct run *r, const char *args);

/* A fresh directory /tmp/memshim-out.XXXXXX into DIR (SIZE bytes) with MODE, owned by OWNER. */
void make_dir(char *dir, size_t size, mode_t mode, uid_t owner);

/* Absolute path of program PROG found in PATH (a static buffer), or NULL when it is not there. */
const char *in_path(const char *prog);

/* This boot's id (/proc/sys/kernel/random/boot_id, without its newline) into OUT. */
void this_boot_id(char *out, size_t size);

/* Path of a built artefact under the build directory (BUILD env, default "build"). */
const char *built(const char *relative);

/* Number of files in DIR whose names start with PREFIX; the first one's name goes to FIRST. */
int count_files(const char *dir, const char *prefix, char *first, size_t size);

/* The files in DIR whose names start with PREFIX (the children's m.json.<pid>): how many, each
 * parsed into FILES (up to N; fails the test when one is not JSON).  The caller frees them. */
int load_files(const char *dir, const char *prefix, json_t **files, int n);

#endif
