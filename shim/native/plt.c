/* Native stages bound to the call itself: every GOT slot through which a loaded object calls a
 * target function (intercept/got.c finds them) is rewritten to an entry of ours.  The entry saves the
 * argument registers, opens the stage with the caller's return address replaced by a trampoline
 * (native/enter.c: the same frames the stack check keeps, so a return, a longjmp, an exception or
 * thread exit closes it as for a frame found on the stack), and jumps to the real function with
 * the stack as the caller left it.  So a call that never allocates is counted, and allocations
 * inside need no look at the stack.
 *
 * Imported symbols are matched by the rules of the symbol tables (native/names.c): a demangled
 * C++ name binds every mangled overload it names.  One entry per (stage, real function) pair: calls of a name the dynamic linker bound to
 * different definitions in different objects keep going where they went.  dlsym of a bound name
 * returns the entry (on_dlsym), so pointers the program looks up enter the stage too. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include "core/config.h"
#include "core/ms.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "intercept/got.h"
#include "native/enter.h"
#include "native/native.h"

#define MS_PLT_ENTRIES 256 /* entries in the asm block below */
#define MS_PLT_ENTRY_SIZE 16

struct binding {
	int spec;       /* stage index in ms_cfg.spec */
	int target;     /* index into ms_native_targets */
	uintptr_t real; /* the function the slots held */
	int unloaded;   /* its object is gone: dlsym no longer maps the address to this entry */
};

static struct binding bindings[MS_PLT_ENTRIES] MS_LARGE;
static struct {
	int nbindings;
	int enabled;     /* MEMSHIM_NATIVE_PLT and native targets to bind */
	int unrelocated; /* slots met in an object still being loaded: read it again next time */
} plt_st;
extern char ms_plt_entries[];

/* clang-format off */
__asm__(
"	.pushsection .text.ms_plt,\"ax\",@progbits\n"
"	.p2align 4\n"
"	.globl ms_plt_entries\n"
"	.hidden ms_plt_entries\n"
"ms_plt_entries:\n"
"	.set .Lms_plt_i, 0\n"
"	.rept 256\n"
"	.p2align 4\n"
"	movl $.Lms_plt_i, %r11d\n"
"	jmp ms_plt_common\n"
"	.set .Lms_plt_i, .Lms_plt_i + 1\n"
"	.endr\n"

/* Entered as the target itself would be: arguments in rdi..r9, xmm0..7, al (varargs), r10 (static
 * chain) and on the stack above the return address at (%rsp).  plt_enter gets the entry's index
 * and the address of that return-address slot, and returns the function to continue at. */
"	.p2align 4\n"
"ms_plt_common:\n"
"	.cfi_startproc\n"
"	pushq %rdi\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq %rsi\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq %rdx\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq %rcx\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq %r8\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq %r9\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq %rax\n"
"	.cfi_adjust_cfa_offset 8\n"
"	pushq %r10\n"
"	.cfi_adjust_cfa_offset 8\n"
"	subq $136, %rsp\n"             /* eight xmm registers, and 16-byte alignment for the call */
"	.cfi_adjust_cfa_offset 136\n"
"	movdqu %xmm0, 0(%rsp)\n"
"	movdqu %xmm1, 16(%rsp)\n"
"	movdqu %xmm2, 32(%rsp)\n"
"	movdqu %xmm3, 48(%rsp)\n"
"	movdqu %xmm4, 64(%rsp)\n"
"	movdqu %xmm5, 80(%rsp)\n"
"	movdqu %xmm6, 96(%rsp)\n"
"	movdqu %xmm7, 112(%rsp)\n"
"	movl %r11d, %edi\n"
"	leaq 200(%rsp), %rsi\n"        /* 136 + 8 pushes: the return-address slot */
"	call plt_enter\n"
"	movq %rax, %r11\n"
"	movdqu 0(%rsp), %xmm0\n"
"	movdqu 16(%rsp), %xmm1\n"
"	movdqu 32(%rsp), %xmm2\n"
"	movdqu 48(%rsp), %xmm3\n"
"	movdqu 64(%rsp), %xmm4\n"
"	movdqu 80(%rsp), %xmm5\n"
"	movdqu 96(%rsp), %xmm6\n"
"	movdqu 112(%rsp), %xmm7\n"
"	addq $136, %rsp\n"
"	.cfi_adjust_cfa_offset -136\n"
"	popq %r10\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq %rax\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq %r9\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq %r8\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq %rcx\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq %rdx\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq %rsi\n"
"	.cfi_adjust_cfa_offset -8\n"
"	popq %rdi\n"
"	.cfi_adjust_cfa_offset -8\n"
"	jmp *%r11\n"
"	.cfi_endproc\n"
"	.popsection\n"
);
/* clang-format on */

static uintptr_t entry_addr(int i)
{
	return (uintptr_t)ms_plt_entries + (uintptr_t)i * MS_PLT_ENTRY_SIZE;
}

static int entry_index(uintptr_t addr)
{
	uintptr_t off = addr - (uintptr_t)ms_plt_entries;
	if (off >= (uintptr_t)MS_PLT_ENTRIES * MS_PLT_ENTRY_SIZE || off % MS_PLT_ENTRY_SIZE)
		return -1;
	return (int)(off / MS_PLT_ENTRY_SIZE);
}

/* Static, named by the assembly above (used: the compiler sees no call). */
static __attribute__((used)) uintptr_t plt_enter(int i, uintptr_t *slot)
{
	const struct binding *b = &bindings[i];
	if (ms_tls_guard)
		return b->real; /* a call from inside the shim (a hook of ours called the target) */
	int saved = errno;
	ms_tls_guard++;
	ms_native_enter_call(b->spec, slot);
	ms_tls_guard--;
	errno = saved;
	return b->real;
}

/* The entry for (SPEC, REAL), made when missing; -1 when all are taken. */
static int binding_for(int target, uintptr_t real)
{
	int spec = ms_native_targets[target].spec_stage;
	for (int i = 0; i < plt_st.nbindings; i++)
		if (bindings[i].spec == spec && bindings[i].real == real && !bindings[i].unloaded)
			return i;
	if (plt_st.nbindings == MS_PLT_ENTRIES) {
		static int warned;
		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			ms_warn("native stages: more than %d functions to bind to their calls; the calls of the "
				"rest are not counted",
				MS_PLT_ENTRIES);
		return -1;
	}
	bindings[plt_st.nbindings] = (struct binding){ .spec = spec, .target = target, .real = real };
	__atomic_store_n(&plt_st.nbindings, plt_st.nbindings + 1, __ATOMIC_RELEASE);
	return plt_st.nbindings - 1;
}

static int self_object(const struct link_map *map)
{
	return map == ms_elf_object_of((const void *)plt_enter);
}

struct scan {
	const struct link_map *map; /* the object whose slots are read */
	int target;
	int bound;
	int again; /* a slot whose function is not loaded yet: read the object again after a dlopen */
};

/* What a slot's call reaches: what it holds once bound; a lazily bound slot still points into its
 * own object (the PLT's resolver path): then the symbol SYM as the dynamic linker would find it. */
static uintptr_t real_target(struct scan *sc, uintptr_t held, const char *sym)
{
	const struct link_map *m = ms_elf_object_of((const void *)held);
	if (!m) {
		plt_st.unrelocated = 1; /* not relocated yet: an object another thread is loading */
		return 0;
	}
	if (self_object(m))
		return 0; /* one of our own wrappers (a target named like a hooked function) */
	if (m != sc->map)
		return held;
	uintptr_t real = (uintptr_t)ms_elf_loaded_symbol(sym);
	sc->again |= !real; /* its definition may come with a later dlopen */
	return real;
}

static int target_accepts(const struct ms_target *t, uintptr_t real)
{
	if (!real || (!t->object && !t->runtime_of[0]))
		return real != 0;
	Dl_info info;
	return dladdr((const void *)real, &info) && info.dli_fname && ms_target_object_matches(t, info.dli_fname);
}

static void bind_slot_to(const struct ms_got_object *o, uintptr_t *slot, const char *sym, struct scan *sc)
{
	uintptr_t held = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	int bound = entry_index(held);
	if (bound >= 0) {
		sc->bound++; /* done before (objects are read again after a dlopen), or by another stage */
		if (bindings[bound].spec != ms_native_targets[sc->target].spec_stage)
			ms_native_warn_shared(sym, bindings[bound].real, bindings[bound].target, sc->target);
		return;
	}
	uintptr_t real = real_target(sc, held, sym);
	const struct ms_target *t = &ms_native_targets[sc->target];
	if (!target_accepts(t, real))
		return;
	int i = binding_for(sc->target, real);
	if (i >= 0 && ms_got_write(o, slot, entry_addr(i)) == 0)
		sc->bound++;
}

static int ntargets(void)
{
	return ms_native_ntargets < MS_PLT_MAX_TARGETS ? ms_native_ntargets : MS_PLT_MAX_TARGETS;
}

/* Every target SYM names binds the slot, in target order (the first stage's entry wins). */
static void bind_slot(const struct ms_got_object *o, uintptr_t *slot, const char *sym, void *arg)
{
	struct scan *sc = arg;
	for (int t = 0; t < ntargets(); t++) {
		if (!ms_target_matches(&ms_native_targets[t], sym))
			continue;
		sc->target = t;
		int before = sc->bound;
		bind_slot_to(o, slot, sym, sc);
		if (sc->bound > before) {
			ms_native_targets[t].bound_plt = 1;
			ms_target_set_found(&ms_native_targets[t]);
		}
	}
}

/* The same rules as the symbol tables' (native/names.c): a demangled C++ or Rust name binds the
 * mangled symbols it names; one pass over an object's relocations for all targets. */
static int names_a_target(const char *sym, const void *unused)
{
	(void)unused;
	if (!ms_target_filter_may(&ms_native_filter, sym))
		return 0;
	for (int t = 0; t < ntargets(); t++)
		if (ms_target_matches(&ms_native_targets[t], sym))
			return 1;
	return 0;
}

/* Objects whose slots were all read (their dynamic sections, since the last unload): a dlopen reads
 * only the new ones, so an import of many extensions costs their relocations once, not per import. */
#define SCANNED_SLOTS 4096
static struct {
	const Elf64_Dyn *dyn[SCANNED_SLOTS];
	unsigned long long subs; /* dlpi_subs when the set was started: an unload starts it over */
} scanned MS_LARGE;

static size_t scanned_slot(const Elf64_Dyn *dyn)
{
	return ((uintptr_t)dyn >> 4) * 0x9E3779B97F4A7C15ULL >> 52; /* 12 bits: SCANNED_SLOTS */
}

/* 1 when DYN's object was read before; with ADD, remembers it (a full set reads again). */
static int was_scanned(const Elf64_Dyn *dyn, int add)
{
	for (size_t i = scanned_slot(dyn), n = 0; n < SCANNED_SLOTS; i = (i + 1) % SCANNED_SLOTS, n++) {
		if (scanned.dyn[i] == dyn)
			return 1;
		if (!scanned.dyn[i]) {
			if (add)
				scanned.dyn[i] = dyn;
			return 0;
		}
	}
	return 0;
}

static int bind_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size, (void)arg;
	if (info->dlpi_subs != scanned.subs) {
		memset(scanned.dyn, 0, sizeof scanned.dyn); /* an address may now be another object's */
		scanned.subs = info->dlpi_subs;
	}
	const Elf64_Dyn *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	struct ms_got_object o;
	if (!dyn || was_scanned(dyn, 0) ||
	    ms_got_object_at(info->dlpi_addr, dyn, info->dlpi_phdr, info->dlpi_phnum, &o) < 0)
		return 0;
	const struct link_map *map = ms_elf_object_of(dyn);
	if (!map || self_object(map))
		return 0;
	int unrelocated = plt_st.unrelocated;
	plt_st.unrelocated = 0;
	struct scan sc = { .map = map };
	ms_got_slots_matching(&o, names_a_target, NULL, bind_slot, &sc);
	if (!sc.again && !plt_st.unrelocated)
		was_scanned(dyn, 1);
	plt_st.unrelocated |= unrelocated;
	return 0;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

void ms_plt_bind(void)
{
	static unsigned long long bound_adds = ~0ULL;
	static int busy;
	unsigned long long adds = 0;
	if (!__atomic_load_n(&plt_st.enabled, __ATOMIC_ACQUIRE))
		return;
	dl_iterate_phdr(read_adds, &adds);
	if (adds == __atomic_load_n(&bound_adds, __ATOMIC_ACQUIRE) || __atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return; /* nothing new, or another thread is binding (it or the next call sees the rest) */
	plt_st.unrelocated = 0;
	dl_iterate_phdr(bind_object, NULL);
	__atomic_store_n(&bound_adds, plt_st.unrelocated ? ~0ULL : adds, __ATOMIC_RELEASE);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
}

void ms_plt_forget_unloaded(void)
{
	for (int i = 0; i < plt_st.nbindings; i++)
		if (!ms_elf_object_of((const void *)bindings[i].real))
			bindings[i].unloaded = 1; /* its callers went with it; the address may be reused */
}

/* What dlsym should return for FOUND: our entry when FOUND is a bound function, else FOUND. */
static void *entry_for(void *found)
{
	for (int i = 0; found && i < __atomic_load_n(&plt_st.nbindings, __ATOMIC_ACQUIRE); i++)
		if (bindings[i].real == (uintptr_t)found && !bindings[i].unloaded)
			return (void *)entry_addr(i);
	return found;
}

/* The dlsym hook: binds what a dlopen loaded, then answers a bound function's name with its entry
 * (looked up from here: the program's caller matters only to RTLD_NEXT, never asked here). */
static void *on_dlsym(void *handle, const char *name)
{
	int saved = errno;
	ms_tls_guard++;
	ms_plt_bind();
	void *answer = MS_DLSYM_PASS;
	for (int i = 0; i < plt_st.nbindings && answer == MS_DLSYM_PASS; i++)
		if (!bindings[i].unloaded && ms_target_matches(&ms_native_targets[bindings[i].target], name))
			answer = entry_for(ms_real_dlsym(handle, name));
	ms_tls_guard--;
	errno = saved;
	return answer;
}

void ms_plt_init(void)
{
	if (!ms_cfg.native_plt)
		return;
	__atomic_store_n(&plt_st.enabled, 1, __ATOMIC_RELEASE);
	ms_plt_bind();
	__atomic_store_n(&ms_on_dlsym, on_dlsym, __ATOMIC_RELEASE);
}
