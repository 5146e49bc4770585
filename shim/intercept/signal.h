/* Our fatal-signal handler, invisible to the program (intercept/signal.c). */
#ifndef MS_SIGNAL_H
#define MS_SIGNAL_H

#include <stdint.h>

/* Sits in for the default disposition of every fatal signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE,
 * SIGILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ),
 * now and whenever the program sets one back to the default: the handler calls ON_FATAL
 * (async-signal-safe work only), then the default action ends the process with the signal's status. */
void ms_signals_cover(void (*on_fatal)(int sig));

/* The signals the program set a handler of its own for through sigaction or signal (bit N-1:
 * signal N; not handlers set by raw system calls).  Ours, sitting in for default dispositions, are
 * not among them. */
uint64_t ms_signals_handled(void);

#endif
