/* The sizes of the shim's own frames between an allocation hook and the program, by return
 * address: learnt by the walks (native/look.c), read by the check before a count (native/check.c)
 * to find the frame that called into the shim without a walk.  Lock-free: a key is published
 * together with its value. */
#ifndef MS_NATIVE_SELFSIZE_H
#define MS_NATIVE_SELFSIZE_H

#include <stdint.h>
#include "native/native.h"

#define NOFF 128 /* shim-internal return addresses with known frame sizes */

struct ms_self_sizes {
	uintptr_t ip[NOFF];  /* return address (1 while its value is being written) */
	uintptr_t val[NOFF]; /* the size of the frame returning there */
};
/* Hidden where the compiler sees it (as it was while the table was one file's static): one
 * RIP-relative load in the check's path, not one through the GOT. */
extern struct ms_self_sizes ms_self_sizes __attribute__((visibility("hidden")));

static inline uintptr_t off_lookup(uintptr_t ip)
{
	unsigned h = (unsigned)(ip >> 2) % NOFF;
	for (int k = 0; k < 8; k++, h = (h + 1) % NOFF) {
		uintptr_t v = __atomic_load_n(&ms_self_sizes.ip[h], __ATOMIC_ACQUIRE);
		if (v == ip)
			return __atomic_load_n(&ms_self_sizes.val[h], __ATOMIC_RELAXED);
		if (!v)
			return 0;
	}
	return 0;
}

static inline int in_self(uintptr_t ip)
{
	return ip >= ms_self_lo && ip < ms_self_hi;
}

#endif
