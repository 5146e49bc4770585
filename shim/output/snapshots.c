/* Periodic and fatal-signal snapshots.  The signal path uses only async-signal-safe calls: the
 * report writer formats into static buffers and writes with raw system calls.  Our handler only
 * ever sits in for a default disposition, and the program never sees it: the signal wrappers
 * (intercept/signal.c) answer with the default it replaced, and any handler the program installs
 * takes its place for real, so the program's own handlers run exactly as without us. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include "core/config.h"
#include "intercept/hooks.h"
#include "lifecycle.h"
#include "core/ms.h"
#include "output/report.h"
#include "output/snapshots.h"
#include "core/stages.h"

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT };
static struct sigaction program_view[65]; /* what the program would see where our handler sits */
static int covering;                        /* handlers enabled in this process */
static int thread_running, thread_pending;

int ms_signal_managed(int sig)
{
	for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++)
		if (fatal_signals[i] == sig)
			return 1;
	return 0;
}

/* The C library's sigaction, never our public wrapper (which would cover the signal again). */
static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!ms_real_sigaction && ms_resolve_wait() < 0) {
		errno = EAGAIN;
		return -1;
	}
	return ms_real_sigaction(sig, act, old);
}

static void on_fatal_signal(int sig, siginfo_t *info, void *uctx)
{
	int saved = errno;
	if (ms_is_tracked_process())
		ms_report_signal(sig);
	/* the program's disposition was the default: take it back and let it end the process (the
	 * signal stays blocked until we return, so the exit status is the signal's) */
	real_sigaction(sig, &program_view[sig], NULL);
	raise(sig);
	errno = saved;
}

int ms_signal_is_ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fatal_signal;
}

void (*ms_signal_handler(void))(int, siginfo_t *, void *)
{
	return on_fatal_signal;
}

void ms_signal_view(int sig, struct sigaction *out)
{
	*out = program_view[sig];
}

/* Sits in for the default disposition of SIG, keeping what the program would see. */
static void cover(int sig, const struct sigaction *current)
{
	struct sigaction ours;
	memset(&ours, 0, sizeof ours);
	ours.sa_sigaction = on_fatal_signal;
	ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&ours.sa_mask);
	program_view[sig] = *current;
	real_sigaction(sig, &ours, NULL);
}

void ms_signal_settled(int sig)
{
	struct sigaction now;
	if (!__atomic_load_n(&covering, __ATOMIC_RELAXED) || !ms_signal_managed(sig) ||
	    real_sigaction(sig, NULL, &now) < 0)
		return;
	if (now.sa_handler == SIG_DFL && !(now.sa_flags & SA_SIGINFO))
		cover(sig, &now);
}

static void install_handlers(void)
{
	__atomic_store_n(&covering, 1, __ATOMIC_RELAXED);
	for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++)
		ms_signal_settled(fatal_signals[i]);
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
