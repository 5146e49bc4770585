/* C++'s operator new and delete, every variant (intercept/cxx.def).  Each wrapper calls the
 * definition its caller would have bound without the shim (intercept/scope.c), so a library's own
 * operator new stays its own.  libstdc++'s calls malloc and free, which the malloc wrappers count.
 * jemalloc's and tcmalloc's allocate inside the allocator, and their operator delete may still call
 * free (counted alone, 200 MiB of new[] read as -200 MiB): when the definition lies in the object
 * that provides the real malloc, the call runs with the guard raised and its block is counted here
 * by its usable size.  A new that throws from under that guard (bad_alloc, a new_handler's
 * exception) has the guard lowered by the raise wrapper (intercept/jump.c): nothing after it runs.
 *
 * Where nothing is counted here (libstdc++'s, or a library's own), the wrappers step aside: at the
 * first call after objects were loaded, the GOT slots of every object loaded since that hold a
 * wrapper get the definition itself, as the dynamic linker would have bound them without us, so
 * later calls do not pass here at all (a caller may be seen only through a tail call: libstdc++'s
 * new[] jumps to new).  Slots that cannot be rewritten still take the wrappers' short path. */
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include "core/ms.h"
#include "intercept/elf.h"
#include "intercept/got.h"
#include "intercept/hooks.h"

typedef const void *nothrow_ref;

/* One operator's definition as every caller gets it, for one generation of loaded objects; the
 * fields are written under SEQ (odd while written), as intercept/scope.c keeps its answers. */
struct cxx_op {
	struct ms_scoped scoped;
	unsigned seq, gen;
	void *fn;
	int counted;
};

#define MS_CXX_NEW(name, params, args, fallback)                                                                       \
	EXPORT void *name params;                                                                                      \
	static struct cxx_op op_##name = { .scoped = MS_SCOPED(#name) };
#define MS_CXX_DELETE(name, params, args, ptr)                                                                         \
	EXPORT void name params;                                                                                       \
	static struct cxx_op op_##name = { .scoped = MS_SCOPED(#name) };
#include "intercept/cxx.def"
#undef MS_CXX_DELETE
#undef MS_CXX_NEW

/* Every operator with its wrapper, for the slots that step aside (hidden aliases: their addresses
 * need no lookup by the dynamic linker when the library is loaded). */
#define MS_CXX_NEW(name, params, args, fallback)                                                                       \
	extern __typeof__(name) name##_self __attribute__((alias(#name), visibility("hidden")));
#define MS_CXX_DELETE MS_CXX_NEW
#include "intercept/cxx.def"
#undef MS_CXX_DELETE
#undef MS_CXX_NEW
static const struct cxx_row {
	struct cxx_op *op;
	void *ours;
} rows[] = {
#define MS_CXX_NEW(name, params, args, fallback) { &op_##name, (void *)name##_self },
#define MS_CXX_DELETE(name, params, args, ptr) { &op_##name, (void *)name##_self },
#include "intercept/cxx.def"
#undef MS_CXX_DELETE
#undef MS_CXX_NEW
};
#define NROWS (sizeof rows / sizeof *rows)

/* Changes whenever a dlopen or dlclose call passed the wrappers; never 0. */
static inline unsigned generation(void)
{
	return __atomic_load_n(&ms_dl_generation, __ATOMIC_ACQUIRE) + 1u;
}

/* Whether FN lies in the object that provides the real malloc (its blocks are malloc's). */
static int in_allocator(void *fn)
{
	const struct link_map *allocator = ms_elf_object_of((const void *)ms_real_malloc);
	return allocator && ms_elf_object_of(fn) == allocator;
}

static void publish(struct cxx_op *op, unsigned gen, void *fn, int counted)
{
	unsigned seq = __atomic_load_n(&op->seq, __ATOMIC_RELAXED);
	if ((seq & 1) || !__atomic_compare_exchange_n(&op->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&op->gen, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&op->fn, fn, __ATOMIC_RELAXED);
	__atomic_store_n(&op->counted, counted, __ATOMIC_RELAXED);
	__atomic_store_n(&op->seq, seq + 2, __ATOMIC_RELEASE);
}

/* The definition every caller gets when it needs no counting here (libstdc++'s), else NULL. */
static inline __attribute__((always_inline)) void *plain(struct cxx_op *op)
{
	unsigned seq = __atomic_load_n(&op->seq, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&op->gen, __ATOMIC_RELAXED) != generation() || (seq & 1))
		return NULL;
	void *fn = __atomic_load_n(&op->fn, __ATOMIC_RELAXED);
	int counted = __atomic_load_n(&op->counted, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return counted || __atomic_load_n(&op->seq, __ATOMIC_RELAXED) != seq ? NULL : fn;
}

/* ---- stepping aside ------------------------------------------------------------------------- */

static struct {
	int aside_busy;         /* one thread rewrites at a time; the others go on through us */
	unsigned aside_closes;  /* ms_dlclose_calls when DONE was last valid */
	const void *done[1024]; /* dynamic sections of the objects whose slots were rewritten */
	unsigned ndone;
} cxx_st;

static int same_name(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static int cxx_name(const char *sym, const void *key)
{
	(void)key;
	return sym[0] == '_' && sym[1] == 'Z' && (sym[2] == 'n' || sym[2] == 'd');
}

/* A slot naming an operator gets its plain definition when it holds our wrapper or is not bound
 * yet (a lazy jump slot still pointing into its own object's PLT): as the dynamic linker binds it. */
static void redirect(const struct ms_got_object *o, uintptr_t *slot, const char *sym, void *arg)
{
	const struct link_map *self = arg;
	uintptr_t now = __atomic_load_n(slot, __ATOMIC_RELAXED);
	for (size_t i = 0; i < NROWS; i++)
		if (same_name(sym, rows[i].op->scoped.name)) {
			void *fn = plain(rows[i].op);
			if (fn && (now == (uintptr_t)rows[i].ours || ms_elf_object_of((const void *)now) == self))
				ms_got_write(o, slot, (uintptr_t)fn);
			return;
		}
}

static int in_main_namespace(const struct link_map *map)
{
	for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next)
		if (m == map)
			return 1;
	return 0;
}

static int rewrite_new_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	const ElfW(Dyn) *dyn = NULL;
	(void)size, (void)arg;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	const struct link_map *map = dyn ? ms_elf_object_of(dyn) : NULL;
	if (!map || map == ms_elf_object_of((const void *)rewrite_new_object) || !in_main_namespace(map))
		return 0; /* another namespace binds in its own objects */
	for (unsigned k = 0; k < cxx_st.ndone; k++)
		if (cxx_st.done[k] == dyn)
			return 0;
	struct ms_got_object o;
	if (ms_got_object_at(info->dlpi_addr, dyn, info->dlpi_phdr, info->dlpi_phnum, &o) == 0)
		ms_got_slots_matching(&o, cxx_name, NULL, redirect, (void *)map);
	if (cxx_st.ndone < sizeof cxx_st.done / sizeof *cxx_st.done)
		cxx_st.done[cxx_st.ndone++] = dyn;
	return 0;
}

static void settle(struct cxx_op *op, unsigned gen);

/* Every operator whose definition is plain gets its slots in the objects not yet seen: each one's
 * definition is settled first, so an object is read once. */
static void step_aside(unsigned gen)
{
	int idle = 0;
	if (!__atomic_compare_exchange_n(&cxx_st.aside_busy, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	ms_tls_guard++;
	for (size_t i = 0; i < NROWS; i++)
		if (__atomic_load_n(&rows[i].op->gen, __ATOMIC_RELAXED) != gen)
			settle(rows[i].op, gen);
	unsigned closes = __atomic_load_n(&ms_dlclose_calls, __ATOMIC_ACQUIRE);
	if (closes != cxx_st.aside_closes) { /* a dynamic section may now be another object's */
		cxx_st.ndone = 0;
		cxx_st.aside_closes = closes;
	}
	dl_iterate_phdr(rewrite_new_object, NULL);
	ms_tls_guard--;
	__atomic_store_n(&cxx_st.aside_busy, 0, __ATOMIC_RELEASE);
}

/* Publishes OP's definition when every caller gets the same one. */
static void settle(struct cxx_op *op, unsigned gen)
{
	int every = 0;
	void *fn = ms_resolve_scoped(&op->scoped, NULL, &every);
	if (every)
		publish(op, gen, fn, fn && in_allocator(fn));
}

/* The definition CALLER would have bound; *COUNTED when it is the allocator's own. */
static __attribute__((noinline)) void *real_for(struct cxx_op *op, const void *caller, int *counted)
{
	int every = 0;
	unsigned gen = generation();
	void *fn = ms_resolve_scoped(&op->scoped, caller, &every);
	*counted = fn && ms_resolved() && in_allocator(fn);
	if (every && ms_resolved()) { /* before that the real malloc is unknown: ask again */
		publish(op, gen, fn, *counted);
		if (fn && !*counted)
			step_aside(gen);
	}
	return fn;
}

/* ---- the wrappers --------------------------------------------------------------------------- */

static void *aligned(size_t n, size_t align)
{
	void *p = NULL;
	return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, n) == 0 ? p : NULL;
}

/* NAME(PARAMS) allocating: the plain definition tail-called, else NAME_other decides (entered by a
 * tail call, so the definition still sees the program's return address). */
#define MS_CXX_NEW(name, params, args, fallback)                                                                       \
	static __attribute__((noinline)) void *name##_other params                                                     \
	{                                                                                                              \
		int counted;                                                                                           \
		void *(*f)params = (void *(*)params)real_for(&op_##name, MS_CALLER(), &counted);                       \
		if (!f)                                                                                                \
			return fallback;                                                                               \
		if (!counted)                                                                                          \
			return f args;                                                                                 \
		ms_tls_guard++;                                                                                        \
		ms_tls_new_guarded = 1;                                                                                \
		void *p = f args;                                                                                      \
		ms_tls_new_guarded = 0;                                                                                \
		ms_tls_guard--;                                                                                        \
		ms_malloc_counted(p);                                                                                  \
		return p;                                                                                              \
	}                                                                                                              \
	void *name params                                                                                              \
	{                                                                                                              \
		void *(*f)params = (void *(*)params)plain(&op_##name);                                                 \
		if (MS_LIKELY(f != NULL))                                                                              \
			return f args;                                                                                 \
		return name##_other args;                                                                              \
	}

/* NAME(PARAMS) releasing PTR. */
#define MS_CXX_DELETE(name, params, args, ptr)                                                                         \
	static __attribute__((noinline)) void name##_other params                                                      \
	{                                                                                                              \
		int counted;                                                                                           \
		void(*f) params = (void(*) params)real_for(&op_##name, MS_CALLER(), &counted);                         \
		if (!f) {                                                                                              \
			free(ptr);                                                                                     \
			return;                                                                                        \
		}                                                                                                      \
		if (!counted) {                                                                                        \
			f args;                                                                                        \
			return;                                                                                        \
		}                                                                                                      \
		ms_malloc_uncounted(ptr);                                                                              \
		ms_tls_guard++;                                                                                        \
		f args;                                                                                                \
		ms_tls_guard--;                                                                                        \
	}                                                                                                              \
	void name params                                                                                               \
	{                                                                                                              \
		void(*f) params = (void(*) params)plain(&op_##name);                                                   \
		if (MS_LIKELY(f != NULL)) {                                                                            \
			f args;                                                                                        \
			return;                                                                                        \
		}                                                                                                      \
		name##_other args;                                                                                     \
	}

#include "intercept/cxx.def"
