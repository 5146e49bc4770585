/* A small x86-64 unwinder for the quick look at the stack: the CFA rule of each return address is
 * read once from its object's .eh_frame (through .eh_frame_hdr) and cached; a frame then costs a
 * hash lookup and two loads.  Only the common rules are understood (CFA = rsp/rbp + offset, return
 * address at CFA - 8, rbp saved at CFA + offset or kept); anything else reports failure and the
 * caller falls back to libunwind.  It never writes anything: its answers are only ever used to
 * confirm that nothing new is on the stack. */
#include <link.h>
#include <string.h>
#include "core/ms.h"
#include "native/native.h"

#define NRULES 8192      /* the big cache, mapped once the small one is half full */
#define NRULES_SMALL 512 /* in .bss: 8 KiB, two pages (a Python start needs about 50 rules) */
#define MAX_CFI_OBJS 2048
#define STATE_DEPTH 8

/* DWARF register numbers (x86-64 psABI) of the three registers the quick unwinder follows. */
enum { REG_RBP = 6, REG_RSP = 7, REG_RIP = 16 };

/* Call frame instructions (DWARF 5, 6.4.2; GNU_args_size is the GCC extension).  The three "high"
 * ones carry their operand in the opcode's low 6 bits. */
enum cfa_op {
	DW_CFA_nop = 0x00,
	DW_CFA_set_loc = 0x01,
	DW_CFA_advance_loc1 = 0x02,
	DW_CFA_advance_loc2 = 0x03,
	DW_CFA_advance_loc4 = 0x04,
	DW_CFA_offset_extended = 0x05,
	DW_CFA_restore_extended = 0x06,
	DW_CFA_undefined = 0x07,
	DW_CFA_same_value = 0x08,
	DW_CFA_register = 0x09,
	DW_CFA_remember_state = 0x0a,
	DW_CFA_restore_state = 0x0b,
	DW_CFA_def_cfa = 0x0c,
	DW_CFA_def_cfa_register = 0x0d,
	DW_CFA_def_cfa_offset = 0x0e,
	DW_CFA_def_cfa_expression = 0x0f,
	DW_CFA_expression = 0x10,
	DW_CFA_offset_extended_sf = 0x11,
	DW_CFA_def_cfa_sf = 0x12,
	DW_CFA_def_cfa_offset_sf = 0x13,
	DW_CFA_val_offset = 0x14,
	DW_CFA_val_offset_sf = 0x15,
	DW_CFA_val_expression = 0x16,
	DW_CFA_GNU_args_size = 0x2e,
	DW_CFA_advance_loc = 0x40,
	DW_CFA_offset = 0x80,
	DW_CFA_restore = 0xc0,
};
#define DW_CFA_HIGH_MASK 0xc0

/* Pointer encodings of .eh_frame and .eh_frame_hdr (LSB 4.1, "DWARF Exception Header Encoding"). */
enum eh_pe {
	DW_EH_PE_absptr = 0x00,
	DW_EH_PE_uleb128 = 0x01,
	DW_EH_PE_udata2 = 0x02,
	DW_EH_PE_udata4 = 0x03,
	DW_EH_PE_udata8 = 0x04,
	DW_EH_PE_sleb128 = 0x09,
	DW_EH_PE_sdata2 = 0x0a,
	DW_EH_PE_sdata4 = 0x0b,
	DW_EH_PE_sdata8 = 0x0c,
	DW_EH_PE_pcrel = 0x10,
	DW_EH_PE_datarel = 0x30,
	DW_EH_PE_indirect = 0x80,
	DW_EH_PE_omit = 0xff,
};
#define DW_EH_PE_FORMAT 0x0f
#define DW_EH_PE_APPLY 0x70

struct cfi_obj {
	uintptr_t lo, hi;         /* executable segment */
	const unsigned char *hdr; /* .eh_frame_hdr */
};

/* The rule cache: a small table first, a big one mapped when the small one is half full (lookups
 * then go to the big one alone, which took the small one's rules).  Return
 * addresses spread over all of a table's pages: the big one alone took a Python start some 50
 * faults (twice per page read before written), or 65 us to map with its pages in place. */
struct rule_slot {
	uintptr_t ip; /* 0: empty */
	uint64_t word;
};
static struct rule_slot small_rules[NRULES_SMALL] __attribute__((aligned(4096))) MS_LARGE;
static unsigned nsmall; /* rules in small_rules (lock_word held) */
static struct cfi_obj objs[MAX_CFI_OBJS] MS_LARGE;
static int nobjs;
static int lock_word;
__thread int ms_cfi_new_ip __attribute__((tls_model("initial-exec")));

/* A rule packed in one cache word: valid, cfa register, rbp saved, outermost, signal frame, then
 * the two offsets (16 bits each: compute refuses larger ones). */
static uint64_t pack(const struct ms_cfi_rule *r)
{
	return 1ULL | (uint64_t)(r->cfa_rbp & 1) << 1 | (uint64_t)(r->rbp_saved & 1) << 2 |
	       (uint64_t)(r->outermost & 1) << 3 | (uint64_t)(r->signal & 1) << 4 |
	       (uint64_t)(uint16_t)(int16_t)r->cfa_off << 16 | (uint64_t)(uint16_t)(int16_t)r->rbp_off << 32;
}

static struct ms_cfi_rule unpack(uint64_t w)
{
	return (struct ms_cfi_rule){
		.valid = (int)(w & 1),
		.cfa_rbp = (int)(w >> 1 & 1),
		.rbp_saved = (int)(w >> 2 & 1),
		.outermost = (int)(w >> 3 & 1),
		.signal = (int)(w >> 4 & 1),
		.cfa_off = (int16_t)(uint16_t)(w >> 16),
		.rbp_off = (int16_t)(uint16_t)(w >> 32),
	};
}

/* ---- reading DWARF ------------------------------------------------------------------------- */

static uint64_t uleb(const unsigned char **p, const unsigned char *end)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (*p < end) {
		unsigned char b = *(*p)++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t sleb(const unsigned char **p, const unsigned char *end)
{
	uint64_t v = 0;
	unsigned shift = 0;
	unsigned char b = 0;
	while (*p < end) {
		b = *(*p)++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift; /* sign-extend */
	return (int64_t)v;
}

/* Reads a fixed-size little-endian integer of SIZE bytes (sign-extended when SIGNED); -1 when the
 * bytes run past END. */
static int fixed(const unsigned char **p, const unsigned char *end, unsigned size, int is_signed, int64_t *v)
{
	if (end - *p < (ptrdiff_t)size)
		return -1;
	uint64_t u = 0;
	memcpy(&u, *p, size); /* little-endian: the low bytes */
	*p += size;
	if (is_signed && size < 8 && (u >> (8 * size - 1) & 1))
		u |= ~(uint64_t)0 << (8 * size);
	*v = (int64_t)u;
	return 0;
}

/* Reads a pointer in ENC (absptr/udata/sdata 2,4,8, uleb/sleb; pcrel or absolute); -1 for others. */
static int read_enc(const unsigned char **p, const unsigned char *end, unsigned char enc, uintptr_t *out)
{
	const unsigned char *at = *p;
	int64_t v;
	int bad = 0;
	if (enc == DW_EH_PE_omit)
		return -1;
	switch (enc & DW_EH_PE_FORMAT) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		bad = fixed(p, end, 8, 0, &v);
		break;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		bad = fixed(p, end, 4, (enc & DW_EH_PE_FORMAT) == DW_EH_PE_sdata4, &v);
		break;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		bad = fixed(p, end, 2, (enc & DW_EH_PE_FORMAT) == DW_EH_PE_sdata2, &v);
		break;
	case DW_EH_PE_uleb128:
		v = (int64_t)uleb(p, end);
		break;
	case DW_EH_PE_sleb128:
		v = sleb(p, end);
		break;
	default:
		return -1;
	}
	if (bad)
		return -1;
	if ((enc & DW_EH_PE_APPLY) == DW_EH_PE_pcrel)
		v += (int64_t)(uintptr_t)at;
	else if ((enc & DW_EH_PE_APPLY) != 0)
		return -1;
	*out = (uintptr_t)v;
	return 0;
}

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	unsigned char fde_enc;
	int has_z, signal;
	const unsigned char *insns, *end;
};

/* Reads the augmentation data of a "z" CIE: the FDE pointer encoding, signal frames. */
static int parse_augmentation(const char *aug, const unsigned char *p, const unsigned char *end, struct cie *cie)
{
	for (const char *a = aug + 1; *a && p < end; a++) {
		if (*a == 'R') {
			cie->fde_enc = *p++;
		} else if (*a == 'L') {
			p++;
		} else if (*a == 'P') {
			uintptr_t ignored;
			unsigned char enc = *p++;
			if (read_enc(&p, end, enc & ~DW_EH_PE_indirect, &ignored) < 0)
				return -1;
		} else if (*a == 'S') {
			cie->signal = 1;
		} else {
			break;
		}
	}
	return 0;
}

static int parse_cie(const unsigned char *c, struct cie *cie)
{
	uint32_t len;
	memcpy(&len, c, 4);
	if (len == 0 || len == 0xffffffff)
		return -1;
	const unsigned char *p = c + 8, *end = c + 4 + len;
	unsigned version = *p++;
	const char *aug = (const char *)p;
	while (p < end && *p) /* no strnlen: on a sampled call its first use would run the lazy */
		p++;          /* binder, ~2.7 KiB of a small thread's stack */
	p++;
	if (p > end)
		return -1;
	*cie = (struct cie){ .code_align = uleb(&p, end) };
	cie->data_align = sleb(&p, end);
	cie->ra_reg = version == 1 ? *p++ : uleb(&p, end);
	cie->has_z = aug[0] == 'z';
	if (cie->has_z) {
		uint64_t n = uleb(&p, end);
		if (parse_augmentation(aug, p, end, cie) < 0)
			return -1;
		p += n;
	} else if (aug[0]) {
		return -1;
	}
	cie->insns = p;
	cie->end = end;
	return p <= end ? 0 : -1;
}

/* How a register of the caller is found: as in the callee (same value), saved at CFA + offset,
 * undefined (the return address column of the outermost frame), or some way the quick unwinder
 * does not follow.  UNKNOWN: no rule yet (the return address before the CIE sets one). */
enum how { HOW_UNKNOWN = -1, HOW_SAME, HOW_AT_CFA, HOW_UNDEFINED, HOW_OTHER };

struct reg_rule {
	int how;
	int64_t off; /* HOW_AT_CFA: from the CFA */
};

struct regs_state {
	int cfa_reg;
	int64_t cfa_off;
	struct reg_rule rbp, rip;
};

/* REG's rule becomes RULE: 0, or -1 when the frame can no longer be followed (rsp, rbp or the
 * return address recovered some way the quick unwinder does not read).  Other registers are never
 * needed, and rsp is always the CFA. */
static int set_rule(struct regs_state *st, uint64_t reg, struct reg_rule rule)
{
	switch (reg) {
	case REG_RBP:
		if (rule.how != HOW_SAME && rule.how != HOW_AT_CFA)
			return -1;
		st->rbp = rule;
		return 0;
	case REG_RIP:
		if (rule.how != HOW_AT_CFA && rule.how != HOW_UNDEFINED)
			return -1;
		st->rip = rule;
		return 0;
	case REG_RSP:
		return rule.how == HOW_SAME || rule.how == HOW_AT_CFA ? 0 : -1;
	default:
		return 0;
	}
}

/* REG's rule becomes the one the CIE's instructions left (DW_CFA_restore). */
static void restore_rule(struct regs_state *st, const struct regs_state *initial, uint64_t reg)
{
	if (reg == REG_RBP)
		st->rbp = initial->rbp;
	else if (reg == REG_RIP)
		st->rip = initial->rip;
}

/* A CFA program being run up to the instruction at PC. */
struct program {
	const unsigned char *p, *end;
	const struct cie *cie;
	uintptr_t loc, pc; /* location reached; the instruction whose rule is wanted */
	struct regs_state *st;
	const struct regs_state *initial; /* after the CIE's instructions (the FDE's DW_CFA_restore) */
	struct regs_state saved[STATE_DEPTH];
	int depth;
};

enum { RUN_ON = 0, RUN_DONE = 1, RUN_FAIL = -1 };

/* Moves the location by DELTA code units: RUN_DONE once it would pass PC. */
static int advance(struct program *pr, uint64_t delta)
{
	uintptr_t adv = delta * pr->cie->code_align;
	if (pr->loc + adv > pr->pc)
		return RUN_DONE;
	pr->loc += adv;
	return RUN_ON;
}

static int advance_fixed(struct program *pr, unsigned size)
{
	int64_t v;
	if (fixed(&pr->p, pr->end, size, 0, &v) < 0)
		return RUN_FAIL;
	return advance(pr, (uint64_t)v);
}

static int set_loc(struct program *pr)
{
	uintptr_t to;
	if (read_enc(&pr->p, pr->end, pr->cie->fde_enc, &to) < 0)
		return RUN_FAIL;
	if (to > pr->pc)
		return RUN_DONE;
	pr->loc = to;
	return RUN_ON;
}

/* Rule REG = saved at CFA + FACTORED * data alignment. */
static int saved_at(struct program *pr, uint64_t reg, int64_t factored)
{
	struct reg_rule rule = { .how = HOW_AT_CFA, .off = factored * pr->cie->data_align };
	return set_rule(pr->st, reg, rule) < 0 ? RUN_FAIL : RUN_ON;
}

/* Rule REG = HOW, after skipping its operand of SKIP uleb/sleb numbers or a block (-1). */
static int other_rule(struct program *pr, int how, int skip)
{
	uint64_t reg = uleb(&pr->p, pr->end);
	if (skip < 0) {
		uint64_t len = uleb(&pr->p, pr->end);
		if (len > (uint64_t)(pr->end - pr->p))
			return RUN_FAIL;
		pr->p += len;
	}
	while (skip-- > 0)
		uleb(&pr->p, pr->end); /* a sleb's bytes are skipped the same way */
	return set_rule(pr->st, reg, (struct reg_rule){ .how = how }) < 0 ? RUN_FAIL : RUN_ON;
}

static int remember_state(struct program *pr)
{
	if (pr->depth == STATE_DEPTH)
		return RUN_FAIL;
	pr->saved[pr->depth++] = *pr->st;
	return RUN_ON;
}

static int restore_state(struct program *pr)
{
	if (pr->depth == 0)
		return RUN_FAIL;
	*pr->st = pr->saved[--pr->depth];
	return RUN_ON;
}

/* The instructions with their operand in the opcode (advance_loc, offset, restore). */
static int high_op(struct program *pr, unsigned char op)
{
	uint64_t low = op & ~DW_CFA_HIGH_MASK;
	switch (op & DW_CFA_HIGH_MASK) {
	case DW_CFA_advance_loc:
		return advance(pr, low);
	case DW_CFA_offset:
		return saved_at(pr, low, (int64_t)uleb(&pr->p, pr->end));
	default: /* DW_CFA_restore */
		restore_rule(pr->st, pr->initial, low);
		return RUN_ON;
	}
}

/* Instructions that define the CFA. */
static int cfa_op(struct program *pr, unsigned char op)
{
	struct regs_state *st = pr->st;
	switch (op) {
	case DW_CFA_def_cfa:
		st->cfa_reg = (int)uleb(&pr->p, pr->end);
		st->cfa_off = (int64_t)uleb(&pr->p, pr->end);
		return RUN_ON;
	case DW_CFA_def_cfa_sf:
		st->cfa_reg = (int)uleb(&pr->p, pr->end);
		st->cfa_off = sleb(&pr->p, pr->end) * pr->cie->data_align;
		return RUN_ON;
	case DW_CFA_def_cfa_register:
		st->cfa_reg = (int)uleb(&pr->p, pr->end);
		return RUN_ON;
	case DW_CFA_def_cfa_offset:
		st->cfa_off = (int64_t)uleb(&pr->p, pr->end);
		return RUN_ON;
	case DW_CFA_def_cfa_offset_sf:
		st->cfa_off = sleb(&pr->p, pr->end) * pr->cie->data_align;
		return RUN_ON;
	default: /* DW_CFA_def_cfa_expression: not followed */
		return RUN_FAIL;
	}
}

/* One instruction: RUN_ON, RUN_DONE once the location passes PC, RUN_FAIL when not understood. */
static int one_op(struct program *pr)
{
	unsigned char op = *pr->p++;
	if (op & DW_CFA_HIGH_MASK)
		return high_op(pr, op);
	uint64_t reg;
	switch (op) {
	case DW_CFA_nop:
		return RUN_ON;
	case DW_CFA_set_loc:
		return set_loc(pr);
	case DW_CFA_advance_loc1:
		return advance_fixed(pr, 1);
	case DW_CFA_advance_loc2:
		return advance_fixed(pr, 2);
	case DW_CFA_advance_loc4:
		return advance_fixed(pr, 4);
	case DW_CFA_offset_extended:
		reg = uleb(&pr->p, pr->end);
		return saved_at(pr, reg, (int64_t)uleb(&pr->p, pr->end));
	case DW_CFA_offset_extended_sf:
		reg = uleb(&pr->p, pr->end);
		return saved_at(pr, reg, sleb(&pr->p, pr->end));
	case DW_CFA_restore_extended:
		restore_rule(pr->st, pr->initial, uleb(&pr->p, pr->end));
		return RUN_ON;
	case DW_CFA_undefined:
		return other_rule(pr, HOW_UNDEFINED, 0);
	case DW_CFA_same_value:
		return other_rule(pr, HOW_SAME, 0);
	case DW_CFA_register:
	case DW_CFA_val_offset:
	case DW_CFA_val_offset_sf:
		return other_rule(pr, HOW_OTHER, 1);
	case DW_CFA_expression:
	case DW_CFA_val_expression:
		return other_rule(pr, HOW_OTHER, -1);
	case DW_CFA_remember_state:
		return remember_state(pr);
	case DW_CFA_restore_state:
		return restore_state(pr);
	case DW_CFA_GNU_args_size:
		uleb(&pr->p, pr->end);
		return RUN_ON;
	default:
		return cfa_op(pr, op);
	}
}

/* Runs the CFA instructions [P, END) from location START while it is <= PC, updating *ST; INITIAL
 * is what DW_CFA_restore goes back to.  -1 on anything not understood. */
static int run(const unsigned char *p, const unsigned char *end, const struct cie *cie, uintptr_t start, uintptr_t pc,
	       struct regs_state *st, const struct regs_state *initial)
{
	struct program pr; /* field by field: an initialiser would zero the saved states, most of a short run */
	pr.p = p, pr.end = end, pr.cie = cie, pr.loc = start, pr.pc = pc, pr.st = st, pr.initial = initial;
	pr.depth = 0;
	while (pr.p < pr.end) {
		int got = one_op(&pr);
		if (got != RUN_ON)
			return got == RUN_FAIL ? -1 : 0;
	}
	return 0;
}

/* ---- objects --------------------------------------------------------------------------------- */

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	const unsigned char *hdr = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			hdr = (const unsigned char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	for (int i = 0; i < info->dlpi_phnum && nobjs < MAX_CFI_OBJS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && hdr) {
			uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
			objs[nobjs++] = (struct cfi_obj){ lo, lo + ph->p_memsz, hdr };
		}
	}
	return 0;
}

static const unsigned char *hdr_for(uintptr_t pc)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < nobjs; i++)
			if (pc >= objs[i].lo && pc < objs[i].hi)
				return objs[i].hdr;
		if (pass == 0) { /* an object loaded since: list them again */
			nobjs = 0;
			dl_iterate_phdr(collect, NULL);
		}
	}
	return NULL;
}

static int32_t s32(const unsigned char *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

static const unsigned char *find_fde(const unsigned char *hdr, uintptr_t pc)
{
	if (hdr[0] != 1 /* version */ || hdr[2] != DW_EH_PE_udata4 || hdr[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return NULL;
	const unsigned char *p = hdr + 4;
	uintptr_t ignored;
	if (read_enc(&p, p + 8, hdr[1], &ignored) < 0)
		return NULL;
	uint32_t count;
	memcpy(&count, p, 4);
	const unsigned char *table = p + 4;
	intptr_t want = (intptr_t)(pc - (uintptr_t)hdr);
	if (count == 0 || s32(table) > want)
		return NULL;
	uint32_t lo = 0, hi = count;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s32(table + 8 * (size_t)mid) <= want)
			lo = mid;
		else
			hi = mid;
	}
	return hdr + s32(table + 8 * (size_t)lo + 4);
}

/* The rule of a frame state ST once its program has run: -1 when not one the quick unwinder
 * follows (CFA from another register, offsets past 16 bits, the return address elsewhere). */
static int rule_of_state(const struct regs_state *st, struct ms_cfi_rule *r)
{
	if ((st->cfa_reg != REG_RSP && st->cfa_reg != REG_RBP) || st->rbp.how < 0 || st->cfa_off > 32767 ||
	    st->cfa_off < -32768 || st->rbp.off > 32767 || st->rbp.off < -32768)
		return -1;
	if (st->rip.how == HOW_UNDEFINED) {
		*r = (struct ms_cfi_rule){ .valid = 1, .outermost = 1 };
		return 0;
	}
	if (st->rip.how != HOW_AT_CFA || st->rip.off != -8)
		return -1;
	*r = (struct ms_cfi_rule){
		.valid = 1,
		.cfa_rbp = st->cfa_reg == REG_RBP,
		.rbp_saved = st->rbp.how == HOW_AT_CFA,
		.cfa_off = (int32_t)st->cfa_off,
		.rbp_off = (int32_t)st->rbp.off,
	};
	return 0;
}

int ms_cfi_fde_rule(const unsigned char *fde, uintptr_t pc, struct ms_cfi_rule *r)
{
	uint32_t len;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffff)
		return -1;
	const unsigned char *cie_ptr = fde + 4 - s32(fde + 4);
	struct cie cie;
	if (parse_cie(cie_ptr, &cie) < 0 || cie.ra_reg != REG_RIP)
		return -1;
	if (cie.signal) { /* a signal handler's return: the caller stops here */
		*r = (struct ms_cfi_rule){ .valid = 1, .signal = 1 };
		return 0;
	}
	const unsigned char *p = fde + 8, *end = fde + 4 + len;
	uintptr_t start, range;
	if (read_enc(&p, end, cie.fde_enc, &start) < 0 || read_enc(&p, end, cie.fde_enc & DW_EH_PE_FORMAT, &range) < 0)
		return -1;
	if (pc < start || pc >= start + range)
		return -1;
	if (cie.has_z) {
		uint64_t n = uleb(&p, end);
		p += n;
	}
	/* before the CIE's instructions: the state at a call's target (CFA = rsp + 8, rbp kept) */
	struct regs_state st = {
		.cfa_reg = REG_RSP,
		.cfa_off = 8,
		.rbp = { .how = HOW_SAME },
		.rip = { .how = HOW_UNKNOWN },
	};
	if (run(cie.insns, cie.end, &cie, start, pc, &st, &st) < 0)
		return -1;
	struct regs_state initial = st;
	if (p > end || run(p, end, &cie, start, pc, &st, &initial) < 0)
		return -1;
	return rule_of_state(&st, r);
}

int ms_cfi_rule_at(uintptr_t pc, struct ms_cfi_rule *r)
{
	const unsigned char *hdr = hdr_for(pc);
	const unsigned char *fde = hdr ? find_fde(hdr, pc) : NULL;
	return fde ? ms_cfi_fde_rule(fde, pc, r) : -1;
}

/* The table lookups use: the small one, then the big one once mapped (the small one's rules
 * copied in first).  Its size follows from which it is: one load, never a torn pair. */
static struct rule_slot *active = small_rules;

static unsigned table_mask(const struct rule_slot *t)
{
	return t == small_rules ? NRULES_SMALL - 1 : NRULES - 1;
}

static unsigned rule_home(uintptr_t ip, unsigned mask)
{
	return (unsigned)((ip * 0x9e3779b97f4a7c15ULL) >> 40) & mask;
}

/* The slot of IP in table T, or of the empty slot ending its probes; NULL when 16 probes found
 * neither. */
static inline struct rule_slot *probe(struct rule_slot *t, uintptr_t ip)
{
	unsigned mask = table_mask(t), h = rule_home(ip, mask);
	for (int k = 0; k < 16; k++, h = (h + 1) & mask) {
		uintptr_t v = __atomic_load_n(&t[h].ip, __ATOMIC_ACQUIRE);
		if (v == ip || v == 0)
			return &t[h];
	}
	return NULL;
}

/* Maps the big table, copies the small one's rules into it and makes it the one looked up
 * (lock_word held); NULL when it cannot be mapped. */
static struct rule_slot *grow(void)
{
	struct rule_slot *big = ms_raw_map(NRULES * sizeof *big);
	if (!big)
		return NULL;
	for (unsigned i = 0; i < NRULES_SMALL; i++) {
		uintptr_t ip = __atomic_load_n(&small_rules[i].ip, __ATOMIC_RELAXED);
		struct rule_slot *e = ip ? probe(big, ip) : NULL;
		if (e && !e->ip)
			*e = small_rules[i];
	}
	__atomic_store_n(&active, big, __ATOMIC_RELEASE);
	return big;
}

/* Where a new rule goes (lock_word held): the small table while it is under half full, then the
 * big one; NULL when there is no room. */
static struct rule_slot *slot_for_new(uintptr_t ip)
{
	struct rule_slot *t = active;
	if (t == small_rules && nsmall >= NRULES_SMALL / 2 && !(t = grow()))
		return NULL;
	struct rule_slot *e = probe(t, ip);
	if (!e && t == small_rules && (t = grow())) /* 16 probes full: a crowded corner */
		e = probe(t, ip);
	if (e && t == small_rules && !e->ip)
		nsmall++;
	return e;
}

void ms_cfi_prepare(void)
{
	for (size_t off = 0; off < sizeof small_rules; off += 4096)
		ms_touch((char *)small_rules + off);
}

/* Reads and caches the rule of a return address never seen (or not cacheable): 0, or -1 when it
 * is not understood or another thread is reading unwind data (the caller falls back). */
static __attribute__((noinline)) int rule_uncached(uintptr_t ip, struct ms_cfi_rule *r)
{
	ms_cfi_new_ip = 1; /* never seen: it may belong to an object loaded since the last look */
	if (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
		return -1;
	struct ms_cfi_rule got;
	int ok = ms_cfi_rule_at(ip - 1, &got) == 0; /* the call is at IP - 1 */
	if (!ok)
		memset(&got, 0, sizeof got);
	struct rule_slot *e = slot_for_new(ip);
	if (e && !__atomic_load_n(&e->ip, __ATOMIC_RELAXED)) {
		__atomic_store_n(&e->word, got.valid ? pack(&got) : 0, __ATOMIC_RELAXED);
		__atomic_store_n(&e->ip, ip, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
	*r = got;
	return ok ? 0 : -1;
}

/* IP's rule: one probe sequence in the table looked up, the slow way only for a new address. */
static inline int rule_for(uintptr_t ip, struct ms_cfi_rule *r)
{
	struct rule_slot *e = probe(__atomic_load_n(&active, __ATOMIC_ACQUIRE), ip);
	if (MS_UNLIKELY(!e || __atomic_load_n(&e->ip, __ATOMIC_ACQUIRE) != ip))
		return rule_uncached(ip, r);
	*r = unpack(__atomic_load_n(&e->word, __ATOMIC_RELAXED));
	return r->valid ? 0 : -1;
}

/* One frame up: from the state (IP a return address, SP, RBP) of a frame to its caller's.
 * Returns 1 on success, 0 at the outermost frame, -1 when the rule is not known. */
int ms_cfi_step(uintptr_t *ip, uintptr_t *sp, uintptr_t *rbp, uintptr_t *slot)
{
	struct ms_cfi_rule r;
	if (rule_for(*ip, &r) < 0)
		return -1;
	if (r.outermost)
		return 0;
	if (r.signal)
		return 2;
	uintptr_t cfa = (r.cfa_rbp ? *rbp : *sp) + (intptr_t)r.cfa_off;
	if (cfa <= *sp || cfa & 7)
		return -1;
	if (r.rbp_saved)
		*rbp = *(const uintptr_t *)(cfa + (intptr_t)r.rbp_off);
	*slot = cfa - 8;
	*ip = *(const uintptr_t *)*slot;
	*sp = cfa;
	return 1;
}

int ms_cfi_cfa_from_rbp(uintptr_t ip)
{
	struct ms_cfi_rule r;
	return rule_for(ip, &r) < 0 || r.cfa_rbp;
}

static void clear_rules(struct rule_slot *t, unsigned size)
{
	for (unsigned i = 0; i < size; i++)
		__atomic_store_n(&t[i].ip, 0, __ATOMIC_RELAXED);
}

/* Forgets the cached rules (objects were unloaded: their addresses may be reused).  The table
 * looked up stays the same: the big one, once there is one. */
void ms_cfi_forget(void)
{
	if (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
		return;
	clear_rules(small_rules, NRULES_SMALL);
	if (active != small_rules)
		clear_rules(active, NRULES);
	nsmall = 0;
	nobjs = 0;
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}

/* A forked child may have inherited the lock from a thread that no longer exists. */
void ms_cfi_fork_child(void)
{
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}
