/* Frames left without returning, as native stages hear of them from intercept/jump.c's wrappers:
 * frames a longjmp jumps over never return, so their stages close before the jump; while a C++
 * exception is in flight no return address changes (native/leave.c says why).  Exceptions and
 * forced unwinds that pass a trampoline are seen by the trampolines' personality instead. */
#include "core/ms.h"
#include "intercept/hooks.h"
#include "native/leave.h"
#include "native/native.h"

void ms_jmp_init(void)
{
	ms_jump_resolve(); /* a longjmp out of a signal handler must not look it up */
	__atomic_store_n(&ms_on_unwind_begin, ms_native_unwind_begin, __ATOMIC_RELEASE);
	__atomic_store_n(&ms_on_unwind_end, ms_native_unwind_end, __ATOMIC_RELEASE);
	__atomic_store_n(&ms_before_jump, ms_native_discard_below, __ATOMIC_RELEASE);
}
