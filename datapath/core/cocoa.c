/* cocoa.c - Cocoa, congestion-control-aware queuing (Bachl, Fabini, Zseby;
 * seed 002): per-flow FIFOs served by deficit round robin (as Linux fq, which
 * the authors extended), each flow with its own packet limit that Algorithm 1
 * adapts to the flow's congestion-control cycle. Everything happens when an
 * arrival finds its flow's queue full (Alg. 1 lines 2-21):
 *
 *   line 3-5   the flow's queue was idle during the current interval, the
 *              limit was not yet enlarged in it, and this is not the flow's
 *              first interval: limit += tx / active x idle (the packets the
 *              link could have sent while idle), at most x max_increase
 *              (sec. 2.2: 2); the packet is queued
 *   line 6-9   enlarged in this interval, or the first interval: start a new
 *              interval and guard interval (GI); drop
 *   line 10-17 the GI is over: if the longest interval (LI) of the GI had a
 *              standing queue (its minimum queue q_min > 0), limit -= q_min
 *              and the flow's newest q_min packets are dropped ("shrink");
 *              new interval and GI; drop
 *   line 18-20 otherwise: a new interval (the LI is the longest one seen); drop
 *
 * An interval runs from one drop (the flow's queue found full) to the next.
 * A new GI lasts min(max_gi, multiplier x LI) (sec. 2.1, 2.3: 1.25 and 1 s)
 * and, as Fig. 3 says, really ends at the first loss after that. Defaults as
 * the paper (initial per-flow limit 100 packets, multiplier 1.25, max
 * increase 2, max GI 1 s) and Linux fq (global limit 10000, quantum 2 MTU =
 * 3028 B, initial quantum 10 MTU = 15140 B). Our decisions where the paper and
 * the authors' sch_cocoa.c leave a gap are in docs/cocoa.md.
 */
#include "flow_table.h"

enum { P_LIMIT, P_FLOW_LIMIT, P_MULT, P_MAX_INC, P_MAX_GI, P_QUANTUM, P_INIT_QUANTUM, P_FLOWS };

static const struct aqm_param cocoa_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 10000, 0, AQM_PARAM_INT, 0 },
	[P_FLOW_LIMIT] = { "flow_limit", "packets", 2, 1000000, 100, 0, AQM_PARAM_INT, 0 },
	[P_MULT] = { "multiplier", "x LI", 1, 10000, 125, 2, AQM_PARAM_INT, 0 },
	[P_MAX_INC] = { "max_increase", "x limit", 100, 10000, 200, 2, AQM_PARAM_INT, 0 },
	[P_MAX_GI] = { "max_gi_ms", "ms", 1000, 100000000, 1000000, 3, AQM_PARAM_INT, 0 },
	[P_QUANTUM] = { "quantum", "bytes", 64, 1000000, 3028, 0, AQM_PARAM_INT, 0 },
	[P_INIT_QUANTUM] = { "initial_quantum", "bytes", 64, 1000000, 15140, 0, AQM_PARAM_INT, 0 },
	[P_FLOWS] = { "flows", "entries", 16, 65536, 1024, 0, AQM_PARAM_INT, 0 },
};

/* A limit never shrinks below this: a flow with a 1-packet buffer cannot
 * both hold a packet and receive the next (the authors' code can reach 0). */
#define COCOA_MIN_LIMIT 2u
#define COCOA_UNSET 0xffffffffu /* min_qlen of an interval without a dequeue */

enum { COCOA_DETACHED = 0, COCOA_NEW, COCOA_OLD };

struct cocoa_interval {
	uint64_t start_ns, end_ns;
	uint64_t idle_ns;  /* time the flow's queue was empty during the interval */
	uint32_t tx_pkts;  /* packets the flow sent in it */
	uint32_t min_qlen; /* smallest queue left by a dequeue in it; COCOA_UNSET: none */
};

struct cocoa_flow {
	struct aqm_flow_head head; /* busy = qlen + (on a DRR list) */
	struct aqm_fifo fifo;
	uint32_t qlen;
	uint32_t limit;   /* Alg. 1's buffer_size for this flow, packets */
	int32_t credit;   /* DRR deficit, bytes */
	uint32_t next;    /* next slot on its DRR list */
	uint8_t list;     /* COCOA_DETACHED, COCOA_NEW or COCOA_OLD */
	uint8_t idle;     /* queue empty since became_idle_ns */
	uint8_t enlarged; /* limit enlarged in the current interval */
	uint64_t became_idle_ns;
	uint64_t gi_start_ns, gi_end_ns; /* equal: no GI started yet (first interval) */
	struct cocoa_interval cur, longest;
};

struct cocoa_list {
	uint32_t first, last;
};

struct cocoa {
	struct aqm_flow_table table;
	struct cocoa_flow overflow; /* flows the table has no room for share it (no adaptation) */
	uint32_t overflow_slot;     /* its slot number: the table's size */
	struct cocoa_list new_flows, old_flows;
	uint32_t limit, flow_limit;
	uint64_t mult_pct, max_inc_pct, max_gi_ns;
	int32_t quantum, initial_quantum;
	uint64_t limit_hits, enlargements, shrinks, shrink_drops, overflow_pkts;
};

static int cocoa_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct cocoa *c = aqm_priv(q);

	c->limit = (uint32_t)a->v[P_LIMIT];
	c->flow_limit = (uint32_t)a->v[P_FLOW_LIMIT];
	c->mult_pct = (uint64_t)a->v[P_MULT];
	c->max_inc_pct = (uint64_t)a->v[P_MAX_INC];
	c->max_gi_ns = (uint64_t)a->v[P_MAX_GI] * 1000;
	c->quantum = (int32_t)a->v[P_QUANTUM];
	c->initial_quantum = (int32_t)a->v[P_INIT_QUANTUM];
	if (aqm_flow_table_alloc(&c->table, &q->env, (uint32_t)a->v[P_FLOWS], sizeof(struct cocoa_flow))) {
		aqm_err(err, AQM_ERR_NOMEM, "cocoa: out of memory for parameter 'flows'", 0, 0);
		return -1;
	}
	c->overflow_slot = c->table.mask + 1;
	c->new_flows.first = c->old_flows.first = AQM_FLOW_NONE;
	return 0;
}

static void cocoa_release(struct aqm_queue *q)
{
	struct cocoa *c = aqm_priv(q);

	aqm_flow_table_free(&c->table, &q->env);
}

static struct cocoa_flow *flow_at(const struct cocoa *c, uint32_t slot)
{
	if (slot == c->overflow_slot)
		return (struct cocoa_flow *)&c->overflow;
	return (struct cocoa_flow *)aqm_flow_at(&c->table, slot);
}

/* ---- the DRR lists (slot numbers, as fq's new_flows/old_flows) ---------- */

static void list_add_tail(struct cocoa *c, struct cocoa_list *l, uint32_t slot, uint8_t which)
{
	struct cocoa_flow *f = flow_at(c, slot);

	if (f->list == COCOA_DETACHED)
		f->head.busy++;
	f->list = which;
	f->next = AQM_FLOW_NONE;
	if (l->first == AQM_FLOW_NONE)
		l->first = slot;
	else
		flow_at(c, l->last)->next = slot;
	l->last = slot;
}

static uint32_t list_pop_head(struct cocoa *c, struct cocoa_list *l)
{
	uint32_t slot = l->first;
	struct cocoa_flow *f = flow_at(c, slot);

	l->first = f->next;
	f->list = COCOA_DETACHED;
	f->head.busy--;
	return slot;
}

/* ---- intervals and guard intervals (Alg. 1) ------------------------------ */

static void interval_open(struct cocoa_flow *f, uint64_t now_ns)
{
	f->cur.start_ns = f->cur.end_ns = now_ns;
	f->cur.idle_ns = 0;
	f->cur.tx_pkts = 0;
	f->cur.min_qlen = COCOA_UNSET;
}

/* The current interval ends now; the longest interval of the GI is the longer. */
static void interval_close(struct cocoa_flow *f, uint64_t now_ns)
{
	f->cur.end_ns = now_ns;
	if (f->cur.end_ns - f->cur.start_ns >= f->longest.end_ns - f->longest.start_ns)
		f->longest = f->cur;
}

static int gi_started(const struct cocoa_flow *f)
{
	return f->gi_end_ns != f->gi_start_ns;
}

/* A new GI of min(max_gi, multiplier x LI), a new interval, and the LI starts over. */
static void guard_open(const struct cocoa *c, struct cocoa_flow *f, uint64_t now_ns)
{
	uint64_t gi_ns = (f->longest.end_ns - f->longest.start_ns) * c->mult_pct / 100;

	if (gi_ns > c->max_gi_ns)
		gi_ns = c->max_gi_ns;
	f->gi_start_ns = now_ns;
	f->gi_end_ns = now_ns + gi_ns;
	f->enlarged = 0;
	interval_open(f, now_ns);
	f->longest = f->cur;
}

static void flow_start(const struct cocoa *c, struct cocoa_flow *f, uint64_t now_ns)
{
	f->limit = c->flow_limit;
	f->credit = c->initial_quantum;
	f->gi_start_ns = f->gi_end_ns = now_ns;
	interval_open(f, now_ns);
	f->longest = f->cur;
}

/* Alg. 1 line 4: the packets the flow could have sent while its queue was
 * idle, at the rate it sent while active; at most max_increase x the limit.
 * Times in units of 1024 ns keep tx x idle inside 64 bits. */
static void enlarge(struct cocoa *c, struct cocoa_flow *f, uint64_t now_ns)
{
	uint64_t elapsed = now_ns - f->cur.start_ns;
	uint64_t active = elapsed > f->cur.idle_ns ? elapsed - f->cur.idle_ns : 0;
	uint64_t idle_u = f->cur.idle_ns >> 10, active_u = (active >> 10) ? (active >> 10) : 1;
	uint64_t grown = f->limit + (uint64_t)f->cur.tx_pkts * idle_u / active_u;
	uint64_t cap = (uint64_t)f->limit * c->max_inc_pct / 100;

	if (grown > cap)
		grown = cap;
	if (grown > c->limit)
		grown = c->limit;
	f->limit = (uint32_t)grown;
	f->enlarged = 1;
	c->enlargements++;
}

/* Alg. 1 lines 11-13: the LI's minimum queue was standing: drop that many of
 * the flow's newest packets and lower its limit by as much. An LI without a
 * dequeue measured nothing and changes nothing. */
static void shrink(struct aqm_queue *q, struct cocoa *c, struct cocoa_flow *f)
{
	uint32_t n = f->longest.min_qlen, keep, i;
	struct aqm_pkt *last, *victim;

	if (n == COCOA_UNSET || n == 0 || f->limit <= COCOA_MIN_LIMIT)
		return;
	if (n > f->limit - COCOA_MIN_LIMIT)
		n = f->limit - COCOA_MIN_LIMIT;
	if (n > f->qlen)
		n = f->qlen;
	if (!n)
		return;
	f->limit -= n;
	c->shrinks++;
	keep = f->qlen - n;
	last = 0;
	victim = f->fifo.head;
	for (i = 0; i < keep; i++) {
		last = victim;
		victim = victim->next;
	}
	if (last)
		last->next = 0;
	else
		f->fifo.head = 0;
	f->fifo.tail = last;
	while (victim) {
		struct aqm_pkt *next = victim->next;

		f->qlen--;
		f->head.busy--;
		c->shrink_drops++;
		aqm_drop_queued(q, victim, AQM_DROP_SHRINK);
		victim = next;
	}
}

/* The arrival finds its flow's queue full (Alg. 1 lines 3-21): AQM_QUEUED
 * when the limit was enlarged for it, else AQM_DROPPED (dropped here). */
static int flow_full(struct aqm_queue *q, struct cocoa *c, struct cocoa_flow *f,
		     struct aqm_pkt *pkt, uint64_t now_ns)
{
	c->limit_hits++;
	if (f->cur.idle_ns > 0 && !f->enlarged && gi_started(f)) {
		enlarge(c, f, now_ns);
		return AQM_QUEUED; /* line 5, even if the increase rounded to 0 */
	}
	interval_close(f, now_ns);
	if (!gi_started(f) || f->enlarged) {
		if (f->enlarged) /* the interval it was enlarged in is the LI to judge next */
			f->longest = f->cur;
		guard_open(c, f, now_ns);
	} else if (now_ns >= f->gi_end_ns) {
		shrink(q, c, f);
		guard_open(c, f, now_ns);
	} else {
		interval_open(f, now_ns);
	}
	aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
	return AQM_DROPPED;
}

/* ---- enqueue / dequeue ---------------------------------------------------- */

/* The flow an arrival belongs to: its table entry (*fresh: new to it), or
 * the overflow flow. */
static uint32_t flow_slot_of(struct cocoa *c, const struct aqm_pkt *pkt, uint64_t now_ns, int *fresh)
{
	uint32_t slot = aqm_flow_get(&c->table, pkt->flow_hash, now_ns, fresh);

	if (slot == AQM_FLOW_NONE) {
		c->overflow_pkts++;
		*fresh = 0;
		return c->overflow_slot;
	}
	if (*fresh)
		flow_start(c, flow_at(c, slot), now_ns);
	return slot;
}

/* fq: a new flow starts with the initial quantum (flow_start), one that
 * returns to the lists with at least one quantum. */
static void flow_push(struct cocoa *c, uint32_t slot, struct aqm_pkt *pkt, int fresh)
{
	struct cocoa_flow *f = flow_at(c, slot);

	aqm_fifo_push(&f->fifo, pkt);
	f->qlen++;
	f->head.busy++;
	if (f->list == COCOA_DETACHED) {
		if (!fresh && f->credit < c->quantum)
			f->credit = c->quantum;
		list_add_tail(c, &c->new_flows, slot, COCOA_NEW);
	}
}

static int cocoa_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct cocoa *c = aqm_priv(q);
	struct cocoa_flow *f;
	uint32_t slot;
	int fresh;

	if (q->qlen_pkts >= c->limit) {
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	slot = flow_slot_of(c, pkt, now_ns, &fresh);
	f = flow_at(c, slot);
	if (slot != c->overflow_slot && f->qlen >= f->limit &&
	    flow_full(q, c, f, pkt, now_ns) == AQM_DROPPED)
		return AQM_DROPPED;
	if (f->idle) { /* idle time counts only inside the current interval */
		uint64_t from = f->became_idle_ns > f->cur.start_ns ? f->became_idle_ns : f->cur.start_ns;

		if (now_ns > from)
			f->cur.idle_ns += now_ns - from;
		f->idle = 0;
	}
	flow_push(c, slot, pkt, fresh);
	aqm_account_add(q, pkt);
	return AQM_QUEUED;
}

static void flow_sent(struct cocoa_flow *f, uint64_t now_ns)
{
	f->qlen--;
	f->head.busy--;
	f->cur.tx_pkts++;
	if (f->qlen < f->cur.min_qlen)
		f->cur.min_qlen = f->qlen;
	if (!f->qlen) {
		f->idle = 1;
		f->became_idle_ns = now_ns;
	}
}

/* fq's DRR: new flows first; a flow out of credit gets a quantum and goes to
 * the tail of the old flows; an empty new flow passes through the old list
 * once (so new flows cannot starve old ones), an empty old flow leaves. */
static struct aqm_pkt *cocoa_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct cocoa *c = aqm_priv(q);

	for (;;) {
		struct cocoa_list *l = c->new_flows.first != AQM_FLOW_NONE ? &c->new_flows : &c->old_flows;
		struct cocoa_flow *f;
		struct aqm_pkt *pkt;
		uint32_t slot;

		if (l->first == AQM_FLOW_NONE)
			return 0;
		slot = l->first;
		f = flow_at(c, slot);
		if (f->credit <= 0) {
			f->credit += c->quantum;
			list_add_tail(c, &c->old_flows, list_pop_head(c, l), COCOA_OLD);
			continue;
		}
		pkt = aqm_fifo_pop(&f->fifo);
		if (!pkt) {
			list_pop_head(c, l);
			if (l == &c->new_flows && c->old_flows.first != AQM_FLOW_NONE)
				list_add_tail(c, &c->old_flows, slot, COCOA_OLD);
			continue;
		}
		f->credit -= (int32_t)pkt->len;
		flow_sent(f, now_ns);
		aqm_account_remove(q, pkt);
		return pkt;
	}
}

/* Reconfiguration and destroy: the head packet of the first flow that has one. */
static struct aqm_pkt *cocoa_pop_raw(struct aqm_queue *q)
{
	struct cocoa *c = aqm_priv(q);
	const struct cocoa_list *lists[2] = {&c->new_flows, &c->old_flows};

	for (int i = 0; i < 2; i++) {
		for (uint32_t s = lists[i]->first; s != AQM_FLOW_NONE; s = flow_at(c, s)->next) {
			struct cocoa_flow *f = flow_at(c, s);
			struct aqm_pkt *pkt = aqm_fifo_pop(&f->fifo);

			if (pkt) {
				f->qlen--;
				f->head.busy--;
				return pkt;
			}
		}
	}
	return 0;
}

static int cocoa_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct cocoa *c = aqm_priv(q);
	uint32_t slot;
	int fresh;

	if (q->qlen_pkts >= c->limit)
		return -1;
	slot = flow_slot_of(c, pkt, pkt->enqueue_ns, &fresh);
	flow_push(c, slot, pkt, fresh);
	aqm_account_add(q, pkt);
	return 0;
}

/* Counters, then each flow's adapted state:
 * flow.<hash>=limit:<packets>,qlen:<packets>,gi_us:<last GI's length> */
static size_t cocoa_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct cocoa *c = aqm_priv(q);

	pos = aqm_put_kv(buf, len, pos, "flows_used", c->table.used);
	pos = aqm_put_kv(buf, len, pos, "evictions", c->table.evictions);
	pos = aqm_put_kv(buf, len, pos, "overflow_pkts", c->overflow_pkts);
	pos = aqm_put_kv(buf, len, pos, "limit_hits", c->limit_hits);
	pos = aqm_put_kv(buf, len, pos, "enlargements", c->enlargements);
	pos = aqm_put_kv(buf, len, pos, "shrinks", c->shrinks);
	pos = aqm_put_kv(buf, len, pos, "shrink_drops", c->shrink_drops);
	for (uint32_t s = 0; s < c->overflow_slot; s++) {
		const struct cocoa_flow *f = flow_at(c, s);

		if (!f->head.used)
			continue;
		pos = aqm_put_str(buf, len, pos, " flow.");
		pos = aqm_put_u64(buf, len, pos, f->head.hash);
		pos = aqm_put_str(buf, len, pos, "=limit:");
		pos = aqm_put_u64(buf, len, pos, f->limit);
		pos = aqm_put_str(buf, len, pos, ",qlen:");
		pos = aqm_put_u64(buf, len, pos, f->qlen);
		pos = aqm_put_str(buf, len, pos, ",gi_us:");
		pos = aqm_put_u64(buf, len, pos, (f->gi_end_ns - f->gi_start_ns) / 1000);
	}
	return pos;
}

const struct aqm_ops aqm_cocoa_ops = {
	.name = "cocoa",
	.params = cocoa_params,
	.nparams = sizeof(cocoa_params) / sizeof(cocoa_params[0]),
	.priv_size = sizeof(struct cocoa),
	.init = cocoa_init,
	.enqueue = cocoa_enqueue,
	.dequeue = cocoa_dequeue,
	.pop_raw = cocoa_pop_raw,
	.requeue = cocoa_requeue,
	.xstats = cocoa_xstats,
	.release = cocoa_release,
};
