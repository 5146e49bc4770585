/* The definition a caller would have bound without the shim.  An object loaded RTLD_LOCAL (every
 * Python extension, and the libstdc++ and libgcc_s it brings) binds our exported wrappers first,
 * because the preload leads the global scope, but the function we stand in for may live only in
 * that object's local scope, where dlsym(RTLD_NEXT) cannot see it.  So the dynamic linker's own
 * order is followed here, over the caller's namespace: objects loaded at start (the global scope),
 * then the caller's local scope (the caller itself and its dependencies, breadth first), then any
 * other object of the namespace.  With one definition in the namespace (the usual case) no order
 * matters and the answer is kept for every caller until an object is loaded or unloaded.  Every
 * lookup is a read of the objects' own symbol tables: no allocation, no error state for dlerror,
 * no lock but the one dl_iterate_phdr takes for the load counters, as the unwinder itself does. */
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include "core/ms.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"

#define MAX_DEFS 8    /* distinct definitions of one name kept while choosing */
#define MAX_QUEUE 256 /* objects of a local scope walked breadth first */
#define ANY_CALLER ((const struct link_map *)1)

static const struct link_map *startup_last; /* the last object loaded before the program ran */

void ms_scope_note_startup(void)
{
	const struct link_map *m = _r_debug.r_map;
	while (m && m->l_next)
		m = m->l_next;
	__atomic_store_n(&startup_last, m, __ATOMIC_RELEASE);
}

/* ---- load generation: objects added and removed so far (every namespace) --------------------- */

static int read_counts(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
		*(uint64_t *)arg = (uint64_t)info->dlpi_adds * 0x100000000ull + (uint64_t)info->dlpi_subs + 1;
	return 1; /* the counters are the same in every entry: one is enough */
}

static uint64_t load_generation(void)
{
	uint64_t gen = 0;
	dl_iterate_phdr(read_counts, &gen);
	return gen; /* 0: unknown, never matches a kept answer */
}

/* ---- the objects of one namespace --------------------------------------------------------------- */

static const struct link_map *self(void)
{
	static const struct link_map *me;
	const struct link_map *m = __atomic_load_n(&me, __ATOMIC_ACQUIRE);
	if (!m) {
		m = ms_elf_object_of((const void *)self);
		__atomic_store_n(&me, m, __ATOMIC_RELEASE);
	}
	return m;
}

static const struct link_map *first_of_namespace(const struct link_map *m)
{
	if (!m)
		return _r_debug.r_map;
	while (m->l_prev)
		m = m->l_prev;
	return m;
}

static int is_startup(const struct link_map *m)
{
	const struct link_map *last = __atomic_load_n(&startup_last, __ATOMIC_ACQUIRE);
	for (const struct link_map *s = _r_debug.r_map; last && s; s = s->l_next) {
		if (s == m)
			return 1;
		if (s == last)
			break;
	}
	return 0;
}

static const char *base_name(const char *path)
{
	const char *b = path;
	for (const char *p = path; *p; p++)
		if (*p == '/')
			b = p + 1;
	return b;
}

static int same_text(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

/* Whether M is the object a DT_NEEDED entry NEEDED names: by its soname or its file name. */
static int answers_to(const struct link_map *m, const char *needed)
{
	struct ms_elf_tables t;
	if (m->l_name && m->l_name[0] &&
	    (same_text(m->l_name, needed) || same_text(base_name(m->l_name), base_name(needed))))
		return 1;
	if (ms_elf_tables_of(m, &t) < 0)
		return 0;
	for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_SONAME && d->d_un.d_val < t.strsz)
			return same_text(t.strs + d->d_un.d_val, needed);
	return 0;
}

static const struct link_map *loaded_as(const struct link_map *head, const char *needed)
{
	for (const struct link_map *m = head; m; m = m->l_next)
		if (answers_to(m, needed))
			return m;
	return NULL;
}

/* The first definition of NAME in CALLER's local scope: CALLER, then its dependencies, breadth
 * first, as the dynamic linker lays out a dlopen'd object's search list. */
static void *in_local_scope(const struct link_map *head, const struct link_map *caller, const char *name)
{
	const struct link_map *queue[MAX_QUEUE];
	int n = 0;
	queue[n++] = caller;
	for (int i = 0; i < n; i++) {
		const struct link_map *m = queue[i];
		void *f = m == self() ? NULL : ms_elf_own_symbol(m, name);
		if (f)
			return f;
		struct ms_elf_tables t;
		if (ms_elf_tables_of(m, &t) < 0)
			continue;
		for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL && n < MAX_QUEUE; d++) {
			if (d->d_tag != DT_NEEDED || d->d_un.d_val >= t.strsz)
				continue;
			const struct link_map *dep = loaded_as(head, t.strs + d->d_un.d_val);
			int seen = !dep;
			for (int k = 0; k < n && !seen; k++)
				seen = queue[k] == dep;
			if (!seen)
				queue[n++] = dep;
		}
	}
	return NULL;
}

/* Chooses among the namespace's definitions; *ANY_CALLER_SEES set when every caller gets it. */
static void *choose(const struct link_map *caller, const char *name, int *same_for_all)
{
	const struct link_map *head = first_of_namespace(caller);
	void *defs[MAX_DEFS];
	const struct link_map *owner[MAX_DEFS];
	int n = 0, more = 0;
	for (const struct link_map *m = head; m; m = m->l_next) {
		void *f = m == self() ? NULL : ms_elf_own_symbol(m, name);
		int dup = !f;
		for (int k = 0; k < n && !dup; k++)
			dup = defs[k] == f;
		if (dup)
			continue;
		if (n == MAX_DEFS) {
			more = 1;
			break;
		}
		defs[n] = f;
		owner[n++] = m;
	}
	*same_for_all = n <= 1 && !more;
	if (n <= 1)
		return n ? defs[0] : NULL;
	for (int k = 0; k < n; k++) /* the global scope is searched first */
		if (is_startup(owner[k]))
			return defs[k];
	void *local = caller ? in_local_scope(head, caller, name) : NULL;
	return local ? local : defs[0];
}

/* ---- kept answers --------------------------------------------------------------------------- */

/* Each entry is written under its own sequence number (odd while written), so readers never take
 * a half-written one and no thread ever waits; a fork in the middle leaves one entry unusable. */
static int kept(struct ms_scoped *s, const struct link_map *caller, uint64_t gen, void **fn)
{
	for (int i = 0; i < MS_SCOPED_KEEP; i++) {
		struct ms_scoped_entry *e = &s->keep[i];
		unsigned seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if (seq & 1)
			continue;
		const void *map = __atomic_load_n(&e->map, __ATOMIC_RELAXED);
		uint64_t g = __atomic_load_n(&e->gen, __ATOMIC_RELAXED);
		void *f = __atomic_load_n(&e->fn, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq || g != gen)
			continue;
		if (map == ANY_CALLER || (caller && map == caller)) {
			*fn = f;
			return 1;
		}
	}
	return 0;
}

static void keep(struct ms_scoped *s, const struct link_map *caller, uint64_t gen, void *fn)
{
	unsigned i = __atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED) % MS_SCOPED_KEEP;
	struct ms_scoped_entry *e = &s->keep[i];
	unsigned seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
	if ((seq & 1) || !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return; /* another thread is writing it: leave this answer unkept */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->map, (const void *)caller, __ATOMIC_RELAXED);
	__atomic_store_n(&e->gen, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&e->fn, fn, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

void *ms_resolve_scoped(struct ms_scoped *s, const void *caller, int *for_every_caller)
{
	int saved = errno, same_for_all = 1;
	ms_tls_guard++;
	uint64_t gen = load_generation();
	void *fn = NULL;
	if (!kept(s, NULL, gen, &fn)) {
		const struct link_map *map = caller ? ms_elf_object_of(caller) : NULL;
		same_for_all = 0;
		if (!kept(s, map, gen, &fn)) {
			fn = choose(map, s->name, &same_for_all);
			if (gen && (same_for_all || map))
				keep(s, same_for_all ? ANY_CALLER : map, gen, fn);
		}
	}
	ms_tls_guard--;
	errno = saved;
	if (for_every_caller)
		*for_every_caller = same_for_all;
	return fn;
}
