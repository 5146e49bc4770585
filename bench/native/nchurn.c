/* Allocation churn for native stages: the loop of bench/churn.c inside a named function
 * (churn_epoch), called from the worker, so a stage can be put around it (MEMSHIM_STAGES=
 * "train=churn_epoch") or elsewhere (MEMSHIM_STAGES="train=never_called": native checks on, the
 * churn outside any stage).  Also a variant that allocates through a small helper function, whose
 * frame is new at every allocation (argv[3] = "helper"), and one where every allocation or free is
 * its own call of a function (one_op, argv[3] = "calls"), the worst case for a stage around it.
 * Prints nothing; timed from outside. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 1024

static long ops;
static int use_helper, use_calls;

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

__attribute__((noinline)) void never_called(void)
{
	void *volatile p = malloc(1);
	free(p);
}

__attribute__((noinline)) static char *make_block(size_t size)
{
	char *p = malloc(size);
	p[0] = 1;
	return p;
}

__attribute__((noinline)) void one_op(char **slot, uint64_t r)
{
	size_t k = r % SLOTS;
	if (slot[k]) {
		free(slot[k]);
		slot[k] = NULL;
		return;
	}
	unsigned shift = 4 + (unsigned)((r >> 32) % 17);
	size_t size = ((size_t)1 << shift) + (r >> 48) % ((size_t)1 << shift);
	slot[k] = malloc(size > (1 << 20) ? (1 << 20) : size);
	slot[k][0] = 1;
}

__attribute__((noinline)) void churn_epoch(char **slot, uint64_t *seed, long n)
{
	for (long i = 0; i < n; i++) {
		uint64_t r = next(seed);
		if (use_calls) {
			one_op(slot, r);
			continue;
		}
		size_t k = r % SLOTS;
		if (slot[k]) {
			free(slot[k]);
			slot[k] = NULL;
			continue;
		}
		unsigned shift = 4 + (unsigned)((r >> 32) % 17);
		size_t size = ((size_t)1 << shift) + (r >> 48) % ((size_t)1 << shift);
		if (size > (1 << 20))
			size = 1 << 20;
		if (use_helper) {
			slot[k] = make_block(size);
		} else {
			slot[k] = malloc(size);
			slot[k][0] = 1;
		}
	}
}

static void *worker(void *arg)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
	char **slot = calloc(SLOTS, sizeof *slot);
	churn_epoch(slot, &seed, ops);
	for (size_t k = 0; k < SLOTS; k++)
		free(slot[k]);
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	ops = argc > 2 ? atol(argv[2]) : 2000000;
	use_helper = argc > 3 && !strcmp(argv[3], "helper");
	use_calls = argc > 3 && !strcmp(argv[3], "calls");
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}
