/* Symbol lookup in one loaded object's dynamic symbol table, without the dynamic linker's error
 * path: dlsym allocates its error message through the program's malloc when a name is missing,
 * which deadlocks a program whose own allocator calls mmap (our wrapper) under its lock. */
#ifndef MS_ELF_LOOKUP_H
#define MS_ELF_LOOKUP_H

struct link_map;

/* The address of NAME when MAP itself defines it (global or weak, default version); else NULL.
 * No allocation, no locks, no error state. */
void *ms_elf_own_symbol(const struct link_map *map, const char *name);

/* The loaded object that contains ADDR, or NULL. */
const struct link_map *ms_elf_object_of(const void *addr);

#endif
