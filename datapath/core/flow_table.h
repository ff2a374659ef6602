/* flow_table.h - per-flow state for the disciplines that keep some (cocoa,
 * fred, care): a fixed table, allocated once at init, of entries that each
 * begin with struct aqm_flow_head and carry the discipline's own fields after
 * it. A flow is found by its flow_hash within AQM_FLOW_PROBE slots of its
 * home slot. A flow with no entry claims a free slot in that window, else the
 * entry there that is not busy (no queued packets) and was seen longest ago
 * (an eviction: that flow starts afresh if it returns); when every entry in
 * the window is busy, aqm_flow_get() answers AQM_FLOW_NONE and the caller
 * decides (cocoa queues the packet in its overflow flow, as Linux fq does
 * with flows it cannot classify).
 *
 * Per packet: one multiply-shift and, when the flow sits in its home slot,
 * one comparison. Entries are found by slot index, so a discipline can link
 * entries into lists (cocoa's DRR lists) by index.
 */
#ifndef CKCD_FLOW_TABLE_H
#define CKCD_FLOW_TABLE_H

#include "aqm_impl.h"

#define AQM_FLOW_PROBE 8
#define AQM_FLOW_NONE 0xffffffffu

struct aqm_flow_head {
	uint32_t hash;
	/* Never evicted while > 0: the discipline counts here the flow's queued
	 * packets and anything else that refers to the entry (cocoa adds 1 while
	 * the entry sits on one of its DRR lists). */
	uint32_t busy;
	uint64_t last_seen_ns;
	uint8_t used;
};

struct aqm_flow_table {
	unsigned char *mem;
	uint32_t entry_size; /* bytes per entry, a multiple of 8, head first */
	uint32_t mask, shift; /* size - 1; 32 - log2(size) */
	uint32_t used;
	uint64_t evictions, refused; /* refused: every entry in the window was busy */
};

/* nflows (a power of two, >= AQM_FLOW_PROBE) entries of entry_size bytes, zeroed. */
static inline int aqm_flow_table_alloc(struct aqm_flow_table *t, const struct aqm_env *env,
				       uint32_t nflows, size_t entry_size)
{
	uint32_t log2 = 0;

	while ((1u << log2) < nflows)
		log2++;
	t->entry_size = (uint32_t)((entry_size + 7) & ~(size_t)7);
	t->mem = env->alloc(env->ctx, (size_t)t->entry_size << log2);
	if (!t->mem)
		return -1;
	t->mask = (1u << log2) - 1;
	t->shift = 32 - log2;
	t->used = 0;
	t->evictions = t->refused = 0;
	return 0;
}

static inline void aqm_flow_table_free(struct aqm_flow_table *t, const struct aqm_env *env)
{
	if (t->mem)
		env->free(env->ctx, t->mem);
	t->mem = 0;
}

static inline struct aqm_flow_head *aqm_flow_at(const struct aqm_flow_table *t, uint32_t slot)
{
	return (struct aqm_flow_head *)(t->mem + (size_t)slot * t->entry_size);
}

static inline uint32_t aqm_flow_home(const struct aqm_flow_table *t, uint32_t hash)
{
	return (hash * 0x9e3779b1u) >> t->shift;
}

/* The slot of the flow's entry, claimed (zeroed but for the head) if need be;
 * *fresh is 1 when the entry is new to this flow. AQM_FLOW_NONE when the
 * window is full of flows with queued packets. */
static inline uint32_t aqm_flow_get(struct aqm_flow_table *t, uint32_t hash, uint64_t now_ns,
				    int *fresh)
{
	uint32_t home = aqm_flow_home(t, hash), pick = AQM_FLOW_NONE, i;
	struct aqm_flow_head *f = aqm_flow_at(t, home), *p = 0;

	*fresh = 0;
	if (f->used && f->hash == hash)
		goto found;
	for (i = 0; i < AQM_FLOW_PROBE; i++) {
		uint32_t s = (home + i) & t->mask;

		f = aqm_flow_at(t, s);
		if (f->used && f->hash == hash) {
			home = s;
			goto found;
		}
		if (!f->used) {
			if (!p || p->used) {
				p = f;
				pick = s;
			}
		} else if (!f->busy && (!p || (p->used && f->last_seen_ns < p->last_seen_ns))) {
			p = f;
			pick = s;
		}
	}
	if (pick == AQM_FLOW_NONE) {
		t->refused++;
		return AQM_FLOW_NONE;
	}
	if (p->used)
		t->evictions++;
	else
		t->used++;
	aqm_zero(p, t->entry_size);
	p->used = 1;
	p->hash = hash;
	p->last_seen_ns = now_ns;
	*fresh = 1;
	return pick;
found:
	f->last_seen_ns = now_ns;
	return home;
}

#endif
