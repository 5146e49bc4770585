/* The shim's short internal locks.  A signal handler may run on a thread at any instant, including
 * in the middle of taking or releasing a lock, and may re-enter the shim: each lock therefore has a
 * per-thread "mine" flag that is raised before the lock word is taken and lowered only after it is
 * released, so a handler on the same thread always sees the flag and never spins on its own lock. */
#ifndef MS_SPIN_H
#define MS_SPIN_H

#include "core/sys.h"

struct ms_spin {
	int word;
};

/* Takes a lock found held: out of line, so a caller that seldom waits keeps no registers for it. */
static __attribute__((noinline, cold, unused)) void ms_spin_wait(struct ms_spin *l)
{
	for (int spins = 0;;) {
		/* wait reading, not exchanging: the holder keeps the line and finishes sooner */
		while (__atomic_load_n(&l->word, __ATOMIC_RELAXED)) {
			if (++spins < 64)
				__builtin_ia32_pause();
			else
				ms_sys_sched_yield(); /* the holder may be inside a system call: let it run */
		}
		if (!__atomic_exchange_n(&l->word, 1, __ATOMIC_ACQUIRE))
			return;
	}
}

/* MINE is the caller's initial-exec thread-local flag for this lock: 1 while taking it, 2 once held
 * (a handler passes through on either; fork's tells them apart). */
static inline void ms_spin_lock(struct ms_spin *l, int *mine)
{
	*mine = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* the flag is visible to a handler before the take */
	if (__builtin_expect(__atomic_exchange_n(&l->word, 1, __ATOMIC_ACQUIRE) != 0, 0))
		ms_spin_wait(l);
	*mine = 2;
}

/* Takes the lock within about MAX_SPINS tries; 0 on success, -1 (flag lowered) otherwise. */
static inline int ms_spin_trylock(struct ms_spin *l, int *mine, long max_spins)
{
	*mine = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	for (long spins = 0; spins < max_spins; spins++) {
		if (!__atomic_exchange_n(&l->word, 1, __ATOMIC_ACQUIRE)) {
			*mine = 2;
			return 0;
		}
		__builtin_ia32_pause();
	}
	*mine = 0;
	return -1;
}

static inline void ms_spin_unlock(struct ms_spin *l, int *mine)
{
	__atomic_store_n(&l->word, 0, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* released before a handler may see the flag down */
	*mine = 0;
}

/* fork_prepare's take of L, the flag's value before it into *WAS: 0 (nothing taken) when this
 * thread holds it already, in the frame a signal handler that forked interrupted (spinning would
 * wait for ever): that frame goes on holding it, in the parent and in the child.  A frame that was
 * only taking it waits as before (another thread holds it): fork's handler takes it. */
static inline int ms_spin_lock_for_fork(struct ms_spin *l, int *mine, int *was)
{
	*was = *mine;
	if (*was == 2)
		return 0;
	ms_spin_lock(l, mine);
	return 1;
}

/* fork_parent's release of what ms_spin_lock_for_fork took (TOOK), the flag back to WAS: the
 * interrupted frame, if it was taking the lock, goes on taking it. */
static inline void ms_spin_unlock_after_fork(struct ms_spin *l, int *mine, int took, int was)
{
	if (!took)
		return;
	ms_spin_unlock(l, mine);
	*mine = was;
}

/* A forked child: only the forking thread survives, and it holds no lock any more. */
static inline void ms_spin_reset(struct ms_spin *l, int *mine)
{
	*mine = 0;
	__atomic_store_n(&l->word, 0, __ATOMIC_RELEASE);
}

#endif
