/* The Python stack of the calling thread, read from the interpreter's own frames without calling
 * into Python and without the GIL: a thread's frame chain only changes on that thread, so reading
 * our own is safe wherever the thread stands (sites/ samples call it from inside malloc).  No
 * allocation, no locks: signal-safe.
 *
 * Layouts per version (x86-64, checked against each version's headers with Py_BUILD_CORE):
 *   3.8-3.10  PyThreadState.frame at 24 -> PyFrameObject: f_back 24, f_code 32, f_lasti 104 (3.10: 96)
 *   3.11-3.12 PyThreadState.cframe at 56 -> _PyCFrame.current_frame at 8 (3.12: 0)
 *   3.13      PyThreadState.current_frame at 72
 *   _PyInterpreterFrame: code 32 / previous 48 / prev_instr 56 / owner 69 (3.11);
 *                        code 0 / previous 8 / instr 56 / owner 70 (3.12, 3.13)
 *   PyCodeObject: co_filename, co_name, co_firstlineno, line table, code bytes (table below). */
#include <dlfcn.h>
#include <string.h>
#include "core/ms.h"
#include "intercept/hooks.h"
#include "python/py.h"

struct layout {
	int minor;
	size_t ts_frame;   /* PyThreadState: frame (3.8-3.10), cframe (3.11-3.12), current_frame */
	size_t cf_current; /* _PyCFrame.current_frame; SIZE_MAX: no cframe */
	size_t fr_back, fr_code, fr_instr, fr_owner;                    /* fr_owner 0: no owner byte */
	size_t co_filename, co_name, co_firstlineno, co_lines, co_code; /* co_code: bytes object or inline */
	size_t str_ascii, str_compact; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
};

#define NONE ((size_t)-1)
static const struct layout layouts[] = {
	{ 8, 24, NONE, 24, 32, 104, 0, 104, 112, 40, 120, 48, 48, 72 },
	{ 9, 24, NONE, 24, 32, 104, 0, 104, 112, 40, 120, 48, 48, 72 },
	{ 10, 24, NONE, 24, 32, 96, 0, 104, 112, 40, 120, 48, 48, 72 },
	{ 11, 56, 8, 48, 32, 56, 69, 112, 120, 72, 136, 184, 48, 72 },
	{ 12, 56, 0, 8, 0, 56, 70, 112, 120, 68, 136, 192, 40, 56 },
	{ 13, 72, NONE, 8, 0, 56, 70, 112, 120, 68, 136, 200, 40, 56 },
};

/* This interpreter's layout (NULL: none known) and what reading a thread's frames needs. */
static struct {
	const struct layout *lay;
	void *(*this_tstate)(void);
	void *code_type;
} frames;

int ms_py_stack_on;

#define OWNED_BY_CSTACK 3 /* 3.12+: the interpreter's entry frames, not Python code */
#define BYTES_DATA 32     /* PyBytesObject.ob_sval */
#define VAR_SIZE 16       /* PyVarObject.ob_size */

static inline void *word(const void *base, size_t off)
{
	return *(void *const *)((const char *)base + off);
}

int ms_py_stack_install(void)
{
	for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
		if (layouts[i].minor == ms_py.minor)
			frames.lay = &layouts[i];
	*(void **)&frames.this_tstate = ms_real_dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	frames.code_type = ms_py.CodeType;
	if (!frames.lay || !frames.this_tstate || !frames.code_type) {
		frames.lay = NULL;
		ms_warn("Python 3.%d's frame layout is not known: call sites get native frames only", ms_py.minor);
		return -1;
	}
	__atomic_store_n(&ms_py_stack_on, 1, __ATOMIC_RELEASE); /* after the layout: readers follow it */
	return 0;
}

/* The innermost frame of TSTATE, or NULL. */
static const void *top_frame(const void *ts)
{
	const void *f = word(ts, frames.lay->ts_frame);
	if (frames.lay->cf_current != NONE && f)
		f = word(f, frames.lay->cf_current);
	return f;
}

void *ms_py_thread_frame(const void *tstate)
{
	return ms_py_stack_ready() && tstate ? (void *)top_frame(tstate) : NULL;
}

void *ms_py_frame_back(const void *frame)
{
	return word(frame, frames.lay->fr_back);
}

void *ms_py_current_frame(void)
{
	void *ts = ms_py_stack_ready() ? frames.this_tstate() : NULL;
	return ts ? (void *)top_frame(ts) : NULL;
}

static long varint(const unsigned char **p, const unsigned char *end)
{
	if (*p >= end)
		return 0;
	unsigned b = *(*p)++;
	long v = b & 63;
	for (int shift = 6; (b & 64) && *p < end && shift < 30; shift += 6) {
		b = *(*p)++;
		v |= (long)(b & 63) << shift;
	}
	return v;
}

static long svarint(const unsigned char **p, const unsigned char *end)
{
	long v = varint(p, end);
	return v & 1 ? -(v >> 1) : v >> 1;
}

/* A walk's state: W is where it starts (the table's start, or where an earlier walk stopped) and,
 * on return, the entry the position was found in (its start), for the next walk to resume from. */
static void walk_stop(struct ms_py_line_walk *w, long off, long addr, int line, int found)
{
	w->off = off;
	w->addr = addr;
	w->line = line;
	w->found = found;
}

/* 3.11+: the location table (PEP 657); UNIT is the code unit index of the instruction. */
static int line_311(const unsigned char *t, long n, long unit, struct ms_py_line_walk *w)
{
	const unsigned char *p = t + w->off, *end = t + n;
	long addr = w->addr;
	int line = w->line, found = w->found;
	while (p < end) {
		const unsigned char *entry = p;
		int line0 = line;
		unsigned char b = *p++;
		if (!(b & 128))
			break;
		int code = (b >> 3) & 15;
		long len = (b & 7) + 1;
		int has = 1;
		if (code == 15)
			has = 0;
		else if (code == 14) {
			line += (int)svarint(&p, end);
			varint(&p, end);
			varint(&p, end);
			varint(&p, end);
		} else if (code == 13) {
			line += (int)svarint(&p, end);
		} else if (code >= 10) {
			line += code - 10;
			p += 2;
		} else {
			p += 1;
		}
		if (unit < addr + len) {
			walk_stop(w, entry - t, addr, line0, found);
			return has ? line : found;
		}
		if (has)
			found = line;
		addr += len;
	}
	return found;
}

/* 3.10: (byte delta, line delta) pairs. */
static int line_310(const unsigned char *t, long n, long byte, struct ms_py_line_walk *w)
{
	long addr = w->addr;
	int line = w->line;
	for (long i = w->off; i + 1 < n; i += 2) {
		long end = addr + t[i];
		signed char d = (signed char)t[i + 1];
		int line0 = line;
		if (d != -128)
			line += d;
		if (byte >= addr && byte < end) {
			walk_stop(w, i, addr, line0, line0);
			return line;
		}
		addr = end;
	}
	return line;
}

/* 3.8-3.9: lnotab (address increment, line increment). */
static int line_38(const unsigned char *t, long n, long byte, struct ms_py_line_walk *w)
{
	long addr = w->addr;
	int line = w->line;
	for (long i = w->off; i + 1 < n; i += 2) {
		if (addr + t[i] > byte) {
			walk_stop(w, i, addr, line, line);
			break;
		}
		addr += t[i];
		line += (signed char)t[i + 1];
	}
	return line;
}

/* The line FRAME (of CODE) is at; its first line when the table cannot be read.  WALK (may be
 * NULL) is where an earlier walk of this thread stopped in some code object: resumed when it is
 * this code's and not past the position. */
static int frame_line_uncached(const void *frame, const void *code, struct ms_py_line_walk *walk)
{
	int first = *(const int *)((const char *)code + frames.lay->co_firstlineno);
	const void *table = word(code, frames.lay->co_lines);
	if (!table)
		return first;
	long n = *(const long *)((const char *)table + VAR_SIZE);
	const unsigned char *t = (const unsigned char *)table + BYTES_DATA;
	if (n < 0 || n > (1L << 24))
		return first;
	long pos;
	if (frames.lay->minor >= 11) {
		const char *instr = word(frame, frames.lay->fr_instr);
		const char *base = (const char *)code + frames.lay->co_code;
		if (instr < base)
			return first;
		pos = (instr - base) / 2;
	} else {
		int lasti = *(const int *)((const char *)frame + frames.lay->fr_instr);
		if (lasti < 0)
			return first;
		pos = frames.lay->minor == 10 ? (long)lasti * 2 : lasti;
	}
	struct ms_py_line_walk fresh = { code, table, 0, 0, first, first };
	if (!walk || walk->code != code || walk->table != table || walk->addr > pos || walk->off < 0 || walk->off >= n)
		walk = walk ? (*walk = fresh, walk) : &fresh;
	if (frames.lay->minor >= 11)
		return line_311(t, n, pos, walk);
	return frames.lay->minor == 10 ? line_310(t, n, pos, walk) : line_38(t, n, pos, walk);
}

/* The line of FRAME, through CACHE when there is one.  The code object's line table is checked
 * too (a freed code object's address reused by another). */
static int frame_line(const void *frame, const void *code, struct ms_py_line_cache *cache)
{
	intptr_t pos = frames.lay->minor >= 11 ? (intptr_t)word(frame, frames.lay->fr_instr)
					       : *(const int *)((const char *)frame + frames.lay->fr_instr);
	const void *table = word(code, frames.lay->co_lines);
	if (!cache)
		return frame_line_uncached(frame, code, NULL);
	uintptr_t h = ((uintptr_t)code ^ (uintptr_t)pos * 0x9e3779b97f4a7c15ULL) >> 4;
	__typeof__(cache->e[0]) *e = &cache->e[(h ^ (h >> 17)) % MS_PY_LINE_CACHE];
	if (e->code == code && e->pos == pos && e->table == table)
		return e->line;
	uintptr_t c = (uintptr_t)code >> 4;
	int line = frame_line_uncached(frame, code, &cache->walk[(c ^ (c >> 7)) % MS_PY_LINE_WALKS]);
	e->code = code;
	e->table = table;
	e->pos = pos;
	e->line = line;
	return line;
}

int ms_py_code_layout(size_t *name, size_t *file, size_t *first_line)
{
	const struct layout *l = __atomic_load_n(&frames.lay, __ATOMIC_ACQUIRE);
	if (!l)
		return -1;
	*name = l->co_name;
	*file = l->co_filename;
	*first_line = l->co_firstlineno;
	return 0;
}

void ms_py_code_keys(const void *code, const void **name, const void **file)
{
	*name = word(code, frames.lay->co_name);
	*file = word(code, frames.lay->co_filename);
}

/* FRAME's code object when it is a Python function's frame to show, else NULL. */
static const void *shown_code(const struct layout *l, const void *f)
{
	if (l->fr_owner && ((const unsigned char *)f)[l->fr_owner] == OWNED_BY_CSTACK)
		return NULL;
	const void *code = word(f, l->fr_code);
	if (!code || ((uintptr_t)code & 7) || ms_py_type_of((ms_pyobj *)code) != frames.code_type)
		return NULL;
	return code;
}

#define OUTER_MAX 16
#define OUTER_WALK 256 /* frames walked past MAX for the outermost: deeper, the stack is only cut */

int ms_py_stack_read(struct ms_py_frame *out, int max, struct ms_py_line_cache *cache, struct ms_py_frame *outer,
		     int *nouter)
{
	const struct layout *l = __atomic_load_n(&frames.lay, __ATOMIC_ACQUIRE);
	int n = 0, k = outer && nouter ? (*nouter < OUTER_MAX ? *nouter : OUTER_MAX) : 0, seen = 0;
	const void *ring[OUTER_MAX], *ring_code[OUTER_MAX]; /* the last K frames past MAX */
	if (nouter)
		*nouter = 0;
	if (!l)
		return 0;
	const void *ts = frames.this_tstate();
	if (!ts)
		return 0;
	const void *f = top_frame(ts);
	int guard = 0;
	for (; f && guard < 4096 && (n < max || (k > 0 && seen < OUTER_WALK)); guard++, f = word(f, l->fr_back)) {
		if (((uintptr_t)f & 7) != 0)
			break;
		const void *code = shown_code(l, f);
		if (!code)
			continue;
		if (n < max) {
			out[n].code = code;
			out[n++].line = frame_line(f, code, cache);
		} else {
			ring[seen % k] = f;
			ring_code[seen++ % k] = code;
		}
	}
	int kept = f && n == max ? 0 : seen < k ? seen : k; /* walked out before the base: no base to keep */
	for (int i = 0; i < kept; i++) {                    /* lines only for the frames kept, while they still run */
		int at = (seen - kept + i) % k;
		outer[i].code = ring_code[at];
		outer[i].line = frame_line(ring[at], ring_code[at], cache);
	}
	if (nouter)
		*nouter = kept;
	return n;
}

/* Copies the text of str object S into BUF: ASCII and Latin-1 compact strings ('?' for bytes above
 * 127), "?" for anything else. */
static void copy_str(const void *s, char *buf, size_t size)
{
	if (!size)
		return;
	buf[0] = '\0';
	if (!s)
		return;
	long len = *(const long *)((const char *)s + 16);
	unsigned state = *(const unsigned *)((const char *)s + 32);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || kind != 1 || len < 0) {
		ms_strlcpy(buf, "?", size);
		return;
	}
	size_t header = ascii ? frames.lay->str_ascii : frames.lay->str_compact;
	const unsigned char *data = (const unsigned char *)s + header;
	size_t n = (size_t)len < size - 1 ? (size_t)len : size - 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = data[i] < 128 && data[i] >= 32 ? (char)data[i] : '?';
	buf[n] = '\0';
}

void ms_py_code_names(const void *code, char *func, size_t fsize, char *file, size_t lsize)
{
	copy_str(word(code, frames.lay->co_name), func, fsize);
	copy_str(word(code, frames.lay->co_filename), file, lsize);
}
