/* Fixed-size lock-free tables for the CUDA hooks: device/host pointer, VMM handle or mapping ->
 * (size, device, kind, references).  No allocation and no locks, so hooks may use them from any
 * thread, in a signal handler or in a forked child. */
#ifndef MS_CUDA_TABLE_H
#define MS_CUDA_TABLE_H

#include <stdint.h>
#include "core/ms.h"

enum ms_ckind {
	MS_CK_DEVICE = 1,     /* cuMemAlloc*, async: device memory */
	MS_CK_MANAGED = 2,    /* cuMemAllocManaged */
	MS_CK_HOST = 4,       /* cuMemAllocHost / cuMemHostAlloc */
	MS_CK_REGISTERED = 8, /* cuMemHostRegister */
	MS_CK_VMM = 16,       /* cuMemCreate physical allocation (key: handle) */
	MS_CK_MAPPING = 32    /* cuMemMap of a tracked handle (key: address, aux: handle) */
};

struct ms_centry {
	uint64_t key;
	int64_t size;
	uint64_t aux;
	int16_t device;
	uint16_t kind;
	int32_t refs;
};

struct ms_table {
	struct ms_centry *slot;
	uint32_t bits;
	uint32_t probe_max;
	uint64_t full; /* inserts refused because the probe limit was reached */
};

/* Declares a table of 2^BITS slots in static storage (zero pages until touched). */
#define MS_TABLE_DEFINE(var, nbits)                                                                                    \
	static struct ms_centry var##_slots[1u << (nbits)] MS_LARGE;                                                   \
	static struct ms_table var = { var##_slots, (nbits), 1024, 0 }

/* Inserts E (E->key above 3: 0-3 are reserved; not already present).  Returns 0, or -1 when the table is full. */
int ms_table_insert(struct ms_table *t, const struct ms_centry *e);

/* Removes KEY when its kind is in KINDS, copying it to OUT.  Returns 0, or -1 when absent. */
int ms_table_take(struct ms_table *t, uint64_t key, unsigned kinds, struct ms_centry *out);

/* The live slot of KEY (any kind), or NULL; only refs may be changed through it (atomically). */
struct ms_centry *ms_table_find(struct ms_table *t, uint64_t key);

/* Number of live entries (a scan; for tests and reports). */
uint64_t ms_table_count(const struct ms_table *t);

/* Calls FN on every live entry (a racy scan; for reports). */
void ms_table_each(const struct ms_table *t, void (*fn)(const struct ms_centry *e, void *arg), void *arg);

#endif
