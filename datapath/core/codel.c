/* codel.c - Controlled Delay, RFC 8289, with a packet limit.
 *
 * Drop at dequeue once the sojourn time has stayed above `target` for at
 * least `interval`; while in the dropping state the next drop is scheduled by
 * the control law  drop_next = t + interval / sqrt(count)  (RFC 8289 5.5).
 * 1/sqrt(count) is kept in Q32 fixed point and updated by one Newton step
 * per count increment, y <- y (3 - count y^2) / 2 (as Linux codel.h does);
 * for counts below 16, and when count is reset, it is set exactly from an
 * integer square root (drop path only, never per packet). Seed 000 Table II: limit 80, target (D) 5 ms,
 * interval (Delta) 100 ms.
 */
#include "aqm_impl.h"

enum { P_LIMIT, P_TARGET, P_INTERVAL };

static const struct aqm_param codel_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 },
	[P_TARGET] = { "target_ms", "ms", 1, 10000000, 5000, 3, AQM_PARAM_INT, 0 },
	[P_INTERVAL] = { "interval_ms", "ms", 1, 100000000, 100000, 3, AQM_PARAM_INT, 0 },
};

struct codel {
	struct aqm_fifo fifo;
	uint32_t limit;
	uint64_t target_ns, interval_ns;
	uint64_t first_above_ns; /* 0: sojourn below target */
	uint64_t drop_next_ns;
	uint32_t count, lastcount;
	uint32_t invsqrt_q32; /* 1/sqrt(count), Q32 */
	uint8_t dropping;
	uint32_t maxpacket;
	uint64_t last_sojourn_ns;
};

/* floor(sqrt(x)), bit by bit: only when the dropping state is entered. */
static uint64_t isqrt64(uint64_t x)
{
	uint64_t r = 0, bit = UINT64_C(1) << 62;

	while (bit > x)
		bit >>= 2;
	while (bit) {
		if (x >= r + bit) {
			x -= r + bit;
			r = (r >> 1) + bit;
		} else {
			r >>= 1;
		}
		bit >>= 2;
	}
	return r;
}

static uint32_t invsqrt_exact(uint32_t count)
{
	/* 2^32 / sqrt(count) = 2^48 / sqrt(count * 2^32) */
	uint64_t s = isqrt64((uint64_t)count << 32);
	uint64_t y = (UINT64_C(1) << 48) / (s ? s : 1);

	return y > 0xffffffffu ? 0xffffffffu : (uint32_t)y;
}

/* Called after count++. One Newton step from 1/sqrt(count - 1) is accurate
 * to ~0.4 (1/count)^2 relative; below 16 (where that is poor: from count 1 it
 * gives 0.5 for 1/sqrt(2)) the exact value is used instead. */
static void newton_step(struct codel *c)
{
	uint64_t y = c->invsqrt_q32;
	uint64_t y2 = (y * y) >> 32;
	uint64_t cy2 = (uint64_t)c->count * y2;
	uint64_t t;

	if (c->count < 16 || cy2 >= (UINT64_C(3) << 32)) { /* small, or out of Newton's basin */
		c->invsqrt_q32 = invsqrt_exact(c->count);
		return;
	}
	t = ((UINT64_C(3) << 32) - cy2) >> 2;
	y = (y * t) >> 31;
	c->invsqrt_q32 = y > 0xffffffffu ? 0xffffffffu : (uint32_t)y;
}

static uint64_t control_law(const struct codel *c, uint64_t t)
{
	return t + ((c->interval_ns * c->invsqrt_q32) >> 32);
}

static int codel_init(struct aqm_queue *q, const struct aqm_args *a, char *err, size_t errlen)
{
	struct codel *c = aqm_priv(q);

	(void)err;
	(void)errlen;
	c->limit = (uint32_t)a->v[P_LIMIT];
	c->target_ns = (uint64_t)a->v[P_TARGET] * 1000;
	c->interval_ns = (uint64_t)a->v[P_INTERVAL] * 1000;
	c->invsqrt_q32 = 0xffffffffu;
	return 0;
}

static int codel_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct codel *c = aqm_priv(q);

	(void)now_ns;
	if (q->qlen_pkts >= c->limit) {
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	if (pkt->len > c->maxpacket)
		c->maxpacket = pkt->len;
	aqm_fifo_push(&c->fifo, pkt);
	aqm_account_add(q, pkt);
	return AQM_QUEUED;
}

/* RFC 8289 dodequeue(): the head packet and whether it may be dropped. */
static struct aqm_pkt *do_dequeue(struct aqm_queue *q, struct codel *c, uint64_t now_ns,
				  int *ok_to_drop)
{
	struct aqm_pkt *pkt = aqm_fifo_pop(&c->fifo);
	uint64_t sojourn;

	*ok_to_drop = 0;
	if (!pkt) {
		c->first_above_ns = 0;
		return 0;
	}
	aqm_account_remove(q, pkt);
	sojourn = now_ns - pkt->enqueue_ns;
	c->last_sojourn_ns = sojourn;
	if (sojourn < c->target_ns || q->qlen_bytes <= c->maxpacket) {
		c->first_above_ns = 0;
	} else if (!c->first_above_ns) {
		c->first_above_ns = now_ns + c->interval_ns;
	} else if (now_ns >= c->first_above_ns) {
		*ok_to_drop = 1;
	}
	return pkt;
}

static struct aqm_pkt *codel_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct codel *c = aqm_priv(q);
	int ok_to_drop;
	struct aqm_pkt *pkt = do_dequeue(q, c, now_ns, &ok_to_drop);

	if (!pkt) {
		c->dropping = 0;
		return 0;
	}
	if (c->dropping) {
		if (!ok_to_drop)
			c->dropping = 0;
		while (c->dropping && now_ns >= c->drop_next_ns) {
			/* do_dequeue already unlinked and unaccounted it */
			aqm_drop_arriving(q, pkt, AQM_DROP_DELAY);
			c->count++;
			newton_step(c);
			pkt = do_dequeue(q, c, now_ns, &ok_to_drop);
			if (!ok_to_drop)
				c->dropping = 0;
			else
				c->drop_next_ns = control_law(c, c->drop_next_ns);
		}
	} else if (ok_to_drop) {
		uint32_t delta = c->count - c->lastcount;

		aqm_drop_arriving(q, pkt, AQM_DROP_DELAY);
		pkt = do_dequeue(q, c, now_ns, &ok_to_drop);
		c->dropping = 1;
		if (delta > 1 && (int64_t)(now_ns - c->drop_next_ns) < (int64_t)(16 * c->interval_ns))
			c->count = delta;
		else
			c->count = 1;
		c->invsqrt_q32 = c->count == 1 ? 0xffffffffu : invsqrt_exact(c->count);
		c->drop_next_ns = control_law(c, now_ns);
		c->lastcount = c->count;
	}
	return pkt;
}

static struct aqm_pkt *codel_pop_raw(struct aqm_queue *q)
{
	struct codel *c = aqm_priv(q);

	return aqm_fifo_pop(&c->fifo);
}

static int codel_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct codel *c = aqm_priv(q);

	if (q->qlen_pkts >= c->limit)
		return -1;
	if (pkt->len > c->maxpacket)
		c->maxpacket = pkt->len;
	aqm_fifo_push(&c->fifo, pkt);
	aqm_account_add(q, pkt);
	return 0;
}

static size_t codel_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct codel *c = aqm_priv(q);

	pos = aqm_put_kv(buf, len, pos, "count", c->count);
	pos = aqm_put_kv(buf, len, pos, "lastcount", c->lastcount);
	pos = aqm_put_kv(buf, len, pos, "dropping", c->dropping);
	pos = aqm_put_kv(buf, len, pos, "drop_next_ns", c->drop_next_ns);
	pos = aqm_put_kv(buf, len, pos, "ldelay_ns", c->last_sojourn_ns);
	return aqm_put_kv(buf, len, pos, "maxpacket", c->maxpacket);
}

const struct aqm_ops aqm_codel_ops = {
	.name = "codel",
	.params = codel_params,
	.nparams = sizeof(codel_params) / sizeof(codel_params[0]),
	.priv_size = sizeof(struct codel),
	.init = codel_init,
	.enqueue = codel_enqueue,
	.dequeue = codel_dequeue,
	.pop_raw = codel_pop_raw,
	.requeue = codel_requeue,
	.xstats = codel_xstats,
};
