/* Whether the program locked itself into seccomp (intercept/sandbox.c tells, lifecycle.c decides):
 * read before any system call of memshim's own, by every layer, so it depends on nothing. */
#ifndef MS_SANDBOX_H
#define MS_SANDBOX_H

enum { MS_SANDBOX_NONE, MS_SANDBOX_FILTER, MS_SANDBOX_STRICT };

struct ms_sandbox {
	int mode;             /* MS_SANDBOX_*: from then on memshim makes no system call of its own */
	double clock_stopped; /* ms_now() as it entered strict mode, which takes the TSC away */
};
extern struct ms_sandbox ms_sandbox;

static inline int ms_sandboxed(void)
{
	return __atomic_load_n(&ms_sandbox.mode, __ATOMIC_ACQUIRE);
}

#endif
