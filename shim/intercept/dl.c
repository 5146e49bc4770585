/* dlclose: counted, so the next look at the stack (native stages) re-reads the set of loaded
 * objects (an object loaded later at the same addresses must not be taken for the old one).  New
 * objects need no hook: their code is met as return addresses never seen before.  dlclose does not
 * depend on its caller (unlike dlopen, whose RUNPATH and $ORIGIN come from the calling object), so
 * a plain wrapper changes nothing.  The shim's own dlclose calls go to the real one, uncounted.
 * (The dlsym wrapper is cuda/wrappers.c's: it exists for the driver functions alone.) */
#include <dlfcn.h>
#include "core/ms.h"
#include "intercept/hooks.h"

unsigned ms_dlclose_calls;

EXPORT int dlclose(void *handle)
{
	int (*real)(void *) = MS_REAL_LAZY(dlclose);
	int rc = real ? real(handle) : -1;
	__atomic_add_fetch(&ms_dlclose_calls, 1, __ATOMIC_RELEASE);
	return rc;
}
