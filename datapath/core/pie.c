/* pie.c - Proportional Integral controller Enhanced, RFC 8033, with the
 * constants and choices of Linux's sch_pie where the RFC leaves them open.
 *
 * One FIFO. Every `tupdate` the drop probability p follows the queue delay:
 *     p += alpha (qdelay - target) + beta (qdelay - qdelay_old)   (RFC 8033 4.2)
 * with alpha and beta scaled down while p is small (4.2's auto-tuning: /2
 * below 10 %, then /4 more for each decade down to 0.0001 %), p's rise held
 * to 2 % per update once p >= 10 %, 2 % more while qdelay > 250 ms (Linux),
 * p cut by 1/64 (Linux's 98.4 %; the RFC says 98 %) once two updates in a row
 * saw no delay, and p bounded to [0, 1].
 * qdelay is the sojourn of the last packet dequeued (0 once the queue is
 * empty), or with dq_rate_estimator=1 the backlog over the measured dequeue
 * rate (Little's law, 4.1 and 5.1; the rate measured over 16 KiB of
 * departures while that much is queued, averaged with weight 1/8).
 *
 * On arrival (4.1, 5.3, 5.4), past the `limit` check (overflow):
 *   no early drop during the burst allowance (`max_burst_ms` after the queue
 *   was last calm), while qdelay < target/2 and p < 20 %, or while less than
 *   two of the largest packets seen are queued;
 *   otherwise the de-randomized drop of 5.4: p (bytemode: p x size / largest
 *   packet) accumulates over the arrivals since the last drop; below 0.85 the
 *   packet passes, from 8.5 it is dropped, between them it is dropped with
 *   probability p; with ecn=1 an ECN-capable packet is marked instead while
 *   p <= 10 % (Linux's threshold).
 * The burst allowance shrinks by tupdate at each update (RFC 8033 5.2) and is
 * refilled, with the rate measurement restarted, once two updates in a row
 * saw qdelay below target/2 and p is 0 (Linux).
 *
 * The core has no timers: the update is run lazily (lazy_update.h), at the
 * next enqueue or dequeue, once for every tupdate period that has ended since
 * the last one, each on the queue as it was, so an idle queue decays exactly
 * as a timer would decay it. An idle queue's updates after the first reduce
 * to p's fall and the allowance's run-down, which run in one tight loop
 * (pie_idle); a run of updates stops early once one leaves the state
 * unchanged (the next would too: qdelay is the last dequeue's, so nothing
 * else moves). Probabilities are Q56 as Linux's (1.0 = 2^56 - 1); delays
 * in ns.
 */
#include "lazy_update.h"

#define PIE_P_ONE ((UINT64_C(1) << 56) - 1)
#define PIE_PERCENT (PIE_P_ONE / 100)
#define PIE_QUEUE_THRESHOLD 16384 /* bytes: what the rate is measured over (Linux, RFC 8033 5.1) */
#define PIE_DELAY_MAX ((UINT64_C(1) << 34) - 1) /* ns (~17 s): alpha x delay stays inside 63 bits */
#define PIE_DELAY_HIGH (250 * AQM_NSEC_PER_MSEC) /* above it p rises 2 % more per update (Linux) */

enum { P_LIMIT, P_TARGET, P_TUPDATE, P_ALPHA, P_BETA, P_MAX_BURST, P_ECN, P_BYTEMODE, P_DQ_RATE,
       NPARAMS };
_Static_assert(NPARAMS <= AQM_MAX_PARAMS, "the table fits struct aqm_args");

static const struct aqm_param pie_params[NPARAMS] = {
	/* Linux's and RFC 8033's defaults */
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 1000, 0, AQM_PARAM_INT, 0 },
	[P_TARGET] = { "target_ms", "ms", 1, 10000000, 15000, 3, AQM_PARAM_INT, 0 },
	/* at least 1 ms: each period costs one update, run lazily */
	[P_TUPDATE] = { "tupdate_ms", "ms", 1000, 10000000, 15000, 3, AQM_PARAM_INT, 0 },
	/* RFC 8033's 0.125 and 1.25 (Hz); Linux takes them in sixteenths (2, 20), 0..32 */
	[P_ALPHA] = { "alpha", "Hz", 0, 20000, 1250, 4, AQM_PARAM_INT, 0 },
	[P_BETA] = { "beta", "Hz", 0, 20000, 12500, 4, AQM_PARAM_INT, 0 },
	[P_MAX_BURST] = { "max_burst_ms", "ms", 0, 10000000, 150000, 3, AQM_PARAM_INT, 0 },
	[P_ECN] = AQM_PARAM_ECN,
	[P_BYTEMODE] = { "bytemode", "0 per packet, 1 scaled by size", 0, 1, 0, 0, AQM_PARAM_INT, 0 },
	[P_DQ_RATE] = { "dq_rate_estimator", "0 timestamps, 1 dequeue rate", 0, 1, 0, 0, AQM_PARAM_INT, 0 },
};

/* What the updates change: compared before and after one to find where a run
 * of them stops changing anything. */
struct pie_vars {
	uint64_t prob;      /* Q56 */
	uint64_t accu_prob; /* RFC 8033 5.4: p summed over the arrivals since the last signal */
	uint64_t qdelay_ns, qdelay_old_ns;
	uint64_t burst_ns;  /* allowance left */
	/* dq_rate_estimator=1 */
	uint64_t dq_start_ns, dq_bytes;
	uint64_t avg_rate;  /* bytes/s; 0: none measured yet */
	uint8_t measuring;
};

struct pie {
	struct aqm_fifo fifo;
	uint32_t limit, maxpacket;
	uint64_t target_ns, tupdate_ns, max_burst_ns;
	uint64_t alpha, beta; /* Q56 probability per ns of delay */
	uint8_t bytemode, dq_rate;
	struct aqm_lazy clock; /* every tupdate */
	struct pie_vars v;
	uint64_t early_drops, marks, overlimit, maxq;
};

/* Hz (4 decimals) -> probability per ns of delay, Q56 */
static uint64_t per_ns(int64_t hz_e4)
{
	return (uint64_t)hz_e4 * (PIE_P_ONE / AQM_NSEC_PER_SEC) / 10000;
}

static void pie_vars_restart(struct pie *p)
{
	p->v.burst_ns = p->max_burst_ns;
	p->v.accu_prob = 0;
	p->v.measuring = 0;
	p->v.dq_bytes = 0;
	p->v.avg_rate = 0;
}

static int pie_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct pie *p = aqm_priv(q);

	(void)err;
	p->limit = (uint32_t)a->v[P_LIMIT];
	p->target_ns = (uint64_t)a->v[P_TARGET] * 1000;
	p->tupdate_ns = (uint64_t)a->v[P_TUPDATE] * 1000;
	p->clock.period_ns = p->tupdate_ns;
	p->max_burst_ns = (uint64_t)a->v[P_MAX_BURST] * 1000;
	p->alpha = per_ns(a->v[P_ALPHA]);
	p->beta = per_ns(a->v[P_BETA]);
	p->bytemode = (uint8_t)a->v[P_BYTEMODE];
	p->dq_rate = (uint8_t)a->v[P_DQ_RATE];
	pie_vars_restart(p);
	return 0;
}

/* ---- the update (every tupdate) ------------------------------------------- */

/* RFC 8033 4.2's auto-tuning: the shift of alpha and beta at probability
 * prob (1 below 10 %, then 2 more for each decade down to 0.0001 %), and
 * in *low the least probability of prob's decade (0 for the last). */
static inline unsigned tune_shift(uint64_t prob, uint64_t *low)
{
	uint64_t decade = PIE_P_ONE / 10;
	unsigned shift = 0;

	*low = decade;
	if (prob >= decade)
		return 0;
	for (shift = 1, decade /= 10; shift < 11 && prob < decade; shift += 2, decade /= 10)
		;
	*low = shift < 11 ? decade : 0;
	return shift;
}

/* alpha (qdelay - target) + beta (qdelay - qdelay_old), tuned, capped (4.2). */
static int64_t pie_delta(const struct pie *p, uint64_t qdelay, uint64_t qdelay_old)
{
	uint64_t low;
	unsigned shift = tune_shift(p->v.prob, &low);
	int64_t delta = (int64_t)(p->alpha >> shift) * ((int64_t)qdelay - (int64_t)p->target_ns) +
			(int64_t)(p->beta >> shift) * ((int64_t)qdelay - (int64_t)qdelay_old);

	if (delta > (int64_t)(PIE_P_ONE / 50) && p->v.prob >= PIE_P_ONE / 10)
		delta = (int64_t)(2 * PIE_PERCENT);
	if (qdelay > PIE_DELAY_HIGH)
		delta += (int64_t)(PIE_P_ONE / 50);
	return delta;
}

static uint64_t pie_qdelay_now(const struct pie *p, uint64_t backlog)
{
	uint64_t d;

	if (!p->dq_rate)
		d = p->v.qdelay_ns;
	else if (!p->v.avg_rate)
		d = 0;
	else if (backlog >= (UINT64_C(1) << 34)) /* backlog x 10^9 would not fit 64 bits */
		d = PIE_DELAY_MAX;
	else
		d = backlog * AQM_NSEC_PER_SEC / p->v.avg_rate;
	return d < PIE_DELAY_MAX ? d : PIE_DELAY_MAX;
}

static void pie_update(struct pie *p, uint64_t backlog)
{
	struct pie_vars *v = &p->v;
	uint64_t qdelay = pie_qdelay_now(p, backlog);
	uint64_t qdelay_old = p->dq_rate ? v->qdelay_ns : v->qdelay_old_ns;
	int64_t delta = pie_delta(p, qdelay, qdelay_old);
	/* no delay measured though packets wait: too few to tell, p is not cut */
	int decay = !(qdelay == 0 && backlog);

	if (delta >= 0) {
		v->prob = PIE_P_ONE - v->prob > (uint64_t)delta ? v->prob + (uint64_t)delta : PIE_P_ONE;
		decay &= v->prob < PIE_P_ONE;
	} else {
		v->prob = v->prob > (uint64_t)-delta ? v->prob - (uint64_t)-delta : 0;
	}
	if (decay && qdelay == 0 && qdelay_old == 0)
		v->prob -= v->prob / 64;
	v->qdelay_ns = qdelay;
	v->qdelay_old_ns = qdelay_old;
	v->burst_ns = v->burst_ns > p->tupdate_ns ? v->burst_ns - p->tupdate_ns : 0;
	if (qdelay < p->target_ns / 2 && qdelay_old < p->target_ns / 2 && !v->prob &&
	    (!p->dq_rate || v->avg_rate))
		pie_vars_restart(p);
	if (!p->dq_rate)
		v->qdelay_old_ns = qdelay;
}

static int vars_equal(const struct pie_vars *a, const struct pie_vars *b)
{
	return a->prob == b->prob && a->accu_prob == b->accu_prob && a->qdelay_ns == b->qdelay_ns &&
	       a->qdelay_old_ns == b->qdelay_old_ns && a->burst_ns == b->burst_ns &&
	       a->dq_start_ns == b->dq_start_ns && a->dq_bytes == b->dq_bytes &&
	       a->avg_rate == b->avg_rate && a->measuring == b->measuring;
}

/* p after updates of an idle queue (nothing queued, no delay measured at
 * them or the update before): each lowers p by alpha x target, tuned, and
 * then by 1/64 of what is left (pie_update with nothing else moving; without
 * a fall p = 1 stays, as there). n updates, but none once p stands still.
 * Returns the update that left p at 0 (1 if it was 0), n + 1 if none did.
 * Exact, and within 2240 turns of the inner loop (about 12 instructions
 * each) whatever the parameters: a fall only hastens the decay, which takes
 * any p below 2^56 under 64 in 2239 (where p/64 is 0 and p stands still, or
 * the smallest fall, 3000, ends it); from p = 1 with the defaults, 205. */
static uint64_t pie_idle_prob(struct pie *p, uint64_t n)
{
	uint64_t prob = p->v.prob, left = n;

	while (prob && left) {
		uint64_t low, fall = (p->alpha >> tune_shift(prob, &low)) * p->target_ns;
		/* where the band ends, p reaches 0, or (no fall) p stands still */
		uint64_t floor = fall ? (low ? low : 1) : (low > 64 ? low : 64);

		if (prob < floor || (prob == PIE_P_ONE && !fall))
			break;
		do {
			prob -= prob < fall ? prob : fall;
			prob -= prob / 64;
		} while (--left && prob >= floor);
	}
	p->v.prob = prob;
	return prob ? n + 1 : (n - left ? n - left : 1);
}

/* What tupdate-long steps leave of an allowance: RFC 8033 5.2's run-down. */
static uint64_t run_down(uint64_t burst_ns, uint64_t steps, uint64_t tupdate_ns)
{
	return steps > burst_ns / tupdate_ns ? 0 : burst_ns - steps * tupdate_ns;
}

/* n more updates of an idle queue (see pie_idle_prob): p falls, the
 * allowance runs down, and an update that leaves p at 0 restarts the
 * measurement as pie_update does: with timestamps each one from the first
 * (the allowance stays full), with the rate estimator only the first, since
 * the restart clears the rate the next would need. */
static void pie_idle(struct pie *p, uint64_t n)
{
	uint64_t zero = pie_idle_prob(p, n);

	if (n)
		p->v.qdelay_old_ns = 0; /* with the rate estimator, the update before's qdelay */
	if (zero > n || (p->dq_rate && !p->v.avg_rate)) {
		p->v.burst_ns = run_down(p->v.burst_ns, n, p->tupdate_ns);
		return;
	}
	pie_vars_restart(p);
	if (p->dq_rate)
		p->v.burst_ns = run_down(p->v.burst_ns, n - zero, p->tupdate_ns);
}

/* The update of the period ending at end_ns (lazy_update.h's callback, ctx
 * the queue), and of the due - 1 after it where they follow in closed form:
 * an idle queue's (pie_idle), or none once this one changed nothing (the
 * next would not either: qdelay is the last dequeue's, so nothing else
 * moves). Returns the periods accounted for. */
static uint64_t pie_period(void *ctx, uint64_t end_ns, uint64_t due)
{
	struct aqm_queue *q = ctx;
	struct pie *p = aqm_priv(q);
	struct pie_vars before = p->v;

	(void)end_ns;
	pie_update(p, q->qlen_bytes);
	if (!q->qlen_bytes && !p->v.qdelay_ns) {
		pie_idle(p, due - 1);
		return due;
	}
	return vars_equal(&before, &p->v) ? due : 1;
}

static __attribute__((noinline)) void pie_catch_up(struct aqm_queue *q, struct pie *p, uint64_t now_ns)
{
	aqm_lazy_catch_up(&p->clock, now_ns, q, pie_period);
}

static inline void pie_tick(struct aqm_queue *q, struct pie *p, uint64_t now_ns)
{
	if (aqm_lazy_due(&p->clock, now_ns))
		pie_catch_up(q, p, now_ns);
}

/* ---- enqueue -------------------------------------------------------------- */

/* RFC 8033 5.4: whether the arrival gets a congestion signal. */
static int pie_drop_early(struct aqm_queue *q, struct pie *p, const struct aqm_pkt *pkt)
{
	struct pie_vars *v = &p->v;
	uint64_t prob = v->prob;

	if (v->burst_ns)
		return 0;
	if (v->qdelay_ns < p->target_ns / 2 && prob < 20 * PIE_PERCENT)
		return 0;
	if (q->qlen_bytes < 2 * (uint64_t)p->maxpacket)
		return 0;
	if (p->bytemode)
		prob = pkt->len * (prob / p->maxpacket);
	if (!prob) {
		v->accu_prob = 0;
		return 0;
	}
	v->accu_prob += prob;
	if (v->accu_prob < 85 * PIE_PERCENT)
		return 0;
	if (v->accu_prob >= 850 * PIE_PERCENT)
		return 1;
	/* 32 random bits against the probability's top 32 */
	return (uint64_t)q->env.random_u32(q->env.ctx) < (prob >> 24);
}

static int pie_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct pie *p = aqm_priv(q);

	pie_tick(q, p, now_ns);
	if (q->qlen_pkts >= p->limit) {
		p->overlimit++;
		p->v.accu_prob = 0;
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	if (pkt->len > p->maxpacket)
		p->maxpacket = pkt->len;
	if (pie_drop_early(q, p, pkt)) {
		p->v.accu_prob = 0; /* a mark is a signal too: the next one is due as after a drop */
		if (p->v.prob <= 10 * PIE_PERCENT && aqm_mark_ce(q, pkt, AQM_DROP_EARLY)) {
			p->marks++;
		} else {
			p->early_drops++;
			aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
			return AQM_DROPPED;
		}
	}
	aqm_fifo_push(&p->fifo, pkt);
	aqm_account_add(q, pkt);
	if (q->qlen_pkts > p->maxq)
		p->maxq = q->qlen_pkts;
	return AQM_QUEUED;
}

/* ---- dequeue ---------------------------------------------------------------- */

/* RFC 8033 5.1 (Linux's form): while 16 KiB are queued, the bytes dequeued
 * over 16 KiB of departures give a rate sample, averaged with weight 1/8. */
static void pie_measure(struct aqm_queue *q, struct pie *p, const struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct pie_vars *v = &p->v;
	uint64_t dt, rate;

	if (q->qlen_bytes >= PIE_QUEUE_THRESHOLD && !v->measuring) {
		v->measuring = 1;
		v->dq_start_ns = now_ns;
		v->dq_bytes = 0;
	}
	if (!v->measuring)
		return;
	v->dq_bytes += pkt->len;
	if (v->dq_bytes < PIE_QUEUE_THRESHOLD || now_ns == v->dq_start_ns)
		return;
	dt = now_ns - v->dq_start_ns;
	rate = v->dq_bytes * AQM_NSEC_PER_SEC / dt;
	v->avg_rate = v->avg_rate ? v->avg_rate - v->avg_rate / 8 + rate / 8 : rate;
	v->measuring = q->qlen_bytes >= PIE_QUEUE_THRESHOLD;
	v->dq_start_ns = now_ns;
	v->dq_bytes = 0;
}

static struct aqm_pkt *pie_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct pie *p = aqm_priv(q);
	struct aqm_pkt *pkt;

	pie_tick(q, p, now_ns);
	pkt = aqm_fifo_pop(&p->fifo);
	if (!pkt)
		return 0;
	aqm_account_remove(q, pkt);
	if (!p->dq_rate)
		p->v.qdelay_ns = q->qlen_bytes ? now_ns - pkt->enqueue_ns : 0;
	else
		pie_measure(q, p, pkt, now_ns);
	return pkt;
}

static struct aqm_pkt *pie_pop_raw(struct aqm_queue *q)
{
	return aqm_fifo_pop(&((struct pie *)aqm_priv(q))->fifo);
}

static int pie_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct pie *p = aqm_priv(q);

	if (pkt->len > p->maxpacket)
		p->maxpacket = pkt->len;
	return aqm_fifo_requeue(q, &p->fifo, pkt, p->limit);
}

/* After a flush: p, the delays and the allowance as at the start; the update
 * clock runs on. */
static void pie_restart(struct aqm_queue *q)
{
	struct pie *p = aqm_priv(q);

	aqm_zero(&p->v, sizeof(p->v));
	pie_vars_restart(p);
}

/* p (as of the last enqueue or dequeue: the updates due since run at the
 * next), the delays, the allowance left, the rate (bytes/s, 0 unless
 * dq_rate_estimator=1) and the counters of Linux's tc -s. */
static size_t pie_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct pie *p = aqm_priv(q);
	/* Q56 -> 10^-9: the top 30 bits times 10^9 fit 64 bits */
	int64_t prob_e9 = (int64_t)(((p->v.prob >> 26) * AQM_NSEC_PER_SEC) >> 30);

	pos = aqm_put_kfixed(buf, len, pos, "prob", prob_e9, 9);
	pos = aqm_put_kv(buf, len, pos, "qdelay_us", p->v.qdelay_ns / 1000);
	pos = aqm_put_kv(buf, len, pos, "qdelay_old_us", p->v.qdelay_old_ns / 1000);
	pos = aqm_put_kv(buf, len, pos, "burst_us", p->v.burst_ns / 1000);
	pos = aqm_put_kv(buf, len, pos, "avg_dq_rate", p->v.avg_rate);
	pos = aqm_put_kv(buf, len, pos, "updates", p->clock.runs);
	pos = aqm_put_kv(buf, len, pos, "maxq", p->maxq);
	pos = aqm_put_kv(buf, len, pos, "overlimit", p->overlimit);
	pos = aqm_put_kv(buf, len, pos, "early_drops", p->early_drops);
	return aqm_put_kv(buf, len, pos, "ecn_mark", p->marks);
}

const struct aqm_ops aqm_pie_ops = {
	.name = "pie",
	.params = pie_params,
	.nparams = NPARAMS,
	.priv_size = sizeof(struct pie),
	.init = pie_init,
	.enqueue = pie_enqueue,
	.dequeue = pie_dequeue,
	.pop_raw = pie_pop_raw,
	.requeue = pie_requeue,
	.xstats = pie_xstats,
	.restart = pie_restart,
};
