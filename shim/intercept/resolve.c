/* Finding the real functions: the one place that looks them up.  Every lookup goes through the C
 * library's own dlsym, itself found by an ELF lookup (elf.c), and names that may be missing are
 * looked up only where a failing lookup is harmless: dlsym allocates its error message through the
 * program's malloc, which deadlocks a program whose own allocator calls mmap (our wrapper) under
 * its lock.  While dlsym allocates before malloc is known, requests come from bootstrap.c. */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define MS_REAL_STORAGE /* the ms_real_ pointers are defined here */
#include "core/sys.h"
#include "core/config.h"
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"

int ms_allocator_is_glibc;

static struct {
	int state;             /* 0 unresolved, 1 resolving, 2 done */
	const char *sanitizer; /* the runtime that owns malloc, when one does */
	int valgrind;          /* a valgrind tool's vgpreload_*.so is loaded */
} resolve_st;

int ms_resolved(void)
{
	return __atomic_load_n(&resolve_st.state, __ATOMIC_ACQUIRE) == 2;
}

/* dlsym lives beside dladdr1 (libc since 2.34, libdl before); a versioned dlvsym of a version
 * the library lacks would fail and allocate its error message. */
ms_dlsym_fn ms_libc_dlsym(void)
{
	static ms_dlsym_fn found;
	ms_dlsym_fn f = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
	if (MS_LIKELY(f != NULL))
		return f;
	f = (ms_dlsym_fn)ms_elf_own_symbol(ms_elf_object_of((const void *)dladdr1), "dlsym");
	if (!f)
		f = (ms_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	__atomic_store_n(&found, f, __ATOMIC_RELEASE);
	return f;
}

typedef void *(*ms_dlvsym_fn)(void *, const char *, const char *);

/* The C library's dlvsym, found as dlsym is (NULL when it has none). */
static ms_dlvsym_fn libc_dlvsym(void)
{
	static ms_dlvsym_fn found;
	if (!found)
		found = (ms_dlvsym_fn)ms_elf_own_symbol(ms_elf_object_of((const void *)dladdr1), "dlvsym");
	return found;
}

/* Of two definitions, the one in the object that comes first in load order (the search order). */
static void *earlier(void *a, void *b)
{
	const struct link_map *ma = a ? ms_elf_object_of(a) : NULL, *mb = b ? ms_elf_object_of(b) : NULL;
	if (!ma || !mb || ma == mb)
		return ma ? a : b;
	for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next)
		if (m == ma || m == mb)
			return m == ma ? a : b;
	return a;
}

/* Whether glibc's debugging allocator is loaded (preloaded: it interposes nothing otherwise), the
 * one whose malloc family is of a version that is not the default.  Asked once. */
static int debug_allocator_loaded(void)
{
	static int known = -1;
	if (known >= 0)
		return known;
	known = 0;
	for (const struct link_map *m = _r_debug.r_map; m && !known; m = m->l_next)
		known = m->l_name && !strncmp(ms_file_name(m->l_name), "libc_malloc_debug.so", 20);
	return known;
}

/* The definition of NAME after HANDLE that the program's reference binds.  Its references to the
 * malloc family's first names are of version GLIBC_2.2.5, which an unversioned lookup passes over
 * where it is not the default (libc_malloc_debug.so's malloc@GLIBC_2.2.5: mtrace and MALLOC_CHECK_
 * went unseen behind memshim), and which dlvsym finds only where it is named so (not an
 * allocator's unversioned malloc): the earlier of the two is the dynamic linker's answer.  Every C
 * library has those names at that version: no lookup fails.  Only with that library loaded: each
 * versioned lookup costs ~2K instructions at every start. */
static void *bound_definition(ms_dlsym_fn real_dlsym, void *handle, const char *name)
{
	/* the program's references' versions (x86-64); the debugging allocator has each of the first
	 * nine, the C library all ten: a family is never split between the two (aligned_alloc then
	 * free) */
	static const char *const family[][2] = {
		{ "malloc", "GLIBC_2.2.5" },       { "free", "GLIBC_2.2.5" },
		{ "calloc", "GLIBC_2.2.5" },       { "realloc", "GLIBC_2.2.5" },
		{ "memalign", "GLIBC_2.2.5" },     { "valloc", "GLIBC_2.2.5" },
		{ "pvalloc", "GLIBC_2.2.5" },      { "posix_memalign", "GLIBC_2.2.5" },
		{ "aligned_alloc", "GLIBC_2.16" }, { "reallocarray", "GLIBC_2.26" },
	};
	void *plain = real_dlsym ? real_dlsym(handle, name) : NULL;
	ms_dlvsym_fn v = debug_allocator_loaded() ? libc_dlvsym() : NULL;
	for (size_t i = 0; v && i < sizeof family / sizeof *family; i++)
		if (!strcmp(name, family[i][0]))
			return earlier(plain, v(handle, name, family[i][1]));
	return plain;
}

/* A sanitizer runtime owns malloc when it is the allocator underneath (gcc's shared runtimes) or
 * is linked into the program (clang's static ones); its allocator cannot be asked about blocks
 * before it has initialised, so the shim steps aside in such a program. */
static int find_sanitizer(const struct link_map *allocator)
{
	static const char *const runtimes[][2] = {
		{ "__asan_init", "AddressSanitizer" }, { "__tsan_init", "ThreadSanitizer" },
		{ "__msan_init", "MemorySanitizer" },  { "__hwasan_init", "HWAddressSanitizer" },
		{ "__lsan_init", "LeakSanitizer" },    { "__memprof_init", "MemProfiler" },
	};
	struct ms_elf_tables a, p; /* found once for the twelve lookups */
	int has_a = ms_elf_tables_of(allocator, &a) == 0, has_p = ms_elf_tables_of(_r_debug.r_map, &p) == 0;
	for (size_t i = 0; i < sizeof runtimes / sizeof *runtimes; i++)
		if ((has_a && ms_elf_tables_symbol(&a, runtimes[i][0])) ||
		    (has_p && ms_elf_tables_symbol(&p, runtimes[i][0]))) {
			resolve_st.sanitizer = runtimes[i][1];
			return 1;
		}
	return 0;
}

/* The object the program's free is bound to, when it is not ours: NULL when ours.  Asked twice by
 * the constructor (ms_loaded_late, ms_allocator_ahead): looked up once, a dlsym each time. */
static const struct link_map *program_free(void)
{
	static int known;
	static const struct link_map *found;
	if (known)
		return found;
	void *bound = bound_definition(ms_libc_dlsym(), RTLD_DEFAULT, "free");
	const struct link_map *m = bound ? ms_elf_object_of(bound) : NULL;
	found = m == ms_elf_object_of((const void *)program_free) ? NULL : m;
	known = 1;
	return found;
}

int ms_loaded_late(void)
{
	const struct link_map *m = program_free();
	/* the program's own allocator comes first even when we are preloaded (rustc) */
	if (!m || m == _r_debug.r_map)
		return 0;
	const char *preload = ms_setting_text("LD_PRELOAD");
	return !preload || !strstr(preload, "memshim");
}

const char *ms_allocator_ahead(void)
{
	const struct link_map *m = program_free();
	return m && m != _r_debug.r_map && m->l_name && m->l_name[0] ? m->l_name : NULL;
}

const char *ms_sanitizer(void)
{
	return resolve_st.sanitizer;
}

int ms_valgrind_took_malloc(void)
{
	int64_t peaks[MS_NCOMP];
	if (!resolve_st.valgrind)
		return 0;
	ms_counters_process_peaks(peaks);
	return peaks[MS_MALLOC] == 0;
}

/* Valgrind's tools that replace the allocator (memcheck, massif, helgrind, drd, dhat: a
 * vgpreload_<tool>.so beside vgpreload_core.so, which callgrind and cachegrind load alone) take the
 * C library's over inside the process: their blocks have no glibc chunk headers to read, so the
 * allocator's own malloc_usable_size (valgrind's) sizes them. */
static int valgrind_allocator(void)
{
	for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next) {
		const char *base = m->l_name ? strrchr(m->l_name, '/') : NULL;
		if (base && !strncmp(base + 1, "vgpreload_", 10) && strncmp(base + 11, "core", 4) != 0)
			return 1;
	}
	return 0;
}

void ms_resolve(void)
{
	int expected = 0;
	if (!__atomic_compare_exchange_n(&resolve_st.state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* done, or in progress: callers use the bootstrap buffer meanwhile */
	int saved = errno;
	ms_tls_guard++;
	ms_scope_note_startup();
	ms_dlsym_fn real_dlsym = ms_libc_dlsym();
	/* publish all at once: a half-resolved family would mix allocators.  Every MS_HOOK name exists
	 * in the C library, so no lookup fails (a failing dlsym allocates its error message).  Lazy
	 * names are left to their first call. */
#define MS_HOOK_LAZY(ret, name, params, args)
#define MS_HOOK_RESOLVER(ret, name, params, args)
#define MS_HOOK_SCOPED(ret, name, params, args)
#define MS_HOOK(ret, name, params, args)                                                                               \
	ret(*name##_found) params = (ret(*) params)bound_definition(real_dlsym, RTLD_NEXT, #name);
#define MS_HOOK_OPTIONAL(ret, name, params, args) ret(*name##_found) params = NULL;
#include "intercept/libc.def"
#undef MS_HOOK_OPTIONAL
#undef MS_HOOK
	const struct link_map *allocator = ms_elf_object_of((const void *)malloc_found);
	/* the C library's object, found by a function the shim imports anyway */
	resolve_st.valgrind = valgrind_allocator();
	ms_allocator_is_glibc =
		allocator && allocator == ms_elf_object_of((const void *)clock_gettime) && !resolve_st.valgrind;
	if (find_sanitizer(allocator))
		__atomic_store_n(&ms_counting, 0, __ATOMIC_RELEASE); /* before any wrapper can count */
#define MS_HOOK(ret, name, params, args)
#define MS_HOOK_OPTIONAL(ret, name, params, args) name##_found = (ret(*) params)ms_elf_own_symbol(allocator, #name);
#include "intercept/libc.def"
#undef MS_HOOK_OPTIONAL
#undef MS_HOOK
#define MS_HOOK(ret, name, params, args) __atomic_store_n(&ms_real_##name, name##_found, __ATOMIC_RELEASE);
#define MS_HOOK_OPTIONAL MS_HOOK
#include "intercept/libc.def"
#undef MS_HOOK_OPTIONAL
#undef MS_HOOK
#undef MS_HOOK_SCOPED
#undef MS_HOOK_RESOLVER
#undef MS_HOOK_LAZY
	ms_tls_guard--;
	__atomic_store_n(&resolve_st.state, 2, __ATOMIC_RELEASE);
	ms_malloc_fast_resolved(ms_allocator_is_glibc);
	errno = saved;
}

int ms_resolve_wait(void)
{
	ms_resolve();
	for (int i = 0; !ms_resolved() && ms_tls_guard == 0 && i < 100000; i++)
		ms_sys_sched_yield(); /* another thread is publishing them */
	return ms_resolved() ? 0 : -1;
}

void *ms_real_dlsym(void *handle, const char *name)
{
	ms_dlsym_fn f = ms_libc_dlsym();
	return f ? f(handle, name) : NULL;
}

void *ms_resolve_lazy(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (MS_LIKELY(f != NULL))
		return f;
	ms_tls_guard++;
	f = ms_real_dlsym(RTLD_NEXT, name);
	ms_tls_guard--;
	if (f)
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	return f;
}
