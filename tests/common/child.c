/* Child processes of the integration suites (see child.h). */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "child.h"

extern char **environ;

void slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, size - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
}

/* DIR/NAME into PATH. */
static void in_dir(char *path, const char *dir, const char *name)
{
	snprintf(path, PATH_MAX, "%s/%s", dir, name);
}

pid_t spawn_redirected(const char *dir, const char *const *argv, char *const *envp, const char *cwd)
{
	char out_path[PATH_MAX], err_path[PATH_MAX];
	in_dir(out_path, dir, "stdout");
	in_dir(err_path, dir, "stderr");
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	dup2(o, 1);
	dup2(e, 2);
	if (cwd && chdir(cwd) != 0)
		_exit(125);
	execve(argv[0], (char *const *)argv, envp);
	_exit(126);
}

void read_back(const char *dir, char *out, size_t out_size, char *err, size_t err_size)
{
	char path[PATH_MAX];
	in_dir(path, dir, "stdout");
	slurp(path, out, out_size);
	in_dir(path, dir, "stderr");
	slurp(path, err, err_size);
}

int exit_code(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Appends the NULL-terminated LIST to VARS from N on, leaving room for the terminator. */
static int append(char **vars, int n, const char *const *list)
{
	for (; list && *list && n < 1090; list++)
		vars[n++] = (char *)*list;
	return n;
}

char **py_env(struct py_env *e, const char *lib, const char *dir, const char *output,
	      const char *const *more, const char *const *extra)
{
	int n = 0;
	for (char **v = environ; *v && n < 1000; v++)
		if (strncmp(*v, "MEMSHIM_", 8) && strncmp(*v, "LD_PRELOAD=", 11) && strncmp(*v, "PYTHON", 6))
			e->vars[n++] = *v;
	snprintf(e->preload, sizeof e->preload, "LD_PRELOAD=%s", lib ? lib : "");
	snprintf(e->output, sizeof e->output, "MEMSHIM_OUTPUT=%s/%s", dir, output);
	if (lib)
		e->vars[n++] = e->preload;
	e->vars[n++] = e->output;
	snprintf(e->live, sizeof e->live, "MEMSHIM_LIVE_DIR=%s/live", dir); /* killed runs' records */
	e->vars[n++] = e->live;
	n = append(e->vars, n, more);
	n = append(e->vars, n, extra);
	e->vars[n] = NULL;
	return e->vars;
}
