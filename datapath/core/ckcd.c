/* ckcd.c - Choose-Keep and Controlled-Delay (Liu, Yang, Yang, Yu; seed 000,
 * Algorithm 1, eq. 1-9, Table II). Every interpretation of the paper made
 * here is written down, with its reason, in docs/ckcd.md.
 *
 * Enqueue (Alg. 1 lines 2-12): the RED-style average q_avg (line 3, weight
 * omega) against q_min/q_max:
 *   q_avg > q_max           drop (early)
 *   q_min <= q_avg <= q_max compare with a random queued packet: same flow ->
 *                           drop both (choke-match); otherwise drop the
 *                           arrival with p_c = (q_avg - q_min)/(q_max - q_min)
 *   q_avg < q_min           enqueue with a timestamp
 *   and the buffer `limit` (overflow).
 * Dequeue (lines 13-20): per flow i, the delay threshold
 *   d_th^i = K (mu_i / mu_f)^-2 + Q                      (eq. 9)
 * with mu_i the flow's admitted rate, mu_f = C / I the fair share, and K, Q
 * normalised so that d_th = D at mu_i = mu_f:  Q = -1/(k I), K = D - Q.
 * A flow whose packets' sojourn d_i >= d_th^i for longer than Delta enters the
 * dropping state: its packets with d_i >= d_th^i are dropped (delay) until
 * its sojourn has stayed below d_th^i for Delta.
 *
 * With ecn=1 (docs/ecn.md) an ECN-capable packet is marked CE instead of
 * the p_c drop, and instead of a delay drop for Delta from the start of its
 * flow's dropping state; after that, until the state ends, its late packets
 * are dropped (a sender that ignores CE, as BBRv1 does, is still held). The q_avg >
 * q_max drop and the match stay drops, as sch_red's harddrop and sch_choke's
 * match.
 *
 * Per-flow state lives in a fixed-size open-addressed table allocated at
 * create time (`flows` entries): the per-packet path never allocates.
 */
#include "codel_law.h"
#include "red_avg.h"
#include "ring.h"

enum {
	P_LIMIT, P_DELTA, P_D, P_OMEGA, P_RATE, P_RTT, P_AVPKT, P_QMIN, P_QMAX, P_K,
	P_DTH_MIN, P_DTH_MAX, P_WINDOW, P_FLOWS, P_ACTIVE_MIN, P_SPACING, P_NEW_DTH,
	P_MU_NET, P_MU_GAIN, P_ECN, P_N
};
_Static_assert(P_N <= AQM_MAX_PARAMS, "the table fits struct aqm_args");

static const struct aqm_param ckcd_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 },
	[P_DELTA] = { "delta_ms", "ms", 1, 100000000, 100000, 3, AQM_PARAM_INT, 0 },
	[P_D] = { "d_ms", "ms", 1, 10000000, 5000, 3, AQM_PARAM_INT, 0 },
	[P_OMEGA] = { "omega", "weight", 1, 1000000, 2000, 6, AQM_PARAM_INT, 0 },
	[P_RATE] = { "rate_bps", "bit/s", 1000, 1000000000000LL, 100000000, 0, AQM_PARAM_INT, 0 },
	[P_RTT] = { "rtt_ms", "ms", 1, 100000000, 20000, 3, AQM_PARAM_INT, 0 },
	[P_AVPKT] = { "avpkt", "bytes", 64, 65535, 1500, 0, AQM_PARAM_INT, 0 },
	[P_QMIN] = { "qmin", "packets (0: BDP)", 0, 1000000, 0, 0, AQM_PARAM_INT, 0 },
	[P_QMAX] = { "qmax", "packets (0: 3 BDP)", 0, 1000000, 0, 0, AQM_PARAM_INT, 0 },
	[P_K] = { "k", "1/s", 1000, 1000000000, 100000, 3, AQM_PARAM_INT, 0 },
	[P_DTH_MIN] = { "dth_min_ms", "ms", 0, 10000000, 500, 3, AQM_PARAM_INT, 0 },
	[P_DTH_MAX] = { "dth_max_ms", "ms", 1, 100000000, 50000, 3, AQM_PARAM_INT, 0 },
	[P_WINDOW] = { "window_ms", "ms", 1000, 10000000, 100000, 3, AQM_PARAM_INT, 0 },
	[P_FLOWS] = { "flows", "entries", 16, 65536, 1024, 0, AQM_PARAM_INT, 0 },
	/* A flow counts in I once this many of its bytes arrived in a window (0:
	 * its first packet, the paper's literal "active flow"): a ping, LLDP or a
	 * control connection is not a flow sharing the link (docs/ckcd.md). */
	[P_ACTIVE_MIN] = { "active_min_bytes", "bytes a window (0: any packet)", 0, 100000000, 3000, 0,
			   AQM_PARAM_INT, 0 },
	/* In the dropping state, 0: drop every late packet and leave after Delta
	 * below d_th (Algorithm 1 as written); 1: CoDel's law, which the paper
	 * names - late packets dropped Delta/sqrt(count) apart, the state left at
	 * the first packet below d_th (docs/ckcd.md, section 8). */
	[P_SPACING] = { "spacing", "0 every late packet, 1 CoDel's law", 0, 1, 0, 0, AQM_PARAM_INT, 0 },
	/* d_th of a flow with no admitted rate yet (mu_i = 0: new, or back after a
	 * silent window). 0: dth_max_ms, eq. 9's limit (ours); 1: D, Algorithm 1
	 * line 1's initial value (docs/ckcd.md, section 7). */
	[P_NEW_DTH] = { "new_dth", "0 dth_max_ms, 1 D", 0, 1, 0, 0, AQM_PARAM_INT, 0 },
	/* mu_i's bytes. 0: every byte admitted in the window (section 4's reading
	 * of "virtual arrival rate"); 1: less those dropped again from the queue
	 * (delay drops, the victim of a match) - the rate the flow is served at
	 * (docs/ckcd.md, section 4). */
	[P_MU_NET] = { "mu_net", "0 admitted, 1 admitted less dropped", 0, 1, 0, 0, AQM_PARAM_INT, 0 },
	/* mu_i from window to window: mu += gain (window's rate - mu). 1 (the
	 * default): the last window alone, as the paper measures it; below 1 an
	 * EWMA that steadies d_th at the cost of lag (docs/ckcd.md, section 4). */
	[P_MU_GAIN] = { "mu_gain", "weight of the last window", 1, 1000, 1000, 3, AQM_PARAM_INT, 0 },
	[P_ECN] = AQM_PARAM_ECN,
};

#define CKCD_PROBE 8 /* slots searched from a flow's home slot */

/* A flow entry is one 64-byte cache line (the table is 64-byte aligned):
 * only what the per-packet path reads. What only xstats or a flow not yet
 * counted in I reads is in the parallel array ckcd.cold. */
struct ckcd_flow {
	uint32_t hash;
	uint8_t used;
	uint8_t dropping;     /* sojourn >= d_th lasted Delta: dropping its late packets */
	uint16_t count;       /* spacing 1: drops in this dropping state (CoDel's count) */
	union {
		struct {
			uint32_t arr_epoch;   /* last window this flow counted in I (active_min_bytes) */
			uint32_t bytes_epoch_id;
		};
		uint64_t epochs; /* both: one comparison with ckcd.epoch2 */
	};
	uint32_t dth_epoch;
	uint32_t queued;      /* packets of this flow in the queue */
	uint64_t bytes_epoch; /* bytes admitted in window bytes_epoch_id */
	uint64_t mu_bps;      /* mu_i: admitted rate over the last complete window */
	uint64_t last_seen_ns;
	uint64_t dth_ns;      /* d_th^i, recomputed once per window */
	/* The Delta clock (0: not running). Not dropping: since when the sojourn
	 * has been >= d_th; dropping: since when it has been below d_th (spacing
	 * 1: when the next late packet may be dropped). Only one of these can run
	 * at a time, so one field holds them. */
	uint64_t since_ns;
};

_Static_assert(sizeof(struct ckcd_flow) == 64, "a flow entry is one cache line");

struct ckcd_flow_cold {
	uint64_t delay_drops;     /* xstats */
	uint64_t dropping_since_ns; /* when the flow last entered the dropping state (ecn=1) */
	uint32_t arrived_epoch;   /* the window arrived_bytes counts */
	uint32_t arrived_bytes;   /* arrived in it while the flow was not yet in I */
};

struct ckcd {
	struct aqm_ring ring;
	struct aqm_red_avg avg;
	uint32_t limit;
	uint64_t delta_ns, d_ns, rate_bps, window_ns;
	uint64_t dth_min_ns, dth_max_ns;
	uint64_t dth_new_ns;       /* d_th at mu_i = 0 (new_dth) */
	uint64_t k_milli;          /* k in 1/s, x1000 */
	uint64_t bdp_pkts;
	uint32_t qmin, qmax;       /* effective thresholds, packets */
	int64_t qmin_q16, qmax_q16;
	uint64_t pc_scale;         /* p_c (Q32) per unit of (q_avg - q_min) in Q16 */
	uint64_t mu_mul;           /* 8e9 / window_ns if exact, else 0 (see ckcd_mu) */
	/* mu_f = C / I and 1/(kI) for I = share_active (0: not yet computed) */
	uint32_t share_active;
	uint64_t share_mu_f, share_inv_kI_ns;
	/* windows ("epochs") for mu_i and the active-flow count I */
	uint64_t epoch_start_ns;
	uint64_t epoch_end_ns;     /* epoch_start_ns + window_ns; 0: not started */
	uint64_t fast_until_ns;    /* epoch_end_ns, or 0 while the queue is idle */
	uint32_t epoch;
	uint64_t epoch2;           /* epoch in both halves */
	uint32_t flows_this_epoch, flows_last_epoch;
	uint64_t active_min_bytes; /* a flow counts in I from this many bytes a window */
	int spaced;                /* spacing 1: CoDel's law in the dropping state */
	int mu_net;                /* mu_net 1: bytes dropped from the queue leave mu_i */
	uint32_t mu_gain;          /* mu_gain in thousandths (1000: no smoothing) */
	/* the flow table */
	struct ckcd_flow *flows;   /* 64-byte aligned inside flows_mem */
	struct ckcd_flow_cold *cold; /* beside flows[], same index */
	void *flows_mem;
	uint32_t nflows, flow_mask, flow_shift; /* flow_shift: 32 - log2(nflows) */
	uint32_t flows_used;
	uint64_t evictions, matched, early_drops, delay_drops;
	uint64_t early_marks, delay_marks; /* ecn=1: CE instead of those drops */
};

static int ckcd_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct ckcd *c = aqm_priv(q);
	uint64_t bdp_bytes, qmin, qmax;
	uint32_t n = 16, bits = 4;
	size_t pos;

	c->limit = (uint32_t)a->v[P_LIMIT];
	c->delta_ns = (uint64_t)a->v[P_DELTA] * 1000;
	c->d_ns = (uint64_t)a->v[P_D] * 1000;
	c->rate_bps = (uint64_t)a->v[P_RATE];
	c->window_ns = (uint64_t)a->v[P_WINDOW] * 1000;
	c->active_min_bytes = (uint64_t)a->v[P_ACTIVE_MIN];
	c->spaced = a->v[P_SPACING] != 0;
	c->mu_net = a->v[P_MU_NET] != 0;
	c->mu_gain = (uint32_t)a->v[P_MU_GAIN];
	if ((8 * AQM_NSEC_PER_SEC) % c->window_ns == 0)
		c->mu_mul = 8 * AQM_NSEC_PER_SEC / c->window_ns;
	c->dth_min_ns = (uint64_t)a->v[P_DTH_MIN] * 1000;
	c->dth_max_ns = (uint64_t)a->v[P_DTH_MAX] * 1000;
	c->dth_new_ns = a->v[P_NEW_DTH] ? c->d_ns : c->dth_max_ns;
	c->k_milli = (uint64_t)a->v[P_K];
	if (c->dth_min_ns > c->dth_max_ns) {
		aqm_err(err, AQM_ERR_CONFLICT, "ckcd: parameter 'dth_min_ms' must not exceed 'dth_max_ms'", 0, 0);
		aqm_err_at(err, AQM_ERR_CONFLICT, q->ops, P_DTH_MIN, P_DTH_MAX);
		return -1;
	}
	/* BDP in packets of avpkt bytes: rate * rtt / (8 * avpkt) */
	bdp_bytes = c->rate_bps / 8 * (uint64_t)a->v[P_RTT] / 1000000;
	c->bdp_pkts = (bdp_bytes + (uint64_t)a->v[P_AVPKT] / 2) / (uint64_t)a->v[P_AVPKT];
	if (!c->bdp_pkts)
		c->bdp_pkts = 1;
	/* q_min = BDP, q_max = 3 BDP (Alg. 1 initialisation); when 3 BDP does not
	 * fit the buffer both are clamped: q_max <= limit, q_min <= limit / 3. */
	qmax = a->v[P_QMAX] ? (uint64_t)a->v[P_QMAX] : 3 * c->bdp_pkts;
	qmin = a->v[P_QMIN] ? (uint64_t)a->v[P_QMIN] : c->bdp_pkts;
	if (a->v[P_QMAX] && qmax > c->limit) {
		aqm_err_at(err, AQM_ERR_CONFLICT, q->ops, P_QMAX, P_LIMIT);
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "ckcd: parameter 'qmax' = ");
		pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, qmax);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " must not exceed 'limit' = ");
		aqm_put_u64(AQM_ERR_TEXT(err), pos, c->limit);
		return -1;
	}
	if (qmax > c->limit)
		qmax = c->limit;
	if (!a->v[P_QMIN] && qmin > c->limit / 3)
		qmin = c->limit / 3;
	if (qmin >= qmax) {
		aqm_err_at(err, AQM_ERR_CONFLICT, q->ops, P_QMIN, P_QMAX);
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "ckcd: parameter 'qmin' = ");
		pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, qmin);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " must be below q_max = ");
		aqm_put_u64(AQM_ERR_TEXT(err), pos, qmax);
		return -1;
	}
	c->qmin = (uint32_t)qmin;
	c->qmax = (uint32_t)qmax;
	c->qmin_q16 = (int64_t)qmin << 16;
	c->qmax_q16 = (int64_t)qmax << 16;
	c->pc_scale = (UINT64_C(1) << 32) / (qmax - qmin);
	/* omega in Q24 from millionths, at least 1 */
	{
		uint64_t w = ((uint64_t)a->v[P_OMEGA] << 24) / 1000000;

		aqm_red_avg_init(&c->avg, w ? (uint32_t)w : 1, c->rate_bps, (uint32_t)a->v[P_AVPKT]);
	}
	while (n < (uint32_t)a->v[P_FLOWS]) {
		n <<= 1;
		bits++;
	}
	c->nflows = n;
	c->flow_mask = n - 1;
	c->flow_shift = 32 - bits;
	c->flows_mem = q->env.alloc(q->env.ctx, (size_t)n * (sizeof(c->flows[0]) + sizeof(c->cold[0])) +
					      sizeof(c->flows[0]) - 1);
	if (!c->flows_mem) {
		aqm_err(err, AQM_ERR_NOMEM, "ckcd: out of memory for parameter 'flows'", 0, 0);
		return -1;
	}
	c->flows = (struct ckcd_flow *)(((uintptr_t)c->flows_mem + sizeof(c->flows[0]) - 1) &
					~(uintptr_t)(sizeof(c->flows[0]) - 1));
	c->cold = (struct ckcd_flow_cold *)(c->flows + n);
	if (aqm_ring_alloc(&c->ring, &q->env, c->limit)) {
		q->env.free(q->env.ctx, c->flows_mem);
		aqm_err(err, AQM_ERR_NOMEM, "ckcd: out of memory for parameter 'limit'", 0, 0);
		return -1;
	}
	c->epoch = 1; /* 0 marks "never" in the flow entries */
	c->epoch2 = UINT64_C(0x100000001);
	return 0;
}

static void ckcd_release(struct aqm_queue *q)
{
	struct ckcd *c = aqm_priv(q);

	aqm_ring_free(&c->ring, &q->env);
	if (c->flows_mem)
		q->env.free(q->env.ctx, c->flows_mem);
}

/* Advance the measurement window; the division runs once per window. */
static __attribute__((noinline, cold)) void ckcd_tick_slow(struct ckcd *c, uint64_t now_ns)
{
	uint64_t n;

	if (!c->epoch_start_ns) {
		c->epoch_start_ns = now_ns ? now_ns : 1;
	} else {
		n = (now_ns - c->epoch_start_ns) / c->window_ns;
		c->flows_last_epoch = n == 1 ? c->flows_this_epoch : 0;
		c->flows_this_epoch = 0;
		c->epoch += (uint32_t)n;
		c->epoch2 = c->epoch * UINT64_C(0x100000001);
		c->epoch_start_ns += n * c->window_ns;
	}
	c->epoch_end_ns = c->epoch_start_ns + c->window_ns;
	c->fast_until_ns = c->avg.idle_since_ns ? 0 : c->epoch_end_ns;
}

/* The queue went empty: q_avg decays over the idle time (red_avg.h), which
 * the next arrival's slow path computes. */
static inline void ckcd_start_idle(struct ckcd *c, uint64_t now_ns)
{
	aqm_red_avg_start_idle(&c->avg, now_ns);
	c->fast_until_ns = 0;
}

/* Per packet: one comparison (epoch_end_ns is 0 until the first packet). */
static inline void ckcd_tick(struct ckcd *c, uint64_t now_ns)
{
	if (__builtin_expect(now_ns >= c->epoch_end_ns, 0))
		ckcd_tick_slow(c, now_ns);
}

/* I: flows that arrived in the last complete window or in this one. */
static inline uint32_t ckcd_active(const struct ckcd *c)
{
	uint32_t i = c->flows_last_epoch > c->flows_this_epoch ? c->flows_last_epoch
								 : c->flows_this_epoch;
	return i ? i : 1;
}

static inline uint32_t flow_slot(const struct ckcd *c, uint32_t hash)
{
	return (hash * 0x9e3779b1u) >> c->flow_shift;
}

static struct ckcd_flow *flow_find(struct ckcd *c, uint32_t hash)
{
	uint32_t s = flow_slot(c, hash), i;

	for (i = 0; i < CKCD_PROBE; i++) {
		struct ckcd_flow *f = &c->flows[(s + i) & c->flow_mask];

		if (f->used && f->hash == hash)
			return f;
	}
	return 0;
}

/* A flow has at most one entry, inside its probe window (flow_get claims one
 * only when the window holds none), so the entry in the slot cached in the
 * packet at enqueue is the one flow_find would return if it still holds the
 * packet's hash. Otherwise it was evicted meanwhile: search again (the flow
 * may have been given another entry since). */
static inline struct ckcd_flow *flow_of_queued(struct ckcd *c, const struct aqm_pkt *pkt)
{
	struct ckcd_flow *f = &c->flows[pkt->core_slot & c->flow_mask];

	if (__builtin_expect(f->used && f->hash == pkt->flow_hash, 1))
		return f;
	return flow_find(c, pkt->flow_hash);
}

/* Find or claim an entry: a free slot in the probe window, else the entry
 * with no queued packets seen longest ago, else the one seen longest ago. */
static __attribute__((noinline)) uint32_t flow_get_slow(struct ckcd *c, uint32_t hash, uint32_t s)
{
	struct ckcd_flow *free_slot = 0, *idle = 0, *oldest = 0, *f;
	uint32_t i, fs = 0, is = 0, os = 0, slot;

	for (i = 0; i < CKCD_PROBE; i++) {
		uint32_t k = (s + i) & c->flow_mask;

		f = &c->flows[k];
		if (!f->used) {
			if (!free_slot) {
				free_slot = f;
				fs = k;
			}
			continue;
		}
		if (f->hash == hash)
			return k;
		if (!f->queued && (!idle || f->last_seen_ns < idle->last_seen_ns)) {
			idle = f;
			is = k;
		}
		if (!oldest || f->last_seen_ns < oldest->last_seen_ns) {
			oldest = f;
			os = k;
		}
	}
	slot = free_slot ? fs : idle ? is : os;
	if (free_slot)
		c->flows_used++;
	else
		c->evictions++;
	f = &c->flows[slot];
	aqm_zero(f, sizeof(*f));
	aqm_zero(&c->cold[slot], sizeof(c->cold[slot]));
	f->used = 1;
	f->hash = hash;
	return slot;
}

/* The slot of the flow's entry, claimed if need be. Fast path: the flow sits
 * in its home slot (the first one flow_get_slow would look at). */
static inline uint32_t flow_get(struct ckcd *c, uint32_t hash)
{
	uint32_t s = flow_slot(c, hash);
	const struct ckcd_flow *f = &c->flows[s];

	if (__builtin_expect(f->used && f->hash == hash, 1))
		return s;
	return flow_get_slow(c, hash, s);
}

/* Whether a flow not yet in I this window, with len more bytes arrived (queued
 * or dropped: a flow being dropped still competes), has reached
 * active_min_bytes in it (section 5 of docs/ckcd.md). */
static inline int ckcd_reaches_active_min(struct ckcd *c, uint32_t slot, uint32_t len)
{
	struct ckcd_flow_cold *cold = &c->cold[slot];

	if (cold->arrived_epoch != c->epoch) {
		cold->arrived_epoch = c->epoch;
		cold->arrived_bytes = 0;
	}
	/* no overflow: once it reaches active_min_bytes (<= 10^8) the flow is in I
	 * and not asked again this window */
	cold->arrived_bytes += len;
	return cold->arrived_bytes >= c->active_min_bytes;
}

/* Bytes admitted in one window as a rate: bytes * 8e9 / window_ns. When the
 * window divides 8e9 ns (1, 2, 4, 5, 10, ..., 100 ms) and the product does not
 * wrap, that is exactly bytes * mu_mul: no division. */
static inline uint64_t ckcd_mu(const struct ckcd *c, uint64_t bytes)
{
	if (c->mu_mul && bytes <= UINT64_MAX / (8 * AQM_NSEC_PER_SEC))
		return bytes * c->mu_mul;
	return bytes * 8 * AQM_NSEC_PER_SEC / c->window_ns;
}

/* mu_i as flow_roll() would leave it now: the last complete window's rate,
 * or (mu_gain < 1) moved toward it from the previous mu_i by mu_gain; 0 after
 * a window without a byte (the flow starts again as a new one). */
static inline uint64_t flow_mu_now(const struct ckcd *c, const struct ckcd_flow *f)
{
	uint64_t rate;

	if (f->bytes_epoch_id == c->epoch)
		return f->mu_bps;
	if (f->bytes_epoch_id + 1 != c->epoch)
		return 0;
	rate = ckcd_mu(c, f->bytes_epoch);
	if (c->mu_gain == 1000 || !f->mu_bps)
		return rate;
	/* rate and mu_bps are below 2^40 (1 Tbit/s), so the products fit */
	return rate >= f->mu_bps ? f->mu_bps + (rate - f->mu_bps) * c->mu_gain / 1000
				 : f->mu_bps - (f->mu_bps - rate) * c->mu_gain / 1000;
}

/* Start this window's byte count; mu_i from the one before (once a window). */
static inline void flow_roll(struct ckcd *c, struct ckcd_flow *f)
{
	if (f->bytes_epoch_id == c->epoch)
		return;
	f->mu_bps = flow_mu_now(c, f);
	f->bytes_epoch = 0;
	f->bytes_epoch_id = c->epoch;
}

/* mu_net 1: a queued packet of f is dropped; its bytes leave this window's
 * count (flow_roll has run for f in this window on every path that drops). */
static inline void flow_unadmit(const struct ckcd *c, struct ckcd_flow *f, uint32_t len)
{
	if (c->mu_net && f->bytes_epoch_id == c->epoch)
		f->bytes_epoch -= f->bytes_epoch < len ? f->bytes_epoch : len;
}

/* mu_f = C / I and 1/(kI) in ns: what d_th depends on besides mu_i. */
static inline void ckcd_share(const struct ckcd *c, uint32_t active, uint64_t *mu_f,
			      uint64_t *inv_kI_ns)
{
	*mu_f = c->rate_bps / active;
	*inv_kI_ns = (AQM_NSEC_PER_SEC * 1000) / (c->k_milli * active);
}

/* eq. 9: d_th = K (mu_i/mu_f)^-2 + Q, Q = -1/(k I), K = D - Q, clamped. */
static uint64_t ckcd_dth_of(const struct ckcd *c, uint64_t mu_bps, uint64_t mu_f,
			    uint64_t inv_kI_ns)
{
	uint64_t ratio_q16, inv_r2_q16, k_ns = c->d_ns + inv_kI_ns;
	int64_t dth;

	if (!mu_bps)
		return c->dth_new_ns;
	ratio_q16 = (mu_f << 16) / mu_bps; /* (mu_i/mu_f)^-1 */
	if (ratio_q16 > (UINT64_C(64) << 16))
		return c->dth_max_ns;
	inv_r2_q16 = (ratio_q16 * ratio_q16) >> 16;
	dth = (int64_t)((k_ns * inv_r2_q16) >> 16) - (int64_t)inv_kI_ns;
	if (dth < (int64_t)c->dth_min_ns)
		return c->dth_min_ns;
	if ((uint64_t)dth > c->dth_max_ns)
		return c->dth_max_ns;
	return (uint64_t)dth;
}

/* d_th for mu_bps with the current I (xstats: no caching, c is const). */
static uint64_t ckcd_compute_dth(const struct ckcd *c, uint64_t mu_bps)
{
	uint64_t mu_f, inv_kI_ns;

	ckcd_share(c, ckcd_active(c), &mu_f, &inv_kI_ns);
	return ckcd_dth_of(c, mu_bps, mu_f, inv_kI_ns);
}

/* The same, with mu_f and 1/(kI) divided out only when I changes (once or a
 * few times per window) instead of for every flow. */
static __attribute__((noinline)) uint64_t ckcd_compute_dth_cached(struct ckcd *c, uint64_t mu_bps)
{
	uint32_t active = ckcd_active(c);

	if (active != c->share_active) {
		ckcd_share(c, active, &c->share_mu_f, &c->share_inv_kI_ns);
		c->share_active = active;
	}
	return ckcd_dth_of(c, mu_bps, c->share_mu_f, c->share_inv_kI_ns);
}

static inline uint64_t flow_dth(struct ckcd *c, struct ckcd_flow *f)
{
	flow_roll(c, f);
	if (f->dth_epoch != c->epoch) {
		f->dth_ns = ckcd_compute_dth_cached(c, f->mu_bps);
		f->dth_epoch = c->epoch;
	}
	return f->dth_ns;
}

/* Queue an arrival of flow f (room checked): it counts toward mu_i. */
static inline int ckcd_admit(struct aqm_queue *q, struct ckcd *c, struct ckcd_flow *f,
			     struct aqm_pkt *pkt)
{
	c->ring.slot[c->ring.tail++ & c->ring.mask] = pkt;
	aqm_account_add(q, pkt);
	f->queued++;
	f->bytes_epoch += pkt->len; /* admitted: counts toward mu_i */
	return AQM_QUEUED;
}

/* Drop the arrival (early or overflow). Out of line, like every call the
 * enqueue path makes besides the random draw, so that ckcd_enqueue_decide
 * keeps few registers across that draw. */
static __attribute__((noinline)) int ckcd_drop_arrival(struct aqm_queue *q, struct aqm_pkt *pkt,
						       enum aqm_drop_reason why)
{
	struct ckcd *c = aqm_priv(q);

	if (why == AQM_DROP_EARLY)
		c->early_drops++;
	aqm_drop_arriving(q, pkt, why);
	return AQM_DROPPED;
}

/* The p_c draw chose the arrival (line 12): with ecn=1 an ECN-capable one
 * is marked and goes on to the buffer check, any other is dropped. */
static __attribute__((noinline)) int ckcd_early(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct ckcd *c = aqm_priv(q);

	if (!aqm_mark_ce(q, pkt, AQM_DROP_EARLY))
		return ckcd_drop_arrival(q, pkt, AQM_DROP_EARLY);
	c->early_marks++;
	if (q->qlen_pkts >= c->limit || aqm_ring_full(&c->ring))
		return ckcd_drop_arrival(q, pkt, AQM_DROP_OVERFLOW);
	return ckcd_admit(q, c, &c->flows[pkt->core_slot], pkt);
}

/* The comparison matched (line 7-8): drop the victim and the arrival. */
static __attribute__((noinline)) int ckcd_match(struct aqm_queue *q, struct aqm_pkt *pkt,
						struct aqm_pkt *victim, uint32_t idx, uint64_t now_ns)
{
	struct ckcd *c = aqm_priv(q);
	struct ckcd_flow *f = &c->flows[pkt->core_slot];

	c->matched++;
	if (f->queued)
		f->queued--;
	flow_unadmit(c, f, victim->len);
	aqm_ring_remove(&c->ring, idx);
	aqm_drop_queued(q, victim, AQM_DROP_CHOKE_MATCH);
	aqm_drop_arriving(q, pkt, AQM_DROP_CHOKE_MATCH);
	if (!q->qlen_pkts)
		ckcd_start_idle(c, now_ns);
	return AQM_DROPPED;
}

/* Lines 7-12 once the random draw r has picked victim (or NULL: the queue
 * is empty) at ring index idx. */
static inline __attribute__((always_inline)) int ckcd_compared(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns, uint32_t r,
				struct aqm_pkt *victim, uint32_t idx)
{
	struct ckcd *c = aqm_priv(q);

	if (victim && victim->flow_hash == pkt->flow_hash &&
	    idx - c->ring.head >= q->carried_pkts) /* carried packets are exempt */
		return ckcd_match(q, pkt, victim, idx, now_ns);
	/* p_c = (q_avg - q_min) / (q_max - q_min), Q16 */
	if ((r & 0xffff) < (uint32_t)(((uint64_t)(c->avg.avg_q16 - c->qmin_q16) * c->pc_scale) >> 32))
		return ckcd_early(q, pkt);
	if (q->qlen_pkts >= c->limit || aqm_ring_full(&c->ring))
		return ckcd_drop_arrival(q, pkt, AQM_DROP_OVERFLOW);
	return ckcd_admit(q, c, &c->flows[pkt->core_slot], pkt);
}

/* The victim pick when the first try is not a plain lookup: a hole (more
 * draws) or a ring of more than 2^16 slots. */
static __attribute__((noinline)) int ckcd_compare_slow(struct aqm_queue *q, struct aqm_pkt *pkt,
						       uint64_t now_ns, uint32_t r)
{
	struct ckcd *c = aqm_priv(q);
	uint32_t idx = 0;
	struct aqm_pkt *victim = aqm_ring_random16(&c->ring, q, r >> 16, &idx);

	return ckcd_compared(q, pkt, now_ns, r, victim, idx);
}

/* Alg. 1 lines 4-12 once q_avg is updated (avg) and the arrival's flow entry
 * is current (pkt->core_slot).
 *
 * The comparison zone takes one random draw r: its top 16 bits pick the
 * victim (multiply-shift), its low 16 bits decide p_c. The two halves of a
 * uniform 32-bit number are independent, so the victim and the p_c test are
 * as independent as with two draws; p_c is resolved to 1/65536 and the
 * victim's offset within 1/65536 of uniform (docs/ckcd.md, section 3).
 * After the draw every call is a tail call, so only q, pkt and now_ns are
 * kept across it. */
static __attribute__((noinline)) int ckcd_enqueue_decide(struct aqm_queue *q, struct aqm_pkt *pkt,
							 uint64_t now_ns, int64_t avg)
{
	struct ckcd *c = aqm_priv(q);
	struct aqm_pkt *victim = 0;
	uint32_t r = 0, n, idx = 0;

	if (avg > c->qmax_q16) /* line 4-5 */
		return ckcd_drop_arrival(q, pkt, AQM_DROP_EARLY);
	if (avg >= c->qmin_q16) { /* lines 6-8, phase 2 comparison */
		r = q->env.random_u32(q->env.ctx);
		c = aqm_priv(q);
		n = c->ring.tail - c->ring.head;
		if (n) {
			if (__builtin_expect(n > (1u << 16), 0))
				return ckcd_compare_slow(q, pkt, now_ns, r);
			idx = c->ring.head + (((r >> 16) * n) >> 16);
			victim = c->ring.slot[idx & c->ring.mask];
			if (__builtin_expect(!victim, 0))
				return ckcd_compare_slow(q, pkt, now_ns, r);
		}
		return ckcd_compared(q, pkt, now_ns, r, victim, idx);
	}
	if (q->qlen_pkts >= c->limit || aqm_ring_full(&c->ring))
		return ckcd_drop_arrival(q, pkt, AQM_DROP_OVERFLOW);
	return ckcd_admit(q, c, &c->flows[pkt->core_slot], pkt);
}

/* Enqueue, every case: window, flow entry, mu_i roll, I, q_avg (line 3). */
static __attribute__((noinline)) int ckcd_enqueue_slow(struct aqm_queue *q, struct aqm_pkt *pkt,
						       uint64_t now_ns)
{
	struct ckcd *c = aqm_priv(q);
	struct ckcd_flow *f;

	ckcd_tick(c, now_ns);
	pkt->core_slot = flow_get(c, pkt->flow_hash);
	f = &c->flows[pkt->core_slot];
	flow_roll(c, f);
	f->last_seen_ns = now_ns;
	/* until the flow is in I this window, its packets take this path (the
	 * fast one needs arr_epoch) */
	if (f->arr_epoch != c->epoch && ckcd_reaches_active_min(c, pkt->core_slot, pkt->len)) {
		f->arr_epoch = c->epoch;
		c->flows_this_epoch++;
	}
	aqm_red_avg_update(&c->avg, q->qlen_pkts, now_ns); /* Alg. 1 line 3 */
	c->fast_until_ns = c->epoch_end_ns;
	return ckcd_enqueue_decide(q, pkt, now_ns, c->avg.avg_q16);
}

/* The common case with no call, so no register is saved: the window is
 * current, the queue was not idle, the flow sits in its home slot and has
 * already arrived in this window; below q_min with room it is queued here,
 * otherwise ckcd_enqueue_decide takes over. Anything else goes to
 * ckcd_enqueue_slow. Both reach the same decision. */
static int ckcd_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct ckcd *c = aqm_priv(q);
	uint32_t s = flow_slot(c, pkt->flow_hash);
	struct ckcd_flow *f = &c->flows[s];
	int64_t avg;

	/* fast_until_ns: the window is current and the queue was not idle */
	if (__builtin_expect(now_ns >= c->fast_until_ns ||
			     f->hash != pkt->flow_hash || !f->used || f->epochs != c->epoch2, 0))
		return ckcd_enqueue_slow(q, pkt, now_ns);
	pkt->core_slot = s;
	f->last_seen_ns = now_ns;
	avg = aqm_red_avg_step(&c->avg, q->qlen_pkts); /* Alg. 1 line 3 */
	if (__builtin_expect(avg < c->qmin_q16 && q->qlen_pkts < c->limit &&
			     c->ring.tail - c->ring.head <= c->ring.mask, 1))
		return ckcd_admit(q, c, f, pkt);
	return ckcd_enqueue_decide(q, pkt, now_ns, avg);
}

/* The dropping state under CoDel's law (spacing 1): the first packet below
 * d_th ends it (RFC 8289's "sojourn below target"); a late packet is dropped
 * once drop_next has come, and drop_next += Delta/sqrt(count). Drop path
 * and state exit only: the exact 1/sqrt costs an integer square root. */
static __attribute__((noinline)) int ckcd_late_spaced(const struct ckcd *c, struct ckcd_flow *f, int above,
						     uint64_t now_ns)
{
	if (!above) {
		f->dropping = 0;
		f->since_ns = 0;
		return 0;
	}
	if (now_ns < f->since_ns)
		return 0;
	f->count += f->count < 0xffff;
	/* delta_ns >> 8 keeps the product in 64 bits up to Delta's 100 s maximum */
	f->since_ns += ((c->delta_ns >> 8) * aqm_codel_invsqrt_exact(f->count)) >> 24; /* from drop_next, as CoDel */
	return 1;
}

/* Lines 14-16 for a dequeued packet of flow f with sojourn d_i and threshold
 * d_th: 1 if it is to be dropped (delay). Runs the flow's Delta clock: the
 * flow enters the dropping state after d_i >= d_th for Delta and leaves it
 * after d_i < d_th for Delta (docs/ckcd.md, section 8).
 *
 * Outside the dropping state (nearly every packet) there is no branch on
 * d_i >= d_th, which the traffic decides packet by packet and a predictor
 * guesses badly with many flows: the clock is kept or cleared with a mask. */
static inline int ckcd_late(struct ckcd *c, struct ckcd_flow *f, uint64_t sojourn, uint64_t dth,
			    uint64_t now_ns)
{
	uint64_t since = f->since_ns;
	int above = sojourn >= dth;
	int lasted = (since != 0) & (now_ns - since >= c->delta_ns); /* the clock ran for Delta */

	if (!f->dropping) {
		int enter = above & lasted;

		__asm__("" : "+r"(enter)); /* one branch on the AND, not one per operand */
		if (__builtin_expect(enter, 0)) {
			c->cold[f - c->flows].dropping_since_ns = now_ns;
			f->dropping = 1; /* line 15: above d_th for longer than Delta */
			f->count = 1;
			f->since_ns = c->spaced ? now_ns + c->delta_ns : 0; /* next drop: Delta/sqrt(1) */
			return 1;
		}
		/* above: start the clock or keep it running; below: stop it */
		f->since_ns = (since ? since : now_ns) & -(uint64_t)above;
		return 0;
	}
	if (c->spaced)
		return ckcd_late_spaced(c, f, above, now_ns);
	if (above) {
		f->since_ns = 0;
		return 1;
	}
	if (lasted) { /* below d_th for Delta: leave the dropping state */
		f->dropping = 0;
		f->since_ns = 0;
	} else if (!since) {
		f->since_ns = now_ns;
	}
	return 0;
}

static inline void ckcd_unqueued(struct aqm_queue *q, struct ckcd_flow *f, const struct aqm_pkt *pkt)
{
	aqm_account_remove(q, pkt);
	f->queued -= f->queued != 0;
}

static inline void ckcd_delay_drop(struct aqm_queue *q, struct ckcd *c, struct ckcd_flow *f,
				   struct aqm_pkt *pkt)
{
	c->cold[f - c->flows].delay_drops++;
	c->delay_drops++;
	flow_unadmit(c, f, pkt->len);
	aqm_drop_arriving(q, pkt, AQM_DROP_DELAY); /* line 16 */
}

/* A late packet of flow f (in its dropping state) that would be dropped:
 * 1 if it is marked CE instead (ecn=1, ECN-capable, and the flow entered
 * the dropping state less than Delta ago). A sender that answers the marks
 * is back below d_th within a round trip or two; one late for Delta has not
 * answered them, and from then until the state ends (Delta below d_th) its
 * late packets are dropped - as with ecn=0, so marking never leaves a flow
 * worse off. A dip below d_th does not restart the marks: BBR's ProbeBW
 * drains its queue every cycle, and would never be dropped (docs/ecn.md).
 * With spacing 1 the first signal of a state is a mark, the next (Delta
 * later) a drop. */
static inline int ckcd_mark_late(struct aqm_queue *q, struct ckcd *c, struct ckcd_flow *f,
				 struct aqm_pkt *pkt, uint64_t now_ns)
{
	if (!q->ecn || now_ns - c->cold[f - c->flows].dropping_since_ns >= c->delta_ns ||
	    !aqm_mark_ce(q, pkt, AQM_DROP_DELAY))
		return 0;
	c->delay_marks++;
	return 1;
}

/* Dequeue, every case (Alg. 1 lines 13-20), from pkt, just taken from the
 * ring (or NULL): each packet dropped is followed by the next one. */
static __attribute__((noinline)) struct aqm_pkt *ckcd_dequeue_from(struct aqm_queue *q, struct aqm_pkt *pkt,
								 uint64_t now_ns)
{
	struct ckcd *c = aqm_priv(q);

	for (; pkt; pkt = aqm_ring_pop(&c->ring)) {
		struct ckcd_flow *f = flow_of_queued(c, pkt);

		if (!f) { /* evicted meanwhile: no history, forward */
			aqm_account_remove(q, pkt);
			break;
		}
		ckcd_unqueued(q, f, pkt);
		/* the last packet is judged but never dropped: see ckcd_dequeue */
		if (!ckcd_late(c, f, now_ns - pkt->enqueue_ns, flow_dth(c, f), now_ns) || !q->qlen_pkts)
			break;
		if (ckcd_mark_late(q, c, f, pkt, now_ns))
			break;
		ckcd_delay_drop(q, c, f, pkt);
	}
	if (!q->qlen_pkts)
		ckcd_start_idle(c, now_ns);
	return pkt;
}

/* pkt (of flow f, taken and decided) is to be dropped: drop it, go on. */
static __attribute__((noinline)) struct aqm_pkt *ckcd_dequeue_drop(struct aqm_queue *q, struct aqm_pkt *pkt,
								 struct ckcd_flow *f, uint64_t now_ns)
{
	struct ckcd *c = aqm_priv(q);

	if (ckcd_mark_late(q, c, f, pkt, now_ns))
		return pkt; /* the queue is not empty: the last packet is never judged late */
	ckcd_delay_drop(q, c, f, pkt);
	return ckcd_dequeue_from(q, aqm_ring_pop(&c->ring), now_ns);
}

static __attribute__((noinline)) struct aqm_pkt *ckcd_dequeue_slow(struct aqm_queue *q, uint64_t now_ns)
{
	struct ckcd *c = aqm_priv(q);

	ckcd_tick(c, now_ns);
	return ckcd_dequeue_from(q, aqm_ring_pop(&c->ring), now_ns);
}

/* The common case with no call, so no register is saved: the window is
 * current and the head packet's flow is in its cached slot with this
 * window's d_th; unless the packet is to be dropped it is forwarded here.
 * Otherwise ckcd_dequeue_from (given the packet) or ckcd_dequeue_slow take
 * over, in the same state, and decide the same way. */
static struct aqm_pkt *ckcd_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct ckcd *c = aqm_priv(q);
	struct aqm_pkt *pkt;
	struct ckcd_flow *f;

	if (__builtin_expect(now_ns >= c->epoch_end_ns, 0))
		return ckcd_dequeue_slow(q, now_ns);
	pkt = aqm_ring_pop(&c->ring);
	if (__builtin_expect(!pkt, 0)) /* not from aqm_dequeue, which checks qlen_pkts */
		return ckcd_dequeue_from(q, pkt, now_ns);
	f = &c->flows[pkt->core_slot & c->flow_mask];
	/* dth_epoch == epoch: d_th is this window's, and flow_roll has run */
	if (__builtin_expect(f->hash != pkt->flow_hash || !f->used || f->dth_epoch != c->epoch, 0))
		return ckcd_dequeue_from(q, pkt, now_ns);
	ckcd_unqueued(q, f, pkt);
	/* The last packet in the queue is judged (the flow's state moves on) but
	 * sent whatever its delay, as CoDel never drops its last MTU (RFC 8289,
	 * 5.4): one packet is no standing queue, and a dequeue that drops always
	 * hands a packet on, so a parent (HTB) never sees a leaf that had packets
	 * come back empty. */
	if (__builtin_expect(ckcd_late(c, f, now_ns - pkt->enqueue_ns, f->dth_ns, now_ns) && q->qlen_pkts, 0))
		return ckcd_dequeue_drop(q, pkt, f, now_ns);
	if (!q->qlen_pkts)
		ckcd_start_idle(c, now_ns);
	return pkt;
}

static struct aqm_pkt *ckcd_pop_raw(struct aqm_queue *q)
{
	struct ckcd *c = aqm_priv(q);
	struct aqm_pkt *pkt = aqm_ring_pop(&c->ring);
	struct ckcd_flow *f = pkt ? flow_of_queued(c, pkt) : 0;

	if (f && f->queued)
		f->queued--;
	return pkt;
}

static int ckcd_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct ckcd *c = aqm_priv(q);

	if (q->qlen_pkts >= c->limit || aqm_ring_push(&c->ring, pkt))
		return -1;
	aqm_account_add(q, pkt);
	pkt->core_slot = flow_get(c, pkt->flow_hash);
	c->flows[pkt->core_slot].queued++;
	return 0;
}

static size_t ckcd_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct ckcd *c = aqm_priv(q);
	uint32_t i;

	pos = aqm_put_kfixed(buf, len, pos, "q_avg", (c->avg.avg_q16 * 1000) >> 16, 3);
	pos = aqm_put_kv(buf, len, pos, "qmin_eff", c->qmin);
	pos = aqm_put_kv(buf, len, pos, "qmax_eff", c->qmax);
	pos = aqm_put_kv(buf, len, pos, "bdp_pkts", c->bdp_pkts);
	pos = aqm_put_kv(buf, len, pos, "active_flows", ckcd_active(c));
	pos = aqm_put_kv(buf, len, pos, "fair_share_bps", c->rate_bps / ckcd_active(c));
	pos = aqm_put_kv(buf, len, pos, "flows_used", c->flows_used);
	pos = aqm_put_kv(buf, len, pos, "evictions", c->evictions);
	pos = aqm_put_kv(buf, len, pos, "matched", c->matched);
	pos = aqm_put_kv(buf, len, pos, "early_drops", c->early_drops);
	pos = aqm_put_kv(buf, len, pos, "delay_drops", c->delay_drops);
	pos = aqm_put_kv(buf, len, pos, "early_marks", c->early_marks);
	pos = aqm_put_kv(buf, len, pos, "delay_marks", c->delay_marks);
	/* per-flow state of the flows seen in this or the last window:
	 * flow.<hash>=mu_bps:<n>,dth_us:<n>,dropping:<0|1>,queued:<n>,delay_drops:<n> */
	for (i = 0; i < c->nflows; i++) {
		const struct ckcd_flow *f = &c->flows[i];
		uint64_t mu;

		if (!f->used || f->arr_epoch + 1 < c->epoch)
			continue;
		mu = flow_mu_now(c, f);
		pos = aqm_put_str(buf, len, pos, " flow.");
		pos = aqm_put_u64(buf, len, pos, f->hash);
		pos = aqm_put_str(buf, len, pos, "=mu_bps:");
		pos = aqm_put_u64(buf, len, pos, mu);
		pos = aqm_put_str(buf, len, pos, ",dth_us:");
		pos = aqm_put_u64(buf, len, pos, ckcd_compute_dth(c, mu) / 1000);
		pos = aqm_put_str(buf, len, pos, ",dropping:");
		pos = aqm_put_u64(buf, len, pos, f->dropping);
		pos = aqm_put_str(buf, len, pos, ",queued:");
		pos = aqm_put_u64(buf, len, pos, f->queued);
		pos = aqm_put_str(buf, len, pos, ",delay_drops:");
		pos = aqm_put_u64(buf, len, pos, c->cold[i].delay_drops);
	}
	return pos;
}

/* After a flush: q_avg from zero. Per-flow rates and d_th are kept: they
 * describe the flows, not the queue, and age out with the windows. */
static void ckcd_restart(struct aqm_queue *q)
{
	struct ckcd *c = aqm_priv(q);

	c->avg.avg_q16 = 0;
}

static void ckcd_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	const struct ckcd *c = aqm_priv(q);

	out->flags = AQM_XS_FLOWS | AQM_XS_FAIR_SHARE | AQM_XS_QAVG;
	out->active_flows = ckcd_active(c);
	out->fair_share_bps = c->rate_bps / ckcd_active(c);
	out->q_avg_milli = (uint64_t)((c->avg.avg_q16 * 1000) >> 16);
}

const struct aqm_ops aqm_ckcd_ops = {
	.name = "ckcd",
	.params = ckcd_params,
	.nparams = P_N,
	.priv_size = sizeof(struct ckcd),
	.init = ckcd_init,
	.enqueue = ckcd_enqueue,
	.dequeue = ckcd_dequeue,
	.pop_raw = ckcd_pop_raw,
	.requeue = ckcd_requeue,
	.xstats = ckcd_xstats,
	.release = ckcd_release,
	.get_xstats = ckcd_get_xstats,
	.restart = ckcd_restart,
};
