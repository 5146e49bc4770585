/* The churn benchmarks' shared pieces: the random stream, the two size mixes and the threads.  The
 * published figures (bench-ir, bench-native-ir) depend on every call sequence staying exactly this. */
#ifndef MEMSHIM_BENCH_CHURN_MIX_H
#define MEMSHIM_BENCH_CHURN_MIX_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 1024

/* xorshift64: the same stream on every machine. */
static inline uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Thread I's starting state. */
static inline uint64_t churn_seed(void *i)
{
	return 0x9e3779b97f4a7c15ULL * ((uintptr_t)i + 1);
}

/* 16 B .. 1 MiB, log-uniform (churn.c, nchurn.c). */
static inline size_t wide_size(uint64_t r)
{
	unsigned shift = 4 + (unsigned)((r >> 32) % 17); /* 2^4 .. 2^20 */
	size_t size = ((size_t)1 << shift) + (r >> 48) % ((size_t)1 << shift);
	return size > (1 << 20) ? (1 << 20) : size;
}

/* One operation on the table SLOT: frees slot R % SLOTS when it holds a block, else puts there a
 * new block of SIZE(R) bytes with its first byte written. */
static inline void toggle(char **slot, uint64_t r, size_t (*size)(uint64_t))
{
	size_t k = r % SLOTS;
	if (slot[k]) {
		free(slot[k]);
		slot[k] = NULL;
	} else {
		slot[k] = malloc(size(r));
		slot[k][0] = 1;
	}
}

/* Frees every slot, then the table. */
static inline void free_slots(char **slot)
{
	for (size_t k = 0; k < SLOTS; k++)
		free(slot[k]);
	free(slot);
}

/* One thread's churn (ARG: its index): OPS toggles of its own SLOTS-entry table, sizes from SIZE. */
static inline void churn(void *arg, long ops, size_t (*size)(uint64_t))
{
	uint64_t seed = churn_seed(arg);
	char **slot = calloc(SLOTS, sizeof *slot);
	for (long i = 0; i < ops; i++)
		toggle(slot, next(&seed), size);
	free_slots(slot);
}

/* Runs WORKER on THREADS threads (argument: the thread's index) and waits; 2 when THREADS is out
 * of 1..64, else 0. */
/* Always inlined: main() stays the code it was, so whole-process instruction counts do not move. */
static inline __attribute__((always_inline)) int run_threads(int threads, void *(*worker)(void *))
{
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	for (long i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}

#endif
