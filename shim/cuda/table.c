/* Lock-free open addressing with linear probing.  Key words hold EMPTY, TOMB (removed), BUSY (an
 * entry being written or removed), FROZEN (a tombstone being turned back into EMPTY) or a live key.
 * Invariant: every slot between a live key's home and its slot is non-EMPTY, so lookups may stop at
 * EMPTY.  A TOMB turns back into EMPTY only when the slot after it is EMPTY (no chain can run
 * through it), which keeps long-running programs from filling the table with tombstones.  That is
 * two slots, so it is a handshake: the cleaner freezes the tombstone, looks at the next slot and
 * only then empties it (compare-and-swap from FROZEN); an inserter claims its slot, then looks at
 * its chain and thaws any frozen tombstone there back to TOMB.  With every step sequentially
 * consistent, at least one of them sees the other (without the freeze, a key claimed next to the
 * tombstone between the cleaner's look and its write was cut off from its home and lost). */
#include "cuda/table.h"

#define KEY_EMPTY 0u
#define KEY_TOMB 1u
#define KEY_BUSY 2u
#define KEY_FROZEN 3u
#define KEY_LAST_RESERVED KEY_FROZEN
#define INSERT_RETRIES 64

static inline uint32_t mask_of(const struct ms_table *t)
{
	return (1u << t->bits) - 1u;
}

static inline uint32_t home_of(const struct ms_table *t, uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - t->bits));
}

static inline uint64_t key_load(const struct ms_centry *s)
{
	return __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
}

/* The handshake's loads (see the top): sequentially consistent. */
static inline uint64_t key_load_sc(const struct ms_centry *s)
{
	return __atomic_load_n(&s->key, __ATOMIC_SEQ_CST);
}

static inline int key_cas(struct ms_centry *s, uint64_t *expect, uint64_t want)
{
	return __atomic_compare_exchange_n(&s->key, expect, want, 0, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE);
}

/* Turns trailing tombstones before an EMPTY slot back into EMPTY, walking backwards from IDX. */
static void tomb_cleanup(struct ms_table *t, uint32_t idx)
{
	uint32_t mask = mask_of(t);
	for (uint32_t n = 0; n < t->probe_max; n++) {
		struct ms_centry *next = &t->slot[(idx + 1) & mask];
		if (key_load(next) != KEY_EMPTY)
			return;
		uint64_t k = KEY_TOMB;
		if (!key_cas(&t->slot[idx], &k, KEY_FROZEN))
			return;
		k = KEY_FROZEN;
		if (key_load_sc(next) != KEY_EMPTY) { /* claimed meanwhile: its chain may run through */
			key_cas(&t->slot[idx], &k, KEY_TOMB);
			return;
		}
		if (!key_cas(&t->slot[idx], &k, KEY_EMPTY))
			return; /* an inserter thawed it: its chain runs through */
		idx = (idx - 1) & mask;
		if (key_load(&t->slot[idx]) != KEY_TOMB)
			return;
	}
}

/* Non-zero when no slot from HOME up to (not including) HOME + DIST is EMPTY.  Scans downwards:
 * a slot can only become EMPTY while the one after it is EMPTY, so what is seen stays true.  A
 * frozen tombstone on the way is thawed back to TOMB (the cleaner then leaves it). */
static int chain_intact(struct ms_table *t, uint32_t home, uint32_t dist)
{
	uint32_t mask = mask_of(t);
	while (dist-- > 0) {
		struct ms_centry *s = &t->slot[(home + dist) & mask];
		uint64_t k = key_load_sc(s);
		if (k == KEY_FROZEN && !key_cas(s, &k, KEY_TOMB) && k == KEY_EMPTY)
			return 0; /* the cleaner finished first */
		if (k == KEY_EMPTY)
			return 0;
	}
	return 1;
}

static void fill(struct ms_centry *s, const struct ms_centry *e)
{
	s->size = e->size;
	s->aux = e->aux;
	s->device = e->device;
	s->kind = e->kind;
	__atomic_store_n(&s->refs, e->refs, __ATOMIC_RELAXED);
}

/* One insertion attempt: 1 done, 0 retry (the chain changed under us), -1 full. */
static int try_insert(struct ms_table *t, const struct ms_centry *e)
{
	uint32_t mask = mask_of(t), home = home_of(t, e->key);
	for (uint32_t i = 0; i < t->probe_max; i++) {
		struct ms_centry *s = &t->slot[(home + i) & mask];
		uint64_t k = key_load(s);
		while (k == KEY_EMPTY || k == KEY_TOMB) {
			if (!key_cas(s, &k, KEY_BUSY))
				continue; /* K now holds what won; look at the same slot again */
			fill(s, e);
			if (!chain_intact(t, home, i)) {
				__atomic_store_n(&s->key, KEY_TOMB, __ATOMIC_RELEASE);
				tomb_cleanup(t, (home + i) & mask);
				return 0;
			}
			__atomic_store_n(&s->key, e->key, __ATOMIC_RELEASE);
			return 1;
		}
	}
	return -1;
}

int ms_table_insert(struct ms_table *t, const struct ms_centry *e)
{
	if (e->key <= KEY_LAST_RESERVED)
		return -1;
	for (int attempt = 0; attempt < INSERT_RETRIES; attempt++) {
		int r = try_insert(t, e);
		if (r > 0)
			return 0;
		if (r < 0)
			break;
	}
	__atomic_add_fetch(&t->full, 1, __ATOMIC_RELAXED);
	return -1;
}

static struct ms_centry *find_slot(struct ms_table *t, uint64_t key, uint32_t *idx)
{
	uint32_t mask = mask_of(t), home = home_of(t, key);
	if (key <= KEY_LAST_RESERVED)
		return 0;
	for (uint32_t i = 0; i < t->probe_max; i++) {
		uint32_t at = (home + i) & mask;
		uint64_t k = key_load(&t->slot[at]);
		if (k == key) {
			*idx = at;
			return &t->slot[at];
		}
		if (k == KEY_EMPTY)
			return 0;
	}
	return 0;
}

struct ms_centry *ms_table_find(struct ms_table *t, uint64_t key)
{
	uint32_t idx;
	return find_slot(t, key, &idx);
}

int ms_table_take(struct ms_table *t, uint64_t key, unsigned kinds, struct ms_centry *out)
{
	uint32_t idx;
	struct ms_centry *s = find_slot(t, key, &idx);
	if (!s || !(s->kind & kinds))
		return -1;
	uint64_t k = key;
	if (!key_cas(s, &k, KEY_BUSY))
		return -1;        /* another thread removed it first */
	if (!(s->kind & kinds)) { /* removed and put back as another kind meanwhile */
		__atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
		return -1;
	}
	/* field by field: the key word is only ever accessed atomically */
	out->key = key;
	out->size = s->size;
	out->aux = s->aux;
	out->device = s->device;
	out->kind = s->kind;
	out->refs = __atomic_load_n(&s->refs, __ATOMIC_RELAXED);
	__atomic_store_n(&s->key, KEY_TOMB, __ATOMIC_RELEASE);
	tomb_cleanup(t, idx);
	return 0;
}

uint64_t ms_table_count(const struct ms_table *t)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i <= mask_of(t); i++)
		n += key_load(&t->slot[i]) > KEY_LAST_RESERVED;
	return n;
}

void ms_table_each(const struct ms_table *t, void (*fn)(const struct ms_centry *e, void *arg), void *arg)
{
	for (uint32_t i = 0; i <= mask_of(t); i++)
		if (key_load(&t->slot[i]) > KEY_LAST_RESERVED)
			fn(&t->slot[i], arg);
}
