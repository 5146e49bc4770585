/* The chains remembered per thread (native/chains.h): made when a walk found nothing to take in
 * (or a target's frame it can take in again without walking), looked up by a hash of where the
 * call came from, forgotten when adopted (the chain used most is likely a loop's frames, taken in
 * instead).  Each thread's own: no lock, no allocation (the tables are in its state's mapping). */
#include "native/chains.h"

static void chain_forget(struct chain_set *set, struct chain_key *k)
{
	k->entry_key = 0; /* no expectation meets it either */
	set->tags &= ~(0xffULL << 8 * (k - set->way));
}

struct chain_key *ms_chain_add(struct tstate *s, const struct chain *ch, int n, uint32_t target)
{
	const struct frame *top = &s->f[s->n - 1];
	uint64_t tag;
	struct chain_set *set = chain_set(s, ch->entry_slot, ch->entry_ip, top->slot, &tag);
	struct chain_key *k = chain_find(set, tag, ch->entry_slot, ch->entry_ip, top, s->unloads_seen);
	if (k)
		return k; /* remembered already (a target's frame taken in again) */
	int w = 0;
	while (w < CHAIN_WAYS && (set->tags >> 8 * w & 0xff))
		w++;
	if (w == CHAIN_WAYS)
		w = (int)(s->chain_victim++ % CHAIN_WAYS);
	k = &set->way[w];
	k->top_slot = top->slot;
	k->entry_key = ch->entry_slot | (target != 0);
	k->entry_ip = ch->entry_ip;
	k->unloads = s->unloads_seen;
	k->n = n;
	k->target = target;
	for (int j = 0; j < n; j++) {
		k->fr[CHAIN_MAX - n + j] = (struct chain_frame){ s->c[j].slot, s->c[j].ra };
		k->stage[CHAIN_MAX - n + j] = (int8_t)(target >> j & 1 ? ms_syms_stage_at(s->c[j].ip - 1) : -1);
	}
	set->tags = (set->tags & ~(0xffULL << 8 * w)) | tag << 8 * w;
	return k;
}

/* Adopted: the next look takes in all its frames (native/check.c's chain_seen says why). */
void ms_chain_adopt(struct tstate *s, struct chain_key *k)
{
	struct chain_set *set = &s->chains[((char *)k - (char *)s->chains) / sizeof *set];
	chain_forget(set, k);
	s->adopt = 1;
	if (s->adoptions < ADOPT_BACKOFF)
		s->adoptions++;
	s->adopt_at = s->tpos + (ADOPT_HITS << s->adoptions);
}

struct chain_key *ms_chain_lookup(struct tstate *s, uintptr_t slot, uintptr_t ip)
{
	const struct frame *top = s->top;
	if (s->n == 0)
		return NULL;
	uint64_t tag;
	struct chain_set *set = chain_set(s, slot, ip, top->slot, &tag);
	struct chain_key *k = chain_find(set, tag, slot, ip, top, unloads_now());
	if (k) {
		STAT(looked_up);
		trace_found(s, k);
	}
	return k;
}
