/* Python stages' bootstrap: starts finding the functions named in MEMSHIM_STAGES in an unmodified
 * Python program.
 *
 * The library constructor registers a C audit hook (safe before Py_Initialize).  The first
 * cpython.run_* event (or, for embedded interpreters, the first import/exec once initialised)
 * arrives with the interpreter ready and the GIL held: the detector is installed there, through a
 * PEP 523 frame hook on 3.8-3.11 (python/evalhook.c) or sys.monitoring on 3.12+ (python/monitor.c).  Both ask
 * ms_py_classify() (python/classify.c) once per code object and keep the answer.
 * The route is readied there, but the frame hook goes in (the monitoring tool id is taken) only once
 * a function some target can name exists (python/watch.c decides, from the audit events that
 * bring code).  This file calls the others in python/ and none calls it (the top of python/). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "python/py.h"

/* ARMED: the route is ready but its frame hook or tool id and events wait until a
 * function a target can name exists (python/watch.c); the targets are live (reported when
 * unmatched) from ARMED on. */
enum { WAITING, ARMED, INSTALLED, FAILED };

/* Python's raw allocator (PyMemAllocatorEx, identical in 3.8-3.13): the audit hook's entry below. */
typedef struct {
	void *ctx;
	void *(*malloc)(void *ctx, size_t n);
	void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
	void *(*realloc)(void *ctx, void *p, size_t n);
	void (*free)(void *ctx, void *p);
} raw_allocator;
#define PYMEM_DOMAIN_RAW 0

/* Where the bootstrap stands, and the audit hook's list entry. */
static struct {
	int state; /* WAITING, ARMED, INSTALLED or FAILED */
	int ntargets;
	int route_frame; /* installed through python/evalhook.c: check it at finalisation */
	/* 3.12+ until the whole-program route is needed: the code each exec event brings is searched
	 * for the code objects a target can name, which alone get events (python/monitor.c). */
	int route_local;
	int (*py_initialized)(void);
	raw_allocator entry_alloc, now_alloc; /* the entry's allocator, the one at clearing */
	void *entry;                          /* our audit hook's list entry */
	void (*get_allocator)(int domain, raw_allocator *a);
	void (*set_allocator)(int domain, raw_allocator *a);
} boot = { .state = WAITING };

/* The targets are live (named at exit when unmatched) while the route is armed or installed. */
static void set_state(int s)
{
	boot.state = s;
	ms_py_targets_live(s == ARMED || s == INSTALLED);
}

/* Puts the frame hook in, or turns the monitoring events on (state ARMED, GIL held). */
static void enable_route(const char *why)
{
	boot.route_local = 0;
	if ((boot.route_frame ? ms_py_frame_enable(why) : ms_py_monitor_enable(why)) == 0) {
		set_state(INSTALLED);
		return;
	}
	set_state(FAILED);
	if (boot.route_frame) /* python/monitor.c says why itself */
		ms_warn("Python stages disabled: another tool's frame evaluation hook took the place memshim's "
			"was to take");
}

/* Python stacks readable (python/frames.c) and code objects known (python/codes.c), once. */
static void stack_install(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	if (ms_py_stack_install() == 0)
		ms_py_codes_init();
}

/* The interpreter's own start imports (encodings, site): its call sites get their Python frames
 * from the first import on, and their native walk stops at the interpreter as later ones do. */
static void early_stack(const char *event)
{
	if (!ms_cfg.sites || strcmp(event, "import") != 0 || ms_py_load_api())
		return;
	void *none_type = ms_py_sym("_PyNone_Type");
	if (none_type && ms_py_type_of(ms_py.None) == none_type)
		stack_install();
}

/* EMBEDDED: started by an import or exec, not by cpython.run_* (EVENT, ARGS). */
static void install(const char *event, ms_pyobj *args, int embedded)
{
	const char *missing = ms_py_load_api();
	if (missing) {
		ms_warn("Python stages disabled: %s not found in this Python", missing);
		set_state(FAILED);
		return;
	}
	void *none_type = ms_py_sym("_PyNone_Type");
	if (!none_type || ms_py_type_of(ms_py.None) != none_type) {
		/* debug (Py_TRACE_REFS) or free-threaded builds put ob_type elsewhere */
		ms_warn("Python stages disabled: this Python build's object layout is not supported");
		set_state(FAILED);
		return;
	}
	if (ms_cfg.sites || boot.ntargets)
		stack_install();
	if (boot.ntargets == 0) {
		set_state(INSTALLED); /* only call sites wanted the interpreter */
		return;
	}
	ms_pyobj *et, *ev, *etb;
	ms_py.ErrFetch(&et, &ev, &etb);
	int r = -1;
	if (ms_py.minor >= 12) {
		r = ms_py_monitor_install();
	} else {
		r = ms_py_frame_prepare();
		boot.route_frame = r == 0;
	}
	boot.route_local = r == 0 && !boot.route_frame;
	set_state(r == 0 ? ARMED : FAILED);
	ms_debug("python stage detection %s (Python 3.%d)", r != 0 ? "failed" : "armed", ms_py.minor);
	if (boot.state == ARMED) {
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
	if (!modules_dict || ms_py_load_api())
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
		site_spec = ms_py_attr(site, "__spec__");
	}
	if (over && site_spec) {
		ms_pyobj *init = ms_py_attr(site_spec, "_initializing");
		over = !init || init == ms_py.False;
		ms_py_decref(init);
		if (over) {
			ms_py_decref(site_spec);
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
	if ((strcmp(event, "import") == 0 || strcmp(event, "exec") == 0) && boot.py_initialized &&
	    boot.py_initialized())
		return startup_over(event, args);
	return 0;
}

/* 3.12+: a code object a target can name, before it runs: it gets memshim's events. */
static void watch_code(ms_pyobj *code)
{
	if (boot.state == FAILED)
		return;
	if (ms_py_monitor_watch(code) != 0)
		set_state(FAILED);
	else if (boot.state == ARMED)
		set_state(INSTALLED);
}

/* While ARMED (or on 3.12+ while code objects are watched one by one): does this event bring a
 * function a target can name?  Events raised while this
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
	const char *why = ms_py_watch_event(event, args, boot.route_local ? watch_code : NULL);
	if (ms_py.ErrOccurred())
		ms_py.ErrClear();
	ms_py.ErrRestore(et, ev, etb);
	watching = 0;
	if (why && (boot.state == ARMED || (boot.state == INSTALLED && boot.route_local)))
		enable_route(why);
}

static void before_hooks_cleared(void);

static int audit_hook(const char *event, ms_pyobj *args, void *data)
{
	if (MS_UNLIKELY(event[0] == 'c' && strcmp(event, "cpython._PySys_ClearAuditHooks") == 0)) {
		if (boot.state == INSTALLED && boot.route_frame)
			ms_py_frame_check();
		before_hooks_cleared();
		return 0;
	}
	if (MS_LIKELY(boot.state != WAITING)) {
		if ((boot.state == ARMED || (boot.route_local && boot.state == INSTALLED)) &&
		    ms_py_in_main_interpreter())
			watch(event, args);
		else if (boot.state == INSTALLED && boot.route_frame && ms_py_in_main_interpreter())
			ms_py_frame_reclaim();
		return 0;
	}
	if (!is_start_event(event, args)) {
		if (!ms_py_stack_ready())
			early_stack(event);
		return 0;
	}
	set_state(INSTALLED); /* installing raises audit events of its own */
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

static void *noting_malloc(void *ctx, size_t n)
{
	void *p = boot.entry_alloc.malloc(boot.entry_alloc.ctx, n);
	if (!boot.entry)
		boot.entry = p;
	return p;
}

static void *noting_calloc(void *ctx, size_t nelem, size_t elsize)
{
	void *p = boot.entry_alloc.calloc(boot.entry_alloc.ctx, nelem, elsize);
	if (!boot.entry)
		boot.entry = p;
	return p;
}

static void *noting_realloc(void *ctx, void *p, size_t n)
{
	return boot.entry_alloc.realloc(boot.entry_alloc.ctx, p, n);
}

static void noting_free(void *ctx, void *p)
{
	boot.entry_alloc.free(boot.entry_alloc.ctx, p);
}

typedef int (*audit_hook_fn)(const char *, ms_pyobj *, void *);

/* Registers HOOK with ADD, noting where its entry came from; 0 on success. */
static int add_audit_hook(int (*add)(audit_hook_fn, void *), audit_hook_fn hook)
{
	*(void **)&boot.get_allocator = ms_py_sym("PyMem_GetAllocator");
	*(void **)&boot.set_allocator = ms_py_sym("PyMem_SetAllocator");
	if (!boot.get_allocator || !boot.set_allocator)
		return add(hook, NULL);
	boot.get_allocator(PYMEM_DOMAIN_RAW, &boot.entry_alloc);
	raw_allocator noting = { NULL, noting_malloc, noting_calloc, noting_realloc, noting_free };
	boot.set_allocator(PYMEM_DOMAIN_RAW, &noting);
	int r = add(hook, NULL);
	boot.set_allocator(PYMEM_DOMAIN_RAW, &boot.entry_alloc);
	return r;
}

/* The current allocator's free, but our entry goes back where it came from. */
static void entry_aware_free(void *ctx, void *p)
{
	if (p && p == boot.entry) {
		boot.entry = NULL;
		boot.entry_alloc.free(boot.entry_alloc.ctx, p);
		return;
	}
	boot.now_alloc.free(ctx, p);
}

/* At "cpython._PySys_ClearAuditHooks", just before the entries are freed. */
static void before_hooks_cleared(void)
{
	if (!boot.entry || !boot.get_allocator)
		return;
	boot.get_allocator(PYMEM_DOMAIN_RAW, &boot.now_alloc);
	if (boot.now_alloc.free == boot.entry_alloc.free && boot.now_alloc.ctx == boot.entry_alloc.ctx)
		return;
	/* the same context and functions but free: a thread allocating meanwhile sees either */
	raw_allocator aware = boot.now_alloc;
	aware.free = entry_aware_free;
	boot.set_allocator(PYMEM_DOMAIN_RAW, &aware);
	ms_debug("python audit hook entry: given back to the allocator that made it");
}

/* Python 2 to 3.7 have no audit hook to start from: a run that names Python targets hears so once
 * (the Trainer defaults stay quiet, as everywhere). */
static void warn_old_python(void)
{
	if (ms_cfg.spec.is_default || !ms_elf_loaded_symbol("Py_GetVersion"))
		return; /* quiet for the defaults, or not a Python process */
	const char *(*version)(void) = (const char *(*)(void))ms_py_sym("Py_GetVersion");
	if (ms_py_targets_load() == 0)
		return;
	ms_py_targets_decide_speaker();
	if (!ms_py_speaks_for_targets())
		return; /* the Python process that started this one said it */
	const char *v = version ? version() : NULL;
	char shown[32] = "";
	if (v)
		ms_strlcpy(shown, v, strcspn(v, " ") + 1 < sizeof shown ? strcspn(v, " ") + 1 : sizeof shown);
	ms_warn("Python stages need Python 3.8 or newer; this is Python %s: the Python targets of "
		"MEMSHIM_STAGES are ignored (memshim_stage_begin/end still work)",
		shown);
}

void ms_py_init(void)
{
	typedef int (*add_hook_fn)(audit_hook_fn, void *);
	/* probed without dlsym, whose miss allocates (a heap of its own in a program like /bin/true) */
	add_hook_fn add = (add_hook_fn)ms_elf_loaded_symbol("PySys_AddAuditHook");
	if (add)
		ms_py_capi_locate((const void *)add);
	if (!add) {
		warn_old_python(); /* not a Python process, or Python < 3.8 */
		return;
	}
	*(void **)&boot.py_initialized = ms_py_sym("Py_IsInitialized");
	if (boot.py_initialized && boot.py_initialized())
		return; /* loaded into a running interpreter: no safe point to hook in from here */
	boot.ntargets = ms_py_targets_load();
	if (boot.ntargets)
		ms_py_targets_decide_speaker();
	if (boot.ntargets == 0 && !ms_cfg.sites)
		return;
	if (add_audit_hook(add, audit_hook) != 0)
		ms_warn("Python stages disabled: the audit hook was refused");
}
