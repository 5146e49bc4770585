/* Allocation churn: random sizes from 16 B to 1 MiB (log-uniform), on 1..N threads, each thread
 * with its own slots.  Prints nothing; timed from outside. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 1024

static long ops_per_thread;

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *worker(void *arg)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
	char **slot = calloc(SLOTS, sizeof *slot);
	for (long i = 0; i < ops_per_thread; i++) {
		uint64_t r = next(&seed);
		size_t k = r % SLOTS;
		if (slot[k]) {
			free(slot[k]);
			slot[k] = NULL;
		} else {
			unsigned shift = 4 + (unsigned)((r >> 32) % 17); /* 2^4 .. 2^20 */
			size_t size = ((size_t)1 << shift) + (r >> 48) % ((size_t)1 << shift);
			if (size > (1 << 20))
				size = 1 << 20;
			slot[k] = malloc(size);
			slot[k][0] = 1;
		}
	}
	for (size_t k = 0; k < SLOTS; k++)
		free(slot[k]);
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	ops_per_thread = argc > 2 ? atol(argv[2]) : 2000000;
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}
