/* Cross-thread frees (larson-like): producers allocate blocks that consumers free on another
 * thread, through a bounded ring per pair. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define RING 4096

struct pair {
	void *slot[RING];
	atomic_ulong head, tail;
	long count;
};

static void *produce(void *arg)
{
	struct pair *p = arg;
	uint64_t seed = (uintptr_t)arg;
	for (long i = 0; i < p->count; i++) {
		while (atomic_load(&p->head) - atomic_load(&p->tail) == RING)
			sched_yield(); /* on a loaded machine a spinning partner only steals the core */
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		char *b = malloc(16 + (seed >> 33) % 8192);
		b[0] = 1;
		p->slot[atomic_load(&p->head) % RING] = b;
		atomic_fetch_add(&p->head, 1);
	}
	return NULL;
}

static void *consume(void *arg)
{
	struct pair *p = arg;
	for (long i = 0; i < p->count; i++) {
		while (atomic_load(&p->head) == atomic_load(&p->tail))
			sched_yield();
		free(p->slot[atomic_load(&p->tail) % RING]);
		atomic_fetch_add(&p->tail, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 1000000;
	static struct pair pair;
	pair.count = count;
	pthread_t a, b;
	pthread_create(&a, NULL, produce, &pair);
	pthread_create(&b, NULL, consume, &pair);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
