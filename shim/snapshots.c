/* Periodic and fatal-signal snapshots.  The signal path uses only async-signal-safe calls: the
 * report writer formats into static buffers and writes with raw system calls. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include "config.h"
#include "lifecycle.h"
#include "ms.h"
#include "report.h"
#include "snapshots.h"
#include "stages.h"

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT };
static struct sigaction previous[65];
static int thread_running, thread_pending;

/* Calls (or re-raises with the default action) whatever handled SIG before us. */
static void chain(int sig, siginfo_t *info, void *uctx)
{
	struct sigaction *p = &previous[sig];
	if ((p->sa_flags & SA_SIGINFO) && p->sa_sigaction) {
		p->sa_sigaction(sig, info, uctx);
	} else if (p->sa_handler == SIG_IGN) {
		return;
	} else if (p->sa_handler != SIG_DFL) {
		p->sa_handler(sig);
	} else {
		struct sigaction dfl;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
		raise(sig); /* blocked until we return: then the default action ends the process */
	}
}

static void on_fatal_signal(int sig, siginfo_t *info, void *uctx)
{
	int saved = errno;
	if (ms_is_tracked_process())
		ms_report_signal(sig);
	chain(sig, info, uctx);
	errno = saved;
}

static void install_handlers(void)
{
	for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++) {
		int sig = fatal_signals[i];
		struct sigaction ours, old;
		if (sigaction(sig, NULL, &old) < 0)
			continue;
		int polite = sig == SIGTERM || sig == SIGINT;
		/* the program's own handler for a polite signal stays; ignored signals stay ignored */
		if (old.sa_handler == SIG_IGN || (polite && old.sa_handler != SIG_DFL))
			continue;
		memset(&ours, 0, sizeof ours);
		ours.sa_sigaction = on_fatal_signal;
		ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
		sigemptyset(&ours.sa_mask);
		previous[sig] = old;
		sigaction(sig, &ours, NULL);
	}
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

void ms_snapshots_at_boundary(void)
{
	if (__atomic_load_n(&thread_pending, __ATOMIC_RELAXED) && ms_tls_guard == 0 &&
	    __atomic_exchange_n(&thread_pending, 0, __ATOMIC_ACQ_REL))
		start_thread();
}

void ms_snapshots_start(void)
{
	install_handlers();
	if (ms_cfg.snapshot_interval > 0)
		start_thread();
}

void ms_snapshots_after_fork_child(void)
{
	if (__atomic_load_n(&thread_running, __ATOMIC_RELAXED)) {
		thread_running = 0;
		thread_pending = 1;
	}
}
