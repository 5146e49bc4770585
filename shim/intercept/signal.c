/* Signal dispositions as the program would see them without us, and our fatal-signal handler.
 * The handler sits in for default dispositions only, and the program never sees it: every query
 * that would find it answers with the default it stands for, every change goes to the kernel as
 * asked (any handler the program installs takes its place for real, so the program's own handlers
 * run exactly as without us), and a change back to the default lets our handler sit in again.
 * Python, for one, installs KeyboardInterrupt only when it finds SIGINT at its default.  The
 * handler itself only calls what the layer above gave ms_signals_cover (output/snapshots.c: a last
 * snapshot), then lets the default action end the process. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/single_threaded.h>
#include "core/ms.h"
#include "core/sys.h"
#include "intercept/hooks.h"
#include "intercept/signal.h"
#include "intercept/spare_stack.h"

/* Not declared by every C library's headers. */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t handler);

/* The real function, or -1 with ENOSYS in the instant another thread is still publishing it. */
#define REAL(fn) (MS_LIKELY(ms_real_##fn != NULL) || (ms_resolve_wait() == 0 && ms_real_##fn != NULL))

/* ---- our handler, sitting in for default dispositions ---------------------------------------- */

/* Every signal whose default action ends the process, but the real-time ones and those a debugger,
 * a seccomp filter or a sampling profiler owns (SIGTRAP, SIGSYS, SIGPROF, SIGVTALRM): the faults,
 * the requests to stop (SIGTERM, SIGINT, SIGHUP, SIGQUIT), a pipeline's reader gone (SIGPIPE), an
 * alarm or a user signal nobody handles, and the resource limits. */
static const int fatal_signals[] = { SIGSEGV, SIGBUS,  SIGABRT, SIGFPE,  SIGILL,  SIGTERM, SIGINT, SIGHUP,
				     SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ };
#define NFATAL (sizeof fatal_signals / sizeof *fatal_signals)
static struct sigaction program_view[NFATAL]; /* what the program would see where our handler sits */
static int covering;                          /* handlers enabled in this process */
static void (*on_fatal)(int sig);

/* SIG's place in fatal_signals, or -1. */
static int slot_of(int sig)
{
	for (size_t i = 0; i < NFATAL; i++)
		if (fatal_signals[i] == sig)
			return (int)i;
	return -1;
}

/* Fatal signals whose default disposition our handler covers. */
static int managed(int sig)
{
	return slot_of(sig) >= 0;
}

/* What the program would see for SIG, a managed signal. */
static struct sigaction *view_of(int sig)
{
	return &program_view[slot_of(sig)];
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

static void on_fatal_signal_on(void *arg)
{
	int sig = *(const int *)arg;
	void (*f)(int) = __atomic_load_n(&on_fatal, __ATOMIC_ACQUIRE);
	if (f)
		f(sig);
	/* the program's disposition was the default: take it back and let it end the process (the
	 * signal stays blocked until we return, so the exit status is the signal's) */
	real_sigaction(sig, view_of(sig), NULL);
	raise(sig);
}

/* On memshim's own stack when on an alternate one: the last file and raise's first call (a lazy
 * symbol lookup saves the vector registers there) do not fit what a crash handler left of 8 KiB. */
static void on_fatal_signal(int sig, siginfo_t *info, void *uctx)
{
	int saved = errno;
	ms_on_spare_stack(on_fatal_signal_on, &sig);
	errno = saved;
}

static int is_ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fatal_signal;
}

static int is_default(const struct sigaction *sa)
{
	return sa->sa_handler == SIG_DFL && !(sa->sa_flags & SA_SIGINFO);
}

static struct sigaction our_action(void)
{
	struct sigaction ours;
	memset(&ours, 0, sizeof ours); /* an empty sa_mask too */
	ours.sa_sigaction = on_fatal_signal;
	ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	return ours;
}

/* Sits in for the default disposition of SIG, keeping what the program would see. */
static void cover(int sig, const struct sigaction *current)
{
	struct sigaction ours = our_action();
	*view_of(sig) = *current;
	real_sigaction(sig, &ours, NULL);
}

/* Ours set and what it replaced read back in one call, put back where that was not the default
 * (an inherited SIG_IGN: nohup's SIGHUP, a shell's SIGPIPE).  SIG must be held back meanwhile. */
static void swap_in(int sig)
{
	struct sigaction ours = our_action(), was;
	if (real_sigaction(sig, &ours, &was) < 0)
		return;
	if (is_default(&was))
		*view_of(sig) = was;
	else
		real_sigaction(sig, &was, NULL);
}

/* After the program changed SIG's disposition: a default one is covered again. */
static void settled(int sig)
{
	struct sigaction now;
	if (!__atomic_load_n(&covering, __ATOMIC_RELAXED) || !managed(sig) || real_sigaction(sig, NULL, &now) < 0)
		return;
	if (is_default(&now))
		cover(sig, &now);
}

/* Alone in the process (a preloaded library's constructor, the usual case): one call a signal, with
 * them all held back meanwhile (17 system calls for the 15, not 30).  With other threads, which a
 * mask of ours does not hold back, each is read first: none ever finds ours over a handler or an
 * ignored signal of the program's (a JVM's SIGSEGV is part of its normal running). */
void ms_signals_cover(void (*fn)(int sig))
{
	__atomic_store_n(&on_fatal, fn, __ATOMIC_RELEASE);
	__atomic_store_n(&covering, 1, __ATOMIC_RELAXED);
	uint64_t all = 0, mask;
	for (size_t i = 0; i < NFATAL; i++)
		all |= MS_SIGBIT(fatal_signals[i]);
	if (!__libc_single_threaded || ms_sys_sigmask(SIG_BLOCK, all, &mask) != 0) {
		for (size_t i = 0; i < NFATAL; i++)
			settled(fatal_signals[i]);
		return;
	}
	for (size_t i = 0; i < NFATAL; i++)
		swap_in(fatal_signals[i]);
	ms_sys_sigmask(SIG_SETMASK, mask, NULL);
}

/* ---- the wrappers ------------------------------------------------------------------------------ */

/* Signals the program set a handler of its own for through these wrappers (bit N-1: signal N). */
static uint64_t handled;

static void note_handler(int sig, sighandler_t h)
{
	if (sig < 1 || sig > 64)
		return;
	if (h == (sighandler_t)2) /* sigset's SIG_HOLD: blocked, the handler kept */
		return;
	if (h == SIG_DFL || h == SIG_IGN)
		__atomic_and_fetch(&handled, ~MS_SIGBIT(sig), __ATOMIC_RELAXED);
	else
		__atomic_or_fetch(&handled, MS_SIGBIT(sig), __ATOMIC_RELAXED);
}

uint64_t ms_signals_handled(void)
{
	return __atomic_load_n(&handled, __ATOMIC_RELAXED);
}

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static int hide(sigaction_fn real, int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction was;
	int rc = real(sig, act, &was);
	if (rc < 0)
		return rc;
	int saved = errno;
	if (is_ours(&was))
		was = *view_of(sig);
	if (act)
		settled(sig);
	if (old)
		*old = was;
	errno = saved;
	return rc;
}

static sighandler_t hide_handler(signal_fn real, int sig, sighandler_t handler)
{
	struct sigaction view = *view_of(sig); /* before the change: it may cover the signal again */
	sighandler_t was = real(sig, handler);
	if (was == SIG_ERR)
		return was;
	int saved = errno;
	if ((void *)was == (void *)on_fatal_signal)
		was = view.sa_handler;
	settled(sig);
	errno = saved;
	return was;
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!REAL(sigaction)) {
		errno = ENOSYS;
		return -1;
	}
	int rc = managed(sig) ? hide(ms_real_sigaction, sig, act, old) : ms_real_sigaction(sig, act, old);
	if (rc == 0 && act)
		note_handler(sig, act->sa_handler);
	return rc;
}

EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!REAL(__sigaction)) {
		errno = ENOSYS;
		return -1;
	}
	int rc = managed(sig) ? hide(ms_real___sigaction, sig, act, old) : ms_real___sigaction(sig, act, old);
	if (rc == 0 && act)
		note_handler(sig, act->sa_handler);
	return rc;
}

/* FIND: the real function, or NULL. */
#define SIGNAL_WRAPPER(name, find)                                                                                     \
	EXPORT sighandler_t name(int sig, sighandler_t handler)                                                        \
	{                                                                                                              \
		signal_fn real = find;                                                                                 \
		if (!real) {                                                                                           \
			errno = ENOSYS;                                                                                \
			return SIG_ERR;                                                                                \
		}                                                                                                      \
		sighandler_t was = managed(sig) ? hide_handler(real, sig, handler) : real(sig, handler);               \
		if (was != SIG_ERR)                                                                                    \
			note_handler(sig, handler);                                                                    \
		return was;                                                                                            \
	}

SIGNAL_WRAPPER(signal, REAL(signal) ? ms_real_signal : NULL)
SIGNAL_WRAPPER(sigset, REAL(sigset) ? ms_real_sigset : NULL)
/* the older names, rarely called: looked up at their first call, not in every process's start */
SIGNAL_WRAPPER(bsd_signal, MS_REAL_LAZY(bsd_signal))
SIGNAL_WRAPPER(ssignal, MS_REAL_LAZY(ssignal))
SIGNAL_WRAPPER(sysv_signal, MS_REAL_LAZY(sysv_signal))
SIGNAL_WRAPPER(__sysv_signal, MS_REAL_LAZY(__sysv_signal))
