/* A thread's known frames (native/frames.h): its state, made at its first look in a raw mapping
 * and found again through one initial-exec TLS pointer; frames pushed (a target's gets its
 * trampoline and opens its stage) and popped when found gone; the marker trampoline kept on the
 * innermost known frame; the stages known frames hold open on this thread, so a check can tell at
 * once when no look could change a count.  Runs inside allocation hooks and trampolines: no
 * allocation, no lock of its own, errno left to the callers (they save it). */
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/process.h"
#include "core/stages.h"
#include "intercept/hooks.h"
#include "native/frames.h"

struct ms_native_stats ms_native_stats;
__thread struct tstate *ms_tls_frames MS_TLS;

static struct {
	pthread_key_t state_key;           /* its destructor returns a thread's trampolines */
	int stage_ids[MS_SPEC_MAX_STAGES]; /* engine id + 1 */
	uint32_t native_stages;            /* spec stages with a native target: what a look can open */
} frames_st;

static int engine_id(int spec)
{
	if (spec < 0 || spec >= MS_SPEC_MAX_STAGES)
		return -1;
	int id = __atomic_load_n(&frames_st.stage_ids[spec], __ATOMIC_RELAXED) - 1;
	if (id < 0) {
		id = ms_stage_id(ms_cfg.spec.stage[spec].name);
		if (id >= 0)
			__atomic_store_n(&frames_st.stage_ids[spec], id + 1, __ATOMIC_RELAXED);
	}
	return id;
}

/* The stages open on this thread are OPEN: a check has nothing to do while every stage with a
 * native target is among them (none such: the checks still take frames in). */
static void set_open(struct tstate *s, uint32_t open)
{
	s->open = open;
	s->closed = frames_st.native_stages ? frames_st.native_stages & ~open : 1;
	ms_tls_before_count_idle = all_open(s); /* the wrappers skip the check it would end at once */
}

/* 0 when the stage was entered (refused from a signal handler that interrupted the engine). */
int ms_frames_enter(struct tstate *s, int spec)
{
	int id = engine_id(spec);
	if (id < 0 || ms_stage_enter(id, ms_elapsed()) < 0)
		return -1;
	if (s->nopen[spec]++ == 0)
		set_open(s, s->open | 1u << spec);
	return 0;
}

/* HOW (enum ms_end): the frame returned, was unwound (a C++ exception, a Rust panic, a forced
 * unwind) or jumped over (longjmp, or found gone without its trampoline firing). */
void ms_frames_leave(struct tstate *s, int spec, int how)
{
	if (spec < MS_SPEC_MAX_STAGES && s->nopen[spec] > 0 && --s->nopen[spec] == 0)
		set_open(s, s->open & ~(1u << spec));
	int id = engine_id(spec);
	if (id >= 0)
		ms_stage_leave_ended(id, ms_elapsed(), how, NULL, NULL, NULL);
}

/* glibc keeps a thread's descriptor at the top of its stack (its own or one the program gave it);
 * the program's first thread starts below __libc_stack_end. */
extern void *__libc_stack_end;
static uintptr_t stack_top(void)
{
	if ((uintptr_t)pthread_self() == ms_proc.main_thread)
		return (uintptr_t)__libc_stack_end;
	return (uintptr_t)pthread_self();
}

struct tstate *ms_frames_new_state(void)
{
	struct tstate *s = ms_raw_map(sizeof *s);
	if (!s)
		return NULL;
	s->watch = s->watch_at = s->spare = -1;
	s->adopt_at = ADOPT_HITS;
	s->top = &s->none; /* n is 0 in the fresh mapping */
	set_open(s, 0);
	for (int i = 0; i < TRACE; i++)
		s->trace[i] = &s->nokey;
	s->stack_top = stack_top();
	ms_tls_frames = s;
	pthread_setspecific(frames_st.state_key, s); /* low key index: no allocation */
	return s;
}

/* The innermost known frame is no longer on the stack (jumped over, or unwound past without a
 * trampoline): its call ended by way HOW.  Its trampoline is given back only when its slot no
 * longer points at it: if our view were wrong and the frame still returned through it, it must
 * still lead home. */
void ms_frames_pop_stale(struct tstate *s, int how)
{
	set_n(s, s->n - 1);
	struct frame *f = &s->f[s->n];
	if (f->tramp < 0)
		return;
	if (f->stage >= 0)
		ms_frames_leave(s, f->stage, how);
	int still_there = load(f->slot) == ms_tramp_addr(f->tramp);
	if (f->tramp == s->watch) {
		s->watch_at = -1;
		if (still_there)
			s->watch = -1; /* retired: a fresh marker is taken next time */
	} else if (!still_there) {
		give_tramp(s, f->tramp);
	}
}

/* The frame holding the marker gives it up (it stays on the stack). */
void ms_frames_unwatch(struct tstate *s)
{
	if (s->watch_at < 0)
		return;
	struct frame *f = &s->f[s->watch_at];
	if (f->tramp == s->watch && load(f->slot) == ms_tramp_addr(s->watch))
		store(f->slot, f->ra);
	set_tramp(f, -1);
	s->watch_at = -1;
}

/* The innermost known frame gets a trampoline: its own stage one, or the marker.  A stage frame's
 * own leaves the marker where it is, on a frame outside it that cannot leave first: when the stage
 * call returns, that frame is the innermost again, watched, its calls and chains still good (a
 * stage called once per statement: no marker moved twice a call). */
void ms_frames_ensure_watch(struct tstate *s)
{
	while (s->n > 0) {
		struct frame *top = &s->f[s->n - 1];
		if (top->tramp >= 0)
			return;
		if (load(top->slot) != top->ra) { /* not the frame we knew */
			ms_frames_pop_stale(s, MS_END_JUMPED);
			continue;
		}
		ms_frames_unwatch(s);
		if (s->watch < 0)
			s->watch = ms_pool_take();
		if (s->watch < 0)
			return;
		ms_pool_set_ra(s->watch, top->ra);
		store(top->slot, ms_tramp_addr(s->watch));
		set_tramp(top, s->watch);
		s->watch_at = s->n - 1;
		return;
	}
}

/* Pushes a newly seen frame, of spec stage STAGE's target function (-1: none); a target's frame gets
 * a trampoline and opens its stage. */
void ms_frames_push(struct tstate *s, const struct cand *c, int stage)
{
	struct frame *f = &s->f[s->n];
	f->slot = c->slot;
	f->ra = c->ra;
	f->stage = stage;
	set_tramp(f, -1);
	if (f->stage >= 0) {
		int t = take_tramp(s);
		if (t < 0 || ms_frames_enter(s, f->stage) < 0) {
			give_tramp(s, t);
			f->stage = -1; /* pool exhausted, or the engine busy below us: this call is not seen */
		} else {
			ms_pool_set_ra(t, f->ra);
			store(f->slot, ms_tramp_addr(t));
			set_tramp(f, t);
		}
	}
	set_n(s, s->n + 1);
}

int ms_frames_state_init(void (*gone)(void *))
{
	for (int i = 0; i < ms_native_ntargets; i++)
		if (ms_native_targets[i].stage >= 0 && ms_native_targets[i].stage < MS_SPEC_MAX_STAGES)
			frames_st.native_stages |= 1u << ms_native_targets[i].stage;
	ms_unwinder_init();
	return pthread_key_create(&frames_st.state_key, gone) == 0 ? 0 : -1;
}
