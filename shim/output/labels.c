/* Labelled calls (see labels.h).  A closing call claims a slot with one atomic add and publishes
 * it by storing the table's generation last, so readers (the report, from a handler too) take no
 * lock; a forked child starts a new generation. */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/ms.h"
#include "output/labels.h"

/* Mapped at the first labelled call: 7 MiB of address space only a program that labels pays for
 * (a tight `ulimit -v` counts a static table whether or not it is touched). */
static struct ms_labelled_call *table;
static uint32_t next, generation = 1;
static uint64_t dropped;
static char pending[MS_MAX_STAGES][MS_LABEL_MAX] MS_LARGE; /* the label of each stage's open call */
static int has_pending[MS_MAX_STAGES];

const struct ms_labelled_call *ms_labels_table(uint32_t *n, uint64_t *lost, uint32_t *gen)
{
	uint32_t used = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
	*n = used < MS_LABELLED_MAX ? used : MS_LABELLED_MAX;
	*lost = __atomic_load_n(&dropped, __ATOMIC_RELAXED);
	*gen = __atomic_load_n(&generation, __ATOMIC_RELAXED);
	struct ms_labelled_call *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
	if (!t)
		*n = 0;
	return t;
}

/* The table, mapped by the first caller (a raw mapping: no lock, safe in a handler); NULL when the
 * mapping failed. */
static struct ms_labelled_call *table_mapped(void)
{
	struct ms_labelled_call *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE), *none = NULL;
	if (t)
		return t;
	int saved = errno;
	t = ms_raw_map(MS_LABELLED_MAX * sizeof *t);
	if (t && !__atomic_compare_exchange_n(&table, &none, t, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		syscall(SYS_munmap, t, MS_LABELLED_MAX * sizeof *t);
		t = none;
	}
	errno = saved;
	return t;
}

void ms_labels_open(int id, const char *label)
{
	if (id < 0 || id >= MS_MAX_STAGES || !label)
		return;
	ms_strlcpy(pending[id], label, sizeof pending[id]);
	__atomic_store_n(&has_pending[id], 1, __ATOMIC_RELEASE);
}

void ms_labels_close(int id, const struct ms_span *sp, uint64_t call)
{
	if (id < 0 || id >= MS_MAX_STAGES || !__atomic_exchange_n(&has_pending[id], 0, __ATOMIC_ACQ_REL))
		return;
	struct ms_labelled_call *t = table_mapped();
	if (!t) { /* no memory for the table now: this call is lost, a later one maps it again */
		__atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	uint32_t slot = __atomic_fetch_add(&next, 1, __ATOMIC_ACQ_REL);
	if (slot >= MS_LABELLED_MAX) {
		__atomic_store_n(&next, MS_LABELLED_MAX, __ATOMIC_RELAXED); /* never wraps */
		__atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	struct ms_labelled_call *c = &t[slot];
	__atomic_store_n(&c->ready, 0, __ATOMIC_RELEASE);
	c->stage = id;
	c->call = call;
	c->span = *sp;
	memcpy(c->label, pending[id], sizeof c->label);
	__atomic_store_n(&c->ready, __atomic_load_n(&generation, __ATOMIC_RELAXED), __ATOMIC_RELEASE);
}

void ms_labels_fork_child(int tracking)
{
	if (!tracking)
		return;
	__atomic_add_fetch(&generation, 1, __ATOMIC_RELAXED);
	next = 0;
	dropped = 0;
}
