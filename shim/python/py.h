/* Python stage detection.  The files of python/, each calling only those listed before it:
 *   capi.c      the C API table (found with dlsym at run time: nothing links libpython), safe calls
 *   frames.c    the calling thread's Python frames, read directly (call sites)
 *   codes.c     what each code object is, in a table of memshim's own keyed by the code object
 *   targets.c   the Python targets of MEMSHIM_STAGES: matching, stages entered/left, exit report
 *   classify.c  which target a code object is, asked once per code object
 *   watch.c     whether code a target can name exists yet (from the audit events that bring code)
 *   evalhook.c  the PEP 523 frame evaluation hook (Python 3.8-3.11)
 *   monitor.c   sys.monitoring (Python 3.12+)
 *   detect.c    the bootstrap: an audit hook that readies and installs a route */
#ifndef MS_PY_H
#define MS_PY_H

#include <stddef.h>
#include <stdint.h>

/* Opaque: only the header layout (refcount, type at offset 8) is relied on, and only where noted. */
typedef struct ms_pyobject ms_pyobj;
typedef intptr_t ms_pyssize;

/* PyMethodDef: identical in every CPython 3.x. */
struct ms_pymethoddef {
	const char *name;
	void *meth;
	int flags;
	const char *doc;
};
#define MS_METH_FASTCALL 0x0080
typedef ms_pyobj *(*ms_pyfastcall)(ms_pyobj *self, ms_pyobj *const *args, ms_pyssize nargs);

/* The C API functions used, resolved once at install time (all exported by 3.8-3.13). */
struct ms_pyapi {
	int minor; /* 3.<minor> */
	int (*IsInitialized)(void);
	const char *(*GetVersion)(void);
	ms_pyobj *(*ImportModule)(const char *name);
	ms_pyobj *(*GetAttrString)(ms_pyobj *o, const char *name);
	int (*SetAttrString)(ms_pyobj *o, const char *name, ms_pyobj *v);
	ms_pyobj *(*CallFunctionObjArgs)(ms_pyobj *callable, ...);
	ms_pyobj *(*GetItem)(ms_pyobj *o, ms_pyobj *key);
	ms_pyobj *(*Type)(ms_pyobj *o);
	int (*TypeIsSubtype)(ms_pyobj *a, ms_pyobj *b);
	ms_pyobj *(*LongFromLong)(long v);
	long (*LongAsLong)(ms_pyobj *o);
	ms_pyobj *(*UnicodeFromString)(const char *s);
	ms_pyobj *(*UnicodeInternFromString)(const char *s);
	const char *(*UnicodeAsUTF8)(ms_pyobj *o);
	ms_pyobj *(*CFunctionNewEx)(struct ms_pymethoddef *def, ms_pyobj *self, ms_pyobj *module);
	void (*IncRef)(ms_pyobj *o);
	void (*DecRef)(ms_pyobj *o);
	ms_pyobj *(*ErrOccurred)(void);
	void (*ErrClear)(void);
	void (*ErrFetch)(ms_pyobj **t, ms_pyobj **v, ms_pyobj **tb);
	void (*ErrRestore)(ms_pyobj *t, ms_pyobj *v, ms_pyobj *tb);
	ms_pyobj *(*DictGetItemString)(ms_pyobj *d, const char *key);                    /* borrowed */
	ms_pyobj *(*EvalGetGlobals)(void);                                               /* borrowed */
	ms_pyobj *(*GetModuleDict)(void);                                                /* borrowed: sys.modules */
	int (*DictNext)(ms_pyobj *d, ms_pyssize *pos, ms_pyobj **key, ms_pyobj **value); /* borrowed */
	ms_pyobj *(*DictGetItem)(ms_pyobj *d, ms_pyobj *key);                            /* borrowed, no exception */
	ms_pyobj *(*ModuleGetDict)(ms_pyobj *m);                                         /* borrowed */
	ms_pyssize (*TupleSize)(ms_pyobj *t);
	ms_pyobj *(*TupleGetItem)(ms_pyobj *t, ms_pyssize i); /* borrowed */
	void *(*ThreadHead)(void *interp);                    /* PyInterpreterState_ThreadHead */
	void *(*ThreadNext)(void *tstate);                    /* PyThreadState_Next */
	ms_pyssize (*ListSize)(ms_pyobj *l);
	ms_pyobj *(*ListGetItem)(ms_pyobj *l, ms_pyssize i); /* borrowed */
	ms_pyobj *None;
	ms_pyobj *False;
	ms_pyobj *CodeType;
	ms_pyobj *FunctionType;
	ms_pyobj *TypeType;
	ms_pyobj *ClassMethodType;
	ms_pyobj *StaticMethodType;
	ms_pyobj *ModuleType;
};
extern struct ms_pyapi ms_py;

/* ---- python/capi.c ------------------------------------------------------------------------- */

/* The C API function or object NAME: from the object that defines the interpreter (an ELF lookup,
 * found at start), else dlsym's global search; NULL when missing. */
void *ms_py_sym(const char *name);
/* Notes the object that defines SYMBOL (a C API function) as the interpreter's; 0 when found. */
int ms_py_capi_locate(const void *symbol);
/* Fills ms_py (once); returns the name of a missing symbol, or NULL. */
const char *ms_py_load_api(void);
/* Drops a reference (NULL: nothing). */
void ms_py_decref(ms_pyobj *o);
/* A new reference to attribute NAME of O (NULL: NULL), or NULL with no exception left behind. */
ms_pyobj *ms_py_attr(ms_pyobj *o, const char *name);
/* Integer attribute NAME of O, or FALLBACK (no exception left). */
long ms_py_attr_long(ms_pyobj *o, const char *name, long fallback);
/* Copies the text of string O into BUF; 0 on success (no exception left). */
int ms_py_text(ms_pyobj *o, char *buf, size_t size);
/* The text of string attribute NAME of O into BUF; 0 on success. */
int ms_py_attr_text(ms_pyobj *o, const char *name, char *buf, size_t size);
/* A warning printed at most once per KEY (small integer below 16). */
void ms_py_warn_once(int key, const char *what);

static inline ms_pyobj *ms_py_type_of(ms_pyobj *o)
{
	/* ob_type follows the 8-byte refcount in every non-debug 3.x build */
	return ((ms_pyobj **)o)[1];
}

/* A type object's tp_name (after the refcount, ob_type and ob_size in every non-debug 3.x
 * build): "KeyboardInterrupt", "torch.OutOfMemoryError"'s "OutOfMemoryError", a C type's
 * "module.Name".  Read without a call or an allocation (an exception's type in a hook). */
static inline const char *ms_py_type_name(ms_pyobj *type)
{
	return type ? ((const char *const *)type)[3] : NULL;
}

/* What a code object is (its classification): 0 = not looked at yet; otherwise bit 0 set, bit 1 =
 * generator-like code, stage spec indexes matched in bits 2-33, and from bit 40 one plus the index
 * of the distinct matched function (module:qualname) it runs. */
#define MS_PY_SEEN 1u
#define MS_PY_GENLIKE 2u
#define MS_PY_SHIFT 2
#define MS_PY_FUNC_SHIFT 40
static inline uint32_t ms_py_mask(uintptr_t extra)
{
	return (uint32_t)(extra >> MS_PY_SHIFT);
}

/* ---- python/targets.c ---------------------------------------------------------------------- */

/* Reads the Python targets of MEMSHIM_STAGES (once); returns how many there are. */
int ms_py_targets_load(void);
/* Python target I of MEMSHIM_STAGES (0-based): its qualified name, or NULL past the last; *MODULE
 * is its module (NULL: any module, else *MODULE_LEN bytes), *LAST the name's last component. */
const char *ms_py_target(int i, const char **module, size_t *module_len, const char **last);
/* Whether a target's last name component is CO_NAME. */
int ms_py_is_candidate(const char *co_name);
/* The spec stages (mask of indexes) whose targets name QUAL in MODULE (NULL: unknown), marking
 * them matched (MODULE also named ALIAS, or NULL: __main__ run by python -m pkg.mod is pkg.mod
 * too); *FUNC the distinct function's entry, or -1.  USER: the function is the program's
 * own code (module __main__ counts as such whatever USER says): for a target without a module, the
 * program's own function wins over an installed package's of the same name, which then opens none
 * of that target's stages (from its next call on; eval=evaluate is not sympy's evaluate). */
uint32_t ms_py_match(const char *qual, const char *module, const char *alias, int user, int *func);
/* The program's own code defines a function QUAL (python/watch.c, before it runs): the targets
 * without a module that name it are the program's. */
void ms_py_user_defines(const char *qual);
/* Whether FILE (a code object's co_filename) is the program's own: under the working directory at
 * start (or relative to it), not in site-packages, dist-packages or a lib/python3.N (the standard
 * library, a venv's). */
int ms_py_user_file(const char *file);
/* Names near an unmatched target's: whether function name NAME (a co_name) may be near one (cheap:
 * ask before reading a qualified name), and QUAL (a qualified name that exists; USER: the
 * program's own) noted as the nearest to each unmatched target it is near (the program's first). */
int ms_py_near_wanted(const char *name);
/* Whether a target has matched nothing yet (names near it are still wanted). */
int ms_py_unmatched_any(void);
/* The same, kept as a flag the frame hook reads on every call (0 for the default names). */
extern int ms_py_names_wanted;
void ms_py_near(const char *qual, int user);

/* Enters every stage of classification V (a call of its function when it opens one of them) that
 * its function still opens; returns them. */
uint32_t ms_py_enter(uintptr_t v);
/* How a call left its function. */
enum ms_py_exit {
	MS_PY_RETURNED, /* a return, or a generator's yield or await (a resumption enters again) */
	MS_PY_RAISED,   /* an exception unwound it (GeneratorExit, a generator's close(), is a return) */
};
/* The one leave path of both routes (the frame hook's return, sys.monitoring's PY_RETURN, PY_YIELD
 * and PY_UNWIND): the call of classification V left its function HOW, TYPE the exception's type
 * (borrowed, or NULL) when it RAISED.  Leaves the stages the call opened, the calls they close
 * ended as it did; a call passed over (the program's own function won) opened none.  Stages this
 * module did not enter are ignored, so a leave can never close a stage someone else opened. */
void ms_py_exit(uintptr_t v, enum ms_py_exit how, ms_pyobj *type);

/* Whether a call of any target now would change nothing but stage depths: every target has
 * matched, no function is refused a stage (passed over), and every stage a Python target names is
 * open, entered here.  The frame hook may then stay out of the way (python/evalhook.c). */
int ms_py_all_open(void);

/* Whether targets that matched nothing are named at exit (set by the bootstrap: the route is armed
 * or installed). */
void ms_py_targets_live(int on);
/* Decides which process of the run speaks about targets (the first Python process that named
 * them, as its lineage record tells the ones it starts), and whether this one does. */
void ms_py_targets_decide_speaker(void);
int ms_py_speaks_for_targets(void);
/* Calls FN for every Python target of MEMSHIM_STAGES that matched no function that ran in this
 * process (nothing for the default names or in a process that runs no Python), with the nearest
 * name of a function that exists (NULL: none near). */
void ms_py_each_unmatched(void (*fn)(void *ctx, const char *stage, const char *target, const char *near), void *ctx);
/* Calls FN for each function (module:qualname) a Python target of STAGE matched, with the calls
 * in which it opened the stage, the calls in which it was passed over (the program's own function
 * won) and whether it is the program's own code (those with neither calls are left out). */
typedef void (*ms_py_function_fn)(void *ctx, const char *target, const char *function, uint64_t calls, uint64_t passed,
				  int user);
void ms_py_each_function(const char *stage, ms_py_function_fn fn, void *ctx);
/* At exit: one warning naming the targets that matched nothing, one naming those that matched
 * several functions. */
void ms_py_report(void);
/* Python stage detection stopped (a recursion deeper than the C stack allows took the frame hook
 * out): a target not matched by then may have run after, and the report says so. */
void ms_py_targets_stopped(void);
int ms_py_targets_detection_stopped(void);

/* ---- python/codes.c ------------------------------------------------------------------------ */

/* Reads the code object layout (after ms_py_stack_install). */
void ms_py_codes_init(void);
/* CODE's classification, 0 when not known (never classified, or another code object that lived
 * at its address). */
uintptr_t ms_py_code_get(const void *code);
/* Records CODE's classification. */
void ms_py_code_put(const void *code, uintptr_t value);

/* ---- python/classify.c --------------------------------------------------------------------- */

/* Decides what CODE is and records it (python/codes.c).  Names come from the arguments
 * available to the caller's route; FRAME is a PyFrameObject (3.8-3.10) or NULL, FUNC the function
 * (3.11) or NULL, GLOBALS the frame's globals (borrowed) or NULL.  Never leaves an exception set
 * (a pending one is preserved).  Returns the stored value. */
uintptr_t ms_py_classify(ms_pyobj *code, ms_pyobj *frame, ms_pyobj *func, ms_pyobj *globals);

/* At a function's return, after its locals were released: its frame's f_locals dict (*SLOT), made
 * by locals() or a debugger on 3.8-3.12 and holding the same values, when nothing else holds it. */
void ms_py_release_locals_dict(ms_pyobj *code, ms_pyobj **slot);

/* ---- python/watch.c ------------------------------------------------------------------------ */

/* Until the frame hook goes in: at the start event, whether a function some target can name
 * already exists (the reason, or NULL: wait); then for each audit event, the same question about
 * the code it brings.  With EACH (3.12+), every code object of the event's code that a target can
 * name exactly (its co_qualname) is given to EACH instead, and a reason is returned only for code
 * that cannot be searched before it runs (the whole-program route is needed then). */
const char *ms_py_watch_start(const char *event, ms_pyobj *args);
const char *ms_py_watch_event(const char *event, ms_pyobj *args, void (*each)(ms_pyobj *code));

/* ---- python/evalhook.c, python/monitor.c: the routes ----------------------------------------- */

/* GIL held, interpreter initialised.  The frame hook is readied first (0 when it can go in) and
 * put in by enable; sys.monitoring is readied at install and takes its tool id and turns its
 * events on at enable (0 on success; WHY is logged at MEMSHIM_LOG=debug). */
int ms_py_frame_prepare(void);
int ms_py_frame_enable(const char *why);
void ms_py_frame_check(void);
/* The frame hook back in when another tool set the default evaluator (GIL held, main interpreter). */
void ms_py_frame_reclaim(void);
/* How often another tool held the frame hook and gave it back (stages begun then were missed). */
unsigned ms_py_frame_hook_lost(void);
/* Whether the calling thread runs the main interpreter (1 when that cannot be told): Python stages
 * follow the main interpreter only (a subinterpreter has its own sys.monitoring and frame hook). */
int ms_py_in_main_interpreter(void);
int ms_py_monitor_install(void);
int ms_py_monitor_enable(const char *why);
/* 3.12+: CODE (a code object a target can name, before it runs) gets memshim's local events, the
 * tool id taken with the first; 0 on success (-1: no id, stages are off; warned). */
int ms_py_monitor_watch(ms_pyobj *code);

/* ---- python/detect.c ----------------------------------------------------------------------- */

/* At start: in a Python process, registers the audit hook that installs a route once the
 * interpreter runs. */
void ms_py_init(void);

/* ---- the calling thread's Python stack (python/frames.c), for call sites ---------------------- */

struct ms_py_frame {
	const void *code; /* the code object: valid only while the frame runs */
	int line;
};
/* Picks this version's frame layout (GIL held, at install); -1 and one warning when unknown. */
int ms_py_stack_install(void);
/* Whether Python stacks can be read (a known layout was installed): inline, call sites ask at
 * every sample. */
extern int ms_py_stack_on __attribute__((visibility("hidden")));
static inline int ms_py_stack_ready(void)
{
	return __atomic_load_n(&ms_py_stack_on, __ATOMIC_ACQUIRE);
}
/* The calling thread's innermost interpreter frame (GIL held), or NULL when no layout is known. */
void *ms_py_current_frame(void);
/* The innermost frame of thread state TSTATE (another thread's: GIL held, so it stands still),
 * and the frame FRAME was called from. */
void *ms_py_thread_frame(const void *tstate);
void *ms_py_frame_back(const void *frame);
/* Lines by (code object, instruction position), direct-mapped: a sample's frames are mostly the
 * previous sample's.  The caller keeps one per thread (never in TLS: static TLS is scarce for a
 * library loaded late). */
#define MS_PY_LINE_CACHE 2048
/* Where the last walk of a code object's line table stopped: a later position in the same code
 * resumes there, so a long function run top to bottom is walked once, not once per sample. */
#define MS_PY_LINE_WALKS 64
struct ms_py_line_walk {
	const void *code, *table;
	long off, addr;  /* the table entry's byte offset and the instruction position it starts at */
	int line, found; /* the line before that entry, and the last line with a location */
};
struct ms_py_line_cache {
	struct {
		const void *code, *table;
		intptr_t pos;
		int line;
	} e[MS_PY_LINE_CACHE];
	struct ms_py_line_walk walk[MS_PY_LINE_WALKS];
};
/* The calling thread's Python frames, innermost first, into OUT (at most MAX); 0 outside Python.
 * Reads the interpreter's frames directly: no GIL, no allocation, signal-safe.  CACHE may be NULL.
 * When there are more than MAX, the outermost of the rest (at most NOUTER, outermost last) go to
 * OUTER and *NOUTER says how many: a deep stack (imports in imports) keeps the user's own line at
 * its base.  OUTER may be NULL. */
int ms_py_stack_read(struct ms_py_frame *out, int max, struct ms_py_line_cache *cache, struct ms_py_frame *outer,
		     int *nouter);
/* The function name and file of a code object from ms_py_stack_read, copied (ASCII; '?' for
 * other characters), while its frame still runs. */
void ms_py_code_names(const void *code, char *func, size_t fsize, char *file, size_t lsize);
/* The str objects of a code object's name and file (identity only: a cache key). */
void ms_py_code_keys(const void *code, const void **name, const void **file);
/* The offsets of co_name, co_filename (objects) and co_firstlineno (int) in this version's code
 * objects; 0, or -1 when no layout is known. */
int ms_py_code_layout(size_t *name, size_t *file, size_t *first_line);

#endif
