/* The churn loop of the instruction benchmark: random sizes, mostly 16 B - 2 KiB, one in 64 up to
 * 1 MiB, on 1..N threads; OPS operations per thread toggle slots (about OPS/2 malloc+free pairs). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 1024

static long ops_per_thread;

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static size_t draw_size(uint64_t r)
{
	if ((r >> 58) == 0) /* 1 in 64: 2 KiB .. 1 MiB, log-uniform */
		return (size_t)2048 << ((r >> 32) % 10);
	return 16 + (r >> 40) % 2033;
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
			slot[k] = malloc(draw_size(r));
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
	ops_per_thread = argc > 2 ? atol(argv[2]) : 600000;
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}
