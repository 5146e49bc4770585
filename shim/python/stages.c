/* Python stages: finds the functions named in MEMSHIM_STAGES in an unmodified Python program.
 *
 * The library constructor registers a C audit hook (safe before Py_Initialize).  The first
 * cpython.run_* event (or, for embedded interpreters, the first import/exec once initialised)
 * arrives with the interpreter ready and the GIL held: the detector is installed there, through a
 * PEP 523 frame hook on 3.8-3.11 (python/frame.c) or sys.monitoring on 3.12+ (python/monitor.c).  Both ask
 * ms_py_classify() once per code object and cache the answer in the code object's co_extra slot.
 * The route is readied there, but the frame hook goes in (the monitoring tool id is taken) only once
 * a function some target can name exists (python/watch.c decides, from the audit events that
 * bring code). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "python/py.h"

struct ms_pyapi ms_py;
ms_pyssize ms_py_extra_index = -1;

/* One target of one spec stage, split into its parts (pointers into ms_cfg.spec's pool). */
struct target {
	const char *module; /* NULL: any module */
	size_t module_len;
	const char *qual;   /* qualified name */
	const char *last;   /* its last component (what co_name must be) */
	const char *text;   /* as written in MEMSHIM_STAGES */
	int stage;          /* spec index */
	int matched;        /* a function it names has run in this process */
};

#define MAX_TARGETS (MS_SPEC_MAX_STAGES * MS_SPEC_MAX_TARGETS)
static struct target targets[MAX_TARGETS] MS_LARGE;
static int ntargets;

/* ARMED: the route is ready but its frame hook or tool id and events wait until a
 * function a target can name exists (python/watch.c); the targets are live (reported when
 * unmatched) from ARMED on. */
enum { WAITING, ARMED, INSTALLED, FAILED };
static int state = WAITING;
static int route_frame; /* installed through python/frame.c: check it at finalisation */
static int (*py_initialized)(void);

static int stage_ids[MS_SPEC_MAX_STAGES]; /* engine id + 1; 0 before first use */
static int outstanding[MS_SPEC_MAX_STAGES]; /* enters not yet left, per spec stage */
static unsigned warned;

void ms_py_warn_once(int key, const char *what)
{
	unsigned bit = 1u << key;
	if (__atomic_fetch_or(&warned, bit, __ATOMIC_RELAXED) & bit)
		return;
	ms_warn("%s", what);
}

/* ---- targets ---------------------------------------------------------------------------- */

static int plausible_python_name(const char *s)
{
	/* identifiers, dots and "<locals>"; anything else (paths, spaces) is some other kind of target */
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == '.' || *s == '<' || *s == '>' || (unsigned char)*s >= 0x80))
			return 0;
	return 1;
}

static void load_targets(void)
{
	const struct ms_spec *spec = &ms_cfg.spec;
	for (int i = 0; i < spec->nstages && i < 32; i++) {
		for (int j = 0; j < spec->stage[i].ntargets && ntargets < MAX_TARGETS; j++) {
			const char *t = spec->stage[i].targets[j];
			const char *colon = strchr(t, ':');
			struct target *tg = &targets[ntargets];
			tg->module = colon ? t : NULL;
			tg->module_len = colon ? (size_t)(colon - t) : 0;
			tg->qual = colon ? colon + 1 : t;
			if (!plausible_python_name(tg->qual) ||
			    (colon && (tg->module_len == 0 || ms_target_names_object(t, tg->module_len))))
				continue; /* not a Python name, or "lib.so:symbol": a native target */
			const char *dot = strrchr(tg->qual, '.');
			tg->last = dot ? dot + 1 : tg->qual;
			if (!*tg->last)
				continue;
			tg->stage = i;
			tg->text = t;
			tg->matched = 0;
			ntargets++;
		}
	}
}

const char *ms_py_target(int i, const char **module, size_t *module_len, const char **last)
{
	if (i < 0 || i >= ntargets)
		return NULL;
	*module = targets[i].module;
	*module_len = targets[i].module_len;
	*last = targets[i].last;
	return targets[i].qual;
}

static int is_candidate(const char *co_name)
{
	for (int i = 0; i < ntargets; i++)
		if (strcmp(targets[i].last, co_name) == 0)
			return 1;
	return 0;
}

/* ---- distinct functions a target matched ------------------------------------------------
 * A bare name can match functions of several modules (eval=evaluate also ran sympy's evaluate, which
 * torch imports): each distinct module:qualname gets an entry, and the calls in which it opened a
 * stage are counted, so the exit line and the file can name them.  Written under the GIL (the
 * classification), counted with atomics. */
#define MAX_FUNCS 256
#define MAX_PAIRS 512
static struct {
	char name[192]; /* module:qualname, or the qualified name when the module is unknown */
	uint64_t calls;
} funcs[MAX_FUNCS] MS_LARGE;
static int nfuncs;
static struct {
	short target, func;
} pairs[MAX_PAIRS] MS_LARGE;
static int npairs;

/* The entry of QUAL in MODULE (NULL: unknown), added when new; -1 when the table is full. */
static int func_index(const char *qual, const char *module)
{
	char name[sizeof funcs[0].name];
	ms_format(name, sizeof name, "%s%s%s", module ? module : "", module ? ":" : "", qual);
	for (int i = 0; i < nfuncs; i++)
		if (strcmp(funcs[i].name, name) == 0)
			return i;
	if (nfuncs == MAX_FUNCS)
		return -1;
	ms_strlcpy(funcs[nfuncs].name, name, sizeof funcs[0].name);
	return nfuncs++;
}

static void pair(int target, int func)
{
	for (int i = 0; i < npairs; i++)
		if (pairs[i].target == target && pairs[i].func == func)
			return;
	if (npairs < MAX_PAIRS) {
		pairs[npairs].target = (short)target;
		pairs[npairs].func = (short)func;
		npairs++;
	}
}

/* The stages QUAL in MODULE matches; *FUNC its function entry (or -1). */
static uint32_t match(const char *qual, const char *module, int *func)
{
	uint32_t mask = 0;
	*func = -1;
	for (int i = 0; i < ntargets; i++) {
		const struct target *t = &targets[i];
		if (strcmp(t->qual, qual) != 0)
			continue;
		if (t->module && (!module || strlen(module) != t->module_len ||
				  memcmp(module, t->module, t->module_len) != 0))
			continue;
		mask |= 1u << t->stage;
		__atomic_store_n(&targets[i].matched, 1, __ATOMIC_RELAXED);
		if (*func < 0)
			*func = func_index(qual, module);
		if (*func >= 0)
			pair(i, *func);
	}
	return mask;
}

/* The distinct functions of target I that opened its stage at least once. */
static int functions_run(int i)
{
	int n = 0;
	for (int k = 0; k < npairs; k++)
		n += pairs[k].target == i && __atomic_load_n(&funcs[pairs[k].func].calls, __ATOMIC_RELAXED) > 0;
	return n;
}

void ms_py_each_ambiguous(const char *stage,
			  void (*fn)(void *ctx, const char *target, const char *function, uint64_t calls), void *ctx)
{
	for (int i = 0; i < ntargets; i++) {
		if (strcmp(ms_cfg.spec.stage[targets[i].stage].name, stage) != 0 || functions_run(i) < 2)
			continue;
		for (int k = 0; k < npairs; k++) {
			uint64_t calls = __atomic_load_n(&funcs[pairs[k].func].calls, __ATOMIC_RELAXED);
			if (pairs[k].target == i && calls > 0)
				fn(ctx, targets[i].text, funcs[pairs[k].func].name, calls);
		}
	}
}

/* ---- targets that matched nothing -------------------------------------------------------- */

/* A plain identifier the dynamic linker knows is a native function (the native detector's). */
static int native_name(const struct target *t)
{
	return !t->module && !strchr(t->qual, '.') && ms_real_dlsym(RTLD_DEFAULT, t->qual) != NULL;
}

/* Whether targets that matched nothing are named at exit: not in a program without Python, nor for
 * the Trainer's default names (absent in most scripts). */
static int names_unmatched(void)
{
	int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	return (st == INSTALLED || st == ARMED) && !ms_cfg.spec.is_default;
}

void ms_py_each_unmatched(void (*fn)(void *ctx, const char *stage, const char *target), void *ctx)
{
	if (!names_unmatched())
		return;
	for (int i = 0; i < ntargets; i++)
		if (!__atomic_load_n(&targets[i].matched, __ATOMIC_RELAXED) && !native_name(&targets[i]))
			fn(ctx, ms_cfg.spec.stage[targets[i].stage].name, targets[i].text);
}

struct unmatched_line {
	char text[1024];
	size_t len;
	int n;
};

static void add_to_line(void *ctx, const char *stage, const char *target)
{
	struct unmatched_line *l = ctx;
	if (l->len < sizeof l->text)
		l->len += ms_format(l->text + l->len, sizeof l->text - l->len, "%s%s=%s", l->n ? ", " : "", stage, target);
	l->n++;
}

/* Messages about targets are given once, by the first Python process of the run: the one the user
 * started, or the first one a shell script or another program started.  It tells the Python
 * processes it starts (spawned workers, multiprocessing's resource tracker and forkserver, ranks
 * under a Python launcher) through MEMSHIM_PY_ROOT_PID; they record theirs in their files only, and
 * a forked child (another pid) would only repeat its parent.  0: no Python target named (the
 * Trainer defaults): the process the user started speaks. */
static pid_t speaker_pid;

static void decide_speaker(void)
{
	if (ms_cfg.spec.is_default)
		return;
	const char *v = ms_setting_text("MEMSHIM_PY_ROOT_PID");
	long pid = v ? strtol(v, NULL, 10) : 0;
	if (pid > 0 && pid != (long)ms_proc.pid) {
		speaker_pid = (pid_t)pid;
		return;
	}
	char own[24];
	ms_format(own, sizeof own, "%d", (int)ms_proc.pid);
	setenv("MEMSHIM_PY_ROOT_PID", own, 1);
	speaker_pid = ms_proc.pid;
}

static int speaks_for_targets(void)
{
	if (!ms_is_tracked_process())
		return 0;
	return speaker_pid ? ms_proc.pid == speaker_pid : !ms_proc.is_child;
}

/* One line naming each target that matched functions of more than one module:qualname, with
 * the calls in which each opened the stage, and how to pin one (eval=evaluate also ran sympy's
 * evaluate, which torch imports). */
static void report_ambiguous(struct unmatched_line *l)
{
	const char *stage = NULL, *example = NULL;
	l->len = 0;
	l->n = 0;
	for (int i = 0; i < ntargets; i++) {
		if (functions_run(i) < 2)
			continue;
		const char *name = ms_cfg.spec.stage[targets[i].stage].name;
		if (l->len < sizeof l->text)
			l->len += ms_format(l->text + l->len, sizeof l->text - l->len, "%s%s=%s ran ",
					    l->n++ ? "; " : "", name, targets[i].text);
		int listed = 0;
		for (int k = 0; k < npairs; k++) {
			const char *function = funcs[pairs[k].func].name;
			uint64_t calls = __atomic_load_n(&funcs[pairs[k].func].calls, __ATOMIC_RELAXED);
			if (pairs[k].target != i || calls == 0)
				continue;
			if (!example) {
				stage = name;
				example = function;
			}
			if (l->len < sizeof l->text)
				l->len += ms_format(l->text + l->len, sizeof l->text - l->len, "%s%s (%llu call%s)",
						    listed++ ? ", " : "", function, (unsigned long long)calls,
						    calls == 1 ? "" : "s");
		}
	}
	if (l->n)
		ms_warn("Python stage target%s matched more than one function: %s; name the one meant as "
			"module:qualname (e.g. %s=%s)", l->n > 1 ? "s" : "", l->text, stage, example);
}

/* At exit: one line naming every Python target that matched no function that ran (a typo in
 * MEMSHIM_STAGES is otherwise silent). */
void ms_py_report(void)
{
	static struct unmatched_line line MS_LARGE;
	if (!speaks_for_targets() || (!names_unmatched() && npairs < 2))
		return; /* its page stays untouched */
	ms_tls_guard++;
	line.len = 0;
	line.n = 0;
	ms_py_each_unmatched(add_to_line, &line);
	if (line.n)
		ms_warn("Python stage target%s that matched no function that ran: %s", line.n > 1 ? "s" : "", line.text);
	report_ambiguous(&line);
	ms_tls_guard--;
}

/* ---- naming a code object --------------------------------------------------------------- */

static void decref(ms_pyobj *o)
{
	if (o)
		ms_py.DecRef(o);
}

/* A new reference to attribute NAME of O, or NULL with no exception left behind. */
static ms_pyobj *attr(ms_pyobj *o, const char *name)
{
	if (!o)
		return NULL;
	ms_pyobj *v = ms_py.GetAttrString(o, name);
	if (!v)
		ms_py.ErrClear();
	return v;
}

static long attr_long(ms_pyobj *o, const char *name, long fallback)
{
	ms_pyobj *v = attr(o, name);
	if (!v)
		return fallback;
	long r = ms_py.LongAsLong(v);
	if (r == -1 && ms_py.ErrOccurred()) {
		ms_py.ErrClear();
		r = fallback;
	}
	decref(v);
	return r;
}

/* Copies the text of string O into BUF; 0 on success. */
static int text(ms_pyobj *o, char *buf, size_t size)
{
	if (!o)
		return -1;
	const char *s = ms_py.UnicodeAsUTF8(o);
	if (!s) {
		ms_py.ErrClear();
		return -1;
	}
	size_t n = strlen(s);
	if (n >= size)
		return -1;
	memcpy(buf, s, n + 1);
	return 0;
}

static int attr_text(ms_pyobj *o, const char *name, char *buf, size_t size)
{
	ms_pyobj *v = attr(o, name);
	int r = text(v, buf, size);
	decref(v);
	return r;
}

/* Whether V is a plain function (or a classmethod/staticmethod around one) running CODE.  Only
 * built-in types are inspected, so no user code (__getattr__, descriptors) runs. */
static int runs_code(ms_pyobj *v, ms_pyobj *code)
{
	if (!v)
		return 0;
	ms_pyobj *t = ms_py_type_of(v);
	ms_pyobj *f = NULL;
	if (t == ms_py.ClassMethodType || t == ms_py.StaticMethodType)
		f = attr(v, "__func__");
	else if (t == ms_py.FunctionType) {
		f = v;
		ms_py.IncRef(f);
	}
	if (!f)
		return 0;
	int r = 0;
	if (ms_py_type_of(f) == ms_py.FunctionType) {
		ms_pyobj *c = attr(f, "__code__");
		r = c == code;
		decref(c);
	}
	decref(f);
	return r;
}

/* Finds the class in CLS's MRO whose own namespace defines NAME as CODE: "Class.name". */
static int qual_from_mro(ms_pyobj *cls, ms_pyobj *name, const char *co_name, ms_pyobj *code,
			 char *out, size_t size)
{
	ms_pyobj *mro = attr(cls, "__mro__");
	int found = -1;
	if (!mro)
		return -1;
	ms_pyssize n = ms_py.TupleSize(mro);
	if (n < 0)
		ms_py.ErrClear();
	for (ms_pyssize i = 0; i < n && found < 0; i++) {
		ms_pyobj *c = ms_py.TupleGetItem(mro, i);
		ms_pyobj *ns = attr(c, "__dict__");
		ms_pyobj *v = ns ? ms_py.GetItem(ns, name) : NULL;
		if (ns && !v)
			ms_py.ErrClear();
		if (runs_code(v, code)) {
			char cq[200];
			if (attr_text(c, "__qualname__", cq, sizeof cq) == 0 &&
			    strlen(cq) + 1 + strlen(co_name) < size) {
				ms_format(out, size, "%s.%s", cq, co_name);
				found = 0;
			}
		}
		decref(v);
		decref(ns);
	}
	decref(mro);
	return found;
}

/* Before 3.11 code objects have no co_qualname: rebuild it from the frame (a method's first
 * argument names its class; a module-level function is in the globals), or, for nested
 * functions, from the function object that runs CODE.  Called once per candidate code object. */
static int rebuild_qualname(ms_pyobj *code, ms_pyobj *frame, ms_pyobj *globals, ms_pyobj *name,
			    const char *co_name, char *out, size_t size)
{
	if (frame && attr_long(code, "co_argcount", 0) + attr_long(code, "co_kwonlyargcount", 0) >= 1) {
		ms_pyobj *varnames = attr(code, "co_varnames");
		/* A function frame has no f_locals dict until someone asks; asking makes one that holds
		 * every argument until the frame ends (an argument the function drops would stay alive).
		 * When this call made it, it is taken back: f_locals is the eighth pointer of
		 * PyFrameObject in 3.8-3.10, used only when it holds exactly the dict just returned. */
		ms_pyobj **frame_words = (ms_pyobj **)frame;
		int had_locals = frame_words[7] != NULL;
		ms_pyobj *locals = attr(frame, "f_locals");
		if (!had_locals && locals && frame_words[7] == locals) {
			frame_words[7] = NULL;
			ms_py.DecRef(locals); /* the frame's reference; ours goes below */
		}
		ms_pyobj *first = NULL;
		if (varnames && locals && ms_py.TupleSize(varnames) > 0) {
			first = ms_py.GetItem(locals, ms_py.TupleGetItem(varnames, 0));
			if (!first)
				ms_py.ErrClear();
		}
		int found = -1;
		if (first) {
			ms_pyobj *type = ms_py.Type(first);
			if (ms_py.TypeIsSubtype(type, ms_py.TypeType))
				found = qual_from_mro(first, name, co_name, code, out, size);
			if (found < 0)
				found = qual_from_mro(type, name, co_name, code, out, size);
			decref(type);
		}
		decref(first);
		decref(locals);
		decref(varnames);
		if (found == 0)
			return 0;
	}
	if (globals && runs_code(ms_py.DictGetItemString(globals, co_name), code)) {
		ms_format(out, size, "%s", co_name);
		return 0;
	}
	/* nested functions and other rare shapes: the function objects that refer to CODE */
	int found = -1;
	ms_pyobj *gc = ms_py.ImportModule("gc");
	ms_pyobj *get = attr(gc, "get_referrers");
	ms_pyobj *refs = get ? ms_py.CallFunctionObjArgs(get, code, NULL) : NULL;
	if (get && !refs)
		ms_py.ErrClear();
	if (!gc)
		ms_py.ErrClear();
	ms_pyssize n = refs ? ms_py.ListSize(refs) : 0;
	if (n < 0) {
		ms_py.ErrClear();
		n = 0;
	}
	for (ms_pyssize i = 0; i < n && found < 0; i++) {
		ms_pyobj *f = ms_py.ListGetItem(refs, i);
		if (f && ms_py_type_of(f) == ms_py.FunctionType && runs_code(f, code))
			found = attr_text(f, "__qualname__", out, size);
	}
	decref(refs);
	decref(get);
	decref(gc);
	return found;
}

uintptr_t ms_py_classify(ms_pyobj *code, ms_pyobj *frame, ms_pyobj *func, ms_pyobj *globals)
{
	ms_pyobj *et, *ev, *etb;
	ms_py.ErrFetch(&et, &ev, &etb);
	uintptr_t value = MS_PY_SEEN;
	char co_name[128], qual[256], module[256];
	ms_pyobj *name = attr(code, "co_name");
	if (text(name, co_name, sizeof co_name) == 0 && is_candidate(co_name)) {
		ms_pyobj *own_globals = NULL;
		if (!globals && func)
			globals = own_globals = attr(func, "__globals__");
		if (!globals && frame)
			globals = own_globals = attr(frame, "f_globals");
		int have_qual = ms_py.minor >= 11
			? attr_text(code, "co_qualname", qual, sizeof qual)
			: rebuild_qualname(code, frame, globals, name, co_name, qual, sizeof qual);
		int have_module = -1;
		if (globals)
			have_module = text(ms_py.DictGetItemString(globals, "__name__"), module, sizeof module);
		if (ms_py.ErrOccurred())
			ms_py.ErrClear();
		int entry_index = -1;
		uint32_t mask = have_qual == 0 ? match(qual, have_module == 0 ? module : NULL, &entry_index) : 0;
		if (mask) {
			value |= (uintptr_t)mask << MS_PY_SHIFT;
			if (entry_index >= 0)
				value |= (uintptr_t)(entry_index + 1) << MS_PY_FUNC_SHIFT;
			if (attr_long(code, "co_flags", 0) & (0x20 | 0x80 | 0x100 | 0x200))
				value |= MS_PY_GENLIKE;
			ms_debug("python stage target found: %s%s%s", have_module == 0 ? module : "",
				 have_module == 0 ? ":" : "", qual);
		}
		decref(own_globals);
	}
	decref(name);
	if (ms_py.CodeSetExtra(code, ms_py_extra_index, (void *)value) < 0)
		ms_py.ErrClear();
	ms_py.ErrRestore(et, ev, etb);
	return value;
}

void ms_py_release_locals_dict(ms_pyobj *code, ms_pyobj **slot)
{
	ms_pyobj *d = *slot;
	/* a class body's or module's namespace is held elsewhere too; only a function's is a copy */
	if (!d || *(const ms_pyssize *)d != 1 || !(attr_long(code, "co_flags", 0) & 0x1 /* CO_OPTIMIZED */))
		return;
	*slot = NULL;
	ms_py.DecRef(d);
}

/* ---- entering and leaving stages ------------------------------------------------------- */

static int stage_id(int i)
{
	int v = __atomic_load_n(&stage_ids[i], __ATOMIC_RELAXED);
	if (v == 0) {
		int id = ms_stage_id(ms_cfg.spec.stage[i].name);
		if (id == MS_STAGE_BUSY) /* a signal handler on a thread inside the engine: next time */
			return -1;
		v = id < 0 ? -1 : id + 1; /* the table is full: remember the failure */
		__atomic_store_n(&stage_ids[i], v, __ATOMIC_RELAXED);
	}
	return v > 0 ? v - 1 : -1;
}

void ms_py_enter(uintptr_t v)
{
	if (MS_UNLIKELY(!ms_active))
		return; /* e.g. a forked child that is not followed; leaves stay paired by outstanding[] */
	double now = ms_elapsed();
	int opened = 0;
	for (uint32_t mask = ms_py_mask(v), i = 0; mask; i++, mask >>= 1) {
		if (!(mask & 1))
			continue;
		int id = stage_id((int)i);
		opened |= id >= 0 && ms_stage_depth(id) == 0;
		if (id >= 0 && ms_stage_enter(id, now) == 0)
			__atomic_add_fetch(&outstanding[i], 1, __ATOMIC_RELAXED);
	}
	unsigned func = (unsigned)(v >> MS_PY_FUNC_SHIFT) & 0xffff;
	if (opened && func > 0 && func <= MAX_FUNCS)
		__atomic_add_fetch(&funcs[func - 1].calls, 1, __ATOMIC_RELAXED);
}

void ms_py_leave(uint32_t mask)
{
	double now = ms_elapsed();
	for (int i = 31; i >= 0; i--) {
		if (!(mask & (1u << i)))
			continue;
		int n = __atomic_load_n(&outstanding[i], __ATOMIC_RELAXED);
		while (n > 0 && !__atomic_compare_exchange_n(&outstanding[i], &n, n - 1, 0,
							     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		if (n > 0)
			ms_stage_leave(stage_id(i), now);
	}
}

/* ---- bootstrap ------------------------------------------------------------------------- */

static struct ms_elf_tables py_tables; /* of the object defining the C API (executable or libpython) */
static int have_py_tables;

void *ms_py_sym(const char *name)
{
	void *p = have_py_tables ? ms_elf_tables_symbol(&py_tables, name) : NULL;
	return p ? p : ms_real_dlsym(RTLD_DEFAULT, name);
}

#define NEED(field, name)                                 \
	do {                                              \
		*(void **)&ms_py.field = ms_py_sym(name); \
		if (!ms_py.field)                         \
			return name;                      \
	} while (0)

/* Fills ms_py; returns the name of a missing symbol, or NULL. */
static const char *load_api(void)
{
	if (ms_py.False)
		return NULL;
	NEED(IsInitialized, "Py_IsInitialized");
	NEED(GetVersion, "Py_GetVersion");
	const char *v = ms_py.GetVersion();
	if (!v || v[0] != '3' || v[1] != '.')
		return "Py_GetVersion";
	ms_py.minor = atoi(v + 2);
	NEED(ImportModule, "PyImport_ImportModule");
	NEED(GetAttrString, "PyObject_GetAttrString");
	NEED(SetAttrString, "PyObject_SetAttrString");
	NEED(CallFunctionObjArgs, "PyObject_CallFunctionObjArgs");
	NEED(GetItem, "PyObject_GetItem");
	NEED(Type, "PyObject_Type");
	NEED(TypeIsSubtype, "PyType_IsSubtype");
	NEED(LongFromLong, "PyLong_FromLong");
	NEED(LongAsLong, "PyLong_AsLong");
	NEED(UnicodeFromString, "PyUnicode_FromString");
	NEED(UnicodeAsUTF8, "PyUnicode_AsUTF8");
	NEED(CFunctionNewEx, "PyCFunction_NewEx");
	NEED(IncRef, "Py_IncRef");
	NEED(DecRef, "Py_DecRef");
	NEED(ErrOccurred, "PyErr_Occurred");
	NEED(ErrClear, "PyErr_Clear");
	NEED(ErrFetch, "PyErr_Fetch");
	NEED(ErrRestore, "PyErr_Restore");
	NEED(DictGetItemString, "PyDict_GetItemString");
	NEED(EvalGetGlobals, "PyEval_GetGlobals");
	NEED(GetModuleDict, "PyImport_GetModuleDict");
	NEED(DictNext, "PyDict_Next");
	NEED(DictGetItem, "PyDict_GetItem");
	NEED(ModuleGetDict, "PyModule_GetDict");
	NEED(TupleSize, "PyTuple_Size");
	NEED(TupleGetItem, "PyTuple_GetItem");
	NEED(ListSize, "PyList_Size");
	NEED(ListGetItem, "PyList_GetItem");
	if (ms_py.minor >= 12) {
		NEED(RequestCodeExtraIndex, "PyUnstable_Eval_RequestCodeExtraIndex");
		NEED(CodeGetExtra, "PyUnstable_Code_GetExtra");
		NEED(CodeSetExtra, "PyUnstable_Code_SetExtra");
	} else {
		NEED(RequestCodeExtraIndex, "_PyEval_RequestCodeExtraIndex");
		NEED(CodeGetExtra, "_PyCode_GetExtra");
		NEED(CodeSetExtra, "_PyCode_SetExtra");
	}
	NEED(None, "_Py_NoneStruct");
	NEED(CodeType, "PyCode_Type");
	NEED(FunctionType, "PyFunction_Type");
	NEED(TypeType, "PyType_Type");
	NEED(ClassMethodType, "PyClassMethod_Type");
	NEED(StaticMethodType, "PyStaticMethod_Type");
	NEED(ModuleType, "PyModule_Type");
	NEED(False, "_Py_FalseStruct"); /* last: marks the table complete */
	return NULL;
}

/* Puts the frame hook in, or turns the monitoring events on (state ARMED, GIL held). */
static void enable_route(const char *why)
{
	if ((route_frame ? ms_py_frame_enable(why) : ms_py_monitor_enable(why)) == 0) {
		state = INSTALLED;
		return;
	}
	state = FAILED;
	if (route_frame) /* python/monitor.c says why itself */
		ms_warn("Python stages disabled: another tool's frame evaluation hook took the place memshim's "
			"was to take");
}

/* EMBEDDED: started by an import or exec, not by cpython.run_* (EVENT, ARGS). */
static void install(const char *event, ms_pyobj *args, int embedded)
{
	const char *missing = load_api();
	if (missing) {
		ms_warn("Python stages disabled: %s not found in this Python", missing);
		state = FAILED;
		return;
	}
	void *none_type = ms_py_sym("_PyNone_Type");
	if (!none_type || ms_py_type_of(ms_py.None) != none_type) {
		/* debug (Py_TRACE_REFS) or free-threaded builds put ob_type elsewhere */
		ms_warn("Python stages disabled: this Python build's object layout is not supported");
		state = FAILED;
		return;
	}
	if (ms_cfg.sites || (ntargets && ms_py.minor >= 12))
		ms_py_stack_install(); /* 3.12+: a returning function's frame (python/monitor.c) */
	if (ntargets == 0) {
		state = INSTALLED; /* only call sites wanted the interpreter */
		return;
	}
	ms_pyobj *et, *ev, *etb;
	ms_py.ErrFetch(&et, &ev, &etb);
	ms_py_extra_index = ms_py.RequestCodeExtraIndex(NULL);
	int r = -1;
	if (ms_py_extra_index < 0) {
		ms_py.ErrClear();
		ms_warn("Python stages disabled: no free code object extra slot");
	} else if (ms_py.minor >= 12) {
		r = ms_py_monitor_install();
	} else {
		r = ms_py_frame_prepare();
		route_frame = r == 0;
	}
	state = r == 0 ? ARMED : FAILED;
	ms_debug("python stage detection %s (Python 3.%d)", r != 0 ? "failed" : "armed", ms_py.minor);
	if (state == ARMED) {
		/* an embedder may run code through calls that raise no audit event (PyEval_EvalCode) */
		const char *why = embedded ? "embedded interpreter" : ms_py_watch_start(event, args);
		if (why)
			enable_route(why);
	}
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
	ms_py.ErrRestore(et, ev, etb);
}

/* Whether the interpreter's own startup (site, .pth files, sitecustomize) is over: the import
 * of site is running while its spec says _initializing.  ARGS is the import event's tuple. */
static int startup_over(const char *event, ms_pyobj *args)
{
	static ms_pyobj *(*modules_dict)(void);
	if (!modules_dict)
		*(void **)&modules_dict = ms_py_sym("PyImport_GetModuleDict");
	if (!modules_dict || load_api())
		return 0;
	ms_pyobj *et, *ev, *etb;
	ms_py.ErrFetch(&et, &ev, &etb);
	int over = 1;
	if (strcmp(event, "import") == 0 && args && ms_py.TupleSize(args) > 0) {
		ms_pyobj *name = ms_py.TupleGetItem(args, 0);
		const char *s = name ? ms_py.UnicodeAsUTF8(name) : NULL;
		if (s && strcmp(s, "site") == 0)
			over = 0;
	}
	static ms_pyobj *site_spec; /* kept while site imports: asked again at each event until then */
	if (over && !site_spec) {
		ms_pyobj *site = ms_py.DictGetItemString(modules_dict(), "site");
		site_spec = attr(site, "__spec__");
	}
	if (over && site_spec) {
		ms_pyobj *init = attr(site_spec, "_initializing");
		over = !init || init == ms_py.False;
		decref(init);
		if (over) {
			decref(site_spec);
			site_spec = NULL;
		}
	}
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
	ms_py.ErrRestore(et, ev, etb);
	return over;
}

static int is_start_event(const char *event, ms_pyobj *args)
{
	if (strncmp(event, "cpython.run_", 12) == 0)
		return strcmp(event + 12, "startup") != 0; /* PYTHONSTARTUP runs before stdin */
	/* embedded interpreters never raise cpython.run_*: the first import or exec once initialised
	 * and past the interpreter's own startup */
	if ((strcmp(event, "import") == 0 || strcmp(event, "exec") == 0) && py_initialized && py_initialized())
		return startup_over(event, args);
	return 0;
}

/* While ARMED: does this event bring a function a target can name?  Events raised while this
 * thread looks are its own (a finalizer run by a collection); other threads may still come in
 * while a finalizer lets go of the GIL, hence the state check after. */
static void watch(const char *event, ms_pyobj *args)
{
	static __thread int watching MS_TLS;
	if (watching || (strcmp(event, "exec") != 0 && strcmp(event, "code.__new__") != 0))
		return; /* the only events that bring code (open, import, ... are many) */
	watching = 1;
	ms_pyobj *et, *ev, *etb;
	ms_py.ErrFetch(&et, &ev, &etb);
	const char *why = ms_py_watch_event(event, args);
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
	ms_py.ErrRestore(et, ev, etb);
	watching = 0;
	if (why && state == ARMED)
		enable_route(why);
}

static void before_hooks_cleared(void);

static int audit_hook(const char *event, ms_pyobj *args, void *data)
{
	if (MS_UNLIKELY(event[0] == 'c' && strcmp(event, "cpython._PySys_ClearAuditHooks") == 0)) {
		if (state == INSTALLED && route_frame)
			ms_py_frame_check();
		before_hooks_cleared();
		return 0;
	}
	if (MS_LIKELY(state != WAITING)) {
		if (state == ARMED)
			watch(event, args);
		return 0;
	}
	if (!is_start_event(event, args))
		return 0;
	state = INSTALLED; /* installing raises audit events of its own */
	install(event, args, strncmp(event, "cpython.run_", 12) != 0);
	return 0;
}

/* ---- the audit hook's entry and Python's debug allocator ----------------------------------
 * PySys_AddAuditHook, called before the interpreter initialises, takes its list entry from the raw
 * allocator in place then (plain malloc).  Under Python's debug allocator (-X dev, PYTHONDEVMODE,
 * PYTHONMALLOC=debug, malloc_debug, pymalloc_debug), which initialisation installs later, the
 * interpreter frees that entry at exit with the debug allocator's free, which finds no header of
 * its own and aborts the process ("bad ID: Allocated using API '!', verified using API 'r'").  So
 * the entry's address and the allocator it came from are noted when it is made, and when the
 * hooks are about to be cleared under another raw allocator, that allocator's free is wrapped: the
 * entry goes back to its own allocator, everything else to the current one. */
typedef struct {
	void *ctx;
	void *(*malloc)(void *ctx, size_t n);
	void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
	void *(*realloc)(void *ctx, void *p, size_t n);
	void (*free)(void *ctx, void *p);
} raw_allocator; /* PyMemAllocatorEx, identical in 3.8-3.13 */
#define PYMEM_DOMAIN_RAW 0

static raw_allocator entry_alloc, now_alloc; /* the entry's allocator, the one at clearing */
static void *entry;                           /* our audit hook's list entry */
static void (*get_allocator)(int domain, raw_allocator *a);
static void (*set_allocator)(int domain, raw_allocator *a);

static void *noting_malloc(void *ctx, size_t n)
{
	void *p = entry_alloc.malloc(entry_alloc.ctx, n);
	if (!entry)
		entry = p;
	return p;
}

static void *noting_calloc(void *ctx, size_t nelem, size_t elsize)
{
	void *p = entry_alloc.calloc(entry_alloc.ctx, nelem, elsize);
	if (!entry)
		entry = p;
	return p;
}

static void *noting_realloc(void *ctx, void *p, size_t n)
{
	return entry_alloc.realloc(entry_alloc.ctx, p, n);
}

static void noting_free(void *ctx, void *p)
{
	entry_alloc.free(entry_alloc.ctx, p);
}

typedef int (*audit_hook_fn)(const char *, ms_pyobj *, void *);

/* Registers HOOK with ADD, noting where its entry came from; 0 on success. */
static int add_audit_hook(int (*add)(audit_hook_fn, void *), audit_hook_fn hook)
{
	*(void **)&get_allocator = ms_py_sym("PyMem_GetAllocator");
	*(void **)&set_allocator = ms_py_sym("PyMem_SetAllocator");
	if (!get_allocator || !set_allocator)
		return add(hook, NULL);
	get_allocator(PYMEM_DOMAIN_RAW, &entry_alloc);
	raw_allocator noting = { NULL, noting_malloc, noting_calloc, noting_realloc, noting_free };
	set_allocator(PYMEM_DOMAIN_RAW, &noting);
	int r = add(hook, NULL);
	set_allocator(PYMEM_DOMAIN_RAW, &entry_alloc);
	return r;
}

/* The current allocator's free, but our entry goes back where it came from. */
static void entry_aware_free(void *ctx, void *p)
{
	if (p && p == entry) {
		entry = NULL;
		entry_alloc.free(entry_alloc.ctx, p);
		return;
	}
	now_alloc.free(ctx, p);
}

/* At "cpython._PySys_ClearAuditHooks", just before the entries are freed. */
static void before_hooks_cleared(void)
{
	if (!entry || !get_allocator)
		return;
	get_allocator(PYMEM_DOMAIN_RAW, &now_alloc);
	if (now_alloc.free == entry_alloc.free && now_alloc.ctx == entry_alloc.ctx)
		return;
	/* the same context and functions but free: a thread allocating meanwhile sees either */
	raw_allocator aware = now_alloc;
	aware.free = entry_aware_free;
	set_allocator(PYMEM_DOMAIN_RAW, &aware);
	ms_debug("python audit hook entry: given back to the allocator that made it");
}

/* Python 2 to 3.7 have no audit hook to start from: a run that names Python targets hears so once
 * (the Trainer defaults stay quiet, as everywhere). */
static void warn_old_python(void)
{
	if (ms_cfg.spec.is_default || !ms_elf_loaded_symbol("Py_GetVersion"))
		return; /* quiet for the defaults, or not a Python process */
	const char *(*version)(void) = (const char *(*)(void))ms_py_sym("Py_GetVersion");
	load_targets();
	if (ntargets == 0)
		return;
	decide_speaker();
	if (!speaks_for_targets())
		return; /* the Python process that started this one said it */
	const char *v = version ? version() : NULL;
	char shown[32] = "";
	if (v)
		ms_strlcpy(shown, v, strcspn(v, " ") + 1 < sizeof shown ? strcspn(v, " ") + 1 : sizeof shown);
	ms_warn("Python stages need Python 3.8 or newer; this is Python %s: the Python targets of "
		"MEMSHIM_STAGES are ignored (memshim_stage_begin/end still work)", shown);
}

void ms_py_init(void)
{
	typedef int (*add_hook_fn)(audit_hook_fn, void *);
	/* probed without dlsym, whose miss allocates (a heap of its own in a program like /bin/true) */
	add_hook_fn add = (add_hook_fn)ms_elf_loaded_symbol("PySys_AddAuditHook");
	have_py_tables = add && ms_elf_tables_of(ms_elf_object_of((const void *)add), &py_tables) == 0;
	if (!add) {
		warn_old_python(); /* not a Python process, or Python < 3.8 */
		return;
	}
	*(void **)&py_initialized = ms_py_sym("Py_IsInitialized");
	if (py_initialized && py_initialized())
		return; /* loaded into a running interpreter: no safe point to hook in from here */
	load_targets();
	if (ntargets)
		decide_speaker();
	if (ntargets == 0 && !ms_cfg.sites)
		return;
	if (add_audit_hook(add, audit_hook) != 0)
		ms_warn("Python stages disabled: the audit hook was refused");
}
