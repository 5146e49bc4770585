/* Child processes of the integration suites: stdout and stderr go to files in the run's directory
 * and are read back after it ends. */
#ifndef MS_TEST_CHILD_H
#define MS_TEST_CHILD_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* Up to SIZE - 1 bytes of PATH into BUF, NUL-terminated (empty when it cannot be read). */
void slurp(const char *path, char *buf, size_t size);

/* Forks ARGV[0] with ENVP in CWD (NULL: here), its stdout and stderr to DIR/stdout and DIR/stderr.
 * The child exits 125 when it cannot enter CWD, 126 when it cannot exec.  Returns the pid (-1: none). */
pid_t spawn_redirected(const char *dir, const char *const *argv, char *const *envp, const char *cwd);

/* DIR/stdout into OUT and DIR/stderr into ERR (SIZE bytes each at most). */
void read_back(const char *dir, char *out, size_t out_size, char *err, size_t err_size);

/* A wait status as a shell reports it: the exit status, or 128 + the signal. */
int exit_code(int status);

/* Room for a Python child's environment. */
struct py_env {
	char *vars[1100];
	char preload[PATH_MAX + 16];
	char output[PATH_MAX + 64];
	char live[PATH_MAX + 32];
};

/* This process's environment minus MEMSHIM_*, LD_PRELOAD and PYTHON*, then LD_PRELOAD=LIB (none
 * when LIB is NULL), MEMSHIM_OUTPUT=DIR/OUTPUT and the entries of the NULL-terminated lists MORE
 * and EXTRA (either may be NULL).  Returns E->vars. */
char **py_env(struct py_env *e, const char *lib, const char *dir, const char *output,
	      const char *const *more, const char *const *extra);

#endif
