/* Native frames to "symbol+0xoff (object)" at report time, from the loaded objects' own ELF symbol
 * tables (.symtab, else .dynsym), read through a private mapping of each file: no dladdr, no
 * allocation (raw mappings, released by ms_sites_symbolise_done).  All addresses of a report are
 * resolved in one pass per object.  C++ names are written mangled: __cxa_demangle allocates through
 * the program's malloc.  Each frame's object and address in its file, and the objects' build-ids
 * (from their loaded notes), go to the file too: the formatter reads the line tables. */
#include <elf.h>
#include <link.h>
#include <string.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/elfnote.h"
#include "core/ms.h"
#include "core/text.h"
#include "intercept/elf.h"
#include "sites/sites.h"

#define MAX_OBJS 1024
#define NAME_POOL (4u << 20)
#define NAME_MAX_LEN 480

struct obj {
	uintptr_t base;
	const char *path; /* in the path pool */
	uintptr_t lo, hi; /* bounds of its loaded segments */
	const Elf64_Dyn *dyn;
	const unsigned char *build_id; /* in its loaded note segment, NULL when it has none */
	size_t build_id_len;
	int listed; /* its index in the file's sites.objects, -1 when no location names it */
};

struct addr {
	uintptr_t ip;
	uint32_t name;     /* offset + 1 in the name pool, 0: no symbol */
	int16_t obj;       /* -1: in no object */
	uint16_t text_len; /* its frame text's length, when kept */
	uintptr_t start;
	uint32_t text; /* offset + 1 of its frame text in the name pool, 0: not written yet */
};

static struct obj objs[MAX_OBJS] MS_LARGE;
static int nobjs;
static char paths[64u << 10] MS_LARGE;
static size_t paths_used;
static char exe[1024] MS_LARGE;
static struct addr *addrs;
static size_t naddrs, addrs_cap;
static char *names;
static size_t names_used;
static int listed[MAX_OBJS] MS_LARGE; /* sites.objects[k] is objs[listed[k]] */
static int nlisted;

/* Whether [VADDR, VADDR + N) of the object lies in the file-backed part of a loaded segment. */
static int loaded_from_file(const struct dl_phdr_info *info, uintptr_t vaddr, size_t n)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr && n <= ph->p_filesz &&
		    vaddr - ph->p_vaddr <= ph->p_filesz - n)
			return 1;
	}
	return 0;
}

/* The object's GNU build-id, read from its notes where the dynamic linker loaded them. */
static void find_build_id(const struct dl_phdr_info *info, struct obj *o)
{
	for (int i = 0; i < info->dlpi_phnum && !o->build_id; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE && loaded_from_file(info, ph->p_vaddr, ph->p_filesz))
			o->build_id = ms_note_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr),
						       ph->p_filesz, ph->p_align, &o->build_id_len);
	}
}

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	int *first = arg;
	const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : *first ? exe : NULL;
	(void)size;
	*first = 0;
	if (!name || nobjs == MAX_OBJS)
		return 0;
	size_t n = strlen(name) + 1;
	if (paths_used + n > sizeof paths)
		return 0;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	const Elf64_Dyn *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(info->dlpi_addr + ph->p_vaddr);
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		lo = a < lo ? a : lo;
		hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
	}
	memcpy(paths + paths_used, name, n);
	objs[nobjs] = (struct obj){ info->dlpi_addr, paths + paths_used, lo, hi, dyn, NULL, 0, -1 };
	find_build_id(info, &objs[nobjs++]);
	paths_used += n;
	return 0;
}

static int object_of(uintptr_t ip)
{
	for (int i = 0; i < nobjs; i++)
		if (ip >= objs[i].lo && ip < objs[i].hi)
			return i;
	return -1;
}

/* Heapsort by address: no allocation, no recursion. */
static void sift(struct addr *a, size_t root, size_t n)
{
	for (;;) {
		size_t c = 2 * root + 1;
		if (c >= n)
			return;
		if (c + 1 < n && a[c + 1].ip > a[c].ip)
			c++;
		if (a[root].ip >= a[c].ip)
			return;
		struct addr t = a[root];
		a[root] = a[c];
		a[c] = t;
		root = c;
	}
}

static void sort_addrs(struct addr *a, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift(a, i, n);
	for (size_t i = n; i-- > 1;) {
		struct addr t = a[0];
		a[0] = a[i];
		a[i] = t;
		sift(a, 0, i);
	}
}

/* First address index in [A, B) with ip - 1 >= LO. */
static size_t lower(uintptr_t lo, size_t a, size_t b)
{
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (addrs[m].ip - 1 < lo)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

static uint32_t keep_name(const char *s, size_t max)
{
	size_t n = 0;
	while (n < max && n < NAME_MAX_LEN && s[n])
		n++;
	if (names_used + n + 1 > NAME_POOL)
		return 0;
	memcpy(names + names_used, s, n);
	names[names_used + n] = '\0';
	uint32_t off = (uint32_t)names_used + 1;
	names_used += n + 1;
	return off;
}

/* The addresses of object OBJ, [FIRST, END) of the sorted table (objects do not overlap). */
static void addrs_of(int obj, size_t *first, size_t *end)
{
	size_t i = 0;
	while (i < naddrs && addrs[i].obj != obj)
		i++;
	*first = i;
	while (i < naddrs && addrs[i].obj == obj)
		i++;
	*end = i;
}

/* Which stretches of [min, max] hold a wanted address: one bit per 1/MARK_BITS of it.  Most symbols
 * of a big object fall between the wanted addresses and are passed over on one bit, not searched
 * for (a binary search each: most of the time of naming a Python start's frames). */
#define MARK_BITS 4096
struct marks {
	uintptr_t min, max;
	unsigned shift;
	uint64_t bit[MARK_BITS / 64];
};

static void marks_of(struct marks *m, size_t first, size_t end)
{
	m->min = addrs[first].ip - 1;
	m->max = addrs[end - 1].ip - 1;
	m->shift = 0;
	while (((m->max - m->min) >> m->shift) >= MARK_BITS)
		m->shift++;
	memset(m->bit, 0, sizeof m->bit);
	for (size_t k = first; k < end; k++) {
		uintptr_t b = (addrs[k].ip - 1 - m->min) >> m->shift;
		m->bit[b / 64] |= UINT64_C(1) << (b % 64);
	}
}

/* Whether [LO, HI) may hold a wanted address. */
static int marked(const struct marks *m, uintptr_t lo, uintptr_t hi)
{
	if (hi <= m->min || lo > m->max || hi <= lo)
		return 0;
	uintptr_t b = ((lo > m->min ? lo : m->min) - m->min) >> m->shift;
	uintptr_t last = ((hi - 1 < m->max ? hi - 1 : m->max) - m->min) >> m->shift;
	for (; b <= last; b++)
		if (m->bit[b / 64] >> (b % 64) & 1)
			return 1;
	return 0;
}

/* Names the addresses [FIRST, END) of object OBJ from the N symbols SYM (names in STRS, STRSZ bytes). */
static void scan(const Elf64_Sym *sym, size_t n, const char *strs, size_t strsz, int obj, size_t first, size_t end)
{
	uintptr_t base = objs[obj].base;
	static struct marks m; /* one scan at a time (the report's writer) */
	marks_of(&m, first, end);
	uintptr_t from = m.min - base, span = m.max - m.min; /* the wanted range in symbol values */
	for (size_t i = 0; i < n; i++) {
		uintptr_t off = sym[i].st_value - from; /* lo - min */
		/* starting outside [min, max] and not reaching into it from below: passed over on a compare
		 * or two (most symbols), as marked would pass them */
		if (off > span && off + sym[i].st_size - 1 >= sym[i].st_size - 1)
			continue;
		uintptr_t lo = base + sym[i].st_value, hi = lo + sym[i].st_size;
		if (!marked(&m, lo, hi))
			continue;
		int type = ELF64_ST_TYPE(sym[i].st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym[i].st_shndx == SHN_UNDEF || !sym[i].st_size ||
		    sym[i].st_name >= strsz)
			continue;
		for (size_t k = lower(lo, first, end); k < end && addrs[k].ip - 1 < hi; k++)
			if (!addrs[k].name)
				addrs[k] =
					(struct addr){ .ip = addrs[k].ip,
						       .name = keep_name(strs + sym[i].st_name, strsz - sym[i].st_name),
						       .obj = (int16_t)obj,
						       .start = lo };
	}
}

/* One symbol table section SH of the file image MAP (strings in STR). */
static void scan_section(const unsigned char *map, size_t size, const Elf64_Shdr *sh, const Elf64_Shdr *str, int obj,
			 size_t first, size_t end)
{
	if (sh->sh_offset > size || sh->sh_size > size - sh->sh_offset || sh->sh_entsize != sizeof(Elf64_Sym) ||
	    str->sh_offset > size || str->sh_size > size - str->sh_offset)
		return;
	scan((const Elf64_Sym *)(map + sh->sh_offset), sh->sh_size / sizeof(Elf64_Sym),
	     (const char *)(map + str->sh_offset), str->sh_size, obj, first, end);
}

/* A file without .symtab (stripped, as distributions ship them) has only the .dynsym the dynamic
 * linker already mapped and read: named from there, the file is not mapped a second time (each
 * 64 KiB of it read first is a fault that maps 16 pages, some 4 us each here).  0 when done. */
static int read_loaded(int obj, size_t first, size_t end)
{
	struct ms_elf_tables t;
	if (ms_elf_file_has_section(objs[obj].path, SHT_SYMTAB) != 0 ||
	    ms_elf_tables_at(objs[obj].base, objs[obj].dyn, &t) < 0 || !t.strsz)
		return -1;
	scan(t.syms, ms_elf_symbol_count(&t), t.strs, t.strsz, obj, first, end);
	return 0;
}

/* Names the addresses inside object OBJ from its file's symbol tables. */
static void read_object(int obj)
{
	size_t size, first, end;
	addrs_of(obj, &first, &end);
	if (first == end || read_loaded(obj, first, end) == 0)
		return;
	const unsigned char *map = ms_elf_map_file(objs[obj].path, &size);
	if (!map)
		return;
	Elf64_Half nsh = 0;
	const Elf64_Shdr *sh = ms_elf_sections(map, size, &nsh);
	for (int pass = 0; pass < 2; pass++) /* .symtab first: it has the static functions too */
		for (int i = 0; i < nsh; i++)
			if (sh[i].sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB) && sh[i].sh_link < nsh)
				scan_section(map, size, &sh[i], &sh[sh[i].sh_link], obj, first, end);
	syscall(SYS_munmap, map, size);
}

/* Whether the ELF file PATH is the program that was loaded: the same entry point and number of
 * program headers as the auxiliary vector's (a script run through its #! line is not). */
static int is_program(const char *path)
{
	Elf64_Ehdr eh;
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	long got = syscall(SYS_pread64, fd, &eh, sizeof eh, 0);
	syscall(SYS_close, fd);
	const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
	if (got != (long)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) || !ph || eh.e_phnum != getauxval(AT_PHNUM))
		return 0;
	uintptr_t bias = (uintptr_t)ph - eh.e_phoff; /* the headers are loaded where the file has them */
	return eh.e_entry + (eh.e_type == ET_DYN ? bias : 0) == getauxval(AT_ENTRY);
}

/* The running program's file into OUT: the name execve was given, its links followed (so the
 * object is named as its file), when that is the program; else /proc/self/exe, whose first read
 * costs a process some 20 us of procfs. */
static void program_path(char *out, size_t size)
{
	const char *given = (const char *)getauxval(AT_EXECFN);
	char link[1024];
	out[0] = '\0';
	if (given && given[0] == '/' && strlen(given) < size && is_program(given)) {
		ms_strlcpy(out, given, size);
		for (int hops = 0; hops < 8; hops++) {
			long n = syscall(SYS_readlink, out, link, sizeof link - 1);
			if (n <= 0)
				return; /* not a link: the file itself */
			link[n] = '\0';
			char *slash = strrchr(out, '/');
			if (link[0] == '/' || !slash)
				ms_strlcpy(out, link, size);
			else if ((size_t)(slash + 1 - out) + (size_t)n < size)
				ms_strlcpy(slash + 1, link, size - (size_t)(slash + 1 - out));
			else
				break;
		}
	}
	long len = syscall(SYS_readlink, "/proc/self/exe", out, size - 1);
	out[len > 0 ? len : 0] = '\0';
}

void ms_sites_symbolise(const int32_t *ids, int n)
{
	ms_sites_symbolise_done();
	if (n <= 0) /* no site (a child that sampled nothing since its fork): nothing mapped or read */
		return;
	addrs_cap = (size_t)n * MS_SITES_MAX_FRAMES + 1;
	addrs = ms_raw_map(addrs_cap * sizeof *addrs);
	if (!addrs)
		return;
	uint64_t frames[MS_SITES_MAX_FRAMES];
	for (int i = 0; i < n; i++) {
		int nf = ms_sites_stack_frames(ids[i], frames, MS_SITES_MAX_FRAMES);
		for (int f = 0; f < nf && naddrs < addrs_cap; f++)
			if (!ms_sites_frame_is_py(frames[f]))
				addrs[naddrs++] = (struct addr){ .ip = (uintptr_t)frames[f], .obj = -1 };
	}
	sort_addrs(addrs, naddrs);
	size_t u = 0;
	for (size_t i = 0; i < naddrs; i++)
		if (u == 0 || addrs[u - 1].ip != addrs[i].ip)
			addrs[u++] = addrs[i];
	naddrs = u;
	if (!naddrs) /* Python frames only: named from the interpreter's objects, no symbol table */
		return;
	names = ms_raw_map(NAME_POOL);
	if (!names) {
		ms_sites_symbolise_done();
		return;
	}
	program_path(exe, sizeof exe);
	nobjs = 0;
	paths_used = 0;
	int first = 1;
	dl_iterate_phdr(collect, &first);
	static unsigned char wanted[MAX_OBJS] MS_LARGE;
	memset(wanted, 0, sizeof wanted);
	for (size_t i = 0; i < naddrs; i++) {
		addrs[i].obj = (int16_t)object_of(addrs[i].ip - 1);
		if (addrs[i].obj >= 0)
			wanted[addrs[i].obj] = 1;
	}
	nlisted = 0;
	for (int o = 0; o < nobjs; o++)
		if (wanted[o] && objs[o].path[0] == '/') {
			listed[nlisted] = o;
			objs[o].listed = nlisted++;
			read_object(o);
		}
}

void ms_sites_symbolise_done(void)
{
	if (addrs)
		syscall(SYS_munmap, addrs, addrs_cap * sizeof *addrs);
	if (names)
		syscall(SYS_munmap, names, NAME_POOL);
	addrs = NULL;
	names = NULL;
	naddrs = names_used = 0;
	nlisted = 0;
}

/* The resolved native frame W, or NULL. */
static struct addr *find_addr(uint64_t w)
{
	size_t a = 0, b = naddrs;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (addrs[m].ip < w)
			a = m + 1;
		else
			b = m;
	}
	return a < naddrs && addrs[a].ip == w ? &addrs[a] : NULL;
}

int ms_sites_object_count(void)
{
	return nlisted;
}

const char *ms_sites_object(int k, char *build_id, size_t size)
{
	const struct obj *o = &objs[listed[k]];
	ms_hex(o->build_id, o->build_id ? o->build_id_len : 0, build_id, size);
	return o->path;
}

/* "NAME+0xOFF (OBJECT)", "0xADDR (OBJECT)" or "0xADDR (?)", built without ms_format's parsing. */
static size_t native_text(uint64_t w, const struct addr *e, char *buf, size_t size)
{
	struct ms_text t = ms_text_start(buf, size);
	if (e && e->name) {
		ms_text_str(&t, names + e->name - 1);
		ms_text_put(&t, "+0x", 3);
		ms_text_num(&t, w - e->start, 4);
	} else {
		ms_text_put(&t, "0x", 2);
		ms_text_num(&t, w, 4);
	}
	ms_text_put(&t, " (", 2);
	ms_text_str(&t, e && e->obj >= 0 ? ms_file_name(objs[e->obj].path) : "?");
	ms_text_put(&t, ")", 1);
	return ms_text_end(&t);
}

/* Keeps E's text (LEN bytes at S) in the name pool, when there is room. */
static void keep_text(struct addr *e, const char *s, size_t len)
{
	if (len > UINT16_MAX || names_used + len + 1 > NAME_POOL)
		return;
	memcpy(names + names_used, s, len + 1);
	e->text = (uint32_t)names_used + 1;
	e->text_len = (uint16_t)len;
	names_used += len + 1;
}

const char *ms_sites_frame_describe(uint64_t w, char *buf, size_t size, size_t *len, struct ms_sites_place *where)
{
	where->obj = -1;
	where->offset = 0;
	if (ms_sites_frame_is_py(w)) {
		*len = ms_sites_py_text(w, buf, size);
		return buf;
	}
	struct addr *e = find_addr(w);
	if (e && e->obj >= 0 && objs[e->obj].listed >= 0) {
		where->obj = objs[e->obj].listed;
		where->offset = w - objs[e->obj].base; /* the ELF file's own address: l_addr is the load bias */
	}
	if (e && e->text) {
		*len = e->text_len;
		return names + e->text - 1;
	}
	*len = native_text(w, e, buf, size);
	if (e && size > 0)
		keep_text(e, buf, *len);
	return buf;
}
