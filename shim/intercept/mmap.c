/* Anonymous private mappings: the "mmap" component.  Ranges are tracked so partial munmap and
 * mremap are exact; the tables live in memory mapped with raw syscalls, outside any counter.
 * A mapping a program maps accessible and uses at once (Python's arenas, an allocator's blocks) is
 * counted by its size.  A mapping it uses a little at a time is read instead, by its resident
 * pages: the "reserve" component, for mappings made with MAP_NORESERVE or of MS_RESERVE_MIN and more
 * at once (pyarrow's mimalloc arena, OpenBLAS's buffers), and for memory committed in pieces inside
 * a PROT_NONE reservation, by mprotect or by a fixed mapping over it (the JVM's, V8's and Go's
 * heaps, code caches and metaspace, which commit far more than they touch); PROT_NONE reservations
 * themselves count nothing.  Shared memory (MAP_SHARED of memfd, /dev/shm and other tmpfs files,
 * anonymous shared memory, SysV segments: shared.c says which) is read the same way, the "shared"
 * component, each segment named so that the processes that map it can be told apart.  Read
 * components are read before every boundary, timeline point and report, and before and after a
 * call that drops their pages (munmap, mremap, madvise, a fixed mapping over them), so their highs
 * are never missed.  Before the real functions are known the wrappers make the system calls
 * themselves: resolving from here could run inside a program allocator's lock. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/ranges.h"
#include "core/spin.h"
#include "intercept/cgroup.h"
#include "intercept/hooks.h"
#include "intercept/sample.h"
#include "intercept/shared.h"
#include "intercept/signal.h"

#define PAGE 4096UL
#define MAX_RANGES (1UL << 20)

static int grow(struct ms_ranges *r, size_t need);
static struct ms_ranges table = { .grow = grow };    /* accessible: counted */
static struct ms_ranges reserved = { .grow = grow }; /* PROT_NONE: not counted until committed */

/* A component read rather than counted: its ranges, each with the pages it held at its last read
 * (ms_range.pages; shared ranges' tags name their segment), and the bytes the component holds,
 * the sum of those pages after every full read. */
struct readpart {
	struct ms_ranges r;
	enum ms_comp comp;
	int64_t counted; /* under the lock */
	int shared;
};
static struct readpart sparse = { { .grow = grow }, MS_RESERVE, 0, 0 }; /* reservations */
static struct readpart shm = { { .grow = grow }, MS_SHARED, 0, 1 };     /* shared memory */
static struct readpart *const parts[] = { &sparse, &shm };
#define NPARTS 2

static struct ms_spin lock;
static __thread int lock_held MS_TLS; /* a signal handler mapping memory inside our lock passes through */
static uint64_t untracked;

uint64_t ms_mmap_untracked(void)
{
	return __atomic_load_n(&untracked, __ATOMIC_RELAXED);
}

static void table_lock(void)
{
	ms_spin_lock(&lock, &lock_held);
}

static void table_unlock(void)
{
	ms_spin_unlock(&lock, &lock_held);
}

/* fork_prepare took the lock, and the flag before (ms_spin_lock_for_fork) */
static __thread int took_for_fork MS_TLS, flag_before_fork MS_TLS;

void ms_mmap_fork_prepare(void)
{
	took_for_fork = ms_spin_lock_for_fork(&lock, &lock_held, &flag_before_fork);
}

void ms_mmap_fork_parent(void)
{
	ms_spin_unlock_after_fork(&lock, &lock_held, took_for_fork, flag_before_fork);
}

void ms_mmap_fork_child(int tracking)
{
	ms_spin_reset(&lock, &lock_held);
	ms_cgroup_fork_child();
	ms_cpu_fork_child();
}

static void *raw_mmap(size_t len)
{
	long p = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p < 0 && p > -4096 ? NULL : (void *)p;
}

static int grow(struct ms_ranges *r, size_t need)
{
	size_t cap = r->cap ? r->cap : 4096;
	while (cap < need)
		cap *= 2;
	if (cap > MAX_RANGES)
		return -1;
	void *v = r->v ? (void *)syscall(SYS_mremap, r->v, r->cap * sizeof *r->v, cap * sizeof *r->v, MREMAP_MAYMOVE)
		       : raw_mmap(cap * sizeof *r->v);
	if (!v || v == MAP_FAILED)
		return -1;
	r->v = v;
	r->cap = cap;
	return 0;
}

static uintptr_t page_up(size_t len)
{
	return (len + PAGE - 1) & ~(PAGE - 1);
}

static int anonymous_private(int flags)
{
	return (flags & MAP_ANONYMOUS) && !(flags & MAP_SHARED);
}

static int is_reservation(size_t len, int prot, int flags)
{
	return prot != PROT_NONE && ((flags & MAP_NORESERVE) || len >= MS_RESERVE_MIN);
}

static size_t nranges(const struct readpart *p)
{
	return __atomic_load_n(&p->r.n, __ATOMIC_RELAXED);
}

/* ---- resident pages ---------------------------------------------------------------------------- */

/* PAGEMAP_SCAN (Linux 6.7) on /proc/self/pagemap answers with the runs of present pages other than
 * the zero page (which RSS does not count either): a sparse 1 GiB arena reads in ~40 us here where
 * mincore's byte per page takes ~150 us.  Older kernels:
 * mincore for reservations, and for shared memory /proc/self/pagemap's entries themselves (mincore
 * would answer whether the object's pages are in memory at all, touched by this process or not).
 * Its ABI, for headers older than the kernel: */
struct ms_page_region {
	uint64_t start, end, categories;
};
struct ms_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define MS_PAGEMAP_SCAN _IOWR('f', 16, struct ms_pm_scan_arg)
#define MS_PAGE_IS_PRESENT (1 << 3)
#define MS_PAGE_IS_PFNZERO (1 << 5) /* the shared zero page a read of an untouched page maps: not memory used */
#define MS_PM_PRESENT (UINT64_C(1) << 63)

static struct ms_page_region regions[256] MS_LARGE; /* under the lock */
/* mincore's or pagemap's answer; likewise */
static unsigned char incore[16384] MS_LARGE __attribute__((aligned(8)));
static int pagemap_fd = -1; /* open only while the lock is held */
static int no_pagemap_scan;

static uint64_t scan_present(uintptr_t b, uintptr_t e, int *failed)
{
	uint64_t bytes = 0;
	while (b < e) {
		struct ms_pm_scan_arg arg = { .size = sizeof arg,
					      .start = b,
					      .end = e,
					      .vec = (uintptr_t)regions,
					      .vec_len = sizeof regions / sizeof *regions,
					      .category_inverted = MS_PAGE_IS_PFNZERO,
					      .category_mask = MS_PAGE_IS_PFNZERO,
					      .category_anyof_mask = MS_PAGE_IS_PRESENT,
					      .return_mask = MS_PAGE_IS_PRESENT };
		long n = syscall(SYS_ioctl, pagemap_fd, MS_PAGEMAP_SCAN, &arg);
		if (n < 0) {
			*failed = 1;
			return 0;
		}
		for (long i = 0; i < n; i++)
			bytes += regions[i].end - regions[i].start;
		if (arg.walk_end <= b)
			break;
		b = arg.walk_end;
	}
	return bytes;
}

static uint64_t count_incore(size_t pages)
{
	uint64_t n = 0, w;
	size_t i = 0;
	for (; i + 8 <= pages; i += 8) {
		__builtin_memcpy(&w, incore + i, 8);
		n += (uint64_t)__builtin_popcountll(w & 0x0101010101010101ULL);
	}
	for (; i < pages; i++)
		n += incore[i] & 1;
	return n;
}

/* Present pages of [b, e) in this process's page tables, from pagemap's entries (8 bytes a page). */
static uint64_t pagemap_present(uintptr_t b, uintptr_t e)
{
	uint64_t pages = 0, *entry = (uint64_t *)(void *)incore; /* lock held: never on a handler's stack */
	while (b < e && pagemap_fd >= 0) {
		size_t n = (e - b) / PAGE < sizeof incore / 8 ? (e - b) / PAGE : sizeof incore / 8;
		long got = syscall(SYS_pread64, pagemap_fd, entry, n * 8, (off_t)(b / PAGE * 8));
		if (got <= 0)
			break;
		for (long i = 0; i < got / 8; i++)
			pages += entry[i] >> 63;
		b += (size_t)got / 8 * PAGE;
	}
	return pages * PAGE;
}

/* Resident bytes of [b, e) (page-aligned, one mapping or several) in this process.  Lock held. */
static uint64_t resident_in(uintptr_t b, uintptr_t e, int shared)
{
	if (pagemap_fd >= 0 && !no_pagemap_scan) {
		int failed = 0;
		uint64_t bytes = scan_present(b, e, &failed);
		if (!failed)
			return bytes;
		no_pagemap_scan = 1;
	}
	if (shared)
		return pagemap_present(b, e);
	uint64_t pages = 0;
	while (b < e) {
		size_t n = (e - b) / PAGE < sizeof incore ? (e - b) / PAGE : sizeof incore;
		if (syscall(SYS_mincore, b, n * PAGE, incore) == 0)
			pages += count_incore(n);
		b += n * PAGE;
	}
	return pages * PAGE;
}

/* The pagemap file for the reads done under one hold of the lock (never kept open: the program
 * sees its own descriptors); nested opens share it. */
static int pagemap_opens;

static void pagemap_open(void)
{
	if (pagemap_opens++ == 0 && (!no_pagemap_scan || nranges(&shm)))
		pagemap_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
}

static void pagemap_close(void)
{
	if (--pagemap_opens == 0 && pagemap_fd >= 0) {
		syscall(SYS_close, pagemap_fd);
		pagemap_fd = -1;
	}
}

/* P's component moves by CHANGE bytes (its highs with it).  Lock held. */
static void part_add(struct readpart *p, int64_t change)
{
	if (!change)
		return;
	if (p->counted + change < 0)
		change = -p->counted;
	p->counted += change;
	ms_cpu_mmap_add(p->comp, change);
}

/* Reads range I of P again: its pages, its segment's and (returned) the change of P's bytes.
 * Lock held, pagemap open. */
static int64_t read_range(struct readpart *p, size_t i)
{
	struct ms_range *g = &p->r.v[i];
	uint32_t pages = (uint32_t)(resident_in(g->start, g->end, p->shared) / PAGE);
	int64_t change = ((int64_t)pages - g->pages) * (int64_t)PAGE;
	g->pages = pages;
	if (p->shared)
		ms_shared_resident_add(g->tag, change);
	return change;
}

/* Reads every range of P: the component becomes the sum of their pages.  Lock held. */
static void read_all(struct readpart *p)
{
	if (!p->r.n) { /* the last range went */
		part_add(p, -p->counted);
		return;
	}
	pagemap_open();
	int64_t sum = 0;
	if (p->shared)
		ms_shared_resident_clear();
	for (size_t i = 0; i < p->r.n; i++) {
		struct ms_range *g = &p->r.v[i];
		g->pages = (uint32_t)(resident_in(g->start, g->end, p->shared) / PAGE);
		sum += (int64_t)g->pages * (int64_t)PAGE;
		if (p->shared)
			ms_shared_resident_add(g->tag, (int64_t)g->pages * (int64_t)PAGE);
	}
	pagemap_close();
	part_add(p, sum - p->counted);
}

/* Reads the ranges of P in [lo, hi) again; returns the change of P's bytes.  Lock held. */
static int64_t read_between(struct readpart *p, uintptr_t lo, uintptr_t hi)
{
	int64_t change = 0;
	pagemap_open();
	for (size_t i = ms_ranges_find(&p->r, lo); i < p->r.n && p->r.v[i].start < hi; i++)
		change += read_range(p, i);
	pagemap_close();
	return change;
}

static __thread int refreshing MS_TLS;
static int rss_wanted; /* a stage boundary happened: /bin/true's exit reads no /proc */
#define READ_SHARE 0.03
#define READ_FLOOR 0.02 /* seconds: a short program (a node script) reads every time */

/* Reading may take READ_SHARE of the run (and its first READ_FLOOR) in CPU time of the threads
 * that read (a reader the scheduler set aside costs nothing), twice over: boundaries and points
 * read everything every time, unless a stage around a function called a million times makes them
 * too many; calls that drop pages read everything before they do, unless a runtime dropping pages
 * of hundreds of reservations (V8) makes that too much, and then only the ranges they drop. */
static double refresh_spent, drop_spent; /* CPU seconds spent reading */
static double cgroup_spent;              /* the memory cgroup's: a few us a read, never starved by those */

static double thread_cpu(void)
{
	struct timespec ts;
	return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 : 0;
}

static int within_budget(double spent)
{
	return spent < READ_FLOOR + READ_SHARE * (ms_now() - ms_proc.start_monotonic);
}

/* Adds the CPU time since START to *SPENT; returns the time now. */
static double charge(double *spent, double start)
{
	double now = thread_cpu();
	if (now > start)
		*spent += now - start;
	return now;
}

/* What a call that drops pages of [b, e) had read of each part before it: the ranges it touches
 * lie in [lo, hi), and held OLD bytes. */
struct drop {
	uintptr_t lo[NPARTS], hi[NPARTS];
	int64_t old[NPARTS];
	int any;
};

/* Before the kernel drops pages of [b, e): the parts read (every range while within the budget,
 * else those in [b, e) and all shared memory, few mappings), so the highs so far are counted.
 * Lock held. */
static void drop_begin(struct drop *d, uintptr_t b, uintptr_t e)
{
	*d = (struct drop){ .any = 0 };
	for (int k = 0; k < NPARTS; k++) {
		struct readpart *p = parts[k];
		size_t i = p->r.n ? ms_ranges_find(&p->r, b) : 0;
		if (i >= p->r.n || p->r.v[i].start >= e)
			continue;
		d->lo[k] = p->r.v[i].start;
		for (; i < p->r.n && p->r.v[i].start < e; i++)
			d->hi[k] = p->r.v[i].end;
		d->any = 1;
	}
	if (ms_sandboxed())
		d->any = 0; /* a sandbox may forbid the reads: the ranges keep the pages last read */
	if (!d->any)
		return;
	int saved = errno; /* before the program's call: what it reads of errno is that call's */
	double start = thread_cpu();
	int all = within_budget(drop_spent);
	pagemap_open();
	for (int k = 0; k < NPARTS; k++) {
		struct readpart *p = parts[k];
		if (all || (p->shared && d->hi[k]))
			read_all(p);
		else if (d->hi[k])
			part_add(p, read_between(p, d->lo[k], d->hi[k]));
		for (size_t i = ms_ranges_find(&p->r, d->lo[k]); d->hi[k] && i < p->r.n && p->r.v[i].start < d->hi[k];
		     i++)
			d->old[k] += (int64_t)p->r.v[i].pages * (int64_t)PAGE;
	}
	pagemap_close();
	charge(&drop_spent, start);
	errno = saved;
}

/* After the call (and the tables' change): what is left in [lo, hi) read again, the rest of the
 * old bytes gone.  Lock held. */
static void drop_end(const struct drop *d)
{
	if (!d->any)
		return;
	pagemap_open();
	for (int k = 0; k < NPARTS; k++) {
		struct readpart *p = parts[k];
		if (!d->hi[k])
			continue;
		if (p->shared) { /* pieces of a split keep their old pages: every range read again */
			read_all(p);
			continue;
		}
		int64_t now = 0;
		for (size_t i = ms_ranges_find(&p->r, d->lo[k]); i < p->r.n && p->r.v[i].start < d->hi[k]; i++) {
			struct ms_range *g = &p->r.v[i];
			g->pages = (uint32_t)(resident_in(g->start, g->end, 0) / PAGE);
			now += (int64_t)g->pages * (int64_t)PAGE;
		}
		part_add(p, now - d->old[k]);
	}
	pagemap_close();
}

/* A new read range [b, e) of P that may hold pages already (MAP_POPULATE, a move): read.  Lock held. */
static void read_new(struct readpart *p, uintptr_t b, uintptr_t e)
{
	if (!ms_sandboxed())
		part_add(p, read_between(p, b, e));
}

/* The kernel's resident set size, from /proc/self/statm's second field (raw calls: no stdio). */
static int64_t read_rss(void)
{
	char buf[128];
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
	syscall(SYS_close, fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = buf;
	while (*p && *p != ' ')
		p++;
	int64_t pages = 0;
	for (p++; *p >= '0' && *p <= '9'; p++)
		pages = pages * 10 + (*p - '0');
	return pages * (int64_t)PAGE;
}

/* A forked child: its page tables hold none of the shared memory its parent touched (the kernel
 * copies no page table entries of shared mappings), so what it inherited reads again before its
 * report starts from it.  Only this thread runs, holding the lock since fork_prepare. */
static void fork_read(void)
{
	ms_shared_fork_child();
	read_all(&shm);
}

/* The reservations' and shared memory's resident pages (READS: there are some) and the RSS. */
static void read_parts_and_rss(enum ms_refresh_reason why, int reads)
{
	if (reads) {
		table_lock();
		pagemap_open();
		for (int k = 0; k < NPARTS; k++)
			read_all(parts[k]);
		pagemap_close();
		table_unlock();
	}
	if (why == MS_REFRESH_BOUNDARY || why == MS_REFRESH_REPORT) /* a report's live, with no stage too */
		rss_wanted = 1;
	if (why != MS_REFRESH_POINT && rss_wanted) {
		int64_t rss = read_rss();
		if (rss >= 0)
			ms_counter_set(MS_RSS, rss);
	}
}

/* ms_refresh: the read components and the RSS read now, and the memory cgroup, each within its
 * own share of the CPU (a program with huge reservations still reads its group at boundaries). */
static void refresh(enum ms_refresh_reason why)
{
	if (why == MS_REFRESH_FORK) {
		if (lock_held && ms_counting && !ms_sandboxed())
			fork_read();
		return;
	}
	/* a boundary is read also from inside a hook (native stages open and close there) */
	if (refreshing || ms_sandboxed() || lock_held || (ms_tls_guard && why != MS_REFRESH_BOUNDARY) || !ms_counting)
		return;
	int reads = nranges(&sparse) || nranges(&shm);
	int cgroup = why != MS_REFRESH_REPORT || ms_cgroup_state(); /* a report: only a group read before */
	if (!reads && !cgroup && why != MS_REFRESH_BOUNDARY && why != MS_REFRESH_REPORT)
		return; /* nothing to read: no clock either (a report reads the RSS it states as live) */
	double start = thread_cpu();
	int report = why == MS_REFRESH_REPORT;
	int reading = report || within_budget(refresh_spent);
	cgroup = cgroup && (report || within_budget(cgroup_spent));
	if (!reading && !cgroup)
		return;
	refreshing = 1;
	int saved = errno;
	if (reading) {
		read_parts_and_rss(why, reads);
		start = charge(&refresh_spent, start);
	}
	if (cgroup) {
		ms_cgroup_read(why);
		charge(&cgroup_spent, start);
	}
	errno = saved;
	refreshing = 0;
}

void ms_mmap_init(void)
{
	__atomic_store_n(&ms_refresh_fn, refresh, __ATOMIC_RELAXED);
}

static void count_mmap(int64_t bytes)
{
	if (bytes) {
		ms_before_counting();
		ms_cpu_add(MS_MMAP, bytes);
	}
}

/* The shared ranges in [b, e) are about to go: their segments are mapped that much less.  Lock held. */
static void shared_unmapping(uintptr_t b, uintptr_t e)
{
	for (size_t i = ms_ranges_find(&shm.r, b); i < shm.r.n && shm.r.v[i].start < e; i++) {
		struct ms_range *g = &shm.r.v[i];
		uintptr_t s = g->start > b ? g->start : b, t = g->end < e ? g->end : e;
		ms_shared_mapped(g->tag, -(int64_t)(t - s));
	}
}

/* Removes tracked and reserved bytes in [addr, addr+len) from the tables and the counters (a read
 * range's pages leave with drop_end, or the next read).  Lock held. */
static void forget(uintptr_t addr, size_t len)
{
	uint64_t dropped = 0;
	uintptr_t e = addr + page_up(len);
	uint64_t bytes = ms_ranges_remove(&table, addr, e, &dropped);
	ms_ranges_remove(&reserved, addr, e, &dropped);
	ms_ranges_remove(&sparse.r, addr, e, &dropped);
	if (shm.r.n) {
		shared_unmapping(addr, e);
		ms_ranges_remove(&shm.r, addr, e, &dropped);
	}
	if (dropped)
		__atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
	count_mmap(-(int64_t)bytes);
}

/* Where a new mapping goes. */
enum kind { COUNTED, RESERVED, SPARSE, SHARED };

/* Records a new mapping of KIND (SHARED: of segment TAG).  Lock held. */
static void remember(uintptr_t addr, size_t len, enum kind kind, uint32_t tag)
{
	/* the kernel just handed out this range: anything still recorded there was unmapped unseen
	 * (by a signal handler that ran while this thread held the lock) */
	forget(addr, len);
	struct ms_ranges *into = kind == COUNTED    ? &table
				 : kind == RESERVED ? &reserved
				 : kind == SPARSE   ? &sparse.r
						    : &shm.r;
	if (ms_ranges_add_tagged(into, addr, addr + page_up(len), tag) < 0) {
		__atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
		return;
	}
	if (kind == COUNTED)
		count_mmap((int64_t)page_up(len));
	else if (kind == SHARED)
		ms_shared_mapped(tag, (int64_t)page_up(len));
}

/* The kind of an anonymous private mapping: PROT_NONE reserves; accessible, it is read by its
 * resident pages when it is a reservation or commits memory inside one (COMMIT: it lands on a
 * reserved or read range), else counted by its size. */
static enum kind private_kind(size_t len, int prot, int flags, int commit)
{
	if (prot == PROT_NONE)
		return RESERVED;
	return commit || is_reservation(len, prot, flags) ? SPARSE : COUNTED;
}

/* Memory the program commits inside a PROT_NONE reservation (or over pages read already) is read,
 * not counted by size: the JVM commits 4-6 MiB of heap, code cache and metaspace at a time and
 * touches a part.  Lock held. */
static int commits(uintptr_t b, uintptr_t e)
{
	return ms_ranges_overlap(&reserved, b, e) || (sparse.r.n && ms_ranges_overlap(&sparse.r, b, e));
}

static void *call_mmap(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len, int prot, int flags,
		       int fd, off_t off)
{
	if (real)
		return real(addr, len, prot, flags, fd, off);
	long p = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (p < 0 && p > -4096) {
		errno = (int)-p;
		return MAP_FAILED;
	}
	return (void *)p;
}

static int passes_through(void)
{
	return ms_tls_guard || !ms_counting || lock_held;
}

/* Asynchronous signals wait while a wrapper changes the table (the lock held, the guard raised, a
 * system call between): a handler that ran inside and forked spun for ever on the lock, and one
 * left by siglongjmp kept it held and this thread's counting off, where the bare calls are plain
 * system calls.  Two more a tracked change of the mappings (about 0.4 us here). */
struct held_signals {
	int held;
	uint64_t old;
};

/* Only the program's handlers wait: ours run anywhere, and without any (most native programs) this
 * costs nothing. */
static struct held_signals signals_wait(void)
{
	struct held_signals h = { 0, 0 };
	uint64_t wait = ms_signals_handled() & ~MS_SIG_SYNCHRONOUS;
	if (wait)
		h.held = ms_sys_sigmask(SIG_BLOCK, wait, &h.old) == 0;
	return h;
}

static void signals_resume(const struct held_signals *h)
{
	if (h->held)
		ms_sys_sigmask(SIG_SETMASK, h->old, NULL);
}

static void *tracked_mmap(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len, int prot,
			  int flags, int fd, off_t off)
{
	int fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
	struct ms_shared_id id = { .kind = MS_SHARED_NONE };
	if (flags & MAP_SHARED) { /* a few system calls, their errors not the program's */
		int e = errno;
		ms_tls_guard++;
		ms_shared_classify(flags, fd, &id);
		ms_tls_guard--;
		errno = e;
	}
	int shared = id.kind != MS_SHARED_NONE;
	if (!fixed && !anonymous_private(flags) && !shared)
		return call_mmap(real, addr, len, prot, flags, fd, off);
	uintptr_t b = (uintptr_t)addr, e = b + page_up(len);
	/* a fixed mapping replaces what was there: table and kernel change under one lock */
	struct drop d = { .any = 0 };
	int commit = 0;
	if (fixed) {
		table_lock();
		commit = commits(b, e);
		drop_begin(&d, b, e);
	}
	ms_tls_guard++;
	void *p = call_mmap(real, addr, len, prot, flags, fd, off);
	int saved = errno;
	/* anonymous shared memory has no descriptor to name its object: /proc/self/maps does, read
	 * before the lock (a fixed mapping holds it already) */
	if (p != MAP_FAILED && shared && !id.known)
		ms_shared_identify((uintptr_t)p, &id);
	ms_tls_guard--;
	enum kind kind = COUNTED;
	if (p != MAP_FAILED) {
		if (!fixed)
			table_lock();
		if (shared) {
			remember((uintptr_t)p, len, kind = SHARED, ms_shared_segment(&id));
		} else if (anonymous_private(flags)) {
			remember((uintptr_t)p, len, kind = private_kind(len, prot, flags, commit), 0);
		} else {
			forget((uintptr_t)p, len);
		}
		drop_end(&d);
		if ((kind == SPARSE || kind == SHARED) && (flags & (MAP_POPULATE | MAP_LOCKED)))
			read_new(kind == SPARSE ? &sparse : &shm, (uintptr_t)p, (uintptr_t)p + page_up(len));
		if (!fixed)
			table_unlock();
	}
	if (fixed)
		table_unlock();
	if (p != MAP_FAILED && !fixed && kind == COUNTED && anonymous_private(flags))
		ms_sample_alloc(p, (int64_t)page_up(len)); /* outside the table lock (lock order) */
	errno = saved;
	return p;
}

static void *wrap_mmap(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len, int prot, int flags,
		       int fd, off_t off)
{
	/* a private file mapping at no fixed place is none of ours: straight through */
	if (passes_through() || !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_SHARED) || anonymous_private(flags)))
		return call_mmap(real, addr, len, prot, flags, fd, off);
	struct held_signals h = signals_wait();
	void *p = tracked_mmap(real, addr, len, prot, flags, fd, off);
	signals_resume(&h);
	return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return wrap_mmap(ms_real_mmap, addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return wrap_mmap(ms_real_mmap64 ? ms_real_mmap64 : ms_real_mmap, addr, len, prot, flags, fd, off);
}

static int call_munmap(void *addr, size_t len)
{
	if (ms_real_munmap)
		return ms_real_munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

EXPORT int munmap(void *addr, size_t len)
{
	if (passes_through())
		return call_munmap(addr, len);
	struct held_signals h = signals_wait();
	ms_sample_free(addr); /* a sampled mapping is known by its start */
	table_lock();
	struct drop d;
	drop_begin(&d, (uintptr_t)addr, (uintptr_t)addr + page_up(len));
	ms_tls_guard++;
	int rc = call_munmap(addr, len);
	ms_tls_guard--;
	int saved = errno;
	if (rc == 0)
		forget((uintptr_t)addr, len);
	drop_end(&d);
	table_unlock();
	signals_resume(&h);
	errno = saved;
	return rc;
}

static int call_mprotect(void *addr, size_t len, int prot)
{
	if (ms_real_mprotect)
		return ms_real_mprotect(addr, len, prot);
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

/* PROT_NONE takes counted pages out of the count (they are reserved again); access given to
 * reserved pages commits them, which are then read by their resident pages.  Read ranges stay read
 * whatever their protection: their pages are what they are. */
EXPORT int mprotect(void *addr, size_t len, int prot)
{
	if (passes_through())
		return call_mprotect(addr, len, prot);
	struct held_signals h = signals_wait();
	table_lock();
	ms_tls_guard++;
	int rc = call_mprotect(addr, len, prot);
	ms_tls_guard--;
	int saved = errno;
	if (rc == 0) {
		uintptr_t b = (uintptr_t)addr, e = b + page_up(len);
		uint64_t dropped = 0;
		if (prot == PROT_NONE)
			count_mmap(-(int64_t)ms_ranges_move(&table, &reserved, b, e, &dropped));
		else
			ms_ranges_move(&reserved, &sparse.r, b, e, &dropped);
		if (dropped) /* no room to keep them apart: forget them altogether, counted or not */
			forget(b, e - b), __atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
	}
	table_unlock();
	signals_resume(&h);
	errno = saved;
	return rc;
}

static int call_madvise(void *addr, size_t len, int advice)
{
	if (ms_real_madvise)
		return ms_real_madvise(addr, len, advice);
	return (int)syscall(SYS_madvise, addr, len, advice);
}

/* Advice after which the kernel no longer holds the pages (MADV_FREE'd pages stay resident until
 * reclaimed, and stay counted, as the kernel counts them). */
static int drops_pages(int advice)
{
	return advice == MADV_DONTNEED || advice == MADV_REMOVE || advice == MADV_PAGEOUT ||
	       advice == 24 /* MADV_DONTNEED_LOCKED */;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	if (passes_through() || !drops_pages(advice) || !(nranges(&sparse) || nranges(&shm)))
		return call_madvise(addr, len, advice);
	struct held_signals h = signals_wait();
	table_lock();
	struct drop d;
	drop_begin(&d, (uintptr_t)addr, (uintptr_t)addr + page_up(len));
	ms_tls_guard++;
	int rc = call_madvise(addr, len, advice);
	ms_tls_guard--;
	int saved = errno;
	drop_end(&d); /* what is left, also when it failed part-way */
	table_unlock();
	signals_resume(&h);
	errno = saved;
	return rc;
}

static void *call_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
	if (ms_real_mremap)
		return ms_real_mremap(old, old_len, new_len, flags, new_addr);
	long p = syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
	if (p < 0 && p > -4096) {
		errno = (int)-p;
		return MAP_FAILED;
	}
	return (void *)p;
}

/* The tag of the first range of R in [b, e) (one mapping: the kernel refuses more). */
static uint32_t tag_in(const struct ms_ranges *r, uintptr_t b, uintptr_t e)
{
	size_t i = ms_ranges_find(r, b);
	return i < r->n && r->v[i].start < e ? r->v[i].tag : 0;
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	if (passes_through())
		return call_mremap(old, old_len, new_len, flags, new_addr);
	struct held_signals h = signals_wait();
	table_lock();
	uintptr_t o = (uintptr_t)old, oe = o + page_up(old_len);
	/* one mapping (the kernel refuses more): tracked, reserved, read, or neither */
	/* clang-format off */
	enum kind kind = ms_ranges_overlap(&table, o, oe)		      ? COUNTED
			 : sparse.r.n && ms_ranges_overlap(&sparse.r, o, oe) ? SPARSE
			 : shm.r.n && ms_ranges_overlap(&shm.r, o, oe)       ? SHARED
			 : ms_ranges_overlap(&reserved, o, oe)		      ? RESERVED
									      : (enum kind)-1;
	/* clang-format on */
	uint32_t tag = kind == SHARED ? tag_in(&shm.r, o, oe) : 0;
	/* the pages move (or go): the old range's resident bytes leave, the new range is read after */
	struct drop d, dn = { .any = 0 };
	drop_begin(&d, o, oe);
	if (flags & MREMAP_FIXED)
		drop_begin(&dn, (uintptr_t)new_addr, (uintptr_t)new_addr + page_up(new_len));
	ms_tls_guard++;
	void *p = call_mremap(old, old_len, new_len, flags, new_addr);
	ms_tls_guard--;
	int saved = errno;
	if (p != MAP_FAILED) {
		if (!(flags & MREMAP_DONTUNMAP))
			forget(o, old_len);
		/* clang-format off */
		if (kind != (enum kind)-1)
			remember((uintptr_t)p, new_len, kind, tag);
		else if (flags & MREMAP_FIXED)
			forget((uintptr_t)p, new_len);
		/* clang-format on */
	}
	drop_end(&d);
	drop_end(&dn);
	if (p != MAP_FAILED && (kind == SPARSE || kind == SHARED))
		read_new(kind == SPARSE ? &sparse : &shm, (uintptr_t)p, (uintptr_t)p + page_up(new_len));
	table_unlock();
	signals_resume(&h);
	errno = saved;
	return p;
}

/* ---- SysV shared memory ------------------------------------------------------------------------ */

static void *call_shmat(int id, const void *addr, int flags)
{
	if (ms_real_shmat)
		return ms_real_shmat(id, addr, flags);
	long p = syscall(SYS_shmat, id, addr, flags);
	if (p < 0 && p > -4096) {
		errno = (int)-p;
		return (void *)-1;
	}
	return (void *)p;
}

/* A segment attached is shared memory like any other: its identity from /proc/self/maps (the
 * kernel names it by its id), its size from IPC_STAT. */
EXPORT void *shmat(int shmid, const void *addr, int flags)
{
	if (passes_through())
		return call_shmat(shmid, addr, flags);
	struct held_signals h = signals_wait();
	struct shmid_ds ds;
	int e = errno;
	ms_tls_guard++;
	int sized = syscall(SYS_shmctl, shmid, IPC_STAT, &ds) == 0;
	ms_tls_guard--;
	errno = e;
	int remap = (flags & SHM_REMAP) != 0;
	size_t len = sized ? page_up(ds.shm_segsz) : 0;
	struct drop d = { .any = 0 };
	if (remap && sized) {
		table_lock();
		drop_begin(&d, (uintptr_t)addr, (uintptr_t)addr + len);
	}
	ms_tls_guard++;
	void *p = call_shmat(shmid, addr, flags);
	int saved = errno;
	struct ms_shared_id id = { .kind = MS_SHARED_SYSV, .ino = (uint64_t)shmid };
	if (p != (void *)-1 && sized) {
		ms_format(id.name, sizeof id.name, "SYSV%x", (unsigned)ds.shm_perm.__key);
		ms_shared_identify((uintptr_t)p, &id);
	}
	ms_tls_guard--;
	if (p != (void *)-1 && sized) {
		if (!remap)
			table_lock();
		remember((uintptr_t)p, len, SHARED, ms_shared_segment(&id));
		drop_end(&d);
		if (!remap)
			table_unlock();
	}
	if (remap && sized)
		table_unlock();
	signals_resume(&h);
	errno = saved;
	return p;
}

static int call_shmdt(const void *addr)
{
	if (ms_real_shmdt)
		return ms_real_shmdt(addr);
	return (int)syscall(SYS_shmdt, addr);
}

/* The segment attached at ADDR goes: its ranges (those of its tag from ADDR on) with it. */
EXPORT int shmdt(const void *addr)
{
	if (passes_through() || !nranges(&shm))
		return call_shmdt(addr);
	struct held_signals h = signals_wait();
	table_lock();
	uintptr_t b = (uintptr_t)addr, e = b;
	size_t i = ms_ranges_find(&shm.r, b);
	uint32_t tag = i < shm.r.n && shm.r.v[i].start == b ? shm.r.v[i].tag : 0;
	for (; tag && i < shm.r.n && shm.r.v[i].start == e && shm.r.v[i].tag == tag; i++)
		e = shm.r.v[i].end;
	struct drop d;
	drop_begin(&d, b, e);
	ms_tls_guard++;
	int rc = call_shmdt(addr);
	ms_tls_guard--;
	int saved = errno;
	if (rc == 0 && e > b)
		forget(b, e - b);
	drop_end(&d);
	table_unlock();
	signals_resume(&h);
	errno = saved;
	return rc;
}
