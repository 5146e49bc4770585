/* The look at the stack (native/look.c): what an allocation that the quick checks could not decide
 * does.  It walks up from here to the innermost known frame (the quick unwinder of native/cfi.c,
 * libunwind where that gives up), then takes in what it found: known frames gone are popped, target
 * functions' frames pushed with their trampolines (their stages open), the way up to the known
 * frame remembered as a chain or its frames taken in.  A chain through a target's frame is
 * replayed: its frames taken in as the walk that made it did, without walking. */
#ifndef MS_NATIVE_LOOK_H
#define MS_NATIVE_LOOK_H

#include "native/frames.h"

/* Looks at the stack and takes in what is new (nothing from a signal handler or while an exception
 * is in flight).  The caller has raised S->busy and ms_tls_guard. */
void ms_frames_look(struct tstate *s);
/* A hit of chain K through a target's frame: its target frames taken in as the walk that found it
 * did.  0 when this thread may not change its frames now (the slow path decides). */
int ms_frames_replay(struct tstate *s, const struct chain_key *k);

#endif
