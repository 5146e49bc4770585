/* Native stages: reads the targets of MEMSHIM_STAGES that name C/C++ functions, resolves them,
 * lets native/arm.c turn the stack check (ms_native_check, native/check.c) on while one is loaded
 * and, at exit, warns once about every target found nowhere.
 *
 * Which targets are native (the rest is left to the Python detector, without warnings here):
 *   - "lib.so:symbol", "/path/obj:symbol", "<executable name>:symbol": always native;
 *   - C++ names ("ns::Trainer::train", "f(int)", "~T"), mangled names ("_ZN..."): native;
 *   - plain identifiers ("train_epoch"): native, except in a Python process, where an identifier
 *     found in no object loaded at start is taken to be a Python function (no warning, and no
 *     stack checks are paid for it; pin it as "lib.so:name" to look for it in libraries loaded
 *     later); never a function of the C runtime, nor of the interpreter in a Python process
 *     (runtime_owner: "write", "main" name the program's or a Python function);
 *   - dotted names ("Trainer.train", "module:Class.method"): Python only.
 * Nothing is done when MEMSHIM_STAGES is unset (its defaults are Python names).  Warnings about
 * targets found nowhere come at exit (ms_native_report: libraries loaded later count), once per
 * target, from the first process of the run or any process that found at least one target. */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "intercept/elf.h"
#include "intercept/hooks.h"
#include "native/leave.h"
#include "native/native.h"

#define MAX_NATIVE_TARGETS MS_PLT_MAX_TARGETS

static struct ms_target targets[MAX_NATIVE_TARGETS] MS_LARGE;
static struct {
	unsigned char python_owned[MAX_NATIVE_TARGETS];
	int loaded;   /* native targets were read: they are reported at exit */
	int watching; /* the stack check is on */
} detect_st;

static const char *exe_basename(char *buf, size_t size)
{
	long n = syscall(SYS_readlink, "/proc/self/exe", buf, size - 1);
	buf[n > 0 ? n : 0] = '\0';
	return ms_file_name(buf);
}

/* The program's file name is an interpreter's (python, python3.11). */
static int python_named(const char *exe_base)
{
	return !strncmp(exe_base, "python", 6);
}

/* Where a plain name NAME is a runtime's function (native.h, runtime_of): into OUT, the object's
 * file name ("libc.so.6", "python3.11"), else "".  The interpreter (the object with Py_IsInitialized,
 * or the program when it is pythonX) counts in a Python process: a script's main() is not its C main. */
static void runtime_owner(const char *name, const char *exe_base, char *out, size_t size)
{
	void *py = ms_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	const struct link_map *interp = py ? ms_elf_object_of(py) : NULL;
	out[0] = '\0';
	/* every runtime object that has it, not the first definition only: a library of the program's
	 * that exports write too must not let libc's be bound */
	for (const struct link_map *m = _r_debug.r_map; m && !out[0]; m = m->l_next) {
		int exe = m == _r_debug.r_map;
		const char *base = exe ? exe_base : ms_file_name(m->l_name ? m->l_name : "");
		int runtime = ms_c_runtime_file(base) || (py && (m == interp || (exe && python_named(exe_base))));
		if (runtime && ms_elf_own_symbol(m, name))
			ms_strlcpy(out, base, size);
	}
}

/* Whether this process's program is the Python interpreter (pythonX, with the interpreter loaded):
 * its functions are the interpreter's, never a script's. */
static int program_is_python(const char *exe_base)
{
	return python_named(exe_base) && ms_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
}

/* A plain name not pinned to an object and not yet known as a runtime's. */
static int plain_unowned(const struct ms_target *t)
{
	return t->kind == MS_TK_PLAIN && !t->object && !t->runtime_of[0];
}

struct program_names {
	const char *exe_base;
	int n;
};

/* A function of the interpreter's program in its .symtab only (main, when libpython is shared):
 * the plain names naming it are the interpreter's too. */
static void note_program_function(const char *name, uintptr_t addr, size_t size, void *arg)
{
	const struct program_names *p = arg;
	(void)addr;
	(void)size;
	if (!ms_target_filter_may(&ms_native_filter, name))
		return;
	for (int i = 0; i < p->n; i++)
		if (plain_unowned(&targets[i]) && ms_target_matches(&targets[i], name))
			ms_strlcpy(targets[i].runtime_of, p->exe_base, sizeof targets[i].runtime_of);
}

/* Plain names the interpreter's program defines beyond its dynamic symbols (runtime_owner's). */
static void program_owned(const char *exe_path, const char *exe_base, int n)
{
	int any = 0;
	for (int i = 0; i < n && !any; i++)
		any = plain_unowned(&targets[i]);
	if (!any || !program_is_python(exe_base))
		return;
	struct program_names p = { exe_base, n };
	(void)ms_syms_each_function(exe_path, 0, note_program_function, &p); /* runtime_owner read .dynsym */
}

static int load_targets(void)
{
	char exe[1024];
	const char *base = exe_basename(exe, sizeof exe);
	const struct ms_spec *spec = &ms_cfg.spec;
	int n = 0;
	for (int i = 0; i < spec->nstages && i < MS_SPEC_MAX_STAGES; i++)
		for (int j = 0; j < spec->stage[i].ntargets && n < MAX_NATIVE_TARGETS; j++) {
			if (ms_target_parse(&targets[n], spec->stage[i].targets[j], base) < 0)
				continue;
			targets[n].spec_stage = i;
			targets[n].stage = i;
			if (targets[n].kind == MS_TK_PLAIN && !targets[n].object)
				runtime_owner(targets[n].name, base, targets[n].runtime_of,
					      sizeof targets[n].runtime_of);
			n++;
		}
	ms_target_filter_build(&ms_native_filter, targets, n);
	program_owned(exe, base, n);
	ms_native_targets = targets;
	ms_native_ntargets = n;
	return n;
}

static const char *bound_by(int i)
{
	if (targets[i].bound_plt)
		return "plt";
	if (targets[i].found)
		return "stack";
	return targets[i].runtime_of[0] ? "runtime" : "none"; /* runtime: the C runtime's, bound by nothing */
}

void ms_native_each_target(void (*fn)(void *ctx, const char *target, const char *stage, const char *bound,
				      const char *object),
			   void *ctx)
{
	for (int i = 0; detect_st.loaded && i < ms_native_ntargets; i++) {
		if (detect_st.python_owned[i])
			continue;
		const char *bound = bound_by(i);
		fn(ctx, targets[i].text, ms_cfg.spec.stage[targets[i].spec_stage].name, bound,
		   strcmp(bound, "runtime") ? NULL : targets[i].runtime_of);
	}
}

/* ---- "not found", judged over the run ------------------------------------------------------
 * A target is found nowhere only when no process of the run found it (judged by each process
 * alone, `time ./prog` named prog's function "not found in any loaded object", time having none,
 * and each of PostgreSQL's children repeated the line).  The run's first process says it at its exit; the others note what
 * they found, one byte per target, in a file of the run (/dev/shm/memshim-native-..., ms_run_path;
 * made by the first of them to find something, mode 0600, this user's), which the first process
 * reads and removes.  A process that found nothing writes nothing, so a run whose first process is
 * killed leaves a file only when another found something.  Under memshim run the dump says it for
 * the run's files (native_targets), so nobody does here. */

static int dump_follows(void)
{
	const char *v = ms_setting_text("MEMSHIM_RUN_DUMP");
	return v && !strcmp(v, "1");
}

/* FD is a plain file of this user's, not a link's target somebody else made. */
static int ours(long fd)
{
	struct stat st;
	return ms_sys_fstat((int)fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ms_sys_geteuid();
}

/* A later process of the run: the targets it found (or took as Python functions), for the first
 * one. */
static void tell_first(void)
{
	char path[96];
	int any = 0;
	for (int i = 0; i < ms_native_ntargets; i++)
		any |= targets[i].found || detect_st.python_owned[i];
	if (!any || !ms_proc.is_child || dump_follows() || !ms_run_path(path, sizeof path, "native"))
		return;
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (ours(fd)) {
		static const char one = 1;
		/* found, or taken as a Python function here: the run's first Python process judges it */
		for (int i = 0; i < ms_native_ntargets; i++)
			if (targets[i].found || detect_st.python_owned[i])
				syscall(SYS_pwrite64, fd, &one, 1, (long)i);
	}
	syscall(SYS_close, fd);
}

/* The first process: which targets the others found (ELSEWHERE[i] 1); the file goes. */
static void read_notes(unsigned char *elsewhere)
{
	char path[96];
	if (ms_proc.is_child || dump_follows() || !ms_run_path(path, sizeof path, "native"))
		return;
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return; /* nobody else found anything */
	if (ours(fd) && syscall(SYS_pread64, fd, elsewhere, (size_t)ms_native_ntargets, 0) < 0)
		ms_debug("native stages: could not read what the run's other processes found");
	syscall(SYS_close, fd);
	syscall(SYS_unlinkat, AT_FDCWD, path, 0);
}

/* A target neither found nor taken as a Python function: only it needs the objects read again
 * (all of them at exit, thousands of symbols each, after an import of many extensions). */
static int any_unsettled(void)
{
	for (int i = 0; i < ms_native_ntargets; i++)
		if (!targets[i].found && !detect_st.python_owned[i] && !targets[i].runtime_of[0])
			return 1;
	return 0;
}

/* The last word on the targets; REFRESH: read the loaded objects again first (not on _exit, which
 * a signal handler may call while its thread holds the dynamic linker's lock). */
static void report(int refresh)
{
	static unsigned char elsewhere[MAX_NATIVE_TARGETS] MS_LARGE;
	if (!detect_st.loaded || !ms_is_tracked_process())
		return;
	ms_tls_guard++;
	if (refresh && any_unsettled())
		ms_syms_refresh();
	tell_first();
	read_notes(elsewhere);
	/* the run's first process speaks for the run; under memshim run, its dump */
	int quiet = ms_proc.is_child || dump_follows();
	char stripped[1024];
	ms_syms_stripped(stripped, sizeof stripped);
	for (int i = 0; i < ms_native_ntargets; i++) {
		const struct ms_target *t = &targets[i];
		const char *stage = ms_cfg.spec.stage[t->spec_stage].name;
		int id = ms_stage_find(stage);
		if (t->found && t->tail_call && !t->bound_plt && (id < 0 || ms_stage_begins(id) == 0))
			ms_warn("native stage %s: '%s' was never seen: it ends in a tail call (a jmp to its callee, "
				"as -O2 builds it), so while the callee allocates its frame is gone; name the "
				"callee, or build it with -fno-optimize-sibling-calls",
				stage, t->text);
		if (t->found || detect_st.python_owned[i] || quiet || elsewhere[i])
			continue;
		if (t->runtime_of[0]) {
			ms_warn("native stage %s: '%s' is a function of %s, which a plain name does not bind (a "
				"function of the program's own, or a Python function, of that name is what it "
				"names); to mean that one, name it %s:%s",
				stage, t->text, t->runtime_of, t->runtime_of, t->name);
			continue;
		}
		ms_warn("native stage %s: '%s' was not found in any loaded object%s%s%s",
			ms_cfg.spec.stage[t->spec_stage].name, t->text, stripped[0] ? " (no symbol table: " : "",
			stripped, stripped[0] ? ")" : "");
	}
	ms_debug("native stages: %llu quick walks, %llu full looks, %llu trampolines fired, %llu unwound, "
		 "%llu longjmps, %llu hot chains taken in, %llu walks replayed, %llu chains looked up",
		 (unsigned long long)ms_native_stats.medium, (unsigned long long)ms_native_stats.slow,
		 (unsigned long long)ms_native_stats.fired, (unsigned long long)ms_native_stats.unwound,
		 (unsigned long long)ms_native_stats.longjmps, (unsigned long long)ms_native_stats.adopted,
		 (unsigned long long)ms_native_stats.replayed, (unsigned long long)ms_native_stats.looked_up);
	ms_tls_guard--;
}

void ms_native_report(void)
{
	report(1);
}

void ms_native_report_on_exit(void)
{
	report(0);
}

/* Whether the stack must be watched: something was found, or may still appear in a later dlopen. */
static int worth_checking(void)
{
	int python = ms_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized") != NULL;
	int worth = 0;
	for (int i = 0; i < ms_native_ntargets; i++) {
		const struct ms_target *t = &targets[i];
		if (python && !t->found && !t->object && t->kind == MS_TK_PLAIN)
			detect_st.python_owned[i] = 1;
		else
			worth = 1; /* bound to its calls or checked on the stack; either way dlopen is watched */
	}
	return worth;
}

void ms_native_init(void)
{
	if (ms_cfg.spec.is_default || load_targets() == 0)
		return;
	ms_tls_guard++;
	int ok = ms_pool_init() == 0 && ms_frames_init() == 0;
	if (!ok)
		ms_warn("native stages disabled: the trampolines were not linked as expected");
	if (ok) {
		ms_jmp_init();
		ms_plt_init(); /* first: a target bound to its calls needs no stack check */
		ms_syms_resolve();
		ok = worth_checking();
	}
	ms_tls_guard--;
	detect_st.loaded = 1;
	tell_first(); /* what the objects loaded at start hold, also for a process that ends in _exit */
	if (!ok)
		return;
	detect_st.watching = 1;
	ms_arm_init(); /* the stack check runs only while a target is loaded */
}

void ms_native_fork_child(int tracking)
{
	if (!detect_st.watching)
		return;
	ms_syms_fork_child();
	ms_arm_fork_child();
}
