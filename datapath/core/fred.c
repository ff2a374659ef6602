/* fred.c - Flow Random Early Drop (Lin and Morris 1997; seed 004 section 2.3):
 * RED whose drops are aimed at the flows that hold more than their share of
 * the queue. Per flow with packets queued: qlen_i and a strike count.
 *
 * Per arrival, with q_avg RED's average (updated on arrival and departure),
 * N the flows with packets queued, avgcq = max(q_avg / N, 1) and
 * maxq = min (2 once q_avg >= max):
 *   qlen_i >= maxq, or q_avg >= max and qlen_i > 2 avgcq,
 *   or qlen_i >= avgcq and strike_i > 1     drop ("forced"), strike_i++
 *   min <= q_avg < max                      RED's drop (red_law.h), but only
 *                                           for a flow with qlen_i >=
 *                                           max(minq, avgcq); count goes on
 *                                           for every arrival
 *   q_avg >= max                            drop (forced)
 * and the hard limit (overflow). With ecn=1 the two RED drops of an
 * ECN-capable packet are CE marks (forced only without harddrop); the drops
 * aimed at a flow stay drops. A flow's state lives while it has packets
 * queued: at qlen_i = 0 it leaves N and its strikes are forgotten.
 * Choices the papers leave open are in docs/disciplines-004.md ("FRED").
 */
#include "flow_table.h"
#include "red_law.h"

enum { P_MINQ = RED_NPARAMS, P_FLOWS, P_N };
_Static_assert(P_N <= AQM_MAX_PARAMS, "the table fits struct aqm_args");

static const struct aqm_param fred_params[] = {
	AQM_RED_PARAM_ROWS,
	[P_MINQ] = { "minq", "packets", 1, 1000000, 2, 0, AQM_PARAM_INT, 0 },
	[P_FLOWS] = { "flows", "entries", 16, 65536, 1024, 0, AQM_PARAM_INT, 0 },
};

struct fred_flow {
	struct aqm_flow_head head; /* head.busy: qlen_i */
	uint32_t strike;
};

struct fred {
	struct aqm_fifo fifo;
	struct aqm_red_law law;
	struct aqm_flow_table flows;
	int64_t minq_q16;
	uint32_t nactive;    /* N: flows with packets queued */
	uint64_t flow_drops; /* forced drops aimed at one flow (qlen_i or strike) */
	uint64_t untracked;  /* arrivals with no entry free: RED alone decided */
};

static int fred_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct fred *f = aqm_priv(q);

	if (aqm_red_law_init(&f->law, "fred", a, err))
		return -1;
	f->minq_q16 = a->v[P_MINQ] << 16;
	/* the table rounds the size up to a power of two */
	if (aqm_flow_table_alloc(&f->flows, &q->env, (uint32_t)a->v[P_FLOWS], sizeof(struct fred_flow))) {
		aqm_err(err, AQM_ERR_NOMEM, "fred: out of memory for parameter 'flows'", 0, 0);
		return -1;
	}
	return 0;
}

static void fred_release(struct aqm_queue *q)
{
	struct fred *f = aqm_priv(q);

	aqm_flow_table_free(&f->flows, &q->env);
}

static inline struct fred_flow *fred_flow_at(const struct fred *f, uint32_t slot)
{
	return (struct fred_flow *)aqm_flow_at(&f->flows, slot);
}

static int fred_drop(struct aqm_queue *q, struct fred *f, struct aqm_pkt *pkt, int forced)
{
	if (forced)
		f->law.forced_drops++;
	else
		f->law.prob_drops++;
	aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
	return AQM_DROPPED;
}

/* The decision for an arrival of a flow with qlen_i packets queued and
 * strike_i strikes (both 0 for a flow with no entry); AQM_QUEUED to go on,
 * 1 for a drop aimed at the flow (strike), 2 for any other drop. */
static int fred_decide(struct fred *f, struct aqm_queue *q, int64_t avg, uint32_t qlen_i,
		       uint32_t strike_i)
{
	struct aqm_red_law *law = &f->law;
	int64_t qi = (int64_t)qlen_i << 16, maxq = avg >= law->max_q16 ? 2 << 16 : law->min_q16;
	int64_t avgcq = f->nactive ? avg / f->nactive : avg;

	if (avgcq < (1 << 16))
		avgcq = 1 << 16;
	if (qi >= maxq || (avg >= law->max_q16 && qi > 2 * avgcq) || (qi >= avgcq && strike_i > 1))
		return 1;
	if (avg < law->min_q16) {
		law->mark.count = -1;
		return AQM_QUEUED;
	}
	if (avg >= law->max_q16) {
		law->mark.count = 0;
		return 2;
	}
	if (qi >= (f->minq_q16 > avgcq ? f->minq_q16 : avgcq))
		return aqm_red_mark(&law->mark, avg - law->min_q16, &q->env) ? 3 : AQM_QUEUED;
	/* not a candidate: RED's count still runs (Lin and Morris: count++ for every
	 * arrival between the thresholds) */
	if (!++law->mark.count)
		law->mark.r_q32 = q->env.random_u32(q->env.ctx);
	return AQM_QUEUED;
}

static int fred_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct fred *f = aqm_priv(q);
	struct fred_flow *fl = 0;
	int fresh, verdict;
	uint32_t slot;

	aqm_red_avg_update(&f->law.avg, q->qlen_pkts, now_ns);
	slot = aqm_flow_get(&f->flows, pkt->flow_hash, now_ns, &fresh);
	if (slot == AQM_FLOW_NONE)
		f->untracked++;
	else
		fl = fred_flow_at(f, slot);
	verdict = fred_decide(f, q, f->law.avg.avg_q16, fl ? fl->head.busy : 0, fl ? fl->strike : 0);
	if (verdict == 1 && fl) {
		fl->strike++;
		f->flow_drops++;
	}
	/* ecn=1: RED's drops (2 forced, 3 probabilistic) of an ECN-capable
	 * packet become marks as in red.c; a drop aimed at a flow over its
	 * share (1) stays a drop - it polices the flows marks did not slow */
	if ((verdict == 3 || (verdict == 2 && !f->law.harddrop)) && aqm_mark_ce(q, pkt, AQM_DROP_EARLY)) {
		if (verdict == 3)
			f->law.prob_marks++;
		else
			f->law.forced_marks++;
		verdict = AQM_QUEUED;
	}
	if (verdict != AQM_QUEUED)
		return fred_drop(q, f, pkt, verdict != 3);
	if (q->qlen_pkts >= f->law.limit) {
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	pkt->core_slot = slot;
	if (fl && !fl->head.busy++)
		f->nactive++;
	aqm_fifo_push(&f->fifo, pkt);
	aqm_account_add(q, pkt);
	return AQM_QUEUED;
}

/* A packet leaves the queue: its flow's qlen_i goes down; at 0 the flow
 * leaves N and its state (strikes) is forgotten. */
static void fred_unqueued(struct fred *f, const struct aqm_pkt *pkt)
{
	struct fred_flow *fl;

	if (pkt->core_slot == AQM_FLOW_NONE)
		return;
	fl = fred_flow_at(f, pkt->core_slot & f->flows.mask);
	if (!fl->head.used || fl->head.hash != pkt->flow_hash || !fl->head.busy)
		return; /* carried over from another discipline: never counted here */
	if (!--fl->head.busy) {
		f->nactive--;
		fl->strike = 0;
	}
}

static struct aqm_pkt *fred_pop_raw(struct aqm_queue *q)
{
	struct fred *f = aqm_priv(q);
	struct aqm_pkt *pkt = aqm_fifo_pop(&f->fifo);

	if (pkt)
		fred_unqueued(f, pkt);
	return pkt;
}

static struct aqm_pkt *fred_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct fred *f = aqm_priv(q);
	struct aqm_pkt *pkt = fred_pop_raw(q);

	if (!pkt)
		return 0;
	aqm_account_remove(q, pkt);
	/* FRED computes the average on departures too */
	if (q->qlen_pkts)
		aqm_red_avg_step(&f->law.avg, q->qlen_pkts);
	else
		aqm_red_avg_start_idle(&f->law.avg, now_ns);
	return pkt;
}

static int fred_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct fred *f = aqm_priv(q);

	pkt->core_slot = AQM_FLOW_NONE; /* carried: not counted in any qlen_i */
	return aqm_fifo_requeue(q, &f->fifo, pkt, f->law.limit);
}

static size_t fred_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct fred *f = aqm_priv(q);

	pos = aqm_red_law_xstats(&f->law, buf, len, pos);
	pos = aqm_put_kv(buf, len, pos, "active_flows", f->nactive);
	pos = aqm_put_kv(buf, len, pos, "flow_drops", f->flow_drops);
	pos = aqm_put_kv(buf, len, pos, "untracked", f->untracked);
	pos = aqm_put_kv(buf, len, pos, "evictions", f->flows.evictions);
	return aqm_red_law_xstats_drops(&f->law, buf, len, pos);
}

static void fred_restart(struct aqm_queue *q)
{
	aqm_red_law_restart(&((struct fred *)aqm_priv(q))->law);
}

static void fred_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	const struct fred *f = aqm_priv(q);

	aqm_red_law_get_xstats(&f->law, out);
	out->flags |= AQM_XS_FLOWS;
	out->active_flows = f->nactive;
}

const struct aqm_ops aqm_fred_ops = {
	.name = "fred",
	.params = fred_params,
	.nparams = P_N,
	.priv_size = sizeof(struct fred),
	.init = fred_init,
	.enqueue = fred_enqueue,
	.dequeue = fred_dequeue,
	.pop_raw = fred_pop_raw,
	.requeue = fred_requeue,
	.xstats = fred_xstats,
	.release = fred_release,
	.get_xstats = fred_get_xstats,
	.restart = fred_restart,
};
