/* The metrics file's document (doc/metrics-format.md): pure JSON layout of a state the caller
 * gathered (output/report.c reads the engine, counters, CUDA and Python layers into it).  Nothing
 * here reads a global, a clock or a lock, so unit tests feed it a state and compare the JSON. */
#ifndef MS_DOCUMENT_H
#define MS_DOCUMENT_H

#include <stddef.h>
#include <stdint.h>
#include "core/counters.h"
#include "core/json.h"
#include "core/process.h"
#include "core/stages.h"
#include "core/timeline.h"
#include "cuda/cuda.h"
#include "cuda/footprint.h"
#include "intercept/cgroup.h"
#include "intercept/hooks.h"
#include "output/labels.h"

/* Called once per item by the iterators below. */
typedef void (*ms_doc_target_fn)(void *ctx, const char *stage, const char *target, const char *near);
typedef void (*ms_doc_function_fn)(void *ctx, const char *target, const char *function, uint64_t calls, uint64_t passed,
				   int user);

/* A native target: its text, stage and how it was bound ("plt", "stack", "none"). */
/* OBJECT: for BOUND "runtime", the C runtime's object that has the function, else NULL. */
typedef void (*ms_doc_native_fn)(void *ctx, const char *target, const char *stage, const char *bound,
				 const char *object);

struct ms_doc {
	const char *reason; /* exit, _exit, snapshot, signal, live */
	int sig;            /* for signal, else 0 */
	int complete;
	double end_unix; /* the time the document stands for (start_time is in PROC) */
	const struct ms_process *proc;
	const char *argv; /* the arguments, each ending in NUL, ARGV_LEN bytes in all */
	size_t argv_len;
	int argv_truncated;
	const char *comm;               /* the name the program gave itself (PR_SET_NAME), or NULL */
	const struct ms_stages *stages; /* the engine's copy, open stages' numbers so far */
	int gpu;                        /* GPU keys are written */
	uint32_t devices;               /* bit d: device d was used */
	int64_t peaks[MS_NCOMP];        /* the process peaks; a forked child's CPU ones above INHERITED */
	int64_t live[MS_NCOMP];         /* live now, likewise */
	int64_t inherited[MS_NCOMP];    /* a forked child: its parent's memory at the fork, else zeros */
	int64_t rss_peak;               /* the kernel's high-water RSS */
	const struct ms_cgroup *cgroup; /* the memory cgroup as last read; NULL: none */
	uint64_t mmap_untracked;
	/* shared memory mappings made or inherited (0: no shared keys but the components' zeros) */
	uint64_t shared_mappings;
	const struct ms_shared_segment *segments; /* NSEGMENTS of them */
	int nsegments;
	uint64_t segments_dropped;
	const struct ms_pool_sample *pools; /* NPOOLS of them */
	int npools;
	uint64_t gpu_untracked_allocs;
	int64_t gpu_untracked_bytes;
	/* the GPU's footprint as read, or NULL (no keys) */
	const struct ms_gpu_footprint *footprint;
	const struct ms_timeline *timeline;      /* NULL: MEMSHIM_TIMELINE off */
	const struct ms_labelled_call *labelled; /* NLABELLED entries, those whose ready is
						  * LABELLED_GENERATION written ("labelled_calls") */
	uint32_t nlabelled, labelled_generation;
	uint64_t labelled_dropped;
	/* What other layers add; each may be NULL (then the keys are empty or absent). */
	void (*each_unmatched)(ms_doc_target_fn fn, void *ctx);                     /* python/ */
	void (*each_function)(const char *stage, ms_doc_function_fn fn, void *ctx); /* python/ */
	void (*each_native)(ms_doc_native_fn fn, void *ctx);                        /* native/ */
	unsigned python_hook_lost;    /* python/: times another tool held the frame hook (0: key absent) */
	int python_detection_stopped; /* python/: a deep recursion took the frame hook out (0: key absent) */
	int brief;                    /* the numbers alone: no call history (memshim_metrics_json_brief) */
	void (*stage_sites)(struct ms_json *w, int id, const struct ms_span *sp); /* output/peak_sites.c */
	void (*sites_summary)(struct ms_json *w);
	void (*oom_sites)(struct ms_json *w, int index); /* output/peak_sites.c: a gpu_oom record's */
};

/* Stage ids of ST in the order they first began into IDS; returns how many. */
int ms_document_order(const struct ms_stages *st, int ids[MS_MAX_STAGES]);

/* The whole document for DOC into W (initialised by the caller for a file or a buffer). */
void ms_document_write(struct ms_json *w, const struct ms_doc *doc);

#endif
