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
 * With ecn=1 the forced and probabilistic drops of an ECN-capable arrival are
 * CE marks (forced ones only without harddrop), as in sch_choke; a match
 * still drops both packets.
 */
#include "red_law.h"
#include "ring.h"

struct choke {
	struct aqm_ring ring;
	struct aqm_red_law law; /* parameters, thresholds and early drops as red's */
	uint64_t matched;
};

static int choke_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct choke *c = aqm_priv(q);

	if (aqm_red_law_init(&c->law, "choke", a, err))
		return -1;
	if (aqm_ring_alloc(&c->ring, &q->env, c->law.limit)) {
		aqm_err(err, AQM_ERR_NOMEM, "choke: out of memory for parameter 'limit'", 0, 0);
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
	struct aqm_red_law *law = &c->law;
	int64_t avg;

	aqm_red_avg_update(&law->avg, q->qlen_pkts, now_ns);
	avg = law->avg.avg_q16;
	if (avg <= law->min_q16) {
		law->mark.count = -1;
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
				aqm_red_avg_start_idle(&law->avg, now_ns);
			return AQM_DROPPED;
		}
		if (avg > law->max_q16) {
			if (aqm_red_law_force(law, q, pkt) == AQM_DROPPED)
				return AQM_DROPPED;
		} else if (aqm_red_law_between(law, q, pkt, avg) == AQM_DROPPED)
			return AQM_DROPPED;
	}
	if (q->qlen_pkts >= law->limit || aqm_ring_push(&c->ring, pkt)) {
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
			aqm_red_avg_start_idle(&c->law.avg, now_ns);
	}
	return pkt;
}

static int choke_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct choke *c = aqm_priv(q);

	if (q->qlen_pkts >= c->law.limit || aqm_ring_push(&c->ring, pkt))
		return -1;
	aqm_account_add(q, pkt);
	return 0;
}

static size_t choke_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct choke *c = aqm_priv(q);

	pos = aqm_red_law_xstats(&c->law, buf, len, pos);
	pos = aqm_put_kv(buf, len, pos, "matched", c->matched);
	return aqm_red_law_xstats_drops(&c->law, buf, len, pos);
}

static void choke_restart(struct aqm_queue *q)
{
	aqm_red_law_restart(&((struct choke *)aqm_priv(q))->law);
}

static void choke_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	aqm_red_law_get_xstats(&((const struct choke *)aqm_priv(q))->law, out);
}

const struct aqm_ops aqm_choke_ops = {
	.name = "choke",
	.params = aqm_red_params,
	.nparams = RED_NPARAMS,
	.priv_size = sizeof(struct choke),
	.init = choke_init,
	.enqueue = choke_enqueue,
	.dequeue = choke_dequeue,
	.pop_raw = choke_pop_raw,
	.requeue = choke_requeue,
	.xstats = choke_xstats,
	.release = choke_release,
	.get_xstats = choke_get_xstats,
	.restart = choke_restart,
};
