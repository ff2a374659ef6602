/* red_avg.h - the RED average queue length, shared by red, choke and ckcd
 * (the way include/net/red.h serves sch_red and sch_choke).
 *
 *   q_avg <- (1 - w) q_avg + w q          on every arrival (RED; CKCD Alg. 1 line 3)
 *
 * Fixed point: q_avg in packets as Q16, the weight w in Q24 (RED's 2^-Wlog is
 * w = 1 << (24 - Wlog); CKCD's omega = 0.002 is w = 33554). While the queue is
 * idle no packets arrive to pull the average down, so at the end of an idle
 * period the average is decayed as if m packets had arrived to an empty
 * queue, m = idle time / transmission time of an average packet (Floyd &
 * Jacobson 1993, section 11; Linux red_calc_qavg_from_idle_time):
 *   q_avg <- q_avg (1 - w)^m
 */
#ifndef CKCD_RED_AVG_H
#define CKCD_RED_AVG_H

#include "aqm_impl.h"

#define AQM_W_ONE (1u << 24)

struct aqm_red_avg {
	int64_t avg_q16;        /* q_avg, packets, Q16 */
	uint32_t w_q24;         /* EWMA weight, Q24 */
	uint64_t idle_since_ns; /* 0: the queue is not idle */
	uint64_t pkt_time_ns;   /* avpkt * 8 / rate: one average packet on the wire */
};

static inline void aqm_red_avg_init(struct aqm_red_avg *r, uint32_t w_q24, uint64_t rate_bps,
				    uint32_t avpkt_bytes)
{
	r->avg_q16 = 0;
	r->w_q24 = w_q24;
	r->idle_since_ns = 0;
	r->pkt_time_ns = (uint64_t)avpkt_bytes * 8 * AQM_NSEC_PER_SEC / rate_bps;
	if (!r->pkt_time_ns)
		r->pkt_time_ns = 1;
}

/* (1 - w)^m in Q24 by repeated squaring: O(log m), only at the end of idle. */
static inline uint32_t aqm_red_decay_q24(uint32_t w_q24, uint64_t m)
{
	uint64_t base = AQM_W_ONE - w_q24, result = AQM_W_ONE;

	if (m >= (1u << 24))
		return 0;
	while (m) {
		if (m & 1)
			result = (result * base) >> 24;
		base = (base * base) >> 24;
		m >>= 1;
	}
	return (uint32_t)result;
}

/* The EWMA step of an arrival that does not end an idle period. */
static inline int64_t aqm_red_avg_step(struct aqm_red_avg *r, uint32_t qlen_pkts)
{
	r->avg_q16 += ((((int64_t)qlen_pkts << 16) - r->avg_q16) * (int64_t)r->w_q24) >> 24;
	return r->avg_q16;
}

/* Call on every arrival with the instantaneous queue length in packets. */
static inline void aqm_red_avg_update(struct aqm_red_avg *r, uint32_t qlen_pkts, uint64_t now_ns)
{
	if (r->idle_since_ns) {
		uint64_t idle = now_ns > r->idle_since_ns ? now_ns - r->idle_since_ns : 0;
		uint32_t f = aqm_red_decay_q24(r->w_q24, idle / r->pkt_time_ns);

		r->avg_q16 = (int64_t)(((uint64_t)r->avg_q16 * f) >> 24);
		r->idle_since_ns = 0;
		return;
	}
	aqm_red_avg_step(r, qlen_pkts);
}

/* Call when a dequeue (or drop) leaves the queue empty. */
static inline void aqm_red_avg_start_idle(struct aqm_red_avg *r, uint64_t now_ns)
{
	r->idle_since_ns = now_ns ? now_ns : 1;
}

/* RED's drop decision between the thresholds, shared by red and choke (the Linux
 * qdiscs share red_action() the same way). Floyd & Jacobson's count method: drops
 * are spread uniformly by dropping when count * p_b >= R, R drawn afresh after each
 * drop and when count restarts. count is -1 while q_avg is outside [min, max). */
struct aqm_red_mark {
	uint64_t pb_scale; /* p_b (Q32) per unit of (q_avg - min) in Q16 */
	int64_t count;     /* packets since the last drop; -1 outside [min, max) */
	uint32_t r_q32;    /* R */
};

/* 1 when the arriving packet is to be dropped; above_min_q16 = q_avg - min (Q16). */
static inline int aqm_red_mark(struct aqm_red_mark *m, int64_t above_min_q16, const struct aqm_env *env)
{
	if (++m->count) {
		uint64_t pb_q32 = ((uint64_t)above_min_q16 * m->pb_scale) >> 16;

		if (m->count > (1LL << 30))
			m->count = 1LL << 30;
		if ((uint64_t)m->count * pb_q32 >= m->r_q32) {
			m->count = 0;
			m->r_q32 = env->random_u32(env->ctx);
			return 1;
		}
	} else {
		m->r_q32 = env->random_u32(env->ctx);
	}
	return 0;
}

#endif
