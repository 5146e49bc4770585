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

enum { REG_RBP = 6, REG_RSP = 7, REG_RIP = 16 };

/* A cached rule, packed in one word: valid, cfa register, rbp saved, outermost, signal frame,
 * offsets. */
struct rule {
	int valid, cfa_rbp, rbp_saved, outermost, signal;
	int32_t cfa_off, rbp_off;
};

struct cfi_obj {
	uintptr_t lo, hi;          /* executable segment */
	const unsigned char *hdr;  /* .eh_frame_hdr */
};

/* The rule cache: a small table first, a big one mapped when the small one is half full.  Return
 * addresses spread over all of a table's pages: the big one alone took a Python start some 50
 * faults (twice per page read before written), or 65 us to map with its pages in place. */
struct rule_slot {
	uintptr_t ip; /* 0: empty */
	uint64_t word;
};
static struct rule_slot small_rules[NRULES_SMALL] __attribute__((aligned(4096))) MS_LARGE;
static unsigned nsmall; /* rules in small_rules (lock_word held) */
static struct rule_slot *rules;
static struct cfi_obj objs[MAX_CFI_OBJS] MS_LARGE;
static int nobjs;
static int lock_word;
__thread int ms_cfi_new_ip __attribute__((tls_model("initial-exec")));

static uint64_t pack(const struct rule *r)
{
	return 1ULL | (uint64_t)(r->cfa_rbp & 1) << 1 | (uint64_t)(r->rbp_saved & 1) << 2 |
	       (uint64_t)(r->outermost & 1) << 3 | (uint64_t)(r->signal & 1) << 4 |
	       (uint64_t)(uint16_t)(int16_t)r->cfa_off << 16 |
	       (uint64_t)(uint16_t)(int16_t)r->rbp_off << 32;
}

static struct rule unpack(uint64_t w)
{
	struct rule r = { (int)(w & 1), (int)(w >> 1 & 1), (int)(w >> 2 & 1), (int)(w >> 3 & 1),
			  (int)(w >> 4 & 1), (int16_t)(uint16_t)(w >> 16), (int16_t)(uint16_t)(w >> 32) };
	return r;
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

/* Reads a pointer in ENC (absptr/udata/sdata 2,4,8; pcrel or absolute); -1 for others. */
static int read_enc(const unsigned char **p, const unsigned char *end, unsigned char enc, uintptr_t *out)
{
	const unsigned char *at = *p;
	int64_t v;
	if (enc == 0xff)
		return -1;
	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c: {
		if (end - at < 8)
			return -1;
		uint64_t u;
		memcpy(&u, at, 8);
		v = (int64_t)u;
		*p += 8;
		break;
	}
	case 0x03: case 0x0b: {
		if (end - at < 4)
			return -1;
		if ((enc & 0x0f) == 0x03) {
			uint32_t u;
			memcpy(&u, at, 4);
			v = u;
		} else {
			int32_t s;
			memcpy(&s, at, 4);
			v = s;
		}
		*p += 4;
		break;
	}
	case 0x02: case 0x0a: {
		if (end - at < 2)
			return -1;
		if ((enc & 0x0f) == 0x02) {
			uint16_t u;
			memcpy(&u, at, 2);
			v = u;
		} else {
			int16_t s;
			memcpy(&s, at, 2);
			v = s;
		}
		*p += 2;
		break;
	}
	case 0x01:
		v = (int64_t)uleb(p, end);
		break;
	case 0x09:
		v = sleb(p, end);
		break;
	default:
		return -1;
	}
	if ((enc & 0x70) == 0x10)
		v += (int64_t)(uintptr_t)at;
	else if ((enc & 0x70) != 0)
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

static int parse_cie(const unsigned char *c, struct cie *cie)
{
	uint32_t len;
	memcpy(&len, c, 4);
	if (len == 0 || len == 0xffffffff)
		return -1;
	const unsigned char *p = c + 8, *end = c + 4 + len;
	unsigned version = *p++;
	const char *aug = (const char *)p;
	p += strnlen(aug, (size_t)(end - p)) + 1;
	if (p > end)
		return -1;
	cie->code_align = uleb(&p, end);
	cie->data_align = sleb(&p, end);
	cie->ra_reg = version == 1 ? *p++ : uleb(&p, end);
	cie->fde_enc = 0;
	cie->has_z = aug[0] == 'z';
	cie->signal = 0;
	if (cie->has_z) {
		uint64_t n = uleb(&p, end);
		const unsigned char *aug_end = p + n;
		for (const char *a = aug + 1; *a && p < end; a++) {
			if (*a == 'R') {
				cie->fde_enc = *p++;
			} else if (*a == 'L') {
				p++;
			} else if (*a == 'P') {
				uintptr_t ignored;
				unsigned char enc = *p++;
				if (read_enc(&p, end, enc & 0x7f, &ignored) < 0)
					return -1;
			} else if (*a == 'S') {
				cie->signal = 1;
			} else {
				break;
			}
		}
		p = aug_end;
	} else if (aug[0]) {
		return -1;
	}
	cie->insns = p;
	cie->end = end;
	return p <= end ? 0 : -1;
}

struct regs_state {
	int64_t cfa_off;
	int64_t rbp_off;
	int64_t rip_off;
	int cfa_reg;
	int rbp_how;  /* 0 same, 1 saved at CFA + off, -1 unknown */
	int rip_how;  /* 1 saved at CFA + off, 2 undefined, -1 unknown */
};

/* Runs CFA instructions [P, END) while the location is <= PC; -1 on anything not understood. */
static int run(const unsigned char *p, const unsigned char *end, const struct cie *cie, uintptr_t *loc,
	       uintptr_t pc, struct regs_state *st, const struct regs_state *initial, unsigned char enc)
{
	struct regs_state stack[STATE_DEPTH];
	int depth = 0;
	while (p < end) {
		unsigned char op = *p++;
		uint64_t reg, off;
		uintptr_t adv = 0;
		switch (op & 0xc0) {
		case 0x40:
			adv = (op & 0x3f) * cie->code_align;
			break;
		case 0x80:
			reg = op & 0x3f;
			off = uleb(&p, end);
			if (reg == REG_RBP) {
				st->rbp_how = 1;
				st->rbp_off = (int64_t)off * cie->data_align;
			} else if (reg == REG_RIP) {
				st->rip_how = 1;
				st->rip_off = (int64_t)off * cie->data_align;
			}
			continue;
		case 0xc0:
			reg = op & 0x3f;
			if (reg == REG_RBP) {
				st->rbp_how = initial->rbp_how;
				st->rbp_off = initial->rbp_off;
			} else if (reg == REG_RIP) {
				st->rip_how = initial->rip_how;
				st->rip_off = initial->rip_off;
			}
			continue;
		default:
			switch (op) {
			case 0x00:
				continue;
			case 0x02:
				if (p >= end)
					return -1;
				adv = *p++ * cie->code_align;
				break;
			case 0x03: {
				uint16_t v;
				if (end - p < 2)
					return -1;
				memcpy(&v, p, 2);
				p += 2;
				adv = v * cie->code_align;
				break;
			}
			case 0x04: {
				uint32_t v;
				if (end - p < 4)
					return -1;
				memcpy(&v, p, 4);
				p += 4;
				adv = v * cie->code_align;
				break;
			}
			case 0x01: {
				uintptr_t to;
				if (read_enc(&p, end, enc, &to) < 0)
					return -1;
				if (to > pc)
					return 0;
				*loc = to;
				continue;
			}
			case 0x05: case 0x11:
				reg = uleb(&p, end);
				{
					int64_t o = op == 0x05 ? (int64_t)uleb(&p, end) : sleb(&p, end);
					if (reg == REG_RBP) {
						st->rbp_how = 1;
						st->rbp_off = o * cie->data_align;
					} else if (reg == REG_RIP) {
						st->rip_how = 1;
						st->rip_off = o * cie->data_align;
					}
				}
				continue;
			case 0x06:
				reg = uleb(&p, end);
				if (reg == REG_RBP) {
					st->rbp_how = initial->rbp_how;
					st->rbp_off = initial->rbp_off;
				} else if (reg == REG_RIP) {
					st->rip_how = initial->rip_how;
					st->rip_off = initial->rip_off;
				}
				continue;
			case 0x07:
				reg = uleb(&p, end);
				if (reg == REG_RIP)
					st->rip_how = 2;
				else if (reg == REG_RBP || reg == REG_RSP)
					return -1;
				continue;
			case 0x08:
				reg = uleb(&p, end);
				if (reg == REG_RBP)
					st->rbp_how = 0;
				else if (reg == REG_RIP)
					return -1;
				continue;
			case 0x09:
				reg = uleb(&p, end);
				uleb(&p, end);
				if (reg == REG_RBP || reg == REG_RIP || reg == REG_RSP)
					return -1;
				continue;
			case 0x0a:
				if (depth == STATE_DEPTH)
					return -1;
				stack[depth++] = *st;
				continue;
			case 0x0b:
				if (depth == 0)
					return -1;
				*st = stack[--depth];
				continue;
			case 0x0c:
				st->cfa_reg = (int)uleb(&p, end);
				st->cfa_off = (int64_t)uleb(&p, end);
				continue;
			case 0x0d:
				st->cfa_reg = (int)uleb(&p, end);
				continue;
			case 0x0e:
				st->cfa_off = (int64_t)uleb(&p, end);
				continue;
			case 0x12:
				st->cfa_reg = (int)uleb(&p, end);
				st->cfa_off = sleb(&p, end) * cie->data_align;
				continue;
			case 0x13:
				st->cfa_off = sleb(&p, end) * cie->data_align;
				continue;
			case 0x10: case 0x16:
				reg = uleb(&p, end);
				off = uleb(&p, end);
				if (reg == REG_RBP || reg == REG_RIP || reg == REG_RSP || off > (uint64_t)(end - p))
					return -1;
				p += off;
				continue;
			case 0x14: case 0x15:
				reg = uleb(&p, end);
				if (op == 0x14)
					uleb(&p, end);
				else
					sleb(&p, end);
				if (reg == REG_RBP || reg == REG_RIP || reg == REG_RSP)
					return -1;
				continue;
			case 0x2e:
				uleb(&p, end);
				continue;
			default: /* def_cfa_expression and everything rarer */
				return -1;
			}
		}
		if (*loc + adv > pc)
			return 0;
		*loc += adv;
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
	if (hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b)
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

/* Computes the rule for return address IP (the call is at IP - 1). */
static int compute(uintptr_t ip, struct rule *r)
{
	uintptr_t pc = ip - 1;
	const unsigned char *hdr = hdr_for(pc);
	const unsigned char *fde = hdr ? find_fde(hdr, pc) : NULL;
	if (!fde)
		return -1;
	uint32_t len;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffff)
		return -1;
	const unsigned char *cie_ptr = fde + 4 - s32(fde + 4);
	struct cie cie;
	if (parse_cie(cie_ptr, &cie) < 0 || cie.ra_reg != REG_RIP)
		return -1;
	if (cie.signal) { /* a signal handler's return: the caller stops here */
		*r = (struct rule){ 1, 0, 0, 0, 1, 0, 0 };
		return 0;
	}
	const unsigned char *p = fde + 8, *end = fde + 4 + len;
	uintptr_t start, range;
	if (read_enc(&p, end, cie.fde_enc, &start) < 0 || read_enc(&p, end, cie.fde_enc & 0x0f, &range) < 0)
		return -1;
	if (pc < start || pc >= start + range)
		return -1;
	if (cie.has_z) {
		uint64_t n = uleb(&p, end);
		p += n;
	}
	struct regs_state st = { .cfa_reg = REG_RSP, .cfa_off = 8, .rbp_how = 0, .rbp_off = 0, .rip_how = -1, .rip_off = 0 }, initial;
	uintptr_t loc = start;
	if (run(cie.insns, cie.end, &cie, &loc, pc, &st, &st, cie.fde_enc) < 0)
		return -1;
	initial = st;
	loc = start;
	if (p > end || run(p, end, &cie, &loc, pc, &st, &initial, cie.fde_enc) < 0)
		return -1;
	if ((st.cfa_reg != REG_RSP && st.cfa_reg != REG_RBP) || st.rbp_how < 0 || st.cfa_off > 32767 ||
	    st.cfa_off < -32768 || st.rbp_off > 32767 || st.rbp_off < -32768)
		return -1;
	if (st.rip_how == 2) {
		*r = (struct rule){ 1, 0, 0, 1, 0, 0, 0 };
		return 0;
	}
	if (st.rip_how != 1 || st.rip_off != -8)
		return -1;
	*r = (struct rule){ 1, st.cfa_reg == REG_RBP, st.rbp_how == 1, 0, 0, (int32_t)st.cfa_off,
			    (int32_t)st.rbp_off };
	return 0;
}

static unsigned rule_home(uintptr_t ip, unsigned size)
{
	return (unsigned)((ip * 0x9e3779b97f4a7c15ULL) >> 40) % size;
}

/* The slot of IP in table T of SIZE slots, or of the empty slot ending its probes; NULL when 16
 * probes found neither. */
static struct rule_slot *probe(struct rule_slot *t, unsigned size, uintptr_t ip)
{
	unsigned h = rule_home(ip, size);
	for (int k = 0; k < 16; k++, h = (h + 1) % size) {
		uintptr_t v = __atomic_load_n(&t[h].ip, __ATOMIC_ACQUIRE);
		if (v == ip || v == 0)
			return &t[h];
	}
	return NULL;
}

/* Where a new rule goes (lock_word held): the small table while it is under half full, then the
 * big one, mapped at its first use; NULL when there is no room. */
static struct rule_slot *slot_for_new(uintptr_t ip)
{
	if (nsmall < NRULES_SMALL / 2) {
		struct rule_slot *e = probe(small_rules, NRULES_SMALL, ip);
		if (e && !__atomic_load_n(&e->ip, __ATOMIC_RELAXED))
			nsmall++;
		if (e)
			return e;
	}
	if (!rules) {
		struct rule_slot *big = ms_raw_map(NRULES * sizeof *rules);
		if (!big)
			return NULL;
		__atomic_store_n(&rules, big, __ATOMIC_RELEASE);
	}
	return probe(rules, NRULES, ip);
}

/* The slot holding IP in table T of SIZE slots, or NULL. */
static struct rule_slot *find(struct rule_slot *t, unsigned size, uintptr_t ip)
{
	struct rule_slot *e = probe(t, size, ip);
	return e && __atomic_load_n(&e->ip, __ATOMIC_ACQUIRE) == ip ? e : NULL;
}

void ms_cfi_prepare(void)
{
	for (size_t off = 0; off < sizeof small_rules; off += 4096)
		ms_touch((char *)small_rules + off);
}

/* IP's cached rule into *R: 1 when cached (valid or not), 0 when not seen. */
static int cached(uintptr_t ip, struct rule *r)
{
	struct rule_slot *big = __atomic_load_n(&rules, __ATOMIC_ACQUIRE);
	struct rule_slot *e = find(small_rules, NRULES_SMALL, ip);
	if (!e && big)
		e = find(big, NRULES, ip);
	if (!e)
		return 0;
	*r = unpack(__atomic_load_n(&e->word, __ATOMIC_RELAXED));
	return 1;
}

static int rule_for(uintptr_t ip, struct rule *r)
{
	if (cached(ip, r))
		return r->valid ? 0 : -1;
	ms_cfi_new_ip = 1; /* never seen: it may belong to an object loaded since the last look */
	if (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
		return -1; /* another thread is reading unwind data: let the caller fall back */
	struct rule got;
	int ok = compute(ip, &got) == 0;
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

/* One frame up: from the state (IP a return address, SP, RBP) of a frame to its caller's.
 * Returns 1 on success, 0 at the outermost frame, -1 when the rule is not known. */
int ms_cfi_step(uintptr_t *ip, uintptr_t *sp, uintptr_t *rbp, uintptr_t *slot)
{
	struct rule r;
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

static void clear_rules(struct rule_slot *t, unsigned size)
{
	for (unsigned i = 0; i < size; i++)
		__atomic_store_n(&t[i].ip, 0, __ATOMIC_RELAXED);
}

/* Forgets the cached rules (objects were unloaded: their addresses may be reused). */
void ms_cfi_forget(void)
{
	if (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
		return;
	clear_rules(small_rules, NRULES_SMALL);
	if (rules)
		clear_rules(rules, NRULES);
	nsmall = 0;
	nobjs = 0;
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}

/* A forked child may have inherited the lock from a thread that no longer exists. */
void ms_cfi_fork_child(void)
{
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}
