/* aqm_impl.h - what the disciplines share: the queue header, the discipline
 * operations, the parameter table, FIFO helpers and a tiny formatter.
 * Internal to datapath/core/; callers use aqm.h only.
 *
 * Freestanding like the rest of the core: no libc, no floating point.
 */
#ifndef CKCD_AQM_IMPL_H
#define CKCD_AQM_IMPL_H

#include "aqm.h"

#define AQM_MAX_PARAMS 20
#define AQM_NSEC_PER_SEC 1000000000ULL
#define AQM_NSEC_PER_MSEC 1000000ULL

/* ---- parameter tables -------------------------------------------------- */

enum aqm_param_kind {
	AQM_PARAM_INT = 0, /* decimal number, stored as value * 10^decimals */
	AQM_PARAM_TEXT,    /* free text checked by the discipline's init (lists, maps) */
};

struct aqm_param {
	const char *name;
	const char *unit; /* shown in messages and docs: "packets", "ms", "bit/s" */
	int64_t min, max, def; /* in stored units (value * 10^decimals) */
	uint8_t decimals;      /* digits after the point accepted: "0.002" with 6 -> 2000 */
	uint8_t kind;
	const char *def_text; /* AQM_PARAM_TEXT default */
};

/* Parsed, range-checked arguments handed to a discipline's init. */
struct aqm_args {
	int64_t v[AQM_MAX_PARAMS];
	const char *text[AQM_MAX_PARAMS]; /* TEXT params: points into the spec */
	size_t textlen[AQM_MAX_PARAMS];
	uint32_t given; /* bit i: parameter i was in the spec */
	/* "bands" only: the child specs after '|' (not NUL-terminated) */
	unsigned nchild;
	const char *child[8];
	size_t childlen[8];
};

/* ---- the discipline operations ----------------------------------------- */

struct aqm_ops {
	const char *name;
	const struct aqm_param *params;
	unsigned nparams;
	size_t priv_size; /* bytes after struct aqm_queue, zeroed */
	unsigned takes_children; /* spec may contain '|' child specs */
	/* Set up priv from validated args; may allocate via q->env. Cross-parameter
	 * checks go here and must name the parameter in err. */
	int (*init)(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err);
	int (*enqueue)(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns);
	struct aqm_pkt *(*dequeue)(struct aqm_queue *q, uint64_t now_ns);
	/* Reconfiguration/destroy: take the head packet / append one, with no
	 * AQM decision and no stats. requeue returns -1 if there is no room. */
	struct aqm_pkt *(*pop_raw)(struct aqm_queue *q);
	int (*requeue)(struct aqm_queue *q, struct aqm_pkt *pkt);
	size_t (*xstats)(const struct aqm_queue *q, char *buf, size_t len, size_t pos);
	size_t (*describe)(const struct aqm_queue *q, char *buf, size_t len, size_t pos); /* optional */
	void (*release)(struct aqm_queue *q); /* free what init allocated (queue is empty) */
	/* bands only (optional) */
	unsigned (*nbands)(const struct aqm_queue *q);
	const struct aqm_stats *(*band_stats)(const struct aqm_queue *q, unsigned band);
	uint32_t (*band_qlen)(const struct aqm_queue *q, unsigned band);
	uint64_t (*limit_pkts)(const struct aqm_queue *q); /* default: the `limit` parameter */
	/* Optional: the typed state (aqm_get_xstats; out is zeroed), and a
	 * restart of what estimates the traffic (averages, drop schedules) once
	 * the queue is empty (aqm_flush); neither may allocate. */
	void (*get_xstats)(const struct aqm_queue *q, struct aqm_xstats *out);
	void (*restart)(struct aqm_queue *q);
	/* bands only (optional): a band's typed state (aqm_band_xstats; out is
	 * zeroed, band may be out of range) */
	void (*band_xstats)(const struct aqm_queue *q, unsigned band, struct aqm_xstats *out);
	/* Optional: groups of parameters that set one thing in different units
	 * (bit i: the table's parameter i), the list ended by 0. A change
	 * giving one of a group drops the others from the configuration it
	 * keeps (aqm_create_changed), so a queue's described spec never makes
	 * them conflict with what the change gives. */
	const uint32_t *exclusive;
};

/* The common queue header; the discipline's private state follows it. */
struct aqm_queue {
	const struct aqm_ops *ops;
	struct aqm_env env;
	struct aqm_stats stats;
	uint32_t qlen_pkts;
	uint64_t qlen_bytes;
	/* Packets carried over by aqm_reconfigure, still at the head of the
	 * queue: aqm_dequeue hands them out with no AQM decision, and choke/ckcd
	 * never pick them as a comparison victim. */
	uint32_t carried_pkts;
	/* The spec's ecn=1: congestion signals to ECN-capable packets are CE
	 * marks (aqm_mark_ce). 0 for a discipline without the parameter. */
	uint8_t ecn;
	int64_t pv[AQM_MAX_PARAMS]; /* parameter values as validated (stored units) */
	unsigned long long priv_align[]; /* discipline state */
};

static inline void *aqm_priv(const struct aqm_queue *q)
{
	return (void *)q->priv_align;
}

/* The disciplines; aqm_params.c lists them in its registry, one line each. */
extern const struct aqm_ops aqm_droptail_ops, aqm_red_ops, aqm_codel_ops,
	aqm_choke_ops, aqm_ckcd_ops, aqm_bands_ops, aqm_cocoa_ops;
extern const struct aqm_ops aqm_hdcodel_ops;
extern const struct aqm_ops aqm_sred_ops, aqm_fred_ops, aqm_sfb_ops, aqm_care_ops;
extern const struct aqm_ops aqm_fq_codel_ops, aqm_pie_ops, aqm_dualpi2_ops;

/* aqm_params.c */
const struct aqm_ops *aqm_find_ops(const char *name, size_t len);
int aqm_parse_spec(const char *spec, size_t speclen, const struct aqm_ops **ops,
		   struct aqm_args *a, struct aqm_error *err);
/* Create from a spec of known length (bands creates children this way). */
/* aqm.c: a queue's describe output appended at pos (bands describes children) */
size_t aqm_describe_at(const struct aqm_queue *q, char *buf, size_t len, size_t pos);
/* aqm.c: the name and every number parameter as "k=v", but those whose bit
 * (1 << index) is set in skip: the describe of a discipline whose spec may
 * not give two parameters together (dualpi2's step in time or in packets) */
size_t aqm_describe_except(const struct aqm_queue *q, char *buf, size_t len, size_t pos, uint32_t skip);
struct aqm_queue *aqm_create_n(const char *spec, size_t speclen, const struct aqm_env *env,
			       struct aqm_error *err);

/* ---- drops and FIFO helpers --------------------------------------------- */

/* Drop a packet that was never queued (the arriving one). */
static inline void aqm_drop_arriving(struct aqm_queue *q, struct aqm_pkt *pkt,
				     enum aqm_drop_reason why)
{
	q->stats.drops[why]++;
	q->stats.drop_bytes[why] += pkt->len;
	q->env.drop(q->env.ctx, pkt, why);
}

/* Drop a packet the discipline has already unlinked from its queue. */
static inline void aqm_drop_queued(struct aqm_queue *q, struct aqm_pkt *pkt,
				   enum aqm_drop_reason why)
{
	q->qlen_pkts--;
	q->qlen_bytes -= pkt->len;
	aqm_drop_arriving(q, pkt, why);
}

/* Signal congestion (reason why) to pkt by marking it CE instead of dropping
 * it: 1 when marked - the caller keeps the packet and goes on as its law
 * goes on after a drop - or 0 when the caller must drop it (ecn=0, or a
 * Not-ECT packet). As Linux's INET_ECN_set_ce(), a packet already CE counts
 * as marked. aqm_set_ce() is the mark alone, whatever `ecn` says: for a
 * signal that is only ever a mark (fq_codel's ce_threshold). */
static inline int aqm_set_ce(struct aqm_queue *q, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	if ((pkt->ecn & AQM_ECN_CE) == AQM_ECN_NOT_ECT)
		return 0;
	pkt->ecn = AQM_ECN_CE;
	q->stats.marks[why]++;
	q->stats.mark_bytes[why] += pkt->len;
	if (q->env.mark)
		q->env.mark(q->env.ctx, pkt, why);
	return 1;
}

static inline int aqm_mark_ce(struct aqm_queue *q, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	return q->ecn && aqm_set_ce(q, pkt, why);
}

/* The "ecn" row of a discipline's table: the same name, range and words in
 * every discipline that takes it. */
#define AQM_PARAM_ECN { "ecn", "0 drop, 1 mark ECN-capable packets CE", 0, 1, 0, 0, AQM_PARAM_INT, 0 }

static inline void aqm_account_add(struct aqm_queue *q, const struct aqm_pkt *pkt)
{
	q->qlen_pkts++;
	q->qlen_bytes += pkt->len;
}

static inline void aqm_account_remove(struct aqm_queue *q, const struct aqm_pkt *pkt)
{
	q->qlen_pkts--;
	q->qlen_bytes -= pkt->len;
}

/* Singly linked FIFO through pkt->next. */
struct aqm_fifo {
	struct aqm_pkt *head, *tail;
};

static inline void aqm_fifo_push(struct aqm_fifo *f, struct aqm_pkt *pkt)
{
	pkt->next = 0;
	if (f->tail)
		f->tail->next = pkt;
	else
		f->head = pkt;
	f->tail = pkt;
}

static inline struct aqm_pkt *aqm_fifo_pop(struct aqm_fifo *f)
{
	struct aqm_pkt *pkt = f->head;

	if (pkt) {
		f->head = pkt->next;
		if (!f->head)
			f->tail = 0;
		pkt->next = 0;
	}
	return pkt;
}

/* A FIFO queue of at most `limit` packets, as droptail keeps it (and the
 * disciplines that decide only on arrival: sred, sfb, care): queue the
 * arrival or drop it (overflow); hand out the head; put back a carried one. */
static inline int aqm_fifo_enqueue(struct aqm_queue *q, struct aqm_fifo *f, struct aqm_pkt *pkt,
				   uint32_t limit)
{
	if (q->qlen_pkts >= limit) {
		aqm_drop_arriving(q, pkt, AQM_DROP_OVERFLOW);
		return AQM_DROPPED;
	}
	aqm_fifo_push(f, pkt);
	aqm_account_add(q, pkt);
	return AQM_QUEUED;
}

static inline struct aqm_pkt *aqm_fifo_dequeue(struct aqm_queue *q, struct aqm_fifo *f)
{
	struct aqm_pkt *pkt = aqm_fifo_pop(f);

	if (pkt)
		aqm_account_remove(q, pkt);
	return pkt;
}

static inline int aqm_fifo_requeue(struct aqm_queue *q, struct aqm_fifo *f, struct aqm_pkt *pkt,
				   uint32_t limit)
{
	if (q->qlen_pkts >= limit)
		return -1;
	aqm_fifo_push(f, pkt);
	aqm_account_add(q, pkt);
	return 0;
}

/* A 32-bit finalizer (murmur3's): every input bit moves about half the
 * output bits, so flow hashes that differ in few bits (a replay's flow ids
 * 1, 2, 3) still spread over bins or buckets. */
static inline uint32_t aqm_mix32(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* Uniform integer in [0, n) from a 32-bit random number (multiply-shift). */
static inline uint32_t aqm_random_below(struct aqm_queue *q, uint32_t n)
{
	return (uint32_t)(((uint64_t)q->env.random_u32(q->env.ctx) * n) >> 32);
}

/* ---- a bounded text writer (no libc snprintf) ---------------------------- */

size_t aqm_put_str(char *buf, size_t len, size_t pos, const char *s);
size_t aqm_put_strn(char *buf, size_t len, size_t pos, const char *s, size_t n);
size_t aqm_put_u64(char *buf, size_t len, size_t pos, uint64_t v);
size_t aqm_put_i64(char *buf, size_t len, size_t pos, int64_t v);
/* v / 10^decimals printed as a decimal ("2000", 6 -> "0.002") */
size_t aqm_put_fixed(char *buf, size_t len, size_t pos, int64_t v, unsigned decimals);
/* " key=<u64>" */
size_t aqm_put_kv(char *buf, size_t len, size_t pos, const char *key, uint64_t v);
size_t aqm_put_kfixed(char *buf, size_t len, size_t pos, const char *key, int64_t v,
		      unsigned decimals);
size_t aqm_put_kvi(char *buf, size_t len, size_t pos, const char *key, int64_t v);

/* Errors (aqm_params.c). AQM_ERR_TEXT(e) is the message buffer for the
 * aqm_put_* writers; aqm_err() sets the code and the message "<a><b><c>";
 * aqm_err_at() the code, discipline and parameter indexes (-1: none). */
#define AQM_ERR_TEXT(e) (e)->text, sizeof((e)->text)
void aqm_err_clear(struct aqm_error *err);
void aqm_err(struct aqm_error *err, enum aqm_err_code code, const char *a, const char *b, const char *c);
void aqm_err_at(struct aqm_error *err, enum aqm_err_code code, const struct aqm_ops *ops, int param,
		int other);
/* A refusal that a discipline's init finds: the code, the parameters (other:
 * -1 for none) and the message "<disc>: parameter '<name>' <what>" (what names
 * the other parameter, if any). */
void aqm_err_param(struct aqm_error *err, enum aqm_err_code code, const struct aqm_ops *ops, int param,
		   int other, const char *what);
int aqm_param_index(const struct aqm_ops *ops, const char *name);
/* aqm.c: empty the discipline's estimators after a flush (ops->restart) */
void aqm_restart(struct aqm_queue *q);

size_t aqm_strlen(const char *s);
int aqm_streqn(const char *a, size_t alen, const char *b); /* a[0..alen) == b */
void aqm_zero(void *p, size_t n);

#endif
