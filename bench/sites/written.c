/* bench/churn.c's loop with each new block written once, as a program fills what it allocates
 * (bench/sites/sites.sh: call sites' cost on a loop that does the work allocations are for).  The
 * writes are 16-byte stores, four a step, as compiled loops and glibc's vector memset write a
 * block: glibc's memset switches to rep stosb on large blocks, which callgrind counts a byte at a
 * time, so the loop writes them itself.  Prints nothing. */
#include <stdlib.h>
#include "../churn_mix.h"

typedef uint64_t pair __attribute__((vector_size(16)));

static long ops_per_thread;

/* N bytes at P (16-byte aligned, as malloc's blocks are) written once with words of R. */
static void fill(char *p, size_t n, uint64_t r)
{
	pair v = { r, ~r };
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		*(pair *)(p + i) = v;
		*(pair *)(p + i + 16) = v;
		*(pair *)(p + i + 32) = v;
		*(pair *)(p + i + 48) = v;
	}
	for (; i + 16 <= n; i += 16)
		*(pair *)(p + i) = v;
	for (; i < n; i++)
		p[i] = (char)r;
}

static void *worker(void *arg)
{
	uint64_t seed = churn_seed(arg);
	char **slot = calloc(SLOTS, sizeof *slot);
	for (long i = 0; i < ops_per_thread; i++) {
		uint64_t r = next(&seed);
		size_t k = r % SLOTS;
		if (slot[k]) {
			free(slot[k]);
			slot[k] = NULL;
		} else {
			size_t n = wide_size(r);
			slot[k] = malloc(n);
			fill(slot[k], n, r);
		}
	}
	free_slots(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	ops_per_thread = argc > 2 ? atol(argv[2]) : 200000;
	return run_threads(threads, worker);
}
