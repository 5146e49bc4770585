/* The version memshim-format and the wrapper report: the library's own, from its public header. */
#include "base/base.h"
#include "../../shim/memshim.h"

#define MF_STR2(x) #x
#define MF_STR(x) MF_STR2(x)

const char *mf_version(void)
{
	return MF_STR(MEMSHIM_VERSION_MAJOR) "." MF_STR(MEMSHIM_VERSION_MINOR);
}
