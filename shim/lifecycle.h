/* Process identity and the library's life: constructor, fork, exit. */
#ifndef MS_LIFECYCLE_H
#define MS_LIFECYCLE_H

#include <sys/types.h>

struct ms_process {
	pid_t pid, ppid, root_pid;
	int is_child;    /* forked or exec'd child of a tracked process */
	int forked;      /* made by fork, not exec */
	int own_output;  /* a child writing its own MEMSHIM_OUTPUT as is, without ".<pid>" */
	double start_monotonic;
	double start_unix;
	int implicit_init; /* MEMSHIM_STAGES did not name init */
};

extern struct ms_process ms_proc;

/* Writes the final metrics file once (closing open stages); REASON is "exit" or "_exit". */
void ms_finish(const char *reason);

/* Non-zero when the calling process is the one the library tracks (not a vfork child). */
int ms_is_tracked_process(void);

#endif
