/* choke.c - CHOKe (Pan, Prabhakar, Psounis 2000) with Linux sch_choke
 * semantics: RED's average and thresholds in packets, and before the RED
 * decision the arrival is compared with a random queued packet; if both
 * belong to the same flow both are dropped (reason choke-match, counted for
 * each of the two packets). Seed 004, Algorithm 1:
 *   q_avg <= min           enqueue
 *   else draw a random queued packet; same flow -> drop both
 *   else q_avg > max        drop (forced)
 *   else                    RED probabilistic drop (red.c)
 *   then the hard limit     overflow
 */
#include "red_avg.h"
#include "ring.h"

enum { P_LIMIT, P_MIN, P_MAX, P_MAXP, P_WLOG, P_RATE, P_AVPKT };

static const struct aqm_param choke_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 },
	[P_MIN] = { "min", "packets", 0, 1000000, 20, 0, AQM_PARAM_INT, 0 },
	[P_MAX] = { "max", "packets", 1, 1000000, 60, 0, AQM_PARAM_INT, 0 },
	[P_MAXP] = { "max_p", "probability", 1, 1000000, 100000, 6, AQM_PARAM_INT, 0 },
	[P_WLOG] = { "wlog", "log2(1/w)", 0, 23, 9, 0, AQM_PARAM_INT, 0 },
	[P_RATE] = { "rate_bps", "bit/s", 1000, 1000000000000LL, 100000000, 0, AQM_PARAM_INT, 0 },
	[P_AVPKT] = { "avpkt", "bytes", 64, 65535, 1500, 0, AQM_PARAM_INT, 0 },
};

struct choke {
	struct aqm_ring ring;
	struct aqm_red_avg avg;
	uint32_t limit;
	int64_t min_q16, max_q16;
	struct aqm_red_mark mark;
	uint64_t matched, prob_drops, forced_drops;
};

static int choke_init(struct aqm_queue *q, const struct aqm_args *a, char *err, size_t errlen)
{
	struct choke *c = aqm_priv(q);
	uint64_t maxp_q32;

	if (aqm_red_check_thresholds("choke", a->v[P_LIMIT], a->v[P_MIN], a->v[P_MAX], err, errlen))
		return -1;
	c->limit = (uint32_t)a->v[P_LIMIT];
	c->min_q16 = a->v[P_MIN] << 16;
	c->max_q16 = a->v[P_MAX] << 16;
	maxp_q32 = ((uint64_t)a->v[P_MAXP] << 32) / 1000000;
	c->mark.pb_scale = maxp_q32 / (uint64_t)(a->v[P_MAX] - a->v[P_MIN]);
	c->mark.count = -1;
	aqm_red_avg_init(&c->avg, AQM_W_ONE >> a->v[P_WLOG], (uint64_t)a->v[P_RATE],
			 (uint32_t)a->v[P_AVPKT]);
	if (aqm_ring_alloc(&c->ring, &q->env, c->limit)) {
		aqm_err(err, errlen, "choke: out of memory for parameter 'limit'", 0, 0);
		return -1;
	}
	return 0;
}

static void choke_release(struct aqm_queue *q)
{
	struct choke *c = aqm_priv(q);

	aqm_ring_free(&c->ring, &q->env);
}

static int choke_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct choke *c = aqm_priv(q);
	int64_t avg;

	aqm_red_avg_update(&c->avg, q->qlen_pkts, now_ns);
	avg = c->avg.avg_q16;
	if (avg <= c->min_q16) {
		c->mark.count = -1;
	} else {
		uint32_t idx;
		struct aqm_pkt *victim = aqm_ring_random(&c->ring, q, &idx);

		if (victim && victim->flow_hash == pkt->flow_hash &&
		    idx - c->ring.head >= q->carried_pkts) { /* carried packets are exempt */
			c->matched++;
			aqm_ring_remove(&c->ring, idx);
			aqm_drop_queued(q, victim, AQM_DROP_CHOKE_MATCH);
			aqm_drop_arriving(q, pkt, AQM_DROP_CHOKE_MATCH);
			if (!q->qlen_pkts)
				aqm_red_avg_start_idle(&c->avg, now_ns);
			return AQM_DROPPED;
		}
		if (avg > c->max_q16) {
			c->mark.count = -1;
			c->forced_drops++;
			aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
			return AQM_DROPPED;
		}
		if (aqm_red_mark(&c->mark, avg - c->min_q16, &q->env)) {
			c->prob_drops++;
			aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
			return AQM_DROPPED;
		}
	}
	if (q->qlen_pkts >= c->limit || aqm_ring_push(&c->ring, pkt)) {
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	aqm_account_add(q, pkt);
	return AQM_QUEUED;
}

static struct aqm_pkt *choke_pop_raw(struct aqm_queue *q)
{
	struct choke *c = aqm_priv(q);

	return aqm_ring_pop(&c->ring);
}

static struct aqm_pkt *choke_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct choke *c = aqm_priv(q);
	struct aqm_pkt *pkt = aqm_ring_pop(&c->ring);

	if (pkt) {
		aqm_account_remove(q, pkt);
		if (!q->qlen_pkts)
			aqm_red_avg_start_idle(&c->avg, now_ns);
	}
	return pkt;
}

static int choke_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct choke *c = aqm_priv(q);

	if (q->qlen_pkts >= c->limit || aqm_ring_push(&c->ring, pkt))
		return -1;
	aqm_account_add(q, pkt);
	return 0;
}

static size_t choke_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct choke *c = aqm_priv(q);

	pos = aqm_put_kfixed(buf, len, pos, "q_avg", (c->avg.avg_q16 * 1000) >> 16, 3);
	pos = aqm_put_kvi(buf, len, pos, "count", c->mark.count);
	pos = aqm_put_kv(buf, len, pos, "matched", c->matched);
	pos = aqm_put_kv(buf, len, pos, "prob_drops", c->prob_drops);
	return aqm_put_kv(buf, len, pos, "forced_drops", c->forced_drops);
}

const struct aqm_ops aqm_choke_ops = {
	.name = "choke",
	.params = choke_params,
	.nparams = sizeof(choke_params) / sizeof(choke_params[0]),
	.priv_size = sizeof(struct choke),
	.init = choke_init,
	.enqueue = choke_enqueue,
	.dequeue = choke_dequeue,
	.pop_raw = choke_pop_raw,
	.requeue = choke_requeue,
	.xstats = choke_xstats,
	.release = choke_release,
};
