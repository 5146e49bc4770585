/* Anonymous private mappings: the "mmap" component.  Ranges are tracked so partial munmap and
 * mremap are exact; the tables live in memory mapped with raw syscalls, outside any counter.
 * Reservations (PROT_NONE) are kept aside and count from the moment mprotect makes them accessible,
 * as the JVM, V8 and Go commit their heaps; back to PROT_NONE, they stop counting.  Before the real
 * functions are known the wrappers make the system calls themselves: resolving from here could run
 * inside a program allocator's lock. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "core/counters.h"
#include "core/ms.h"
#include "core/process.h"
#include "core/ranges.h"
#include "core/spin.h"
#include "intercept/hooks.h"
#include "sites/hot.h"

#define PAGE 4096UL
#define MAX_RANGES (1UL << 20)

static int grow(struct ms_ranges *r, size_t need);
static struct ms_ranges table = { .grow = grow };    /* accessible: counted */
static struct ms_ranges reserved = { .grow = grow }; /* PROT_NONE: not counted until mprotect */
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
	if (dropped)
		__atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
	count_mmap(-(int64_t)bytes);
}

/* Records a new mapping, counted when accessible.  Lock held. */
static void remember(uintptr_t addr, size_t len, int prot)
{
	/* the kernel just handed out this range: anything still recorded there was unmapped unseen
	 * (by a signal handler that ran while this thread held the lock) */
	forget(addr, len);
	struct ms_ranges *into = prot == PROT_NONE ? &reserved : &table;
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
	if (fixed)
		table_lock();
	ms_tls_guard++;
	void *p = call_mmap(real, addr, len, prot, flags, fd, off);
	ms_tls_guard--;
	int saved = errno;
	if (p != MAP_FAILED) {
		if (!fixed)
			table_lock();
		if (anonymous_private(flags))
			remember((uintptr_t)p, len, prot);
		else
			forget((uintptr_t)p, len);
		if (!fixed)
			table_unlock();
	}
	if (fixed)
		table_unlock();
	if (p != MAP_FAILED && !fixed && anonymous_private(flags) && prot != PROT_NONE)
		ms_sites_alloc(p, (int64_t)page_up(len)); /* outside the table lock (lock order) */
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
	ms_sites_free(addr); /* a sampled mapping is known by its start */
	table_lock();
	ms_tls_guard++;
	int rc = call_munmap(addr, len);
	ms_tls_guard--;
	int saved = errno;
	if (rc == 0)
		forget((uintptr_t)addr, len);
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
	int reserve = !accessible && ms_ranges_overlap(&reserved, o, o + page_up(old_len)) != 0;
	ms_tls_guard++;
	void *p = call_mremap(old, old_len, new_len, flags, new_addr);
	ms_tls_guard--;
	int saved = errno;
	if (p != MAP_FAILED) {
		if (!(flags & MREMAP_DONTUNMAP))
			forget(o, old_len);
		if (accessible || reserve)
			remember((uintptr_t)p, new_len, accessible ? PROT_READ : PROT_NONE);
		else if (flags & MREMAP_FIXED)
			forget((uintptr_t)p, new_len);
	}
	table_unlock();
	errno = saved;
	return p;
}
