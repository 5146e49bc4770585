/* The check before a count (native/check.c): set as intercept's ms_before_count while a target is
 * loaded (native/arm.c), it looks at the stack before an allocation or free is counted, opening
 * the stages of target functions found there.  SLOT is the wrapper's return-address slot (see
 * intercept/hooks.h).  Not to be called while ms_tls_before_count_idle is set (every stage open on
 * the thread), as the wrappers do. */
#ifndef MS_NATIVE_CHECK_H
#define MS_NATIVE_CHECK_H

#include <stdint.h>

void ms_native_check(uintptr_t *slot);

#endif
