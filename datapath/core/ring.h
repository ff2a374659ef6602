/* ring.h - a FIFO of packet pointers with random access, for the disciplines
 * that compare an arrival with a random queued packet (choke, ckcd).
 *
 * Like Linux sch_choke's table: removing a packet from the middle leaves a
 * hole (NULL) that dequeue skips; holes at either end are trimmed at once.
 * The array has a power-of-two size of at least twice the packet limit and
 * is compacted in place (O(n), rare) if holes ever fill it.
 */
#ifndef CKCD_RING_H
#define CKCD_RING_H

#include "aqm_impl.h"

struct aqm_ring {
	struct aqm_pkt **slot;
	uint32_t mask;       /* size - 1 */
	uint32_t head, tail; /* free-running; tail - head slots in use (packets + holes) */
};

static inline int aqm_ring_alloc(struct aqm_ring *r, const struct aqm_env *env, uint32_t limit)
{
	uint32_t size = 4;

	while (size < 2 * limit && size < (1u << 31))
		size <<= 1;
	r->slot = env->alloc(env->ctx, (size_t)size * sizeof(r->slot[0]));
	if (!r->slot)
		return -1;
	r->mask = size - 1;
	r->head = r->tail = 0;
	return 0;
}

static inline void aqm_ring_free(struct aqm_ring *r, const struct aqm_env *env)
{
	if (r->slot)
		env->free(env->ctx, r->slot);
	r->slot = 0;
}

static inline void aqm_ring_compact(struct aqm_ring *r)
{
	uint32_t from, to = r->head;

	for (from = r->head; from != r->tail; from++) {
		struct aqm_pkt *p = r->slot[from & r->mask];

		if (p)
			r->slot[to++ & r->mask] = p;
	}
	r->tail = to;
}

/* 1 if no slot is free even after compacting the holes away. */
static inline int aqm_ring_full(struct aqm_ring *r)
{
	if (r->tail - r->head > r->mask) {
		aqm_ring_compact(r);
		return r->tail - r->head > r->mask;
	}
	return 0;
}

static inline int aqm_ring_push(struct aqm_ring *r, struct aqm_pkt *pkt)
{
	if (aqm_ring_full(r))
		return -1;
	r->slot[r->tail++ & r->mask] = pkt;
	return 0;
}

/* Slots outside [head, tail) are never read (a push overwrites one before
 * it is back inside), so the slot a pop leaves is not cleared. */
static inline struct aqm_pkt *aqm_ring_pop(struct aqm_ring *r)
{
	while (r->head != r->tail) {
		struct aqm_pkt *p = r->slot[r->head++ & r->mask];

		if (p)
			return p;
	}
	return 0;
}

static inline void aqm_ring_remove(struct aqm_ring *r, uint32_t idx)
{
	r->slot[idx & r->mask] = 0;
	while (r->head != r->tail && !r->slot[r->head & r->mask])
		r->head++;
	while (r->tail != r->head && !r->slot[(r->tail - 1) & r->mask])
		r->tail--;
}

/* The pick of a random queued packet after the first try, at offset i,
 * found a hole: 2 more tries drawn afresh, then the head. Out of line: the
 * callers keep fewer registers across their first draw. */
static __attribute__((noinline, unused)) struct aqm_pkt *aqm_ring_random_retry(struct aqm_ring *r,
										  struct aqm_queue *q,
										  uint32_t n, uint32_t *idx)
{
	int tries;

	for (tries = 0; tries < 2; tries++) {
		uint32_t i = r->head + aqm_random_below(q, n);
		struct aqm_pkt *p = r->slot[i & r->mask];

		if (p) {
			*idx = i;
			return p;
		}
	}
	*idx = r->head;
	return r->slot[r->head & r->mask];
}

/* The pick of a random queued packet, n = tail - head > 0 slots, first
 * trying offset i: up to 3 tries past holes, then the head. */
static inline struct aqm_pkt *aqm_ring_random_from(struct aqm_ring *r, struct aqm_queue *q,
						   uint32_t n, uint32_t i, uint32_t *idx)
{
	struct aqm_pkt *p = r->slot[(r->head + i) & r->mask];

	if (__builtin_expect(!p, 0))
		return aqm_ring_random_retry(r, q, n, idx);
	*idx = r->head + i;
	return p;
}

/* A random queued packet (3 tries past holes, then the head), or NULL. */
static inline struct aqm_pkt *aqm_ring_random(struct aqm_ring *r, struct aqm_queue *q,
					      uint32_t *idx)
{
	uint32_t n = r->tail - r->head;

	if (!n)
		return 0;
	return aqm_ring_random_from(r, q, n, aqm_random_below(q, n), idx);
}

/* The same with the first try from 16 random bits the caller has drawn
 * (multiply-shift: offset (r16 * n) >> 16; a ring of more than 2^16 slots
 * draws 32 bits afresh instead). */
static inline struct aqm_pkt *aqm_ring_random16(struct aqm_ring *r, struct aqm_queue *q,
						uint32_t r16, uint32_t *idx)
{
	uint32_t n = r->tail - r->head;

	if (!n)
		return 0;
	return aqm_ring_random_from(r, q, n, n <= (1u << 16) ? (r16 * n) >> 16 : aqm_random_below(q, n),
				    idx);
}

#endif
