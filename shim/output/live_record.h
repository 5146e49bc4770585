/* The layout of a live record (output/live.c writes it, memshim-format and memshim top read it):
 * one fixed-size file per tracked process, mapped MAP_SHARED and updated in place, so the page cache
 * keeps the last numbers when the process is killed.  Only plain C types of fixed size: readers are
 * other programs of the same build on the same host.  A reader copies the record between two reads
 * of SEQ and retries while SEQ is odd (an update in progress) or changed; SEQ stays odd when the
 * process died inside an update (a few hundred nanoseconds: the copy is then taken as it is). */
#ifndef MS_LIVE_RECORD_H
#define MS_LIVE_RECORD_H

#include <stdint.h>

#define MS_LIVE_MAGIC UINT64_C(0x314556494c4d534d) /* "MSMLIVE1" in the file's first bytes */
#define MS_LIVE_VERSION 5 /* 2: the shared component; 3: the memory cgroup; 4: its boot id, dev, ino; 5: leaves_raw */
#define MS_LIVE_SUFFIX ".live"
#define MS_LIVE_STAGES 64 /* MS_MAX_STAGES */
#define MS_LIVE_COMPS 26  /* MS_NCOMP: the components of core/counters.h, in its order */
#define MS_LIVE_NAME 64   /* MS_STAGE_NAME_MAX */
#define MS_LIVE_ARGV 2048
#define MS_LIVE_PATH 1024

/* Component indexes (core/counters.h's enum ms_comp). */
enum {
	MS_LIVE_CPU,
	MS_LIVE_MALLOC,
	MS_LIVE_MMAP,
	MS_LIVE_GPU,
	MS_LIVE_MANAGED,
	MS_LIVE_PINNED,
	MS_LIVE_RESERVE,
	MS_LIVE_RSS,
	MS_LIVE_SHARED,
	MS_LIVE_CGROUP,
	MS_LIVE_DEV0,
	MS_LIVE_DEVICES = MS_LIVE_COMPS - MS_LIVE_DEV0
};

enum { MS_LIVE_RAW_GO = 1, MS_LIVE_RAW_SECCOMP = 2, MS_LIVE_RAW_SECCOMP_STRICT = 3 }; /* leaves_raw */

enum ms_live_state {
	MS_LIVE_RUNNING = 1,  /* the process runs, or was killed (readers look for the pid) */
	MS_LIVE_ENDED = 2,    /* it wrote its final metrics file (the record is being removed) */
	MS_LIVE_SIGNALED = 3, /* a fatal signal with the default action ended it (SIGNAL) */
};

/* One call of a stage: the running one while open (numbers so far), else the last finished. */
struct ms_live_span {
	int64_t begin[MS_LIVE_COMPS];
	int64_t end[MS_LIVE_COMPS];  /* while open: live at the last update */
	int64_t peak[MS_LIVE_COMPS]; /* while open: within one timeline step of the true peak */
	double start, runtime;       /* seconds since the process started; runtime to the last update */
	int64_t gpu_failed_bytes;
	uint32_t gpu_failed_allocs;
	uint32_t closed_at_exit;
};

struct ms_live_stage {
	char name[MS_LIVE_NAME];
	uint64_t calls;      /* finished calls */
	int32_t depth;       /* > 0: open */
	int32_t first_order; /* order of its first begin (-1 before) */
	int32_t implicit;    /* the implicit init stage */
	int32_t pad;
	int64_t max_cpu_needed, max_gpu_needed;
	uint64_t max_cpu_call, max_gpu_call;
	struct ms_live_span cur;  /* the call in progress (depth > 0) */
	struct ms_live_span last; /* the last finished call (calls > 0) */
};

struct ms_live_record {
	uint64_t magic;
	uint32_t version;
	uint32_t size;  /* sizeof (struct ms_live_record) of the writer */
	uint32_t seq;   /* odd while an update is in progress */
	uint32_t state; /* enum ms_live_state */
	uint32_t uid;   /* the writer's real uid */
	int32_t pid, ppid, root_pid;
	int32_t is_child, forked;
	int32_t rank, local_rank, world_size, node_rank; /* -1 when no launcher gave them */
	int32_t signal;                                  /* MS_LIVE_SIGNALED: the signal */
	char rank_source[16];
	double start_unix;  /* when the process (or forked child) started */
	double elapsed;     /* seconds since then at the last update */
	double update_unix; /* the last update (start_unix + elapsed) */
	uint64_t updates;
	uint32_t gpu_used, devices_used; /* a GPU counter moved; bit d: device d had memory */
	int32_t timeline;                /* MEMSHIM_TIMELINE: updates also when memory moved */
	int32_t nstages, nopen;
	int32_t open[MS_LIVE_STAGES]; /* ids of the open stages, in begin order (outermost first) */
	int32_t before_init_set;
	/* gone while running is its usual end: it leaves by its own exit system call (Go, 1), or
	 * entered a seccomp sandbox, after which memshim writes no file (2 filter, 3 strict mode) */
	int32_t leaves_raw;
	int64_t live[MS_LIVE_COMPS];
	int64_t peak[MS_LIVE_COMPS];      /* process peaks so far */
	int64_t inherited[MS_LIVE_COMPS]; /* a forked child: live at the fork (its parent's memory) */
	int64_t before_init[MS_LIVE_COMPS];
	int64_t rss_peak; /* the kernel's high-water RSS, read at boundaries and points at most every 0.1 s */
	uint64_t mmap_untracked;
	uint64_t shared_mappings; /* shared memory mappings made or inherited (0: no shared keys) */
	/* the memory cgroup as last read (cgroup_version 0: none read; limits MS_CGROUP_NONE: none) */
	int32_t cgroup_version, cgroup_per_reader;
	int64_t cgroup_usage, cgroup_peak, cgroup_limit, cgroup_oom_kills, cgroup_oom_kills_first;
	char cgroup_dir[512];            /* MS_CGROUP_PATH */
	char cgroup_boot_id[40];         /* MS_BOOT_ID_LEN: the boot the group was found on ("": unknown) */
	uint64_t cgroup_dev, cgroup_ino; /* the group's directory (0: unknown) */
	uint32_t argv_len, argv_truncated;
	char argv[MS_LIVE_ARGV];   /* NUL-separated, as /proc/PID/cmdline */
	char output[MS_LIVE_PATH]; /* the metrics file this process writes at exit */
	struct ms_live_stage stage[MS_LIVE_STAGES];
};

#endif
