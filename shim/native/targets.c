/* The native targets of this run (native/native.h): the list native/detect.c read from
 * MEMSHIM_STAGES, which resolution (native/syms.c) and binding through the GOT (native/plt.c) both
 * read, and the warning either gives when two stages' targets name one function.  Below both, so
 * neither calls the other. */
#include "core/config.h"
#include "core/ms.h"
#include "native/native.h"

#define MAX_SHARED_WARNINGS 8

struct ms_target *ms_native_targets;
int ms_native_ntargets;
struct ms_target_filter ms_native_filter MS_LARGE;

static struct {
	uintptr_t warned[MAX_SHARED_WARNINGS]; /* functions warned about */
	int nwarned;
} targets_st;

void ms_native_warn_shared(const char *sym, uintptr_t addr, int first, int other)
{
	const struct ms_target *a = &ms_native_targets[first], *b = &ms_native_targets[other];
	int n = __atomic_load_n(&targets_st.nwarned, __ATOMIC_RELAXED);
	for (int i = 0; i < n && i < MAX_SHARED_WARNINGS; i++)
		if (targets_st.warned[i] == addr)
			return; /* the same function again (.symtab and .dynsym, another caller's slot) */
	int slot = __atomic_fetch_add(&targets_st.nwarned, 1, __ATOMIC_RELAXED); /* the GOT's binder may run beside */
	if (slot >= MAX_SHARED_WARNINGS)
		return;
	targets_st.warned[slot] = addr;
	ms_warn("native stages %s ('%s') and %s ('%s') both name %s: its calls count for %s only (the first "
		"in MEMSHIM_STAGES)%s",
		ms_cfg.spec.stage[a->spec_stage].name, a->text, ms_cfg.spec.stage[b->spec_stage].name, b->text, sym,
		ms_cfg.spec.stage[a->spec_stage].name,
		slot == MAX_SHARED_WARNINGS - 1 ? "; further such functions are not reported" : "");
}
