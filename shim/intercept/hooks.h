/* The intercept layer: the real function behind every wrapper of intercept/libc.def, the one
 * resolver that finds real functions (resolve.c), and what the wrappers offer the layers above.
 * These wrappers never call up into those layers: a layer that wants to hear from them sets one of
 * the hooks below (or, for fatal signals, ms_signals_cover in intercept/signal.h; for call-site
 * samples, ms_set_sampler in intercept/sample.h), or claims dlsym names (MS_DLSYM_CLAIM). */
#ifndef MS_HOOKS_H
#define MS_HOOKS_H

#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "core/ms.h"

/* resolve.c defines MS_REAL_STORAGE empty before including this header: the definitions. */
#ifndef MS_REAL_STORAGE
#define MS_REAL_STORAGE extern
#endif
#define MS_HOOK(ret, name, params, args) MS_REAL_STORAGE ret(*ms_real_##name) params;
#define MS_HOOK_OPTIONAL MS_HOOK
#define MS_HOOK_LAZY MS_HOOK
#define MS_HOOK_RESOLVER(ret, name, params, args)
#define MS_HOOK_SCOPED(ret, name, params, args)
#include "intercept/libc.def"
#undef MS_HOOK_SCOPED
#undef MS_HOOK_RESOLVER
#undef MS_HOOK_LAZY
#undef MS_HOOK_OPTIONAL
#undef MS_HOOK

/* ---- the resolver (resolve.c) ------------------------------------------------------------------ */

/* Finds the MS_HOOK and MS_HOOK_OPTIONAL functions once; before that, allocations come from the
 * bootstrap buffer and mappings from raw system calls. */
void ms_resolve(void);
int ms_resolved(void);
/* Resolves, or waits for the thread that is resolving; 0 once the real functions are known. */
int ms_resolve_wait(void);

/* An MS_HOOK_LAZY function: *SLOT once known, else looked up now (dlsym(RTLD_NEXT) with the guard
 * raised) and kept there; NULL while the name is missing (a later call looks again). */
void *ms_resolve_lazy(void **slot, const char *name);
#define MS_REAL_LAZY(name) ((__typeof__(ms_real_##name))ms_resolve_lazy((void **)&ms_real_##name, #name))

/* ---- the caller's own binding (scope.c): for functions that may live outside the global scope --- */

/* One wrapped name's answers, kept per caller object and load generation (a static per name). */
#define MS_SCOPED_KEEP 8
struct ms_scoped_entry {
	unsigned seq;
	const void *map;
	uint64_t gen;
	void *fn;
};
struct ms_scoped {
	const char *name;
	unsigned next;
	struct ms_scoped_entry keep[MS_SCOPED_KEEP];
};
/* clang-format off */
#define MS_SCOPED(name_) { .name = (name_) }
/* clang-format on */
/* The definition of S->name that the object containing CALLER (a return address; NULL: the main
 * namespace's view) would have bound without the shim: one in an object loaded at start, else in
 * the caller's local scope (RTLD_LOCAL libraries), else anywhere in its namespace; never ours.
 * NULL when no loaded object has it.  *FOR_EVERY_CALLER (unless NULL) says whether every caller
 * gets the same answer until an object is loaded or unloaded.  No allocation, no dlerror state,
 * errno kept. */
void *ms_resolve_scoped(struct ms_scoped *s, const void *caller, int *for_every_caller);
/* Marks the objects loaded now as the ones loaded at start (resolve.c, once). */
void ms_scope_note_startup(void);
/* The return address of the exported wrapper it is written in: the program's calling object. */
#define MS_CALLER() __builtin_extract_return_addr(__builtin_return_address(0))

/* The C library's own dlsym (ours wraps the public one), found without any failing lookup. */
typedef void *(*ms_dlsym_fn)(void *, const char *);
ms_dlsym_fn ms_libc_dlsym(void);
/* dlsym(HANDLE, NAME) as the shim itself asks it: RTLD_NEXT means after the shim. */
void *ms_real_dlsym(void *handle, const char *name);

/* The sanitizer whose runtime owns malloc ("AddressSanitizer", ...), or NULL. */
const char *ms_sanitizer(void);
/* Whether a valgrind tool is loaded and no heap allocation reached memshim: valgrind replaces malloc
 * in every object by default, memshim's wrapper too. */
int ms_valgrind_took_malloc(void);
/* Non-zero when the library was loaded after the program started (dlopen, ctypes): the program's
 * calls are already bound elsewhere, so nothing would be counted. */
int ms_loaded_late(void);
/* The path of a preloaded library whose malloc comes before ours (LD_PRELOAD="libjemalloc.so.2
 * libmemshim.so"): the program's malloc calls never reach us.  NULL otherwise. */
const char *ms_allocator_ahead(void);
/* Non-zero when the real malloc is the C library's own (glibc's chunk layout may be relied on). */
extern int ms_allocator_is_glibc;

/* ---- the bootstrap buffer (bootstrap.c): allocations made before the real malloc is known ----- */

void *ms_bootstrap_alloc(size_t size, size_t align);
#define MS_BOOT_SIZE ((size_t)256 * 1024)
extern char ms_boot[MS_BOOT_SIZE];
static inline int ms_bootstrap_owns(const void *p)
{
	return (uintptr_t)p - (uintptr_t)ms_boot < MS_BOOT_SIZE;
}
size_t ms_bootstrap_size(const void *p);

/* ---- what the wrappers offer the layers above ------------------------------------------------- */

/* malloc.c and mmap.c call this before every counted allocation or free while it is set: the
 * native stage detector sets it while a native target function is known to be loaded (or a dlopen
 * that may load one is under way), to look at the stack first, so memory moved inside a stage
 * function is attributed to its stage.  SLOT is the calling function's own return-address slot
 * (MS_RA_SLOT()): called from an exported wrapper's own frame (inlined there, or in a function it
 * tail-jumps to), that is where the program's return address lies, and a call from a place seen
 * before is decided without walking the shim's frames; from anywhere else it is still correct,
 * only slower (the check then walks up through the shim's frames). */
/* Declared hidden (as all our symbols are, here where the compiler sees it too): one RIP-relative
 * load in the wrappers, not one through the GOT. */
extern void (*ms_before_count)(uintptr_t *slot) __attribute__((visibility("hidden")));
/* Sets ms_before_count (NULL: none); the malloc family leaves its fast path while one is set. */
void ms_set_before_count(void (*fn)(uintptr_t *slot));
/* Non-zero while the hook has nothing to do on this thread (native stages: every stage a look could
 * open is open on it), set by its owner: the wrappers then skip its call. */
extern __thread int ms_tls_before_count_idle MS_TLS;

/* malloc.c: counts block P that the allocator underneath handed out / is about to take back
 * outside the malloc wrappers (jemalloc's or tcmalloc's operator new and delete: cxx.c). */
void ms_malloc_counted(void *p);
void ms_malloc_uncounted(void *p);
/* jump.c: 1 while this thread runs the allocator's operator new under a guard cxx.c raised; a
 * raise from there (bad_alloc) lowers that guard (jump.c): nothing after the call runs. */
extern __thread int ms_tls_new_guarded MS_TLS;

/* mode.c: non-zero while the malloc family may take its fast path (resolved, counting, glibc's
 * allocator underneath): 0 (the general path), MS_FAST_ON, or MS_FAST_CHECKED (the fast path with
 * the hook before counting first, run in an out-of-line function the wrapper tail-jumps to, so
 * its return-address slot is the program's; negative, so the one compare of MS_FAST_ON's path
 * never takes it).  Recomputed by ms_malloc_fast_update whenever one of those changes
 * (ms_counting included); ms_malloc_fast_resolved(GLIBC) is resolve.c's word that the real
 * functions are published, GLIBC when glibc's allocator is underneath. */
#define MS_FAST_ON 1
#define MS_FAST_CHECKED (-1)
extern int ms_malloc_fast __attribute__((visibility("hidden"))); /* one load: see ms_before_count */
void ms_malloc_fast_update(void);
void ms_malloc_fast_resolved(int glibc);

/* The current function's return-address slot (its canonical frame address minus 8, x86-64):
 * computed without a frame pointer, in the function the caller of the macro is inlined into. */
#define MS_RA_SLOT() ((uintptr_t *)__builtin_dwarf_cfa() - 1)

static inline __attribute__((always_inline)) void ms_before_counting_at(uintptr_t *slot)
{
	void (*f)(uintptr_t *) = __atomic_load_n(&ms_before_count, __ATOMIC_RELAXED);
	if (MS_UNLIKELY(f != NULL) && !ms_tls_before_count_idle)
		f(slot);
}

/* A macro, so that MS_RA_SLOT() is the slot of the function it is written in. */
#define ms_before_counting() ms_before_counting_at(MS_RA_SLOT())

/* mmap.c: mappings the range tables had no room for (the report's process.mmap_untracked).  Fork:
 * the table's lock is taken before and released after (the first in the lock order: a counted
 * munmap may open a stage, so the stage engine's and the timeline's locks come after it). */
uint64_t ms_mmap_untracked(void);
/* Reservations (MAP_NORESERVE, or mapped MS_RESERVE_MIN bytes and more at once, or committed inside a
 * PROT_NONE reservation) count their resident pages, read with PAGEMAP_SCAN or mincore (ms_refresh);
 * init sets the refresh. */
#define MS_RESERVE_MIN (16UL << 20)
void ms_mmap_init(void);

/* mmap.c, shared.c: the shared memory this process maps (MAP_SHARED of memfd, /dev/shm and other
 * tmpfs files, anonymous shared memory, SysV segments), read by its resident pages in this process
 * (the "shared" component), and the segments it maps, each named by its object's device and inode,
 * as every process that maps it names it. */
#define MS_SHARED_NAME 64
#define MS_SHARED_SEGMENTS 128
enum ms_shared_kind {
	MS_SHARED_NONE,
	MS_SHARED_ANONYMOUS,
	MS_SHARED_MEMFD,
	MS_SHARED_SHM,
	MS_SHARED_TMPFS,
	MS_SHARED_HUGETLBFS,
	MS_SHARED_SYSV
};
struct ms_shared_segment {
	int kind;
	uint32_t major, minor; /* the object's device and inode, as /proc/PID/maps shows them */
	uint64_t ino;
	int64_t mapped;            /* bytes of it mapped now (0: unmapped since) */
	int64_t mapped_peak;       /* most bytes mapped at once */
	int64_t resident;          /* its pages resident in this process at the last read */
	int64_t peak;              /* the most read */
	char name[MS_SHARED_NAME]; /* the file's path (memfd: "/memfd:NAME"), "" for anonymous memory */
};
/* The segments into OUT (MS_SHARED_SEGMENTS of room), without the mapping lock (a signal handler
 * may ask; a segment changing meanwhile may be left out): returns how many; *DROPPED receives the
 * segments the table had no room for. */
int ms_mmap_shared_copy(struct ms_shared_segment *out, uint64_t *dropped);
/* Shared memory mappings this process made or inherited (0: it maps none, no "shared" keys). */
uint64_t ms_mmap_shared_mappings(void);
void ms_mmap_fork_prepare(void);
void ms_mmap_fork_parent(void);
void ms_mmap_fork_child(int tracking);

/* exit.c: _exit and _Exit call this first once set (lifecycle.c: the final file, REASON "_exit"). */
extern void (*ms_before_exit)(const char *reason);

/* sandbox.c: called before a prctl or syscall() that installs a seccomp filter or strict mode
 * (ENTERING MS_SANDBOX_FILTER or MS_SANDBOX_STRICT), and again with MS_SANDBOX_NONE when the
 * kernel refused it.  Set by lifecycle.c. */
extern void (*ms_on_sandbox)(int entering);
/* dl.c: dlclose calls made through the wrapper (the shim's own go to the real one).  Native stages
 * re-read the loaded objects at their next look after one. */
extern unsigned ms_dlclose_calls;
/* dl.c: dlopen, dlmopen and dlclose calls made through the wrappers (a dlopen counted as it
 * starts, a dlclose when it is done). */
extern unsigned ms_dl_generation;
/* dl.c: called by the dlopen/dlmopen wrappers, once set, just before the real function (which the
 * wrapper then tail-calls, so it still sees the program's caller: RUNPATH, $ORIGIN, namespace),
 * with the wrapper's return-address slot: the call is under way until that slot no longer holds
 * its return address or the stack has returned above it.  Set by the native stage detector. */
extern void (*ms_on_dlopen)(uintptr_t *slot);
/* dl.c: called by the dlclose wrapper, once set, after the real dlclose returned. */
extern void (*ms_after_dlclose)(void);
/* dl.c: asked by the dlsym wrapper, once set, for every lookup no claim took, RTLD_DEFAULT's too
 * but never RTLD_NEXT's: what to answer, or MS_DLSYM_PASS.  Set by native stages bound through the
 * GOT, at start (the objects a dlopen loaded are bound before their functions are handed out, and
 * a bound function's name is answered with its entry). */
extern void *(*ms_on_dlsym)(void *handle, const char *name);

/* dl.c: a layer above that must answer dlsym for some names (cuda/: the driver functions it wraps)
 * claims them with MS_DLSYM_CLAIM(fn) at file scope: the linker lists every claim in one section,
 * so they are in place from load, before any constructor runs (other libraries' constructors run
 * before ours and may look driver functions up).  The dlsym wrapper asks FN(handle, name) only for
 * a real library handle, outside the shim's own lookups; FN answers for dlsym, or MS_DLSYM_PASS
 * when NAME is not its (the real dlsym then answers, called as a tail call).  Never an address a
 * lookup may return: at worst the real dlsym is asked again. */
typedef void *(*ms_dlsym_claim_fn)(void *handle, const char *name);
#define MS_DLSYM_PASS ((void *)-1)
#define MS_DLSYM_CLAIM(fn)                                                                                             \
	static const ms_dlsym_claim_fn ms_dlsym_claim_##fn __attribute__((used, section("ms_dlsym_claims"))) = fn

/* jump.c: frames left without returning, told to the native stage detector once it sets these:
 * before a longjmp-family jump, with the stack pointer it jumps to (the frames below are
 * discarded); around an exception in flight while the stack check is on (ms_before_count), from
 * the throw (_Unwind_RaiseException, _Unwind_Resume_or_Rethrow) to the catch (__cxa_begin_catch,
 * or the free of the exception object: Rust's catch_unwind), or to the raise's return when no
 * handler was found.  Each begin is matched by one end. */
extern void (*ms_before_jump)(uintptr_t target_sp);
extern void (*ms_on_unwind_begin)(void);
extern void (*ms_on_unwind_end)(void);
/* Exceptions in flight on this thread that the hooks were told of; malloc.c's general free path
 * calls ms_jump_freed(PTR) while it is non-zero. */
extern __thread int ms_tls_flights MS_TLS;
void ms_jump_freed(void *ptr);
/* Looks the longjmp family up now: a longjmp out of a signal handler must not have to. */
void ms_jump_resolve(void);

#endif
