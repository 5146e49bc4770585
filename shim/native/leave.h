/* Leaving (native/leave.c): how a known frame's call ends without a look at the stack.  Its
 * trampoline fires when it returns; the C++ runtime's unwinder calls the trampolines' personality
 * when an exception or a forced unwind passes one; intercept's longjmp wrappers say which frames
 * are jumped over (ms_before_jump) and when an exception is in flight (ms_on_unwind_begin/end),
 * both set by native/jmp.c; a thread's exit gives back all its trampolines.  Also the start of the
 * known frames: the trampolines told whom to call, the per-thread state's key made. */
#ifndef MS_NATIVE_LEAVE_H
#define MS_NATIVE_LEAVE_H

#include <stdint.h>

/* Frames at addresses below SP are being discarded (longjmp): close their stages. */
void ms_native_discard_below(uintptr_t sp);
/* An exception starts unwinding this thread / was caught. */
void ms_native_unwind_begin(void);
void ms_native_unwind_end(void);
/* At start, before any trampoline is used; 0 when usable. */
int ms_frames_init(void);

#endif
