/* dlclose: counted, so the next look at the stack re-reads the set of loaded objects (an object
 * loaded later at the same addresses must not be taken for the old one).  New objects need no
 * hook: their code is met as return addresses never seen before.  dlclose does not depend on its
 * caller (unlike dlopen, whose RUNPATH and $ORIGIN come from the calling object), so a plain
 * wrapper changes nothing. */
#include <dlfcn.h>
#include "core/ms.h"
#include "native/native.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*dlclose_fn)(void *);

static dlclose_fn real_dlclose;

EXPORT int dlclose(void *handle)
{
	dlclose_fn f = __atomic_load_n(&real_dlclose, __ATOMIC_ACQUIRE);
	if (!f) {
		ms_tls_guard++;
		f = (dlclose_fn)ms_real_dlsym(RTLD_NEXT, "dlclose");
		if (!f) /* still resolving: our dlsym is a tail call, so "next" is still after us */
			f = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
		ms_tls_guard--;
		__atomic_store_n(&real_dlclose, f, __ATOMIC_RELEASE);
	}
	int rc = f ? f(handle) : -1;
	__atomic_add_fetch(&ms_syms_unloads, 1, __ATOMIC_RELEASE);
	return rc;
}
