/* The top of the shim: when tracking starts, what a fork and a stage boundary mean, when the final
 * file is written.  Every subsystem is started and kept through fork by walking subsystems.def;
 * who the process is and its clock are core/process.c's. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include "core/config.h"
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "core/timeline.h"
#include "cuda/cuda.h"
#include "cuda/footprint.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "intercept/sample.h"
#include "intercept/signal.h"
#include "intercept/spare_stack.h"
#include "native/native.h"
#include "output/identity.h"
#include "output/labels.h"
#include "output/live.h"
#include "output/live_record.h"
#include "output/report.h"
#include "output/snapshots.h"
#include "python/py.h"
#include "sites/sites.h"

struct subsystem {
	void (*init)(void);
	void (*fork_prepare)(void);
	void (*fork_parent)(void);
	void (*fork_child)(int tracking);
	void (*boundary)(int stage, int end);
	void (*report)(void);
};

#define GO_NOTE_NAME "Go"
#define GO_BUILD_ID_NOTE 4 /* the Go toolchain's build-id note, in every Go executable */

#define STEP_0(fn) NULL
#define STEP_1(fn) fn
/* clang-format off */
#define MS_SUBSYSTEM(name, init, prepare, parent, child, boundary, report)                          \
	{ STEP_##init(ms_##name##_init), STEP_##prepare(ms_##name##_fork_prepare),                   \
	  STEP_##parent(ms_##name##_fork_parent), STEP_##child(ms_##name##_fork_child),              \
	  STEP_##boundary(ms_##name##_boundary), STEP_##report(ms_##name##_report) },
/* clang-format on */
static const struct subsystem subsystems[] = {
#include "subsystems.def"
};
#undef MS_SUBSYSTEM
#define NSUBSYSTEMS (sizeof subsystems / sizeof *subsystems)

/* Every row of hooks.def names a hook that exists (tools/hooks_lint.py checks who sets each). */
#define MS_UPWARD_HOOK(name, offered_by, set_by, what) _Static_assert(sizeof(&name) != 0, #name);
#include "hooks.def"
#undef MS_UPWARD_HOOK

/* What pthread_atfork and atexit are (stubs the linker puts after all our code, a page of their own
 * to fault in every process). */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso);
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
extern void *__dso_handle;

static int finished;

static void stop_tracking(void)
{
	ms_active = 0;
	ms_counting = 0;
	ms_malloc_fast_update();
}

static int reported;

/* The subsystems' last words (what matched nothing, ...), once: from the exit handler or the
 * destructor, whichever runs first (for a preloaded library the destructor does: the loader's
 * handler was registered after ours), before the final file. */
static void reports(void)
{
	if (ms_sandboxed() || __atomic_exchange_n(&reported, 1, __ATOMIC_ACQ_REL))
		return;
	for (size_t i = 0; i < NSUBSYSTEMS; i++)
		if (subsystems[i].report)
			subsystems[i].report();
}

/* finish's work, on the spare stack when a signal handler ends the process (output/spare_stack.h). */
static void finish_on(void *arg)
{
	const char *reason = arg;
	/* the run's first process speaks for the run's native targets at its end, also through _exit
	 * (dash ends so); the other report steps may take locks a handler calling _exit could hold */
	if (reason[0] == '_' && !ms_proc.is_child && !__atomic_load_n(&reported, __ATOMIC_ACQUIRE))
		ms_native_report_on_exit();
	ms_refresh(MS_REFRESH_REPORT); /* the reservations and RSS as the open stages close */
	if (!ms_proc.is_child && ms_valgrind_took_malloc())
		ms_warn("no heap allocation reached memshim under valgrind, which replaces malloc in every object by "
			"default: valgrind --soname-synonyms=somalloc=nouserintercepts keeps memshim's");
	ms_tls_guard++;
	ms_stages_close_all(ms_elapsed());
	ms_report_write(reason, 0, 1);
	ms_live_finish();       /* the final file is there: the live record goes */
	ms_process_unpublish(); /* and the lineage record */
	ms_log_run_end();
	ms_tls_guard--;
}

/* Writes the final metrics file once (closing open stages); REASON is "exit" or "_exit". */
static void finish(const char *reason)
{
	if (!ms_is_tracked_process() || __atomic_exchange_n(&finished, 1, __ATOMIC_ACQ_REL))
		return;
	if (ms_sandboxed()) {
		ms_live_sandbox_end(); /* no file can be written: the record holds the last numbers */
		return;
	}
	ms_on_spare_stack(finish_on, (void *)reason);
}

/* The program installs a seccomp filter or strict mode (ENTERING, MS_SANDBOX_*), or the kernel
 * refused it (MS_SANDBOX_NONE; intercept/sandbox.c): the live record is made and a snapshot
 * written while system calls are allowed; from then on the record is the process's final numbers,
 * as a Go program's is (leaves_raw MS_LIVE_RAW_SECCOMP or _STRICT). */
static void on_sandbox(int entering)
{
	static int leaves_raw_before;
	if (!ms_is_tracked_process() || !entering == !ms_sandboxed())
		return;
	int saved = errno;
	if (entering) {
		leaves_raw_before = ms_proc.leaves_raw;
		ms_proc.leaves_raw = entering == MS_SANDBOX_STRICT ? MS_LIVE_RAW_SECCOMP_STRICT : MS_LIVE_RAW_SECCOMP;
		ms_live_sandbox();
		ms_report_write("snapshot", 0, 0);
		ms_debug("the program enters a seccomp sandbox: no more system calls of memshim's own; its "
			 "live record holds its last numbers");
		ms_sandbox.clock_stopped = ms_now();
		__atomic_store_n(&ms_sandbox.mode, entering, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&ms_sandbox.mode, MS_SANDBOX_NONE, __ATOMIC_RELEASE);
		ms_proc.leaves_raw = leaves_raw_before;
		ms_live_sandbox();
		ms_debug("the seccomp filter was refused: memshim goes on as before");
	}
	errno = saved;
}

static void after_boundary(int stage, int end)
{
	for (size_t i = 0; i < NSUBSYSTEMS; i++)
		if (subsystems[i].boundary)
			subsystems[i].boundary(stage, end);
}

static void at_exit(void *unused)
{
	(void)unused;
	int saved = errno;
	reports();
	finish("exit");
	errno = saved;
}

static void fork_prepare(void)
{
	for (size_t i = NSUBSYSTEMS; i-- > 0;)
		if (subsystems[i].fork_prepare)
			subsystems[i].fork_prepare();
}

static void fork_parent(void)
{
	for (size_t i = 0; i < NSUBSYSTEMS; i++)
		if (subsystems[i].fork_parent)
			subsystems[i].fork_parent();
}

/* A followed child starts its own report from its live memory at fork, under its own file name;
 * an unfollowed one stops counting. */
static void fork_child(void)
{
	int tracking = ms_active && ms_cfg.follow_children;
	if (ms_active && !tracking)
		stop_tracking();
	if (tracking) {
		ms_process_forked();
		finished = 0;
		reported = 0;
	}
	for (size_t i = 0; i < NSUBSYSTEMS; i++)
		if (subsystems[i].fork_child)
			subsystems[i].fork_child(tracking);
}

/* The linker's bounds of our zero-initialised data (.bss, then the MS_LARGE tables). */
extern char __bss_start[] __attribute__((visibility("hidden")));
extern char _end[] __attribute__((visibility("hidden")));

/* With transparent huge pages always on, the first touch of a table in an aligned 2 MiB stretch
 * would zero a 2 MiB page (+2 MiB of memory in /bin/true, +4 MiB in a Python start, measured):
 * our tables are touched in a few places, so they stay in 4 KiB pages. */
static void no_huge_pages(void)
{
	uintptr_t lo = ((uintptr_t)__bss_start + 4095) & ~(uintptr_t)4095, hi = (uintptr_t)_end & ~(uintptr_t)4095;
	if (hi > lo)
		syscall(SYS_madvise, lo, hi - lo, MADV_NOHUGEPAGE);
}

/* The C library passes constructors the program's arguments and environment. */
__attribute__((constructor)) static void ms_init(int argc, char **argv, char **envp)
{
	no_huge_pages();
	ms_log_bind_stderr(); /* before anything can warn */
	ms_resolve();
	ms_process_start();
	ms_process_args(argc, argv, envp);
	if (getauxval(AT_SECURE)) { /* setuid/setgid: do nothing at all */
		stop_tracking();
		return;
	}
	ms_tls_guard++;
	/* every variable read once, here (LD_PRELOAD for the next test); what is wrong with them said
	 * once per run: by its first process (the others find a lineage record above them) */
	ms_config_start(ms_process_lineage_found);
	ms_tls_guard--;
	/* named once per run: by its first process (the others find a lineage record above them) */
	if (ms_config_unknown_settings() && !ms_process_lineage_found())
		ms_config_warn_unknown();
	if (ms_cfg.log_level >= MS_LOG_DEBUG && !ms_process_lineage_found())
		ms_config_log_effective();
	if (ms_loaded_late()) {
		ms_warn("libmemshim.so was loaded after the program started (dlopen or ctypes): calls are "
			"already bound, nothing is counted; preload it (LD_PRELOAD, memshim run, memshim kernel "
			"install for notebooks)");
		stop_tracking();
		return;
	}
	if (ms_allocator_ahead())
		ms_warn("%s comes before libmemshim.so in LD_PRELOAD: the program's malloc and C++ new go "
			"to it without passing memshim, whose CPU figures then count only mappings; list "
			"libmemshim.so first (memshim run does)",
			ms_allocator_ahead());
	if (ms_sanitizer()) {
		ms_warn("%s owns this program's memory: memshim steps aside and counts nothing", ms_sanitizer());
		stop_tracking();
		return;
	}
	if (ms_cfg.disabled) {
		stop_tracking();
		return;
	}
	ms_process_identify();
	ms_log_join_run(ms_proc.root_pid, !ms_proc.is_child);
	if (ms_proc.is_child && !ms_cfg.follow_children) {
		stop_tracking();
		return;
	}
	if ((!ms_proc.is_child || ms_proc.own_output) && ms_identity_check_output())
		ms_process_export_output();
	__register_atfork(fork_prepare, fork_parent, fork_child, &__dso_handle);
	__cxa_atexit(at_exit, NULL, &__dso_handle);
	__atomic_store_n(&ms_before_exit, finish, __ATOMIC_RELEASE);
	__atomic_store_n(&ms_on_sandbox, on_sandbox, __ATOMIC_RELEASE);
	ms_active = 1;
	ms_proc.leaves_raw = ms_elf_program_has_note(GO_NOTE_NAME, GO_BUILD_ID_NOTE);
	for (size_t i = 0; i < NSUBSYSTEMS; i++)
		if (subsystems[i].init)
			subsystems[i].init();
	ms_process_publish(); /* what the processes it execs need: the run, its file, rank, speaker */
	ms_stage_observer = after_boundary;
}

/* Backstop for exits that skip atexit handlers registered by libraries (e.g. a late dlclose). */
__attribute__((destructor)) static void ms_fini(void)
{
	int saved = errno;
	if (ms_is_tracked_process() && !finished)
		reports();
	finish("exit");
	errno = saved;
}
