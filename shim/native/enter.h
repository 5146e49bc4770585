/* Entering a stage at the call itself (native/enter.c): a call of a target bound through the GOT
 * (native/plt.c) begins; the frame whose return address is in SLOT gets a trampoline and opens
 * stage SPEC (an index into ms_cfg.spec), as a target's frame found on the stack does. */
#ifndef MS_NATIVE_ENTER_H
#define MS_NATIVE_ENTER_H

#include <stdint.h>

void ms_native_enter_call(int spec, uintptr_t *slot);

#endif
