/* The stage engine (see stages.h).  Peaks are exact without touching every open stage on the hot
 * path: counters keep one peak window that each boundary closes and folds into the open stages. */
#include <stddef.h>
#include <string.h>
#include "core/config.h"
#include "core/ms.h"
#include "core/spin.h"
#include "core/stages.h"
#include "core/timeline.h"

static struct ms_stages ms_st MS_PAGE_ALIGNED MS_LARGE;
void (*ms_stage_observer)(int stage, int end);

static struct ms_spin lock;
static __thread int lock_held MS_TLS;

static int implicit_wanted;
/* Components the last boundary wrote into its live array (ms_counters_cut_window); read under the lock. */
static int cut_n = MS_NCOMP; /* MEMSHIM_STAGES does not name init: it runs from the start */

static void stages_lock(void)
{
	ms_spin_lock(&lock, &lock_held);
}

static void stages_unlock(void)
{
	ms_spin_unlock(&lock, &lock_held);
}

/* A signal handler interrupting this thread inside the engine must not spin on its own lock. */
static int lock_or_refuse(void)
{
	if (lock_held)
		return -1;
	stages_lock();
	return 0;
}

static int implicit_id(void)
{
	return ms_st.implicit_init - 1;
}

/* Fields the boundaries read without the lock (no_read_at_enter) are stored atomically under it. */
static void set_implicit(int id)
{
	__atomic_store_n(&ms_st.implicit_init, id + 1, __ATOMIC_RELAXED);
}

static void set_depth(int id, int depth)
{
	__atomic_store_n(&ms_st.depth[id], depth, __ATOMIC_RELAXED);
}

static void set_calls(struct ms_stage *s, uint64_t calls)
{
	__atomic_store_n(&s->calls, calls, __ATOMIC_RELAXED);
}

static int find(const char *name)
{
	int n = __atomic_load_n(&ms_st.nstages, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		if (strcmp(ms_st.stage[i].name, name) == 0)
			return i;
	return -1;
}

int ms_stage_find(const char *name)
{
	return ms_stage_name_valid(name) ? find(name) : -1;
}

int ms_stage_id(const char *name)
{
	if (!ms_stage_name_valid(name))
		return -1;
	int id = find(name);
	if (id >= 0)
		return id;
	if (lock_or_refuse() < 0)
		return MS_STAGE_BUSY;
	id = find(name);
	if (id < 0 && ms_st.nstages < MS_MAX_STAGES) {
		id = ms_st.nstages;
		struct ms_stage *s = &ms_st.stage[id];
		memset(s, 0, offsetof(struct ms_stage, history)); /* history is written before read */
		ms_strlcpy(s->name, name, sizeof s->name);
		s->used = 1;
		s->first_order = -1;
		s->loud = ms_sites_exact_names(name);
		__atomic_store_n(&ms_st.nstages, id + 1, __ATOMIC_RELEASE);
	}
	stages_unlock();
	return id;
}

/* Closes the peak window and folds it into every open stage; LIVE gets the live values.  OPEN_AFTER:
 * a stage is open once the caller is done (else the new window need not be exact: counters.h). */
static void boundary(int64_t live[MS_NCOMP], int open_after)
{
	int64_t peaks[MS_NCOMP];
	cut_n = ms_counters_cut_window(peaks, live, open_after);
	uint32_t moved = ms_counters_last_cut(); /* the others' peaks are their live values, folded before */
	for (int i = 0; i < ms_st.nopen; i++) {
		struct ms_span *cur = &ms_st.stage[ms_st.open[i]].cur;
		for (uint32_t m = moved; m; m &= m - 1) {
			int c = __builtin_ctz(m);
			if (peaks[c] > cur->peak[c])
				cur->peak[c] = peaks[c];
		}
	}
}

/* No device was ever used: the device entries of every span are 0. */
static int host_only(void)
{
	return !(ms_counters_moved() >> MS_DEV0);
}

/* DST = SRC over the first N components (the rest are 0 in both); the host ones in a fixed size. */
static void copy_comps(int64_t dst[MS_NCOMP], const int64_t src[MS_NCOMP], int n)
{
	if (n == MS_DEV0)
		memcpy(dst, src, sizeof *dst * MS_DEV0);
	else
		memcpy(dst, src, sizeof *dst * (size_t)n);
}

/* A call of S beginning at NOW is quiet (MS_QUIET_AFTER): exact, but no timeline point and no call
 * to the observer.  Read without the lock too (only_reads_at_enter): its fields are then a guess. */
static int quiet_at(const struct ms_stage *s, double now)
{
	double last;
	__atomic_load(&s->last_loud, &last, __ATOMIC_RELAXED);
	return !s->loud && __atomic_load_n(&s->calls, __ATOMIC_RELAXED) >= MS_QUIET_AFTER && now - last < MS_QUIET_GAP;
}

static void start_call(int id, const int64_t live[MS_NCOMP], double now)
{
	struct ms_stage *s = &ms_st.stage[id];
	struct ms_span *cur = &s->cur; /* every field set: no memset of the whole span per call */
	copy_comps(cur->begin, live, cut_n);
	copy_comps(cur->end, live, cut_n);
	copy_comps(cur->peak, live, cut_n);
	cur->start = now;
	cur->runtime = 0;
	cur->gpu_failed_allocs = 0;
	cur->gpu_failed_bytes = 0;
	cur->closed_at_exit = 0;
	cur->ended = MS_END_RETURNED;
	cur->exception = 0;
	__atomic_store_n(&s->begins, s->begins + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->cur.quiet, quiet_at(s, now), __ATOMIC_RELAXED);
	if (!s->cur.quiet) {
		__atomic_store(&s->last_loud, &now, __ATOMIC_RELAXED);
		ms_timeline_boundary(id, 1, now);
	}
	if (s->first_order < 0)
		s->first_order = ms_st.order_next++;
	if (!ms_st.before_init_set && strcmp(s->name, "init") == 0) {
		copy_comps(ms_st.before_init, live, cut_n);
		ms_st.before_init_set = 1;
	}
}

static void remove_open(int id)
{
	int j = 0;
	for (int i = 0; i < ms_st.nopen; i++)
		if (ms_st.open[i] != id)
			ms_st.open[j++] = ms_st.open[i];
	ms_st.nopen = j;
}

static void record_history(struct ms_stage *s, const struct ms_span *sp)
{
	int64_t cpu_alloc = sp->end[MS_CPU] - sp->begin[MS_CPU];
	int64_t cpu_peaked = sp->peak[MS_CPU] - sp->end[MS_CPU];
	int64_t gpu_alloc = sp->end[MS_GPU] - sp->begin[MS_GPU];
	int64_t gpu_peaked = sp->peak[MS_GPU] - sp->end[MS_GPU];
	if (s->calls == 1 || cpu_alloc + cpu_peaked > s->max_cpu_needed) {
		s->max_cpu_needed = cpu_alloc + cpu_peaked;
		s->max_cpu_call = s->calls;
	}
	if (s->calls == 1 || gpu_alloc + gpu_peaked > s->max_gpu_needed) {
		s->max_gpu_needed = gpu_alloc + gpu_peaked;
		s->max_gpu_call = s->calls;
	}
	if (s->calls > MS_HISTORY) {
		s->dropped++;
		return;
	}
	struct ms_call *h = &s->history[s->calls - 1];
	h->start = sp->start;
	h->runtime = sp->runtime;
	h->cpu_alloc = cpu_alloc;
	h->cpu_peaked = cpu_peaked;
	h->gpu_alloc = gpu_alloc;
	h->gpu_peaked = gpu_peaked;
	h->gpu_failed_allocs = sp->gpu_failed_allocs;
	h->ended = sp->ended;
	h->exception = sp->exception;
}

/* s->last = s->cur, without the device entries while no device was ever used. */
static void keep_last(struct ms_stage *s)
{
	int n = host_only() ? MS_DEV0 : MS_NCOMP;
	copy_comps(s->last.begin, s->cur.begin, n);
	copy_comps(s->last.end, s->cur.end, n);
	copy_comps(s->last.peak, s->cur.peak, n);
	memcpy(&s->last.start, &s->cur.start, sizeof s->cur - offsetof(struct ms_span, start));
}

/* 1 + the index of exception type NAME (its first MS_EXC_NAME_MAX - 1 bytes, other than printable
 * ASCII as '?') in the engine's names, added when new; 0 for none (NULL, empty, or the table
 * full).  Under the lock. */
static uint8_t exception_index(const char *name)
{
	if (!name || !*name)
		return 0;
	char cut[MS_EXC_NAME_MAX];
	ms_strlcpy(cut, name, sizeof cut);
	for (char *c = cut; *c; c++) /* printable ASCII: a cut never splits a character */
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	for (int i = 0; i < ms_st.nexc; i++)
		if (!strcmp(ms_st.exc_names[i], cut))
			return (uint8_t)(i + 1);
	if (ms_st.nexc == MS_EXC_NAMES)
		return 0;
	memcpy(ms_st.exc_names[ms_st.nexc], cut, sizeof cut);
	return (uint8_t)++ms_st.nexc;
}

/* Completes the running call of ID with end values LIVE (the window was just folded); it ended by
 * way HOW (enum ms_end) with exception EXC (exception_index), or at exit. */
static void finish_call(int id, const int64_t live[MS_NCOMP], double now, int at_exit, int how, uint8_t exc)
{
	struct ms_stage *s = &ms_st.stage[id];
	struct ms_span *cur = &s->cur;
	copy_comps(cur->end, live, cut_n);
	for (uint32_t m = ms_counters_last_cut(); m; m &= m - 1) { /* the boundary just before cut them */
		int c = __builtin_ctz(m);
		if (cur->begin[c] > cur->peak[c])
			cur->peak[c] = cur->begin[c];
		if (cur->end[c] > cur->peak[c])
			cur->peak[c] = cur->end[c];
	}
	cur->runtime = now - cur->start;
	cur->closed_at_exit = at_exit;
	cur->ended = (uint8_t)(at_exit ? MS_END_AT_EXIT : how);
	cur->exception = at_exit ? 0 : exc;
	s->ended[cur->ended]++;
	if (cur->exception)
		s->exceptions |= UINT32_C(1) << (cur->exception - 1);
	if (!cur->quiet || at_exit)
		ms_timeline_boundary(id, 0, now);
	keep_last(s);
	set_calls(s, s->calls + 1);
	s->runtime_total += cur->runtime;
	record_history(s, cur);
	remove_open(id);
	if (implicit_id() == id)
		set_implicit(-1);
}

/* The first stage to begin ends the implicit init; a stage named init takes its place instead. */
static void settle_implicit_init(int id, const int64_t live[MS_NCOMP], double now)
{
	int init = implicit_id();
	if (init < 0)
		return;
	set_implicit(-1);
	struct ms_stage *s = &ms_st.stage[init];
	if (init == id) {
		ms_timeline_boundary(id, 0, now); /* the implicit part's band ends where the function begins */
		s->implicit = 0;
		ms_st.before_init_set = 0;
		start_call(id, live, now);
		return;
	}
	ms_st.depth[init] = 0;
	finish_call(init, live, now, 0, MS_END_RETURNED, 0);
}

/* The implicit init was ended by another stage (a memshim.stage() opened first) and init itself
 * begins now: that call is init, as the Trainer reports it, and before_init the live memory now;
 * the implicit span (load to that first stage) is not counted as a call of it. */
static void forget_implicit_call(int id)
{
	struct ms_stage *s = &ms_st.stage[id];
	s->implicit = 0;
	set_calls(s, 0);
	s->dropped = 0;
	s->runtime_total = 0;
	s->max_cpu_needed = s->max_gpu_needed = 0;
	s->max_cpu_call = s->max_gpu_call = 0;
	memset(s->ended, 0, sizeof s->ended);
	s->exceptions = 0;
	ms_st.before_init_set = 0;
}

int ms_stages_held_here(void)
{
	return lock_held;
}

int ms_stages_explicit_open(void)
{
	int n = __atomic_load_n(&ms_st.nopen, __ATOMIC_RELAXED), count = 0;
	for (int i = 0; i < n && i < MS_MAX_STAGES; i++)
		count += ms_st.open[i] != implicit_id();
	return count;
}

int ms_stage_depth(int id)
{
	if (id < 0 || id >= MS_MAX_STAGES)
		return 0;
	return __atomic_load_n(&ms_st.depth[id], __ATOMIC_RELAXED);
}

uint64_t ms_stage_calls(int id)
{
	if (id < 0 || id >= MS_MAX_STAGES)
		return 0;
	return __atomic_load_n(&ms_st.stage[id].calls, __ATOMIC_RELAXED);
}

uint64_t ms_stage_begins(int id)
{
	if (id < 0 || id >= MS_MAX_STAGES)
		return 0;
	return __atomic_load_n(&ms_st.stage[id].begins, __ATOMIC_RELAXED);
}

/* Call ID as it stands (the lock held): its begin is cur's until its next call starts. */
static void copy_call(int id, struct ms_stage_call *c)
{
	const struct ms_stage *s = &ms_st.stage[id];
	c->id = id;
	c->open = ms_st.depth[id] > 0;
	c->unheard = s->cur.quiet || id == implicit_id();
	c->begins = s->begins;
	memcpy(c->dev_begin, &s->cur.begin[MS_DEV0], sizeof c->dev_begin);
}

int ms_stages_calls(struct ms_stage_call *open, int id, struct ms_stage_call *latest)
{
	int n = 0;
	if (lock_or_refuse() < 0)
		return -1;
	for (int i = 0; open && i < ms_st.nopen; i++) {
		copy_call(ms_st.open[i], &open[n]);
		n += !open[n].unheard;
	}
	if (latest && id >= 0 && id < ms_st.nstages)
		copy_call(id, latest);
	else if (latest)
		latest->id = -1;
	stages_unlock();
	return n;
}

/* Whether a begin of ID at NOW is no boundary (ID is open: recursion, an overlapping caller) or a
 * quiet call's: the components that are read (RSS, the cgroup, reservations' pages) keep their last
 * reading, which a stage called thousands of times a second would otherwise take (a few system
 * calls) at every call.  Read without the lock: a wrong guess only reads, or does not. */
static int no_read_at_enter(int id, double now)
{
	if (__atomic_load_n(&ms_st.implicit_init, __ATOMIC_RELAXED))
		return 0; /* the implicit init ends here */
	return __atomic_load_n(&ms_st.depth[id], __ATOMIC_RELAXED) > 0 || quiet_at(&ms_st.stage[id], now);
}

/* The same for a leave of ID: it only makes the call shallower, or ends a quiet call. */
static int no_read_at_leave(int id)
{
	return __atomic_load_n(&ms_st.depth[id], __ATOMIC_RELAXED) > 1 ||
	       __atomic_load_n(&ms_st.stage[id].cur.quiet, __ATOMIC_RELAXED);
}

int ms_stage_enter(int id, double now)
{
	if (id < 0 || id >= MS_MAX_STAGES)
		return -1;
	if (!no_read_at_enter(id, now))
		ms_refresh(MS_REFRESH_BOUNDARY);
	if (lock_or_refuse() < 0)
		return -1;
	int64_t live[MS_NCOMP];
	int *depth = &ms_st.depth[id], took_over = 0;
	if (implicit_id() >= 0 && (id != implicit_id() || *depth > 0)) {
		boundary(live, 1);
		settle_implicit_init(id, live, now);
		took_over = *depth > 0; /* the explicit init took over the implicit one: a new call */
	}
	if (!took_over && (set_depth(id, *depth + 1), *depth == 1)) {
		if (ms_st.stage[id].implicit)
			forget_implicit_call(id);
		boundary(live, 1);
		start_call(id, live, now);
		ms_st.open[ms_st.nopen++] = id;
	}
	int quiet = ms_st.stage[id].cur.quiet;
	stages_unlock();
	if (ms_stage_observer && !quiet)
		ms_stage_observer(id, 0);
	return 0;
}

int ms_stage_leave_span(int id, double now, struct ms_span *closed, uint64_t *call)
{
	return ms_stage_leave_ended(id, now, MS_END_RETURNED, NULL, closed, call);
}

int ms_stage_leave_ended(int id, double now, int how, const char *exception, struct ms_span *closed, uint64_t *call)
{
	if (id < 0 || id >= MS_MAX_STAGES)
		return -1;
	if (!no_read_at_leave(id))
		ms_refresh(MS_REFRESH_BOUNDARY);
	if (lock_or_refuse() < 0)
		return -1;
	int rc = 0;
	int *depth = &ms_st.depth[id];
	int quiet = ms_st.stage[id].cur.quiet;
	if (*depth == 0) {
		rc = -1;
	} else if (set_depth(id, *depth - 1), *depth == 0) {
		int64_t live[MS_NCOMP];
		boundary(live, ms_st.nopen > 1);
		if (how < 0 || how >= MS_NEND || how == MS_END_AT_EXIT)
			how = MS_END_RETURNED;
		finish_call(id, live, now, 0, how, how == MS_END_RAISED ? exception_index(exception) : 0);
		rc = 1;
		if (closed) /* under the lock: no other thread's call of it in between */
			*closed = ms_st.stage[id].last;
		if (call)
			*call = ms_st.stage[id].calls;
	}
	stages_unlock();
	if (ms_stage_observer && rc >= 0 && !quiet)
		ms_stage_observer(id, 1);
	return rc;
}

int ms_stage_leave(int id, double now)
{
	return ms_stage_leave_span(id, now, NULL, NULL) < 0 ? -1 : 0;
}

void ms_stages_begin_implicit_init(double now)
{
	int id = ms_stage_id("init");
	if (id < 0 || lock_or_refuse() < 0)
		return;
	if (ms_st.depth[id] == 0 && ms_st.nopen == 0) {
		int64_t live[MS_NCOMP];
		boundary(live, 1);
		ms_st.stage[id].implicit = 1;
		set_depth(id, 1);
		start_call(id, live, now);
		ms_st.open[ms_st.nopen++] = id;
		set_implicit(id);
	}
	stages_unlock();
}

static void close_all_locked(double now)
{
	if (ms_st.nopen == 0)
		return;
	int64_t live[MS_NCOMP];
	boundary(live, 0);
	while (ms_st.nopen > 0) {
		int id = ms_st.open[ms_st.nopen - 1];
		set_depth(id, 0);
		finish_call(id, live, now, 1, MS_END_AT_EXIT, 0);
	}
}

void ms_stages_close_all(double now)
{
	if (lock_or_refuse() < 0)
		return;
	close_all_locked(now);
	stages_unlock();
}

void ms_stages_note_gpu_failure(int device, int64_t bytes, int result, double now)
{
	if (lock_or_refuse() < 0)
		return;
	for (int i = 0; i < ms_st.nopen; i++) {
		struct ms_span *cur = &ms_st.stage[ms_st.open[i]].cur;
		cur->gpu_failed_allocs++;
		cur->gpu_failed_bytes += bytes;
	}
	if (ms_st.ngpu_events < MS_MAX_GPU_EVENTS) {
		struct ms_gpu_event *e = &ms_st.gpu_events[ms_st.ngpu_events++];
		e->time = now;
		e->bytes = bytes;
		e->device = device;
		e->result = result;
		e->stage = ms_st.nopen ? ms_st.open[ms_st.nopen - 1] : -1;
	} else {
		ms_st.gpu_events_dropped++;
	}
	stages_unlock();
}

void ms_stages_reset_for_child(double now)
{
	int64_t live[MS_NCOMP];
	ms_counters_reset_peaks();
	boundary(live, ms_st.nopen > 0);
	ms_st.order_next = 0;
	ms_st.before_init_set = 0;
	ms_st.ngpu_events = ms_st.gpu_events_dropped = 0;
	for (int i = 0; i < ms_st.nstages; i++) {
		struct ms_stage *s = &ms_st.stage[i];
		set_calls(s, 0);
		s->dropped = 0;
		s->runtime_total = 0;
		s->max_cpu_needed = s->max_gpu_needed = 0;
		s->max_cpu_call = s->max_gpu_call = 0;
		memset(s->ended, 0, sizeof s->ended);
		s->exceptions = 0;
		s->first_order = -1;
		memset(&s->last, 0, sizeof s->last);
	}
	for (int i = 0; i < ms_st.nopen; i++)
		start_call(ms_st.open[i], live, now);
}

/* Copies only what is in use (stages, their kept calls, GPU events): the rest of both tables stays
 * untouched (not resident). */
static void copy_used(struct ms_stages *out)
{
	memcpy(out, &ms_st, offsetof(struct ms_stages, stage));
	memcpy(out->gpu_events, ms_st.gpu_events, ms_st.ngpu_events * sizeof *ms_st.gpu_events);
	memcpy(out->exc_names, ms_st.exc_names, (size_t)ms_st.nexc * sizeof *ms_st.exc_names);
	for (int i = 0; i < ms_st.nstages; i++) {
		const struct ms_stage *s = &ms_st.stage[i];
		uint64_t kept = s->calls < MS_HISTORY ? s->calls : MS_HISTORY;
		memcpy(&out->stage[i], s, offsetof(struct ms_stage, history) + kept * sizeof *s->history);
	}
}

uint64_t ms_stages_copy_brief(struct ms_stages *out, uint64_t want)
{
	int locked = lock_or_refuse() == 0;
	uint64_t copied = 0;
	for (int i = 0; i < ms_st.nstages && i < MS_MAX_STAGES; i++) {
		if (!((want >> i) & 1) && ms_st.depth[i] == 0 && out->depth[i] == 0 && i < out->nstages)
			continue;
		memcpy(&out->stage[i], &ms_st.stage[i], offsetof(struct ms_stage, history));
		copied |= UINT64_C(1) << i;
	}
	memcpy(out, &ms_st, offsetof(struct ms_stages, stage));
	if (locked)
		stages_unlock();
	return copied;
}

static int try_lock_bounded(void)
{
	if (lock_held)
		return -1;
	return ms_spin_trylock(&lock, &lock_held, 50000000);
}

static void copy_locked_or_not(struct ms_stages *out, double now, int locked);

void ms_stages_copy_nowait(struct ms_stages *out, double now)
{
	copy_locked_or_not(out, now, try_lock_bounded() == 0);
}

void ms_stages_copy(struct ms_stages *out, double now)
{
	copy_locked_or_not(out, now, lock_or_refuse() == 0);
}

static void copy_locked_or_not(struct ms_stages *out, double now, int locked)
{
	if (!locked) {
		copy_used(out); /* the holder is this thread (a handler) or stuck: best effort */
		return;
	}
	int64_t live[MS_NCOMP];
	boundary(live, ms_st.nopen > 0);
	int n = cut_n;
	copy_used(out);
	stages_unlock();
	for (int i = 0; i < out->nopen; i++) {
		struct ms_span *cur = &out->stage[out->open[i]].cur;
		copy_comps(cur->end, live, n);
		for (int c = 0; c < n; c++)
			if (live[c] > cur->peak[c])
				cur->peak[c] = live[c];
		cur->runtime = now - cur->start;
	}
}

void ms_stages_init(void)
{
	ms_touch(&ms_st.nstages);
	implicit_wanted = ms_cfg.spec.is_default || ms_spec_find(&ms_cfg.spec, "init") < 0;
	if (implicit_wanted)
		ms_stages_begin_implicit_init(0.0);
}

/* fork_prepare took the lock, and the flag before (ms_spin_lock_for_fork) */
static __thread int took_for_fork MS_TLS, flag_before_fork MS_TLS;

void ms_stages_fork_prepare(void)
{
	took_for_fork = ms_spin_lock_for_fork(&lock, &lock_held, &flag_before_fork);
}

void ms_stages_fork_parent(void)
{
	ms_spin_unlock_after_fork(&lock, &lock_held, took_for_fork, flag_before_fork);
}

void ms_stages_fork_child(int tracking)
{
	ms_spin_reset(&lock, &lock_held);
	if (!tracking)
		return;
	ms_refresh(MS_REFRESH_FORK); /* the read components as the child holds them: its report starts there */
	ms_stages_reset_for_child(0.0);
	if (implicit_wanted && ms_st.nopen == 0)
		ms_stages_begin_implicit_init(0.0);
}

const struct ms_stages *ms_stages_peek(void)
{
	return &ms_st;
}

void ms_stages_clear(void)
{
	memset(&ms_st, 0, sizeof ms_st);
}
