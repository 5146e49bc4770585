/* Symbol lookup in one loaded object's dynamic symbol table, without the dynamic linker's error
 * path: dlsym allocates its error message through the program's malloc when a name is missing,
 * which deadlocks a program whose own allocator calls mmap (our wrapper) under its lock. */
#ifndef MS_ELF_LOOKUP_H
#define MS_ELF_LOOKUP_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

struct link_map;

/* The address of NAME when MAP itself defines it (global or weak, default version); else NULL.
 * No allocation, no locks, no error state. */
void *ms_elf_own_symbol(const struct link_map *map, const char *name);

/* An object's dynamic symbol tables, found once for many lookups (ms_elf_own_symbol finds them
 * anew each time, walking the dynamic section). */
struct ms_elf_tables {
	uintptr_t base;
	const Elf64_Sym *syms;
	const char *strs;
	size_t strsz;
	const uint32_t *gnu_hash, *sysv_hash;
	const Elf64_Half *versym;
};
/* Fills T for MAP, or for the object loaded at BASE with dynamic section DYN (ms_elf_tables_at):
 * 0, or -1 when a table is missing. */
int ms_elf_tables_of(const struct link_map *map, struct ms_elf_tables *t);
int ms_elf_tables_at(uintptr_t base, const Elf64_Dyn *dyn, struct ms_elf_tables *t);
/* The number of symbols in T's table. */
size_t ms_elf_symbol_count(const struct ms_elf_tables *t);
/* NAME in the tables T, as ms_elf_own_symbol. */
void *ms_elf_tables_symbol(const struct ms_elf_tables *t, const char *name);

/* The address of NAME in the first object loaded at start that defines it, libmemshim.so left out,
 * else NULL: a dlsym(RTLD_DEFAULT) whose miss allocates nothing.  The list of objects is walked
 * without the dynamic linker's lock: for constructors, where nothing else loads or unloads. */
void *ms_elf_loaded_symbol(const char *name);

/* Whether the program's own PT_NOTE segments hold a note NAME of type TYPE (Go's build id: "Go", 4). */
int ms_elf_program_has_note(const char *name, unsigned type);

/* The loaded object that contains ADDR, or NULL. */
const struct link_map *ms_elf_object_of(const void *addr);

/* The file PATH mapped read-only through raw system calls (no allocation, no stdio), its size in
 * *SIZE; NULL when it cannot be opened or mapped or is shorter than an ELF header.  The caller
 * unmaps it (SYS_munmap, *SIZE bytes). */
const unsigned char *ms_elf_map_file(const char *path, size_t *size);

/* Whether the ELF file PATH has a section of type TYPE (1 or 0), read from its headers alone (two
 * small reads, nothing mapped); -1 when it cannot be read as a 64-bit ELF file. */
int ms_elf_file_has_section(const char *path, Elf64_Word type);

/* The section headers of the 64-bit ELF image MAP (SIZE bytes), their count in *N; NULL when MAP is
 * not one or its table does not lie inside it. */
const Elf64_Shdr *ms_elf_sections(const unsigned char *map, size_t size, Elf64_Half *n);

#endif
