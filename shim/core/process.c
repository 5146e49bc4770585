/* Identity and clock of the tracked process (see process.h), and the per-thread guard.  What a
 * tracked process hands the processes it execs (the run's root, its file, the rank it held) goes
 * through lineage records (core/lineage.c), never the environment: the program sees none of it. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core/sys.h"
#include "core/config.h"
#include "core/lineage.h"
#include "core/ms.h"
#include "core/process.h"

struct ms_process ms_proc;
/* What this process hands on: the record it found (FOUND), then its own facts (CHANGED), written
 * at the end of start (ms_process_publish) and at once after it (OPEN). */
static struct ms_lineage lineage MS_LARGE;
static int looked, found, changed, open_now, publish_failed;
int ms_active;
int ms_counting = 1;
__thread int ms_tls_guard MS_TLS;

double ms_now(void)
{
	if (MS_UNLIKELY(__atomic_load_n(&ms_sandbox.mode, __ATOMIC_RELAXED) == MS_SANDBOX_STRICT))
		return ms_sandbox.clock_stopped; /* strict mode faults on the TSC the clock reads */
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
	if (ms_sandboxed()) /* seccomp's strict mode kills on getpid: a sandbox makes no vfork child */
		return ms_active;
	return ms_active && (pid_t)syscall(SYS_getpid) == ms_proc.pid;
}

/* getrusage's high-water RSS in bytes (-1: unread). */
static int64_t ru_maxrss_bytes(void)
{
	struct rusage ru;
	return ms_sys_getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_maxrss * 1024 : -1;
}

/* The high-water when tracking began: what the kernel carried across exec (the image before it, or
 * the parent's resident pages at the fork before it), since this image's own was ~1 MB then. */
static int64_t maxrss_at_start;

void ms_process_start(void)
{
	ms_proc.pid = ms_sys_getpid();
	ms_proc.ppid = ms_sys_getppid();
	ms_proc.main_thread = (uintptr_t)pthread_self(); /* the constructor's (or the forking) thread */
	ms_proc.start_monotonic = ms_now();
	ms_proc.start_unix = unix_now();
	maxrss_at_start = ru_maxrss_bytes();
}

/* The number of kB after "VmHWM:" in TEXT (N bytes, 8 NULs after them), -1 when absent: eight
 * bytes a step for an 'H', rare in the file (no C library call: each would be bound at exit). */
static int64_t vm_hwm_kb(const char *text, size_t n)
{
	const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
	for (size_t i = 0; i < n; i += 8) {
		uint64_t w;
		memcpy(&w, text + i, 8);
		w ^= ones * 'H';
		if (!((w - ones) & ~w & highs))
			continue;
		for (size_t k = i < 3 ? 3 : i; k < i + 8 && k + 4 < n; k++) {
			if (text[k - 3] != '\n' || memcmp(text + k - 2, "VmHWM:", 6))
				continue; /* a line's start: not a name set to "VmHWM:" */
			const char *p = text + k + 4;
			int64_t kb = 0;
			while (*p == ' ' || *p == '\t')
				p++;
			for (; *p >= '0' && *p <= '9'; p++)
				kb = kb * 10 + (*p - '0');
			return kb;
		}
	}
	return -1;
}

/* VmHWM of /proc/self/status in bytes (-1: unread): this image's own high-water. */
static int64_t status_vm_hwm(void)
{
	char buf[4096 + 8];
	int fd = ms_sys_open("/proc/self/status", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	ssize_t n = ms_sys_read(fd, buf, 4096);
	ms_sys_close(fd);
	if (n <= 0)
		return -1;
	memset(buf + n, 0, 8);
	int64_t kb = vm_hwm_kb(buf, (size_t)n);
	return kb < 0 ? -1 : kb * 1024;
}

int64_t ms_process_rss_peak(void)
{
	if (ms_sandboxed())
		return -1; /* not read: the last value read stands */
	int64_t now = ru_maxrss_bytes();
	if (now > maxrss_at_start)
		return now; /* above what came with the image: its own */
	int saved = errno;  /* read at timeline points too, inside the program's calls */
	int64_t own = status_vm_hwm();
	errno = saved;
	return own >= 0 ? own : (now > 0 ? now : 0);
}

void ms_process_args(int argc, char *const *argv, char *const *envp)
{
	if (argc >= 0 && argc < (1 << 20) && argv && envp == argv + argc + 1 && !argv[argc])
		ms_proc.argv = argv;
}

size_t ms_process_cmdline(char *buf, size_t size, int *truncated)
{
	size_t len = 0;
	*truncated = 0;
	if (ms_proc.argv) {
		for (char *const *a = ms_proc.argv; *a; a++) {
			size_t n = strlen(*a) + 1;
			if (n > size - len) {
				memcpy(buf + len, *a, size - len);
				*truncated = 1;
				return size;
			}
			memcpy(buf + len, *a, n);
			len += n;
		}
		return len;
	}
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n;
	while (len < size && (n = ms_sys_read(fd, buf + len, size - len)) > 0)
		len += (size_t)n;
	char extra;
	*truncated = len == size && ms_sys_read(fd, &extra, 1) == 1;
	ms_sys_close(fd);
	return len;
}

/* MEMSHIM_CHILDREN_DIR: a child that writes the name it inherited (with ".<pid>", or as it expands
 * for it) writes it in that directory instead, so a notebook kernel's short children (ipykernel
 * runs `uname -p`) stay out of the notebook's folder.  Only formats: also runs in a fork's child. */
static void children_dir(void)
{
	char path[MS_PATH_MAX];
	if (!ms_cfg.children_dir[0])
		return;
	const char *slash = strrchr(ms_proc.output, '/');
	const char *base = slash ? slash + 1 : ms_proc.output;
	if (ms_format(path, sizeof path, "%s/%s", ms_cfg.children_dir, base) + 1 < sizeof path)
		ms_strlcpy(ms_proc.output, path, sizeof ms_proc.output);
}

void ms_process_forked(void)
{
	pid_t parent = ms_proc.pid;
	ms_process_start();
	ms_proc.ppid = parent;
	ms_proc.is_child = 1;
	ms_proc.forked = 1;
	ms_proc.own_output = 0;
	ms_proc.rank.own = 0; /* the parent's rank, inherited */
	children_dir();
}

int ms_process_lineage_found(void)
{
	if (!looked) {
		looked = 1;
		found = ms_lineage_find(&lineage);
	}
	return found;
}

void ms_process_publish(void)
{
	open_now = 1;
	if (!changed || publish_failed || ms_sandboxed())
		return;
	int e = ms_lineage_publish(&lineage);
	if (e) {
		publish_failed = 1;
		ms_warn("cannot write this process's lineage record in %s: %s (errno %d); the processes it "
			"execs cannot find their run and start runs of their own",
			ms_lineage_dir(), ms_errno_text(e), e);
	}
}

void ms_process_unpublish(void)
{
	if (!ms_sandboxed())
		ms_lineage_remove();
}

/* This process has facts of its own for the processes it execs. */
static void hand_on(void)
{
	changed = 1;
	if (open_now)
		ms_process_publish();
}

pid_t ms_process_py_root(void)
{
	return ms_process_lineage_found() ? lineage.py_root_pid : 0;
}

void ms_process_claim_py_root(void)
{
	lineage.py_root_pid = ms_proc.pid;
	hand_on();
}

/* One launcher's variables: the global rank, local rank and world size as it names them. */
struct rank_source {
	const char *source, *rank, *local_rank, *world_size;
};

/* In the order they are trusted when several are set: a launcher inside another sets its own
 * variables and inherits the outer one's (torchrun or Lightning in a Slurm task, mpirun in a Slurm
 * job).  MPI's in accelerate's order; PMI is MPICH's and Intel MPI's Hydra. */
static const struct rank_source rank_sources[] = {
	{ "torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE" },
	{ "pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE" },
	{ "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE" },
	{ "mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_SIZE" },
	{ "pmix", "PMIX_RANK", "MPI_LOCALRANKID", "PMI_SIZE" },
	{ "lightning", NULL, "LOCAL_RANK", "WORLD_SIZE" }, /* no global rank: lightning_rank */
	{ "slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS" },
};

static long env_num(ms_getenv_fn get, const char *name)
{
	return ms_decimal(get(name));
}

/* Lightning's ddp starts its processes with LOCAL_RANK, NODE_RANK (or GROUP_RANK) and WORLD_SIZE,
 * never RANK, and computes the global rank as node_rank * processes per node + local_rank
 * (lightning/fabric/strategies/ddp.py _set_world_ranks).  Processes per node are known on node 0
 * (they do not matter there) or from LOCAL_WORLD_SIZE; on a later node without it the rank stays
 * unknown. */
static void lightning_rank(struct ms_rank *r, ms_getenv_fn get)
{
	const char *node_var = get("NODE_RANK") ? "NODE_RANK" : get("GROUP_RANK") ? "GROUP_RANK" : NULL;
	long node = node_var ? env_num(get, node_var) : 0, per_node = env_num(get, "LOCAL_WORLD_SIZE");
	r->node_rank = node;
	if (node == 0)
		r->rank = r->local_rank;
	else if (node > 0 && per_node > 0)
		r->rank = node * per_node + r->local_rank;
}

void ms_rank_detect(struct ms_rank *r, ms_getenv_fn get)
{
	*r = (struct ms_rank){ .rank = -1, .local_rank = -1, .world_size = -1, .node_rank = -1, .restart = -1 };
	for (size_t i = 0; i < sizeof rank_sources / sizeof *rank_sources; i++) {
		const struct rank_source *s = &rank_sources[i];
		if (env_num(get, s->rank ? s->rank : s->local_rank) < 0)
			continue;
		r->source = s->source;
		r->local_rank = env_num(get, s->local_rank);
		r->world_size = env_num(get, s->world_size);
		if (!s->rank) {
			lightning_rank(r, get);
			return;
		}
		r->rank = env_num(get, s->rank);
		if (i == 0) {
			r->node_rank = env_num(get, "GROUP_RANK"); /* torchrun's node */
			r->restart = env_num(get, "TORCHELASTIC_RESTART_COUNT");
		} else if (!strcmp(s->source, "slurm"))
			r->node_rank = env_num(get, "SLURM_NODEID");
		return;
	}
}

/* "torchrun/1/0": a tracked process with a rank tells its children which one it held, so a child
 * that inherited the same variables (a DataLoader worker, a helper it runs) is not taken for a
 * rank of its own. */
static void rank_identify(void)
{
	char held[96];
	const struct ms_rank *r = &ms_proc.rank;
	ms_rank_detect(&ms_proc.rank, ms_setting_text);
	if (r->rank < 0)
		return;
	ms_format(held, sizeof held, "%s/%ld/%ld", r->source, r->rank, r->local_rank);
	const char *before = found && lineage.rank_held[0] ? lineage.rank_held : NULL;
	ms_proc.rank.own = !before || strcmp(before, held) != 0;
	if (ms_proc.rank.own) {
		ms_strlcpy(lineage.rank_held, held, sizeof lineage.rank_held);
		hand_on();
	}
}

/* Exec'd children find where to write here: the file, the MEMSHIM_OUTPUT value it came from, and
 * the pid that writes it as is (its children add ".<pid>"). */
void ms_process_export_output(void)
{
	const char *setting = ms_setting_text("MEMSHIM_OUTPUT");
	ms_strlcpy(lineage.output, ms_proc.output, sizeof lineage.output);
	ms_strlcpy(lineage.output_setting, setting ? setting : "", sizeof lineage.output_setting);
	lineage.output_pid = ms_proc.pid;
	hand_on();
}

/* A child that set MEMSHIM_OUTPUT to another value than the process that wrote the record saw
 * chose its own file. */
static int own_setting(void)
{
	const char *mine = ms_setting_text("MEMSHIM_OUTPUT");
	return found && mine && *mine && strcmp(lineage.output_setting, mine) != 0;
}

void ms_process_set_output(const char *path)
{
	ms_strlcpy(ms_proc.output, path, sizeof ms_proc.output);
}

void ms_process_identify(void)
{
	ms_process_set_output(ms_cfg.output);
	ms_process_lineage_found();
	rank_identify();
	long root_pid = found ? lineage.root_pid : -1;
	if (root_pid <= 0 || root_pid == ms_proc.pid) {
		ms_proc.root_pid = ms_proc.pid;
		lineage.root_pid = ms_proc.pid;
		if (root_pid > 0 && lineage.output[0] == '/' && !own_setting())
			ms_process_set_output(lineage.output); /* exec'd itself in place: its file stays */
		else
			ms_process_export_output();
		return;
	}
	ms_proc.root_pid = (pid_t)root_pid;
	ms_proc.is_child = 1;
	if (own_setting()) {
		ms_proc.own_output = 1;
		ms_process_export_output(); /* its own exec'd children derive their names from its file */
		return;
	}
	if (lineage.output[0] == '/')
		ms_process_set_output(lineage.output);
	/* the process that owns the file exec'd itself in place: it keeps writing the file as is */
	ms_proc.own_output = lineage.output_pid == ms_proc.pid;
	if (!ms_proc.own_output)
		children_dir();
}
