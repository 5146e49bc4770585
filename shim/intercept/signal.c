/* Signal dispositions as the program would see them without us.  Our fatal-signal handler sits in
 * for default dispositions only (output/snapshots.c); every query that would find it answers with the
 * default it stands for, every change goes to the kernel as asked, and a change back to the
 * default lets our handler sit in again.  Python, for one, installs KeyboardInterrupt only when it
 * finds SIGINT at its default. */
#include <errno.h>
#include <signal.h>
#include "intercept/hooks.h"
#include "core/ms.h"
#include "output/snapshots.h"

#define EXPORT __attribute__((visibility("default")))

/* Not declared by every C library's headers. */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t handler);

/* The real function, or -1 with ENOSYS in the instant another thread is still publishing it. */
#define REAL(fn) (MS_LIKELY(ms_real_##fn != NULL) || (ms_resolve_wait() == 0 && ms_real_##fn != NULL))

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

static int hide(sigaction_fn real, int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction was;
	int rc = real(sig, act, &was);
	if (rc < 0)
		return rc;
	int saved = errno;
	if (ms_signal_is_ours(&was))
		ms_signal_view(sig, &was);
	if (act)
		ms_signal_settled(sig);
	if (old)
		*old = was;
	errno = saved;
	return rc;
}

static sighandler_t hide_handler(signal_fn real, int sig, sighandler_t handler)
{
	struct sigaction view;
	ms_signal_view(sig, &view); /* before the change: it may cover the signal again */
	sighandler_t was = real(sig, handler);
	if (was == SIG_ERR)
		return was;
	int saved = errno;
	if ((void *)was == (void *)ms_signal_handler())
		was = view.sa_handler;
	ms_signal_settled(sig);
	errno = saved;
	return was;
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!REAL(sigaction)) {
		errno = ENOSYS;
		return -1;
	}
	if (!ms_signal_managed(sig))
		return ms_real_sigaction(sig, act, old);
	return hide(ms_real_sigaction, sig, act, old);
}

EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!REAL(__sigaction)) {
		errno = ENOSYS;
		return -1;
	}
	if (!ms_signal_managed(sig))
		return ms_real___sigaction(sig, act, old);
	return hide(ms_real___sigaction, sig, act, old);
}

#define SIGNAL_WRAPPER(name)                                          \
	EXPORT sighandler_t name(int sig, sighandler_t handler)       \
	{                                                             \
		if (!REAL(name)) {                                    \
			errno = ENOSYS;                               \
			return SIG_ERR;                               \
		}                                                     \
		if (!ms_signal_managed(sig))                          \
			return ms_real_##name(sig, handler);          \
		return hide_handler(ms_real_##name, sig, handler);    \
	}

SIGNAL_WRAPPER(signal)
SIGNAL_WRAPPER(bsd_signal)
SIGNAL_WRAPPER(ssignal)
SIGNAL_WRAPPER(sysv_signal)
SIGNAL_WRAPPER(__sysv_signal)
SIGNAL_WRAPPER(sigset)
