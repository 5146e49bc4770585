/* Native stages (C/C++ functions named in MEMSHIM_STAGES): shared declarations of the native/
 * files.  Targets are resolved to address ranges (native/syms.c); allocations look at the stack
 * (native/check.c and native/look.c, walking with the cursor of native/unwinder.c, keeping each
 * thread's known frames: native/frames.h); a frame of a target function gets its return address
 * replaced by one of the trampolines (native/tramp.c, native/pool.c), which closes the stage when
 * the function returns (native/leave.c). */
#ifndef MS_NATIVE_H
#define MS_NATIVE_H

#include <stddef.h>
#include <stdint.h>
#include "core/config.h"

/* ---- trampolines (native/tramp.c, native/pool.c) --------------------------------------------- */

#define MS_NTRAMP 4096   /* trampolines in the pool */
#define MS_TRAMP_SIZE 16 /* bytes per trampoline; the entry point is one byte in */

extern char ms_tramp_base[];    /* first trampoline block */
extern uintptr_t ms_tramp_ra[]; /* the return address each trampoline stands for */

static inline uintptr_t ms_tramp_addr(int i)
{
	return (uintptr_t)ms_tramp_base + (uintptr_t)i * MS_TRAMP_SIZE + 1;
}

/* Index of the trampoline whose entry point is IP, or -1. */
static inline int ms_tramp_index(uintptr_t ip)
{
	uintptr_t off = ip - (uintptr_t)ms_tramp_base;
	if (off >= (uintptr_t)MS_NTRAMP * MS_TRAMP_SIZE || off % MS_TRAMP_SIZE != 1)
		return -1;
	return (int)(off / MS_TRAMP_SIZE);
}

/* What the trampolines call (set by native/leave.c before any trampoline is used): on_return when
 * the function that returned into trampoline BLOCK_RET - 6 has left (it returns the address to
 * continue at), on_unwind as the personality routine the trampolines' unwind entries name. */
struct ms_tramp_handlers {
	uintptr_t (*on_return)(uintptr_t block_ret);
	int (*on_unwind)(int version, int actions, uint64_t cls, void *exc, void *ctx);
};
extern struct ms_tramp_handlers ms_tramp_handlers;

/* Checks that each trampoline block leads to its return-address word; 0 when usable. */
int ms_pool_init(void);
/* Takes a free trampoline (-1 when none is left) and gives it back. */
int ms_pool_take(void);
void ms_pool_give(int i);
/* The return address trampoline I stands for (read by the trampoline and by unwinders). */
uintptr_t ms_pool_ra(int i);
void ms_pool_set_ra(int i, uintptr_t ra);

/* Registers of the caller: OUT[0] its stack pointer after the call returns, OUT[1] rbp, OUT[2] the
 * return address (native/tramp.c). */
void ms_native_regs(uintptr_t out[3]);

/* ---- quick unwinder (native/cfi.c) ----------------------------------------------------------- */

/* The unwind rule of one frame, as far as the quick unwinder follows them: CFA = rsp or rbp +
 * cfa_off, the return address at CFA - 8, rbp saved at CFA + rbp_off or kept; or the outermost
 * frame (the return address undefined), or a signal handler's return. */
struct ms_cfi_rule {
	int valid, cfa_rbp, rbp_saved, outermost, signal;
	int32_t cfa_off, rbp_off;
};

/* One frame up from (IP a return address, SP, RBP): 1 and the caller's values with *SLOT where IP
 * was read from; 0 at the outermost frame; 2 when IP is a signal handler's return (the frames
 * below were interrupted); -1 when the frame's unwind rule is not understood. */
int ms_cfi_step(uintptr_t *ip, uintptr_t *sp, uintptr_t *rbp, uintptr_t *slot);
/* 1 when the frame returning to IP finds its caller from rbp, or its rule is not known. */
int ms_cfi_cfa_from_rbp(uintptr_t ip);
/* Set by ms_cfi_step when it met a return address it had never seen (cleared by the caller). */
extern __thread int ms_cfi_new_ip __attribute__((tls_model("initial-exec")));
/* Forgets cached rules (objects were unloaded). */
void ms_cfi_forget(void);
/* Before the first walk: the small rule cache's pages written once (read first, each would fault
 * twice). */
void ms_cfi_prepare(void);
void ms_cfi_fork_child(void);
/* The rule at instruction PC, read from .eh_frame entry FDE (and the CIE it points to): 0, or -1
 * when PC is outside it or the rule is one the quick unwinder does not follow.  For tests. */
int ms_cfi_fde_rule(const unsigned char *fde, uintptr_t pc, struct ms_cfi_rule *r);
/* The same for PC in any loaded object, uncached; not thread-safe (ms_cfi_step's cache takes a
 * lock around it).  For tests. */
int ms_cfi_rule_at(uintptr_t pc, struct ms_cfi_rule *r);

/* ---- the unwinder cursor (native/unwinder.c) ------------------------------------------------- */

/* One frame of a walk up the stack.  The frame's return address was read from SLOT; where a
 * native stage's trampoline took it over, RAW is the trampoline and IP the return address it
 * stands for (stepping on goes on from IP, as if the trampoline were not there). */
struct ms_cursor {
	uintptr_t ip;   /* return address of the frame (never a trampoline) */
	uintptr_t raw;  /* what SLOT holds: IP, or the trampoline standing for it */
	int tramp;      /* that trampoline's index, -1 */
	uintptr_t slot; /* where RAW was read */
	uintptr_t sp;   /* the stack pointer once the frame has returned (its CFA) */
	uintptr_t rbp;  /* quick walks only */
	void *full;     /* libunwind's cursor when the walk uses it, else NULL */
};

/* Room for libunwind's context and cursor, for a walk that uses it (sizes checked at build). */
struct ms_unw_space {
	_Alignas(16) unsigned char context[1024];
	_Alignas(16) unsigned char cursor[1024];
};

/* Starts a quick walk at the frame whose registers are START: its stack pointer once it has
 * returned, rbp, its return address (see ms_native_regs). */
void ms_cursor_at(struct ms_cursor *c, const uintptr_t start[3]);
/* libunwind's getcontext (NULL until loaded), and the cursor's start from a context it filled. */
extern int (*ms_unw_getcontext)(void *context);
int ms_cursor_full_init(struct ms_cursor *c, struct ms_unw_space *space);

/* Starts a walk at the caller's own frame: with the quick unwinder, or with libunwind in SPACE
 * (-1 when libunwind is not loaded).  Inlined: the registers must be the caller's, not those of a
 * frame gone by the time the walk steps. */
static inline __attribute__((always_inline)) int ms_cursor_here(struct ms_cursor *c, struct ms_unw_space *space)
{
	if (space) {
		int (*getcontext)(void *) = __atomic_load_n(&ms_unw_getcontext, __ATOMIC_ACQUIRE);
		if (!getcontext || getcontext(space->context) < 0)
			return -1;
		return ms_cursor_full_init(c, space);
	}
	uintptr_t r[3];
	ms_native_regs(r);
	ms_cursor_at(c, r);
	return 0;
}

/* C's frame returns to RAW: a trampoline stands for the return address it holds. */
static inline void ms_cursor_arrive(struct ms_cursor *c, uintptr_t raw)
{
	c->raw = raw;
	c->tramp = ms_tramp_index(raw);
	c->ip = __builtin_expect(c->tramp >= 0, 0) ? ms_pool_ra(c->tramp) : raw;
}

/* A step with libunwind (ms_cursor_step's slow path). */
int ms_cursor_full_step(struct ms_cursor *c);

/* One frame up: 1 (C is now the caller's frame); 0 at the outermost frame (or, with libunwind,
 * where it gives up or the return address is not in a plain slot); 2 when C's frame is a signal
 * handler's return (not stepped: the frames below were interrupted); -1 when the quick unwinder
 * does not understand the frame.  Inlined: call-site sampling steps once per frame. */
static inline int ms_cursor_step(struct ms_cursor *c)
{
	if (__builtin_expect(c->full != NULL, 0))
		return ms_cursor_full_step(c);
	int got = ms_cfi_step(&c->ip, &c->sp, &c->rbp, &c->slot);
	if (got == 1)
		ms_cursor_arrive(c, c->ip);
	return got;
}
/* Loads libunwind (dlopen: only processes with native stages pay for it); without it a walk that
 * asks for it fails. */
void ms_unwinder_init(void);

/* ---- targets (native/names.c) ---------------------------------------------------------------- */

enum ms_target_kind {
	MS_TK_PLAIN, /* a C symbol or a mangled C++ symbol */
	MS_TK_CXX,   /* a demangled C++ name, matched through its mangled prefixes */
};

#define MS_TARGET_PREFIXES 3

struct ms_target {
	const char *text;   /* as written in MEMSHIM_STAGES */
	const char *object; /* "lib.so" of "lib.so:symbol", else NULL */
	size_t object_len;
	char name[160]; /* the symbol part (parameters dropped for C++ names) */
	int kind;
	int nprefix; /* MS_TK_CXX: mangled prefixes that a matching symbol starts with */
	char prefix[MS_TARGET_PREFIXES][176];
	int spec_stage; /* index into ms_cfg.spec */
	int stage;      /* index into ms_cfg.spec (-1: none); the engine's id comes at its first call */
	int found;      /* resolved in some object */
	int bound_plt;  /* its calls are bound through the GOT (native/plt.c): set once, never cleared */
	int tail_call;  /* a function it names ends in a tail call (seen from the stack only) */
	/* A plain name of the C runtime's (read, write, log), or in a Python process of the
	 * interpreter's (main): the object that has it, whose functions (and the C runtime's) it does
	 * not bind (ms_target_object_matches) unless pinned ("libc.so.6:write"): a function of the
	 * program's own of that name is what it names. */
	char runtime_of[48];
};

/* T was found in some object (its function's calls open its stage). */
static inline void ms_target_set_found(struct ms_target *t)
{
	t->found = 1;
	ms_spec_note_native(t->spec_stage, t->text);
}

/* Parses TEXT (one MEMSHIM_STAGES target) into T; returns 0 when it is a native target, -1 when it
 * is something only the Python detector can match (qualified names with dots). */
int ms_target_parse(struct ms_target *t, const char *text, const char *exe_base);

/* Whether symbol SYM (from a symbol table) is the function T names: exact, a compiler clone
 * ("name.constprop.0", "name.cold"), or for C++ names any overload / const / constructor variant. */
int ms_target_matches(const struct ms_target *t, const char *sym);

/* Which symbols may name one of a set of targets, by their first two bytes: symbol tables and
 * relocations hold hundreds of thousands of names, nearly all refused by one bit. */
struct ms_target_filter {
	unsigned char bits[65536 / 8];
};
void ms_target_filter_build(struct ms_target_filter *f, const struct ms_target *t, int n);
static inline int ms_target_filter_may(const struct ms_target_filter *f, const char *sym)
{
	unsigned k = (unsigned)(unsigned char)sym[0] << 8 | (sym[0] ? (unsigned char)sym[1] : 0u);
	return f->bits[k / 8] >> (k % 8) & 1;
}

/* Whether object path PATH is the one T pins (basename equal, or "lib.so" for "lib.so.1.2"); for a
 * plain name of the runtime's (runtime_of), any object but a C runtime's or that one. */
int ms_target_object_matches(const struct ms_target *t, const char *path);
/* Whether BASE, an object's file name, is the C runtime's (libc, libm, libpthread, ld.so, libgcc_s,
 * libstdc++): the functions users' own are named after. */
int ms_c_runtime_file(const char *base);

/* The native targets of MEMSHIM_STAGES (native/targets.c; read by native/detect.c at start). */
extern struct ms_target *ms_native_targets;
extern int ms_native_ntargets;
extern struct ms_target_filter ms_native_filter; /* of ms_native_targets */
/* Warns (once per function, a few functions at most) that targets FIRST and OTHER (indexes into
 * ms_native_targets) of different stages both name function SYM at ADDR: FIRST gets its calls. */
void ms_native_warn_shared(const char *sym, uintptr_t addr, int first, int other);

/* ---- resolution (native/syms.c) -------------------------------------------------------------- */

struct ms_syms_range {
	uintptr_t lo, hi; /* [lo, hi) */
	int stage;        /* engine id */
};

struct ms_syms_table {
	int n;
	uintptr_t lo, hi; /* bounds of all ranges: a quick reject */
	struct ms_syms_range r[];
};

/* Resolves every target in the objects loaded now and publishes the range table. */
void ms_syms_resolve(void);
/* Re-resolves when objects were loaded or unloaded since the last resolution (cheap otherwise);
 * 1 when something changed. */
int ms_syms_refresh(void);
/* Functions of targets now loaded (address ranges published). */
int ms_syms_count(void);
/* Stage (engine id) of the function containing return address IP, or -1. */
int ms_syms_stage_at(uintptr_t ip);
/* FN with each function of file PATH's .symtab (and .dynsym WITH_DYNSYM): its name, its address
 * in the file and its size.  1 when PATH has a .symtab, 0 when not, -1 when it cannot be read. */
typedef void (*ms_symbol_fn)(const char *name, uintptr_t addr, size_t size, void *arg);
int ms_syms_each_function(const char *path, int with_dynsym, ms_symbol_fn fn, void *arg);
/* Paths of loaded objects without a .symtab (the executable first); writes a list into BUF. */
void ms_syms_stripped(char *buf, size_t size);
/* Bounds of the shim's own code. */
extern uintptr_t ms_self_lo, ms_self_hi;
/* A forked child: locks a thread that no longer exists may have held are free again. */
void ms_syms_fork_child(void);
/* ---- when the stack check runs (native/arm.c) ---------------------------------------------- */

/* Sets intercept's hooks: the stack check on while a target is loaded, dlopen/dlclose watched. */
void ms_arm_init(void);
/* A forked child: only this thread's dlopen calls can still be under way. */
void ms_arm_fork_child(void);

/* ---- frames left without returning (native/jmp.c) ---------------------------------------------- */

/* Looks the real longjmp family up at start (a longjmp out of a signal handler must not), and sets
 * intercept's jump and unwind hooks to the functions above. */
void ms_jmp_init(void);

/* ---- the detector (native/detect.c) ---------------------------------------------------------- */

/* At start: reads the native targets of MEMSHIM_STAGES and, when there are any, turns the stack
 * check on. */
void ms_native_init(void);
/* A forked child: the symbol and unwinder caches' locks are free again, TRACKING or not. */
void ms_native_fork_child(int tracking);
/* At exit (not _exit): warns once about every target found nowhere; debug statistics. */
/* The same from _exit (dash ends so), for the run's first process: what is known, the loaded
 * objects not read again (a handler calling _exit may hold the dynamic linker's lock). */
void ms_native_report_on_exit(void);
void ms_native_report(void);

/* Counters kept for the report and the benchmarks (debug log at exit). */
struct ms_native_stats {
	uint64_t fast, medium, slow, fired, unwound, longjmps, adopted, entered, replayed, looked_up;
};
extern struct ms_native_stats ms_native_stats;

/* Every native target (Python names left out) with its stage and how it was bound: "plt" (its
 * calls through the GOT), "stack" (found in a symbol table, seen from the stack) or "none". */
void ms_native_each_target(void (*fn)(void *ctx, const char *target, const char *stage, const char *bound,
				      const char *object),
			   void *ctx);

/* ---- calls bound through the GOT (native/plt.c) ----------------------------------------------- */

#define MS_PLT_MAX_TARGETS 128 /* native targets bound through the GOT: the first this many */

/* Rewrites the GOT slots that call a plain-named target in every loaded object, when objects were
 * loaded since the last time (slots of an object not yet relocated are left for the next time). */
void ms_plt_bind(void);
/* Unloaded functions no longer stand behind an entry (their addresses may be reused). */
void ms_plt_forget_unloaded(void);
/* Binds the targets' calls in the objects loaded now (unless MEMSHIM_NATIVE_PLT=0); from then on
 * dlopen'd objects are bound too and dlsym answers bound names with their entries. */
void ms_plt_init(void);

#endif
