/* Call sites live at each stage's peak: sampled CPU allocations, every GPU allocation,
 * their stacks interned in bounded tables, and per open stage call a copy of "bytes live per
 * stack" taken as that call's peak rises.  The hot path (the countdown and the filter of sampled
 * blocks) is intercept/sample.h's: init registers this sampler there, and with cuda/ for device
 * allocations; this header is for the lifecycle (subsystems.def) and the report writer
 * (output/peak_sites.c).
 *
 * Memory bound (all raw mappings made at start, pages touched as used, never the wrapped malloc):
 * stacks 16384 x 64 frames (a 256 Ki-word frame pool), strings 32768 / 2 MiB, sampled live blocks
 * 262144 (about 128 GiB live at the default rate; 4 Mi in exact mode or with exact stages; more are
 * counted as dropped), and per stage
 * (64) two copies (open call, last call) of the 50 largest CPU and GPU stacks, added and from
 * before: about 20 MiB of address space in all, of which a small program touches well under 1 MiB. */
#ifndef MS_SITES_H
#define MS_SITES_H

#include <stddef.h>
#include <stdint.h>
#include "core/ms.h"
#include "python/py.h"

#define MS_SITES_TOP 50        /* stacks kept per copy (the file's lists) */
#define MS_SITES_MAX_FRAMES 64 /* frames per stack */
#define MS_SITES_LAG 0.02      /* a copy is refreshed when the peak rises this much above it */

struct ms_sites_entry {
	int32_t stack;   /* in a list's rest: the number of stacks it stands for */
	int64_t bytes;   /* estimated bytes live (CPU: sampled weights; GPU: exact) */
	int64_t samples; /* live samples (GPU: allocations) */
	int64_t exact;   /* the part of bytes from blocks counted at their true size */
};

/* The MS_SITES_TOP largest stacks of one kind, and the sum of every other stack's (REST), so that
 * the list and its rest add up to every sampled byte of that kind. */
struct ms_sites_list {
	int n;
	struct ms_sites_entry e[MS_SITES_TOP];
	struct ms_sites_entry rest;
};

/* The stacks live at one stage call's peak, as of the last copy: per side (0 CPU, 1 GPU) what the
 * call added (blocks sampled after its begin) and what was live from before it. */
struct ms_sites_copy {
	int valid;
	uint64_t since;         /* the boundary generation of the call's begin */
	uint64_t begins;        /* the engine's count of the stage's begun calls: which call it is */
	uint64_t gen[2];        /* each side's table generation at its last copy */
	int64_t cpu_at, gpu_at; /* CPU / GPU live when each side was copied */
	struct ms_sites_list added[2], before[2];
};

struct ms_sites_stats {
	int64_t rate;
	uint64_t samples, gpu_allocations, stacks, stacks_dropped, samples_dropped;
	uint64_t unkept; /* blocks recorded without their stack (a table full): in the closing entries */
	int python_frames;
	int exact;        /* MEMSHIM_SITES=exact: every CPU allocation recorded at its size */
	int exact_stages; /* MEMSHIM_SITES=exact:STAGE,...: how many stages (ms_cfg.sites_exact) */
};

/* Lifecycle (subsystems.def). */
void ms_sites_init(void);
void ms_sites_fork_prepare(void);
void ms_sites_fork_parent(void);
void ms_sites_fork_child(int tracking);
void ms_sites_boundary(int stage, int end);

/* Optional: the CPU counter reached a new high NOW (a hot path that detects new highs may call it to
 * tighten the copy at a stage's peak; samples call it themselves). */
void ms_sites_cpu_high(int64_t now);

/* Whether sampling is on (MEMSHIM_SITES). */
int ms_sites_on(void);
/* Non-zero when sampling is configured, its tables mapped or not yet (no sample so far). */
int ms_sites_enabled(void);
void ms_sites_stats(struct ms_sites_stats *out);
/* The copy to report for stage ID: its open call's, else its last call's; 0 when there is none.
 * NOWAIT: from a signal handler (copies without the lock when it is busy). */
int ms_sites_stage_copy(int id, struct ms_sites_copy *out, int nowait);
/* Every GPU stack live now, the largest MS_SITES_TOP and the rest, into OUT; 0 when sampling is off
 * or the lock is this thread's or stays busy (a GPU out-of-memory report: output/peak_sites.c). */
int ms_sites_gpu_live(struct ms_sites_list *out);
/* The frames of stack ID, innermost first; returns their number. */
int ms_sites_stack_frames(int32_t id, uint64_t *out, int max);

/* Frame words: a native return address, or a Python frame (bit 63) naming interned strings. */
#define MS_SITES_PY_BIT (1ULL << 63)
static inline int ms_sites_frame_is_py(uint64_t w)
{
	return (w & MS_SITES_PY_BIT) != 0;
}
/* Text of a Python frame word: "function (file:line)". */
size_t ms_sites_py_text(uint64_t w, char *buf, size_t size);

/* Report time (sites/symbolise.c): resolves the native frames of stacks IDS[0..N) to symbols of
 * the loaded objects' ELF tables (not from a signal handler); ms_sites_frame_describe then names any
 * frame; done releases the tables. */
void ms_sites_symbolise(const int32_t *ids, int n);
/* Where a native frame lies: OBJ its object's index among ms_sites_object's, OFFSET its address in
 * the object's file (the return address minus the load bias); OBJ -1 for a Python frame or an
 * address in no object with a path. */
struct ms_sites_place {
	int obj;
	uint64_t offset;
};
/* Frame W's text ("symbol+0xoff (object)", "0x.. (object)" when no symbol covers it, mangled C++
 * names kept as they are; "function (file:line)" for Python), *LEN bytes, NUL-terminated: in BUF
 * (SIZE bytes), or kept from an earlier call for the same native frame (stacks share most of
 * theirs); and where it lies. */
const char *ms_sites_frame_describe(uint64_t w, char *buf, size_t size, size_t *len, struct ms_sites_place *where);
/* The objects locations name: how many, then object K's path, its build-id as hex into BUILD_ID
 * (empty when it has none). */
int ms_sites_object_count(void);
const char *ms_sites_object(int k, char *build_id, size_t size);
void ms_sites_symbolise_done(void);

/* ---- between the files of sites/ ------------------------------------------------------------ */

/* Stack ids, sampled and in exact mode; the last is never interned (sample.c counts the blocks
 * whose stack was not kept under it). */
#define MS_SITES_STACKS_SAMPLED 16384u
#define MS_SITES_STACKS_EXACT 65536u

/* Tables in raw mappings (stacks.c), exact mode's larger; -1 when they could not be mapped. */
int ms_sites_stacks_init(int exact);
/* The calling thread's stack (native, and Python when it runs Python) interned: its id, or -1 when
 * the table is full.  Call with the sites lock held. */
int32_t ms_sites_capture_locked(const uint64_t *frames, int n);
/* Reads the calling thread's stack into FRAMES (2 MAX words: the frames, then the lines of Python
 * ones), outside the lock, allocating nothing; from START (sp after return, rbp, return address
 * of a frame) when given, else from here. */
int ms_sites_capture(uint64_t *frames, int max, const uintptr_t *start, int32_t *known);
/* The thread's last native chain (stacks.c writes it with each walk): the return-address slot and
 * value of each frame.  A walk whose first frame has the same slot and return address, and whose
 * later slots still hold the same return addresses, is the same chain (each frame's position
 * follows from the one below it), so it is taken from here with one load per frame instead of one
 * unwinding step.  A slot a native stage's trampoline took over holds the trampoline (RAW); the
 * frame is the same while the trampoline still stands for the same return address (IP). */
#define MS_SITES_MAX_OWN 4 /* the shim's own frames a walk from a sampler's registers steps through */
struct ms_sites_chain {
	int n;
	int32_t id;     /* its interned stack when it had no Python frames, else -1 */
	uint32_t epoch; /* of the stack table the id belongs to */
	/* Walked up to the interpreter (a thread running Python: its native frames only), and the slot
	 * of the interpreter's frame it stopped at (0: it stopped for another reason). */
	int to_python;
	uintptr_t python_slot;
	/* Where the walk started (the sampler's registers: sp, rbp, return address) and the slots of
	 * the shim's own frames above that (none when the sampler was entered by a tail call), so a
	 * sample from the same place finds the chain without a step (ms_sites_known); start_ok 0 when
	 * the walk cannot be found that way. */
	uintptr_t start[3];
	int nown, start_ok;
	int32_t known;      /* id when start_ok, no Python frames and the id of this stack table: else -1 */
	uintptr_t rbp_mask; /* ~0 where one of the shim's frames finds its caller by rbp: start[1] must match */
	int tramps;         /* a slot held a native stage's trampoline: the known check asks the pool */
	int slow;           /* checked out of line (ms_sites_known_slow): trampolines, own frames to check, no frame */
	uintptr_t own_slot[MS_SITES_MAX_OWN], own_raw[MS_SITES_MAX_OWN];
	uintptr_t slot[MS_SITES_MAX_FRAMES], raw[MS_SITES_MAX_FRAMES], ip[MS_SITES_MAX_FRAMES];
};
/* The calling thread's chain (NULL until its first sample mapped its caches). */
extern __thread struct ms_sites_chain *ms_sites_chain MS_TLS __attribute__((visibility("hidden")));
/* The calling thread's chain checked out of line (its slow flag: the pool asked what each
 * trampoline stands for, the shim's own frames checked too): its stack id, or -1. */
int32_t ms_sites_known_slow(void);

/* The id of the calling thread's stack when it is its previous native-only one, found from the
 * sampler's registers (sp after return, rbp, the return address) without a walk: one load per
 * frame, inline (a sample's stack is most often its thread's last).  -1 otherwise
 * (ms_sites_capture walks it); MS_SITES_CHECK_SLOW when the rest is checked out of line
 * (ms_sites_known_slow), so the inline check makes no call. */
#define MS_SITES_CHECK_SLOW (-2)
static inline int32_t ms_sites_known(uintptr_t sp, uintptr_t rbp, uintptr_t ra)
{
	const struct ms_sites_chain *c = ms_sites_chain;
	if (!c || ms_py_stack_ready()) /* a thread running Python: its frames are read each time */
		return -1;
	if (c->known < 0 || c->start[0] != sp || c->start[2] != ra || ((c->start[1] ^ rbp) & c->rbp_mask))
		return -1;
	if (MS_UNLIKELY(c->slow))
		return MS_SITES_CHECK_SLOW;
	int k = 0, n = c->n; /* at least one frame, no trampoline: each slot holds its return address */
	do {
		if (*(const uintptr_t *)c->slot[k] != c->raw[k])
			return -1;
	} while (++k < n);
	return c->known;
}
/* *KNOWN: the stack id when the walk found this thread's previous native-only stack again; -2
 * when this walk is remembered for the next one (ms_sites_capture_known gives it its id once
 * interned); -1 otherwise. */
void ms_sites_capture_known(int32_t id);
/* Number of stacks interned / refused because a table was full. */
uint32_t ms_sites_nstacks(void);
uint64_t ms_sites_stacks_dropped(void);
/* Forget every stack (a forked child starts over). */
void ms_sites_stacks_reset(void);

#endif
