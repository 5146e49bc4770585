/* Constructor, fork handling and exit: when tracking starts, who a child is, when the file is
 * written. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core/config.h"
#include "intercept/hooks.h"
#include "lifecycle.h"
#include "core/ms.h"
#include "output/report.h"
#include "output/snapshots.h"
#include "core/stages.h"
#include "core/timeline.h"
#include "cuda/cuda.h"

struct ms_process ms_proc;
int ms_active;
static int finished;

void ms_py_init(void) __attribute__((weak));
void ms_native_init(void) __attribute__((weak));

double ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double ms_elapsed(void)
{
	return ms_now() - ms_proc.start_monotonic;
}

static double unix_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ms_is_tracked_process(void)
{
	return ms_active && (pid_t)syscall(SYS_getpid) == ms_proc.pid;
}

static void stop_tracking(void)
{
	ms_active = 0;
	ms_counting = 0;
}

static void start_clock(void)
{
	ms_proc.pid = getpid();
	ms_proc.ppid = getppid();
	ms_proc.start_monotonic = ms_now();
	ms_proc.start_unix = unix_now();
}

void ms_finish(const char *reason)
{
	if (!ms_is_tracked_process() || __atomic_exchange_n(&finished, 1, __ATOMIC_ACQ_REL))
		return;
	ms_tls_guard++;
	ms_stages_close_all(ms_elapsed());
	ms_report_write(reason, 0, 1);
	ms_tls_guard--;
}

/* Work that must follow a stage boundary outside the engine's lock (never at exit). */
static void after_boundary(int stage, int end)
{
	ms_snapshots_at_boundary();
	ms_cuda_boundary(stage, end);
}

static void at_exit(void)
{
	int saved = errno;
	ms_finish("exit");
	errno = saved;
}

/* Lock order everywhere: mapping table, then stage engine (a counted munmap may open a stage). */
static void fork_prepare(void)
{
	ms_mmap_lock();
	ms_stages_lock();
	ms_timeline_lock();
}

static void fork_parent(void)
{
	ms_timeline_unlock();
	ms_stages_unlock();
	ms_mmap_unlock();
}

/* A forked child starts its own report from its live memory at fork, under its own file name. */
static void fork_child(void)
{
	ms_mmap_unlock();
	ms_stages_lock_reset();
	ms_timeline_reset_for_child();
	if (!ms_active)
		return;
	if (!ms_cfg.follow_children) {
		stop_tracking();
		return;
	}
	pid_t parent = ms_proc.pid;
	start_clock();
	ms_proc.ppid = parent;
	ms_proc.is_child = 1;
	ms_proc.forked = 1;
	ms_proc.own_output = 0;
	finished = 0;
	ms_report_reset_for_child();
	ms_snapshots_after_fork_child();
	ms_stages_reset_for_child(0.0);
	if (ms_proc.implicit_init && ms_st.nopen == 0)
		ms_stages_begin_implicit_init(0.0);
}

static const char *env(const char *name)
{
	return secure_getenv(name);
}

static long env_pid(const char *name)
{
	const char *v = getenv(name);
	return v ? strtol(v, NULL, 10) : 0;
}

/* Exec'd children find where to write here: MEMSHIM_ROOT_OUTPUT, the MEMSHIM_OUTPUT value it came
 * from, and the pid that writes it as is (its children add ".<pid>"). */
static void export_output(void)
{
	char pid[24];
	const char *setting = getenv("MEMSHIM_OUTPUT");
	ms_format(pid, sizeof pid, "%d", (int)ms_proc.pid);
	setenv("MEMSHIM_ROOT_OUTPUT", ms_cfg.output, 1);
	setenv("MEMSHIM_ROOT_OUTPUT_SETTING", setting ? setting : "", 1);
	setenv("MEMSHIM_ROOT_OUTPUT_PID", pid, 1);
}

/* A child that set MEMSHIM_OUTPUT to another value than the exporter saw chose its own file. */
static int own_setting(void)
{
	const char *seen = getenv("MEMSHIM_ROOT_OUTPUT_SETTING");
	const char *mine = getenv("MEMSHIM_OUTPUT");
	return seen && mine && *mine && strcmp(seen, mine) != 0;
}

/* Exec'd children inherit the identity of the first tracked process of the run. */
static void identify(void)
{
	long root_pid = env_pid("MEMSHIM_ROOT_PID");
	if (root_pid <= 0 || root_pid == ms_proc.pid) {
		char pid[24];
		ms_proc.root_pid = ms_proc.pid;
		ms_format(pid, sizeof pid, "%d", (int)ms_proc.pid);
		setenv("MEMSHIM_ROOT_PID", pid, 1);
		export_output();
		return;
	}
	ms_proc.root_pid = (pid_t)root_pid;
	ms_proc.is_child = 1;
	if (own_setting()) {
		ms_proc.own_output = 1;
		export_output(); /* its own exec'd children derive their names from its file */
		return;
	}
	const char *out = getenv("MEMSHIM_ROOT_OUTPUT");
	if (out && out[0] == '/' && strlen(out) < sizeof ms_cfg.output)
		ms_strlcpy(ms_cfg.output, out, sizeof ms_cfg.output);
	/* the process that owns the file exec'd itself in place: it keeps writing the file as is */
	ms_proc.own_output = env_pid("MEMSHIM_ROOT_OUTPUT_PID") == ms_proc.pid;
}

__attribute__((constructor)) static void ms_init(void)
{
	ms_log_bind_stderr(); /* before anything can warn */
	ms_resolve();
	start_clock();
	if (getauxval(AT_SECURE)) { /* setuid/setgid: do nothing at all */
		stop_tracking();
		return;
	}
	if (ms_sanitizer()) {
		ms_warn("%s owns this program's memory: memshim steps aside and counts nothing", ms_sanitizer());
		stop_tracking();
		return;
	}
	ms_tls_guard++;
	ms_config_load(&ms_cfg, env);
	ms_tls_guard--;
	if (ms_cfg.disabled) {
		stop_tracking();
		return;
	}
	identify();
	if (ms_proc.is_child && !ms_cfg.follow_children) {
		stop_tracking();
		return;
	}
	ms_report_init();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atexit(at_exit);
	__atomic_store_n(&ms_before_exit, ms_finish, __ATOMIC_RELEASE);
	ms_active = 1;
	ms_tl_clock = ms_elapsed;
	ms_timeline_enable(ms_cfg.timeline);
	ms_proc.implicit_init = ms_cfg.spec.is_default || ms_spec_find(&ms_cfg.spec, "init") < 0;
	if (ms_proc.implicit_init)
		ms_stages_begin_implicit_init(0.0);
	ms_snapshots_start();
	ms_stage_observer = after_boundary;
	if (ms_py_init)
		ms_py_init();
	if (ms_native_init)
		ms_native_init();
}

/* Backstop for exits that skip atexit handlers registered by libraries (e.g. a late dlclose). */
__attribute__((destructor)) static void ms_fini(void)
{
	at_exit();
}
