/* fq_codel.c - FlowQueue-CoDel, RFC 8290, with the defaults and choices of
 * Linux's sch_fq_codel where the RFC leaves them open.
 *
 * Packets are hashed by flow into `flows` buckets (a salted mix of the
 * packet's flow_hash, scaled onto the bucket count). Each bucket is a FIFO
 * under its own CoDel state (codel_law.h, as codel.c). Buckets with packets
 * sit on one of two lists served by deficit round robin with `quantum` bytes:
 *
 *   a bucket that gets a packet while on neither list joins the tail of the
 *   new list with one quantum of credit (RFC 8290 4.1);
 *   the scheduler serves the new list first, else the old list (4.2); a head
 *   bucket out of credit gets a quantum more and moves to the old list's tail;
 *   a head bucket that has nothing to send (empty, or CoDel dropped what it
 *   had) leaves its list - but one on the new list passes through the old
 *   list first when that list is not empty, so new buckets cannot starve old
 *   ones (4.2's "to the end of the list of old queues").
 *
 * CoDel's decisions are dropped (AQM_DROP_DELAY), or with ecn=1 marked on
 * ECN-capable packets. A packet whose sojourn exceeds ce_threshold_ms (when
 * non-zero) is marked CE whatever `ecn` says, as Linux's ce_threshold.
 *
 * Overflow: the arrival is queued first; when the queue then holds more than
 * `limit` packets or more than `memory_limit` bytes, packets are dropped from
 * the head of the bucket with the largest byte backlog (RFC 8290 4.1.1): as
 * many as it takes to remove half of that backlog, at most `drop_batch` and at
 * least one (Linux's batch, which spreads the search over several drops).
 * The arrival itself is among them only if its bucket was the fattest and
 * the batch reached it; then AQM_DROPPED is returned. The bucket's CoDel
 * counts those drops as its own (as Linux: its next drops come sooner).
 *
 * Differences from Linux (docs/baselines.md says why): ecn defaults to 0;
 * memory_limit counts the packets' bytes, not the kernel's truesize; the
 * "backlog at most one packet" guard of CoDel compares the whole queue with
 * the largest packet this queue has seen, not the device MTU; no classifier
 * and no skb->priority override: the bucket is always the hash's.
 */
#include "codel_law.h"

enum { P_LIMIT, P_FLOWS, P_QUANTUM, P_TARGET, P_INTERVAL, P_ECN, P_CE_THRESHOLD, P_MEMORY_LIMIT,
       P_DROP_BATCH, NPARAMS };
_Static_assert(NPARAMS <= AQM_MAX_PARAMS, "the table fits struct aqm_args");

static const struct aqm_param fqc_params[NPARAMS] = {
	/* Linux's defaults: 10240 packets, 1024 buckets, one Ethernet MTU */
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 10240, 0, AQM_PARAM_INT, 0 },
	/* at most Linux's 65536: each bucket costs ~100 bytes, allocated at init */
	[P_FLOWS] = { "flows", "buckets", 1, 65536, 1024, 0, AQM_PARAM_INT, 0 },
	/* Linux raises a quantum below 256 to 256; a spec asking for one is refused */
	[P_QUANTUM] = { "quantum", "bytes", 256, 1000000, 1514, 0, AQM_PARAM_INT, 0 },
	[P_TARGET] = CODEL_LAW_PARAM_TARGET,
	[P_INTERVAL] = CODEL_LAW_PARAM_INTERVAL,
	/* 0 by default, unlike Linux's fq_codel: the core's disciplines drop
	 * unless told to mark */
	[P_ECN] = AQM_PARAM_ECN,
	/* 0: off (Linux's default) */
	[P_CE_THRESHOLD] = { "ce_threshold_ms", "ms", 0, 10000000, 0, 3, AQM_PARAM_INT, 0 },
	/* Linux's default 32 MiB and cap 2 GiB, counted here in packet bytes */
	[P_MEMORY_LIMIT] = { "memory_limit", "bytes", 1514, 2147483648LL, 33554432, 0, AQM_PARAM_INT, 0 },
	[P_DROP_BATCH] = { "drop_batch", "packets", 1, 65536, 64, 0, AQM_PARAM_INT, 0 },
};

enum { FQC_NONE = 0, FQC_NEW, FQC_OLD };

struct fqc_bucket {
	struct aqm_fifo fifo;
	struct fqc_bucket *next; /* on its list */
	uint32_t backlog;        /* bytes queued */
	int32_t deficit;         /* DRR credit, bytes */
	uint8_t list;            /* FQC_NONE, FQC_NEW or FQC_OLD */
	struct codel_law law;
};

struct fqc_list {
	struct fqc_bucket *first, *last;
};

struct fq_codel {
	struct fqc_bucket *bucket;
	uint32_t nbuckets, salt;
	uint8_t salted;
	uint32_t limit, drop_batch;
	int32_t quantum;
	uint64_t memory_limit, ce_threshold_ns;
	struct fqc_list new_flows, old_flows;
	uint32_t maxpacket; /* the largest packet queued so far: CoDel's backlog guard */
	uint64_t drop_overlimit, drop_overmemory, new_flow_count, ecn_marks, ce_marks;
};

/* ---- the two lists -------------------------------------------------------- */

static inline void list_add_tail(struct fqc_list *l, struct fqc_bucket *b, uint8_t which)
{
	b->list = which;
	b->next = 0;
	if (l->first)
		l->last->next = b;
	else
		l->first = b;
	l->last = b;
}

static inline struct fqc_bucket *list_pop_head(struct fqc_list *l)
{
	struct fqc_bucket *b = l->first;

	l->first = b->next;
	b->next = 0;
	b->list = FQC_NONE;
	return b;
}

/* The list served now (the new one first) into *l, and its head bucket
 * (NULL: both lists are empty). */
static inline struct fqc_bucket *head_bucket(struct fq_codel *f, struct fqc_list **l)
{
	*l = f->new_flows.first ? &f->new_flows : &f->old_flows;
	return (*l)->first;
}

/* ---- buckets ---------------------------------------------------------------- */

/* Which flows share a bucket differs from one queue to the next, as Linux's
 * per-boot hash key makes it differ from one host to the next. The salt is
 * drawn with the first packet, not at init: sch_ckcd starts its record of
 * the core's random draws once the queue exists, and a replay of that record
 * must draw the same numbers at the same points. */
static __attribute__((noinline, cold)) void draw_salt(struct aqm_queue *q, struct fq_codel *f)
{
	f->salt = q->env.random_u32(q->env.ctx);
	f->salted = 1;
}

static inline struct fqc_bucket *bucket_of(struct aqm_queue *q, struct fq_codel *f, uint32_t flow_hash)
{
	uint32_t h;

	if (__builtin_expect(!f->salted, 0))
		draw_salt(q, f);
	h = aqm_mix32(flow_hash ^ f->salt);

	return &f->bucket[((uint64_t)h * f->nbuckets) >> 32];
}

/* Queue pkt in its bucket (enqueue and carry-over); a bucket on neither list
 * becomes a new one with one quantum. 1 when the bucket was new. */
static inline int bucket_push(struct aqm_queue *q, struct fq_codel *f, struct fqc_bucket *b,
			      struct aqm_pkt *pkt)
{
	aqm_fifo_push(&b->fifo, pkt);
	b->backlog += pkt->len;
	aqm_account_add(q, pkt);
	if (pkt->len > f->maxpacket)
		f->maxpacket = pkt->len;
	if (b->list != FQC_NONE)
		return 0;
	list_add_tail(&f->new_flows, b, FQC_NEW);
	b->deficit = f->quantum;
	return 1;
}

/* The law's `pop`: the bucket's head, unlinked and unaccounted. */
static inline struct aqm_pkt *bucket_pop(struct aqm_queue *q, void *src)
{
	struct fqc_bucket *b = src;
	struct aqm_pkt *pkt = aqm_fifo_pop(&b->fifo);

	if (pkt) {
		b->backlog -= pkt->len;
		aqm_account_remove(q, pkt);
	}
	return pkt;
}

static void buckets_start(struct fq_codel *f, const struct aqm_queue *q)
{
	uint32_t i;

	for (i = 0; i < f->nbuckets; i++) {
		struct fqc_bucket *b = &f->bucket[i];

		aqm_zero(b, sizeof(*b));
		codel_law_init(&b->law, q->pv[P_TARGET], q->pv[P_INTERVAL]);
	}
	f->new_flows.first = f->new_flows.last = 0;
	f->old_flows.first = f->old_flows.last = 0;
}

static int fqc_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct fq_codel *f = aqm_priv(q);

	f->nbuckets = (uint32_t)a->v[P_FLOWS];
	f->limit = (uint32_t)a->v[P_LIMIT];
	f->quantum = (int32_t)a->v[P_QUANTUM];
	f->ce_threshold_ns = (uint64_t)a->v[P_CE_THRESHOLD] * 1000;
	f->memory_limit = (uint64_t)a->v[P_MEMORY_LIMIT];
	f->drop_batch = (uint32_t)a->v[P_DROP_BATCH];
	f->bucket = q->env.alloc(q->env.ctx, (size_t)f->nbuckets * sizeof(struct fqc_bucket));
	if (!f->bucket) {
		aqm_err_at(err, AQM_ERR_NOMEM, &aqm_fq_codel_ops, P_FLOWS, -1);
		aqm_err(err, AQM_ERR_NOMEM, "fq_codel: out of memory for parameter 'flows'", 0, 0);
		return -1;
	}
	buckets_start(f, q);
	return 0;
}

static void fqc_release(struct aqm_queue *q)
{
	struct fq_codel *f = aqm_priv(q);

	q->env.free(q->env.ctx, f->bucket);
	f->bucket = 0;
}

/* ---- overflow: drop from the fattest bucket ------------------------------ */

/* The listed bucket with the largest backlog (every bucket with packets is on
 * a list), the lowest-numbered of equals as Linux's scan of all buckets
 * finds it: the lists hold at most the queued packets' buckets, so this
 * reads fewer than `flows` entries. The comparison is left to conditional
 * moves: with many buckets of one packet each, a branch on it was
 * mispredicted on about one bucket in five (cachegrind, 100 flows). */
static struct fqc_bucket *fattest(const struct fq_codel *f)
{
	const struct fqc_list *lists[2] = { &f->new_flows, &f->old_flows };
	struct fqc_bucket *best = 0, *b;
	uint32_t most = 0;
	int i;

	for (i = 0; i < 2; i++)
		for (b = lists[i]->first; b; b = b->next) {
			int better = (b->backlog > most) | ((b->backlog == most) & (b < best));

			best = better ? b : best;
			most = better ? b->backlog : most;
		}
	return best;
}

/* The queue is over `limit` or `memory_limit` with pkt in it: head drops from
 * the fattest bucket until half its backlog is gone (drop_batch at most).
 * Out of line, so the enqueue fast path saves no registers for it. */
static __attribute__((noinline)) int fqc_overflow(struct aqm_queue *q, struct fq_codel *f, struct aqm_pkt *pkt)
{
	int over_memory = q->qlen_bytes > f->memory_limit;
	struct fqc_bucket *b = fattest(f);
	uint32_t half = b->backlog / 2, gone = 0, n = 0;
	int arrival_dropped = 0;

	do {
		struct aqm_pkt *victim = aqm_fifo_pop(&b->fifo);

		b->backlog -= victim->len;
		gone += victim->len;
		arrival_dropped |= victim == pkt;
		aqm_drop_queued(q, victim, AQM_DROP_OVERFLOW);
	} while (++n < f->drop_batch && gone < half && b->fifo.head);
	codel_law_add_drops(&b->law, n);
	f->drop_overlimit += n;
	if (over_memory)
		f->drop_overmemory += n;
	return arrival_dropped ? AQM_DROPPED : AQM_QUEUED;
}

/* ---- enqueue / dequeue ----------------------------------------------------- */

static int fqc_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct fq_codel *f = aqm_priv(q);

	(void)now_ns;
	f->new_flow_count += (uint64_t)bucket_push(q, f, bucket_of(q, f, pkt->flow_hash), pkt);
	if (q->qlen_pkts <= f->limit && q->qlen_bytes <= f->memory_limit)
		return AQM_QUEUED;
	return fqc_overflow(q, f, pkt);
}

/* CoDel's verdict (codel_law_signal), its marks counted for xstats. */
static enum codel_verdict fqc_signal(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	enum codel_verdict v = codel_law_signal(q, pkt);

	if (v == CODEL_SENT_AS_DROP)
		((struct fq_codel *)aqm_priv(q))->ecn_marks++;
	return v;
}

/* The DRR of RFC 8290 4.2 over the new and old lists (see the top of the
 * file), each bucket's head judged by its CoDel. Hot path: the law and the
 * list steps are inlined, so one call does the whole decision. */
static struct aqm_pkt *fqc_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct fq_codel *f = aqm_priv(q);

	for (;;) {
		struct fqc_list *l;
		struct fqc_bucket *b = head_bucket(f, &l);
		struct aqm_pkt *pkt;

		if (!b)
			return 0;
		if (b->deficit <= 0) {
			b->deficit += f->quantum;
			list_add_tail(&f->old_flows, list_pop_head(l), FQC_OLD);
			continue;
		}
		b->law.maxpacket = f->maxpacket;
		pkt = codel_law_dequeue(q, &b->law, now_ns, b, bucket_pop, fqc_signal);
		if (!pkt) {
			list_pop_head(l);
			if (l == &f->new_flows && f->old_flows.first)
				list_add_tail(&f->old_flows, b, FQC_OLD);
			continue;
		}
		b->deficit -= (int32_t)pkt->len;
		if (f->ce_threshold_ns && now_ns - pkt->enqueue_ns > f->ce_threshold_ns &&
		    aqm_set_ce(q, pkt, AQM_DROP_DELAY))
			f->ce_marks++;
		return pkt;
	}
}

/* Reconfiguration, flush and destroy: the head of the first listed bucket
 * that has a packet; empty buckets met on the way leave their list, so
 * emptying a queue reads each bucket once. */
static struct aqm_pkt *fqc_pop_raw(struct aqm_queue *q)
{
	struct fq_codel *f = aqm_priv(q);
	struct fqc_list *l;
	struct fqc_bucket *b;

	while ((b = head_bucket(f, &l)) != 0) {
		struct aqm_pkt *pkt = aqm_fifo_pop(&b->fifo);

		if (pkt) {
			b->backlog -= pkt->len;
			return pkt;
		}
		list_pop_head(l);
	}
	return 0;
}

static int fqc_requeue(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct fq_codel *f = aqm_priv(q);

	if (q->qlen_pkts >= f->limit || q->qlen_bytes + pkt->len > f->memory_limit)
		return -1;
	bucket_push(q, f, bucket_of(q, f, pkt->flow_hash), pkt);
	return 0;
}

/* After a flush every bucket is empty: each starts afresh, off the lists. */
static void fqc_restart(struct aqm_queue *q)
{
	buckets_start(aqm_priv(q), q);
}

/* ---- state ---------------------------------------------------------------- */

/* Buckets on the list, and those of them with packets. */
static void count_list(const struct fqc_list *l, uint32_t *listed, uint32_t *busy)
{
	const struct fqc_bucket *b;

	for (b = l->first; b; b = b->next) {
		(*listed)++;
		*busy += b->fifo.head != 0;
	}
}

/* As Linux's tc -s: the counters, the lists' lengths and the bytes queued. */
static size_t fqc_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct fq_codel *f = aqm_priv(q);
	uint32_t new_len = 0, old_len = 0, busy = 0;

	count_list(&f->new_flows, &new_len, &busy);
	count_list(&f->old_flows, &old_len, &busy);
	pos = aqm_put_kv(buf, len, pos, "maxpacket", f->maxpacket);
	pos = aqm_put_kv(buf, len, pos, "drop_overlimit", f->drop_overlimit);
	pos = aqm_put_kv(buf, len, pos, "drop_overmemory", f->drop_overmemory);
	pos = aqm_put_kv(buf, len, pos, "new_flow_count", f->new_flow_count);
	pos = aqm_put_kv(buf, len, pos, "ecn_mark", f->ecn_marks);
	pos = aqm_put_kv(buf, len, pos, "ce_mark", f->ce_marks);
	pos = aqm_put_kv(buf, len, pos, "new_flows_len", new_len);
	pos = aqm_put_kv(buf, len, pos, "old_flows_len", old_len);
	pos = aqm_put_kv(buf, len, pos, "backlogged", busy);
	return aqm_put_kv(buf, len, pos, "memory_usage", q->qlen_bytes);
}

/* Active flows: the buckets with packets queued. */
static void fqc_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out)
{
	const struct fq_codel *f = aqm_priv(q);
	uint32_t listed = 0, busy = 0;

	count_list(&f->new_flows, &listed, &busy);
	count_list(&f->old_flows, &listed, &busy);
	out->flags |= AQM_XS_FLOWS;
	out->active_flows = busy;
}

const struct aqm_ops aqm_fq_codel_ops = {
	.name = "fq_codel",
	.params = fqc_params,
	.nparams = NPARAMS,
	.priv_size = sizeof(struct fq_codel),
	.init = fqc_init,
	.enqueue = fqc_enqueue,
	.dequeue = fqc_dequeue,
	.pop_raw = fqc_pop_raw,
	.requeue = fqc_requeue,
	.xstats = fqc_xstats,
	.release = fqc_release,
	.get_xstats = fqc_get_xstats,
	.restart = fqc_restart,
};
