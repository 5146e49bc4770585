/* What each code object is (python/classify.c's answer), kept in a table of memshim's own keyed by
 * the code object: nothing is stored in the program's objects (co_extra belongs to the program and
 * its tools: an index taken there shifts theirs, and their free functions run over our slot).
 *
 * The table holds no reference: a code object may die and a new one take its address.  So an entry
 * also holds the code's name, file and first line (read directly from the code object, python/
 * frames.c's layout), and a lookup that finds another name, file or line there is a miss: the new
 * code object is classified again.  A code object that came back with the same name, file and line
 * is the same function (its answer holds).  The table is a cache: when a probe run is full, the
 * first entry of the run is replaced, and the code it held is classified again if it runs.
 * Only touched with the GIL held (classification, the frame hook, monitoring callbacks). */
#include <stdint.h>
#include "core/ms.h"
#include "python/py.h"

#define CODES 8192 /* a power of two */
#define PROBES 8

static struct entry {
	const void *code, *name, *file;
	intptr_t line;
	uintptr_t value;
} table[CODES] MS_LARGE;

struct id {
	const void *name, *file;
	intptr_t line;
};

/* Offsets of co_name, co_filename and co_firstlineno; KNOWN 0: the address alone identifies. */
static struct {
	size_t off_name, off_file, off_line;
	int known;
} layout;

void ms_py_codes_init(void)
{
	layout.known = ms_py_code_layout(&layout.off_name, &layout.off_file, &layout.off_line) == 0;
}

static inline struct id id_of(const void *code)
{
	struct id id = { NULL, NULL, 0 };
	if (MS_LIKELY(layout.known)) {
		id.name = *(const void *const *)((const char *)code + layout.off_name);
		id.file = *(const void *const *)((const char *)code + layout.off_file);
		id.line = *(const int *)((const char *)code + layout.off_line);
	}
	return id;
}

static inline size_t slot_of(const void *code)
{
	return (size_t)(((uintptr_t)code >> 4) * 0x9e3779b97f4a7c15ull >> 40) & (CODES - 1);
}

uintptr_t ms_py_code_get(const void *code)
{
	size_t s = slot_of(code);
	for (int i = 0; i < PROBES; i++, s = (s + 1) & (CODES - 1)) {
		const struct entry *e = &table[s];
		if (e->code == code) {
			struct id id = id_of(code);
			return e->name == id.name && e->file == id.file && e->line == id.line ? e->value : 0;
		}
		if (!e->code)
			return 0;
	}
	return 0;
}

void ms_py_code_put(const void *code, uintptr_t value)
{
	size_t first = slot_of(code), s = first;
	for (int i = 0; i < PROBES; i++, s = (s + 1) & (CODES - 1))
		if (!table[s].code || table[s].code == code)
			break;
	if (table[s].code && table[s].code != code)
		s = first; /* the run is full: the cache gives up its first entry */
	struct id id = id_of(code);
	table[s] = (struct entry){ .code = code, .name = id.name, .file = id.file, .line = id.line, .value = value };
}
