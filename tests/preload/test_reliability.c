/* Reliability inside real programs: each test reproduces a program that hung, crashed or behaved
 * differently under the shim (signal handlers that map memory, a program's own allocator, sanitizer
 * runtimes, invalid pointers, signal dispositions, heaps committed with mprotect, rustc). */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "suite.h"
#include "harness.h"

#define MiB ((int64_t)1 << 20)

static struct run r, bare;

static const char *const no_preload[] = { "LD_PRELOAD", NULL };

static int exited_with(const struct run *x, int code)
{
	return WIFEXITED(x->status) && WEXITSTATUS(x->status) == code;
}

static int killed_by(const struct run *x, int sig)
{
	return WIFSIGNALED(x->status) && WTERMSIG(x->status) == sig;
}

static int count_lines_with(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The main loop maps and unmaps while a 50 us timer's handler maps, allocates and opens a stage:
 * hung on the first signal that landed between taking the mapping lock and marking it held. */
START_TEST(signal_handler_maps_memory)
{
	const char *argv[] = { built("preload/reliab_fixture"), "sigmap", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(exited_with(&r, 0), "status %#x (99: the watchdog found it hung) %s", r.status, r.err);
	int ticks = 0;
	ck_assert_int_eq(sscanf(r.out, "signal maps ok, %d ticks", &ticks), 1);
	ck_assert_msg(ticks > 1000, "only %d timer signals", ticks);
	ck_assert_str_eq(r.err, "");
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	int64_t loop = metric(m, "loop_mem_cpu_alloc_delta");
	ck_assert_msg(loop > -64 * 1024 && loop < 64 * 1024, "loop alloc delta %lld", (long long)loop);
	ck_assert_int_eq(metric(m, "inner_calls"), 1563);
	ck_assert_int_ge(metric(m, "in_handler_calls"), 1);
	json_decref(m);
}
END_TEST

/* A program with its own malloc family that holds its lock around mmap, from a library constructor
 * that runs before the shim's: hung (the mmap wrapper resolved the real functions, a failing dlsym
 * allocated its error message through the program's malloc, which waited on its own lock). */
START_TEST(own_allocator_with_lock_around_mmap)
{
	const char *argv[] = { built("preload/own_malloc"), NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(exited_with(&r, 0), "status %#x %s", r.status, r.err);
	ck_assert_str_eq(r.out, "own allocator ok, 4 early\n");
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	/* its malloc never reaches ours; its mappings do: 2 chunks before init, 1 more and 32 MiB after
	 * (mapped at once: a reservation, counted by its pages, all touched) */
	ck_assert_int_eq(metric(m, "before_init_mem_cpu"), 8 * MiB);
	ck_assert_int_ge(metric(m, "process_mem_cpu_mmap_peak"), 8 * MiB + 4 * MiB);
	ck_assert_int_ge(metric(m, "process_mem_cpu_reservations_peak"), 32 * MiB);
	ck_assert_int_le(metric(m, "process_mem_cpu_reservations_peak"), 32 * MiB + 64 * 1024);
	ck_assert_int_ge(metric(m, "process_mem_cpu_peak"), 8 * MiB + 4 * MiB + 32 * MiB);
	json_decref(m);
}
END_TEST

/* A library loaded after start needs static TLS the C library keeps only a little of: the shim's
 * per-thread state stays small (its caches are mapped per thread), so a late dlopen (ctypes)
 * loads it, and it says it counts nothing.  Failed with 5 KiB of TLS ("cannot allocate memory in
 * static TLS block"). */
START_TEST(late_dlopen_loads)
{
	const char *argv[] = { built("preload/reliab_fixture"), "late", built("libmemshim.so"), NULL };
	const char *env[] = { "LD_PRELOAD=", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(exited_with(&r, 0), "status %#x %s %s", r.status, r.out, r.err);
	ck_assert_str_eq(r.out, "loaded\n");
	ck_assert_ptr_nonnull(strstr(r.err, "memshim: libmemshim.so was loaded after the program started"));
}
END_TEST

/* Sanitizer runtimes own malloc and cannot be asked about blocks before they initialise: the shim
 * steps aside with one line and the program runs as without it. */
static void sanitized(const char *fixture, const char *extra_env, const char *name)
{
	const char *argv[] = { built(fixture), NULL };
	const char *bare_env[] = { "LD_PRELOAD", extra_env, NULL };
	const char *shim_env[] = { extra_env, NULL };
	ck_assert_int_eq(run_under_shim(&bare, argv, bare_env), 0);
	if (!exited_with(&bare, 3)) {
		fprintf(stderr, "skipped: %s does not run here even without the shim\n", fixture);
		return;
	}
	ck_assert_int_eq(run_under_shim(&r, argv, shim_env), 0);
	ck_assert_msg(exited_with(&r, 3), "%s: status %#x %s", fixture, r.status, r.err);
	ck_assert_str_eq(r.out, bare.out);
	ck_assert_int_eq(count_lines_with(r.err, "memshim:"), 1);
	ck_assert_ptr_nonnull(strstr(r.err, name));
	ck_assert_ptr_null(load_metrics(&r, "m.json"));
}

START_TEST(thread_sanitizer_program)
{
	sanitized("preload/sanitized_tsan", NULL, "ThreadSanitizer");
}
END_TEST

START_TEST(address_sanitizer_program)
{
	/* ASan refuses any preload before its runtime unless told so: the same with and without us */
	sanitized("preload/sanitized_asan", "ASAN_OPTIONS=verify_asan_link_order=0", "AddressSanitizer");
}
END_TEST

/* Under valgrind: by default it replaces malloc in every object, memshim's wrapper too, and one
 * line says so (memshim counted nothing, silently, before: its library had no soname and valgrind
 * took it for the program's); with --soname-synonyms=somalloc=nouserintercepts memshim's wrapper
 * runs and sizes valgrind's blocks with valgrind's malloc_usable_size (no glibc headers to read). */
START_TEST(valgrind_program)
{
	char prog[4096];
	snprintf(prog, sizeof prog, "%s", built("preload/alloc_fixture"));
	if (access("/usr/bin/valgrind", X_OK) != 0) {
		fprintf(stderr, "valgrind_program: no valgrind, skipped\n");
		return;
	}
	const char *plain[] = { "/usr/bin/valgrind", "-q", prog, "simple", NULL };
	ck_assert_int_eq(run_under_shim(&r, plain, NULL), 0);
	ck_assert_msg(exited_with(&r, 0), "status %#x %s", r.status, r.err);
	ck_assert_msg(strstr(r.err, "memshim: no heap allocation reached memshim under valgrind"), "%s", r.err);
	const char *kept[] = {
		"/usr/bin/valgrind", "-q", "--soname-synonyms=somalloc=nouserintercepts", prog, "simple", NULL
	};
	ck_assert_int_eq(run_under_shim(&r, kept, NULL), 0);
	ck_assert_msg(exited_with(&r, 0), "status %#x %s", r.status, r.err);
	ck_assert_int_eq(count_lines_with(r.err, "memshim:"), 0);
	ck_assert_int_eq(count_lines_with(r.err, "=="), 0); /* no memcheck error either */
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "simple_mem_cpu_alloc_delta"), 2 * MiB);
	json_decref(m);
}
END_TEST

/* glibc diagnoses a pointer it never gave out ("invalid pointer", abort); the shim used to fault
 * first, reading the block's size. */
START_TEST(invalid_pointers_keep_glibcs_diagnosis)
{
	static const char *const modes[][2] = { { "badrealloc", "realloc(): invalid pointer" },
						{ "badfree", "free(): invalid pointer" } };
	for (int i = 0; i < 2; i++) {
		const char *argv[] = { built("preload/reliab_fixture"), modes[i][0], NULL };
		ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
		ck_assert_msg(killed_by(&r, SIGABRT), "%s: status %#x", modes[i][0], r.status);
		ck_assert_ptr_nonnull(strstr(r.err, modes[i][1]));
	}
}
END_TEST

/* Every way of asking for or changing a disposition answers as without the shim, and the
 * program's own handlers run. */
START_TEST(signal_dispositions_as_without_shim)
{
	const char *argv[] = { built("preload/reliab_fixture"), "dispositions", NULL };
	ck_assert_int_eq(run_under_shim(&bare, argv, no_preload), 0);
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(killed_by(&bare, SIGABRT) && r.status == bare.status, "status %#x vs %#x", r.status, bare.status);
	ck_assert_ptr_nonnull(strstr(bare.out, "own TERM handler ran: 15"));
	ck_assert_ptr_null(strstr(bare.out, "OTHER"));
	ck_assert_str_eq(r.out, bare.out);
}
END_TEST

/* A thread with little stack left, whose call is sampled: the sampled path fits where the
 * program's own call fits with 1 KiB to spare (it needed ~3.5 KiB more: 2 KiB of Python frames on
 * the stack in a native program, and the first call of a lazily bound function, whose resolver
 * saves ~2.7 KiB of vector state with AVX-512).  The program's own need is found first. */
START_TEST(a_sampled_call_fits_a_small_threads_stack)
{
	const char *env[] = { "MEMSHIM_SITES_RATE=64M", NULL }; /* its 1 GiB: sampled, nearly surely */
	char leave[32], prog[4096];
	snprintf(prog, sizeof prog, "%s", built("preload/reliab_fixture")); /* built()'s buffer is reused */
	const char *argv[] = { prog, "small_stack", leave, NULL };
	int own = 0;
	for (int l = 1024; l <= 16384 && !own; l += 256) {
		snprintf(leave, sizeof leave, "%d", l);
		ck_assert_int_eq(run_under_shim(&bare, argv, no_preload), 0);
		if (exited_with(&bare, 0))
			own = l;
	}
	ck_assert_msg(own > 0, "the fixture never fits: status %#x %s", bare.status, bare.err);
	snprintf(leave, sizeof leave, "%d", own + 1024);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
		ck_assert_msg(exited_with(&r, 0), "status %#x with %s bytes left (the program's own call: %d)",
			      r.status, leave, own);
		ck_assert_str_eq(r.out, "allocated\n");
	}
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_ge(json_integer_value(json_object_get(json_object_get(m, "sites"), "samples")), 1);
	json_decref(m);
}
END_TEST

/* A program that used up its descriptors still gets its file, and nothing on stderr: memshim lets
 * go of the cgroup fd it keeps and raises the soft limit by two while it writes (before: two
 * warnings, the second for $TMPDIR, which needs the same descriptors, and no file). */
START_TEST(a_program_out_of_fds_still_gets_its_file)
{
	const char *argv[] = { built("preload/reliab_fixture"), "fds_used_up", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert_msg(exited_with(&r, 0), "status %#x: %s", r.status, r.err);
	ck_assert_str_eq(r.out, "opened until EMFILE\n");
	ck_assert_str_eq(r.err, "");
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert(json_is_true(json_object_get(m, "complete")));
	json_decref(m);
}
END_TEST

/* A worker that locks itself into seccomp (OpenSSH's privilege separation child, Chromium's
 * renderers, libseccomp users) and then allocates: a filter that kills on any system call it does
 * not make itself, strict mode, and the filter through syscall().  It runs as without memshim
 * (before: SIGSYS at memshim's first read of /proc, or SIGKILL on its clock); the snapshot written
 * as it entered leads memshim-format to its live record, which holds the 3 calls of its stage and
 * the 64 MiB they allocated. */
START_TEST(a_sandboxed_worker_runs_as_without_memshim)
{
	const char *modes[] = { "filter", "syscall", "strict" };
	const char *env[] = { "MEMSHIM_STAGES=w=work", NULL };
	const char *argv[] = { built("preload/seccomp_fixture"), modes[_i], NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(exited_with(&r, 0), "%s: status %#x: %s", modes[_i], r.status, r.err);
	ck_assert_str_eq(r.out, "ok\n");
	ck_assert_str_eq(r.err, "");
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_msg(m && json_is_false(json_object_get(m, "complete")), "%s: no snapshot from its entry", modes[_i]);
	json_decref(m);
	const char *dump = format_in_dir(&r, "m.json");
	ck_assert_msg(strstr(dump, _i == 2 ? "seccomp sandbox (strict mode" : "seccomp sandbox (a filter)"), "%s",
		      dump);
	ck_assert_msg(strstr(dump, "w_calls                   =      3"), "%s", dump);
	ck_assert_msg(strstr(dump, "w_mem_cpu_peaked_delta    =   64MB"), "%s", dump);
}
END_TEST

/* A filter the kernel refuses leaves no sandbox: the final file as always. */
START_TEST(a_refused_seccomp_filter_changes_nothing)
{
	const char *env[] = { "MEMSHIM_STAGES=w=work", NULL };
	const char *argv[] = { built("preload/seccomp_fixture"), "refused", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, env), 0);
	ck_assert_msg(exited_with(&r, 0), "status %#x: %s", r.status, r.err);
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert(json_is_true(json_object_get(m, "complete")));
	ck_assert_int_eq(json_integer_value(json_object_get(stage_of(m, "w"), "calls")), 3);
	json_decref(m);
}
END_TEST

/* An uncaught SIGTERM still leaves a last snapshot and the same status. */
START_TEST(default_term_leaves_a_snapshot)
{
	const char *argv[] = { "/bin/sh", "-c", "kill -TERM $$; sleep 5", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert(killed_by(&r, SIGTERM));
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "signal")), SIGTERM);
	/* no stage of its own was open: a stop, not a crash (Jupyter ends kernels so) */
	ck_assert(json_is_true(json_object_get(m, "complete")));
	json_decref(m);
}
END_TEST

/* SIGHUP (a closed terminal, tmux ending a session) and SIGPIPE (`sort | head` once head is gone)
 * with no stage open end a run as SIGTERM does: the final file, the same status. */
START_TEST(hangup_and_a_closed_pipe_leave_the_final_file)
{
	const char *hup[] = { "/bin/sh", "-c", "kill -HUP $$; sleep 5", NULL };
	const char *pipe_[] = { built("preload/reliab_fixture"), "pipe_idle", NULL };
	const char *const *argvs[] = { hup, pipe_ };
	const int sigs[] = { SIGHUP, SIGPIPE };
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(run_under_shim(&r, argvs[i], NULL), 0);
		ck_assert_msg(killed_by(&r, sigs[i]), "signal %d: status %#x", sigs[i], r.status);
		json_t *m = load_metrics(&r, "m.json");
		ck_assert_msg(m != NULL, "no file after signal %d", sigs[i]);
		ck_assert_int_eq(json_integer_value(json_object_get(m, "signal")), sigs[i]);
		ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "signal");
		ck_assert(json_is_true(json_object_get(m, "complete")));
		json_decref(m);
	}
}
END_TEST

/* A signal ignored across exec (nohup's SIGHUP) stays ignored: the handler sits in for defaults only. */
START_TEST(an_inherited_ignored_signal_stays_ignored)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "trap '' HUP; exec '%s' ignored_hup", built("preload/reliab_fixture"));
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert(exited_with(&r, 0));
	ck_assert_str_eq(r.out, "HUP at start: ignored\nstill here\n");
}
END_TEST

/* SIGTERM inside a stage: the stage was cut short, so the file is the snapshot of an interrupted run. */
START_TEST(term_inside_a_stage_leaves_an_incomplete_file)
{
	const char *argv[] = { built("preload/reliab_fixture"), "term_in_stage", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert(killed_by(&r, SIGTERM));
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "signal")), SIGTERM);
	ck_assert(json_is_false(json_object_get(m, "complete")));
	ck_assert(json_is_true(json_object_get(stage_of(m, "work"), "open")));
	json_decref(m);
}
END_TEST

/* Reserved PROT_NONE, committed by mprotect, decommitted by mprotect and madvise or a fixed PROT_NONE
 * map: what was committed counts by the pages written, the rest nothing. */
START_TEST(heap_committed_with_mprotect)
{
	const char *argv[] = { built("preload/reliab_fixture"), "mprotect", NULL };
	ck_assert_int_eq(run_under_shim(&r, argv, NULL), 0);
	ck_assert(exited_with(&r, 0));
	json_t *m = load_metrics(&r, "m.json");
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(metric(m, "reserve_mem_cpu_alloc_delta"), 0);
	ck_assert_int_eq(metric(m, "commit_mem_cpu_alloc_delta"), 10 * MiB);
	ck_assert_int_eq(metric(m, "commit_again_mem_cpu_alloc_delta"), 0);
	ck_assert_int_eq(metric(m, "decommit_mem_cpu_alloc_delta"), -2 * MiB);
	ck_assert_int_eq(metric(m, "decommit_fixed_mem_cpu_alloc_delta"), -4 * MiB);
	ck_assert_int_eq(metric(m, "recommit_mem_cpu_alloc_delta"), MiB);
	ck_assert_int_eq(metric(m, "unmap_mem_cpu_alloc_delta"), -5 * MiB);
	ck_assert_int_eq(metric(m, "process_mem_cpu_mmap_peak"), 0);
	json_decref(m);
}
END_TEST

static const char *find_rustc(void)
{
	static char path[PATH_MAX];
	const char *home = getenv("HOME");
	snprintf(path, sizeof path, "%s/.cargo/bin/rustc", home ? home : "/root");
	if (access(path, X_OK) == 0)
		return path;
	return access("/usr/bin/rustc", X_OK) == 0 ? "/usr/bin/rustc" : NULL;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[400];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* cargo (its own processes, rustc children, a build script) builds a crate offline. */
static void cargo_build(struct run *c)
{
	char cargo[PATH_MAX], manifest[300], src[300];
	snprintf(cargo, sizeof cargo, "%s/.cargo/bin/cargo", getenv("HOME") ? getenv("HOME") : "/root");
	if (access(cargo, X_OK) != 0) {
		fprintf(stderr, "skipped: no cargo on this machine\n");
		return;
	}
	snprintf(src, sizeof src, "%s/src", r.dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	write_file(r.dir, "Cargo.toml", "[package]\nname = \"shimmed\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
	write_file(r.dir, "build.rs", "fn main() { println!(\"cargo:rustc-env=BUILT_BY=build.rs\"); }\n");
	write_file(src, "main.rs", "fn main() { println!(\"built by {}\", env!(\"BUILT_BY\")); }\n");
	snprintf(manifest, sizeof manifest, "%s/Cargo.toml", r.dir);
	const char *build[] = { cargo, "run", "--offline", "-q", "--manifest-path", manifest, NULL };
	ck_assert_int_eq(run_under_shim(c, build, NULL), 0);
	ck_assert_msg(exited_with(c, 0), "cargo: status %#x %s", c->status, c->err);
	ck_assert_str_eq(c->out, "built by build.rs\n");
}

/* rustc links jemalloc: `rustc --version` hung forever, and a real compile runs the allocator hard. */
START_TEST(rustc_with_its_own_allocator)
{
	const char *rustc = find_rustc();
	if (!rustc) {
		fprintf(stderr, "skipped: no rustc on this machine\n");
		return;
	}
	const char *version[] = { rustc, "--version", NULL };
	ck_assert_int_eq(run_under_shim(&r, version, NULL), 0);
	ck_assert_msg(exited_with(&r, 0) && !strncmp(r.out, "rustc ", 6), "status %#x %s %s", r.status, r.out, r.err);
	char src[300], exe[300];
	snprintf(src, sizeof src, "%s/hello.rs", r.dir);
	snprintf(exe, sizeof exe, "%s/hello", r.dir);
	FILE *f = fopen(src, "w");
	ck_assert_ptr_nonnull(f);
	fputs("fn main() { let v: Vec<u64> = (0..100000).collect(); println!(\"sum {}\", v.iter().sum::<u64>()); }\n",
	      f);
	fclose(f);
	const char *compile[] = { rustc, "-O", "-o", exe, src, NULL };
	struct run c;
	ck_assert_int_eq(run_under_shim(&c, compile, NULL), 0);
	ck_assert_msg(exited_with(&c, 0), "status %#x %s", c.status, c.err);
	const char *hello[] = { exe, NULL };
	ck_assert_int_eq(run_under_shim(&c, hello, NULL), 0);
	ck_assert_str_eq(c.out, "sum 4999950000\n");
	cargo_build(&c);
}
END_TEST

int main(void)
{
	harness_timeout = 60;
	Suite *s = suite_create("reliability");
	TCase *tc = tcase_create("real programs");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, signal_handler_maps_memory);
	tcase_add_test(tc, own_allocator_with_lock_around_mmap);
	tcase_add_test(tc, late_dlopen_loads);
	tcase_add_test(tc, thread_sanitizer_program);
	tcase_add_test(tc, address_sanitizer_program);
	tcase_add_test(tc, invalid_pointers_keep_glibcs_diagnosis);
	tcase_add_test(tc, signal_dispositions_as_without_shim);
	tcase_add_test(tc, default_term_leaves_a_snapshot);
	tcase_add_test(tc, term_inside_a_stage_leaves_an_incomplete_file);
	tcase_add_test(tc, hangup_and_a_closed_pipe_leave_the_final_file);
	tcase_add_test(tc, an_inherited_ignored_signal_stays_ignored);
	tcase_add_test(tc, a_sampled_call_fits_a_small_threads_stack);
	tcase_add_test(tc, a_program_out_of_fds_still_gets_its_file);
	tcase_add_loop_test(tc, a_sandboxed_worker_runs_as_without_memshim, 0, 3);
	tcase_add_test(tc, a_refused_seccomp_filter_changes_nothing);
	tcase_add_test(tc, valgrind_program);
	tcase_add_test(tc, heap_committed_with_mprotect);
	tcase_add_test(tc, rustc_with_its_own_allocator);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
