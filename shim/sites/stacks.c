/* Stacks of sampled allocations: read (native/unwinder.c's cursor, the interpreter's frames) and
 * interned into bounded tables in raw mappings.  Reading takes no lock and allocates nothing;
 * interning runs under the sites lock (sample.c).  A full table refuses new entries (counted). */
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/ms.h"
#include "core/text.h"
#include "native/native.h"
#include "python/py.h"
#include "sites/sites.h"

/* Table sizes, sampled and exact (every allocation's stack: PyTorch's imports alone fill the
 * sampled frame pool); address space, touched only as used. */
static const struct sizes {
	uint32_t stacks, frame_words, strings, string_bytes;
} mode_sizes[2] = {
	{ MS_SITES_STACKS_SAMPLED, 256u << 10, 32768u, 2u << 20 },
	{ MS_SITES_STACKS_EXACT, 2u << 20, 131072u, 8u << 20 },
};
static struct sizes cap;
#define NATIVE_BEFORE_PY 16 /* native frames kept above the interpreter when Python runs */
#define OUTER_PY 8          /* a stack deeper than the frames kept still keeps its outermost Python frames */

/* Python frame word: bit 63, function string id (19 bits), file id (19 bits), line (24 bits). */
#define PY_FUNC_SHIFT 43
#define PY_FILE_SHIFT 24
#define PY_ID_MASK ((1u << 19) - 1)
#define PY_LINE_MASK ((1u << 24) - 1)

struct stack {
	uint64_t hash;
	uint32_t off; /* in the frame pool */
	uint32_t n;
};

struct string {
	uint64_t hash;
	uint32_t off;
	uint32_t len;
};

/* An open-addressing index of ids (id + 1, 0 empty) that starts at one page and doubles in place
 * (its mapping holds the largest size) when half full: the first entries touch one page, not a
 * page each. */
#define INDEX_FIRST 1024u
struct index {
	int32_t *slot;
	uint32_t size, max; /* powers of two */
};

static struct stack *stacks;
static struct index stack_index;
static uint64_t *frame_pool;
static struct string *strings;
static struct index string_index;
static char *string_pool;
static uint32_t nstacks, nstrings, frames_used, chars_used;
static uint64_t dropped;
static uintptr_t self_lo, self_hi, py_lo, py_hi;
static uint32_t epoch = 1; /* moves when the stack table starts over */

/* String ids of code objects seen before, keyed by the code object and its name and file objects
 * (a freed code object's address reused by another code object is told apart by those). */
#define CODE_CACHE 4096
struct code_entry {
	const void *code, *name, *file;
	int32_t f, l;
};
static struct code_entry code_cache[CODE_CACHE] MS_LARGE;

/* Bounds of the executable segment holding ADDR. */
struct range_query {
	uintptr_t addr, lo, hi;
};

static int find_range(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range_query *q = arg;
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->addr >= lo && q->addr < hi) {
			q->lo = lo;
			q->hi = hi;
			return 1;
		}
	}
	return 0;
}

static void range_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	struct range_query q = { addr, 0, 0 };
	dl_iterate_phdr(find_range, &q);
	*lo = q.lo;
	*hi = q.hi;
}

/* The key whose destructor unmaps a thread's caches (sites' per-thread caches, below). */
static pthread_key_t caches_key;
static int caches_key_ok;
static void caches_gone(void *c);

/* The next table of BYTES from the tables' one mapping at *AT (page-aligned, so each table's first
 * entries have a page of their own to fault in, not a neighbour's tail). */
static void *carve(char **at, size_t bytes)
{
	void *p = *at;
	*at += (bytes + 4095) & ~(size_t)4095;
	return p;
}

int ms_sites_stacks_init(int exact)
{
	cap = mode_sizes[exact != 0];
	size_t stack_slots = (size_t)2 * cap.stacks, string_slots = (size_t)2 * cap.strings;
	size_t sizes[] = { cap.stacks * sizeof *stacks,          stack_slots * sizeof(int32_t),
			   cap.frame_words * sizeof *frame_pool, cap.strings * sizeof *strings,
			   string_slots * sizeof(int32_t),       cap.string_bytes };
	size_t total = 0;
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		total += (sizes[i] + 4095) & ~(size_t)4095;
	char *at = ms_raw_map(total); /* one mapping for all six: one system call at the first sample */
	if (!at)
		return -1;
	stacks = carve(&at, sizes[0]);
	stack_index = (struct index){ carve(&at, sizes[1]), INDEX_FIRST, (uint32_t)stack_slots };
	frame_pool = carve(&at, sizes[2]);
	strings = carve(&at, sizes[3]);
	string_index = (struct index){ carve(&at, sizes[4]), INDEX_FIRST, (uint32_t)string_slots };
	string_pool = carve(&at, sizes[5]);
	range_of((uintptr_t)ms_sites_stacks_init, &self_lo, &self_hi);
	ms_cfi_prepare();
	caches_key_ok = pthread_key_create(&caches_key, caches_gone) == 0;
	return 0;
}

static void index_reset(struct index *x)
{
	ms_zero(x->slot, x->size * sizeof *x->slot);
	x->size = INDEX_FIRST;
}

static uint32_t index_home(const struct index *x, uint64_t h)
{
	return (uint32_t)h & (x->size - 1);
}

/* Room for entry COUNT + 1 (lock held): past half full the index doubles and ids 0..COUNT-1 go
 * back in at their hashes (HASH). */
static void index_room(struct index *x, uint32_t count, uint64_t (*hash)(int32_t id))
{
	if ((count + 1) * 2 <= x->size || x->size >= x->max)
		return;
	x->size *= 2;
	memset(x->slot, 0, x->size * sizeof *x->slot);
	for (uint32_t id = 0; id < count; id++) {
		uint32_t i = index_home(x, hash((int32_t)id));
		while (x->slot[i])
			i = (i + 1) & (x->size - 1);
		x->slot[i] = (int32_t)id + 1;
	}
}

uint32_t ms_sites_nstacks(void)
{
	return __atomic_load_n(&nstacks, __ATOMIC_ACQUIRE);
}

uint64_t ms_sites_stacks_dropped(void)
{
	return dropped;
}

/* ---- reading ------------------------------------------------------------------------------- */

static int in_self(uintptr_t ip)
{
	return ip >= self_lo && ip < self_hi && ms_tramp_index(ip) < 0;
}

/* Each thread's caches, mapped at its first sample and unmapped when it ends (not in TLS: static
 * TLS is scarce for a library loaded late, and threads would all carry them). */
struct thread_caches {
	struct ms_sites_chain chain;
	struct ms_py_line_cache lines;
	/* a walk's Python frames: here, not on a stack that may be a small thread's nearly full one */
	struct ms_py_frame py[MS_SITES_MAX_FRAMES], outer[OUTER_PY];
};
static __thread struct thread_caches *caches MS_TLS;
__thread struct ms_sites_chain *ms_sites_chain MS_TLS; /* &caches->chain, for sample.c's inline check */
static struct ms_sites_chain no_chain MS_LARGE; /* stands in when a thread's caches could not be mapped: never read */

static void caches_gone(void *c)
{
	ms_sites_chain = NULL;
	caches = NULL;
	syscall(SYS_munmap, c, sizeof(struct thread_caches));
}

static struct thread_caches *thread_caches(void)
{
	struct thread_caches *c = caches;
	if (MS_LIKELY(c != NULL) || !caches_key_ok)
		return c;
	c = ms_raw_map(sizeof *c);
	if (c) {
		ms_touch(c); /* the chain's header: written before it is read */
		caches = c;
		ms_sites_chain = &c->chain;
		pthread_setspecific(caches_key, c); /* a low key index: no allocation */
	}
	return c;
}

#define last_chain (*(caches ? &caches->chain : &no_chain))

static int in_python(uintptr_t ip)
{
	return ip >= py_lo && ip < py_hi;
}

static int same_chain(uint64_t *out, int max, uintptr_t slot, uintptr_t ip, int to_python)
{
	const struct ms_sites_chain *c = &last_chain;
	if (!caches || c->n == 0 || c->n > max || c->to_python != to_python || c->slot[0] != slot || c->ip[0] != ip)
		return 0;
	for (int k = 1; k < c->n; k++) {
		uintptr_t v = *(const uintptr_t *)c->slot[k];
		if (v != c->raw[k] || (v != c->ip[k] && ms_pool_ra(ms_tramp_index(v)) != c->ip[k]))
			return 0;
	}
	if (c->python_slot && !in_python(*(const uintptr_t *)c->python_slot))
		return 0; /* the frame above the chain is no longer the interpreter's: the walk goes on */
	for (int k = 0; k < c->n; k++)
		out[k] = c->ip[k];
	return c->n;
}

/* Whether slot values RAW (the return addresses IP, or trampolines standing for them) are still
 * in SLOT[0..N): one load per frame. */
static inline int slots_hold(const uintptr_t *slot, const uintptr_t *raw, const uintptr_t *ip, int n)
{
	for (int k = 0; k < n; k++)
		if (*(const uintptr_t *)slot[k] != raw[k] ||
		    (MS_UNLIKELY(raw[k] != ip[k]) && ms_pool_ra(ms_tramp_index(raw[k])) != ip[k]))
			return 0;
	return 1;
}

int32_t ms_sites_known_slow(void)
{
	const struct ms_sites_chain *c = ms_sites_chain;
	for (int k = 1; k < c->nown; k++) /* the shim's own frames hold no trampoline */
		if (*(const uintptr_t *)c->own_slot[k] != c->own_raw[k])
			return -1;
	return slots_hold(c->slot, c->raw, c->ip, c->n) ? c->known : -1;
}

void ms_sites_stacks_reset(void)
{
	__atomic_add_fetch(&epoch, 1, __ATOMIC_RELAXED);
	if (caches) /* the only thread left (a forked child): its stack's id is the old table's */
		caches->chain.known = caches->chain.id = -1;
	ms_zero(code_cache, sizeof code_cache);
	index_reset(&stack_index);
	index_reset(&string_index);
	nstacks = nstrings = frames_used = chars_used = 0;
	dropped = 0;
}

/* The chain's id for ms_sites_known, once its start, its id and its table all hold. */
static void set_known(void)
{
	const struct ms_sites_chain *c = &last_chain;
	int ok = c->start_ok && c->id >= 0 && !c->to_python && c->epoch == __atomic_load_n(&epoch, __ATOMIC_RELAXED);
	last_chain.slow = c->tramps || c->nown > 1 || c->n < 1;
	last_chain.known = ok ? c->id : -1;
}

/* The last chain was reached from START through the shim's own frames OWN_SLOT/OWN_RAW. */
static void remember_start(const uintptr_t *start, const uintptr_t *own_slot, const uintptr_t *own_raw, int nown,
			   int rbp_matters)
{
	last_chain.known = -1; /* a handler sampling meanwhile never matches a half-written start */
	last_chain.start_ok = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	memcpy(last_chain.start, start, sizeof last_chain.start);
	memcpy(last_chain.own_slot, own_slot, (size_t)nown * sizeof *own_slot);
	memcpy(last_chain.own_raw, own_raw, (size_t)nown * sizeof *own_raw);
	last_chain.nown = nown;
	last_chain.rbp_mask = rbp_matters ? ~(uintptr_t)0 : 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	last_chain.start_ok = 1;
	set_known();
}

/* Native return addresses from the caller of the shim outwards (the cursor gives the return
 * address a native stage's trampoline stands for). */
static int native_frames(uint64_t *out, int max, int stop_in_python, const uintptr_t *start, int *hit)
{
	*hit = 0;
	struct ms_cursor c;
	if (start)
		ms_cursor_at(&c, start);
	else
		ms_cursor_here(&c, NULL);
	uintptr_t slots[MS_SITES_MAX_FRAMES], raws[MS_SITES_MAX_FRAMES];
	uintptr_t own_slots[MS_SITES_MAX_OWN], own_raws[MS_SITES_MAX_OWN];
	int n = 0, nown = 0, rbp_matters = 0;
	uintptr_t python_slot = 0;
	for (int d = 0; d < max + 48 && n < max; d++) {
		if (stop_in_python && in_python(c.ip)) {
			python_slot = c.slot;
			break;
		}
		if (n == 0 && in_self(c.ip)) {
			if (nown < MS_SITES_MAX_OWN) {
				own_slots[nown] = c.slot;
				own_raws[nown] = c.raw;
			}
			nown++;
			rbp_matters |= ms_cfi_cfa_from_rbp(c.ip);
		} else {
			if (n == 0) {
				int got = same_chain(out, max, c.slot, c.ip, stop_in_python);
				if (got) {
					*hit = 1;
					if (start && nown <= MS_SITES_MAX_OWN)
						remember_start(start, own_slots, own_raws, nown, rbp_matters);
					return got;
				}
			}
			slots[n] = c.slot;
			raws[n] = c.raw;
			out[n++] = c.ip;
		}
		if (ms_cursor_step(&c) != 1 || c.ip < 4096)
			break;
	}
	if (caches && n <= MS_SITES_MAX_FRAMES) {
		last_chain.n = 0; /* a handler sampling meanwhile never sees a half-written chain as whole */
		last_chain.id = -1;
		last_chain.known = -1;
		last_chain.start_ok = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		last_chain.to_python = stop_in_python;
		last_chain.python_slot = python_slot;
		int tramps = 0;
		for (int k = 0; k < n; k++) {
			last_chain.slot[k] = slots[k];
			last_chain.raw[k] = raws[k];
			last_chain.ip[k] = (uintptr_t)out[k];
			tramps |= raws[k] != (uintptr_t)out[k];
		}
		last_chain.tramps = tramps;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		last_chain.n = n;
		if (start && nown <= MS_SITES_MAX_OWN)
			remember_start(start, own_slots, own_raws, nown, rbp_matters);
		*hit = 2; /* stored: its id may be remembered once interned */
	}
	return n;
}

void ms_sites_capture_known(int32_t id)
{
	if (!caches)
		return;
	last_chain.id = id;
	last_chain.epoch = __atomic_load_n(&epoch, __ATOMIC_RELAXED);
	set_known();
}

/* ms_sites_capture without the known chain looked for first. */
static __attribute__((noinline)) int capture_walk(uint64_t *frames, int max, const uintptr_t *start, int32_t *known)
{
	*known = -1;
	struct thread_caches *tc = thread_caches();
	int nouter = OUTER_PY, ready = ms_py_stack_ready() && tc;
	struct ms_py_frame *py = tc ? tc->py : NULL, *outer = tc ? tc->outer : NULL; /* read only up to nouter */
	int npy = ready ? ms_py_stack_read(py, max, &tc->lines, outer, &nouter) : 0;
	if (!ready)
		nouter = 0;
	if (npy > 0 && !py_hi) {
		uintptr_t lo, hi;
		range_of((uintptr_t)ms_py.IsInitialized, &lo, &hi);
		py_lo = lo;
		__atomic_store_n(&py_hi, hi, __ATOMIC_RELEASE);
	}
	int hit;
	int n = native_frames(frames, npy > 0 ? (max < NATIVE_BEFORE_PY ? max : NATIVE_BEFORE_PY) : max, npy > 0, start,
			      &hit);
	if (hit == 1 && npy == 0 && caches && last_chain.id >= 0 &&
	    last_chain.epoch == __atomic_load_n(&epoch, __ATOMIC_RELAXED))
		*known = last_chain.id;
	else if (hit == 2 && npy == 0)
		*known = -2;
	if (!tc)
		return n; /* no Python frames were read */
	/* PY then OUTER, innermost first; too many for MAX: the innermost, then the outermost OUTER_PY
	 * (where the user's own line is, below imports in imports) */
	int all = npy + nouter, room = max - n, tail = all <= room ? 0 : (OUTER_PY < room / 2 ? OUTER_PY : room / 2);
	int head = all <= room ? all : room - tail;
	for (int i = 0; i < head + tail; i++, n++) {
		int at = i < head ? i : all - tail + (i - head);
		const struct ms_py_frame *p = at < npy ? &py[at] : &outer[at - npy];
		/* until interned: the code object and line, unpacked by ms_sites_capture_locked */
		frames[n] = MS_SITES_PY_BIT | (uint64_t)(uintptr_t)p->code;
		frames[max + n] = (uint64_t)(p->line > 0 ? p->line : 0);
	}
	return n;
}

int ms_sites_capture(uint64_t *frames, int max, const uintptr_t *start, int32_t *known)
{
	int32_t id = start ? ms_sites_known(start[0], start[1], start[2]) : -1;
	if (id == MS_SITES_CHECK_SLOW)
		id = ms_sites_known_slow();
	if (id >= 0) {
		*known = id;
		return last_chain.n; /* FRAMES are not read for a known stack */
	}
	return capture_walk(frames, max, start, known);
}

/* ---- interning ----------------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_text(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h | 1;
}

static uint64_t string_hash(int32_t id)
{
	return strings[id].hash;
}

/* Id of string S, interned; -1 when full. */
static int32_t intern_string(const char *s)
{
	size_t n = strlen(s);
	uint64_t h = hash_text(s, n);
	struct index *x = &string_index;
	index_room(x, nstrings, string_hash);
	ms_touch(&x->slot[index_home(x, h)]); /* a fresh page: written before it is read */
	for (uint32_t k = 0, i = index_home(x, h); k < x->size; k++, i = (i + 1) & (x->size - 1)) {
		int32_t v = x->slot[i];
		if (!v) {
			if (nstrings == cap.strings || chars_used + n + 1 > cap.string_bytes)
				return -1;
			int32_t id = (int32_t)nstrings++;
			memcpy(string_pool + chars_used, s, n + 1);
			strings[id] = (struct string){ h, chars_used, (uint32_t)n };
			chars_used += (uint32_t)n + 1;
			x->slot[i] = id + 1;
			return id;
		}
		const struct string *e = &strings[v - 1];
		if (e->hash == h && e->len == n && memcmp(string_pool + e->off, s, n) == 0)
			return v - 1;
	}
	return -1;
}

/* Ids of CODE's function name and file, interned; -1 when full. */
static int code_ids(const void *code, int32_t *f, int32_t *l)
{
	const void *name, *file;
	ms_py_code_keys(code, &name, &file);
	uintptr_t h = (uintptr_t)code >> 4;
	struct code_entry *e = &code_cache[(h ^ (h >> 13)) % CODE_CACHE];
	if (e->code == code && e->name == name && e->file == file) {
		*f = e->f;
		*l = e->l;
		return 0;
	}
	char func[128], path[256];
	ms_py_code_names(code, func, sizeof func, path, sizeof path);
	*f = intern_string(func);
	*l = intern_string(path);
	if (*f < 0 || *l < 0)
		return -1;
	*e = (struct code_entry){ code, name, file, *f, *l };
	return 0;
}

/* Turns the Python frames left by ms_sites_capture into interned words; 0, or -1 when full. */
static int intern_python(uint64_t *frames, int n, int max)
{
	for (int i = 0; i < n; i++) {
		if (!ms_sites_frame_is_py(frames[i]))
			continue;
		const void *code = (const void *)(uintptr_t)(frames[i] & ~MS_SITES_PY_BIT);
		int32_t f, l;
		if (code_ids(code, &f, &l) < 0)
			return -1;
		uint64_t line = frames[max + i] & PY_LINE_MASK;
		frames[i] = MS_SITES_PY_BIT | (uint64_t)f << PY_FUNC_SHIFT | (uint64_t)l << PY_FILE_SHIFT | line;
	}
	return 0;
}

static uint64_t stack_hash(int32_t id)
{
	return stacks[id].hash;
}

int32_t ms_sites_capture_locked(const uint64_t *raw, int n)
{
	uint64_t frames[2 * MS_SITES_MAX_FRAMES];
	memcpy(frames, raw, (size_t)n * sizeof *frames);
	for (int i = 0; i < n; i++)
		frames[MS_SITES_MAX_FRAMES + i] = raw[MS_SITES_MAX_FRAMES + i];
	if (intern_python(frames, n, MS_SITES_MAX_FRAMES) < 0) {
		dropped++;
		return -1;
	}
	uint64_t h = 0x1234567u;
	for (int i = 0; i < n; i++)
		h = mix(h, frames[i]);
	struct index *x = &stack_index;
	index_room(x, nstacks, stack_hash);
	ms_touch(&x->slot[index_home(x, h)]); /* a fresh page: written before it is read */
	for (uint32_t k = 0, i = index_home(x, h); k < x->size; k++, i = (i + 1) & (x->size - 1)) {
		int32_t v = x->slot[i];
		if (!v) {
			if (nstacks == cap.stacks - 1 ||
			    frames_used + (uint32_t)n > cap.frame_words) { /* the last id is sample.c's */
				dropped++;
				return -1;
			}
			int32_t id = (int32_t)nstacks;
			memcpy(frame_pool + frames_used, frames, (size_t)n * sizeof *frames);
			stacks[id] = (struct stack){ h, frames_used, (uint32_t)n };
			frames_used += (uint32_t)n;
			x->slot[i] = id + 1;
			__atomic_store_n(&nstacks, nstacks + 1, __ATOMIC_RELEASE);
			return id;
		}
		const struct stack *s = &stacks[v - 1];
		if (s->hash == h && s->n == (uint32_t)n &&
		    memcmp(frame_pool + s->off, frames, (size_t)n * sizeof *frames) == 0)
			return v - 1;
	}
	dropped++;
	return -1;
}

int ms_sites_stack_frames(int32_t id, uint64_t *out, int max)
{
	if (id < 0 || (uint32_t)id >= ms_sites_nstacks())
		return 0;
	const struct stack *s = &stacks[id];
	int n = (int)s->n < max ? (int)s->n : max;
	memcpy(out, frame_pool + s->off, (size_t)n * sizeof *out);
	return n;
}

size_t ms_sites_py_text(uint64_t w, char *buf, size_t size)
{
	uint32_t f = (uint32_t)(w >> PY_FUNC_SHIFT) & PY_ID_MASK, l = (uint32_t)(w >> PY_FILE_SHIFT) & PY_ID_MASK;
	const char *func = f < nstrings ? string_pool + strings[f].off : "?";
	const char *file = l < nstrings ? string_pool + strings[l].off : "?";
	struct ms_text t = ms_text_start(buf, size); /* "FUNC (FILE:LINE)", without ms_format's parsing */
	ms_text_str(&t, func);
	ms_text_put(&t, " (", 2);
	ms_text_str(&t, file);
	ms_text_put(&t, ":", 1);
	ms_text_num(&t, (unsigned)(w & PY_LINE_MASK), 0);
	ms_text_put(&t, ")", 1);
	return ms_text_end(&t);
}
