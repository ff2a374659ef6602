/* codel.c - Controlled Delay, RFC 8289, with a packet limit.
 *
 * One FIFO under CoDel's control law (codel_law.h, shared with hdcodel):
 * every packet the law chooses is dropped - or with ecn=1, if it is
 * ECN-capable, marked CE and sent, the law going on as after a drop (as
 * Linux's codel with ecn: count and the next drop time advance). Seed 000 Table II: limit 80,
 * target (D) 5 ms, interval (Delta) 100 ms.
 */
#include "codel_law.h"

enum { P_LIMIT, P_TARGET, P_INTERVAL, P_ECN };

static const struct aqm_param codel_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 },
	[P_TARGET] = CODEL_LAW_PARAM_TARGET,
	[P_INTERVAL] = CODEL_LAW_PARAM_INTERVAL,
	[P_ECN] = AQM_PARAM_ECN,
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

uint32_t aqm_codel_invsqrt_exact(uint32_t count)
{
	/* 2^32 / sqrt(count) = 2^48 / sqrt(count * 2^32) */
	uint64_t s = isqrt64((uint64_t)count << 32);
	uint64_t y = (UINT64_C(1) << 48) / (s ? s : 1);

	return y > 0xffffffffu ? 0xffffffffu : (uint32_t)y;
}

size_t aqm_codel_law_xstats(const struct codel_law *l, char *buf, size_t len, size_t pos)
{
	pos = aqm_put_kv(buf, len, pos, "count", l->count);
	pos = aqm_put_kv(buf, len, pos, "lastcount", l->lastcount);
	pos = aqm_put_kv(buf, len, pos, "dropping", l->dropping);
	pos = aqm_put_kv(buf, len, pos, "drop_next_ns", l->drop_next_ns);
	pos = aqm_put_kv(buf, len, pos, "ldelay_ns", l->last_sojourn_ns);
	return aqm_put_kv(buf, len, pos, "maxpacket", l->maxpacket);
}

static int codel_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct codel_fifo *c = aqm_priv(q);

	(void)err;
		c->limit = (uint32_t)a->v[P_LIMIT];
	codel_law_init(&c->law, a->v[P_TARGET], a->v[P_INTERVAL]);
	return 0;
}

static int codel_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	(void)now_ns;
	return codel_fifo_enqueue(q, aqm_priv(q), pkt);
}

static struct aqm_pkt *codel_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct codel_fifo *c = aqm_priv(q);

	return codel_law_dequeue(q, &c->law, now_ns, &c->fifo, codel_law_pop_fifo, codel_law_signal);
}

struct aqm_pkt *aqm_codel_fifo_pop_raw(struct aqm_queue *q)
{
	struct codel_fifo *c = aqm_priv(q);

	return aqm_fifo_pop(&c->fifo);
}

int aqm_codel_fifo_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct codel_fifo *c = aqm_priv(q);

	if (q->qlen_pkts >= c->limit)
		return -1;
	codel_fifo_push(q, c, pkt);
	return 0;
}

static size_t codel_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct codel_fifo *c = aqm_priv(q);

	return aqm_codel_law_xstats(&c->law, buf, len, pos);
}

static void codel_restart(struct aqm_queue *q)
{
	codel_law_restart(&((struct codel_fifo *)aqm_priv(q))->law);
}

const struct aqm_ops aqm_codel_ops = {
	.name = "codel",
	.params = codel_params,
	.nparams = sizeof(codel_params) / sizeof(codel_params[0]),
	.priv_size = sizeof(struct codel_fifo),
	.init = codel_init,
	.enqueue = codel_enqueue,
	.dequeue = codel_dequeue,
	.pop_raw = aqm_codel_fifo_pop_raw,
	.requeue = aqm_codel_fifo_requeue,
	.xstats = codel_xstats,
	.restart = codel_restart,
};
