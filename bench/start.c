/* Fixed cost per process: start COMMAND bare and with LD_PRELOAD=LIB alternately, ROUNDS pairs,
 * each run's wall time from posix_spawn to waitpid; prints the medians and the median of the paired
 * differences (shim - bare) in milliseconds.  The metrics files go to a scratch directory.
 *   start LIB ROUNDS OUTDIR [NAME=VALUE...] -- COMMAND ARGS...   (NAME=VALUE: more for the shim's runs)
 * Alternating pairs keep a drifting load on the shared machine out of the difference. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double cpu_ms; /* user + system time of the last run */

static double run(char **argv, char **envp)
{
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp) != 0) {
		perror(argv[0]);
		exit(2);
	}
	int st;
	struct rusage ru;
	wait4(pid, &st, 0, &ru);
	double t = now_ms() - t0;
	cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	posix_spawn_file_actions_destroy(&fa);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "start: %s failed (status %d)\n", argv[0], st);
		exit(2);
	}
	return t;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The 10th percentile (after median() sorted V): the runs least disturbed by other load. */
static double low(const double *v, int n)
{
	return v[n / 10];
}

/* ENVIRON without LD_PRELOAD/MEMSHIM_*, plus EXTRA (NULL-terminated). */
static char **make_env(char **extra)
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	char **e = calloc(n + 16, sizeof *e);
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "MEMSHIM_", 8))
			e[k++] = environ[i];
	for (; extra && *extra; extra++)
		e[k++] = *extra;
	return e;
}

int main(int argc, char **argv)
{
	int dash = 4;
	while (dash < argc && strcmp(argv[dash], "--"))
		dash++;
	if (dash + 1 >= argc || dash - 4 > 8) {
		fprintf(stderr, "usage: start LIB ROUNDS OUTDIR [NAME=VALUE...] -- COMMAND ARGS...\n");
		return 2;
	}
	int rounds = atoi(argv[2]);
	if (rounds < 1)
		return 2;
	static char preload[4096], output[4096];
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", argv[1]);
	snprintf(output, sizeof output, "MEMSHIM_OUTPUT=%s/m.json", argv[3]);
	char *extra[12] = { preload, output };
	for (int i = 4; i < dash; i++)
		extra[2 + i - 4] = argv[i];
	char **bare_env = make_env(NULL), **shim_env = make_env(extra);
	double *bare = calloc((size_t)rounds, sizeof *bare), *shim = calloc((size_t)rounds, sizeof *shim);
	double *diff = calloc((size_t)rounds, sizeof *diff), *cdiff = calloc((size_t)rounds, sizeof *cdiff);
	run(argv + dash + 1, bare_env); /* warm the page cache */
	run(argv + dash + 1, shim_env);
	for (int i = 0; i < rounds; i++) {
		/* alternate which goes first so neither always follows the other */
		double cb, cs;
		if (i % 2) {
			shim[i] = run(argv + dash + 1, shim_env);
			cs = cpu_ms;
			bare[i] = run(argv + dash + 1, bare_env);
			cb = cpu_ms;
		} else {
			bare[i] = run(argv + dash + 1, bare_env);
			cb = cpu_ms;
			shim[i] = run(argv + dash + 1, shim_env);
			cs = cpu_ms;
		}
		diff[i] = shim[i] - bare[i];
		cdiff[i] = cs - cb;
	}
	double d = median(diff, rounds), b = median(bare, rounds), s = median(shim, rounds);
	printf("wall: bare %.3f ms, memshim %.3f ms (medians), paired median difference %+.3f ms; 10th percentiles "
	       "%.3f / %.3f ms (%+.3f); cpu time paired median difference %+.3f ms (%d pairs)\n", b, s, d, low(bare, rounds),
	       low(shim, rounds), low(shim, rounds) - low(bare, rounds), median(cdiff, rounds), rounds);
	return 0;
}
