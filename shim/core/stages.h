/* The stage engine: open/close, nesting, overlap, repeats, per-stage exact peaks.  Pure logic over
 * counters.c; callers pass the time, so unit tests drive it without a clock or a preload. */
#ifndef MS_STAGES_H
#define MS_STAGES_H

#include <stdint.h>
#include "core/config.h"
#include "core/counters.h"

#define MS_MAX_STAGES 64 /* distinct stage names */
#define MS_HISTORY 128   /* calls kept in detail per stage; later ones only counted */
#define MS_MAX_GPU_EVENTS 256
/* A stage called often and fast (a native function bound to its calls, a pytest loop) has most of
 * its calls quiet: counted exactly, but without a timeline point or a call to the boundary observer
 * (live record, call sites, snapshots).  After this many calls, a call beginning within this many
 * seconds of the last loud one is quiet. */
#define MS_QUIET_AFTER 64
#define MS_QUIET_GAP 0.010

/* How a call ended (the file's "ended"): its function returned (or the API ended it), a Python
 * exception left it (RAISED, with the exception's type name when the detector knows it), a C++
 * exception or a Rust panic unwound it (UNWOUND), a longjmp jumped over it (JUMPED), or it was
 * still open at exit (AT_EXIT).  A call that ended by an exception may leave what its traceback
 * holds in alloc_delta. */
enum ms_end { MS_END_RETURNED, MS_END_RAISED, MS_END_UNWOUND, MS_END_JUMPED, MS_END_AT_EXIT, MS_NEND };
#define MS_EXC_NAMES 32    /* distinct exception type names a process keeps (later ones: no name) */
#define MS_EXC_NAME_MAX 48 /* including the NUL; longer names are cut */

/* Numbers of one completed (or, while open, running) call of a stage, per component.  The arrays
 * come first and start_call sets every field (no memset per call): keep both when adding one. */
struct ms_span {
	int64_t begin[MS_NCOMP];
	int64_t end[MS_NCOMP];
	int64_t peak[MS_NCOMP];
	double start;   /* ms_elapsed() at begin */
	double runtime; /* seconds */
	uint32_t gpu_failed_allocs;
	int64_t gpu_failed_bytes;
	int closed_at_exit;
	int quiet;         /* see MS_QUIET_AFTER */
	uint8_t ended;     /* enum ms_end, once the call is over */
	uint8_t exception; /* 1 + index in ms_stages.exc_names of the exception that ended it, or 0 */
};

/* Compact per-call history entry. */
struct ms_call {
	double start, runtime;
	int64_t cpu_alloc, cpu_peaked, gpu_alloc, gpu_peaked;
	uint32_t gpu_failed_allocs;
	uint8_t ended, exception; /* as in struct ms_span */
};

struct ms_stage {
	char name[MS_STAGE_NAME_MAX];
	int used;             /* slot taken */
	int implicit;         /* the implicit init stage */
	int loud;             /* never quiet: MEMSHIM_SITES=exact:... names it (call sites see each boundary) */
	int first_order;      /* order of first begin; -1 before */
	uint64_t calls;       /* completed calls */
	uint64_t begins;      /* calls begun, the implicit init's take-over included (read atomically) */
	double runtime_total; /* seconds of all completed calls */
	double last_loud;     /* start of the last call that was not quiet */
	struct ms_span cur;   /* the call in progress when depth > 0 */
	struct ms_span last;  /* the last completed call */
	uint64_t dropped;     /* completed calls not kept in history */
	int64_t max_cpu_needed, max_gpu_needed; /* largest alloc_delta + peaked_delta over calls */
	uint64_t max_cpu_call, max_gpu_call;    /* 1-based index of that call */
	uint64_t ended[MS_NEND];                /* completed calls by how they ended (enum ms_end) */
	uint32_t exceptions;                    /* bit i: exc_names[i] ended one of its calls */
	struct ms_call history[MS_HISTORY];     /* last: copies take only the calls kept */
};

struct ms_gpu_event {
	double time;
	int64_t bytes;
	int device;
	int result; /* the driver's error code */
	int stage;  /* innermost open stage id, -1 for none */
};

/* Zero-initialised (no page of it is touched before it is used); the small fields come first and
 * the tables that are only partly used last, so copies take the used parts only. */
struct ms_stages {
	int nstages;
	int order_next;
	int depth[MS_MAX_STAGES]; /* open nesting depth (recursion and overlapping callers are one call) */
	int open[MS_MAX_STAGES];  /* ids of open stages in begin order */
	int nopen;
	int implicit_init; /* 1 + id of the implicit init while it may still run, else 0 */
	int before_init_set;
	int64_t before_init[MS_NCOMP]; /* live when init began */
	uint32_t ngpu_events, gpu_events_dropped;
	int nexc; /* exception type names kept in exc_names */
	struct ms_stage stage[MS_MAX_STAGES];
	struct ms_gpu_event gpu_events[MS_MAX_GPU_EVENTS];
	char exc_names[MS_EXC_NAMES][MS_EXC_NAME_MAX]; /* the first nexc are used */
};

/* Finds or creates the stage called NAME; -1 when invalid or the table is full, MS_STAGE_BUSY when a
 * signal handler interrupted this thread inside the engine (try again later). */
#define MS_STAGE_BUSY (-2)
int ms_stage_id(const char *name);
/* Finds the stage called NAME without creating it; -1 when unknown. */
int ms_stage_find(const char *name);

/* Open nesting depth of stage ID now (0: not open), read without the lock: after the caller's own
 * enter or leave it may already be another thread's (to follow calls: ms_stages_calls). */
int ms_stage_depth(int id);
/* Completed calls of stage ID so far (0 for an unknown ID). */
uint64_t ms_stage_calls(int id);
/* How many calls of stage ID have begun: a changed count while it stays open is a new call. */
uint64_t ms_stage_begins(int id);
/* One call of a stage as the engine holds it: which call (the stage's begins counter once it
 * began; 0: none yet), whether it is open, whether it is quiet or the implicit init (the boundary
 * observer hears of neither), and memshim's count of each device at its begin. */
struct ms_stage_call {
	int id, open, unheard;
	uint64_t begins;
	int64_t dev_begin[MS_MAX_DEVICES];
};

/* The engine's calls in one copy under its lock, for a subsystem that follows them from the
 * boundary observer (cuda/): the depth read there may already be another thread's boundary's.
 * Into OPEN (MS_MAX_STAGES entries, or NULL) the open calls the observer heard begin, outermost
 * first; into *LATEST (or NULL) stage ID's latest call (id -1 when ID names none).  Returns how
 * many went into OPEN, or -1 when this thread holds the lock (a handler interrupted it): nothing
 * copied.  Never from inside the engine's lock. */
int ms_stages_calls(struct ms_stage_call *open, int id, struct ms_stage_call *latest);

/* Open stages other than the implicit init (no lock: a signal handler's estimate). */
int ms_stages_explicit_open(void);

/* Non-zero when the calling thread is inside the engine's lock (a signal handler interrupted it). */
int ms_stages_held_here(void);

/* Enter/leave stage ID at time NOW (ms_elapsed()).  Leave returns -1 when the stage is not open.
 * Both take the engine lock; safe from any thread. */
int ms_stage_enter(int id, double now);
int ms_stage_leave(int id, double now);
/* Leave, telling whether it closed the call (1; its numbers into *CLOSED and its 1-based index into
 * *CALL, either may be NULL) or only made it shallower (0); -1 as leave. */
int ms_stage_leave_span(int id, double now, struct ms_span *closed, uint64_t *call);
/* Leave by way HOW (enum ms_end; EXCEPTION: the type name of a Python exception, or NULL), which
 * is recorded when this leave closes the call (an exception caught inside a recursion is not the
 * call's end); otherwise as ms_stage_leave_span. */
int ms_stage_leave_ended(int id, double now, int how, const char *exception, struct ms_span *closed, uint64_t *call);
/* The name of enum ms_end HOW as the file writes it ("returned", "raised", ...). */
static inline const char *ms_end_name(int how)
{
	static const char *const names[MS_NEND] = { "returned", "raised", "unwound", "jumped", "open_at_exit" };
	return how >= 0 && how < MS_NEND ? names[how] : "returned";
}

/* Starts the implicit init stage (library load, or a forked child's start). */
void ms_stages_begin_implicit_init(double now);

/* Closes every open stage at NOW, marking them closed at exit. */
void ms_stages_close_all(double now);

/* Records a failed GPU allocation against every open stage and in the event list. */
void ms_stages_note_gpu_failure(int device, int64_t bytes, int result, double now);

/* A forked child: forget every call and start fresh from the live memory at fork. */
void ms_stages_reset_for_child(double now);

/* At start (lifecycle.c): the implicit init stage begins unless MEMSHIM_STAGES names init. */
void ms_stages_init(void);

/* Fork: the engine lock is taken before and released after (order: mapping table, stages,
 * timeline); a child that goes on TRACKING starts fresh from its live memory, with the implicit
 * init again when nothing is open. */
void ms_stages_fork_prepare(void);
void ms_stages_fork_parent(void);
void ms_stages_fork_child(int tracking);

/* Called after every stage begin (END 0) and end (END 1) made through ms_stage_enter/leave, outside
 * the lock; never for stages closed at exit. */
extern void (*ms_stage_observer)(int stage, int end);

/* Like ms_stages_copy, but gives up waiting for the lock after about 100 ms and copies without it:
 * for signal handlers, where the holder may never run again. */
void ms_stages_copy_nowait(struct ms_stages *out, double now);

/* Copies the engine state into OUT under the lock, with open stages' numbers taken so far (for
 * snapshots); OUT must be static storage (the struct is large). */
void ms_stages_copy(struct ms_stages *out, double now);

/* What changed since the caller's previous copy into OUT, cheap enough for every boundary (the
 * live record, output/live.c): the small fields, and without their calls' history the stages in
 * WANT (bit i: stage i), the open ones, those open in OUT and those new since (the others, the
 * history and the GPU events are left as they were).  Open stages' spans are as of their last
 * boundary.  Under the lock, or without it in a handler that interrupted it.  Returns the stages
 * copied (bit i: stage i). */
uint64_t ms_stages_copy_brief(struct ms_stages *out, uint64_t want);

/* The engine's state as it is, unlocked, and a fresh engine: for single-threaded unit tests and
 * fuzzers (the shim reads through ms_stages_copy and the accessors above). */
const struct ms_stages *ms_stages_peek(void);
void ms_stages_clear(void);

#endif
