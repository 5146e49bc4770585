/* Resolution: the address ranges of every function a native target names, from the symbol tables
 * (.symtab and .dynsym) of each loaded object's file, so a plain `gcc -g` program works without
 * -rdynamic; dlsym fills in dynamic symbols of objects whose file cannot be read.  Objects loaded
 * or unloaded later are noticed through dl_iterate_phdr's load/unload counters and only they are
 * read.  Runs inside allocation hooks: raw syscalls and static or raw-mapped memory only. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "native/native.h"

#define MAX_OBJS 4096
#define PATH_POOL ((size_t)256 * 1024)
#define MAX_STRIPPED 8

uintptr_t ms_self_lo, ms_self_hi;
static uintptr_t self_base; /* load address of libmemshim.so: never searched for targets */

struct objrec {
	uintptr_t base;
	uint64_t hash;
	unsigned gen;
};

struct mrange {
	uintptr_t lo, hi;
	int stage;
	uintptr_t obj;
};

struct current {
	uintptr_t base;
	const char *path;
};

static struct objrec objs[MAX_OBJS] MS_LARGE;
static int nobjs;
static unsigned gen;
static struct mrange *master;
static size_t nmaster, capmaster;
static struct ms_syms_table *published;
static unsigned long long seen_adds = ~0ULL, seen_subs;
static int lock_word;
static struct current cur[MAX_OBJS] MS_LARGE;
static int ncur;
static char path_pool[PATH_POOL] MS_LARGE;
static size_t path_used;
static char exe_path[1024] MS_LARGE;
static char stripped[MAX_STRIPPED][256] MS_LARGE;
static int nstripped;

static uint64_t hash_of(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static int add_range(uintptr_t lo, uintptr_t hi, int stage, uintptr_t obj)
{
	if (nmaster == capmaster) {
		size_t cap = capmaster ? capmaster * 2 : 256;
		struct mrange *m = ms_raw_map(cap * sizeof *m);
		if (!m)
			return -1;
		if (master) {
			memcpy(m, master, nmaster * sizeof *m);
			syscall(SYS_munmap, master, capmaster * sizeof *m);
		}
		master = m;
		capmaster = cap;
	}
	master[nmaster++] = (struct mrange){ lo, hi, stage, obj };
	return 0;
}

/* Whether the SIZE bytes of code at ADDR end in a jump out of them (a tail call: `jmp fill` at
 * -O2): the function's frame is gone while the callee runs, so the stack cannot show it. */
static int ends_in_tail_call(uintptr_t addr, size_t size)
{
	const unsigned char *c = (const unsigned char *)addr;
	uintptr_t end = addr + size;
	if (size >= 5 && c[size - 5] == 0xe9) { /* jmp rel32 */
		int32_t rel;
		memcpy(&rel, c + size - 4, sizeof rel);
		uintptr_t to = end + (intptr_t)rel;
		return to < addr || to >= end;
	}
	if (size >= 2 && c[size - 2] == 0xeb) { /* jmp rel8 */
		uintptr_t to = end + (intptr_t)(int8_t)c[size - 1];
		return to < addr || to >= end;
	}
	if (size >= 6 && c[size - 6] == 0xff && c[size - 5] == 0x25) /* jmp *callee@GOTPCREL(%rip) */
		return 1;
	if (size >= 2 && c[size - 2] == 0xff && (c[size - 1] & 0xf8) == 0xe0) /* jmp *%reg */
		return 1;
	return 0;
}

/* ---- reading one object's symbol tables ------------------------------------------------------ */

/* Whether a target bound through the GOT is still looked for on the stack: a C++ or Rust function
 * (demangled or mangled) may be reached through a vtable or a direct call the GOT never sees. */
static int also_from_stack(const struct ms_target *t)
{
	return t->kind != MS_TK_PLAIN || (t->name[0] == '_' && (t->name[1] == 'Z' || t->name[1] == 'R'));
}

/* The object whose symbols are read: its path and load address; INTERPRETER: it defines Python's
 * C API (libpython, or a python executable built with it), whose functions a plain name never
 * binds in a Python process, static ones included (libpython3.12's advance, a script's advance()). */
struct loaded {
	const char *path;
	uintptr_t base;
	int interpreter;
};

/* Adds the range of function NAME (at ADDR in the file) for every target naming it; a function two
 * stages name goes to the first (as its calls through the GOT do), with a warning. */
static void match_symbol(const char *name, uintptr_t addr, size_t size, void *arg)
{
	const struct loaded *o = arg;
	const char *path = o->path;
	uintptr_t base = o->base;
	addr += base;
	if (!ms_target_filter_may(&ms_native_filter, name))
		return;
	int first = -1;
	for (int i = 0; i < ms_native_ntargets; i++) {
		struct ms_target *t = &ms_native_targets[i];
		if (t->stage < 0 || (t->bound_plt && !also_from_stack(t)) || (o->interpreter && !t->object) ||
		    !ms_target_matches(t, name) || !ms_target_object_matches(t, path))
			continue;
		if (first >= 0 && ms_native_targets[first].stage != t->stage) {
			ms_native_warn_shared(name, addr, first, i);
			ms_target_set_found(t); /* found, and warned about: not "found nowhere" at exit */
			continue;
		}
		first = first < 0 ? i : first;
		if (!t->found) /* where a target was found from the symbol tables, once (the first range) */
			ms_debug("native target %s: %s in %s", t->text, name, path);
		if (add_range(addr, addr + (size ? size : 1), t->stage, base) == 0)
			ms_target_set_found(t);
		if (size && !strstr(name, ".cold") && ends_in_tail_call(addr, size))
			t->tail_call = 1;
	}
}

/* The versions of the N symbols of .dynsym section DYN (index DYN_AT), or NULL. */
static const Elf64_Half *versions_of(const unsigned char *map, size_t size, const Elf64_Shdr *sh, Elf64_Half nsh,
				     int dyn_at, size_t n)
{
	for (int i = 0; i < nsh; i++)
		if (sh[i].sh_type == SHT_GNU_versym && sh[i].sh_link == (Elf64_Word)dyn_at && sh[i].sh_offset <= size &&
		    sh[i].sh_size <= size - sh[i].sh_offset && sh[i].sh_size >= n * sizeof(Elf64_Half))
			return (const Elf64_Half *)(map + sh[i].sh_offset);
	return NULL;
}

/* FN for each function a symbol table section SH (its strings STR) defines, but those of .dynsym
 * hidden behind a non-default version (VERSYM: glibc's compat step@GLIBC_2.2.5 of regexp.h, which
 * no program binds by its name: a Python function named step must not make every allocation
 * look at the stack).  Inlined into each caller, so that match_symbol's filter runs inline for
 * each of an object's many symbols. */
static inline __attribute__((always_inline)) void scan_symtab(const unsigned char *map, size_t size,
							      const Elf64_Shdr *sh, const Elf64_Shdr *str,
							      const Elf64_Half *versym, ms_symbol_fn fn, void *arg)
{
	if (sh->sh_offset > size || sh->sh_size > size - sh->sh_offset || sh->sh_entsize != sizeof(Elf64_Sym) ||
	    str->sh_offset > size || str->sh_size > size - str->sh_offset || str->sh_type != SHT_STRTAB)
		return;
	const Elf64_Sym *sym = (const Elf64_Sym *)(map + sh->sh_offset);
	const char *strs = (const char *)(map + str->sh_offset);
	size_t n = sh->sh_size / sizeof *sym;
	for (size_t i = 0; i < n; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF || !sym[i].st_value ||
		    sym[i].st_name >= str->sh_size ||
		    !memchr(strs + sym[i].st_name, 0, str->sh_size - sym[i].st_name) ||
		    (versym && (versym[i] & 0x8000)))
			continue;
		fn(strs + sym[i].st_name, sym[i].st_value, sym[i].st_size, arg);
	}
}

static int system_path(const char *p)
{
	return !strncmp(p, "/lib/", 5) || !strncmp(p, "/lib64/", 7) || !strncmp(p, "/usr/lib", 8);
}

static void note_stripped(const char *path)
{
	if (nstripped < MAX_STRIPPED && strlen(path) < sizeof stripped[0])
		strcpy(stripped[nstripped++], path);
}

static inline __attribute__((always_inline)) int each_function(const char *path, int with_dynsym, ms_symbol_fn fn,
							       void *arg)
{
	size_t size;
	const unsigned char *map = ms_elf_map_file(path, &size);
	if (!map)
		return -1;
	int has_symtab = 0;
	Elf64_Half nsh = 0;
	const Elf64_Shdr *sh = ms_elf_sections(map, size, &nsh);
	for (int i = 0; i < nsh; i++) {
		if ((sh[i].sh_type != SHT_SYMTAB && (sh[i].sh_type != SHT_DYNSYM || !with_dynsym)) ||
		    sh[i].sh_link >= nsh)
			continue;
		has_symtab |= sh[i].sh_type == SHT_SYMTAB;
		const Elf64_Half *versym =
			sh[i].sh_type == SHT_DYNSYM && sh[i].sh_entsize == sizeof(Elf64_Sym)
				? versions_of(map, size, sh, nsh, i, sh[i].sh_size / sizeof(Elf64_Sym))
				: NULL;
		scan_symtab(map, size, &sh[i], &sh[sh[i].sh_link], versym, fn, arg);
	}
	syscall(SYS_munmap, map, size);
	return has_symtab;
}

int ms_syms_each_function(const char *path, int with_dynsym, ms_symbol_fn fn, void *arg)
{
	return each_function(path, with_dynsym, fn, arg);
}

/* Whether the object loaded at BASE defines Python's C API (looked up each time: a native program
 * may load the interpreter later). */
static int is_interpreter(uintptr_t base)
{
	void *py = ms_elf_loaded_symbol("Py_IsInitialized");
	const struct link_map *m = py ? ms_elf_object_of(py) : NULL;
	return m && m->l_addr == base;
}

/* Reads PATH (loaded at BASE) and adds the ranges of matching functions. */
static void read_object(const char *path, uintptr_t base, int is_exe)
{
	struct loaded o = { path, base, is_interpreter(base) };
	if (each_function(path, 1, match_symbol, &o) == 0 && (is_exe || !system_path(path)))
		note_stripped(path);
}

/* ---- the set of loaded objects --------------------------------------------------------------- */

static int read_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *c = arg;
	if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
		return 1;
	c[0] = info->dlpi_adds;
	c[1] = info->dlpi_subs;
	return 1; /* the counters are the same in every call: stop after the first */
}

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	int *first = arg;
	const char *name = info->dlpi_name;
	if (*first && (!name || !*name))
		name = exe_path;
	*first = 0;
	/* the shim's own functions (run, call, push, ...) are never the program's targets */
	if (!name || !*name || ncur == MAX_OBJS || (self_base && info->dlpi_addr == self_base))
		return 0;
	size_t n = strlen(name) + 1;
	if (path_used + n > PATH_POOL)
		return 0;
	memcpy(path_pool + path_used, name, n);
	cur[ncur].base = info->dlpi_addr;
	cur[ncur].path = path_pool + path_used;
	path_used += n;
	ncur++;
	return 0;
}

static int cmp_range(const struct ms_syms_range *a, const struct ms_syms_range *b)
{
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Insertion sort: the table is small and this runs rarely. */
static void sort_ranges(struct ms_syms_range *r, int n)
{
	for (int i = 1; i < n; i++) {
		struct ms_syms_range v = r[i];
		int j = i;
		for (; j > 0 && cmp_range(&r[j - 1], &v) > 0; j--)
			r[j] = r[j - 1];
		r[j] = v;
	}
}

/* Publishes the master list as a new sorted table; old tables stay mapped (readers may hold them). */
static void publish(void)
{
	size_t bytes = sizeof(struct ms_syms_table) + (nmaster ? nmaster : 1) * sizeof(struct ms_syms_range);
	struct ms_syms_table *t = ms_raw_map(bytes);
	if (!t)
		return;
	int n = 0;
	for (size_t i = 0; i < nmaster; i++)
		t->r[n++] = (struct ms_syms_range){ master[i].lo, master[i].hi, master[i].stage };
	sort_ranges(t->r, n);
	int u = 0;
	for (int i = 0; i < n; i++)
		if (!u || t->r[u - 1].lo != t->r[i].lo || t->r[u - 1].stage != t->r[i].stage)
			t->r[u++] = t->r[i];
	t->n = u;
	t->lo = u ? t->r[0].lo : 0;
	t->hi = 0;
	for (int i = 0; i < u; i++)
		if (t->r[i].hi > t->hi)
			t->hi = t->r[i].hi;
	__atomic_store_n(&published, t, __ATOMIC_RELEASE);
}

static int known_object(uintptr_t base, uint64_t h)
{
	for (int i = 0; i < nobjs; i++)
		if (objs[i].base == base && objs[i].hash == h) {
			objs[i].gen = gen;
			return 1;
		}
	return 0;
}

/* Drops the records and ranges of objects that are gone. */
static void forget_unloaded(void)
{
	int j = 0;
	for (int i = 0; i < nobjs; i++) {
		if (objs[i].gen == gen) {
			objs[j++] = objs[i];
			continue;
		}
		size_t k = 0;
		for (size_t r = 0; r < nmaster; r++)
			if (master[r].obj != objs[i].base)
				master[k++] = master[r];
		nmaster = k;
	}
	nobjs = j;
}

static void update_locked(void)
{
	ncur = 0;
	path_used = 0;
	int first = 1;
	dl_iterate_phdr(collect, &first);
	gen++;
	for (int i = 0; i < ncur; i++) {
		uint64_t h = hash_of(cur[i].path);
		if (known_object(cur[i].base, h) || nobjs == MAX_OBJS)
			continue;
		objs[nobjs++] = (struct objrec){ cur[i].base, h, gen };
		read_object(cur[i].path, cur[i].base, cur[i].path == path_pool && !strcmp(cur[i].path, exe_path));
	}
	forget_unloaded();
	publish();
}

static int try_lock(void)
{
	return !__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE);
}

static void unlock(void)
{
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}

int ms_syms_refresh(void)
{
	unsigned long long c[2] = { 0, 0 };
	dl_iterate_phdr(read_counters, c);
	if (c[0] == __atomic_load_n(&seen_adds, __ATOMIC_ACQUIRE) &&
	    c[1] == __atomic_load_n(&seen_subs, __ATOMIC_RELAXED))
		return 0;
	if (!try_lock())
		return 1; /* another thread is reading the new objects */
	if (c[0] != seen_adds || c[1] != seen_subs) {
		if (c[1] != seen_subs)
			ms_cfi_forget();
		update_locked();
		__atomic_store_n(&seen_subs, c[1], __ATOMIC_RELAXED);
		__atomic_store_n(&seen_adds, c[0], __ATOMIC_RELEASE);
	}
	unlock();
	return 1;
}

/* Dynamic symbols of objects whose file could not be read (deleted, in memory only). */
static void dlsym_fallback(void)
{
	for (int i = 0; i < ms_native_ntargets; i++) {
		struct ms_target *t = &ms_native_targets[i];
		if (t->found || t->stage < 0 || t->kind != MS_TK_PLAIN || t->runtime_of[0])
			continue;
		void *a = ms_real_dlsym(RTLD_DEFAULT, t->name);
		Dl_info info;
		const ElfW(Sym) *sym = NULL;
		if (!a || !dladdr1(a, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !info.dli_fname ||
		    (self_base && (uintptr_t)info.dli_fbase == self_base) || ELF64_ST_TYPE(sym->st_info) != STT_FUNC ||
		    !ms_target_object_matches(t, info.dli_fname))
			continue;
		if (add_range((uintptr_t)a, (uintptr_t)a + (sym->st_size ? sym->st_size : 1), t->stage,
			      (uintptr_t)info.dli_fbase) == 0)
			ms_target_set_found(t);
	}
}

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t me = (uintptr_t)ms_tramp_base;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && me >= lo && me < hi) {
			self_base = info->dlpi_addr;
			ms_self_lo = lo;
			ms_self_hi = hi;
			return 1;
		}
	}
	return 0;
}

/* A C++ name whose mangled form is not built here (template arguments other than builtin types
 * and plain class names) would match nothing: said at start, with what to write instead. */
static void warn_unmatchable(void)
{
	for (int i = 0; i < ms_native_ntargets; i++) {
		const struct ms_target *t = &ms_native_targets[i];
		if (t->kind == MS_TK_CXX && t->nprefix == 0)
			ms_warn("native stage %s: '%s' cannot be matched (template arguments other than builtin "
				"types, pointers and class names at global scope are not read): name the template "
				"without arguments (every instance) or the mangled symbol",
				ms_cfg.spec.stage[t->spec_stage].name, t->text);
	}
}

void ms_syms_resolve(void)
{
	long n = syscall(SYS_readlink, "/proc/self/exe", exe_path, sizeof exe_path - 1);
	exe_path[n > 0 ? n : 0] = '\0';
	dl_iterate_phdr(find_self, NULL);
	warn_unmatchable();
	ms_syms_refresh();
	while (!try_lock())
		;
	dlsym_fallback();
	publish();
	unlock();
}

int ms_syms_stage_at(uintptr_t ip)
{
	const struct ms_syms_table *t = __atomic_load_n(&published, __ATOMIC_ACQUIRE);
	if (!t || ip < t->lo || ip >= t->hi)
		return -1;
	int lo = 0, hi = t->n;
	while (lo < hi) { /* last range starting at or below ip */
		int mid = (lo + hi) / 2;
		if (t->r[mid].lo <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int i = lo - 1; i >= 0 && i >= lo - 4; i--) /* overlapping ranges (aliases) are rare */
		if (ip >= t->r[i].lo && ip < t->r[i].hi)
			return t->r[i].stage;
	return -1;
}

int ms_syms_count(void)
{
	const struct ms_syms_table *t = __atomic_load_n(&published, __ATOMIC_ACQUIRE);
	return t ? t->n : 0;
}

void ms_syms_stripped(char *buf, size_t size)
{
	size_t at = 0;
	buf[0] = '\0';
	for (int i = 0; i < nstripped; i++) {
		size_t n = strlen(stripped[i]);
		if (at + n + 3 > size)
			break;
		if (at) {
			memcpy(buf + at, ", ", 2);
			at += 2;
		}
		memcpy(buf + at, stripped[i], n + 1);
		at += n;
	}
}

/* A forked child may have inherited the lock from a thread that no longer exists. */
void ms_syms_fork_child(void)
{
	unlock();
	ms_cfi_fork_child();
}
