/* Unit suite for the quick unwinder (shim/native/cfi.c) and the unwinder cursor
 * (shim/native/unwinder.c), linked without a preload: hand-written CIE/FDE byte strings, the unwind
 * entries of the trampolines (shim/native/tramp.c, linked in), and walks through glibc's own
 * functions (its .eh_frame read where it is loaded), checked against libunwind. */
#define UNW_LOCAL_ONLY
#include <check.h>
#include <dlfcn.h>
#include <libunwind.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "suite.h"
#include "native/native.h"

/* What the shim's other files would give the four linked ones. */
void *ms_real_dlsym(void *handle, const char *name);
void *ms_real_dlsym(void *handle, const char *name)
{
	return dlsym(handle, name);
}

/* ---- byte strings ---------------------------------------------------------------------------- */

/* Opcodes written out here by number, as a reader of the DWARF standard would (cfi.c names them). */
enum {
	ADV1 = 0x02, ADV2 = 0x03, ADV4 = 0x04, OFFSET_EXT_SF = 0x11, RESTORE_EXT = 0x06, UNDEF = 0x07,
	SAME = 0x08, REGISTER = 0x09, REMEMBER = 0x0a, RESTORE_STATE = 0x0b, DEF_CFA = 0x0c,
	DEF_CFA_REG = 0x0d, DEF_CFA_OFF = 0x0e, DEF_CFA_EXPR = 0x0f, EXPR = 0x10, DEF_CFA_SF = 0x12,
	VAL_OFFSET = 0x14, VAL_EXPR = 0x16, SET_LOC = 0x01, ARGS_SIZE = 0x2e,
	ADV = 0x40, OFF = 0x80, RESTORE = 0xc0, RBP = 6, RSP = 7, RIP = 16,
};

/* A CIE followed by one FDE, built in place (pointers in .eh_frame may be relative to where they
 * lie). */
struct eh {
	_Alignas(8) unsigned char b[512];
	size_t n;
	size_t fde;
};

static void put(struct eh *e, const void *p, size_t n)
{
	ck_assert_uint_le(e->n + n, sizeof e->b);
	if (n)
		memcpy(e->b + e->n, p, n);
	e->n += n;
}

static void u8(struct eh *e, unsigned v)
{
	unsigned char c = (unsigned char)v;
	put(e, &c, 1);
}

static void u32(struct eh *e, uint32_t v)
{
	put(e, &v, 4);
}

static void u64(struct eh *e, uint64_t v)
{
	put(e, &v, 8);
}

static void set_u32(struct eh *e, size_t at, uint32_t v)
{
	memcpy(e->b + at, &v, 4);
}

/* Pads with DW_CFA_nop to 8 bytes and writes the entry's length field at AT. */
static void close_entry(struct eh *e, size_t at)
{
	while ((e->n - at) % 8)
		u8(e, 0);
	set_u32(e, at, (uint32_t)(e->n - at - 4));
}

/* CIE "zR" (or AUG), code alignment 1, data alignment -8, return address column rip, FDE
 * addresses in ENC; its instructions INS. */
static void cie(struct eh *e, const char *aug, unsigned enc, const unsigned char *ins, size_t n)
{
	e->n = 0;
	u32(e, 0);
	u32(e, 0); /* CIE id */
	u8(e, 1);  /* version */
	put(e, aug, strlen(aug) + 1);
	u8(e, 1);    /* code alignment */
	u8(e, 0x78); /* data alignment -8 (sleb128) */
	u8(e, RIP);
	u8(e, 1); /* augmentation data: the FDE encoding */
	u8(e, enc);
	put(e, ins, n);
	close_entry(e, 0);
}

/* The FDE for [START, START + RANGE) with instructions INS, addresses absolute (8 bytes) or
 * pc-relative 4-byte (PCREL). */
static const unsigned char *fde(struct eh *e, int pcrel, uintptr_t start, uint64_t range,
				const unsigned char *ins, size_t n)
{
	size_t at = e->fde = e->n;
	u32(e, 0);
	u32(e, (uint32_t)(e->n)); /* back to the CIE at offset 0 */
	if (pcrel) {
		u32(e, (uint32_t)(int32_t)(start - (uintptr_t)(e->b + e->n)));
		u32(e, (uint32_t)range);
	} else {
		u64(e, start);
		u64(e, range);
	}
	u8(e, 0); /* augmentation data length */
	put(e, ins, n);
	close_entry(e, at);
	return e->b + at;
}

#define BYTES(...) (const unsigned char[]){ __VA_ARGS__ }, sizeof((const unsigned char[]){ __VA_ARGS__ })

/* The CIE GCC writes on x86-64: CFA = rsp + 8, return address at CFA - 8. */
#define GCC_CIE BYTES(DEF_CFA, RSP, 8, OFF | RIP, 1)

static struct eh e;
static const uintptr_t F = 0x400000;

/* The rule at F + AT of an FDE with instructions INS under the GCC CIE. */
static int rule_at(uintptr_t at, const unsigned char *ins, size_t n, struct ms_cfi_rule *r)
{
	cie(&e, "zR", 0x00, GCC_CIE);
	const unsigned char *f = fde(&e, 0, F, 64, ins, n);
	memset(r, 0x5a, sizeof *r);
	return ms_cfi_fde_rule(f, F + at, r);
}

static void assert_rule(const struct ms_cfi_rule *r, int cfa_rbp, int cfa_off, int rbp_saved, int rbp_off)
{
	ck_assert_int_eq(r->valid, 1);
	ck_assert_int_eq(r->outermost, 0);
	ck_assert_int_eq(r->signal, 0);
	ck_assert_int_eq(r->cfa_rbp, cfa_rbp);
	ck_assert_int_eq(r->cfa_off, cfa_off);
	ck_assert_int_eq(r->rbp_saved, rbp_saved);
	if (rbp_saved)
		ck_assert_int_eq(r->rbp_off, rbp_off);
}

START_TEST(entry_of_a_function)
{
	struct ms_cfi_rule r;
	ck_assert_int_eq(rule_at(0, NULL, 0, &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
	ck_assert_int_eq(rule_at(63, NULL, 0, &r), 0);
	ck_assert_int_eq(rule_at(64, NULL, 0, &r), -1); /* past the FDE's range */
	cie(&e, "zR", 0x00, GCC_CIE);
	ck_assert_int_eq(ms_cfi_fde_rule(fde(&e, 0, F, 64, NULL, 0), F - 1, &r), -1);
}
END_TEST

/* push %rbp; mov %rsp,%rbp; ... ; leave (remember/restore around the epilogue); ret */
static const unsigned char frame_pointer[] = {
	ADV | 1, DEF_CFA_OFF, 16, OFF | RBP, 2, /* at 1: CFA = rsp + 16, rbp at CFA - 16 */
	ADV | 3, DEF_CFA_REG, RBP,              /* at 4: CFA = rbp + 16 */
	ADV1, 20, REMEMBER, DEF_CFA, RSP, 8,    /* at 24: after leave */
	ADV | 1, RESTORE_STATE,                 /* at 25: the body again */
};

START_TEST(frame_pointer_prologue_and_epilogue)
{
	struct ms_cfi_rule r;
	ck_assert_int_eq(rule_at(0, frame_pointer, sizeof frame_pointer, &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
	ck_assert_int_eq(rule_at(1, frame_pointer, sizeof frame_pointer, &r), 0);
	assert_rule(&r, 0, 16, 1, -16);
	ck_assert_int_eq(rule_at(3, frame_pointer, sizeof frame_pointer, &r), 0);
	assert_rule(&r, 0, 16, 1, -16);
	ck_assert_int_eq(rule_at(4, frame_pointer, sizeof frame_pointer, &r), 0);
	assert_rule(&r, 1, 16, 1, -16);
	ck_assert_int_eq(rule_at(23, frame_pointer, sizeof frame_pointer, &r), 0);
	assert_rule(&r, 1, 16, 1, -16);
	ck_assert_int_eq(rule_at(24, frame_pointer, sizeof frame_pointer, &r), 0);
	assert_rule(&r, 0, 8, 1, -16);
	ck_assert_int_eq(rule_at(25, frame_pointer, sizeof frame_pointer, &r), 0);
	assert_rule(&r, 1, 16, 1, -16);
}
END_TEST

START_TEST(restore_goes_back_to_the_cie)
{
	struct ms_cfi_rule r;
	ck_assert_int_eq(rule_at(2, BYTES(ADV | 1, OFF | RBP, 2, ADV | 1, RESTORE | RBP), &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
	ck_assert_int_eq(rule_at(2, BYTES(ADV | 1, OFF | RBP, 2, ADV | 1, RESTORE_EXT, RBP), &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
	ck_assert_int_eq(rule_at(1, BYTES(ADV | 1, OFF | RBP, 2, ADV | 1, RESTORE | RBP), &r), 0);
	assert_rule(&r, 0, 8, 1, -16);
	/* a restore_state with nothing remembered is corrupt data */
	ck_assert_int_eq(rule_at(1, BYTES(RESTORE_STATE), &r), -1);
}
END_TEST

START_TEST(advances_of_every_size_and_set_loc)
{
	struct ms_cfi_rule r;
	ck_assert_int_eq(rule_at(5, BYTES(ADV1, 5, DEF_CFA_OFF, 24), &r), 0);
	assert_rule(&r, 0, 24, 0, 0);
	ck_assert_int_eq(rule_at(4, BYTES(ADV1, 5, DEF_CFA_OFF, 24), &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
	ck_assert_int_eq(rule_at(40, BYTES(ADV2, 40, 0, DEF_CFA_OFF, 24), &r), 0);
	assert_rule(&r, 0, 24, 0, 0);
	ck_assert_int_eq(rule_at(40, BYTES(ADV4, 41, 0, 0, 0, DEF_CFA_OFF, 24), &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
	/* set_loc in the CIE's FDE encoding (absolute, 8 bytes) */
	uintptr_t to = F + 9;
	unsigned char ins[] = { SET_LOC, 0, 0, 0, 0, 0, 0, 0, 0, DEF_CFA_OFF, 32 };
	memcpy(ins + 1, &to, 8);
	ck_assert_int_eq(rule_at(9, ins, sizeof ins, &r), 0);
	assert_rule(&r, 0, 32, 0, 0);
	ck_assert_int_eq(rule_at(8, ins, sizeof ins, &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
}
END_TEST

START_TEST(factored_and_signed_forms)
{
	struct ms_cfi_rule r;
	/* def_cfa_sf: offset -2 * data alignment -8 = 16; offset_extended_sf rbp: -3 * -8 = +24 */
	ck_assert_int_eq(rule_at(0, BYTES(DEF_CFA_SF, RBP, 0x7e, OFFSET_EXT_SF, RBP, 0x7d), &r), 0);
	assert_rule(&r, 1, 16, 1, 24);
	ck_assert_int_eq(rule_at(0, BYTES(ARGS_SIZE, 16, DEF_CFA_OFF, 0x80, 0x01), &r), 0);
	assert_rule(&r, 0, 128, 0, 0);
	ck_assert_int_eq(rule_at(0, BYTES(DEF_CFA_OFF, 0x80, 0x80, 0x02), &r), -1); /* past 16 bits */
}
END_TEST

START_TEST(outermost_and_signal_frames)
{
	struct ms_cfi_rule r;
	ck_assert_int_eq(rule_at(0, BYTES(UNDEF, RIP), &r), 0);
	ck_assert_int_eq(r.valid, 1);
	ck_assert_int_eq(r.outermost, 1);
	cie(&e, "zRS", 0x00, GCC_CIE);
	ck_assert_int_eq(ms_cfi_fde_rule(fde(&e, 0, F, 64, NULL, 0), F, &r), 0);
	ck_assert_int_eq(r.signal, 1);
}
END_TEST

START_TEST(rules_not_followed_are_refused)
{
	struct ms_cfi_rule r;
	ck_assert_int_eq(rule_at(0, BYTES(DEF_CFA_EXPR, 1, 0x77), &r), -1);
	ck_assert_int_eq(rule_at(0, BYTES(VAL_EXPR, RIP, 1, 0x77), &r), -1);
	ck_assert_int_eq(rule_at(0, BYTES(EXPR, RBP, 1, 0x77), &r), -1);
	ck_assert_int_eq(rule_at(0, BYTES(REGISTER, RBP, 3), &r), -1);
	ck_assert_int_eq(rule_at(0, BYTES(VAL_OFFSET, RSP, 1), &r), -1);
	ck_assert_int_eq(rule_at(0, BYTES(SAME, RIP), &r), -1);
	ck_assert_int_eq(rule_at(0, BYTES(UNDEF, RBP), &r), -1);
	ck_assert_int_eq(rule_at(0, BYTES(DEF_CFA, 3, 8), &r), -1);         /* CFA from rbx */
	ck_assert_int_eq(rule_at(0, BYTES(OFF | RIP, 2), &r), -1);          /* return address at CFA - 16 */
	ck_assert_int_eq(rule_at(0, BYTES(0x2f), &r), -1);                  /* an opcode it does not know */
	ck_assert_int_eq(rule_at(0, BYTES(EXPR, 12, 9, 0x77), &r), -1);     /* a block past the end */
	/* registers the unwinder never needs may have any rule */
	ck_assert_int_eq(rule_at(0, BYTES(EXPR, 12, 1, 0x77, REGISTER, 3, 4, VAL_OFFSET, 13, 1, SAME, RSP), &r), 0);
	assert_rule(&r, 0, 8, 0, 0);
	/* ...and only the rules up to PC count */
	ck_assert_int_eq(rule_at(0, BYTES(ADV | 1, DEF_CFA_EXPR, 1, 0x77), &r), 0);
}
END_TEST

START_TEST(pc_relative_encoding)
{
	struct ms_cfi_rule r;
	uintptr_t start = (uintptr_t)&e + 4096; /* near the bytes: a 32-bit distance */
	cie(&e, "zR", 0x1b, GCC_CIE);           /* DW_EH_PE_pcrel | DW_EH_PE_sdata4 */
	const unsigned char *f = fde(&e, 1, start, 32, frame_pointer, sizeof frame_pointer);
	ck_assert_int_eq(ms_cfi_fde_rule(f, start + 4, &r), 0);
	assert_rule(&r, 1, 16, 1, -16);
	ck_assert_int_eq(ms_cfi_fde_rule(f, start + 32, &r), -1);
	ck_assert_int_eq(ms_cfi_fde_rule(f, start - 1, &r), -1);
}
END_TEST

/* ---- the trampolines' unwind entries ---------------------------------------------------------- */

/* libgcc's lookup of the FDE covering PC (what the C++ runtime's unwinder uses). */
struct dwarf_eh_bases {
	void *tbase, *dbase, *func;
};
const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

START_TEST(trampolines_have_an_entry_the_quick_unwinder_leaves_alone)
{
	ck_assert_int_eq(ms_pool_init(), 0);
	for (int i = 0; i < MS_NTRAMP; i += 1365) {
		uintptr_t pc = ms_tramp_addr(i) - 1; /* a return address into it, less one */
		struct dwarf_eh_bases bases;
		const unsigned char *f = _Unwind_Find_FDE((void *)pc, &bases);
		ck_assert_ptr_nonnull(f);
		ck_assert_ptr_eq(bases.func, (void *)(ms_tramp_base + (size_t)i * MS_TRAMP_SIZE));
		struct ms_cfi_rule r;
		/* the return address is computed by an expression: the quick unwinder must not guess */
		ck_assert_int_eq(ms_cfi_fde_rule(f, pc, &r), -1);
		ck_assert_int_eq(ms_cfi_rule_at(pc, &r), -1);
		ck_assert_int_eq(ms_tramp_index(pc + 1), i);
	}
}
END_TEST

#define MAXF 64

struct frames {
	int n;
	uintptr_t ip[MAXF], raw[MAXF], slot[MAXF];
	int tramp[MAXF];
};

static void record(struct frames *out, struct ms_cursor *c)
{
	out->n = 0;
	do {
		out->ip[out->n] = c->ip;
		out->raw[out->n] = c->raw;
		out->slot[out->n] = c->slot;
		out->tramp[out->n] = c->tramp;
		out->n++;
	} while (out->n < MAXF && ms_cursor_step(c) == 1);
}

/* The walks from here: plain, and with this frame's return address handed to trampoline T. */
static __attribute__((noinline)) void walk_both(int full, int t, struct frames *plain, struct frames *tr,
						 uintptr_t *slot_out)
{
	struct ms_unw_space space;
	struct ms_cursor c;
	uintptr_t *slot = (uintptr_t *)__builtin_frame_address(0) + 1; /* built with frame pointers */
	ck_assert_int_eq(ms_cursor_here(&c, full ? &space : NULL), 0);
	record(plain, &c);
	uintptr_t ra = *slot;
	ms_pool_set_ra(t, ra);
	*(volatile uintptr_t *)slot = ms_tramp_addr(t);
	ck_assert_int_eq(ms_cursor_here(&c, full ? &space : NULL), 0);
	record(tr, &c);
	*(volatile uintptr_t *)slot = ra;
	*slot_out = (uintptr_t)slot;
}

static void check_trampoline_translated(int full)
{
	ck_assert_int_eq(ms_pool_init(), 0);
	int t = ms_pool_take();
	ck_assert_int_ge(t, 0);
	static struct frames plain, tr;
	uintptr_t slot;
	walk_both(full, t, &plain, &tr, &slot);
	ck_assert_int_ge(plain.n, 3);
	ck_assert_int_eq(plain.n, tr.n);
	int seen = 0;
	for (int k = 1; k < plain.n; k++) { /* frame 0: inside walk_both, at two different places */
		ck_assert_uint_eq(tr.ip[k], plain.ip[k]);
		ck_assert_uint_eq(tr.slot[k], plain.slot[k]);
		if (tr.slot[k] == slot) {
			seen = 1;
			ck_assert_uint_eq(tr.raw[k], ms_tramp_addr(t));
			ck_assert_int_eq(tr.tramp[k], t);
		} else {
			ck_assert_uint_eq(tr.raw[k], plain.raw[k]);
			ck_assert_int_eq(tr.tramp[k], -1);
		}
	}
	ck_assert(seen);
	ms_pool_give(t);
}

START_TEST(cursor_translates_a_trampoline)
{
	check_trampoline_translated(0);
}
END_TEST

START_TEST(cursor_with_libunwind_translates_a_trampoline)
{
	ms_unwinder_init();
	ck_assert_ptr_nonnull(ms_unw_getcontext);
	check_trampoline_translated(1);
}
END_TEST

/* ---- glibc's own functions ------------------------------------------------------------------- */

static int in_libc(uintptr_t ip)
{
	Dl_info info;
	return dladdr((void *)ip, &info) && info.dli_fname && strstr(info.dli_fname, "libc.so.6");
}

START_TEST(glibc_functions_start_with_the_call_rule)
{
	const char *names[] = { "qsort", "getenv", "strtol", "fopen", "bsearch", "setlocale" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		uintptr_t pc = (uintptr_t)dlsym(RTLD_DEFAULT, names[i]);
		ck_assert_msg(pc && in_libc(pc), "%s is glibc's", names[i]);
		struct ms_cfi_rule r;
		ck_assert_msg(ms_cfi_rule_at(pc, &r) == 0, "%s: rule at entry", names[i]);
		assert_rule(&r, 0, 8, 0, 0);
	}
}
END_TEST

/* A walk with libunwind from its caller's frame: return-address slots and return addresses. */
static __attribute__((noinline)) void libunwind_walk(struct frames *out, int *signal_at)
{
	unw_context_t uc;
	unw_cursor_t cur;
	unw_getcontext(&uc);
	unw_init_local(&cur, &uc);
	out->n = 0;
	*signal_at = -1;
	while (out->n < MAXF && unw_step(&cur) > 0) {
		unw_word_t ip, sp;
		unw_get_reg(&cur, UNW_REG_IP, &ip);
		unw_get_reg(&cur, UNW_REG_SP, &sp);
		if (*signal_at < 0 && unw_is_signal_frame(&cur) > 0)
			*signal_at = out->n;
		out->ip[out->n] = ip;
		out->slot[out->n] = sp - 8;
		out->n++;
	}
}

/* The quick walk from its caller's frame; *END: the last step's result. */
static __attribute__((noinline)) void quick_walk(struct frames *out, int *end)
{
	struct ms_cursor c;
	ms_cursor_here(&c, NULL);
	out->n = 0;
	while (out->n < MAXF && (*end = ms_cursor_step(&c)) == 1) {
		out->ip[out->n] = c.ip;
		out->slot[out->n] = c.slot;
		out->n++;
	}
}

static struct frames quick, full;
static int quick_end, signal_at, compared;

/* The quick walk is libunwind's, frame for frame, as far as it goes (frame 0: the two walks'
 * callers, at their two call sites). */
static int agree(void)
{
	int n = quick.n < full.n ? quick.n : full.n;
	ck_assert_uint_eq(quick.slot[0], full.slot[0]);
	for (int k = 1; k < n; k++)
		if (quick.ip[k] != full.ip[k] || quick.slot[k] != full.slot[k])
			return 0;
	return n;
}

static int compare(const void *a, const void *b)
{
	if (!compared) {
		compared = 1;
		quick_walk(&quick, &quick_end);
		libunwind_walk(&full, &signal_at);
		__asm__ volatile("" ::: "memory");
	}
	return *(const int *)a - *(const int *)b;
}

START_TEST(walk_through_qsort_agrees_with_libunwind)
{
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	compared = 0;
	qsort(v, 64, sizeof *v, compare);
	ck_assert(compared);
	int n = agree();
	ck_assert_int_ge(n, 4);
	int libc = 0;
	for (int k = 1; k < n; k++)
		libc += in_libc(quick.ip[k]);
	ck_assert_int_ge(libc, 1); /* qsort's own frames were stepped through */
	/* and up to this test at least: a frame returning into this file's function */
	Dl_info self, here;
	ck_assert(dladdr((void *)compare, &self));
	int home = 0;
	for (int k = 0; k < n; k++)
		home |= dladdr((void *)quick.ip[k], &here) && here.dli_fbase == self.dli_fbase && !in_libc(quick.ip[k]);
	ck_assert(home);
}
END_TEST

static void on_signal(int sig)
{
	quick_walk(&quick, &quick_end);
	libunwind_walk(&full, &signal_at);
	__asm__ volatile("" ::: "memory"); /* no tail call: both walks start from this frame */
}

START_TEST(signal_frame_is_where_libunwind_sees_it)
{
	signal(SIGUSR1, on_signal);
	raise(SIGUSR1);
	ck_assert_int_eq(quick_end, 2);
	ck_assert_int_ge(signal_at, 0);
	/* the quick walk stops at the handler's return (__restore_rt); libunwind marks the frame past
	 * it, the one the signal interrupted */
	ck_assert_int_eq(quick.n, signal_at);
	ck_assert_int_eq(agree(), quick.n);
	ck_assert(in_libc(quick.ip[quick.n - 1]));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cfi");
	TCase *tc = tcase_create("bytes");
	tcase_add_test(tc, entry_of_a_function);
	tcase_add_test(tc, frame_pointer_prologue_and_epilogue);
	tcase_add_test(tc, restore_goes_back_to_the_cie);
	tcase_add_test(tc, advances_of_every_size_and_set_loc);
	tcase_add_test(tc, factored_and_signed_forms);
	tcase_add_test(tc, outermost_and_signal_frames);
	tcase_add_test(tc, rules_not_followed_are_refused);
	tcase_add_test(tc, pc_relative_encoding);
	suite_add_tcase(s, tc);
	tc = tcase_create("trampolines");
	tcase_add_test(tc, trampolines_have_an_entry_the_quick_unwinder_leaves_alone);
	tcase_add_test(tc, cursor_translates_a_trampoline);
	tcase_add_test(tc, cursor_with_libunwind_translates_a_trampoline);
	suite_add_tcase(s, tc);
	tc = tcase_create("glibc");
	tcase_add_test(tc, glibc_functions_start_with_the_call_rule);
	tcase_add_test(tc, walk_through_qsort_agrees_with_libunwind);
	tcase_add_test(tc, signal_frame_is_where_libunwind_sees_it);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
