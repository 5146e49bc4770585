/* Dynamic symbol lookup in memory (see elf.h): the GNU hash table when present, else the
 * System V one; symbols hidden behind a non-default version (compat symbols such as glibc's
 * cfree) are not found, just as dlsym would not find them. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/elfnote.h"
#include "core/sandbox.h"
#include "intercept/elf.h"

/* The dynamic linker relocates these entries in place, except in objects such as the vDSO. */
static const void *dyn_ptr(uintptr_t base, Elf64_Addr v)
{
	return (const void *)(v < base ? v + base : v);
}

int ms_elf_tables_at(uintptr_t base, const Elf64_Dyn *dyn, struct ms_elf_tables *t)
{
	*t = (struct ms_elf_tables){ .base = base };
	for (const Elf64_Dyn *d = dyn; d && d->d_tag != DT_NULL; d++) {
		const void *p = dyn_ptr(base, d->d_un.d_ptr);
		switch (d->d_tag) {
		/* clang-format off */
		case DT_SYMTAB: t->syms = p; break;
		case DT_STRTAB: t->strs = p; break;
		case DT_STRSZ: t->strsz = d->d_un.d_val; break;
		case DT_GNU_HASH: t->gnu_hash = p; break;
		case DT_HASH: t->sysv_hash = p; break;
		case DT_VERSYM: t->versym = p; break;
		default: break;
			/* clang-format on */
		}
	}
	return t->syms && t->strs && (t->gnu_hash || t->sysv_hash) ? 0 : -1;
}

int ms_elf_tables_of(const struct link_map *map, struct ms_elf_tables *t)
{
	return map ? ms_elf_tables_at(map->l_addr, map->l_ld, t) : -1;
}

/* Our own compare: a sanitizer runtime intercepts strcmp and may not be initialised yet. */
static int same_name(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static void *accept(const struct ms_elf_tables *t, uint32_t i, const char *name)
{
	const Elf64_Sym *s = &t->syms[i];
	int bind = ELF64_ST_BIND(s->st_info), type = ELF64_ST_TYPE(s->st_info);
	if (s->st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) ||
	    !same_name(t->strs + s->st_name, name))
		return NULL;
	if (t->versym && ((t->versym[i] & 0x8000) || t->versym[i] == 0)) /* hidden version, or local */
		return NULL;
	void *addr = (void *)(t->base + s->st_value);
	if (type == STT_GNU_IFUNC) /* the resolver picks the implementation, as the linker would */
		addr = ((void *(*)(void))addr)();
	return addr;
}

static uint32_t gnu_hash_of(const char *s)
{
	uint32_t h = 5381;
	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* Whether the GNU hash table's Bloom filter (H: its header) may hold HASH: no false negatives, so
 * a name it rules out is in no chain (most lookups are of names the object lacks). */
static int bloom_may_hold(const uint32_t *h, uint32_t hash)
{
	uint32_t words = h[2], shift = h[3];
	if (!words)
		return 1;
	const Elf64_Addr *bloom = (const Elf64_Addr *)(h + 4);
	Elf64_Addr word = bloom[(hash / 64) % words];
	Elf64_Addr mask = ((Elf64_Addr)1 << (hash % 64)) | ((Elf64_Addr)1 << ((hash >> (shift % 32)) % 64));
	return (word & mask) == mask;
}

static void *gnu_lookup(const struct ms_elf_tables *t, const char *name)
{
	const uint32_t *h = t->gnu_hash;
	uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
	const uint32_t *buckets = (const uint32_t *)((const Elf64_Addr *)(h + 4) + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t hash = gnu_hash_of(name);
	if (!nbuckets || !bloom_may_hold(h, hash))
		return NULL;
	for (uint32_t i = buckets[hash % nbuckets]; i >= symoffset && i; i++) {
		uint32_t ch = chain[i - symoffset];
		if ((ch | 1) == (hash | 1)) {
			void *p = accept(t, i, name);
			if (p)
				return p;
		}
		if (ch & 1)
			break;
	}
	return NULL;
}

static uint32_t sysv_hash_of(const char *s)
{
	uint32_t h = 0;
	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		uint32_t g = h & 0xf0000000u;
		h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static void *sysv_lookup(const struct ms_elf_tables *t, const char *name)
{
	uint32_t nbuckets = t->sysv_hash[0], nchain = t->sysv_hash[1];
	const uint32_t *buckets = t->sysv_hash + 2, *chain = buckets + nbuckets;
	if (!nbuckets)
		return NULL;
	for (uint32_t i = buckets[sysv_hash_of(name) % nbuckets], n = 0; i && i < nchain && n < nchain;
	     i = chain[i], n++) {
		void *p = accept(t, i, name);
		if (p)
			return p;
	}
	return NULL;
}

/* The System V hash table says; the GNU one's highest chain ends at the last symbol. */
size_t ms_elf_symbol_count(const struct ms_elf_tables *t)
{
	if (!t->gnu_hash)
		return t->sysv_hash[1];
	const uint32_t *h = t->gnu_hash;
	uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2], last = 0;
	const uint32_t *buckets = (const uint32_t *)((const Elf64_Addr *)(h + 4) + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	for (uint32_t b = 0; b < nbuckets; b++)
		last = buckets[b] > last ? buckets[b] : last;
	if (last < symoffset)
		return symoffset;
	while (!(chain[last - symoffset] & 1))
		last++;
	return (size_t)last + 1;
}

int ms_elf_file_has_section(const char *path, Elf64_Word type)
{
	if (ms_sandboxed())
		return -1;
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	Elf64_Shdr sh[32]; /* 2 KiB of stack: the report may be written from a signal handler */
	int found = -1;
	if (syscall(SYS_pread64, fd, &eh, sizeof eh, 0) == (long)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr)) {
		found = 0;
		for (Elf64_Half i = 0; i < eh.e_shnum && found == 0; i += 32) {
			Elf64_Half k = eh.e_shnum - i < 32 ? eh.e_shnum - i : 32;
			if (syscall(SYS_pread64, fd, sh, k * sizeof *sh, eh.e_shoff + i * sizeof *sh) !=
			    (long)(k * sizeof *sh)) {
				found = -1;
				break;
			}
			for (Elf64_Half j = 0; j < k; j++)
				found |= sh[j].sh_type == type;
		}
	}
	syscall(SYS_close, fd);
	return found;
}

void *ms_elf_tables_symbol(const struct ms_elf_tables *t, const char *name)
{
	return t->gnu_hash ? gnu_lookup(t, name) : sysv_lookup(t, name);
}

void *ms_elf_own_symbol(const struct link_map *map, const char *name)
{
	struct ms_elf_tables t;
	return ms_elf_tables_of(map, &t) < 0 ? NULL : ms_elf_tables_symbol(&t, name);
}

/* Whether ADDR lies in a loadable segment of the object whose program headers are PH (N of them),
 * loaded with bias BIAS. */
static int in_segments(const Elf64_Phdr *ph, int n, uintptr_t bias, uintptr_t addr)
{
	for (int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && addr - (bias + ph[i].p_vaddr) < ph[i].p_memsz)
			return 1;
	return 0;
}

/* Whether MAP contains ADDR, from its program headers: the auxiliary vector's for the program
 * (MAP first in the list), else the ELF header at its load address (shared objects map it there). */
static int contains(const struct link_map *map, uintptr_t addr)
{
	if (map == _r_debug.r_map) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
		int n = (int)getauxval(AT_PHNUM);
		for (int i = 0; ph && i < n; i++)
			if (ph[i].p_type == PT_PHDR)
				return in_segments(ph, n, (uintptr_t)ph - ph[i].p_vaddr, addr);
		return -1;
	}
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)map->l_addr;
	if (!map->l_addr || eh->e_ident[EI_MAG0] != ELFMAG0 || eh->e_ident[EI_MAG1] != ELFMAG1 ||
	    eh->e_ident[EI_MAG2] != ELFMAG2 || eh->e_ident[EI_MAG3] != ELFMAG3 || eh->e_phentsize != sizeof(Elf64_Phdr))
		return -1;
	return in_segments((const Elf64_Phdr *)(map->l_addr + eh->e_phoff), eh->e_phnum, map->l_addr, addr);
}

/* dladdr1 would also look for the nearest symbol, a scan of the object's whole symbol table
 * (about 70K instructions for the C library, four times at every start), and dl_iterate_phdr is
 * intercepted by sanitizer runtimes that may not be initialised yet (their dlsym comes here): the
 * object is the one loaded highest at or below ADDR, confirmed from its program headers. */
const struct link_map *ms_elf_object_of(const void *addr)
{
	const struct link_map *best = NULL;
	for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next)
		if (m->l_addr <= (uintptr_t)addr && (!best || m->l_addr >= best->l_addr))
			best = m;
	if (addr && best && contains(best, (uintptr_t)addr) > 0)
		return best;
	Dl_info info; /* not confirmed (another namespace, an unusual layout): ask the dynamic linker */
	struct link_map *map = NULL;
	return addr && dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) ? map : NULL;
}

void *ms_elf_loaded_symbol(const char *name)
{
	const struct link_map *self = ms_elf_object_of((const void *)ms_elf_loaded_symbol);
	for (const struct link_map *m = _r_debug.r_map; m; m = m->l_next) {
		void *found = m == self ? NULL : ms_elf_own_symbol(m, name);
		if (found)
			return found;
	}
	return NULL;
}

const unsigned char *ms_elf_map_file(const char *path, size_t *size)
{
	if (ms_sandboxed())
		return NULL;
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	long mapped = -1;
	if (syscall(SYS_fstat, fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
		mapped = syscall(SYS_mmap, NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	syscall(SYS_close, fd);
	if (mapped < 0 && mapped > -4096) /* failed, or never tried */
		return NULL;
	*size = (size_t)st.st_size;
	return (const unsigned char *)mapped;
}

const Elf64_Shdr *ms_elf_sections(const unsigned char *map, size_t size, Elf64_Half *n)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff >= size ||
	    eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr))
		return NULL;
	*n = eh->e_shnum;
	return (const Elf64_Shdr *)(map + eh->e_shoff);
}

int ms_elf_program_has_note(const char *name, unsigned type)
{
	const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
	int n = (int)getauxval(AT_PHNUM);
	uintptr_t bias = 0;
	for (int i = 0; ph && i < n; i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
	for (int i = 0; ph && i < n; i++) {
		size_t len;
		if (ph[i].p_type == PT_NOTE && ms_note_find((const unsigned char *)(bias + ph[i].p_vaddr),
							    ph[i].p_memsz, ph[i].p_align, name, type, &len))
			return 1;
	}
	return 0;
}
