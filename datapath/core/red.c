/* red.c - Random Early Detection as Linux sch_red does it (Floyd & Jacobson
 * 1993), thresholds in packets:
 *   q_avg < min            enqueue
 *   min <= q_avg < max     drop with p_b = max_p (q_avg - min) / (max - min),
 *                          spread uniformly: drop when count * p_b >= R,
 *                          R uniform in [0,1) drawn after each drop
 *   q_avg >= max           drop ("forced", gentle off)
 * With ecn=1 an ECN-capable arrival is marked CE instead of either drop (at
 * q_avg >= max only without harddrop), as sch_red marks, and goes on to the
 * limit check.
 * plus a hard packet limit (overflow) and the idle-time decay of q_avg
 * (red_avg.h), which needs the link rate and the average packet size.
 */
#include "red_law.h"

const struct aqm_param aqm_red_params[RED_NPARAMS] = { AQM_RED_PARAM_ROWS };

/* min < max <= limit, or an error naming 'max'. */
static int check_thresholds(const char *name, int64_t limit, int64_t min, int64_t max,
			    struct aqm_error *err)
{
	size_t pos;

	if (min >= max) {
		aqm_err_at(err, AQM_ERR_CONFLICT, 0, RED_P_MAX, RED_P_MIN);
		err->disc = name;
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, name);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": parameter 'max' = ");
		pos = aqm_put_i64(AQM_ERR_TEXT(err), pos, max);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " must be greater than 'min' = ");
		aqm_put_i64(AQM_ERR_TEXT(err), pos, min);
		return -1;
	}
	if (max > limit) {
		aqm_err_at(err, AQM_ERR_CONFLICT, 0, RED_P_MAX, RED_P_LIMIT);
		err->disc = name;
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, name);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": parameter 'max' = ");
		pos = aqm_put_i64(AQM_ERR_TEXT(err), pos, max);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " must not exceed 'limit' = ");
		aqm_put_i64(AQM_ERR_TEXT(err), pos, limit);
		return -1;
	}
	return 0;
}

int aqm_red_law_init(struct aqm_red_law *law, const char *name, const struct aqm_args *a,
		     struct aqm_error *err)
{
	const int64_t *v = a->v;
	uint64_t maxp_q32;

	if (check_thresholds(name, v[RED_P_LIMIT], v[RED_P_MIN], v[RED_P_MAX], err))
		return -1;
	law->limit = (uint32_t)v[RED_P_LIMIT];
	law->min_q16 = v[RED_P_MIN] << 16;
	law->max_q16 = v[RED_P_MAX] << 16;
	maxp_q32 = ((uint64_t)v[RED_P_MAXP] << 32) / 1000000;
	law->mark.pb_scale = maxp_q32 / (uint64_t)(v[RED_P_MAX] - v[RED_P_MIN]);
	law->mark.count = -1;
	law->harddrop = (uint8_t)v[RED_P_HARDDROP];
	aqm_red_avg_init(&law->avg, AQM_W_ONE >> v[RED_P_WLOG], (uint64_t)v[RED_P_RATE],
			 (uint32_t)v[RED_P_AVPKT]);
	return 0;
}

size_t aqm_red_law_xstats(const struct aqm_red_law *law, char *buf, size_t len, size_t pos)
{
	pos = aqm_put_kfixed(buf, len, pos, "q_avg", (law->avg.avg_q16 * 1000) >> 16, 3);
	return aqm_put_kvi(buf, len, pos, "count", law->mark.count);
}

void aqm_red_law_restart(struct aqm_red_law *law)
{
	law->avg.avg_q16 = 0;
	law->avg.idle_since_ns = 0;
	law->mark.count = -1;
}

void aqm_red_law_get_xstats(const struct aqm_red_law *law, struct aqm_xstats *out)
{
	out->flags |= AQM_XS_QAVG;
	out->q_avg_milli = (uint64_t)((law->avg.avg_q16 * 1000) >> 16);
}

size_t aqm_red_law_xstats_drops(const struct aqm_red_law *law, char *buf, size_t len, size_t pos)
{
	pos = aqm_put_kv(buf, len, pos, "prob_drops", law->prob_drops);
	pos = aqm_put_kv(buf, len, pos, "forced_drops", law->forced_drops);
	pos = aqm_put_kv(buf, len, pos, "prob_marks", law->prob_marks);
	return aqm_put_kv(buf, len, pos, "forced_marks", law->forced_marks);
}

struct red {
	struct aqm_fifo fifo;
	struct aqm_red_law law;
};

static int red_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct red *r = aqm_priv(q);

	return aqm_red_law_init(&r->law, "red", a, err);
}

static int red_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct red *r = aqm_priv(q);
	struct aqm_red_law *law = &r->law;
	int64_t avg;

	aqm_red_avg_update(&law->avg, q->qlen_pkts, now_ns);
	avg = law->avg.avg_q16;
	if (avg < law->min_q16)
		law->mark.count = -1;
	else if (avg >= law->max_q16) {
		if (aqm_red_law_force(law, q, pkt) == AQM_DROPPED)
			return AQM_DROPPED;
	} else if (aqm_red_law_between(law, q, pkt, avg) == AQM_DROPPED)
		return AQM_DROPPED;
	if (q->qlen_pkts >= law->limit) {
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
			aqm_red_avg_start_idle(&r->law.avg, now_ns);
	}
	return pkt;
}

static int red_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct red *r = aqm_priv(q);

	if (q->qlen_pkts >= r->law.limit)
		return -1;
	aqm_fifo_push(&r->fifo, pkt);
	aqm_account_add(q, pkt);
	return 0;
}

static size_t red_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct red *r = aqm_priv(q);

	pos = aqm_red_law_xstats(&r->law, buf, len, pos);
	return aqm_red_law_xstats_drops(&r->law, buf, len, pos);
}

static void red_restart(struct aqm_queue *q)
{
	aqm_red_law_restart(&((struct red *)aqm_priv(q))->law);
}

static void red_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	aqm_red_law_get_xstats(&((const struct red *)aqm_priv(q))->law, out);
}

const struct aqm_ops aqm_red_ops = {
	.name = "red",
	.params = aqm_red_params,
	.nparams = RED_NPARAMS,
	.priv_size = sizeof(struct red),
	.init = red_init,
	.enqueue = red_enqueue,
	.dequeue = red_dequeue,
	.pop_raw = red_pop_raw,
	.requeue = red_requeue,
	.xstats = red_xstats,
	.get_xstats = red_get_xstats,
	.restart = red_restart,
};
