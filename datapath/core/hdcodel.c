/* hdcodel.c - CoDel that drops the most bandwidth-consuming connection's
 * packets and spares the others' with probability 1 - p: the dynamic method
 * of Hanai, Yamaguchi, Kobayashi, "Modified Controlling Queue Delay for TCP
 * Fairness Improvement" (seed 003), and its Static baseline.
 *
 * The queue is one FIFO under CoDel's control law (codel_law.h, as codel).
 * At each of the law's drop decisions (Sec. IV-A): "a packet in the most
 * bandwidth-consuming connection that exceeds the target is always dropped.
 * An exceeding packet in the other connections is dropped with dropping
 * probability p."
 *
 * The connection estimate (Sec. IV-A, Fig. 8): "The network element records
 * the connection information of a packet every rec_int packets receiving ...
 * stores the latest hist_len records. Then, the most frequently stored
 * connection in the log is extracted every stat_int packets receiving." Ties
 * and the start follow the controller's ModeOfHistoryEstimator
 * (coex/heavy_hitters.py), checked packet by packet against it in
 * tests/datapath/test_hdcodel.py: no connection is the heavy one before the
 * first statistics point or while the history is empty; the mode is taken
 * over the records there are (the history need not be full); a tie keeps the
 * current estimate if it is among the tied, else goes to the connection
 * recorded most recently.
 *
 * Every choice the paper leaves open is a parameter or a decision in
 * docs/hdcodel.md: which drops are thinned (all the law's), spare=advance|hold,
 * thin=random|counter (one counter for all connections), key=host|flow.
 */
#include "codel_law.h"

enum { P_LIMIT, P_TARGET, P_INTERVAL, P_P, P_KEY, P_MODE, P_HEAVY_KEY, P_REC_INT, P_HIST_LEN,
       P_STAT_INT, P_THIN, P_SPARE, P_ECN, NPARAMS };
_Static_assert(NPARAMS <= AQM_MAX_PARAMS, "the table fits struct aqm_args");

#define PPM 1000000 /* p is stored in millionths */

static const struct aqm_param hd_params[NPARAMS] = {
	/* sch_codel's default limit: the paper's CoDel ran on Linux 3.17.4 (Table II) */
	[P_LIMIT] = { "limit", "packets", 1, 1000000, 1000, 0, AQM_PARAM_INT, 0 },
	[P_TARGET] = CODEL_LAW_PARAM_TARGET,
	[P_INTERVAL] = CODEL_LAW_PARAM_INTERVAL,
	/* p = 1/3: "the probability provided the best fairness" (Sec. V) */
	[P_P] = { "p", "probability", 0, PPM, 333333, 6, AQM_PARAM_INT, 0 },
	[P_KEY] = { "key", "host|flow", 0, 0, 0, 0, AQM_PARAM_TEXT, "host" },
	[P_MODE] = { "mode", "dynamic|static", 0, 0, 0, 0, AQM_PARAM_TEXT, "dynamic" },
	[P_HEAVY_KEY] = { "heavy_key", "key", 0, 4294967295LL, 0, 0, AQM_PARAM_INT, 0 },
	/* the controller's detector's defaults (coex/heavy_hitters.py): the paper gives none */
	[P_REC_INT] = { "rec_int", "packets", 1, 1000000, 1, 0, AQM_PARAM_INT, 0 },
	[P_HIST_LEN] = { "hist_len", "records", 1, 65536, 128, 0, AQM_PARAM_INT, 0 },
	[P_STAT_INT] = { "stat_int", "packets", 1, 1000000, 32, 0, AQM_PARAM_INT, 0 },
	[P_THIN] = { "thin", "random|counter", 0, 0, 0, 0, AQM_PARAM_TEXT, "random" },
	[P_SPARE] = { "spare", "advance|hold", 0, 0, 0, 0, AQM_PARAM_TEXT, "advance" },
	/* ecn=1: a drop the thinned decision carries out is a CE mark for an
	 * ECN-capable packet, the law advancing as codel.c's does; the heavy
	 * connection's drops stay drops (they police it) */
	[P_ECN] = AQM_PARAM_ECN,
};

/* The words of each TEXT parameter; the index is what init stores. */
static const char *const key_words[] = { "host", "flow", 0 };
static const char *const mode_words[] = { "dynamic", "static", 0 };
static const char *const thin_words[] = { "random", "counter", 0 };
static const char *const spare_words[] = { "advance", "hold", 0 };

/* Records per connection in the history: open addressing, at most half full,
 * n == 0 marks a free slot. */
struct hd_count {
	uint32_t key, n;
};

/* Seed 003's mode of history. */
struct hd_est {
	uint32_t *ring;          /* the latest hist_len records; the next goes to ring[pos] */
	struct hd_count *counts; /* mask + 1 slots */
	uint32_t *keys_with;     /* keys_with[n]: keys with n records (n = 1..hist_len) */
	uint32_t max_n;          /* the largest n with keys_with[n] > 0: the mode's count */
	uint32_t mask, shift;
	uint32_t hist_len, nrec, pos;
	uint32_t rec_int, stat_int, to_rec, to_stat; /* arrivals left to the next record / decision */
	uint32_t mode_count;     /* records of the heavy connection at the last decision */
	uint64_t stat_points;
};

struct hdcodel {
	struct codel_fifo cf; /* first: codel's carry-over serves hdcodel too */
	uint8_t key, mode, thin, spare; /* indexes into the word lists */
	uint8_t have_heavy;
	uint32_t heavy_key;
	uint64_t p_q32;          /* p * 2^32 (2^32: always drop) */
	uint32_t period, counter; /* thin=counter: drop one in `period` (0: never) */
	uint64_t heavy_drops, thinned_drops, thinned_marks, spared;
	struct hd_est est;
};

enum { KEY_HOST, KEY_FLOW };
enum { MODE_DYNAMIC, MODE_STATIC };
enum { THIN_RANDOM, THIN_COUNTER };
enum { SPARE_ADVANCE, SPARE_HOLD };

static inline uint32_t key_of(const struct hdcodel *h, const struct aqm_pkt *pkt)
{
	return h->key == KEY_HOST ? pkt->host_hash : pkt->flow_hash;
}

/* ---- the history's counts ------------------------------------------------ */

static uint32_t home_slot(const struct hd_est *e, uint32_t key)
{
	return (key * 2654435761u) >> e->shift; /* Fibonacci hashing: the top bits */
}

static uint32_t find_slot(const struct hd_est *e, uint32_t key)
{
	uint32_t i = home_slot(e, key);

	while (e->counts[i].n && e->counts[i].key != key)
		i = (i + 1) & e->mask;
	return i;
}

static uint32_t records_of(const struct hd_est *e, uint32_t key)
{
	return e->counts[find_slot(e, key)].n;
}

/* One record fewer of a key that has one; a count that reaches 0 leaves the
 * table by backward shift, so lookups never need tombstones. */
static void count_remove(struct hd_est *e, uint32_t key)
{
	uint32_t hole = find_slot(e, key), j = hole;
	uint32_t n = e->counts[hole].n--;

	/* the mode's count falls by one when its last key goes to n - 1 */
	if (!--e->keys_with[n] && n == e->max_n)
		e->max_n--;
	if (n > 1) {
		e->keys_with[n - 1]++;
		return;
	}
	for (;;) {
		uint32_t home;

		j = (j + 1) & e->mask;
		if (!e->counts[j].n)
			break;
		home = home_slot(e, e->counts[j].key);
		/* the entry may fill the hole if the hole lies between its home and j */
		if (((j - home) & e->mask) >= ((j - hole) & e->mask)) {
			e->counts[hole] = e->counts[j];
			e->counts[j].n = 0;
			hole = j;
		}
	}
}

static void record(struct hd_est *e, uint32_t key)
{
	uint32_t oldest = e->ring[e->pos], i;

	e->ring[e->pos] = key;
	e->pos = e->pos + 1 == e->hist_len ? 0 : e->pos + 1;
	if (e->nrec < e->hist_len)
		e->nrec++;
	else if (oldest == key)
		return; /* it leaves as it arrives (often, for the heavy one): counts stay */
	else
		count_remove(e, oldest);
	i = find_slot(e, key);
	e->counts[i].key = key;
	if (e->counts[i].n)
		e->keys_with[e->counts[i].n]--;
	if (++e->counts[i].n > e->max_n)
		e->max_n = e->counts[i].n;
	e->keys_with[e->counts[i].n]++;
}

/* A statistics point: the mode of the history becomes the heavy connection.
 * Its count is kept as records come and go (max_n), so a decision costs one
 * lookup while the current estimate stays the mode; otherwise the walk from
 * the newest record back stops at the first key with that count, the most
 * recently recorded of the tied. */
static void decide(struct hdcodel *h)
{
	struct hd_est *e = &h->est;
	uint32_t i = e->pos;

	e->stat_points++;
	e->mode_count = e->max_n;
	if (!e->max_n) {
		h->have_heavy = 0; /* nothing recorded yet: no connection is heavy */
		return;
	}
	if (h->have_heavy && records_of(e, h->heavy_key) == e->max_n)
		return; /* a tie keeps the current estimate */
	do
		i = i ? i - 1 : e->hist_len - 1;
	while (records_of(e, e->ring[i]) != e->max_n);
	h->heavy_key = e->ring[i];
	h->have_heavy = 1;
}

static void observe(struct hdcodel *h, uint32_t key)
{
	struct hd_est *e = &h->est;

	if (!--e->to_rec) {
		e->to_rec = e->rec_int;
		record(e, key);
	}
	if (!--e->to_stat) {
		e->to_stat = e->stat_int;
		decide(h);
	}
}

/* ---- configuration --------------------------------------------------------- */

static void param_err(struct aqm_error *err, unsigned param, const char *what)
{
	/* each of these clashes with the mode chosen */
	aqm_err_param(err, AQM_ERR_CONFLICT, &aqm_hdcodel_ops, (int)param, P_MODE, what);
}

/* A TEXT parameter's word, as its index in words; -1 (err set) if none. */
static int pick_word(const struct aqm_args *a, unsigned param, const char *const *words,
		     struct aqm_error *err)
{
	int i;
	size_t pos;

	for (i = 0; words[i]; i++)
		if (aqm_streqn(a->text[param], a->textlen[param], words[i]))
			return i;
	aqm_err_at(err, AQM_ERR_VALUE, &aqm_hdcodel_ops, (int)param, -1);
	pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "hdcodel: parameter '");
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, hd_params[param].name);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "' = '");
	pos = aqm_put_strn(AQM_ERR_TEXT(err), pos, a->text[param], a->textlen[param]);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "': expected ");
	aqm_put_str(AQM_ERR_TEXT(err), pos, hd_params[param].unit);
	return -1;
}

static int est_init(struct aqm_queue *q, struct hd_est *e, const struct aqm_args *a,
		    struct aqm_error *err)
{
	uint32_t slots = 2, bits = 1;

	e->rec_int = e->to_rec = (uint32_t)a->v[P_REC_INT];
	e->stat_int = e->to_stat = (uint32_t)a->v[P_STAT_INT];
	e->hist_len = (uint32_t)a->v[P_HIST_LEN];
	while (slots < 2 * e->hist_len) { /* at most half full */
		slots *= 2;
		bits++;
	}
	e->mask = slots - 1;
	e->shift = 32 - bits;
	e->ring = q->env.alloc(q->env.ctx, e->hist_len * sizeof(*e->ring));
	e->counts = q->env.alloc(q->env.ctx, slots * sizeof(*e->counts));
	e->keys_with = q->env.alloc(q->env.ctx, (e->hist_len + 1) * sizeof(*e->keys_with));
	if (!e->ring || !e->counts || !e->keys_with) {
		aqm_err(err, AQM_ERR_NOMEM, "hdcodel: out of memory for hist_len records", 0, 0);
		return -1;
	}
	return 0;
}

static void hd_release(struct aqm_queue *q)
{
	struct hdcodel *h = aqm_priv(q);

	if (h->est.ring)
		q->env.free(q->env.ctx, h->est.ring);
	if (h->est.counts)
		q->env.free(q->env.ctx, h->est.counts);
	if (h->est.keys_with)
		q->env.free(q->env.ctx, h->est.keys_with);
}

static int hd_init(struct aqm_queue *q, const struct aqm_args *a, struct aqm_error *err)
{
	struct hdcodel *h = aqm_priv(q);
	int key = pick_word(a, P_KEY, key_words, err);
	int mode = key < 0 ? -1 : pick_word(a, P_MODE, mode_words, err);
	int thin = mode < 0 ? -1 : pick_word(a, P_THIN, thin_words, err);
	int spare = thin < 0 ? -1 : pick_word(a, P_SPARE, spare_words, err);
	uint64_t p = (uint64_t)a->v[P_P];
	unsigned i;

	if (spare < 0)
		return -1;
	if (mode == MODE_STATIC && !(a->given & (1u << P_HEAVY_KEY))) {
		param_err(err, P_HEAVY_KEY, "is needed by mode=static: the key it penalizes");
		return -1;
	}
	if (mode == MODE_DYNAMIC && (a->given & (1u << P_HEAVY_KEY))) {
		param_err(err, P_HEAVY_KEY, "is for mode=static only (dynamic estimates it)");
		return -1;
	}
	for (i = P_REC_INT; mode == MODE_STATIC && i <= P_STAT_INT; i++)
		if (a->given & (1u << i)) {
			param_err(err, i, "is for mode=dynamic only (static has no estimator)");
			return -1;
		}
	h->key = (uint8_t)key;
	h->mode = (uint8_t)mode;
	h->thin = (uint8_t)thin;
	h->spare = (uint8_t)spare;
	h->cf.limit = (uint32_t)a->v[P_LIMIT];
	codel_law_init(&h->cf.law, a->v[P_TARGET], a->v[P_INTERVAL]);
	h->p_q32 = (p << 32) / PPM;
	/* "once per 1/p packets using a loop counter": 1/p to the nearest integer */
	h->period = p ? (uint32_t)((PPM + p / 2) / p) : 0;
	if (mode == MODE_STATIC) {
		h->heavy_key = (uint32_t)a->v[P_HEAVY_KEY];
		h->have_heavy = 1;
		return 0;
	}
	if (est_init(q, &h->est, a, err)) {
		hd_release(q); /* aqm_create frees only the queue after a failed init */
		return -1;
	}
	return 0;
}

/* ---- the packet path -------------------------------------------------------- */

/* Every arrival is observed first, also one the limit then drops: "every
 * rec_int packets receiving" counts what the connections send. */
static int hd_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns)
{
	struct hdcodel *h = aqm_priv(q);

	(void)now_ns;
	if (h->mode == MODE_DYNAMIC)
		observe(h, key_of(h, pkt));
	return codel_fifo_enqueue(q, &h->cf, pkt);
}

/* Another connection's drop decision: carried out with probability p. */
static int thin_drops(struct aqm_queue *q, struct hdcodel *h)
{
	if (h->thin == THIN_COUNTER) {
		if (!h->period || ++h->counter < h->period)
			return 0;
		h->counter = 0;
		return 1;
	}
	if (h->p_q32 >> 32) /* p = 1: no draw, so the run is plain CoDel's */
		return 1;
	return h->p_q32 && q->env.random_u32(q->env.ctx) < h->p_q32;
}

static enum codel_verdict hd_verdict(struct aqm_queue *q, struct aqm_pkt *pkt)
{
	struct hdcodel *h = aqm_priv(q);

	if (h->have_heavy && key_of(h, pkt) == h->heavy_key) {
		/* "always dropped", ECN or not: the heavy connection is being
		 * policed, and one that ignores CE must still feel it */
		h->heavy_drops++;
	} else if (thin_drops(q, h)) {
		if (aqm_mark_ce(q, pkt, AQM_DROP_DELAY)) {
			h->thinned_marks++;
			return CODEL_SENT_AS_DROP;
		}
		h->thinned_drops++;
	} else {
		h->spared++;
		return h->spare == SPARE_HOLD ? CODEL_SENT_DUE : CODEL_SENT_AS_DROP;
	}
	aqm_drop_arriving(q, pkt, AQM_DROP_DELAY);
	return CODEL_DROPPED;
}

static struct aqm_pkt *hd_dequeue(struct aqm_queue *q, uint64_t now_ns)
{
	struct hdcodel *h = aqm_priv(q);

	return codel_law_dequeue(q, &h->cf.law, now_ns, &h->cf.fifo, codel_law_pop_fifo, hd_verdict);
}

/* ---- reporting ---------------------------------------------------------------- */

static size_t hd_xstats(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct hdcodel *h = aqm_priv(q);

	if (h->have_heavy) {
		pos = aqm_put_kv(buf, len, pos, "heavy_key", h->heavy_key);
	} else {
		pos = aqm_put_str(buf, len, pos, " heavy_key=none");
	}
	pos = aqm_put_kv(buf, len, pos, "mode_count", h->est.mode_count);
	pos = aqm_put_kv(buf, len, pos, "records", h->est.nrec);
	pos = aqm_put_kv(buf, len, pos, "stat_points", h->est.stat_points);
	pos = aqm_put_kv(buf, len, pos, "heavy_drops", h->heavy_drops);
	pos = aqm_put_kv(buf, len, pos, "thinned_drops", h->thinned_drops);
	pos = aqm_put_kv(buf, len, pos, "thinned_marks", h->thinned_marks);
	pos = aqm_put_kv(buf, len, pos, "spared", h->spared);
	return aqm_codel_law_xstats(&h->cf.law, buf, len, pos);
}

/* Every parameter that applies to the mode, so the description parses back
 * to itself (heavy_key is refused in dynamic mode, the estimator's in static). */
static size_t hd_describe(const struct aqm_queue *q, char *buf, size_t len, size_t pos)
{
	const struct hdcodel *h = aqm_priv(q);
	const char *word[NPARAMS] = {
		[P_KEY] = key_words[h->key], [P_MODE] = mode_words[h->mode],
		[P_THIN] = thin_words[h->thin], [P_SPARE] = spare_words[h->spare],
	};
	unsigned i;

	pos = aqm_put_str(buf, len, pos, "hdcodel");
	for (i = 0; i < NPARAMS; i++) {
		if (h->mode == MODE_DYNAMIC ? i == P_HEAVY_KEY : (i >= P_REC_INT && i <= P_STAT_INT))
			continue;
		pos = aqm_put_str(buf, len, pos, " ");
		pos = aqm_put_str(buf, len, pos, hd_params[i].name);
		pos = aqm_put_str(buf, len, pos, "=");
		if (word[i])
			pos = aqm_put_str(buf, len, pos, word[i]);
		else
			pos = aqm_put_fixed(buf, len, pos, q->pv[i], hd_params[i].decimals);
	}
	return pos;
}

/* CoDel's law restarts; the estimator's history of the traffic stays. */
static void hd_restart(struct aqm_queue *q)
{
	codel_law_restart(&((struct hdcodel *)aqm_priv(q))->cf.law);
}

const struct aqm_ops aqm_hdcodel_ops = {
	.name = "hdcodel",
	.params = hd_params,
	.nparams = NPARAMS,
	.priv_size = sizeof(struct hdcodel),
	.init = hd_init,
	.enqueue = hd_enqueue,
	.dequeue = hd_dequeue,
	/* carried-over packets are queued, not observed: the estimate starts
	 * afresh with the new queue, like all discipline state */
	.pop_raw = aqm_codel_fifo_pop_raw,
	.requeue = aqm_codel_fifo_requeue,
	.xstats = hd_xstats,
	.describe = hd_describe,
	.release = hd_release,
	.restart = hd_restart,
};
