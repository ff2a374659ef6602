/* care.c - CApture-REcapture fair sharing (Chan and Hamdi 2003; seed 004
 * section 2.5). ASSUMPTIONS: neither seed 004 nor any text we hold gives
 * CARE's parameters or its exact drop rule; what follows is the mechanism
 * seed 004 describes, with the choices written down in docs/disciplines-004.md
 * ("CARE") and every number a parameter.
 *
 * Arrivals are captured at random with probability `p_cap` into a list of
 * the last t = `captures` captures. From that list, the capture-recapture
 * model Mh with the first-order jackknife estimates the number of flows
 *   N = S + (t - 1)/t f1      (S distinct flows in the list, f1 of them
 *                              captured exactly once)
 * and a flow's rate from its share of the captures, rate_i = n_i / t * A,
 * with A the arrival rate measured over `window_ms`. A flow above the fair
 * share C / N is dropped with probability 1 - (C / N) / rate_i, so that what
 * it gets through is about the fair share; then the hard `limit` (overflow).
 *
 * Counts per flow live in the shared flow table (flow_table.h): head.busy
 * is n_i, so a flow in the capture list keeps its entry.
 */
#include "flow_table.h"

enum { P_LIMIT, P_CAPTURES, P_PCAP, P_WINDOW, P_RATE, P_FLOWS, P_N };

static const struct aqm_param care_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 },
	[P_CAPTURES] = { "captures", "packets (t)", 2, 4096, 100, 0, AQM_PARAM_INT, 0 },
	[P_PCAP] = { "p_cap", "probability", 1, 1000000, 50000, 6, AQM_PARAM_INT, 0 },
	[P_WINDOW] = { "window_ms", "ms", 1000, 10000000, 100000, 3, AQM_PARAM_INT, 0 },
	[P_RATE] = { "rate_bps", "bit/s", 1000, 1000000000000LL, 100000000, 0, AQM_PARAM_INT, 0 },
	[P_FLOWS] = { "flows", "entries", 16, 65536, 1024, 0, AQM_PARAM_INT, 0 },
};

struct care {
	struct aqm_fifo fifo;
	struct aqm_flow_table flows;
	uint32_t *capture;           /* slots of the last t captures (ring) */
	uint32_t t, ncaptured, next; /* list size, captures held, next ring index */
	uint32_t distinct, once;     /* S and f1 over the list */
	uint32_t limit, pcap_q32;
	uint64_t rate_bps, window_ns;
	uint64_t win_start_ns, win_bytes, arrival_bps; /* A, from the last window */
	uint64_t fair_drops, refused;
};

static int care_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct care *c = aqm_priv(q);
	uint32_t n = (uint32_t)a->v[P_FLOWS];

	c->limit = (uint32_t)a->v[P_LIMIT];
	c->t = (uint32_t)a->v[P_CAPTURES];
	c->pcap_q32 = (uint32_t)(((uint64_t)a->v[P_PCAP] << 32) / 1000000 - (a->v[P_PCAP] == 1000000));
	c->window_ns = (uint64_t)a->v[P_WINDOW] * 1000;
	c->rate_bps = (uint64_t)a->v[P_RATE];
	/* every flow in the list must find an entry: at least 2t of them (the
	 * table rounds the size up to a power of two) */
	if (n < 2 * c->t)
		n = 2 * c->t;
	if (aqm_flow_table_alloc(&c->flows, &q->env, n, sizeof(struct aqm_flow_head))) {
		aqm_err(err, AQM_ERR_NOMEM, "care: out of memory for parameter 'flows'", 0, 0);
		return -1;
	}
	c->capture = q->env.alloc(q->env.ctx, (size_t)c->t * sizeof(c->capture[0]));
	if (!c->capture) {
		aqm_flow_table_free(&c->flows, &q->env);
		aqm_err(err, AQM_ERR_NOMEM, "care: out of memory for parameter 'captures'", 0, 0);
		return -1;
	}
	return 0;
}

static void care_release(struct aqm_queue *q)
{
	struct care *c = aqm_priv(q);

	aqm_flow_table_free(&c->flows, &q->env);
	if (c->capture)
		q->env.free(q->env.ctx, c->capture);
}

/* n_i of the flow in slot changes by +1 / -1: keep S and f1 current. */
static void care_count(struct care *c, uint32_t slot, int up)
{
	struct aqm_flow_head *f = aqm_flow_at(&c->flows, slot);
	uint32_t before = f->busy, after = up ? before + 1 : before - 1;

	f->busy = after;
	c->distinct += (after != 0) - (before != 0);
	c->once += (after == 1) - (before == 1);
}

/* Capture the arrival of the flow in slot: it goes into the list, the
 * oldest capture leaves it once t are held. */
static void care_capture(struct care *c, uint32_t slot)
{
	if (c->ncaptured == c->t)
		care_count(c, c->capture[c->next], 0);
	else
		c->ncaptured++;
	c->capture[c->next] = slot;
	c->next = c->next + 1 == c->t ? 0 : c->next + 1;
	care_count(c, slot, 1);
}

/* A, the arrival rate: bytes of the last complete window of window_ns. */
static void care_arrival(struct care *c, uint32_t len, uint64_t now_ns)
{
	if (!c->win_start_ns) {
		c->win_start_ns = now_ns ? now_ns : 1;
	} else if (now_ns - c->win_start_ns >= c->window_ns) {
		uint64_t n = (now_ns - c->win_start_ns) / c->window_ns;

		c->arrival_bps = n == 1 ? c->win_bytes * 8 * AQM_NSEC_PER_SEC / c->window_ns : 0;
		c->win_bytes = 0;
		c->win_start_ns += n * c->window_ns;
	}
	c->win_bytes += len;
}

/* The drop probability (Q16) of a flow with n_i captures in the list. */
static uint32_t care_p_drop(const struct care *c, uint32_t n_i)
{
	uint64_t n_t, fair_bps, rate_bps;

	if (!n_i || !c->arrival_bps)
		return 0;
	/* N t = S t + (t - 1) f1; fair = C / N = C t / (N t) */
	n_t = (uint64_t)c->distinct * c->ncaptured + (uint64_t)(c->ncaptured - 1) * c->once;
	fair_bps = c->rate_bps * c->ncaptured / n_t;
	rate_bps = c->arrival_bps * n_i / c->ncaptured;
	if (rate_bps <= fair_bps)
		return 0;
	return (uint32_t)(65536 - (fair_bps << 16) / rate_bps);
}

static int care_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct care *c = aqm_priv(q);
	uint32_t slot, p;
	int fresh;

	care_arrival(c, pkt->len, now_ns);
	slot = aqm_flow_get(&c->flows, pkt->flow_hash, now_ns, &fresh);
	if (slot == AQM_FLOW_NONE) {
		c->refused++; /* not counted, not judged: the list is full of other flows */
	} else {
		if (q->env.random_u32(q->env.ctx) < c->pcap_q32)
			care_capture(c, slot);
		p = care_p_drop(c, aqm_flow_at(&c->flows, slot)->busy);
		if (p && (q->env.random_u32(q->env.ctx) & 0xffff) < p) {
			c->fair_drops++;
			aqm_drop_arriving(q, pkt, AQM_DROP_EARLY);
			return AQM_DROPPED;
		}
	}
	return aqm_fifo_enqueue(q, &c->fifo, pkt, c->limit);
}

static struct aqm_pkt *care_pop_raw(struct aqm_queue *q)
{
	struct care *c = aqm_priv(q);

	return aqm_fifo_pop(&c->fifo);
}

static struct aqm_pkt *care_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct care *c = aqm_priv(q);

	(void)now_ns;
	return aqm_fifo_dequeue(q, &c->fifo);
}

static int care_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct care *c = aqm_priv(q);

	return aqm_fifo_requeue(q, &c->fifo, pkt, c->limit);
}

static size_t care_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct care *c = aqm_priv(q);
	uint64_t n_t = (uint64_t)c->distinct * c->ncaptured + (uint64_t)(c->ncaptured ? c->ncaptured - 1 : 0) * c->once;

	pos = aqm_put_kv(buf, len, pos, "captured", c->ncaptured);
	pos = aqm_put_kv(buf, len, pos, "distinct", c->distinct);
	pos = aqm_put_kv(buf, len, pos, "once", c->once);
	/* N in thousandths */
	pos = aqm_put_kfixed(buf, len, pos, "est_flows", c->ncaptured ? (int64_t)(n_t * 1000 / c->ncaptured) : 0, 3);
	pos = aqm_put_kv(buf, len, pos, "arrival_bps", c->arrival_bps);
	pos = aqm_put_kv(buf, len, pos, "fair_drops", c->fair_drops);
	return aqm_put_kv(buf, len, pos, "refused", c->refused);
}

const struct aqm_ops aqm_care_ops = {
	.name = "care",
	.params = care_params,
	.nparams = P_N,
	.priv_size = sizeof(struct care),
	.init = care_init,
	.enqueue = care_enqueue,
	.dequeue = care_dequeue,
	.pop_raw = care_pop_raw,
	.requeue = care_requeue,
	.xstats = care_xstats,
	.release = care_release,
};
