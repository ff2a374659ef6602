/* bands.c - a DSCP -> band classifier with a weighted, work-conserving
 * deficit round robin between bands; each band is a queue of its own
 * discipline. One band may be marked penalized: drops inside it are reported
 * (top-level counters and env->drop) as AQM_DROP_PENALTY instead of the inner
 * reason, while aqm_band_stats() of that band keeps the inner reason.
 *
 *   bands weights=1,3 map=46:1,10:1 default=0 penalized=1 quantum=1514 \
 *     | ckcd limit=80 | droptail limit=20
 *
 * DRR variant: a band keeps the turn while its deficit is positive and may go
 * negative by less than one packet (the overdraft is carried into its next
 * turn), so no peek at the next packet's length is needed: children may drop
 * at dequeue. Long-run shares follow weight * quantum; an empty band is
 * skipped (work-conserving) and its deficit reset.
 */
#include "aqm_impl.h"

#define BANDS_MAX 8

enum { P_WEIGHTS, P_MAP, P_DEFAULT, P_PENALIZED, P_QUANTUM };

static const struct aqm_param bands_params[] = {
	[P_WEIGHTS] = { "weights", "list of 1..1000", 0, 0, 0, 0, AQM_PARAM_TEXT, "" },
	[P_MAP] = { "map", "list of dscp:band", 0, 0, 0, 0, AQM_PARAM_TEXT, "" },
	[P_DEFAULT] = { "default", "band", 0, BANDS_MAX - 1, 0, 0, AQM_PARAM_INT, 0 },
	[P_PENALIZED] = { "penalized", "band (-1: none)", -1, BANDS_MAX - 1, -1, 0, AQM_PARAM_INT, 0 },
	[P_QUANTUM] = { "quantum", "bytes", 64, 1000000, 1514, 0, AQM_PARAM_INT, 0 },
};

struct bands {
	unsigned n;
	int penalized;
	unsigned def;
	uint8_t map[64];
	uint64_t mapped; /* bit d: dscp d was mapped explicitly */
	uint32_t weight[BANDS_MAX];
	int64_t quantum[BANDS_MAX]; /* weight * quantum bytes */
	int64_t deficit[BANDS_MAX];
	unsigned cur;
	uint8_t turn; /* cur has received its quantum for this turn */
	struct aqm_queue *child[BANDS_MAX];
};

/* Children reach the caller's env through the parent. */
static uint32_t child_random(void *ctx)
{
	struct aqm_queue *q = ctx;

	return q->env.random_u32(q->env.ctx);
}

static void *child_alloc(void *ctx, size_t bytes)
{
	struct aqm_queue *q = ctx;

	return q->env.alloc(q->env.ctx, bytes);
}

static void child_free(void *ctx, void *p)
{
	struct aqm_queue *q = ctx;

	q->env.free(q->env.ctx, p);
}

static void child_drop(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct aqm_queue *q = ctx;
	struct bands *b = aqm_priv(q);

	if ((int)pkt->band == b->penalized && why != AQM_DROP_FLUSH)
		why = AQM_DROP_PENALTY;
	aqm_drop_arriving(q, pkt, why);
}

/* A band's ECN mark counts at the top level too, under the same relabelling
 * as its drops: in the penalized band it is a penalty mark. */
static void child_mark(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct aqm_queue *q = ctx;
	struct bands *b = aqm_priv(q);

	if ((int)pkt->band == b->penalized)
		why = AQM_DROP_PENALTY;
	q->stats.marks[why]++;
	q->stats.mark_bytes[why] += pkt->len;
	if (q->env.mark)
		q->env.mark(q->env.ctx, pkt, why);
}

/* Parse "n,n,n" or "d:b,d:b"; returns -1 on a malformed list. */
static int next_num(const char **s, const char *end, int64_t *v)
{
	const char *p = *s;
	int64_t x = 0;

	if (p == end || *p < '0' || *p > '9')
		return -1;
	while (p < end && *p >= '0' && *p <= '9') {
		x = x * 10 + (*p - '0');
		if (x > 1000000)
			return -1;
		p++;
	}
	*s = p;
	*v = x;
	return 0;
}

static int text_err(struct aqm_error *err, unsigned param, const char *txt, size_t n,
		    const char *what)
{
	const char *name = aqm_bands_ops.params[param].name;
	size_t pos;

	aqm_err_at(err, AQM_ERR_VALUE, &aqm_bands_ops, (int)param, -1);
	pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "bands: parameter '");

	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, name);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "' = '");
	pos = aqm_put_strn(AQM_ERR_TEXT(err), pos, txt, n);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "': ");
	aqm_put_str(AQM_ERR_TEXT(err), pos, what);
	return -1;
}

static int bands_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct bands *b = aqm_priv(q);
	struct aqm_env cenv = { 0 };
	uint64_t used = 0; /* packets the bands created so far may hold */
	const char *s, *end;
	unsigned i;
	size_t pos;

	b->n = a->nchild;
	b->def = (unsigned)a->v[P_DEFAULT];
	b->penalized = (int)a->v[P_PENALIZED];
	if (b->def >= b->n) {
		aqm_err_at(err, AQM_ERR_RANGE, q->ops, P_DEFAULT, -1);
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "bands: parameter 'default' = ");
		pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, b->def);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " is not a band (there are ");
		pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, b->n);
		aqm_put_str(AQM_ERR_TEXT(err), pos, " bands, counted from 0)");
		return -1;
	}
	if (b->penalized >= (int)b->n) {
		aqm_err_at(err, AQM_ERR_RANGE, q->ops, P_PENALIZED, -1);
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "bands: parameter 'penalized' = ");
		pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, (uint64_t)b->penalized);
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " is not a band (there are ");
		pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, b->n);
		aqm_put_str(AQM_ERR_TEXT(err), pos, " bands, counted from 0)");
		return -1;
	}
	for (i = 0; i < b->n; i++)
		b->weight[i] = 1;
	s = a->text[P_WEIGHTS];
	end = s + a->textlen[P_WEIGHTS];
	if (s != end) {
		for (i = 0;; i++) {
			int64_t w;

			if (i == b->n || next_num(&s, end, &w) || w < 1 || w > 1000)
				return text_err(err, P_WEIGHTS, a->text[P_WEIGHTS],
						a->textlen[P_WEIGHTS],
						i == b->n ? "more weights than bands"
							  : "expected integers 1..1000 separated by ','");
			b->weight[i] = (uint32_t)w;
			if (s == end)
				break;
			if (*s++ != ',')
				return text_err(err, P_WEIGHTS, a->text[P_WEIGHTS],
						a->textlen[P_WEIGHTS], "expected ','");
		}
		if (i + 1 != b->n)
			return text_err(err, P_WEIGHTS, a->text[P_WEIGHTS], a->textlen[P_WEIGHTS],
					"needs one weight per band");
	}
	for (i = 0; i < 64; i++)
		b->map[i] = (uint8_t)b->def;
	s = a->text[P_MAP];
	end = s + a->textlen[P_MAP];
	while (s != end) {
		int64_t d, band;

		if (next_num(&s, end, &d) || d > 63 || s == end || *s++ != ':' ||
		    next_num(&s, end, &band))
			return text_err(err, P_MAP, a->text[P_MAP], a->textlen[P_MAP],
					"expected dscp:band pairs (dscp 0..63) separated by ','");
		if (band >= (int64_t)b->n)
			return text_err(err, P_MAP, a->text[P_MAP], a->textlen[P_MAP],
					"band out of range");
		b->map[d] = (uint8_t)band;
		b->mapped |= UINT64_C(1) << d;
		if (s != end && *s++ != ',')
			return text_err(err, P_MAP, a->text[P_MAP], a->textlen[P_MAP],
					"expected ','");
	}
	for (i = 0; i < b->n; i++)
		b->quantum[i] = (int64_t)b->weight[i] * q->pv[P_QUANTUM];
	cenv.ctx = q;
	cenv.random_u32 = child_random;
	cenv.alloc = child_alloc;
	cenv.free = child_free;
	cenv.drop = child_drop;
	cenv.mark = child_mark;
	cenv.rate_bps = q->env.rate_bps;
	cenv.max_pkts = q->env.max_pkts;
	for (i = 0; i < b->n; i++) {
		struct aqm_error cerr;
		const char *cs = a->child[i];
		size_t cl = a->childlen[i];

		while (cl && (*cs == ' ' || *cs == '\t')) {
			cs++;
			cl--;
		}
		if (cl >= 5 && aqm_streqn(cs, 5, "bands") && (cl == 5 || cs[5] == ' ')) {
			aqm_err(err, AQM_ERR_CHILDREN, "bands: a band cannot itself be 'bands'", 0, 0);
			err->disc = q->ops->name;
			err->band = (int)i;
			goto fail;
		}
		b->child[i] = aqm_create_n(cs, cl, &cenv, &cerr);
		if (!b->child[i]) {
			/* the child's code, discipline and parameter, in band i */
			*err = cerr;
			err->band = (int)i;
			pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "bands: band ");
			pos = aqm_put_u64(AQM_ERR_TEXT(err), pos, i);
			pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": ");
			aqm_put_str(AQM_ERR_TEXT(err), pos, cerr.text);
			goto fail;
		}
		/* The host's cap covers all bands: the next ones get what is left
		 * (0 would mean no cap, so none left is refused here). */
		if (q->env.max_pkts) {
			used += aqm_limit_pkts(b->child[i]);
			if (i + 1 < b->n && used >= q->env.max_pkts) {
				aqm_err(err, AQM_ERR_OVER_CAP, "bands: the bands' limits add up to more packets "
					"than the host allows", 0, 0);
				err->disc = q->ops->name;
				err->band = (int)i + 1;
				goto fail;
			}
			cenv.max_pkts = q->env.max_pkts - used;
		}
	}
	return 0;
fail:
	for (i = 0; i < b->n; i++)
		if (b->child[i])
			aqm_destroy(b->child[i]);
	return -1;
}

static void bands_release(struct aqm_queue *q)
{
	struct bands *b = aqm_priv(q);
	unsigned i;

	for (i = 0; i < b->n; i++)
		aqm_destroy(b->child[i]);
}

static inline void sync_qlen(struct aqm_queue *q, const struct aqm_queue *c, uint32_t pkts0,
			     uint64_t bytes0)
{
	q->qlen_pkts = q->qlen_pkts - pkts0 + c->qlen_pkts;
	q->qlen_bytes = q->qlen_bytes - bytes0 + c->qlen_bytes;
}

static int bands_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct bands *b = aqm_priv(q);
	struct aqm_queue *c;
	uint32_t p0;
	uint64_t b0;
	int r;

	pkt->band = b->map[pkt->dscp & 63];
	c = b->child[pkt->band];
	p0 = c->qlen_pkts;
	b0 = c->qlen_bytes;
	r = aqm_enqueue(c, pkt, now_ns);
	sync_qlen(q, c, p0, b0);
	return r;
}

static inline void next_band(struct bands *b)
{
	b->cur = b->cur + 1 == b->n ? 0 : b->cur + 1;
	b->turn = 0;
}

static struct aqm_pkt *bands_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct bands *b = aqm_priv(q);
	unsigned guard;

	for (guard = 0; q->qlen_pkts && guard < 100000; guard++) {
		struct aqm_queue *c = b->child[b->cur];
		struct aqm_pkt *pkt;
		uint32_t p0;
		uint64_t b0;

		if (!c->qlen_pkts) {
			b->deficit[b->cur] = 0;
			next_band(b);
			continue;
		}
		if (!b->turn) {
			b->deficit[b->cur] += b->quantum[b->cur];
			b->turn = 1;
		}
		if (b->deficit[b->cur] <= 0) {
			next_band(b);
			continue;
		}
		p0 = c->qlen_pkts;
		b0 = c->qlen_bytes;
		pkt = aqm_dequeue(c, now_ns);
		sync_qlen(q, c, p0, b0);
		if (!pkt) {
			b->deficit[b->cur] = 0;
			next_band(b);
			continue;
		}
		b->deficit[b->cur] -= pkt->len;
		return pkt;
	}
	return 0;
}

static struct aqm_pkt *bands_pop_raw(struct aqm_queue *q)
{
	struct bands *b = aqm_priv(q);
	unsigned i;

	for (i = 0; i < b->n; i++) {
		struct aqm_queue *c = b->child[i];
		struct aqm_pkt *pkt = c->ops->pop_raw(c);

		if (pkt) {
			c->qlen_pkts--;
			c->qlen_bytes -= pkt->len;
			if (c->carried_pkts)
				c->carried_pkts--;
			return pkt; /* the caller unaccounts it from q */
		}
	}
	return 0;
}

static int bands_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct bands *b = aqm_priv(q);
	struct aqm_queue *c;
	uint32_t p0;
	uint64_t b0;
	int r;

	pkt->band = b->map[pkt->dscp & 63];
	c = b->child[pkt->band];
	p0 = c->qlen_pkts;
	b0 = c->qlen_bytes;
	r = c->ops->requeue(c, pkt);
	if (!r)
		c->carried_pkts++;
	sync_qlen(q, c, p0, b0);
	return r;
}

static size_t bands_describe(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct bands *b = aqm_priv(q);
	unsigned i, first = 1;

	pos = aqm_put_str(buf, len, pos, "bands weights=");
	for (i = 0; i < b->n; i++) {
		if (i)
			pos = aqm_put_str(buf, len, pos, ",");
		pos = aqm_put_u64(buf, len, pos, b->weight[i]);
	}
	if (b->mapped) {
		pos = aqm_put_str(buf, len, pos, " map=");
		for (i = 0; i < 64; i++) {
			if (!(b->mapped & (UINT64_C(1) << i)))
				continue;
			if (!first)
				pos = aqm_put_str(buf, len, pos, ",");
			first = 0;
			pos = aqm_put_u64(buf, len, pos, i);
			pos = aqm_put_str(buf, len, pos, ":");
			pos = aqm_put_u64(buf, len, pos, b->map[i]);
		}
	}
	pos = aqm_put_kv(buf, len, pos, "default", b->def);
	pos = aqm_put_kvi(buf, len, pos, "penalized", b->penalized);
	pos = aqm_put_kvi(buf, len, pos, "quantum", q->pv[P_QUANTUM]);
	for (i = 0; i < b->n; i++) {
		pos = aqm_put_str(buf, len, pos, " | ");
		pos = aqm_describe_at(b->child[i], buf, len, pos);
	}
	return pos;
}

static size_t bands_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct bands *b = aqm_priv(q);
	unsigned i;

	/* tokens after "band=<i>" belong to band i */
	for (i = 0; i < b->n; i++) {
		const struct aqm_queue *c = b->child[i];

		pos = aqm_put_kv(buf, len, pos, "band", i);
		pos = aqm_put_kvi(buf, len, pos, "deficit", b->deficit[i]);
		pos = aqm_put_kv(buf, len, pos, "qlen_pkts", c->qlen_pkts);
		pos = aqm_put_kv(buf, len, pos, "deq_pkts", c->stats.deq_pkts);
		pos = aqm_put_kv(buf, len, pos, "deq_bytes", c->stats.deq_bytes);
		if (c->ops->xstats)
			pos = c->ops->xstats(c, buf, len, pos);
	}
	return pos;
}

static unsigned bands_nbands(const struct aqm_queue *q)
{
	const struct bands *b = aqm_priv(q);

	return b->n;
}

static const struct aqm_stats *bands_band_stats(const struct aqm_queue *q, unsigned band)
{
	const struct bands *b = aqm_priv(q);

	return band < b->n ? &b->child[band]->stats : 0;
}

static uint32_t bands_band_qlen(const struct aqm_queue *q, unsigned band)
{
	const struct bands *b = aqm_priv(q);

	return band < b->n ? b->child[band]->qlen_pkts : 0;
}

static uint64_t bands_limit_pkts(const struct aqm_queue *q)
{
	const struct bands *b = aqm_priv(q);
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < b->n; i++)
		sum += aqm_limit_pkts(b->child[i]);
	return sum;
}

/* Empty after a flush: each band's estimators restart, the DRR from band 0. */
static void bands_restart(struct aqm_queue *q)
{
	struct bands *b = aqm_priv(q);
	unsigned i;

	for (i = 0; i < b->n; i++) {
		aqm_restart(b->child[i]);
		b->deficit[i] = 0;
	}
	b->cur = 0;
	b->turn = 0;
}

/* Flows summed over the bands, the smallest fair share of any band. */
static void bands_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	const struct bands *b = aqm_priv(q);
	unsigned i;

	for (i = 0; i < b->n; i++) {
		struct aqm_xstats c;

		aqm_get_xstats(b->child[i], &c);
		if (c.flags & AQM_XS_FLOWS)
			out->active_flows += c.active_flows;
		if ((c.flags & AQM_XS_FAIR_SHARE) &&
		    (!(out->flags & AQM_XS_FAIR_SHARE) || c.fair_share_bps < out->fair_share_bps))
			out->fair_share_bps = c.fair_share_bps;
		out->flags |= c.flags & (AQM_XS_FLOWS | AQM_XS_FAIR_SHARE);
	}
}

/* A band's state: its child's. */
static void bands_band_xstats(const struct aqm_queue *q, unsigned band, struct aqm_xstats *out)
{
	const struct bands *b = aqm_priv(q);

	if (band < b->n)
		aqm_get_xstats(b->child[band], out);
}

const struct aqm_ops aqm_bands_ops = {
	.name = "bands",
	.params = bands_params,
	.nparams = sizeof(bands_params) / sizeof(bands_params[0]),
	.priv_size = sizeof(struct bands),
	.takes_children = 1,
	.init = bands_init,
	.enqueue = bands_enqueue,
	.dequeue = bands_dequeue,
	.pop_raw = bands_pop_raw,
	.requeue = bands_requeue,
	.xstats = bands_xstats,
	.describe = bands_describe,
	.release = bands_release,
	.nbands = bands_nbands,
	.band_stats = bands_band_stats,
	.band_qlen = bands_band_qlen,
	.limit_pkts = bands_limit_pkts,
	.get_xstats = bands_get_xstats,
	.restart = bands_restart,
	.band_xstats = bands_band_xstats,
};
