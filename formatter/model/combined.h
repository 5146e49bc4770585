/* The run's processes over time on one clock (doc/format.md#the-combined-peak): per component (CPU,
 * each GPU device), the sum of every process's timeline step function, shifted by its start_time, a
 * forked child counting its live above what it inherited; the sum's peak, when, and who held what. */
#ifndef MF_COMBINED_H
#define MF_COMBINED_H

#include "model/document.h"

#include <stddef.h>

struct mf_combined {
	int gpu; /* 0: the CPU; 1: GPU device DEVICE */
	long long device;
	size_t n;           /* the files given; those without this series hold 0 */
	size_t with;        /* how many had this series */
	double peak, at;    /* the sum's peak and its time, seconds from the earliest start_time */
	double *held;       /* n: each one's value at the combined peak */
	double *own;        /* n: each one's own peak (of the same step function) */
	double *own_at;     /* n: and when, on the common clock */
	double own_sum;     /* the own peaks added up, whenever each happened */
	unsigned char *has; /* n: 1 when that file has this series */
	double slack;       /* the sum of each one's timeline step, max(1 MiB, 1% of its peak) */
};

/* One change of file WHO's value to V at time T on the common clock. */
struct mf_step {
	double t, v;
	size_t who;
};

/* Every file's steps of one component, from ORIGIN (a start_time), in time order; returns how
 * many, *OUT malloc'd. */
size_t mf_combined_steps(const struct mf_file *files, size_t n, int gpu, long long device, double origin,
			 struct mf_step **out);

/* Every component with a series in two or more of FILES, CPU first then GPU devices in order;
 * returns how many, *OUT malloc'd (mf_combined_free). */
size_t mf_combined_build(const struct mf_file *files, size_t n, struct mf_combined **out);
void mf_combined_free(struct mf_combined *c, size_t nc);

#endif
