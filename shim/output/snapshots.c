/* Snapshots: the default policy, the periodic thread (MEMSHIM_SNAPSHOT_INTERVAL) and the last one
 * on a fatal signal.  The signal path uses only async-signal-safe calls: the report writer formats
 * into static buffers and writes with raw system calls.  The handler that calls it only ever sits
 * in for a default disposition, and the program never sees it (intercept/signal.c).
 *
 * The default policy has no thread (a thread is visible: Python 3.12 warns on fork when one
 * exists, and programs count their threads).  It rides on two slow paths that already exist: the
 * timeline's watch (live memory moved past max(1 MiB, 1%)) and stage boundaries.  There a snapshot
 * is written when the last one is at least AUTO_GAP seconds old (and 200 times its writing time),
 * and only in a process worth it: one that opened a stage other than init, or one that is older
 * than AUTO_AGE seconds and holds AUTO_BYTES or more.  The first real stage begin writes one at
 * once, so a process killed while it sits in that stage leaves the stage.  A Go program leaves by
 * its own exit_group system call, past every exit handler: it is worth it from the start, so its
 * file is there (incomplete) and the live record, updated at every point, has the rest. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "core/timeline.h"
#include "cuda/footprint.h"
#include "intercept/signal.h"
#include "output/live.h"
#include "output/peak_sites.h"
#include "output/report.h"
#include "output/snapshots.h"

#define AUTO_GAP 2.0
#define AUTO_AGE 2.0
#define AUTO_BYTES ((int64_t)64 << 20)
#define AUTO_COST_FACTOR 200.0

static int thread_running, thread_pending;
static int auto_on, auto_real_stage;
static double auto_next; /* ms_elapsed() before which no default snapshot is written */

static double next_due(void)
{
	double v;
	__atomic_load(&auto_next, &v, __ATOMIC_RELAXED);
	return v;
}

static void set_next_due(double v)
{
	__atomic_store(&auto_next, &v, __ATOMIC_RELAXED);
}

/* A fatal signal is about to end the process: a last snapshot, never waiting long for locks (on
 * memshim's spare stack when the handler runs on an alternate one: intercept/signal.c). */
static void last_snapshot(int sig)
{
	if (ms_is_tracked_process()) {
		ms_live_signal(sig); /* first: the record says so even if the file cannot be written */
		ms_report_signal(sig);
		ms_process_unpublish(); /* the process is gone: its lineage record goes too */
	}
}

static void *snapshot_loop(void *arg)
{
	ms_tls_guard = 1; /* this thread's own work is never counted */
	double interval = ms_cfg.snapshot_interval;
	struct timespec ts = { (time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9) };
	for (;;) {
		while (ms_sys_clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == EINTR)
			;
		if (ms_sandboxed() || !ms_is_tracked_process() || ms_report_finished())
			break; /* a sandbox: its sleep may be what the filter kills on */
		ms_report_write("snapshot", 0, 0);
	}
	return arg;
}

static void start_thread(void)
{
	pthread_t t;
	pthread_attr_t attr;
	uint64_t old;
	if (__atomic_exchange_n(&thread_running, 1, __ATOMIC_ACQ_REL))
		return;
	ms_sys_sigmask(SIG_SETMASK, ~UINT64_C(0), &old); /* signals stay with the program's threads */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
	if (pthread_create(&t, &attr, snapshot_loop, NULL) != 0) {
		ms_warn("cannot start the snapshot thread; MEMSHIM_SNAPSHOT_INTERVAL is ignored");
	}
	pthread_attr_destroy(&attr);
	ms_sys_sigmask(SIG_SETMASK, old, NULL);
}

static int worth_it(double now)
{
	if (__atomic_load_n(&auto_real_stage, __ATOMIC_RELAXED) || ms_proc.leaves_raw)
		return 1;
	int64_t held = ms_live(MS_CPU) + ms_live(MS_GPU) + ms_live(MS_MANAGED) + ms_live(MS_PINNED);
	return now >= AUTO_AGE && held >= AUTO_BYTES;
}

/* The default policy's check; cheap until a snapshot is due.  Never inside the engine's lock (a
 * handler interrupting it), never in a vfork child, never after the final file. */
static void auto_snapshot(double now)
{
	if (now < next_due() || !worth_it(now) || ms_stages_held_here() || !ms_is_tracked_process())
		return;
	if (ms_report_try_snapshot() < 0 && ms_report_finished())
		auto_on = 0;
	double done = ms_elapsed(), gap = (done - now) * AUTO_COST_FACTOR;
	set_next_due(done + (gap > AUTO_GAP ? gap : AUTO_GAP));
}

/* GPU out-of-memory burst INDEX was recorded: the GPU sites live now, then a snapshot, so the
 * evidence survives a crash after it. */
static void oom_snapshot(int index)
{
	if (!ms_is_tracked_process())
		return;
	ms_peak_sites_oom_capture(index);
	if (!ms_stages_held_here())
		ms_report_try_snapshot();
}

/* The timeline's one observer: the GPU footprint's reading, the default snapshot policy, then the
 * live record. */
static void memory_moved(double now)
{
	ms_gpufp_point(now);
	if (auto_on)
		auto_snapshot(now);
	ms_live_moved(now);
}

void ms_snapshots_boundary(int stage, int end)
{
	if (auto_on) {
		const struct ms_stages *st = ms_stages_peek();
		if (!end && stage >= 0 && !__atomic_load_n(&auto_real_stage, __ATOMIC_RELAXED) &&
		    strcmp(st->stage[stage].name, "init") != 0) {
			__atomic_store_n(&auto_real_stage, 1, __ATOMIC_RELAXED);
			set_next_due(0.0); /* the first real stage: now */
		}
		auto_snapshot(ms_elapsed());
	}
	if (__atomic_load_n(&thread_pending, __ATOMIC_RELAXED) && ms_tls_guard == 0 &&
	    __atomic_exchange_n(&thread_pending, 0, __ATOMIC_ACQ_REL))
		start_thread();
}

void ms_snapshots_init(void)
{
	ms_signals_cover(last_snapshot);
	if (ms_cfg.snapshot_interval > 0)
		start_thread();
	if (ms_cfg.snapshot_interval == MS_SNAPSHOT_AUTO)
		auto_on = 1;
	/* always: a GPU point may read the footprint */
	__atomic_store_n(&ms_timeline_moved_observer, memory_moved, __ATOMIC_RELAXED);
	ms_cuda_set_oom_observer(oom_snapshot);
}

void ms_snapshots_fork_child(int tracking)
{
	auto_real_stage = 0; /* a child is judged on its own: stages it inherited open do not count */
	auto_next = 0;
	if (!tracking)
		auto_on = 0;
	if (tracking && __atomic_load_n(&thread_running, __ATOMIC_RELAXED)) {
		thread_running = 0;
		thread_pending = 1;
	}
}
