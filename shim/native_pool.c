/* The trampoline pool: which trampolines are taken, and the word inside each one's FDE that holds
 * the return address it stands for (found once through our own .eh_frame_hdr, then made writable:
 * the trampoline and every unwinder read the same word, so they can never disagree). */
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "native.h"

#define WORDS (MS_NTRAMP / 64)
#define FDE_RA_OFFSET 21 /* length, CIE pointer, pc begin, range, aug length, 4 opcode bytes */

static unsigned char *ra_word[MS_NTRAMP];
static uint64_t used[WORDS];
static unsigned hint;

uintptr_t ms_pool_ra(int i)
{
	uintptr_t ra;
	memcpy(&ra, ra_word[i], sizeof ra);
	return ra;
}

void ms_pool_set_ra(int i, uintptr_t ra)
{
	memcpy(ra_word[i], &ra, sizeof ra);
}

int ms_pool_take(void)
{
	unsigned start = __atomic_fetch_add(&hint, 1, __ATOMIC_RELAXED);
	for (unsigned k = 0; k < WORDS; k++) {
		unsigned w = (start + k) % WORDS;
		uint64_t v = __atomic_load_n(&used[w], __ATOMIC_RELAXED);
		while (~v) {
			int bit = __builtin_ctzll(~v);
			if (__atomic_compare_exchange_n(&used[w], &v, v | (1ULL << bit), 0, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				return (int)(w * 64 + (unsigned)bit);
		}
	}
	return -1;
}

void ms_pool_give(int i)
{
	if (i >= 0 && i < MS_NTRAMP)
		__atomic_fetch_and(&used[i / 64], ~(1ULL << (i % 64)), __ATOMIC_RELEASE);
}

static int32_t s32(const unsigned char *p)
{
	int32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

struct hdr_search {
	const unsigned char *hdr;
	const ElfW(Phdr) *phdr;
	int phnum;
	uintptr_t base;
};

/* Our own object's PT_GNU_EH_FRAME. */
static int find_hdr(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct hdr_search *s = arg;
	uintptr_t me = (uintptr_t)ms_tramp_base;
	const unsigned char *hdr = NULL;
	int mine = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && me >= lo && me < lo + ph->p_memsz)
			mine = 1;
		if (ph->p_type == PT_GNU_EH_FRAME)
			hdr = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
	}
	if (!mine)
		return 0;
	s->hdr = hdr;
	s->phdr = info->dlpi_phdr;
	s->phnum = info->dlpi_phnum;
	s->base = info->dlpi_addr;
	return 1;
}

/* FDE of the code at PC through the binary search table (datarel sdata4, as ld writes it). */
static const unsigned char *fde_for(const unsigned char *hdr, uintptr_t pc)
{
	if (hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b)
		return NULL;
	size_t ptr_size = (hdr[1] & 0x0f) == 0x0b ? 4 : (hdr[1] & 0x0f) == 0x0c ? 8 : 0;
	if (!ptr_size)
		return NULL;
	const unsigned char *p = hdr + 4 + ptr_size;
	uint32_t count;
	memcpy(&count, p, sizeof count);
	const unsigned char *table = p + 4;
	intptr_t want = (intptr_t)(pc - (uintptr_t)hdr);
	uint32_t lo = 0, hi = count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		intptr_t loc = s32(table + 8 * (size_t)mid);
		if (loc == want)
			return hdr + s32(table + 8 * (size_t)mid + 4);
		if (loc < want)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* FDE I must describe block I with the layout native_tramp.c wrote. */
static int fde_ok(const unsigned char *fde, int i)
{
	static const unsigned char ops[4] = { 0x16, 16, 9, 0x0e };
	uintptr_t block = (uintptr_t)ms_tramp_base + (uintptr_t)i * MS_TRAMP_SIZE;
	return s32(fde) >= 28 && s32(fde + 4) != 0 && (uintptr_t)(fde + 8) + (intptr_t)s32(fde + 8) == block &&
	       memcmp(fde + 17, ops, sizeof ops) == 0;
}

/* Pages [LO, HI) may be made writable only when they hold no code. */
static int pages_hold_code(const struct hdr_search *s, uintptr_t lo, uintptr_t hi)
{
	for (int i = 0; i < s->phnum; i++) {
		const ElfW(Phdr) *ph = &s->phdr[i];
		uintptr_t a = s->base + ph->p_vaddr, b = a + ph->p_memsz;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && a < hi && b > lo)
			return 1;
	}
	return 0;
}

int ms_pool_init(void)
{
	struct hdr_search s = { NULL, NULL, 0, 0 };
	dl_iterate_phdr(find_hdr, &s);
	if (!s.hdr)
		return -1;
	const unsigned char *fde = fde_for(s.hdr, (uintptr_t)ms_tramp_base);
	for (int i = 0; i < MS_NTRAMP; i++) {
		if (!fde || !fde_ok(fde, i))
			return -1;
		ra_word[i] = (unsigned char *)fde + FDE_RA_OFFSET;
		fde += 4 + s32(fde);
	}
	uintptr_t lo = (uintptr_t)ra_word[0] & ~(uintptr_t)4095;
	uintptr_t hi = ((uintptr_t)ra_word[MS_NTRAMP - 1] + 8 + 4095) & ~(uintptr_t)4095;
	if (pages_hold_code(&s, lo, hi))
		return -1;
	/* raw syscall: the unwind data becomes private writable pages of this process */
	return syscall(SYS_mprotect, lo, hi - lo, PROT_READ | PROT_WRITE) == 0 ? 0 : -1;
}
