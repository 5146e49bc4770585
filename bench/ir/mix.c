/* The churn loop of the instruction benchmark: random sizes, mostly 16 B - 2 KiB, one in 64 up to
 * 1 MiB, on 1..N threads; OPS operations per thread toggle slots (about OPS/2 malloc+free pairs). */
#include <stdlib.h>
#include "../churn_mix.h"

static long ops_per_thread;

static size_t draw_size(uint64_t r)
{
	if ((r >> 58) == 0) /* 1 in 64: 2 KiB .. 1 MiB, log-uniform */
		return (size_t)2048 << ((r >> 32) % 10);
	return 16 + (r >> 40) % 2033;
}

static void *worker(void *arg)
{
	churn(arg, ops_per_thread, draw_size);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	ops_per_thread = argc > 2 ? atol(argv[2]) : 600000;
	return run_threads(threads, worker);
}
