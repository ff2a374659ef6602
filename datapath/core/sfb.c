/* sfb.c - Stochastic Fair Blue (Feng, Kandlur, Saha, Shin 2001; seed 004
 * section 2.7) with the defaults and choices of Linux's sch_sfb.
 *
 * L = 8 levels of N = 16 bins; a flow maps to one bin per level through 4
 * bits each of a salted 32-bit hash of its flow hash. A bin holds the number
 * of queued packets that map to it (qlen) and a marking probability p_m.
 * Per arrival, at every level of the flow: a bin with qlen 0 lowers p_m by
 * `decrement`, a bin with qlen >= `bin_size` raises it by `increment`; then
 *   min qlen over the levels >= `max`   drop (bucket: the flow fills its bins)
 *   p_min = min p_m = 1                 a non-responsive flow: admitted only
 *                                       through the penalty token bucket
 *                                       (`penalty_rate` packets/s, burst
 *                                       `penalty_burst`), else dropped (penalty)
 *   otherwise                           dropped with probability p_min (early);
 *                                       with ecn=1 an ECN-capable packet is
 *                                       marked CE instead, as sch_sfb always
 *                                       does - but once p_min > 1/2 a share
 *                                       2 (p_min - 1/2) of them is still
 *                                       dropped (sch_sfb: the flow is
 *                                       unresponsive or the link badly
 *                                       congested)
 * and the hard `limit` (overflow). Dequeue lowers the packet's bins' qlen.
 * Probabilities are Q16 as in Linux (1.0 = 65535). Linux rehashes every
 * 600 s; we do not (docs/disciplines-004.md, "SFB", says why).
 */
#include "aqm_impl.h"

#define SFB_LEVELS 8
#define SFB_BINS 16
#define SFB_MAX_PROB 0xffff

enum { P_LIMIT, P_MAX, P_BIN_SIZE, P_INCREMENT, P_DECREMENT, P_PENALTY_RATE, P_PENALTY_BURST, P_ECN, P_N };

static const struct aqm_param sfb_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 1000, 0, AQM_PARAM_INT, 0 },
	[P_MAX] = { "max", "packets per bin", 1, 65535, 25, 0, AQM_PARAM_INT, 0 },
	[P_BIN_SIZE] = { "bin_size", "packets per bin", 1, 65535, 20, 0, AQM_PARAM_INT, 0 },
	/* Linux: (65535 + 500) / 1000 = 66 and (65535 + 3000) / 6000 = 11 in Q16 */
	[P_INCREMENT] = { "increment", "probability", 16, 1000000, 1000, 6, AQM_PARAM_INT, 0 },
	[P_DECREMENT] = { "decrement", "probability", 16, 1000000, 167, 6, AQM_PARAM_INT, 0 },
	[P_PENALTY_RATE] = { "penalty_rate", "packets/s", 0, 1000000, 10, 0, AQM_PARAM_INT, 0 },
	[P_PENALTY_BURST] = { "penalty_burst", "packets", 0, 1000000, 20, 0, AQM_PARAM_INT, 0 },
	/* 0 by default, unlike sch_sfb, which marks whenever it can: the core's
	 * disciplines drop unless told to mark */
	[P_ECN] = AQM_PARAM_ECN,
};

struct sfb_bin {
	uint16_t qlen;
	uint16_t p_mark; /* Q16 */
};

struct sfb {
	struct aqm_fifo fifo;
	struct sfb_bin bin[SFB_LEVELS][SFB_BINS];
	uint32_t salt;
	uint32_t limit, max, bin_size, increment, decrement;
	uint32_t penalty_rate, penalty_burst, tokens;
	uint64_t token_ns;
	uint64_t early_drops, penalty_drops, bucket_drops;
	uint64_t marks; /* ecn=1: CE instead of an early drop */
};

/* probability in millionths -> Q16, at least 1 */
static uint32_t ppm_to_q16(int64_t ppm)
{
	uint64_t v = ((uint64_t)ppm * 65536 + 500000) / 1000000;

	return v ? (v > SFB_MAX_PROB ? SFB_MAX_PROB : (uint32_t)v) : 1;
}

/* The salted hash that picks the bins: the flow hash xor the salt, mixed
 * (aqm_mix32), so flows whose hashes differ in few bits still spread over the
 * levels; 0 is avoided as Linux does. */
static inline uint32_t sfb_hash(const struct sfb *s, uint32_t flow_hash)
{
	uint32_t h = aqm_mix32(flow_hash ^ s->salt);

	return h ? h : 1;
}

static int sfb_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct sfb *s = aqm_priv(q);

	s->limit = (uint32_t)a->v[P_LIMIT];
	s->max = (uint32_t)a->v[P_MAX];
	s->bin_size = (uint32_t)a->v[P_BIN_SIZE];
	s->increment = ppm_to_q16(a->v[P_INCREMENT]);
	s->decrement = ppm_to_q16(a->v[P_DECREMENT]);
	s->penalty_rate = (uint32_t)a->v[P_PENALTY_RATE];
	s->penalty_burst = (uint32_t)a->v[P_PENALTY_BURST];
	s->tokens = s->penalty_burst;
	s->salt = q->env.random_u32(q->env.ctx);
	(void)err;
		return 0;
}

/* Linux's token bucket for non-responsive flows: 1 when the packet must be
 * dropped. Tokens are refilled only when none is left (at most 10 s worth,
 * capped at the burst). */
static int sfb_rate_limited(struct sfb *s, uint64_t now_ns)
{
	if (!s->penalty_rate || !s->penalty_burst)
		return 1;
	if (!s->tokens) {
		uint64_t age = now_ns - s->token_ns;

		if (age > 10 * AQM_NSEC_PER_SEC)
			age = 10 * AQM_NSEC_PER_SEC;
		age = age * s->penalty_rate / AQM_NSEC_PER_SEC;
		s->tokens = age > s->penalty_burst ? s->penalty_burst : (uint32_t)age;
		s->token_ns = now_ns;
		if (!s->tokens)
			return 1;
	}
	s->tokens--;
	return 0;
}

static int sfb_drop(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t *counter,
		    enum aqm_drop_reason why)
{
	(*counter)++;
	aqm_drop_arriving(q, pkt, why);
	return AQM_DROPPED;
}

static void sfb_count(struct sfb *s, uint32_t h, int up)
{
	unsigned l;

	for (l = 0; l < SFB_LEVELS; l++, h >>= 4) {
		struct sfb_bin *b = &s->bin[l][h & (SFB_BINS - 1)];

		if (up)
			b->qlen += b->qlen < 0xffff;
		else
			b->qlen -= b->qlen > 0;
	}
}

static int sfb_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct sfb *s = aqm_priv(q);
	uint32_t h = sfb_hash(s, pkt->flow_hash), hl = h, minq = 0xffffffffu, p_min = 0xffffffffu;
	unsigned l;

	if (q->qlen_pkts >= s->limit) { /* first, as Linux: a full queue changes no bin */
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	for (l = 0; l < SFB_LEVELS; l++, hl >>= 4) {
		struct sfb_bin *b = &s->bin[l][hl & (SFB_BINS - 1)];

		if (!b->qlen)
			b->p_mark = b->p_mark > s->decrement ? (uint16_t)(b->p_mark - s->decrement) : 0;
		else if (b->qlen >= s->bin_size)
			b->p_mark = b->p_mark + s->increment < SFB_MAX_PROB ? (uint16_t)(b->p_mark + s->increment)
									   : SFB_MAX_PROB;
		if (b->qlen < minq)
			minq = b->qlen;
		if (b->p_mark < p_min)
			p_min = b->p_mark;
	}
	if (minq >= s->max)
		return sfb_drop(q, pkt, &s->bucket_drops, AQM_DROP_OVERFLOW);
	if (p_min >= SFB_MAX_PROB) {
		if (sfb_rate_limited(s, now_ns))
			return sfb_drop(q, pkt, &s->penalty_drops, AQM_DROP_PENALTY);
	} else {
		uint32_t r = q->env.random_u32(q->env.ctx) & SFB_MAX_PROB;

		if (r < p_min) {
			if (!q->ecn || (p_min > SFB_MAX_PROB / 2 && r < (p_min - SFB_MAX_PROB / 2) * 2) ||
			    !aqm_mark_ce(q, pkt, AQM_DROP_EARLY))
				return sfb_drop(q, pkt, &s->early_drops, AQM_DROP_EARLY);
			s->marks++;
		}
	}
	sfb_count(s, h, 1);
	pkt->core_slot = h;
	aqm_fifo_push(&s->fifo, pkt);
	aqm_account_add(q, pkt);
	return AQM_QUEUED;
}

static struct aqm_pkt *sfb_pop_raw(struct aqm_queue *q)
{
	struct sfb *s = aqm_priv(q);
	struct aqm_pkt *pkt = aqm_fifo_pop(&s->fifo);

	if (pkt && pkt->core_slot) /* 0: carried over, never counted in a bin */
		sfb_count(s, pkt->core_slot, 0);
	return pkt;
}

static struct aqm_pkt *sfb_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct aqm_pkt *pkt = sfb_pop_raw(q);

	(void)now_ns;
	if (pkt)
		aqm_account_remove(q, pkt);
	return pkt;
}

static int sfb_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct sfb *s = aqm_priv(q);

	pkt->core_slot = 0;
	return aqm_fifo_requeue(q, &s->fifo, pkt, s->limit);
}

static size_t sfb_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct sfb *s = aqm_priv(q);
	uint32_t maxq = 0, maxp = 0, sump = 0;
	unsigned l, i;

	/* as Linux's tc -s: the fullest bin, the largest and the mean p_m */
	for (l = 0; l < SFB_LEVELS; l++)
		for (i = 0; i < SFB_BINS; i++) {
			const struct sfb_bin *b = &s->bin[l][i];

			maxq = b->qlen > maxq ? b->qlen : maxq;
			maxp = b->p_mark > maxp ? b->p_mark : maxp;
			sump += b->p_mark;
		}
	pos = aqm_put_kv(buf, len, pos, "maxqlen", maxq);
	pos = aqm_put_kfixed(buf, len, pos, "maxprob", (int64_t)maxp * 1000000 / 65536, 6);
	pos = aqm_put_kfixed(buf, len, pos, "avgprob", (int64_t)(sump / (SFB_LEVELS * SFB_BINS)) * 1000000 / 65536, 6);
	pos = aqm_put_kv(buf, len, pos, "early_drops", s->early_drops);
	pos = aqm_put_kv(buf, len, pos, "marks", s->marks);
	pos = aqm_put_kv(buf, len, pos, "penalty_drops", s->penalty_drops);
	return aqm_put_kv(buf, len, pos, "bucket_drops", s->bucket_drops);
}

const struct aqm_ops aqm_sfb_ops = {
	.name = "sfb",
	.params = sfb_params,
	.nparams = P_N,
	.priv_size = sizeof(struct sfb),
	.init = sfb_init,
	.enqueue = sfb_enqueue,
	.dequeue = sfb_dequeue,
	.pop_raw = sfb_pop_raw,
	.requeue = sfb_requeue,
	.xstats = sfb_xstats,
	.release = 0,
};
