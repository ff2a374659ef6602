/* codel_law.h - CoDel's control law (RFC 8289) for every discipline that
 * drops by sojourn time at dequeue, as Linux's include/net/codel.h and
 * codel_impl.h serve sch_codel and sch_fq_codel: the state machine is here,
 * the queue is the caller's (codel: one FIFO; hdcodel: one FIFO whose drops
 * it may thin).
 *
 * Drop at dequeue once the sojourn time has stayed above `target` for at
 * least `interval`; while in the dropping state the next drop is scheduled by
 *     drop_next = t + interval / sqrt(count)                (RFC 8289 5.5)
 * 1/sqrt(count) is kept in Q32 fixed point and updated by one Newton step per
 * count increment, y <- y (3 - count y^2) / 2 (as Linux codel.h does); for
 * counts below 16, and when count is reset, it is set exactly from an integer
 * square root (drop path only, never per packet).
 *
 * The caller decides what happens to the packet the law wants dropped (the
 * `verdict` callback): drop it, or send it either as if it had been dropped
 * (count and drop_next advance, as for an ECN mark in Linux) or with the drop
 * still due (the next packet is judged again). codel always drops; the
 * callbacks are constant at each call site and the functions are inlined, so
 * codel pays nothing for the choice.
 */
#ifndef CKCD_CODEL_LAW_H
#define CKCD_CODEL_LAW_H

#include "aqm_impl.h"

/* target_ms and interval_ms: the table entries both disciplines share. */
#define CODEL_LAW_PARAM_TARGET { "target_ms", "ms", 1, 10000000, 5000, 3, AQM_PARAM_INT, 0 }
#define CODEL_LAW_PARAM_INTERVAL { "interval_ms", "ms", 1, 100000000, 100000, 3, AQM_PARAM_INT, 0 }

struct codel_law {
	uint64_t target_ns, interval_ns;
	uint64_t first_above_ns; /* 0: sojourn below target */
	uint64_t drop_next_ns;
	uint32_t count, lastcount;
	uint32_t invsqrt_q32; /* 1/sqrt(count), Q32 */
	uint8_t dropping;
	uint32_t maxpacket;
	uint64_t last_sojourn_ns;
};

/* What the caller did with the packet the law chose to drop. */
enum codel_verdict {
	CODEL_DROPPED,    /* given to aqm_drop_arriving: the law takes the next packet */
	CODEL_SENT_AS_DROP, /* sent; count and drop_next advance as if it were dropped */
	CODEL_SENT_DUE,   /* sent; the drop stays due and the next packet is judged */
};

/* 2^32 / sqrt(count), exact (from an integer square root). */
uint32_t aqm_codel_invsqrt_exact(uint32_t count);
/* "count=… lastcount=… dropping=… drop_next_ns=… ldelay_ns=… maxpacket=…" */
size_t aqm_codel_law_xstats(const struct codel_law *l, char *buf, size_t len, size_t pos);

/* From checked target_ms/interval_ms values (stored in µs: 3 decimals of ms). */
static inline void codel_law_init(struct codel_law *l, int64_t target_us, int64_t interval_us)
{
	l->target_ns = (uint64_t)target_us * 1000;
	l->interval_ns = (uint64_t)interval_us * 1000;
	l->invsqrt_q32 = 0xffffffffu;
}

/* After a flush: out of the dropping state, no sojourn above target yet
 * (maxpacket, learned from the traffic, stays). */
static inline void codel_law_restart(struct codel_law *l)
{
	l->first_above_ns = 0;
	l->drop_next_ns = 0;
	l->count = 0;
	l->lastcount = 0;
	l->invsqrt_q32 = 0xffffffffu;
	l->dropping = 0;
}

/* Every packet queued (enqueue and carry-over): RFC 8289's maxpacket. */
static inline void codel_law_queued(struct codel_law *l, const struct aqm_pkt *pkt)
{
	if (pkt->len > l->maxpacket)
		l->maxpacket = pkt->len;
}

/* Called after count++. One Newton step from 1/sqrt(count - 1) is accurate
 * to ~0.4 (1/count)^2 relative; below 16 (where that is poor: from count 1 it
 * gives 0.5 for 1/sqrt(2)) the exact value is used instead. */
static inline void codel_law_newton_step(struct codel_law *l)
{
	uint64_t y = l->invsqrt_q32;
	uint64_t y2 = (y * y) >> 32;
	uint64_t cy2 = (uint64_t)l->count * y2;
	uint64_t t;

	if (l->count < 16 || cy2 >= (UINT64_C(3) << 32)) { /* small, or out of Newton's basin */
		l->invsqrt_q32 = aqm_codel_invsqrt_exact(l->count);
		return;
	}
	t = ((UINT64_C(3) << 32) - cy2) >> 2;
	y = (y * t) >> 31;
	l->invsqrt_q32 = y > 0xffffffffu ? 0xffffffffu : (uint32_t)y;
}

static inline uint64_t codel_law_control(const struct codel_law *l, uint64_t t)
{
	return t + ((l->interval_ns * l->invsqrt_q32) >> 32);
}

/* n packets of this queue were dropped outside the law (fq_codel's overflow
 * drops from the fattest bucket): count them as the law's own, so its next
 * drops come sooner, as Linux's fq_codel tells its CoDel. Off the per-packet
 * path: 1/sqrt(count) is set exactly. */
static inline void codel_law_add_drops(struct codel_law *l, uint32_t n)
{
	l->count += n;
	if (l->dropping)
		l->invsqrt_q32 = aqm_codel_invsqrt_exact(l->count);
}

/* The verdict of plain CoDel (codel, fq_codel): the law's packet is dropped,
 * or with ecn=1, if it is ECN-capable, marked CE and sent, the law going on
 * as after a drop (as Linux's codel with ecn: count and the next drop time
 * advance). */
static inline enum codel_verdict codel_law_signal(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	if (aqm_mark_ce(q, pkt, AQM_DROP_DELAY))
		return CODEL_SENT_AS_DROP;
	aqm_drop_arriving(q, pkt, AQM_DROP_DELAY);
	return CODEL_DROPPED;
}

/* RFC 8289 dodequeue(): the next packet and whether it may be dropped. */
static inline __attribute__((always_inline)) struct aqm_pkt *
codel_law_head(struct aqm_queue *q, struct codel_law *l, uint64_t now_ns, void *src,
	       struct aqm_pkt *(*pop)(struct aqm_queue *, void *), int *ok_to_drop)
{
	struct aqm_pkt *pkt = pop(q, src);
	uint64_t sojourn;

	*ok_to_drop = 0;
	if (!pkt) {
		l->first_above_ns = 0;
		return 0;
	}
	sojourn = now_ns - pkt->enqueue_ns;
	l->last_sojourn_ns = sojourn;
	if (sojourn < l->target_ns || q->qlen_bytes <= l->maxpacket) {
		l->first_above_ns = 0;
	} else if (!l->first_above_ns) {
		l->first_above_ns = now_ns + l->interval_ns;
	} else if (now_ns >= l->first_above_ns) {
		*ok_to_drop = 1;
	}
	return pkt;
}

/* RFC 8289 dequeue(): the packet to send, or NULL. pop takes the next packet
 * from src; verdict is asked about every packet the law would drop. */
static inline __attribute__((always_inline)) struct aqm_pkt *
codel_law_dequeue(struct aqm_queue *q, struct codel_law *l, uint64_t now_ns, void *src,
		  struct aqm_pkt *(*pop)(struct aqm_queue *, void *),
		  enum codel_verdict (*verdict)(struct aqm_queue *, struct aqm_pkt *))
{
	int ok_to_drop;
	struct aqm_pkt *pkt = codel_law_head(q, l, now_ns, src, pop, &ok_to_drop);
	enum codel_verdict v;

	if (!pkt) {
		l->dropping = 0;
		return 0;
	}
	if (l->dropping) {
		if (!ok_to_drop)
			l->dropping = 0;
		while (l->dropping && now_ns >= l->drop_next_ns) {
			v = verdict(q, pkt);
			if (v == CODEL_SENT_DUE)
				return pkt;
			l->count++;
			codel_law_newton_step(l);
			if (v == CODEL_SENT_AS_DROP) {
				l->drop_next_ns = codel_law_control(l, l->drop_next_ns);
				return pkt;
			}
			pkt = codel_law_head(q, l, now_ns, src, pop, &ok_to_drop);
			if (!ok_to_drop)
				l->dropping = 0;
			else
				l->drop_next_ns = codel_law_control(l, l->drop_next_ns);
		}
	} else if (ok_to_drop) {
		uint32_t delta = l->count - l->lastcount;

		v = verdict(q, pkt);
		if (v == CODEL_SENT_DUE)
			return pkt; /* not dropping yet: the next packet may enter the state */
		if (v == CODEL_DROPPED)
			pkt = codel_law_head(q, l, now_ns, src, pop, &ok_to_drop);
		l->dropping = 1;
		if (delta > 1 && (int64_t)(now_ns - l->drop_next_ns) < (int64_t)(16 * l->interval_ns))
			l->count = delta;
		else
			l->count = 1;
		l->invsqrt_q32 = l->count == 1 ? 0xffffffffu : aqm_codel_invsqrt_exact(l->count);
		l->drop_next_ns = codel_law_control(l, now_ns);
		l->lastcount = l->count;
	}
	return pkt;
}

/* ---- one FIFO under the law: codel, and hdcodel around it ---------------- */

/* The first member of such a discipline's private state, so that both share
 * its enqueue tail, carry-over and xstats. */
struct codel_fifo {
	struct aqm_fifo fifo;
	uint32_t limit; /* packets */
	struct codel_law law;
};

/* codel.c: pop_raw and requeue of a struct codel_fifo discipline */
struct aqm_pkt *aqm_codel_fifo_pop_raw(struct aqm_queue *q);
int aqm_codel_fifo_requeue(struct aqm_queue *q, struct aqm_pkt *pkt);

static inline void codel_fifo_push(struct aqm_queue *q, struct codel_fifo *c, struct aqm_pkt *pkt)
{
	codel_law_queued(&c->law, pkt);
	aqm_fifo_push(&c->fifo, pkt);
	aqm_account_add(q, pkt);
}

/* Tail drop at the limit, else queue. */
static inline int codel_fifo_enqueue(struct aqm_queue *q, struct codel_fifo *c, struct aqm_pkt *pkt)
{
	if (q->qlen_pkts >= c->limit) {
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	codel_fifo_push(q, c, pkt);
	return AQM_QUEUED;
}

/* The `pop` of codel_law_dequeue for one FIFO (src is its struct aqm_fifo):
 * the head, unlinked and unaccounted. */
static inline struct aqm_pkt *codel_law_pop_fifo(struct aqm_queue *q, void *src)
{
	struct aqm_pkt *pkt = aqm_fifo_pop(src);

	if (pkt)
		aqm_account_remove(q, pkt);
	return pkt;
}

#endif
