/* C++ symbol names in frames, demangled for display with the C++ runtime's own demangler when one
 * can be loaded; the metrics file keeps the raw names (perf and heaptrack do the same). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "base/base.h"
#include "model/sites.h"

typedef char *(*demangle_fn)(const char *mangled, char *out, size_t *len, int *status);

static demangle_fn demangler(void)
{
	static int looked;
	static demangle_fn fn;
	if (!looked) {
		looked = 1;
		fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		void *h = fn ? NULL : dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			fn = (demangle_fn)dlsym(h, "__cxa_demangle");
	}
	return fn;
}

char *mf_frame_display(const char *frame)
{
	if (strncmp(frame, "_Z", 2) != 0)
		return mf_xstrdup(frame);
	size_t len = strcspn(frame, "+ "); /* "symbol+0xoff (object)" */
	demangle_fn fn = demangler();
	char *sym = fn ? mf_xasprintf("%.*s", (int)len, frame) : NULL;
	int status = -1;
	char *plain = sym ? fn(sym, NULL, NULL, &status) : NULL;
	free(sym);
	if (!plain || status != 0) {
		free(plain);
		return mf_xstrdup(frame);
	}
	char *out = mf_xasprintf("%s%s", plain, frame + len);
	free(plain);
	return out;
}
