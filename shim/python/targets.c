/* The Python targets of MEMSHIM_STAGES: read from the settings once (a name that is no Python
 * name, or "lib.so:symbol", is native/'s), matched against the qualified names and modules of the
 * functions that run (python/classify.c asks), counted per distinct function they matched, entered
 * and left as stages of the engine, and reported at exit (targets that matched nothing, targets
 * that matched several functions) by the one process of the run that speaks for them.  Calls
 * nothing else in python/ (the bootstrap says when the targets are live). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/stages.h"
#include "intercept/hooks.h"
#include "python/py.h"

/* One target of one spec stage, split into its parts (pointers into ms_cfg.spec's pool). */
struct target {
	const char *module; /* NULL: any module */
	size_t module_len;
	const char *qual; /* qualified name */
	const char *last; /* its last component (what co_name must be) */
	const char *text; /* as written in MEMSHIM_STAGES */
	int stage;        /* spec index */
	int matched;      /* a function it names has run in this process */
	/* the program's own code (its __main__, a file under the working directory) has a function of
	 * its name: for an unpinned target it wins over an installed package's (eval=evaluate is not
	 * sympy's evaluate, which torch imports) */
	int user;
	int near_score; /* how near NEAR is (lower is nearer; 0: nothing near was seen) */
	char near[128]; /* the nearest name a function that exists has, written as the target would be */
};

#define MAX_TARGETS (MS_SPEC_MAX_STAGES * MS_SPEC_MAX_TARGETS)
static struct target targets[MAX_TARGETS] MS_LARGE;

int ms_py_names_wanted;

/* The state beside the tables of targets, functions and pairs (apart: 1 KiB and more go to .lbss). */
static struct {
	int ntargets, nfuncs, npairs;
	int live; /* the route is armed or installed: targets that matched nothing are named at exit */
	/* the working directory at start (python/classify.c asks whether a file is the program's own) */
	char start_dir[MS_PATH_MAX];
	int stage_ids[MS_SPEC_MAX_STAGES];   /* engine id + 1; 0 before first use */
	int outstanding[MS_SPEC_MAX_STAGES]; /* enters not yet left, per spec stage */
	int refused_any;                     /* some function was refused a stage (below) */
	pid_t speaker_pid;                   /* the process that speaks about targets (below) */
	char shared[64];                     /* the file of what the run's other processes matched (below) */
	int stopped;                         /* detection stopped (ms_py_targets_stopped) */
	int shared_made;
} state;

/* ---- targets ---------------------------------------------------------------------------- */

static int plausible_python_name(const char *s)
{
	/* identifiers, dots and "<locals>"; anything else (paths, spaces) is some other kind of target */
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
		      *s == '.' || *s == '<' || *s == '>' || (unsigned char)*s >= 0x80))
			return 0;
	return 1;
}

int ms_py_targets_load(void)
{
	const struct ms_spec *spec = &ms_cfg.spec;
	if (!ms_sys_getcwd(state.start_dir, sizeof state.start_dir))
		state.start_dir[0] = '\0';
	for (int i = 0; i < spec->nstages && i < 32; i++) {
		for (int j = 0; j < spec->stage[i].ntargets && state.ntargets < MAX_TARGETS; j++) {
			const char *t = spec->stage[i].targets[j];
			const char *colon = strchr(t, ':');
			struct target *tg = &targets[state.ntargets];
			tg->module = colon ? t : NULL;
			tg->module_len = colon ? (size_t)(colon - t) : 0;
			tg->qual = colon ? colon + 1 : t;
			if (!plausible_python_name(tg->qual) ||
			    (colon && (tg->module_len == 0 || ms_target_names_object(t, tg->module_len))))
				continue; /* not a Python name, or "lib.so:symbol": a native target */
			const char *dot = strrchr(tg->qual, '.');
			tg->last = dot ? dot + 1 : tg->qual;
			if (!*tg->last)
				continue;
			tg->stage = i;
			tg->text = t;
			tg->matched = 0;
			tg->user = 0;
			tg->near_score = 0;
			state.ntargets++;
		}
	}
	ms_py_names_wanted = state.ntargets > 0 && !spec->is_default;
	return state.ntargets;
}

const char *ms_py_target(int i, const char **module, size_t *module_len, const char **last)
{
	if (i < 0 || i >= state.ntargets)
		return NULL;
	*module = targets[i].module;
	*module_len = targets[i].module_len;
	*last = targets[i].last;
	return targets[i].qual;
}

int ms_py_is_candidate(const char *co_name)
{
	for (int i = 0; i < state.ntargets; i++)
		if (strcmp(targets[i].last, co_name) == 0)
			return 1;
	return 0;
}

/* ---- distinct functions a target matched ------------------------------------------------
 * A bare name can match functions of several modules (eval=evaluate also ran sympy's evaluate, which
 * torch imports): each distinct module:qualname gets an entry, and the calls in which it opened a
 * stage are counted, so the exit line and the file can name them.  Written under the GIL (the
 * classification), each entry published by a release store of the count (a signal handler's
 * report reads them: pool workers end by SIGTERM), counted with atomics. */
#define MAX_FUNCS 256
#define MAX_PAIRS 512
static struct {
	char name[192]; /* module:qualname, or the qualified name when the module is unknown */
	uint64_t calls;
	int user; /* the program's own code (module __main__, a file under the working directory) */
	/* stages (spec bits) it no longer opens: the program's own function of the same unpinned target
	 * exists, and wins */
	uint32_t refused;
	uint64_t passed; /* calls in which it would have opened a refused stage */
	int inflight;    /* its calls that entered stages and have not left them (refusal waits for 0) */
} funcs[MAX_FUNCS] MS_LARGE;
static struct {
	short target, func;
} pairs[MAX_PAIRS] MS_LARGE;

/* The entry of QUAL in MODULE (NULL: unknown), added when new; -1 when the table is full. */
static int func_index(const char *qual, const char *module, int user)
{
	char name[sizeof funcs[0].name];
	ms_format(name, sizeof name, "%s%s%s", module ? module : "", module ? ":" : "", qual);
	for (int i = 0; i < state.nfuncs; i++)
		if (strcmp(funcs[i].name, name) == 0)
			return i;
	if (state.nfuncs == MAX_FUNCS)
		return -1;
	ms_strlcpy(funcs[state.nfuncs].name, name, sizeof funcs[0].name);
	funcs[state.nfuncs].user = user;
	funcs[state.nfuncs].refused = 0;
	funcs[state.nfuncs].passed = 0;
	funcs[state.nfuncs].inflight = 0;
	__atomic_store_n(&state.nfuncs, state.nfuncs + 1, __ATOMIC_RELEASE); /* published whole: a handler reads it */
	return state.nfuncs - 1;
}

static void pair(int target, int func)
{
	for (int i = 0; i < state.npairs; i++)
		if (pairs[i].target == target && pairs[i].func == func)
			return;
	if (state.npairs < MAX_PAIRS) {
		pairs[state.npairs].target = (short)target;
		pairs[state.npairs].func = (short)func;
		__atomic_store_n(&state.npairs, state.npairs + 1, __ATOMIC_RELEASE);
	}
}

static void tell_speaker(int target);

/* Whether MODULE (NULL: unknown) is T's: "__main__" is also "__mp_main__", the name multiprocessing
 * gives the program's script in a spawned worker, so a target pinned as __main__:f matches there. */
static int module_is(const struct target *t, const char *module)
{
	if (!t->module)
		return 1;
	if (!module)
		return 0;
	if (strlen(module) == t->module_len && memcmp(module, t->module, t->module_len) == 0)
		return 1;
	return t->module_len == 8 && memcmp(t->module, "__main__", 8) == 0 && strcmp(module, "__mp_main__") == 0;
}

/* Unpinned target I has a function in the program's own code: every installed package's function
 * it matched gives up its stage (from its next call on: calls in flight finish as they began). */
static void user_wins(int i)
{
	if (__atomic_exchange_n(&targets[i].user, 1, __ATOMIC_RELAXED) || targets[i].module)
		return;
	for (int k = 0; k < state.npairs; k++)
		if (pairs[k].target == i && !funcs[pairs[k].func].user) {
			funcs[pairs[k].func].refused |= 1u << targets[i].stage;
			__atomic_store_n(&state.refused_any, 1, __ATOMIC_RELAXED);
		}
}

void ms_py_user_defines(const char *qual)
{
	for (int i = 0; i < state.ntargets; i++)
		if (!targets[i].module && strcmp(targets[i].qual, qual) == 0)
			user_wins(i);
}

int ms_py_user_file(const char *file)
{
	size_t n = strlen(state.start_dir);
	if (!file || !*file || file[0] == '<' || strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
	    strstr(file, "/lib/python3."))
		return 0; /* installed packages and the standard library, also in a venv under the directory */
	if (file[0] != '/')
		return 1; /* relative to the working directory (python train.py) */
	return n > 1 && strncmp(file, state.start_dir, n) == 0 && file[n] == '/';
}

/* The stages QUAL in MODULE (also named ALIAS: __main__ run as python -m pkg.mod is pkg.mod too, or
 * NULL) matches; *FUNC its function entry (or -1).  USER: the function is the program's own code. */
uint32_t ms_py_match(const char *qual, const char *module, const char *alias, int user, int *func)
{
	uint32_t mask = 0;
	*func = -1;
	if (module && (!strcmp(module, "__main__") || !strcmp(module, "__mp_main__")))
		user = 1;
	for (int i = 0; i < state.ntargets; i++) {
		const struct target *t = &targets[i];
		if (strcmp(t->qual, qual) != 0 ||
		    (!module_is(t, module) && !(alias && t->module && module_is(t, alias))))
			continue;
		mask |= 1u << t->stage;
		if (!__atomic_exchange_n(&targets[i].matched, 1, __ATOMIC_RELAXED)) {
			tell_speaker(i);
			if (!ms_py_unmatched_any()) /* the last one: the frame hook may skip other names now */
				__atomic_store_n(&ms_py_names_wanted, 0, __ATOMIC_RELAXED);
		}
		if (*func < 0)
			*func = func_index(qual, module, user);
		if (*func >= 0)
			pair(i, *func);
		if (user && !t->module)
			user_wins(i);
		else if (*func >= 0 && !t->module && !funcs[*func].user &&
			 __atomic_load_n(&t->user, __ATOMIC_RELAXED)) {
			funcs[*func].refused |= 1u << t->stage;
			__atomic_store_n(&state.refused_any, 1, __ATOMIC_RELAXED);
		}
	}
	return mask;
}

/* ---- names near a target's ------------------------------------------------------------------
 * A target that matches nothing is most often a typo (data=load_dat): the functions that exist are
 * compared with it as the unknown MEMSHIM_ settings are with the table's names, and the nearest
 * (the program's own first) is suggested at exit and in the file. */
static int near_enough(const char *a, size_t n, const char *b, size_t m)
{
	if (n + 2 < m || m + 2 < n || (n == m && !memcmp(a, b, n)))
		return -1;
	int most = m <= 4 ? 1 : 2, d = ms_edit_distance_at_most(a, n, b, most);
	return d <= most ? d : -1;
}

int ms_py_unmatched_any(void)
{
	if (ms_cfg.spec.is_default)
		return 0; /* never named when unmatched: nothing near them is wanted */
	for (int i = 0; i < state.ntargets; i++)
		if (!__atomic_load_n(&targets[i].matched, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

int ms_py_near_wanted(const char *name)
{
	if (ms_cfg.spec.is_default)
		return 0;
	size_t n = strlen(name);
	for (int i = 0; i < state.ntargets; i++)
		if (!__atomic_load_n(&targets[i].matched, __ATOMIC_RELAXED) &&
		    near_enough(name, n, targets[i].last, strlen(targets[i].last)) >= 0)
			return 1;
	return 0;
}

void ms_py_near(const char *qual, int user)
{
	size_t n = strlen(qual);
	for (int i = 0; i < state.ntargets; i++) {
		struct target *t = &targets[i];
		if (__atomic_load_n(&t->matched, __ATOMIC_RELAXED))
			continue;
		int d = near_enough(qual, n, t->qual, strlen(t->qual));
		int score = d < 0 ? 0 : 2 * d - (user != 0) + 2;
		if (score <= 0 || (t->near_score && t->near_score <= score))
			continue;
		/* "module:" as the target has it only where the name surely is there: the program's own code
		 * for __main__ (the code searched has no module name yet); else the name alone */
		int main_pin = t->module && t->module_len == 8 && !memcmp(t->module, "__main__", 8);
		size_t m = main_pin && user ? t->module_len + 1 : 0;
		if (m >= sizeof t->near)
			continue;
		memcpy(t->near, t->text, m);
		ms_strlcpy(t->near + m, qual, sizeof t->near - m);
		t->near_score = score;
	}
}

/* The distinct functions of target I that opened its stage at least once. */
static int functions_run(int i)
{
	int n = 0;
	for (int k = 0; k < state.npairs; k++)
		n += pairs[k].target == i && (__atomic_load_n(&funcs[pairs[k].func].calls, __ATOMIC_RELAXED) > 0 ||
					      __atomic_load_n(&funcs[pairs[k].func].passed, __ATOMIC_RELAXED) > 0);
	return n;
}

void ms_py_each_function(const char *stage, ms_py_function_fn fn, void *ctx)
{
	int published = __atomic_load_n(&state.npairs, __ATOMIC_ACQUIRE); /* also from a signal handler */
	for (int i = 0; i < state.ntargets; i++) {
		if (strcmp(ms_cfg.spec.stage[targets[i].stage].name, stage) != 0)
			continue;
		for (int k = 0; k < published; k++) {
			const int f = pairs[k].func;
			uint64_t calls = __atomic_load_n(&funcs[f].calls, __ATOMIC_RELAXED);
			uint64_t passed = __atomic_load_n(&funcs[f].passed, __ATOMIC_RELAXED);
			if (pairs[k].target == i && (calls > 0 || passed > 0))
				fn(ctx, targets[i].text, funcs[f].name, calls, passed, funcs[f].user);
		}
	}
}

/* ---- targets that matched nothing -------------------------------------------------------- */

/* A plain identifier the native detector found here: its calls are that detector's to report. */
static int native_name(const struct target *t)
{
	return !t->module && !strchr(t->qual, '.') && ms_spec_native(t->stage, t->text);
}

/* Whether targets that matched nothing are named at exit: not in a program without Python, nor for
 * the Trainer's default names (absent in most scripts). */
static int names_unmatched(void)
{
	return __atomic_load_n(&state.live, __ATOMIC_ACQUIRE) && !ms_cfg.spec.is_default;
}

void ms_py_targets_stopped(void)
{
	__atomic_store_n(&state.stopped, 1, __ATOMIC_RELAXED);
}

int ms_py_targets_detection_stopped(void)
{
	return __atomic_load_n(&state.stopped, __ATOMIC_RELAXED);
}

void ms_py_targets_live(int on)
{
	__atomic_store_n(&state.live, on, __ATOMIC_RELEASE);
}

void ms_py_each_unmatched(void (*fn)(void *ctx, const char *stage, const char *target, const char *near), void *ctx)
{
	if (!names_unmatched())
		return;
	for (int i = 0; i < state.ntargets; i++)
		if (!__atomic_load_n(&targets[i].matched, __ATOMIC_RELAXED) && !native_name(&targets[i]))
			fn(ctx, ms_cfg.spec.stage[targets[i].stage].name, targets[i].text,
			   targets[i].near_score ? targets[i].near : NULL);
}

struct unmatched_line {
	char text[1024];
	size_t len;
	int n;
};

static void add_to_line(void *ctx, const char *stage, const char *target, const char *near)
{
	struct unmatched_line *l = ctx;
	if (l->len < sizeof l->text)
		l->len += ms_format(l->text + l->len, sizeof l->text - l->len, "%s%s=%s%s%s%s", l->n ? ", " : "", stage,
				    target, near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
	l->n++;
}

/* Messages about targets are given once, by the first Python process of the run: the one the user
 * started, or the first one a shell script or another program started.  It tells the Python
 * processes it starts (spawned workers, multiprocessing's resource tracker and forkserver, ranks
 * under a Python launcher) through its lineage record (core/lineage.h); they record theirs in their
 * files only, and a forked child (another pid) would only repeat its parent.  0: no Python target
 * named (the Trainer defaults): the process the user started speaks. */

/* What the other processes of the run matched (a target may match only in workers: regrtest's
 * workers run the tests, its main process does not): a file of one byte per target,
 * /dev/shm/memshim-py-<uid>-<speaker pid>, made by the speaker (and closed at once: the program
 * sees no new descriptor), written by every other Python process at the first match of each
 * target, read and removed by the speaker at exit.  Only names it made itself are trusted
 * (O_EXCL, O_NOFOLLOW, 0600).  Without /dev/shm, each process knows only its own matches. */

static void shared_name(pid_t speaker)
{
	ms_format(state.shared, sizeof state.shared, "/dev/shm/memshim-py-%u-%d", (unsigned)ms_sys_getuid(),
		  (int)speaker);
}

static void make_shared(void)
{
	shared_name(ms_proc.pid);
	for (int tries = 0; tries < 2 && !state.shared_made; tries++) {
		int fd = ms_sys_open(state.shared, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			ms_sys_close(fd);
			state.shared_made = 1;
		} else if (errno == EEXIST) {
			ms_sys_unlink(state.shared); /* left by a killed run whose pid this one took */
		} else {
			break;
		}
	}
}

static void tell_speaker(int target)
{
	if (!state.speaker_pid || ms_proc.pid == state.speaker_pid || !state.shared[0])
		return;
	int saved = errno;
	int fd = ms_sys_open(state.shared, O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd >= 0) {
		char one = 1;
		if (ms_sys_pwrite(fd, &one, 1, target) != 1)
			ms_debug("python targets: could not tell the run's first process about a match");
		ms_sys_close(fd);
	}
	errno = saved;
}

/* Which targets another process of the run matched (ELSEWHERE[i] 1); the file is removed. */
static void read_shared(unsigned char *elsewhere, int n)
{
	if (!state.shared_made || ms_proc.pid != state.speaker_pid)
		return; /* not made, or a forked copy of the speaker */
	int fd = ms_sys_open(state.shared, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd >= 0) {
		if (ms_sys_pread(fd, elsewhere, (size_t)n, 0) < 0)
			ms_debug("python targets: could not read what the run's other processes matched");
		ms_sys_close(fd);
	}
	ms_sys_unlink(state.shared);
	state.shared_made = 0;
}

void ms_py_targets_decide_speaker(void)
{
	if (ms_cfg.spec.is_default)
		return;
	pid_t pid = ms_process_py_root();
	if (pid > 0 && pid != ms_proc.pid) {
		state.speaker_pid = pid;
		shared_name(state.speaker_pid);
		return;
	}
	ms_process_claim_py_root();
	state.speaker_pid = ms_proc.pid;
	make_shared();
}

int ms_py_speaks_for_targets(void)
{
	if (!ms_is_tracked_process())
		return 0;
	return state.speaker_pid ? ms_proc.pid == state.speaker_pid : !ms_proc.is_child;
}

#define AMBIGUOUS_LISTED 5 /* functions named per target; a bare "<module>" matches every module */

struct ambiguous {
	const char *stage, *example, *own; /* the pin suggested: the program's own function first */
	int won, listed, more, more_passed;
};

/* Appends target I's functions of one kind (PASSED_ONLY: those whose calls were all passed over)
 * to L, at most AMBIGUOUS_LISTED in all, the rest counted in A. */
static void list_functions(struct unmatched_line *l, int i, int passed_only, struct ambiguous *a)
{
	for (int k = 0; k < state.npairs; k++) {
		const int f = pairs[k].func;
		uint64_t calls = __atomic_load_n(&funcs[f].calls, __ATOMIC_RELAXED);
		uint64_t passed = __atomic_load_n(&funcs[f].passed, __ATOMIC_RELAXED);
		if (pairs[k].target != i || (calls == 0 && passed == 0) || (calls == 0) != passed_only)
			continue;
		if (!a->example || (funcs[f].user && !a->own)) {
			a->stage = ms_cfg.spec.stage[targets[i].stage].name;
			a->example = funcs[f].name;
			a->own = funcs[f].user ? funcs[f].name : a->own;
		}
		a->won |= passed != 0;
		if (a->listed == AMBIGUOUS_LISTED) {
			a->more++;
			a->more_passed += calls == 0;
			continue;
		}
		if (l->len < sizeof l->text)
			l->len += ms_format(l->text + l->len, sizeof l->text - l->len, "%s%s (%llu call%s",
					    a->listed++ ? ", " : "", funcs[f].name, (unsigned long long)calls,
					    calls == 1 ? "" : "s");
		if (passed && l->len < sizeof l->text)
			l->len += ms_format(l->text + l->len, sizeof l->text - l->len, ", %llu passed over",
					    (unsigned long long)passed);
		if (l->len < sizeof l->text)
			l->len += ms_format(l->text + l->len, sizeof l->text - l->len, ")");
	}
}

/* One line naming each target that matched functions of more than one module:qualname, with
 * the calls in which each opened the stage, and how to pin one (eval=evaluate also ran sympy's
 * evaluate, which torch imports); the functions that ran first, five at most. */
static void report_ambiguous(struct unmatched_line *l)
{
	struct ambiguous a = { 0 };
	l->len = 0;
	l->n = 0;
	for (int i = 0; i < state.ntargets; i++) {
		if (functions_run(i) < 2)
			continue;
		const char *name = ms_cfg.spec.stage[targets[i].stage].name;
		if (l->len < sizeof l->text)
			l->len += ms_format(l->text + l->len, sizeof l->text - l->len, "%s%s=%s ran ",
					    l->n++ ? "; " : "", name, targets[i].text);
		a.listed = a.more = a.more_passed = 0;
		list_functions(l, i, 0, &a);
		list_functions(l, i, 1, &a);
		if (a.more && l->len < sizeof l->text)
			l->len += ms_format(l->text + l->len, sizeof l->text - l->len, " and %d more (%d passed over)",
					    a.more, a.more_passed);
	}
	if (l->n)
		ms_warn("Python stage target%s matched more than one function: %s; %sname the one meant as "
			"module:qualname (e.g. %s=%s)",
			l->n > 1 ? "s" : "", l->text,
			a.won ? "the program's own function won: an installed package's opens no stage once the "
				"program's is known; "
			      : "",
			a.stage, a.example);
}

/* memshim run prints the dump of the run's files next, with the same line for the whole run. */
static int dump_follows(void)
{
	const char *v = ms_setting_text("MEMSHIM_RUN_DUMP");
	return v && !strcmp(v, "1");
}

/* At exit: one line naming every Python target that matched no function that ran in any Python
 * process of the run (a typo in MEMSHIM_STAGES is otherwise silent). */
void ms_py_report(void)
{
	static struct unmatched_line line MS_LARGE;
	if (!ms_py_speaks_for_targets() || (!names_unmatched() && state.npairs < 2)) {
		if (state.shared_made && ms_proc.pid == state.speaker_pid)
			ms_sys_unlink(state.shared);
		return; /* its page stays untouched */
	}
	ms_tls_guard++;
	line.len = 0;
	line.n = 0;
	static unsigned char elsewhere[MAX_TARGETS] MS_LARGE;
	read_shared(elsewhere, state.ntargets);
	for (int i = 0; names_unmatched() && i < state.ntargets; i++)
		if (!__atomic_load_n(&targets[i].matched, __ATOMIC_RELAXED) && !elsewhere[i] &&
		    !native_name(&targets[i]))
			add_to_line(&line, ms_cfg.spec.stage[targets[i].stage].name, targets[i].text,
				    targets[i].near_score ? targets[i].near : NULL);
	if (line.n && !dump_follows() && __atomic_load_n(&state.stopped, __ATOMIC_RELAXED))
		ms_warn("Python stage target%s not matched before Python stage detection stopped (the deep "
			"recursion above): %s",
			line.n > 1 ? "s" : "", line.text);
	else if (line.n && !dump_follows())
		ms_warn("Python stage target%s that matched no function that ran: %s", line.n > 1 ? "s" : "",
			line.text);
	report_ambiguous(&line);
	ms_tls_guard--;
}

/* ---- entering and leaving stages ------------------------------------------------------- */

static int stage_id(int i)
{
	int v = __atomic_load_n(&state.stage_ids[i], __ATOMIC_RELAXED);
	if (v == 0) {
		int id = ms_stage_id(ms_cfg.spec.stage[i].name);
		if (id == MS_STAGE_BUSY) /* a signal handler on a thread inside the engine: next time */
			return -1;
		v = id < 0 ? -1 : id + 1; /* the table is full: remember the failure */
		__atomic_store_n(&state.stage_ids[i], v, __ATOMIC_RELAXED);
	}
	return v > 0 ? v - 1 : -1;
}

/* The funcs[] entry of classification V, or -1. */
static inline int func_of(uintptr_t v)
{
	unsigned func = (unsigned)(v >> MS_PY_FUNC_SHIFT) & 0xffff;
	return func > 0 && func <= MAX_FUNCS ? (int)func - 1 : -1;
}

uint32_t ms_py_enter(uintptr_t v)
{
	uint32_t mask = ms_py_mask(v);
	int f = func_of(v);
	if (f >= 0 && MS_UNLIKELY(funcs[f].refused & mask) &&
	    __atomic_load_n(&funcs[f].inflight, __ATOMIC_RELAXED) == 0) {
		if (ms_active) /* the program's own function of the name wins: this call opens none of them */
			__atomic_add_fetch(&funcs[f].passed, 1, __ATOMIC_RELAXED);
		mask &= ~funcs[f].refused;
	}
	if (MS_UNLIKELY(!ms_active) || !mask)
		return mask; /* e.g. a forked child that is not followed; leaves stay paired by outstanding[] */
	double now = ms_elapsed();
	int opened = 0;
	for (uint32_t m = mask, i = 0; m; i++, m >>= 1) {
		if (!(m & 1))
			continue;
		int id = stage_id((int)i);
		opened |= id >= 0 && ms_stage_depth(id) == 0;
		if (id >= 0 && ms_stage_enter(id, now) == 0)
			__atomic_add_fetch(&state.outstanding[i], 1, __ATOMIC_RELAXED);
	}
	if (f >= 0) {
		if (!funcs[f].user)
			__atomic_add_fetch(&funcs[f].inflight, 1, __ATOMIC_RELAXED);
		if (opened)
			__atomic_add_fetch(&funcs[f].calls, 1, __ATOMIC_RELAXED);
	}
	return mask;
}

/* The stages a call of classification V leaves at its function's exit; one of its function's
 * calls in flight fewer (a call passed over left nothing open). */
static uint32_t leaving(uintptr_t v)
{
	uint32_t mask = ms_py_mask(v);
	int f = func_of(v);
	if (f < 0 || funcs[f].user)
		return mask;
	int n = __atomic_load_n(&funcs[f].inflight, __ATOMIC_RELAXED);
	while (n > 0 &&
	       !__atomic_compare_exchange_n(&funcs[f].inflight, &n, n - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return n > 0 ? mask : mask & ~funcs[f].refused; /* a call passed over left nothing open */
}

static void leave_ended(uint32_t mask, int how, const char *exception)
{
	double now = ms_elapsed();
	for (int i = 31; i >= 0; i--) {
		if (!(mask & (1u << i)))
			continue;
		int n = __atomic_load_n(&state.outstanding[i], __ATOMIC_RELAXED);
		while (n > 0 && !__atomic_compare_exchange_n(&state.outstanding[i], &n, n - 1, 0, __ATOMIC_RELAXED,
							     __ATOMIC_RELAXED))
			;
		if (n > 0)
			ms_stage_leave_ended(stage_id(i), now, how, exception, NULL, NULL);
	}
}

int ms_py_all_open(void)
{
	uint32_t need = 0;
	if (__atomic_load_n(&state.refused_any, __ATOMIC_RELAXED))
		return 0;
	for (int i = 0; i < state.ntargets; i++) {
		if (!__atomic_load_n(&targets[i].matched, __ATOMIC_RELAXED))
			return 0;
		need |= 1u << targets[i].stage;
	}
	for (int i = 0; need; i++, need >>= 1) {
		int id = need & 1 ? stage_id(i) : 0;
		/* the engine's depth too: the explicit API may have ended a stage a target opened */
		if ((need & 1) && (__atomic_load_n(&state.outstanding[i], __ATOMIC_RELAXED) <= 0 || id < 0 ||
				   ms_stage_depth(id) <= 0))
			return 0;
	}
	return state.ntargets > 0;
}

void ms_py_exit(uintptr_t v, enum ms_py_exit how, ms_pyobj *type)
{
	uint32_t mask = leaving(v);
	if (!mask)
		return;
	const char *name = how == MS_PY_RAISED ? ms_py_type_name(type) : NULL;
	if (name && !strcmp(name, "GeneratorExit"))
		leave_ended(mask, MS_END_RETURNED, NULL); /* ms_sys_close() of a suspended generator: its normal end */
	else
		leave_ended(mask, how == MS_PY_RAISED ? MS_END_RAISED : MS_END_RETURNED, name);
}
