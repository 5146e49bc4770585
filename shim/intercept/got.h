/* Calls through the GOT of one loaded object (intercept/got.c): found by symbol name, rewritten in
 * place.  No allocation, no locks, no stdio: usable from a constructor and from hooks. */
#ifndef MS_NATIVE_GOT_H
#define MS_NATIVE_GOT_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

/* What one object's dynamic section says about its relocations. */
struct ms_got_object {
	uintptr_t base;
	const Elf64_Sym *syms;
	const char *strs;
	const Elf64_Rela *jmprel, *rela;  /* PLT relocations, other dynamic relocations */
	size_t njmprel, nrela, nrelative; /* the first NRELATIVE of RELA are R_X86_64_RELATIVE */
	int plt_is_rela;
	uintptr_t relro_lo, relro_hi; /* pages read-only once relocated */
};

/* Fills O for the object loaded at BASE (dynamic section DYN, program headers PH): 0, or -1 when it
 * has no dynamic symbol table. */
int ms_got_object_at(uintptr_t base, const Elf64_Dyn *dyn, const Elf64_Phdr *ph, int phnum, struct ms_got_object *o);

/* Visits SLOT of O, a call of (or address taken of) the function whose symbol is SYM. */
typedef void (*ms_got_visit)(const struct ms_got_object *o, uintptr_t *slot, const char *sym, void *arg);
/* Whether symbol SYM is one the caller looks for (KEY: what it looks for). */
typedef int (*ms_got_match)(const char *sym, const void *key);
/* Calls VISIT for every jump slot and GLOB_DAT slot of O that names the function NAME; returns
 * their number. */
int ms_got_slots(const struct ms_got_object *o, const char *name, ms_got_visit visit, void *arg);
/* The same for every slot whose function's symbol MATCH accepts (demangled C++ or Rust names). */
int ms_got_slots_matching(const struct ms_got_object *o, ms_got_match match, const void *key, ms_got_visit visit,
			  void *arg);

/* Stores VALUE in SLOT of O: 0, or -1 (errno set).  A page the dynamic linker has made read-only
 * (RELRO, once the object is relocated) is made writable for the store and read-only again; a page
 * still writable is written as it is, so an object another thread is relocating keeps its pages. */
int ms_got_write(const struct ms_got_object *o, uintptr_t *slot, uintptr_t value);

#endif
