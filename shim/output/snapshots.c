/* Periodic and fatal-signal snapshots.  The signal path uses only async-signal-safe calls: the
 * report writer formats into static buffers and writes with raw system calls.  The handler that
 * calls it only ever sits in for a default disposition, and the program never sees it
 * (intercept/signal.c). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "intercept/signal.h"
#include "output/report.h"
#include "output/snapshots.h"

static int thread_running, thread_pending;

/* A fatal signal is about to end the process: a last snapshot, never waiting long for locks. */
static void last_snapshot(int sig)
{
	if (ms_is_tracked_process())
		ms_report_signal(sig);
}

static void *snapshot_loop(void *arg)
{
	ms_tls_guard = 1; /* this thread's own work is never counted */
	double interval = ms_cfg.snapshot_interval;
	struct timespec ts = { (time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9) };
	for (;;) {
		while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == EINTR)
			;
		if (!ms_is_tracked_process() || ms_report_finished())
			break;
		ms_report_write("snapshot", 0, 0);
	}
	return arg;
}

static void start_thread(void)
{
	pthread_t t;
	pthread_attr_t attr;
	sigset_t all, old;
	if (__atomic_exchange_n(&thread_running, 1, __ATOMIC_ACQ_REL))
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the program's threads */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
	if (pthread_create(&t, &attr, snapshot_loop, NULL) != 0) {
		ms_warn("cannot start the snapshot thread; MEMSHIM_SNAPSHOT_INTERVAL is ignored");
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void ms_snapshots_boundary(int stage, int end)
{
	if (__atomic_load_n(&thread_pending, __ATOMIC_RELAXED) && ms_tls_guard == 0 &&
	    __atomic_exchange_n(&thread_pending, 0, __ATOMIC_ACQ_REL))
		start_thread();
}

void ms_snapshots_init(void)
{
	ms_signals_cover(last_snapshot);
	if (ms_cfg.snapshot_interval > 0)
		start_thread();
}

void ms_snapshots_fork_child(int tracking)
{
	if (tracking && __atomic_load_n(&thread_running, __ATOMIC_RELAXED)) {
		thread_running = 0;
		thread_pending = 1;
	}
}
