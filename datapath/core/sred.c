/* sred.c - Stabilized RED (Ott, Lakshman, Wong 1999; seed 004 section 2.4),
 * "full SRED": a drop probability from the instantaneous queue, scaled by an
 * estimate of the number of active flows and raised for a flow that hits the
 * zombie list.
 *
 * The zombie list holds M recently seen flows {flow, count}. Until it is full
 * every arrival is added to it. Once full, each arrival is compared with one
 * zombie drawn at random: the same flow is a hit (its count goes up);
 * otherwise, with probability `overwrite`, the arrival replaces the zombie
 * (count 0). The hit frequency
 *   P <- (1 - a) P + a Hit,    a = 1/M
 * estimates 1/(number of active flows). The arrival is dropped with
 *   p_zap = p_sred(q) * min(1, 1/(256 P)^2) * (1 + Hit/P)
 *   p_sred(q) = p_max       for B/3 <= q < B
 *               p_max / 4   for B/6 <= q < B/3
 *               0           below B/6
 * with q the instantaneous queue and B the buffer (`limit`), in packets.
 * Choices the papers leave open are in docs/disciplines-004.md ("SRED").
 */
#include "aqm_impl.h"

enum { P_LIMIT, P_PMAX, P_ZOMBIES, P_OVERWRITE, P_ECN, P_N };

static const struct aqm_param sred_params[] = {
	[P_LIMIT] = { "limit", "packets", 6, 1000000, 80, 0, AQM_PARAM_INT, 0 },
	[P_PMAX] = { "p_max", "probability", 0, 1000000, 150000, 6, AQM_PARAM_INT, 0 },
	[P_ZOMBIES] = { "zombies", "entries (M)", 1, 100000, 1000, 0, AQM_PARAM_INT, 0 },
	[P_OVERWRITE] = { "overwrite", "probability", 0, 1000000, 250000, 6, AQM_PARAM_INT, 0 },
	/* ecn=1: the probabilistic drop of an ECN-capable packet is a CE mark,
	 * as RED's (SRED's p_zap is a congestion signal like RED's p_b) */
	[P_ECN] = AQM_PARAM_ECN,
};

struct sred_zombie {
	uint32_t hash;
	uint32_t count; /* hits since the zombie was written */
};

struct sred {
	struct aqm_fifo fifo;
	uint32_t limit, nzombies, filled;
	uint32_t overwrite_q32;  /* overwrite probability, Q32 */
	uint32_t pmax_q32;       /* p_max, Q32 */
	uint64_t p_hit_q32;      /* P, the hit frequency, Q32 (1.0 = 2^32) */
	struct sred_zombie *zombie;
	uint64_t hits, prob_drops, prob_marks;
};

/* probability in millionths -> Q32, 1.0 saturating at 2^32 - 1 */
static uint32_t ppm_to_q32(int64_t ppm)
{
	uint64_t v = ((uint64_t)ppm << 32) / 1000000;

	return v > 0xffffffffu ? 0xffffffffu : (uint32_t)v;
}

static int sred_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct sred *s = aqm_priv(q);

	s->limit = (uint32_t)a->v[P_LIMIT];
	s->nzombies = (uint32_t)a->v[P_ZOMBIES];
	s->pmax_q32 = ppm_to_q32(a->v[P_PMAX]);
	s->overwrite_q32 = ppm_to_q32(a->v[P_OVERWRITE]);
	s->zombie = q->env.alloc(q->env.ctx, (size_t)s->nzombies * sizeof(s->zombie[0]));
	if (!s->zombie) {
		aqm_err(err, AQM_ERR_NOMEM, "sred: out of memory for parameter 'zombies'", 0, 0);
		return -1;
	}
	return 0;
}

static void sred_release(struct aqm_queue *q)
{
	struct sred *s = aqm_priv(q);

	if (s->zombie)
		q->env.free(q->env.ctx, s->zombie);
}

/* The zombie list's part of an arrival: 1 on a hit. */
static int sred_zombie_step(struct aqm_queue *q, struct sred *s, uint32_t hash)
{
	struct sred_zombie *z;
	int hit = 0;

	if (s->filled < s->nzombies) { /* filling: every arrival is added, no comparison */
		s->zombie[s->filled].hash = hash;
		s->zombie[s->filled].count = 0;
		s->filled++;
	} else {
		z = &s->zombie[aqm_random_below(q, s->nzombies)];
		if (z->hash == hash) {
			hit = 1;
			z->count++;
			s->hits++;
		} else if (q->env.random_u32(q->env.ctx) < s->overwrite_q32) {
			z->hash = hash;
			z->count = 0;
		}
	}
	/* P <- P + (Hit - P) / M */
	if (hit)
		s->p_hit_q32 += ((UINT64_C(1) << 32) - s->p_hit_q32) / s->nzombies;
	else
		s->p_hit_q32 -= s->p_hit_q32 / s->nzombies;
	return hit;
}

/* p_zap in Q32 (saturating at 1), for queue length qlen and this arrival's hit. */
static uint64_t sred_p_zap(const struct sred *s, uint32_t qlen, int hit)
{
	uint64_t p, x;

	if (3 * (uint64_t)qlen >= s->limit)
		p = s->pmax_q32;
	else if (6 * (uint64_t)qlen >= s->limit)
		p = s->pmax_q32 / 4;
	else
		return 0;
	/* min(1, 1/(256 P)^2): x = 256 P in Q16; above 1 the factor is
	 * 2^32 / x^2 (Q32) = (2^62 / x^2) << 2, x^2 >= 2^32 keeps it below 2^32 */
	x = s->p_hit_q32 >> 8; /* 256 P, Q16 (P < 2^32 so x < 2^32) */
	if (x > (UINT64_C(1) << 16))
		p = (p * (((UINT64_C(1) << 62) / (x * x)) << 2)) >> 32;
	/* (1 + Hit/P): after a hit P >= 1/M, so the factor is at most 1 + M */
	if (hit && s->p_hit_q32)
		p += p * ((UINT64_C(1) << 32) / s->p_hit_q32);
	return p;
}

static int sred_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct sred *s = aqm_priv(q);
	int hit = sred_zombie_step(q, s, pkt->flow_hash);
	uint64_t p = sred_p_zap(s, q->qlen_pkts, hit);

	(void)now_ns;
	if (p && (p >> 32 || q->env.random_u32(q->env.ctx) < (uint32_t)p)) {
		if (!aqm_mark_ce(q, pkt, AQM_DROP_EARLY)) {
			s->prob_drops++;
			aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
			return AQM_DROPPED;
		}
		s->prob_marks++;
	}
	return aqm_fifo_enqueue(q, &s->fifo, pkt, s->limit);
}

static struct aqm_pkt *sred_pop_raw(struct aqm_queue *q)
{
	struct sred *s = aqm_priv(q);

	return aqm_fifo_pop(&s->fifo);
}

static struct aqm_pkt *sred_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct sred *s = aqm_priv(q);

	(void)now_ns;
	return aqm_fifo_dequeue(q, &s->fifo);
}

static int sred_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct sred *s = aqm_priv(q);

	return aqm_fifo_requeue(q, &s->fifo, pkt, s->limit);
}

static size_t sred_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct sred *s = aqm_priv(q);

	/* P in millionths and the flow estimate 1/P it stands for */
	pos = aqm_put_kfixed(buf, len, pos, "p_hit", (int64_t)((s->p_hit_q32 * 1000000) >> 32), 6);
	pos = aqm_put_kv(buf, len, pos, "est_flows", s->p_hit_q32 ? (UINT64_C(1) << 32) / s->p_hit_q32 : 0);
	pos = aqm_put_kv(buf, len, pos, "zombies_filled", s->filled);
	pos = aqm_put_kv(buf, len, pos, "hits", s->hits);
	pos = aqm_put_kv(buf, len, pos, "prob_drops", s->prob_drops);
	return aqm_put_kv(buf, len, pos, "prob_marks", s->prob_marks);
}

const struct aqm_ops aqm_sred_ops = {
	.name = "sred",
	.params = sred_params,
	.nparams = P_N,
	.priv_size = sizeof(struct sred),
	.init = sred_init,
	.enqueue = sred_enqueue,
	.dequeue = sred_dequeue,
	.pop_raw = sred_pop_raw,
	.requeue = sred_requeue,
	.xstats = sred_xstats,
	.release = sred_release,
};
