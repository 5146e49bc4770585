/* Anonymous private mappings: the "mmap" component.  Ranges are tracked so partial munmap and
 * mremap are exact; the table lives in memory mapped with raw syscalls, outside any counter. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "counters.h"
#include "hooks.h"
#include "ms.h"
#include "ranges.h"

#define EXPORT __attribute__((visibility("default")))
#define PAGE 4096UL
#define MAX_RANGES (1UL << 20)

static int grow(struct ms_ranges *r, size_t need);
static struct ms_ranges table = { .grow = grow };
static int lock_word;
static __thread int lock_held MS_TLS; /* a signal handler mapping memory inside our lock passes through */
static uint64_t untracked;

uint64_t ms_mmap_untracked(void);
void ms_mmap_lock(void);
void ms_mmap_unlock(void);

uint64_t ms_mmap_untracked(void)
{
	return __atomic_load_n(&untracked, __ATOMIC_RELAXED);
}

void ms_mmap_lock(void)
{
	for (int spins = 0; __atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE); spins++)
		if (spins > 64) /* the holder may be inside a syscall: let it run */
			sched_yield();
	lock_held = 1;
}

void ms_mmap_unlock(void)
{
	lock_held = 0;
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
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

static int counted_kind(int prot, int flags)
{
	return (flags & MAP_ANONYMOUS) && !(flags & MAP_SHARED) && prot != PROT_NONE;
}

/* Removes tracked bytes in [addr, addr+len) from the table and the counters.  Lock held. */
static void forget(uintptr_t addr, size_t len)
{
	uint64_t dropped = 0;
	uint64_t bytes = ms_ranges_remove(&table, addr, addr + page_up(len), &dropped);
	if (dropped)
		__atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
	if (bytes) {
		ms_native_before_count();
		ms_cpu_add(MS_MMAP, -(int64_t)bytes);
	}
}

static void remember(uintptr_t addr, size_t len)
{
	if (ms_ranges_add(&table, addr, addr + page_up(len)) == 0) {
		ms_native_before_count();
		ms_cpu_add(MS_MMAP, (int64_t)page_up(len));
	}
	else
		__atomic_add_fetch(&untracked, 1, __ATOMIC_RELAXED);
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

static void *wrap_mmap(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len,
		       int prot, int flags, int fd, off_t off)
{
	if (!real && !ms_resolved())
		ms_resolve();
	if (ms_tls_guard || !ms_counting || lock_held)
		return call_mmap(real, addr, len, prot, flags, fd, off);
	int fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
	void *p;
	/* a fixed mapping replaces what was there: table and kernel change under one lock */
	if (fixed)
		ms_mmap_lock();
	ms_tls_guard++;
	p = call_mmap(real, addr, len, prot, flags, fd, off);
	ms_tls_guard--;
	int saved = errno;
	if (p != MAP_FAILED && (fixed || counted_kind(prot, flags))) {
		if (!fixed)
			ms_mmap_lock();
		if (fixed)
			forget((uintptr_t)p, len);
		if (counted_kind(prot, flags))
			remember((uintptr_t)p, len);
		if (!fixed)
			ms_mmap_unlock();
	}
	if (fixed)
		ms_mmap_unlock();
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
	if (ms_tls_guard || !ms_counting || lock_held)
		return call_munmap(addr, len);
	ms_mmap_lock();
	ms_tls_guard++;
	int rc = call_munmap(addr, len);
	ms_tls_guard--;
	int saved = errno;
	if (rc == 0)
		forget((uintptr_t)addr, len);
	ms_mmap_unlock();
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
	if (ms_tls_guard || !ms_counting || lock_held)
		return call_mremap(old, old_len, new_len, flags, new_addr);
	ms_mmap_lock();
	uint64_t tracked = ms_ranges_overlap(&table, (uintptr_t)old, (uintptr_t)old + page_up(old_len));
	ms_tls_guard++;
	void *p = call_mremap(old, old_len, new_len, flags, new_addr);
	ms_tls_guard--;
	int saved = errno;
	if (p != MAP_FAILED) {
		int keeps_old = (flags & MREMAP_DONTUNMAP) != 0;
		if (!keeps_old)
			forget((uintptr_t)old, old_len);
		if (flags & MREMAP_FIXED)
			forget((uintptr_t)p, new_len);
		if (tracked)
			remember((uintptr_t)p, new_len);
	}
	ms_mmap_unlock();
	errno = saved;
	return p;
}
