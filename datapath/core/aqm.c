/* aqm.c - the public interface (aqm.h) over the discipline operations. */
#include "aqm_impl.h"

static const char *const reason_names[AQM_DROP_REASONS] = {
	[AQM_DROP_OVERFLOW] = "overflow",
	[AQM_DROP_EARLY] = "early",
	[AQM_DROP_CHOKE_MATCH] = "choke-match",
	[AQM_DROP_DELAY] = "delay",
	[AQM_DROP_PENALTY] = "penalty",
	[AQM_DROP_FLUSH] = "flush",
	[AQM_DROP_SHRINK] = "shrink",
};

const char *aqm_drop_reason_name(enum aqm_drop_reason why)
{
	if ((unsigned)why >= AQM_DROP_REASONS)
		return "unknown";
	return reason_names[why];
}

/* rate_bps left out of the spec: the caller's drain rate, checked like a given value. */
static int default_rate(const struct aqm_ops *ops, struct aqm_args *a, uint64_t rate_bps,
			char *err, size_t errlen)
{
	unsigned i;
	size_t pos;

	for (i = 0; i < ops->nparams; i++) {
		const struct aqm_param *p = &ops->params[i];

		if ((a->given & (1u << i)) || !aqm_streqn("rate_bps", 8, p->name))
			continue;
		if (rate_bps < (uint64_t)p->min || rate_bps > (uint64_t)p->max) {
			pos = aqm_put_str(err, errlen, 0, ops->name);
			pos = aqm_put_str(err, errlen, pos, ": parameter 'rate_bps' = ");
			pos = aqm_put_u64(err, errlen, pos, rate_bps);
			aqm_put_str(err, errlen, pos, " (the link's rate) is out of range");
			return -1;
		}
		a->v[i] = (int64_t)rate_bps;
	}
	return 0;
}

struct aqm_queue *aqm_create_n(const char *spec, size_t speclen, const struct aqm_env *env,
			       char *err, size_t errlen)
{
	const struct aqm_ops *ops;
	struct aqm_args a;
	struct aqm_queue *q;
	unsigned i;

	if (err && errlen)
		err[0] = 0;
	if (!env || !env->alloc || !env->free || !env->drop || !env->random_u32) {
		aqm_err(err, errlen, "aqm_env: alloc, free, drop and random_u32 are required", 0, 0);
		return 0;
	}
	if (aqm_parse_spec(spec, speclen, &ops, &a, err, errlen))
		return 0;
	if (env->rate_bps && default_rate(ops, &a, env->rate_bps, err, errlen))
		return 0;
	q = env->alloc(env->ctx, sizeof(*q) + ops->priv_size);
	if (!q) {
		aqm_err(err, errlen, ops->name, ": out of memory", 0);
		return 0;
	}
	q->ops = ops;
	q->env = *env;
	for (i = 0; i < ops->nparams; i++)
		q->pv[i] = a.v[i];
	if (ops->init(q, &a, err, errlen)) {
		env->free(env->ctx, q);
		return 0;
	}
	return q;
}

struct aqm_queue *aqm_create(const char *spec, const struct aqm_env *env, char *err, size_t errlen)
{
	if (!spec) {
		aqm_err(err, errlen, "empty spec: expected a discipline name", 0, 0);
		return 0;
	}
	return aqm_create_n(spec, aqm_strlen(spec), env, err, errlen);
}

int aqm_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	int r;

	pkt->enqueue_ns = now_ns;
	pkt->next = 0;
	r = q->ops->enqueue(q, pkt, now_ns);
	if (r == AQM_QUEUED) {
		q->stats.enq_pkts++;
		q->stats.enq_bytes += pkt->len;
	}
	return r;
}

struct aqm_pkt *aqm_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct aqm_pkt *pkt;

	if (!q->qlen_pkts)
		return 0;
	if (q->carried_pkts) {
		q->carried_pkts--;
		pkt = q->ops->pop_raw(q);
		if (pkt)
			aqm_account_remove(q, pkt);
	} else {
		pkt = q->ops->dequeue(q, now_ns);
	}
	if (pkt) {
		q->stats.deq_pkts++;
		q->stats.deq_bytes += pkt->len;
	}
	return pkt;
}

/* Release a queue's own memory; its packets must already be gone. */
static void free_queue(struct aqm_queue *q)
{
	void (*fr)(void *, void *) = q->env.free;
	void *ctx = q->env.ctx;

	if (q->ops->release)
		q->ops->release(q);
	fr(ctx, q);
}

void aqm_set_env_rate(struct aqm_queue *q, uint64_t rate_bps)
{
	q->env.rate_bps = rate_bps;
}

void aqm_replace(struct aqm_queue **qp, struct aqm_queue *nq)
{
	struct aqm_queue *old = *qp;
	struct aqm_pkt *pkt;

	/* Carry the packets over in order, no AQM decision, timestamps kept.
	 * Only what exceeds the new discipline's hard capacity is tail-dropped. */
	while ((pkt = old->ops->pop_raw(old)) != 0) {
		aqm_account_remove(old, pkt);
		if (nq->ops->requeue(nq, pkt) == 0) {
			if (!nq->ops->takes_children) /* bands counts in each band */
				nq->carried_pkts++;
			continue;
		}
		aqm_drop_arriving(nq, pkt, AQM_DROP_OVERFLOW);
	}
	/* Totals continue across a reconfiguration; discipline state starts afresh. */
	{
		unsigned r;

		nq->stats.enq_pkts += old->stats.enq_pkts;
		nq->stats.enq_bytes += old->stats.enq_bytes;
		nq->stats.deq_pkts += old->stats.deq_pkts;
		nq->stats.deq_bytes += old->stats.deq_bytes;
		for (r = 0; r < AQM_DROP_REASONS; r++) {
			nq->stats.drops[r] += old->stats.drops[r];
			nq->stats.drop_bytes[r] += old->stats.drop_bytes[r];
		}
	}
	free_queue(old);
	*qp = nq;
}

int aqm_reconfigure(struct aqm_queue **qp, const char *spec, char *err, size_t errlen)
{
	struct aqm_queue *nq = aqm_create(spec, &(*qp)->env, err, errlen);

	if (!nq)
		return -1;
	aqm_replace(qp, nq);
	return 0;
}

uint32_t aqm_qlen_pkts(const struct aqm_queue *q)
{
	return q->qlen_pkts;
}

uint64_t aqm_qlen_bytes(const struct aqm_queue *q)
{
	return q->qlen_bytes;
}

const struct aqm_stats *aqm_get_stats(const struct aqm_queue *q)
{
	return &q->stats;
}

uint64_t aqm_limit_pkts(const struct aqm_queue *q)
{
	unsigned i;

	if (q->ops->limit_pkts)
		return q->ops->limit_pkts(q);
	for (i = 0; i < q->ops->nparams; i++)
		if (aqm_streqn("limit", 5, q->ops->params[i].name))
			return (uint64_t)q->pv[i];
	return 0;
}

unsigned aqm_nbands(const struct aqm_queue *q)
{
	return q->ops->nbands ? q->ops->nbands(q) : 1;
}

const struct aqm_stats *aqm_band_stats(const struct aqm_queue *q, unsigned band)
{
	if (q->ops->band_stats)
		return q->ops->band_stats(q, band);
	return band == 0 ? &q->stats : 0;
}

uint32_t aqm_band_qlen_pkts(const struct aqm_queue *q, unsigned band)
{
	if (q->ops->band_qlen)
		return q->ops->band_qlen(q, band);
	return band == 0 ? q->qlen_pkts : 0;
}

/* "<name> k=v k=v ..." with every parameter, defaults filled in. */
static size_t describe_params(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	unsigned i;

	pos = aqm_put_str(buf, len, pos, q->ops->name);
	for (i = 0; i < q->ops->nparams; i++) {
		const struct aqm_param *p = &q->ops->params[i];

		if (p->kind != AQM_PARAM_INT)
			continue;
		pos = aqm_put_str(buf, len, pos, " ");
		pos = aqm_put_str(buf, len, pos, p->name);
		pos = aqm_put_str(buf, len, pos, "=");
		pos = aqm_put_fixed(buf, len, pos, q->pv[i], p->decimals);
	}
	return pos;
}

static size_t clamp_len(size_t pos, size_t len)
{
	return len ? (pos < len ? pos : len - 1) : 0;
}

size_t aqm_describe(const struct aqm_queue *q, char *buf, size_t len)
{
	size_t pos;

	if (len)
		buf[0] = 0;
	if (q->ops->describe)
		pos = q->ops->describe(q, buf, len, 0);
	else
		pos = describe_params(q, buf, len, 0);
	return clamp_len(pos, len);
}

size_t aqm_describe_at(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	if (q->ops->describe)
		return q->ops->describe(q, buf, len, pos);
	return describe_params(q, buf, len, pos);
}

size_t aqm_xstats(const struct aqm_queue *q, char *buf, size_t len)
{
	size_t pos = 0;

	if (len)
		buf[0] = 0;
	pos = aqm_put_kv(buf, len, pos, "qlen_pkts", q->qlen_pkts);
	pos = aqm_put_kv(buf, len, pos, "qlen_bytes", q->qlen_bytes);
	if (q->ops->xstats)
		pos = q->ops->xstats(q, buf, len, pos);
	return clamp_len(pos, len);
}

void aqm_destroy(struct aqm_queue *q)
{
	struct aqm_pkt *pkt;

	if (!q)
		return;
	while ((pkt = q->ops->pop_raw(q)) != 0) {
		aqm_account_remove(q, pkt);
		aqm_drop_arriving(q, pkt, AQM_DROP_FLUSH);
	}
	free_queue(q);
}
