/* droptail.c - FIFO with a packet limit: the arriving packet is dropped when
 * the queue holds `limit` packets (seed 000 Table II: 80 packets). */
#include "aqm_impl.h"

enum { P_LIMIT };

static const struct aqm_param droptail_params[] = {
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 80, 0, AQM_PARAM_INT, 0 },
};

struct droptail {
	struct aqm_fifo fifo;
	uint32_t limit;
};

static int droptail_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct droptail *d = aqm_priv(q);

	(void)err;
		d->limit = (uint32_t)a->v[P_LIMIT];
	return 0;
}

static int droptail_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct droptail *d = aqm_priv(q);

	(void)now_ns;
	return aqm_fifo_enqueue(q, &d->fifo, pkt, d->limit);
}

static struct aqm_pkt *droptail_pop_raw(struct aqm_queue *q)
{
	struct droptail *d = aqm_priv(q);

	return aqm_fifo_pop(&d->fifo);
}

static struct aqm_pkt *droptail_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct droptail *d = aqm_priv(q);

	(void)now_ns;
	return aqm_fifo_dequeue(q, &d->fifo);
}

static int droptail_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct droptail *d = aqm_priv(q);

	return aqm_fifo_requeue(q, &d->fifo, pkt, d->limit);
}

const struct aqm_ops aqm_droptail_ops = {
	.name = "droptail",
	.params = droptail_params,
	.nparams = sizeof(droptail_params) / sizeof(droptail_params[0]),
	.priv_size = sizeof(struct droptail),
	.init = droptail_init,
	.enqueue = droptail_enqueue,
	.dequeue = droptail_dequeue,
	.pop_raw = droptail_pop_raw,
	.requeue = droptail_requeue,
};
