/* When the stack check runs.  A look at the stack before every allocation costs, so the check
 * (ms_native_check) is intercept's ms_before_count only while some target function is loaded (its
 * ranges are published).  Targets that may appear later come with a dlopen: the dlopen wrapper
 * tail-calls the real function (so nothing of ours runs after it), and from its call on, every
 * counted allocation first re-reads the set of loaded objects (ms_syms_refresh: cheap unless
 * objects were added) until the call is seen to have returned: on its thread, an allocation from
 * a frame at or above its return-address slot, or with that slot no longer holding its return
 * address.  dlclose re-reads too and turns the check off when no target is left.  Objects loaded
 * without the wrapper (the C library's own NSS or iconv modules) are found at the next dlopen or
 * dlclose, or by the check itself while it is on (a return address never seen makes it re-read). */
#include <errno.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "native/check.h"
#include "native/native.h"

#define MAX_NESTED 4 /* dlopen calls under way on one thread (constructors that dlopen); static TLS is scarce */

struct call {
	uintptr_t slot, ra; /* the wrapper's return-address slot and what it held */
};

static int calls_open; /* dlopen calls, all threads, not yet seen to have returned */
static __thread struct {
	int n;
	struct call c[MAX_NESTED];
} dl MS_TLS;

static void while_dlopen(uintptr_t *slot);

static void (*wanted(void))(uintptr_t *)
{
	if (ms_syms_count() > 0)
		return ms_native_check;
	return __atomic_load_n(&calls_open, __ATOMIC_ACQUIRE) > 0 ? while_dlopen : NULL;
}

/* Sets the hook the state asks for, and looks again after writing: of racing threads, the last
 * writer leaves it matching the newest state. */
static void rearm(void)
{
	void (*f)(uintptr_t *);
	do {
		f = wanted();
		ms_set_before_count(f);
	} while (wanted() != f);
}

/* This thread's dlopen calls that have returned, innermost first (SLOT: an allocation's). */
static int returned(const uintptr_t *slot)
{
	int n = 0;
	while (dl.n > 0) {
		const struct call *c = &dl.c[dl.n - 1];
		if ((uintptr_t)slot < c->slot && *(volatile uintptr_t *)c->slot == c->ra)
			break; /* still inside: the slot above us holds the dlopen's return address */
		dl.n--;
		n++;
	}
	return n;
}

/* The hook while a dlopen may be under way and no target is loaded yet. */
static void while_dlopen(uintptr_t *slot)
{
	int saved = errno;
	ms_tls_guard++;
	int ended = returned(slot);
	ms_syms_refresh(); /* before a call counts as ended: every object it loaded is listed by now */
	if (ended) {
		__atomic_sub_fetch(&calls_open, ended, __ATOMIC_ACQ_REL);
		ms_plt_bind(); /* the objects it loaded are relocated now: their calls are bound */
	}
	rearm();
	ms_tls_guard--;
	errno = saved;
	if (__atomic_load_n(&ms_before_count, __ATOMIC_ACQUIRE) == ms_native_check && !ms_tls_before_count_idle)
		ms_native_check(slot); /* a target was just found: this allocation may be inside it */
}

static void on_dlopen(uintptr_t *slot)
{
	int saved = errno;
	ms_tls_guard++;
	ms_plt_bind(); /* what an earlier dlopen loaded, if nothing allocated since it returned */
	ms_tls_guard--;
	errno = saved;
	if (__atomic_load_n(&ms_before_count, __ATOMIC_ACQUIRE) == ms_native_check || dl.n == MAX_NESTED)
		return; /* the check re-reads by itself at the first return address it never saw */
	dl.c[dl.n] = (struct call){ (uintptr_t)slot, *slot };
	dl.n++;
	__atomic_add_fetch(&calls_open, 1, __ATOMIC_ACQ_REL);
	rearm();
}

static void after_dlclose(void)
{
	int saved = errno;
	ms_tls_guard++;
	ms_syms_refresh();
	ms_plt_forget_unloaded();
	rearm();
	ms_tls_guard--;
	errno = saved;
}

void ms_arm_init(void)
{
	__atomic_store_n(&ms_on_dlopen, on_dlopen, __ATOMIC_RELEASE);
	__atomic_store_n(&ms_after_dlclose, after_dlclose, __ATOMIC_RELEASE);
	rearm();
}

void ms_arm_fork_child(void)
{
	__atomic_store_n(&calls_open, dl.n, __ATOMIC_RELEASE);
	rearm();
}
