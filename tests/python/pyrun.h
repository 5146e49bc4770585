/* The Python suites' harness (tests/python/test_*.c, each one topic): the interpreters a test
 * loops over, a fixture script run under LD_PRELOAD=libmemshim.so with its metrics file parsed by
 * jansson, and the checks on it (exact deltas within 1 MiB: Python's own allocations, call
 * counts).  main() is here; each suite defines python_suite().  TEST_PYTHON (a part of an
 * interpreter's path, e.g. 3.12) runs one interpreter while iterating; CK_RUN_CASE one test case. */
#ifndef MS_TEST_PYRUN_H
#define MS_TEST_PYRUN_H

#include <check.h>
#include <jansson.h>
#include <limits.h>

#define MIB (1024.0 * 1024.0)

/* Every interpreter a loop test runs on (skipped where not installed): index 0 to NPY - 1. */
extern const char *const pythons[];
extern const int py_count;
#define NPY py_count

/* The library under test, tests/python/fixtures, python/ (memshim's Python package) and the other
 * tool's frame hook (fixtures/otherhook.c), absolute. */
extern char lib[PATH_MAX], fixtures[PATH_MAX], scripts[PATH_MAX], otherhook[PATH_MAX];

struct run {
	char dir[64];
	int status; /* exit status, or 128 + signal */
	char out[8192], err[16384];
	json_t *root; /* the metrics file, or NULL */
	const char *python;
};

#define RUN_OK(r)                                                                                  \
	do {                                                                                       \
		ck_assert_msg((r)->status == 0, "%s exited %d\nstdout: %s\nstderr: %s", (r)->python, \
			      (r)->status, (r)->out, (r)->err);                                    \
		ck_assert_msg((r)->root != NULL, "%s wrote no metrics file; stderr: %s", (r)->python, \
			      (r)->err);                                                           \
	} while (0)

/* Runs PYTHON ARGS... in CWD (NULL: here) with the shim preloaded (unless PRELOAD is 0), stages
 * STAGES (NULL: MEMSHIM_STAGES unset) and extra KEY=VALUE entries ENV (NULL-terminated). */
void run_py(struct run *r, const char *python, const char *const *args, const char *stages,
	    const char *const *env, const char *cwd, int preload);

/* run_py for a program with children: each process writes its own file, m_<pid>.json. */
void run_py_children(struct run *r, const char *python, const char *const *args, const char *stages);

/* Removes the run's directory and frees its metrics file. */
void run_done(struct run *r);

/* The path of fixture script NAME (one of four rotating buffers). */
const char *fixture(const char *name);

/* The interpreter of loop index I, or NULL (with a message) when it is not installed or
 * TEST_PYTHON (a part of the path, e.g. 3.12: one interpreter while iterating) names another. */
const char *python_or_skip(int i);

/* The N of an interpreter's 3.N (Debian's python3: 11). */
int minor_of(const char *python);

/* As python_or_skip, and NULL (saying WHY) for an interpreter older than 3.MINOR. */
const char *python_at_least(int i, int minor, const char *why);

/* The fixture SCRIPT run by PYTHON under the shim with STAGES and ENV (see run_py): it must exit 0
 * and leave a metrics file. */
void run_fixture_ok(struct run *r, const char *python, const char *script, const char *stages,
		    const char *const *env);

/* The run's standard output mentions NEEDLE. */
void expect_out(struct run *r, const char *needle);

/* The metric STAGE_WHAT of the run's file (it must exist). */
json_t *metric(struct run *r, const char *stage, const char *what);

/* STAGE ran CALLS times. */
void expect_calls(struct run *r, const char *stage, long calls);

/* KIND is "alloc" or "peaked": the stage's last call, in MiB, within 1 MiB. */
void expect_mib(struct run *r, const char *stage, const char *kind, double mib);

/* STAGE ran CALLS times and its last call kept ALLOC_MIB (within 1 MiB). */
void expect_stage(struct run *r, const char *stage, long calls, double alloc_mib);

/* How often NEEDLE occurs in TEXT. */
int count_lines(const char *text, const char *needle);

/* Exactly one line of memshim's on stderr, and it mentions NEEDLE. */
void expect_one_warning(struct run *r, const char *needle);

/* The run's file has no stage STAGE. */
void expect_absent(struct run *r, const char *stage);

/* The entry of stage NAME in the file's "stages" (it must exist). */
json_t *stage_entry(struct run *r, const char *name);

/* The suite of the test program (its main() is the harness's). */
Suite *python_suite(void);

#endif
