/* Anonymous private mappings: the "mmap" component.  Ranges are tracked so partial munmap and
 * mremap are exact; the tables live in memory mapped with raw syscalls, outside any counter.
 * PROT_NONE reservations are kept aside and count from the moment mprotect makes them accessible,
 * as the JVM, V8 and Go commit their heaps; back to PROT_NONE, they stop counting.  Accessible
 * reservations (MAP_NORESERVE, or MS_RESERVE_MIN and more mapped at once: pyarrow's mimalloc arena,
 * OpenBLAS's buffers) are touched a little at a time, so they are the "reserve" component: their
 * resident pages, read with mincore before every boundary, timeline point and report, and before a
 * call that drops their pages (munmap, mremap, madvise), so its highs are never missed.  Before the
 * real functions are known the wrappers make the system calls themselves: resolving from here could
 * run inside a program allocator's lock. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/ranges.h"
#include "core/spin.h"
#include "intercept/hooks.h"
#include "intercept/sample.h"

#define PAGE 4096UL
#define MAX_RANGES (1UL << 20)

static int grow(struct ms_ranges *r, size_t need);
static struct ms_ranges table = { .grow = grow };    /* accessible: counted */
static struct ms_ranges reserved = { .grow = grow }; /* PROT_NONE: not counted until mprotect */
static struct ms_ranges sparse = { .grow = grow };   /* accessible reservations: resident pages */
static int64_t resident_counted; /* the reserve component's bytes; under the lock */
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

void ms_mmap_fork_prepare(void)
{
	table_lock();
}

void ms_mmap_fork_parent(void)
{
	table_unlock();
}

void ms_mmap_fork_child(int tracking)
{
	table_unlock();
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

/* ---- resident pages of reservations ------------------------------------------------------------ */

/* PAGEMAP_SCAN (Linux 6.7) on /proc/self/pagemap answers with the runs of present pages: a sparse
 * 1 GiB arena reads in ~40 us here where mincore's byte per page takes ~150 us.  Older kernels (or
 * no /proc): mincore.  Its ABI, for headers older than the kernel: */
struct ms_page_region {
	uint64_t start, end, categories;
};
struct ms_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define MS_PAGEMAP_SCAN _IOWR('f', 16, struct ms_pm_scan_arg)
#define MS_PAGE_IS_PRESENT (1 << 3)

static struct ms_page_region regions[256] MS_LARGE; /* under the lock */
static unsigned char incore[16384] MS_LARGE;         /* mincore's answer (64 MiB a call); likewise */
static int pagemap_fd = -1;                          /* open only while the lock is held */
static int no_pagemap_scan;

static uint64_t scan_present(uintptr_t b, uintptr_t e, int *failed)
{
	uint64_t bytes = 0;
	while (b < e) {
		struct ms_pm_scan_arg arg = { .size = sizeof arg, .start = b, .end = e, .vec = (uintptr_t)regions,
					      .vec_len = sizeof regions / sizeof *regions,
					      .category_anyof_mask = MS_PAGE_IS_PRESENT, .return_mask = MS_PAGE_IS_PRESENT };
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

/* Resident bytes of [b, e) (page-aligned, one mapping or several).  Lock held. */
static uint64_t resident_in(uintptr_t b, uintptr_t e)
{
	if (pagemap_fd >= 0) {
		int failed = 0;
		uint64_t bytes = scan_present(b, e, &failed);
		if (!failed)
			return bytes;
		no_pagemap_scan = 1;
	}
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
 * sees its own descriptors). */
static void pagemap_open(void)
{
	if (!no_pagemap_scan)
		pagemap_fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
}

static void pagemap_close(void)
{
	if (pagemap_fd >= 0)
		syscall(SYS_close, pagemap_fd);
	pagemap_fd = -1;
}

/* Resident bytes of the reservations inside [b, e).  Lock held. */
static uint64_t sparse_resident(uintptr_t b, uintptr_t e)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < sparse.n; i++) {
		uintptr_t s = sparse.v[i].start > b ? sparse.v[i].start : b;
		uintptr_t t = sparse.v[i].end < e ? sparse.v[i].end : e;
		if (s < t)
			bytes += resident_in(s, t);
	}
	return bytes;
}

/* The reserve component becomes BYTES.  Lock held. */
static void resident_set(int64_t bytes)
{
	int64_t change = bytes - resident_counted;
	resident_counted = bytes;
	ms_cpu_mmap_add(MS_RESERVE, change);
}

/* Reads every reservation again (its highs so far are then counted).  Lock held. */
static void resident_read_all(void)
{
	if (!sparse.n)
		return;
	pagemap_open();
	resident_set((int64_t)sparse_resident(0, UINTPTR_MAX));
	pagemap_close();
}

/* Before the kernel drops pages of [b, e): the reservations read, and what they hold there, which
 * resident_dropped then takes off.  Lock held. */
static uint64_t resident_before_drop(uintptr_t b, uintptr_t e)
{
	if (!sparse.n || !ms_ranges_overlap(&sparse, b, e))
		return 0;
	pagemap_open();
	resident_set((int64_t)sparse_resident(0, UINTPTR_MAX));
	uint64_t there = sparse_resident(b, e);
	pagemap_close();
	return there;
}

static void resident_dropped(uint64_t bytes)
{
	if (bytes)
		resident_set(resident_counted - (int64_t)bytes);
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

static __thread int refreshing MS_TLS;
static double refresh_spent; /* seconds spent reading, against READ_SHARE of the run */
static int rss_wanted; /* a stage boundary happened: /bin/true's exit reads no /proc */
#define READ_SHARE 0.01

/* Reading may take READ_SHARE of the run (and its first millisecond): boundaries and points are
 * read every time, unless a stage around a function called a million times makes them too many. */
static int within_budget(double now)
{
	return refresh_spent < 0.001 + READ_SHARE * (now - ms_proc.start_monotonic);
}

/* ms_refresh: the reservations and the RSS read now. */
static void refresh(enum ms_refresh_reason why)
{
	/* a boundary is read also from inside a hook (native stages open and close there) */
	if (refreshing || lock_held || (ms_tls_guard && why != MS_REFRESH_BOUNDARY) || !ms_counting)
		return;
	double start = ms_now();
	if (why != MS_REFRESH_REPORT && !within_budget(start))
		return;
	refreshing = 1;
	int saved = errno;
	if (__atomic_load_n(&sparse.n, __ATOMIC_RELAXED)) {
		table_lock();
		resident_read_all();
		table_unlock();
	}
	if (why == MS_REFRESH_BOUNDARY)
		rss_wanted = 1;
	if (why != MS_REFRESH_POINT && rss_wanted) {
		int64_t rss = read_rss();
		if (rss >= 0)
			ms_counter_set(MS_RSS, rss);
	}
	refresh_spent += ms_now() - start;
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

/* Removes tracked and reserved bytes in [addr, addr+len) from the tables and the counters.  Lock held. */
static void forget(uintptr_t addr, size_t len)
{
	uint64_t dropped = 0;
	uint64_t bytes = ms_ranges_remove(&table, addr, addr + page_up(len), &dropped);
	ms_ranges_remove(&reserved, addr, addr + page_up(len), &dropped);
	ms_ranges_remove(&sparse, addr, addr + page_up(len), &dropped);
	if (dropped)
		__atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
	count_mmap(-(int64_t)bytes);
}

/* Records a new mapping: counted when accessible, by its resident pages when RESERVATION.  Lock held. */
static void remember(uintptr_t addr, size_t len, int prot, int reservation)
{
	/* the kernel just handed out this range: anything still recorded there was unmapped unseen
	 * (by a signal handler that ran while this thread held the lock) */
	forget(addr, len);
	struct ms_ranges *into = prot == PROT_NONE ? &reserved : reservation ? &sparse : &table;
	if (ms_ranges_add(into, addr, addr + page_up(len)) < 0)
		__atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
	else if (into == &table)
		count_mmap((int64_t)page_up(len));
}

static void *call_mmap(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len,
		       int prot, int flags, int fd, off_t off)
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

static void *wrap_mmap(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len,
		       int prot, int flags, int fd, off_t off)
{
	if (passes_through())
		return call_mmap(real, addr, len, prot, flags, fd, off);
	int fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
	if (!fixed && !anonymous_private(flags))
		return call_mmap(real, addr, len, prot, flags, fd, off);
	/* a fixed mapping replaces what was there: table and kernel change under one lock */
	uint64_t dropped = 0;
	if (fixed) {
		table_lock();
		dropped = resident_before_drop((uintptr_t)addr, (uintptr_t)addr + page_up(len));
	}
	ms_tls_guard++;
	void *p = call_mmap(real, addr, len, prot, flags, fd, off);
	ms_tls_guard--;
	int saved = errno;
	if (p != MAP_FAILED) {
		if (!fixed)
			table_lock();
		resident_dropped(dropped);
		if (anonymous_private(flags)) {
			remember((uintptr_t)p, len, prot, is_reservation(len, prot, flags));
			if (is_reservation(len, prot, flags) && (flags & (MAP_POPULATE | MAP_LOCKED)))
				resident_read_all();
		} else
			forget((uintptr_t)p, len);
		if (!fixed)
			table_unlock();
	}
	if (fixed)
		table_unlock();
	if (p != MAP_FAILED && !fixed && anonymous_private(flags) && prot != PROT_NONE && !is_reservation(len, prot, flags))
		ms_sample_alloc(p, (int64_t)page_up(len)); /* outside the table lock (lock order) */
	errno = saved;
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
	ms_sample_free(addr); /* a sampled mapping is known by its start */
	table_lock();
	uint64_t dropped = resident_before_drop((uintptr_t)addr, (uintptr_t)addr + page_up(len));
	ms_tls_guard++;
	int rc = call_munmap(addr, len);
	ms_tls_guard--;
	int saved = errno;
	if (rc == 0) {
		resident_dropped(dropped);
		forget((uintptr_t)addr, len);
	}
	table_unlock();
	errno = saved;
	return rc;
}

static int call_mprotect(void *addr, size_t len, int prot)
{
	if (ms_real_mprotect)
		return ms_real_mprotect(addr, len, prot);
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

EXPORT int mprotect(void *addr, size_t len, int prot)
{
	if (passes_through())
		return call_mprotect(addr, len, prot);
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
			count_mmap((int64_t)ms_ranges_move(&reserved, &table, b, e, &dropped));
		if (dropped) /* no room to keep them apart: forget them altogether, counted or not */
			forget(b, e - b), __atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
	}
	table_unlock();
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
	return advice == MADV_DONTNEED || advice == MADV_REMOVE || advice == MADV_PAGEOUT || advice == 24 /* MADV_DONTNEED_LOCKED */;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	if (passes_through() || !drops_pages(advice) || !__atomic_load_n(&sparse.n, __ATOMIC_RELAXED))
		return call_madvise(addr, len, advice);
	table_lock();
	uint64_t dropped = resident_before_drop((uintptr_t)addr, (uintptr_t)addr + page_up(len));
	ms_tls_guard++;
	int rc = call_madvise(addr, len, advice);
	ms_tls_guard--;
	int saved = errno;
	if (rc == 0)
		resident_dropped(dropped);
	else if (dropped) /* partly applied, perhaps: read again */
		resident_read_all();
	table_unlock();
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
	table_lock();
	uintptr_t o = (uintptr_t)old;
	/* one mapping (the kernel refuses more): tracked, reserved, or neither */
	int accessible = ms_ranges_overlap(&table, o, o + page_up(old_len)) != 0;
	int sparse_one = !accessible && ms_ranges_overlap(&sparse, o, o + page_up(old_len)) != 0;
	int reserve = !accessible && !sparse_one && ms_ranges_overlap(&reserved, o, o + page_up(old_len)) != 0;
	/* the pages move (or go): the old range's resident bytes leave, the new range is read after */
	uint64_t dropped = resident_before_drop(o, o + page_up(old_len));
	if (flags & MREMAP_FIXED)
		dropped += resident_before_drop((uintptr_t)new_addr, (uintptr_t)new_addr + page_up(new_len));
	ms_tls_guard++;
	void *p = call_mremap(old, old_len, new_len, flags, new_addr);
	ms_tls_guard--;
	int saved = errno;
	if (p != MAP_FAILED) {
		resident_dropped(dropped);
		if (!(flags & MREMAP_DONTUNMAP))
			forget(o, old_len);
		if (accessible || reserve || sparse_one)
			remember((uintptr_t)p, new_len, accessible || sparse_one ? PROT_READ : PROT_NONE, sparse_one);
		else if (flags & MREMAP_FIXED)
			forget((uintptr_t)p, new_len);
		if (sparse_one)
			resident_read_all();
	}
	table_unlock();
	errno = saved;
	return p;
}
