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

static const char *const err_code_names[AQM_ERR_CODES] = {
	[AQM_ERR_NONE] = "none",
	[AQM_ERR_SYNTAX] = "syntax",
	[AQM_ERR_UNKNOWN_DISC] = "unknown-discipline",
	[AQM_ERR_UNKNOWN_PARAM] = "unknown-parameter",
	[AQM_ERR_TWICE] = "twice",
	[AQM_ERR_NOT_NUMBER] = "not-a-number",
	[AQM_ERR_RANGE] = "range",
	[AQM_ERR_VALUE] = "value",
	[AQM_ERR_CONFLICT] = "conflict",
	[AQM_ERR_CHILDREN] = "children",
	[AQM_ERR_OVER_CAP] = "over-cap",
	[AQM_ERR_NOMEM] = "no-memory",
	[AQM_ERR_ENV] = "env",
};

const char *aqm_err_code_name(enum aqm_err_code code)
{
	if ((unsigned)code >= AQM_ERR_CODES)
		return "unknown";
	return err_code_names[code];
}

/* The index of the parameter called name in ops' table, or -1. */
int aqm_param_index(const struct aqm_ops *ops, const char *name)
{
	unsigned i;

	for (i = 0; i < ops->nparams; i++)
		if (aqm_streqn(name, aqm_strlen(name), ops->params[i].name))
			return (int)i;
	return -1;
}

/* rate_bps left out of the spec: the caller's drain rate, checked like a given value. */
static int default_rate(const struct aqm_ops *ops, struct aqm_args *a, uint64_t rate_bps,
			struct aqm_error *err)
{
	int i = aqm_param_index(ops, "rate_bps");
	const struct aqm_param *p;
	size_t pos;

	if (i < 0 || (a->given & (1u << i)))
		return 0;
	p = &ops->params[i];
	if (rate_bps < (uint64_t)p->min || rate_bps > (uint64_t)p->max) {
		aqm_err_at(err, AQM_ERR_RANGE, ops, i, -1);
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, ops->name);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": parameter 'rate_bps' = ");
		pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, rate_bps);
		aqm_put_str(AQM_ERR_TEXT(err), pos, " (the link's rate) is out of range");
		return -1;
	}
	a->v[i] = (int64_t)rate_bps;
	return 0;
}

/* The host's cap on the packets a queue may hold (env->max_pkts), checked on
 * the parsed `limit` before anything is allocated; bands hands each band what
 * the bands before it left (bands.c). */
static int check_cap(const struct aqm_ops *ops, const struct aqm_args *a, uint64_t max_pkts,
		     struct aqm_error *err)
{
	int i = aqm_param_index(ops, "limit");
	size_t pos;

	if (!max_pkts || i < 0 || (uint64_t)a->v[i] <= max_pkts)
		return 0;
	aqm_err_at(err, AQM_ERR_OVER_CAP, ops, i, -1);
	pos = aqm_put_str(AQM_ERR_TEXT(err), 0, ops->name);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": parameter 'limit' = ");
	pos = aqm_put_i64(AQM_ERR_TEXT(err), pos, a->v[i]);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": more packets than the host allows (");
	pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, max_pkts);
	aqm_put_str(AQM_ERR_TEXT(err), pos, ")");
	return -1;
}

struct aqm_queue *aqm_create_n(const char *spec, size_t speclen, const struct aqm_env *env,
			       struct aqm_error *err)
{
	const struct aqm_ops *ops;
	struct aqm_args a;
	struct aqm_queue *q;
	unsigned i;
	int ecn;

	aqm_err_clear(err);
	if (!env || !env->alloc || !env->free || !env->drop || !env->random_u32) {
		aqm_err(err, AQM_ERR_ENV, "aqm_env: alloc, free, drop and random_u32 are required", 0, 0);
		return 0;
	}
	if (aqm_parse_spec(spec, speclen, &ops, &a, err))
		return 0;
	if (env->rate_bps && default_rate(ops, &a, env->rate_bps, err))
		return 0;
	if (check_cap(ops, &a, env->max_pkts, err))
		return 0;
	q = env->alloc(env->ctx, sizeof(*q) + ops->priv_size);
	if (!q) {
		aqm_err(err, AQM_ERR_NOMEM, ops->name, ": out of memory", 0);
		err->disc = ops->name;
		return 0;
	}
	q->ops = ops;
	q->env = *env;
	for (i = 0; i < ops->nparams; i++)
		q->pv[i] = a.v[i];
	ecn = aqm_param_index(ops, "ecn");
	q->ecn = ecn >= 0 && a.v[ecn];
	if (ops->init(q, &a, err)) {
		if (!err->disc)
			err->disc = ops->name;
		env->free(env->ctx, q);
		return 0;
	}
	return q;
}

struct aqm_queue *aqm_create_checked(const char *spec, const struct aqm_env *env, struct aqm_error *err)
{
	if (!spec) {
		aqm_err_clear(err);
		aqm_err(err, AQM_ERR_SYNTAX, "empty spec: expected a discipline name", 0, 0);
		return 0;
	}
	return aqm_create_n(spec, aqm_strlen(spec), env, err);
}

/* The message of e into a caller's buffer. */
static void copy_text(const struct aqm_error *e, char *buf, size_t len)
{
	if (len)
		buf[0] = 0;
	aqm_put_str(buf, len, 0, e->text);
}

struct aqm_queue *aqm_create(const char *spec, const struct aqm_env *env, char *errbuf, size_t errlen)
{
	struct aqm_error e;
	struct aqm_queue *q = aqm_create_checked(spec, env, &e);

	if (!q)
		copy_text(&e, errbuf, errlen);
	return q;
}

/* Where `changes` goes in a described spec: after the discipline's own
 * parameters, before the first '|' (a band's spec). */
static size_t own_end(const char *spec, size_t n)
{
	size_t i = 0;

	while (i < n && spec[i] != '|')
		i++;
	while (i > 0 && spec[i - 1] == ' ')
		i--;
	return i;
}

/* Whether changes ("key=value ...") gives the parameter key (keylen bytes). */
static int changes_give(const char *changes, const char *key, size_t keylen)
{
	const char *c = changes;

	for (;;) {
		size_t n = 0;

		while (*c == ' ' || *c == '\t')
			c++;
		if (!*c)
			return 0;
		while (c[n] && c[n] != '=' && c[n] != ' ' && c[n] != '\t')
			n++;
		if (n == keylen) {
			size_t i = 0;

			while (i < n && c[i] == key[i])
				i++;
			if (i == n)
				return 1;
		}
		while (*c && *c != ' ' && *c != '\t')
			c++;
	}
}

/* Whether changes replaces the kept parameter key (keylen bytes): gives it,
 * or another of its group in ops->exclusive. */
static int changes_replace(const struct aqm_ops *ops, const char *changes, const char *key, size_t keylen)
{
	const uint32_t *group;
	unsigned i, j;

	if (changes_give(changes, key, keylen))
		return 1;
	for (i = 0; i < ops->nparams && !aqm_streqn(key, keylen, ops->params[i].name); i++)
		;
	for (group = ops->exclusive; i < ops->nparams && group && *group; group++) {
		if (!(*group & (1u << i)))
			continue;
		for (j = 0; j < ops->nparams; j++)
			if (j != i && (*group & (1u << j)) &&
			    changes_give(changes, ops->params[j].name, aqm_strlen(ops->params[j].name)))
				return 1;
	}
	return 0;
}

struct aqm_queue *aqm_create_changed(const struct aqm_queue *q, const char *changes,
				     const struct aqm_env *env, struct aqm_error *err)
{
	size_t dlen = aqm_describe_len(q), clen = aqm_strlen(changes), cut, pos = 0, i = 0;
	size_t len = dlen + clen + 3;
	char *old, *spec;
	struct aqm_queue *nq;

	aqm_err_clear(err);
	for (pos = 0; pos < clen; pos++)
		if (changes[pos] == '|') {
			aqm_err(err, AQM_ERR_CHILDREN, q->ops->name,
				": a change gives parameters only: bands' specs go in a whole spec", 0);
			err->disc = q->ops->name;
			return 0;
		}
	pos = 0;
	old = q->env.alloc(q->env.ctx, dlen + 1);
	spec = q->env.alloc(q->env.ctx, len);
	if (!old || !spec) {
		q->env.free(q->env.ctx, old);
		q->env.free(q->env.ctx, spec);
		aqm_err(err, AQM_ERR_NOMEM, q->ops->name, ": out of memory", 0);
		err->disc = q->ops->name;
		return 0;
	}
	aqm_describe(q, old, dlen + 1);
	cut = own_end(old, dlen);
	/* the discipline's name, then each of its parameters that changes
	 * does not replace, then changes, then the bands' specs unchanged */
	while (i < cut && old[i] != ' ')
		pos = aqm_put_strn(spec, len, pos, &old[i++], 1);
	while (i < cut) {
		size_t tok, k;

		while (i < cut && old[i] == ' ')
			i++;
		tok = i;
		while (i < cut && old[i] != ' ')
			i++;
		for (k = tok; k < i && old[k] != '='; k++)
			;
		if (i > tok && !changes_replace(q->ops, changes, old + tok, k - tok)) {
			pos = aqm_put_str(spec, len, pos, " ");
			pos = aqm_put_strn(spec, len, pos, old + tok, i - tok);
		}
	}
	pos = aqm_put_str(spec, len, pos, " ");
	pos = aqm_put_str(spec, len, pos, changes);
	if (cut < dlen) {
		pos = aqm_put_str(spec, len, pos, " ");
		aqm_put_str(spec, len, pos, old + cut);
	}
	nq = aqm_create_checked(spec, env, err);
	q->env.free(q->env.ctx, old);
	q->env.free(q->env.ctx, spec);
	return nq;
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
			nq->stats.marks[r] += old->stats.marks[r];
			nq->stats.mark_bytes[r] += old->stats.mark_bytes[r];
		}
	}
	free_queue(old);
	*qp = nq;
}

int aqm_reconfigure(struct aqm_queue **qp, const char *spec, char *errbuf, size_t errlen)
{
	struct aqm_queue *nq = aqm_create(spec, &(*qp)->env, errbuf, errlen);

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

/* "<name> k=v k=v ..." with every parameter, defaults filled in, but those
 * whose bit is set in skip. */
size_t aqm_describe_except(const struct aqm_queue *q, char *buf, size_t len, size_t pos, uint32_t skip)
{
	unsigned i;

	pos = aqm_put_str(buf, len, pos, q->ops->name);
	for (i = 0; i < q->ops->nparams; i++) {
		const struct aqm_param *p = &q->ops->params[i];

		if (p->kind != AQM_PARAM_INT || (skip & (1u << i)))
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
		pos = aqm_describe_except(q, buf, len, 0, 0);
	return clamp_len(pos, len);
}

size_t aqm_describe_at(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	if (q->ops->describe)
		return q->ops->describe(q, buf, len, pos);
	return aqm_describe_except(q, buf, len, pos, 0);
}

size_t aqm_describe_len(const struct aqm_queue *q)
{
	/* the writers count past a full buffer: with none, the whole length */
	return aqm_describe_at(q, 0, 0, 0);
}

void aqm_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	aqm_zero(out, sizeof(*out));
	if (q->ops->get_xstats)
		q->ops->get_xstats(q, out);
}

void aqm_band_xstats(const struct aqm_queue *q, unsigned band, struct aqm_xstats *out)
{
	if (q->ops->band_xstats) {
		aqm_zero(out, sizeof(*out));
		q->ops->band_xstats(q, band, out);
	} else if (band == 0) {
		aqm_get_xstats(q, out);
	} else {
		aqm_zero(out, sizeof(*out));
	}
}

void aqm_restart(struct aqm_queue *q)
{
	q->carried_pkts = 0;
	if (q->ops->restart)
		q->ops->restart(q);
}

void aqm_flush(struct aqm_queue *q)
{
	struct aqm_pkt *pkt;

	/* pop_raw keeps the discipline's per-flow counts right (as for a
	 * carry-over), so no packet is left counted anywhere */
	while ((pkt = q->ops->pop_raw(q)) != 0) {
		aqm_account_remove(q, pkt);
		aqm_drop_arriving(q, pkt, AQM_DROP_FLUSH);
	}
	aqm_restart(q);
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
