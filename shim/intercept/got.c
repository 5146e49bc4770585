/* Calls through the GOT: the relocations by which one loaded object calls or takes the address of
 * a function another object (or itself, through its own PLT) defines, found by symbol name and
 * rewritten in place, the technique memray uses to install its hooks at run time.  Jump slots
 * (calls through the PLT) and GLOB_DAT entries of function symbols (calls of -fno-plt code and
 * addresses taken in position-independent code) are read; R_X86_64_64 words in data (tables of
 * function pointers) are left alone.  A slot inside the object's RELRO segment (-z now, BIND_NOW:
 * read-only once relocated) is made writable for the one store and read-only again. */
#include <elf.h>
#include <errno.h>
#include <sys/uio.h>
#include <link.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/sandbox.h"
#include "core/sys.h"
#include "intercept/got.h"

#define PAGE 4096u

/* The dynamic linker relocates these entries in place, except in objects such as the vDSO. */
static uintptr_t dyn_addr(uintptr_t base, Elf64_Addr v)
{
	return v < base ? v + base : v;
}

static int same_name(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

int ms_got_object_at(uintptr_t base, const Elf64_Dyn *dyn, const Elf64_Phdr *ph, int phnum, struct ms_got_object *o)
{
	*o = (struct ms_got_object){ .base = base };
	for (int i = 0; ph && i < phnum; i++)
		if (ph[i].p_type == PT_GNU_RELRO) {
			o->relro_lo = (base + ph[i].p_vaddr) & ~(uintptr_t)(PAGE - 1);
			o->relro_hi = (base + ph[i].p_vaddr + ph[i].p_memsz) & ~(uintptr_t)(PAGE - 1);
		}
	for (const Elf64_Dyn *d = dyn; d && d->d_tag != DT_NULL; d++)
		switch (d->d_tag) {
		/* clang-format off */
		case DT_SYMTAB: o->syms = (const Elf64_Sym *)dyn_addr(base, d->d_un.d_ptr); break;
		case DT_STRTAB: o->strs = (const char *)dyn_addr(base, d->d_un.d_ptr); break;
		case DT_JMPREL: o->jmprel = (const Elf64_Rela *)dyn_addr(base, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: o->njmprel = d->d_un.d_val / sizeof(Elf64_Rela); break;
		case DT_PLTREL: o->plt_is_rela = d->d_un.d_val == DT_RELA; break;
		case DT_RELA: o->rela = (const Elf64_Rela *)dyn_addr(base, d->d_un.d_ptr); break;
		case DT_RELASZ: o->nrela = d->d_un.d_val / sizeof(Elf64_Rela); break;
		case DT_RELACOUNT: o->nrelative = d->d_un.d_val; break;
		default: break;
			/* clang-format on */
		}
	if (!o->plt_is_rela)
		o->njmprel = 0; /* x86-64 objects use RELA; anything else is not ours to read */
	return o->syms && o->strs ? 0 : -1;
}

/* The relocation R of O, when it is a call or a function's address whose symbol MATCH accepts: its
 * slot, and the symbol's name in *SYM_NAME. */
static uintptr_t *slot_of(const struct ms_got_object *o, const Elf64_Rela *r, ms_got_match match, const void *key,
			  const char **sym_name)
{
	uint32_t type = ELF64_R_TYPE(r->r_info), sym = ELF64_R_SYM(r->r_info);
	if (sym == 0 || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT))
		return NULL;
	const Elf64_Sym *s = &o->syms[sym];
	if (type == R_X86_64_GLOB_DAT && ELF64_ST_TYPE(s->st_info) != STT_FUNC &&
	    ELF64_ST_TYPE(s->st_info) != STT_GNU_IFUNC &&
	    !(s->st_shndx == SHN_UNDEF && ELF64_ST_TYPE(s->st_info) == STT_NOTYPE))
		return NULL;
	*sym_name = o->strs + s->st_name;
	return match(*sym_name, key) ? (uintptr_t *)(o->base + r->r_offset) : NULL;
}

static int visit_table(const struct ms_got_object *o, const Elf64_Rela *r, size_t n, ms_got_match match,
		       const void *key, ms_got_visit visit, void *arg)
{
	int found = 0;
	for (size_t i = 0; r && i < n; i++) {
		const char *sym = NULL;
		uintptr_t *slot = slot_of(o, &r[i], match, key, &sym);
		if (slot) {
			found++;
			visit(o, slot, sym, arg);
		}
	}
	return found;
}

int ms_got_slots_matching(const struct ms_got_object *o, ms_got_match match, const void *key, ms_got_visit visit,
			  void *arg)
{
	size_t skip = o->nrelative < o->nrela ? o->nrelative : o->nrela; /* most of a big object's */
	return visit_table(o, o->jmprel, o->njmprel, match, key, visit, arg) +
	       visit_table(o, o->rela ? o->rela + skip : NULL, o->nrela - skip, match, key, visit, arg);
}

static int named(const char *sym, const void *name)
{
	return same_name(sym, name);
}

int ms_got_slots(const struct ms_got_object *o, const char *name, ms_got_visit visit, void *arg)
{
	return ms_got_slots_matching(o, named, name, visit, arg);
}

/* Writes VALUE at SLOT through the kernel, which honours the page's protection: 1 when written, 0
 * when the page is read-only, -1 when the call is not available (a sandbox refusing it). */
static int write_if_writable(uintptr_t *slot, uintptr_t value)
{
	struct iovec local = { &value, sizeof value }, remote = { slot, sizeof value };
	long n = syscall(SYS_process_vm_writev, (long)ms_sys_getpid(), &local, 1UL, &remote, 1UL, 0UL);
	if (n == (long)sizeof value)
		return 1;
	return errno == EFAULT ? 0 : -1;
}

int ms_got_write(const struct ms_got_object *o, uintptr_t *slot, uintptr_t value)
{
	uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(PAGE - 1);
	if (page < o->relro_lo || page >= o->relro_hi) {
		__atomic_store_n(slot, value, __ATOMIC_RELEASE);
		return 0;
	}
	if (ms_sandboxed())
		return -1; /* the calls below may be what the sandbox kills on */
	if (write_if_writable(slot, value) == 1)
		return 0; /* not protected yet: the dynamic linker protects it when done */
	if (syscall(SYS_mprotect, page, PAGE, PROT_READ | PROT_WRITE) != 0)
		return -1;
	__atomic_store_n(slot, value, __ATOMIC_RELEASE);
	syscall(SYS_mprotect, page, PAGE, PROT_READ);
	return 0;
}
