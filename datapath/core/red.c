/* red.c - Random Early Detection as Linux sch_red does it (Floyd & Jacobson
 * 1993), thresholds in packets:
 *   q_avg < min            enqueue
 *   min <= q_avg < max     drop with p_b = max_p (q_avg - min) / (max - min),
 *                          spread uniformly: drop when count * p_b >= R,
 *                          R uniform in [0,1) drawn after each drop
 *   q_avg >= max           drop ("forced", gentle off)
 * plus a hard packet limit (overflow) and the idle-time decay of q_avg
 * (red_avg.h), which needs the link rate and the average packet size.
 */
#include "red_avg.h"

enum { P_LIMIT, P_MIN, P_MAX, P_MAXP, P_WLOG, P_RATE, P_AVPKT };

static const struct aqm_param red_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 },
	[P_MIN] = { "min", "packets", 0, 1000000, 20, 0, AQM_PARAM_INT, 0 },
	[P_MAX] = { "max", "packets", 1, 1000000, 60, 0, AQM_PARAM_INT, 0 },
	[P_MAXP] = { "max_p", "probability", 1, 1000000, 100000, 6, AQM_PARAM_INT, 0 },
	[P_WLOG] = { "wlog", "log2(1/w)", 0, 23, 9, 0, AQM_PARAM_INT, 0 },
	[P_RATE] = { "rate_bps", "bit/s", 1000, 1000000000000LL, 100000000, 0, AQM_PARAM_INT, 0 },
	[P_AVPKT] = { "avpkt", "bytes", 64, 65535, 1500, 0, AQM_PARAM_INT, 0 },
};

struct red {
	struct aqm_fifo fifo;
	struct aqm_red_avg avg;
	uint32_t limit;
	int64_t min_q16, max_q16;
	struct aqm_red_mark mark;
	uint64_t prob_drops, forced_drops;
};

int aqm_red_check_thresholds(const char *name, int64_t limit, int64_t min, int64_t max,
			     char *err, size_t errlen)
{
	size_t pos;

	if (min >= max) {
		pos = aqm_put_str(err, errlen, 0, name);
		pos = aqm_put_str(err, errlen, pos, ": parameter 'max' = ");
		pos = aqm_put_i64(err, errlen, pos, max);
		pos = aqm_put_str(err, errlen, pos, " must be greater than 'min' = ");
		aqm_put_i64(err, errlen, pos, min);
		return -1;
	}
	if (max > limit) {
		pos = aqm_put_str(err, errlen, 0, name);
		pos = aqm_put_str(err, errlen, pos, ": parameter 'max' = ");
		pos = aqm_put_i64(err, errlen, pos, max);
		pos = aqm_put_str(err, errlen, pos, " must not exceed 'limit' = ");
		aqm_put_i64(err, errlen, pos, limit);
		return -1;
	}
	return 0;
}

static int red_init(struct aqm_queue *q, const struct aqm_args *a, char *err, size_t errlen)
{
	struct red *r = aqm_priv(q);
	uint64_t maxp_q32;

	if (aqm_red_check_thresholds("red", a->v[P_LIMIT], a->v[P_MIN], a->v[P_MAX], err, errlen))
		return -1;
	r->limit = (uint32_t)a->v[P_LIMIT];
	r->min_q16 = a->v[P_MIN] << 16;
	r->max_q16 = a->v[P_MAX] << 16;
	maxp_q32 = ((uint64_t)a->v[P_MAXP] << 32) / 1000000;
	r->mark.pb_scale = maxp_q32 / (uint64_t)(a->v[P_MAX] - a->v[P_MIN]);
	r->mark.count = -1;
	aqm_red_avg_init(&r->avg, AQM_W_ONE >> a->v[P_WLOG], (uint64_t)a->v[P_RATE],
			 (uint32_t)a->v[P_AVPKT]);
	return 0;
}

static int red_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct red *r = aqm_priv(q);
	int64_t avg;

	aqm_red_avg_update(&r->avg, q->qlen_pkts, now_ns);
	avg = r->avg.avg_q16;
	if (avg < r->min_q16) {
		r->mark.count = -1;
	} else if (avg >= r->max_q16) {
		r->mark.count = -1;
		r->forced_drops++;
		aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
		return AQM_DROPPED;
	} else if (aqm_red_mark(&r->mark, avg - r->min_q16, &q->env)) {
		r->prob_drops++;
		aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
		return AQM_DROPPED;
	}
	if (q->qlen_pkts >= r->limit) {
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	aqm_fifo_push(&r->fifo, pkt);
	aqm_account_add(q, pkt);
	return AQM_QUEUED;
}

static struct aqm_pkt *red_pop_raw(struct aqm_queue *q)
{
	struct red *r = aqm_priv(q);

	return aqm_fifo_pop(&r->fifo);
}

static struct aqm_pkt *red_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct red *r = aqm_priv(q);
	struct aqm_pkt *pkt = aqm_fifo_pop(&r->fifo);

	if (pkt) {
		aqm_account_remove(q, pkt);
		if (!q->qlen_pkts)
			aqm_red_avg_start_idle(&r->avg, now_ns);
	}
	return pkt;
}

static int red_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct red *r = aqm_priv(q);

	if (q->qlen_pkts >= r->limit)
		return -1;
	aqm_fifo_push(&r->fifo, pkt);
	aqm_account_add(q, pkt);
	return 0;
}

static size_t red_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct red *r = aqm_priv(q);

	pos = aqm_put_kfixed(buf, len, pos, "q_avg", (r->avg.avg_q16 * 1000) >> 16, 3);
	pos = aqm_put_kvi(buf, len, pos, "count", r->mark.count);
	pos = aqm_put_kv(buf, len, pos, "prob_drops", r->prob_drops);
	return aqm_put_kv(buf, len, pos, "forced_drops", r->forced_drops);
}

const struct aqm_ops aqm_red_ops = {
	.name = "red",
	.params = red_params,
	.nparams = sizeof(red_params) / sizeof(red_params[0]),
	.priv_size = sizeof(struct red),
	.init = red_init,
	.enqueue = red_enqueue,
	.dequeue = red_dequeue,
	.pop_raw = red_pop_raw,
	.requeue = red_requeue,
	.xstats = red_xstats,
};
