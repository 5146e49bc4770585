/* Allocation churn for native stages: the loop of bench/churn.c inside a named function
 * (churn_epoch), called from the worker, so a stage can be put around it (MEMSHIM_STAGES=
 * "train=churn_epoch") or elsewhere (MEMSHIM_STAGES="train=never_called": native checks on, the
 * churn outside any stage).  Also a variant that allocates through a small helper function, whose
 * frame is new at every allocation (argv[3] = "helper"), and one where every allocation or free is
 * its own call of a function (one_op, argv[3] = "calls"), the worst case for a stage around it.
 * Prints nothing; timed from outside. */
#include <stdlib.h>
#include <string.h>
#include "../churn_mix.h"

static long ops;
static int use_helper, use_calls;

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
	toggle(slot, r, wide_size);
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
		size_t size = wide_size(r);
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
	uint64_t seed = churn_seed(arg);
	char **slot = calloc(SLOTS, sizeof *slot);
	churn_epoch(slot, &seed, ops);
	free_slots(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	ops = argc > 2 ? atol(argv[2]) : 2000000;
	use_helper = argc > 3 && !strcmp(argv[3], "helper");
	use_calls = argc > 3 && !strcmp(argv[3], "calls");
	return run_threads(threads, worker);
}
