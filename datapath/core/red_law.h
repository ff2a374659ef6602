/* red_law.h - what red and choke share (as include/net/red.h serves sch_red and
 * sch_choke): the parameter table, the thresholds and RED's marking state, their
 * check at init, the early drops and their counters. Each discipline keeps its own
 * queue (red: a FIFO; choke: a ring it can draw a random packet from) and its own
 * comparisons against the thresholds (choke's are Linux sch_choke's: q_avg <= min
 * passes, q_avg > max is forced).
 */
#ifndef CKCD_RED_LAW_H
#define CKCD_RED_LAW_H

#include "red_avg.h"

enum { RED_P_LIMIT, RED_P_MIN, RED_P_MAX, RED_P_MAXP, RED_P_WLOG, RED_P_RATE, RED_P_AVPKT,
       RED_P_ECN, RED_P_HARDDROP, RED_NPARAMS };

/* limit, min, max (packets), max_p, wlog, rate_bps, avpkt, ecn, harddrop: red's and
 * choke's table, and the first rows of fred's (which adds its own after RED_NPARAMS).
 * ecn and harddrop are sch_red's and sch_choke's flags of the same names: with ecn an
 * early drop of an ECN-capable packet becomes a CE mark; harddrop keeps the drop when
 * q_avg is above max (marks have not held the queue: an unresponsive sender). */
#define AQM_RED_PARAM_ROWS \
	[RED_P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 }, \
	[RED_P_MIN] = { "min", "packets", 0, 1000000, 20, 0, AQM_PARAM_INT, 0 }, \
	[RED_P_MAX] = { "max", "packets", 1, 1000000, 60, 0, AQM_PARAM_INT, 0 }, \
	[RED_P_MAXP] = { "max_p", "probability", 1, 1000000, 100000, 6, AQM_PARAM_INT, 0 }, \
	[RED_P_WLOG] = { "wlog", "log2(1/w)", 0, 23, 9, 0, AQM_PARAM_INT, 0 }, \
	[RED_P_RATE] = { "rate_bps", "bit/s", 1000, 1000000000000LL, 100000000, 0, AQM_PARAM_INT, 0 }, \
	[RED_P_AVPKT] = { "avpkt", "bytes", 64, 65535, 1500, 0, AQM_PARAM_INT, 0 }, \
	[RED_P_ECN] = AQM_PARAM_ECN, \
	[RED_P_HARDDROP] = { "harddrop", "1 drop, not mark, above max", 0, 1, 0, 0, AQM_PARAM_INT, 0 }

extern const struct aqm_param aqm_red_params[RED_NPARAMS];

struct aqm_red_law {
	struct aqm_red_avg avg;
	struct aqm_red_mark mark;
	uint32_t limit;           /* hard limit, packets */
	int64_t min_q16, max_q16; /* thresholds in packets, Q16 (as q_avg) */
	uint64_t prob_drops, forced_drops;
	uint64_t prob_marks, forced_marks; /* ecn=1: CE instead of those drops */
	uint8_t harddrop;
};

/* From checked arguments of aqm_red_params; refuses (naming 'max') unless
 * min < max <= limit. name is the discipline's, for the message. */
int aqm_red_law_init(struct aqm_red_law *law, const char *name, const struct aqm_args *a,
		     struct aqm_error *err);
/* After a flush: q_avg from zero, no drop spacing under way. */
void aqm_red_law_restart(struct aqm_red_law *law);
void aqm_red_law_get_xstats(const struct aqm_red_law *law, struct aqm_xstats *out);

/* q_avg is above max: the arrival is dropped (early, "forced"), or marked
 * (AQM_QUEUED: it may go on to the limit check) unless harddrop. */
static inline int aqm_red_law_force(struct aqm_red_law *law, struct aqm_queue *q, struct aqm_pkt *pkt)
{
	law->mark.count = -1;
	if (!law->harddrop && aqm_mark_ce(q, pkt, AQM_DROP_EARLY)) {
		law->forced_marks++;
		return AQM_QUEUED;
	}
	law->forced_drops++;
	aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
	return AQM_DROPPED;
}

/* q_avg is between the thresholds: RED's probabilistic drop (or mark), or
 * AQM_QUEUED when the arrival may go on to the limit check. */
static inline int aqm_red_law_between(struct aqm_red_law *law, struct aqm_queue *q,
				      struct aqm_pkt *pkt, int64_t avg_q16)
{
	if (!aqm_red_mark(&law->mark, avg_q16 - law->min_q16, &q->env))
		return AQM_QUEUED;
	if (aqm_mark_ce(q, pkt, AQM_DROP_EARLY)) {
		law->prob_marks++;
		return AQM_QUEUED;
	}
	law->prob_drops++;
	aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
	return AQM_DROPPED;
}

/* "q_avg=… count=…" (the discipline adds its own tokens after these). */
size_t aqm_red_law_xstats(const struct aqm_red_law *law, char *buf, size_t len, size_t pos);
/* "prob_drops=… forced_drops=… prob_marks=… forced_marks=…" */
size_t aqm_red_law_xstats_drops(const struct aqm_red_law *law, char *buf, size_t len, size_t pos);

#endif
