/* dualpi2.c - the DualQ Coupled PI2 AQM (DualPI2) of RFC 9332, with the
 * defaults and choices of Linux's sch_dualpi2 where the RFC leaves them open.
 *
 * Two FIFOs under one `limit` (packets) and one `memory_limit` (bytes): L for
 * the packets whose ECN field shares a bit with `ecn_mask` (1, Linux's
 * l4s_ect: ECT(1) and CE; 3, any_ect: every ECN-capable packet), C for the
 * rest. The core has no classifier: the ECN field an arrival brings alone
 * decides, read once, before any mark.
 *
 * One PI controller for both (RFC 9332 A.1): every tupdate the base
 * probability p' moves by alpha (qdelay - target) + beta (qdelay - qdelay_old),
 * qdelay the larger of the two head packets' sojourn at that instant, p'
 * bounded to [0, 1]. The update runs lazily (lazy_update.h): no timer.
 * The coupling (RFC 9332 2.1):
 *   C: p_C = p'^2; the signal is a drop, or with ecn=1 (Linux's behaviour,
 *      our default here) a CE mark on an ECN-capable packet;
 *   L: p_CL = k p', always a CE mark; and the step, L's native AQM: a mark
 *      on a packet whose sojourn (with step_thresh_pkts, the L backlog it
 *      leaves behind) exceeds the threshold, if L held at least
 *      min_qlen_step packets when it arrived. L is marked with max(p_CL, step).
 *   Overload, k p' > 1 (RFC 9332 4.2.3): with drop_overload=1 (Linux's
 *      default) an L packet is dropped with p_C and marked otherwise; with
 *      drop_overload=0 p' is held at 1/k, so L only ever overflows.
 *   No signal while less than 2 x mtu bytes stay queued (Linux's guard).
 * The decisions are taken on the packet leaving (Linux's default), or with
 * drop_early=1 on the one arriving; the step always on the one leaving.
 *
 * Scheduler: Linux's weighted round robin on a byte credit (C-queue
 * protection): L is served while C is empty or the credit is <= 0; a packet
 * sent from one queue while the other waits moves the credit by its length
 * times the other's weight (wc = c_protection %, wl = 100 - wc, start
 * mtu x (wc - wl)), so a backlogged C gets wc % of the bytes. RFC 9332 A.1's
 * example uses a time-shifted FIFO instead (docs/baselines.md says why not).
 *
 * Probabilities are Q32 with 1 = 2^32: a draw fires when a 32-bit random
 * number is below p, so p = 0 never fires and p = 1 always does.
 */
#include "lazy_update.h"

#define DPI2_ONE (UINT64_C(1) << 32) /* probability 1 */
/* alpha and beta: Q32 probability per ns of delay, with 16 bits more */
#define DPI2_GAIN_FRAC 16
/* ns (~17 s): a gain's integer part (< 2^18) times a delay stays far inside 63 bits */
#define DPI2_DELAY_MAX ((UINT64_C(1) << 34) - 1)
/* core_slot: bit 0, the step may mark this packet; the bits above, its arrival number */
#define DPI2_SLOT_STEP 1u

enum { P_LIMIT, P_MEMORY_LIMIT, P_TARGET, P_TUPDATE, P_ALPHA, P_BETA, P_STEP_MS, P_STEP_PKTS,
       P_MIN_QLEN_STEP, P_COUPLING, P_DROP_OVERLOAD, P_DROP_EARLY, P_C_PROTECTION, P_ECN_MASK, P_ECN,
       P_MTU, NPARAMS };
_Static_assert(NPARAMS <= AQM_MAX_PARAMS, "the table fits struct aqm_args");

static const struct aqm_param dpi2_params[NPARAMS] = {
	/* Linux's defaults, RFC 9332 A.1's where it gives them */
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 10000, 0, AQM_PARAM_INT, 0 },
	/* Linux's u32; 0: Linux's rule of thumb, limit x 2 x mtu */
	[P_MEMORY_LIMIT] = { "memory_limit", "bytes, 0: limit x 2 x mtu", 0, 4294967295LL, 0, 0, AQM_PARAM_INT, 0 },
	[P_TARGET] = { "target_ms", "ms", 0, 10000000, 15000, 3, AQM_PARAM_INT, 0 },
	/* at least 1 ms: each period costs one update, run lazily */
	[P_TUPDATE] = { "tupdate_ms", "ms", 1000, 10000000, 16000, 3, AQM_PARAM_INT, 0 },
	/* RFC 9332's 0.16 and 3.2 Hz (Linux: 41/256 and 819/256); 50 kHz keeps
	 * the conversion to a gain inside 64 bits */
	[P_ALPHA] = { "alpha", "Hz", 0, 500000000, 1600, 4, AQM_PARAM_INT, 0 },
	[P_BETA] = { "beta", "Hz", 0, 500000000, 32000, 4, AQM_PARAM_INT, 0 },
	[P_STEP_MS] = { "step_thresh_ms", "ms", 0, 10000000, 1000, 3, AQM_PARAM_INT, 0 },
	[P_STEP_PKTS] = { "step_thresh_pkts", "packets, 0: the step is in time", 0, 1000000, 0, 0, AQM_PARAM_INT, 0 },
	[P_MIN_QLEN_STEP] = { "min_qlen_step", "packets", 0, 1000000, 0, 0, AQM_PARAM_INT, 0 },
	/* Linux's u8: k is a whole number there */
	[P_COUPLING] = { "coupling", "factor k", 1, 255, 2, 0, AQM_PARAM_INT, 0 },
	[P_DROP_OVERLOAD] = { "drop_overload", "0 overflow, 1 drop L on overload", 0, 1, 1, 0, AQM_PARAM_INT, 0 },
	[P_DROP_EARLY] = { "drop_early", "0 decide at dequeue, 1 at enqueue", 0, 1, 0, 0, AQM_PARAM_INT, 0 },
	[P_C_PROTECTION] = { "c_protection", "% of the link for C", 0, 100, 10, 0, AQM_PARAM_INT, 0 },
	[P_ECN_MASK] = { "ecn_mask", "1 l4s_ect, 2 ECT(0) and CE, 3 any_ect", 1, 3, 1, 0, AQM_PARAM_INT, 0 },
	/* 1 by default, unlike the other disciplines' ecn: Linux marks ECN-capable
	 * packets in C, and L marks whatever this says */
	[P_ECN] = { "ecn", "C: 0 drop, 1 mark ECN-capable packets CE", 0, 1, 1, 0, AQM_PARAM_INT, 0 },
	/* the device's MTU with its link header, which Linux reads (1514 on Ethernet) */
	[P_MTU] = { "mtu", "bytes", 64, 65535, 1514, 0, AQM_PARAM_INT, 0 },
};

struct dualpi2 {
	struct aqm_fifo l, c;
	uint32_t l_pkts; /* C holds the rest of q->qlen_pkts */
	uint32_t seq;    /* arrival numbers: a carry-over leaves in arrival order */
	uint32_t limit, mtu, min_qlen_step, k;
	uint8_t step_in_pkts, ecn_mask, drop_overload, drop_early;
	uint64_t memory_limit, memory_used, max_memory_used; /* packet bytes */
	uint64_t target_ns, step_thresh; /* the step: ns, or packets */
	uint64_t alpha, beta;            /* gains, DPI2_GAIN_FRAC */
	uint64_t prob_max;               /* 1, or 1/k with drop_overload=0 */
	int64_t credit, credit_init;     /* bytes x percent; > 0: C's turn */
	int64_t wc, wl;
	struct aqm_lazy clock; /* every tupdate */
	uint64_t prob;         /* p', Q32 */
	uint64_t qdelay_ns;    /* at the last update: the next one's qdelay_old */
	uint64_t now_ns;       /* of the last enqueue or dequeue, for xstats */
	uint64_t pkts_in_c, pkts_in_l, maxq, ecn_mark, step_marks;
};

/* Hz with 4 decimals -> gain: hz_e4 / 10^4 x 2^32 x 2^16 / 10^9, which is
 * hz_e4 x 2^35 / 5^13, exact in 64 bits up to the table's 50 kHz. */
static uint64_t gain(int64_t hz_e4)
{
	return ((uint64_t)hz_e4 << 35) / UINT64_C(1220703125);
}

static int conflict(struct aqm_error *err, unsigned param, unsigned other, const char *what)
{
	aqm_err_param(err, AQM_ERR_CONFLICT, &aqm_dualpi2_ops, (int)param, (int)other, what);
	return -1;
}

/* What the table's ranges cannot say, each refusal naming both parameters. */
static int dpi2_check(const struct aqm_args *a, struct aqm_error *err)
{
	if (a->v[P_STEP_PKTS] && (a->given & (1u << P_STEP_MS)))
		return conflict(err, P_STEP_PKTS, P_STEP_MS,
				"and 'step_thresh_ms' both set the step: give one (step_thresh_pkts=0 for time)");
	if (a->v[P_STEP_PKTS] >= a->v[P_LIMIT])
		return conflict(err, P_STEP_PKTS, P_LIMIT, "must be below 'limit': L never holds more");
	if (a->v[P_MIN_QLEN_STEP] >= a->v[P_LIMIT])
		return conflict(err, P_MIN_QLEN_STEP, P_LIMIT, "must be below 'limit': L never holds more");
	if (a->v[P_MEMORY_LIMIT] && a->v[P_MEMORY_LIMIT] <= 2 * a->v[P_MTU])
		return conflict(err, P_MEMORY_LIMIT, P_MTU,
				"must exceed 2 x 'mtu': PI2 signals only while 2 x mtu bytes stay queued beside "
				"the packet, so under it PI2 never would (0: limit x 2 x mtu)");
	return 0;
}

static int dpi2_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct dualpi2 *d = aqm_priv(q);

	if (dpi2_check(a, err))
		return -1;
	d->limit = (uint32_t)a->v[P_LIMIT];
	d->mtu = (uint32_t)a->v[P_MTU];
	/* the rule of thumb capped to what the parameter can hold, as Linux caps it */
	d->memory_limit = a->v[P_MEMORY_LIMIT] ? (uint64_t)a->v[P_MEMORY_LIMIT] : (uint64_t)d->limit * 2 * d->mtu;
	if (d->memory_limit > UINT32_MAX)
		d->memory_limit = UINT32_MAX;
	d->target_ns = (uint64_t)a->v[P_TARGET] * 1000;
	d->clock.period_ns = (uint64_t)a->v[P_TUPDATE] * 1000;
	d->alpha = gain(a->v[P_ALPHA]);
	d->beta = gain(a->v[P_BETA]);
	d->step_in_pkts = a->v[P_STEP_PKTS] != 0;
	d->step_thresh = d->step_in_pkts ? (uint64_t)a->v[P_STEP_PKTS] : (uint64_t)a->v[P_STEP_MS] * 1000;
	d->min_qlen_step = (uint32_t)a->v[P_MIN_QLEN_STEP];
	d->k = (uint32_t)a->v[P_COUPLING];
	d->drop_overload = (uint8_t)a->v[P_DROP_OVERLOAD];
	d->prob_max = d->drop_overload ? DPI2_ONE : DPI2_ONE / d->k;
	d->drop_early = (uint8_t)a->v[P_DROP_EARLY];
	d->ecn_mask = (uint8_t)a->v[P_ECN_MASK];
	d->wc = a->v[P_C_PROTECTION];
	d->wl = 100 - d->wc;
	d->credit_init = (int64_t)d->mtu * (d->wc - d->wl);
	d->credit = d->credit_init;
	return 0;
}

/* ---- the PI2 update (every tupdate) -------------------------------------- */

/* The head packet's sojourn at t, capped; 0 for an empty queue. */
static uint64_t head_delay(const struct aqm_fifo *f, uint64_t t)
{
	uint64_t d;

	if (!f->head || t <= f->head->enqueue_ns)
		return 0;
	d = t - f->head->enqueue_ns;
	return d < DPI2_DELAY_MAX ? d : DPI2_DELAY_MAX;
}

/* g (x - ref) as a Q32 probability; the gain's two halves multiplied apart
 * keep every product inside 64 bits. */
static int64_t pi_term(uint64_t g, uint64_t x, uint64_t ref)
{
	uint64_t diff = x > ref ? x - ref : ref - x;
	uint64_t frac = g & ((UINT64_C(1) << DPI2_GAIN_FRAC) - 1);
	int64_t v = (int64_t)((g >> DPI2_GAIN_FRAC) * diff + ((frac * diff) >> DPI2_GAIN_FRAC));

	return x > ref ? v : -v;
}

/* n more updates of an empty queue after one has run: qdelay is 0 at each
 * (nothing queued) and so was qdelay_old (the update before saw the queue
 * empty too), so beta's term is 0 and each lowers p' by alpha x target, down
 * to 0: n at once, as n timer updates would, at the cost of one. */
static void dpi2_idle(struct dualpi2 *d, uint64_t n)
{
	uint64_t fall = (uint64_t)-pi_term(d->alpha, 0, d->target_ns);

	if (!fall)
		return;
	d->prob = n < d->prob / fall + 1 ? d->prob - n * fall : 0; /* n x fall <= p' in the first case */
}

/* The update of the period ending at end_ns (lazy_update.h's callback, ctx
 * the queue), and of the due - 1 after it where they follow in closed form:
 * an empty queue's (dpi2_idle), or none when they cannot change anything
 * (this one changed nothing and the delay stands still at its cap). Returns
 * the periods accounted for. */
static uint64_t dpi2_period(void *ctx, uint64_t end_ns, uint64_t due)
{
	struct aqm_queue *q = ctx;
	struct dualpi2 *d = aqm_priv(q);
	uint64_t ql = head_delay(&d->l, end_ns), qc = head_delay(&d->c, end_ns);
	uint64_t qdelay = ql > qc ? ql : qc, before = d->prob, old = d->qdelay_ns;
	int64_t delta = pi_term(d->alpha, qdelay, d->target_ns) + pi_term(d->beta, qdelay, old);

	if (delta >= 0)
		d->prob = d->prob + (uint64_t)delta < d->prob_max ? d->prob + (uint64_t)delta : d->prob_max;
	else
		d->prob = d->prob > (uint64_t)-delta ? d->prob - (uint64_t)-delta : 0;
	d->qdelay_ns = qdelay;
	if (!q->qlen_pkts) {
		dpi2_idle(d, due - 1);
		return due;
	}
	if (d->prob == before && qdelay == old && qdelay == DPI2_DELAY_MAX)
		return due;
	return 1;
}

static __attribute__((noinline)) void dpi2_catch_up(struct aqm_queue *q, struct dualpi2 *d, uint64_t now_ns)
{
	aqm_lazy_catch_up(&d->clock, now_ns, q, dpi2_period);
}

/* Whether updates are due before this enqueue or dequeue: the caller then
 * takes its out-of-line path, which runs them first, so the common path
 * makes no call. */
static inline int dpi2_due(struct dualpi2 *d, uint64_t now_ns)
{
	d->now_ns = now_ns;
	return aqm_lazy_due(&d->clock, now_ns);
}

/* ---- the signals ------------------------------------------------------------ */

static inline int roll(struct aqm_queue *q, uint64_t p)
{
	return (uint64_t)q->env.random_u32(q->env.ctx) < p;
}

/* Fires with probability p^2. RFC 9332 A.1 compares p' with the larger of
 * two random numbers; both numbers below p' is the same event, and the
 * second is drawn only when the first is below (as Linux draws them). */
static inline int roll_squared(struct aqm_queue *q, uint64_t p)
{
	return roll(q, p) && roll(q, p);
}

static int mark(struct aqm_queue *q, struct dualpi2 *d, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	if (!aqm_set_ce(q, pkt, why))
		return 0;
	d->ecn_mark++;
	return 1;
}

/* Whether the PI2 part may signal at all: no draw can fire while p' = 0, and
 * none is made; and no signal while less than 2 x mtu bytes stay queued
 * beside the packet (Linux's guard). The per-packet test. */
static inline int pi2_armed(const struct dualpi2 *d, uint64_t backlog)
{
	return d->prob && backlog >= 2 * (uint64_t)d->mtu;
}

/* The coupled PI2 decision on pkt, once armed (see the top): 1 to drop it,
 * else it goes on, CE-marked or not. */
static inline __attribute__((always_inline)) int pi2_verdict(struct aqm_queue *q, struct dualpi2 *d, struct aqm_pkt *pkt, int in_l)
{
	uint64_t p = d->prob;
	int overload = p * d->k > DPI2_ONE;

	if (!in_l) {
		if (!roll_squared(q, p))
			return 0;
		return overload || !q->ecn || !mark(q, d, pkt, AQM_DROP_EARLY);
	}
	if (overload) {
		if (d->drop_overload && roll_squared(q, p))
			return 1;
		mark(q, d, pkt, AQM_DROP_EARLY);
		return 0;
	}
	if (!roll(q, p * d->k))
		return 0;
	return !mark(q, d, pkt, AQM_DROP_EARLY); /* a Not-ECT packet in L: dropped (none without a classifier) */
}

/* Whether L's step applies to pkt, leaving at now_ns: the L queue held
 * min_qlen_step packets at its arrival, and its sojourn (or the L backlog
 * it leaves) exceeds the threshold. */
static inline int step_due(const struct dualpi2 *d, const struct aqm_pkt *pkt, uint64_t now_ns)
{
	uint64_t over = d->step_in_pkts ? d->l_pkts : now_ns - pkt->enqueue_ns;

	return (pkt->core_slot & DPI2_SLOT_STEP) && over > d->step_thresh;
}

/* The step's mark; 1 to drop pkt instead (a Not-ECT one; none reach L here). */
static int step_verdict(struct aqm_queue *q, struct dualpi2 *d, struct aqm_pkt *pkt)
{
	if (!mark(q, d, pkt, AQM_DROP_DELAY))
		return 1;
	d->step_marks++;
	return 0;
}

/* ---- the two queues ---------------------------------------------------------- */

static inline int in_l_queue(const struct dualpi2 *d, const struct aqm_pkt *pkt)
{
	return (pkt->ecn & d->ecn_mask) != 0;
}

/* Queue pkt in L or C as classified (enqueue and carry-over) with its
 * arrival number and whether the step may mark it (L held min_qlen_step
 * packets then). */
static inline __attribute__((always_inline)) void dpi2_push(struct aqm_queue *q, struct dualpi2 *d,
							     struct aqm_pkt *pkt, int in_l)
{
	pkt->core_slot = ++d->seq << 1;
	if (in_l) {
		pkt->core_slot |= d->l_pkts >= d->min_qlen_step ? DPI2_SLOT_STEP : 0;
		aqm_fifo_push(&d->l, pkt);
		d->l_pkts++;
	} else {
		aqm_fifo_push(&d->c, pkt);
	}
	aqm_account_add(q, pkt);
	d->memory_used += pkt->len;
	if (d->memory_used > d->max_memory_used)
		d->max_memory_used = d->memory_used;
}

static inline int dpi2_full(const struct aqm_queue *q, const struct dualpi2 *d, const struct aqm_pkt *pkt)
{
	return q->qlen_pkts >= d->limit || d->memory_used + pkt->len > d->memory_limit;
}

/* An arrival let in: queued and counted as Linux's tc -s counts it. */
static inline __attribute__((always_inline)) int dpi2_admit(struct aqm_queue *q, struct dualpi2 *d,
							     struct aqm_pkt *pkt, int in_l)
{
	dpi2_push(q, d, pkt, in_l);
	if (in_l)
		d->pkts_in_l++;
	else
		d->pkts_in_c++;
	if (q->qlen_pkts > d->maxq)
		d->maxq = q->qlen_pkts;
	return AQM_QUEUED;
}

/* drop_early=1 with the PI2 part armed: the decision on the arrival, in
 * the queue it was classified for before the decision could mark it CE (CE
 * matches every ecn_mask: a marked C packet must not join L ahead of its
 * flow's earlier packets). Out of line, so the common enqueue makes no call. */
static __attribute__((noinline)) int dpi2_enqueue_judged(struct aqm_queue *q, struct dualpi2 *d,
							 struct aqm_pkt *pkt, int in_l)
{
	if (pi2_verdict(q, d, pkt, in_l)) {
		aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
		return AQM_DROPPED;
	}
	return dpi2_admit(q, d, pkt, in_l);
}

static __attribute__((noinline)) int dpi2_overflow(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
	return AQM_DROPPED;
}

/* An enqueue once the updates due have run. */
static inline __attribute__((always_inline)) int dpi2_enqueue_now(struct aqm_queue *q, struct dualpi2 *d,
								   struct aqm_pkt *pkt)
{
	int in_l = in_l_queue(d, pkt); /* once, before any mark */

	if (dpi2_full(q, d, pkt))
		return dpi2_overflow(q, pkt);
	if (d->drop_early && pi2_armed(d, q->qlen_bytes))
		return dpi2_enqueue_judged(q, d, pkt, in_l);
	return dpi2_admit(q, d, pkt, in_l);
}

static __attribute__((noinline)) int dpi2_enqueue_late(struct aqm_queue *q, struct dualpi2 *d,
						       struct aqm_pkt *pkt, uint64_t now_ns)
{
	dpi2_catch_up(q, d, now_ns);
	return dpi2_enqueue_now(q, d, pkt);
}

static int dpi2_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct dualpi2 *d = aqm_priv(q);

	if (dpi2_due(d, now_ns))
		return dpi2_enqueue_late(q, d, pkt, now_ns);
	return dpi2_enqueue_now(q, d, pkt);
}

/* The next packet by the credit (see the top), unlinked and unaccounted;
 * *in_l where it came from, *credit what sending it adds to the credit.
 * Once both queues are empty the credit starts afresh (Linux resets it when
 * a dequeue finds nothing). */
static inline struct aqm_pkt *dpi2_pop(struct aqm_queue *q, struct dualpi2 *d, int *in_l, int64_t *credit)
{
	uint32_t c_pkts = q->qlen_pkts - d->l_pkts;
	struct aqm_pkt *pkt;
	int64_t weight;

	*in_l = d->l_pkts && (!c_pkts || d->credit <= 0);
	if (*in_l) {
		pkt = aqm_fifo_pop(&d->l);
		d->l_pkts--;
		weight = c_pkts ? d->wc : 0;
	} else if (c_pkts) {
		pkt = aqm_fifo_pop(&d->c);
		weight = d->l_pkts ? -d->wl : 0;
	} else {
		return 0;
	}
	*credit = weight * pkt->len;
	aqm_account_remove(q, pkt);
	d->memory_used -= pkt->len;
	if (!q->qlen_pkts)
		d->credit = d->credit_init;
	return pkt;
}

/* Whether a leaving packet meets a signal at all (the per-packet test). */
static inline int dpi2_judged(const struct aqm_queue *q, const struct dualpi2 *d, const struct aqm_pkt *pkt,
			      int in_l, uint64_t now_ns)
{
	return (!d->drop_early && pi2_armed(d, q->qlen_bytes)) || (in_l && step_due(d, pkt, now_ns));
}

/* The rest of a dequeue whose packet meets a signal: the PI2 decision (at
 * dequeue), then L's step; a dropped packet's successor is judged the same
 * way. Out of line, so the common dequeue makes no call. */
static __attribute__((noinline)) struct aqm_pkt *
dpi2_dequeue_judged(struct aqm_queue *q, struct dualpi2 *d, struct aqm_pkt *pkt, int in_l, int64_t credit,
		    uint64_t now_ns)
{
	do {
		if (!d->drop_early && pi2_armed(d, q->qlen_bytes) && pi2_verdict(q, d, pkt, in_l)) {
			aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
			continue;
		}
		if (in_l && step_due(d, pkt, now_ns) && step_verdict(q, d, pkt)) {
			aqm_drop_arriving(q, pkt, AQM_DROP_DELAY);
			continue;
		}
		d->credit += credit;
		return pkt;
	} while ((pkt = dpi2_pop(q, d, &in_l, &credit)) != 0);
	return 0;
}

/* A dequeue once the updates due have run. */
static inline __attribute__((always_inline)) struct aqm_pkt *dpi2_dequeue_now(struct aqm_queue *q,
									      struct dualpi2 *d, uint64_t now_ns)
{
	struct aqm_pkt *pkt;
	int64_t credit;
	int in_l;

	pkt = dpi2_pop(q, d, &in_l, &credit);
	if (!pkt)
		return 0;
	if (dpi2_judged(q, d, pkt, in_l, now_ns))
		return dpi2_dequeue_judged(q, d, pkt, in_l, credit, now_ns);
	d->credit += credit;
	return pkt;
}

static __attribute__((noinline)) struct aqm_pkt *dpi2_dequeue_late(struct aqm_queue *q, struct dualpi2 *d,
								  uint64_t now_ns)
{
	dpi2_catch_up(q, d, now_ns);
	return dpi2_dequeue_now(q, d, now_ns);
}

static struct aqm_pkt *dpi2_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct dualpi2 *d = aqm_priv(q);

	if (dpi2_due(d, now_ns))
		return dpi2_dequeue_late(q, d, now_ns);
	return dpi2_dequeue_now(q, d, now_ns);
}

/* Whether L's head l came before C's head c. The arrival stamps decide: a C
 * head may wait behind L (c_protection=0) while more packets pass than the
 * 31-bit arrival numbers count before they wrap. Those numbers break a tie:
 * two packets of one instant came within a few arrivals of each other. */
static int l_came_first(const struct aqm_pkt *l, const struct aqm_pkt *c)
{
	if (l->enqueue_ns != c->enqueue_ns)
		return l->enqueue_ns < c->enqueue_ns;
	return (int32_t)((l->core_slot & ~DPI2_SLOT_STEP) - (c->core_slot & ~DPI2_SLOT_STEP)) < 0;
}

/* Reconfiguration, flush and destroy: the older of the two heads, so a
 * carry-over leaves in the order the packets came. */
static struct aqm_pkt *dpi2_pop_raw(struct aqm_queue *q)
{
	struct dualpi2 *d = aqm_priv(q);
	const struct aqm_pkt *l = d->l.head, *c = d->c.head;
	struct aqm_pkt *pkt;

	if (l && (!c || l_came_first(l, c))) {
		pkt = aqm_fifo_pop(&d->l);
		d->l_pkts--;
	} else {
		pkt = aqm_fifo_pop(&d->c);
	}
	if (pkt)
		d->memory_used -= pkt->len;
	return pkt;
}

static int dpi2_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct dualpi2 *d = aqm_priv(q);

	if (dpi2_full(q, d, pkt))
		return -1;
	dpi2_push(q, d, pkt, in_l_queue(d, pkt));
	return 0;
}

/* After a flush: p', the last delay and the credit as at the start; the
 * update clock and the counters run on. */
static void dpi2_restart(struct aqm_queue *q)
{
	struct dualpi2 *d = aqm_priv(q);

	d->prob = 0;
	d->qdelay_ns = 0;
	d->credit = d->credit_init;
}

/* ---- state ---------------------------------------------------------------- */

/* The step in packets and in time are one parameter in two units: a spec
 * gives one, so the description leaves out the time while packets rule. */
static size_t dpi2_describe(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct dualpi2 *d = aqm_priv(q);

	return aqm_describe_except(q, buf, len, pos, d->step_in_pkts ? 1u << P_STEP_MS : 0);
}

static uint64_t prob_e9(const struct dualpi2 *d)
{
	return (d->prob * AQM_NSEC_PER_SEC) >> 32; /* p' <= 2^32: fits 64 bits */
}

/* Linux's tc -s counters (the delays as of the last enqueue or dequeue, not
 * of the moment asked), then ours: L's backlog, the last update's qdelay,
 * the periods run. */
static size_t dpi2_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct dualpi2 *d = aqm_priv(q);

	pos = aqm_put_kfixed(buf, len, pos, "prob", (int64_t)prob_e9(d), 9);
	pos = aqm_put_kv(buf, len, pos, "delay_c_us", head_delay(&d->c, d->now_ns) / 1000);
	pos = aqm_put_kv(buf, len, pos, "delay_l_us", head_delay(&d->l, d->now_ns) / 1000);
	pos = aqm_put_kv(buf, len, pos, "pkts_in_c", d->pkts_in_c);
	pos = aqm_put_kv(buf, len, pos, "pkts_in_l", d->pkts_in_l);
	pos = aqm_put_kv(buf, len, pos, "maxq", d->maxq);
	pos = aqm_put_kv(buf, len, pos, "ecn_mark", d->ecn_mark);
	pos = aqm_put_kv(buf, len, pos, "step_marks", d->step_marks);
	pos = aqm_put_kvi(buf, len, pos, "credit", d->credit);
	pos = aqm_put_kv(buf, len, pos, "memory_used", d->memory_used);
	pos = aqm_put_kv(buf, len, pos, "max_memory_used", d->max_memory_used);
	pos = aqm_put_kv(buf, len, pos, "memory_limit", d->memory_limit);
	pos = aqm_put_kv(buf, len, pos, "qlen_l", d->l_pkts);
	pos = aqm_put_kv(buf, len, pos, "qdelay_us", d->qdelay_ns / 1000);
	return aqm_put_kv(buf, len, pos, "updates", d->clock.runs);
}

static void dpi2_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	out->flags |= AQM_XS_PROB;
	out->prob_e9 = prob_e9(aqm_priv(q));
}

/* The step in time or in packets: Linux's change takes either attribute as
 * the new step, the other dropped. */
static const uint32_t dpi2_exclusive[] = { (1u << P_STEP_MS) | (1u << P_STEP_PKTS), 0 };

const struct aqm_ops aqm_dualpi2_ops = {
	.name = "dualpi2",
	.params = dpi2_params,
	.nparams = NPARAMS,
	.priv_size = sizeof(struct dualpi2),
	.init = dpi2_init,
	.enqueue = dpi2_enqueue,
	.dequeue = dpi2_dequeue,
	.pop_raw = dpi2_pop_raw,
	.requeue = dpi2_requeue,
	.xstats = dpi2_xstats,
	.describe = dpi2_describe,
	.get_xstats = dpi2_get_xstats,
	.restart = dpi2_restart,
	.exclusive = dpi2_exclusive,
};
