/* cuMemAlloc_v2 + cuMemFree_v2 pairs against the stand-in driver, after a warm-up, all threads
 * released together.  Prints two numbers: wall ns of one pair as each thread sees it, and CPU ns
 * one pair costs (process CPU time over all pairs; fair when threads outnumber cores).
 * Usage: pair THREADS PAIRS_PER_THREAD */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static CUcontext ctx;
static long pairs;
static pthread_barrier_t start, stop;

static double now(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void loop(long n)
{
	for (long i = 0; i < n; i++) {
		CUdeviceptr p;
		if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
			exit(1);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	cuCtxSetCurrent(ctx);
	loop(pairs / 10); /* warm-up: resolution, first table pages, caches */
	pthread_barrier_wait(&start);
	loop(pairs);
	pthread_barrier_wait(&stop);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	pairs = argc > 2 ? atol(argv[2]) : 1000000;
	pthread_t th[64];
	if (threads < 1 || threads > 64 || pairs < 1)
		return 2;
	if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0))
		return 1;
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	pthread_barrier_init(&stop, NULL, (unsigned)threads + 1);
	for (int t = 0; t < threads; t++)
		pthread_create(&th[t], NULL, worker, NULL);
	pthread_barrier_wait(&start);
	double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
	pthread_barrier_wait(&stop);
	double t1 = now(CLOCK_MONOTONIC), c1 = now(CLOCK_PROCESS_CPUTIME_ID);
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	printf("%.1f %.1f\n", (t1 - t0) / (double)pairs, (c1 - c0) / ((double)pairs * threads));
	return 0;
}
