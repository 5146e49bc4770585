/* Allocation churn: random sizes from 16 B to 1 MiB (log-uniform), on 1..N threads, each thread
 * with its own slots.  Prints nothing; timed from outside. */
#include <stdlib.h>
#include "churn_mix.h"

static long ops_per_thread;

static void *worker(void *arg)
{
	churn(arg, ops_per_thread, wide_size);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	ops_per_thread = argc > 2 ? atol(argv[2]) : 2000000;
	return run_threads(threads, worker);
}
