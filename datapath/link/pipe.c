/* pipe.c - one direction of the emulated link: queue discipline, serializer
 * and delay line (the model is described in link.h). */
#define _GNU_SOURCE
#include "link.h"
#include "host_key.h"
#include "units.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- histograms ------------------------------------------------------ */

static unsigned hist_index(uint64_t v)
{
	unsigned e;

	if (v < 16)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v); /* >= 4 */
	return 16u + (e - 4u) * 8u + (unsigned)((v >> (e - 3u)) & 7u);
}

static void hist_bounds(unsigned idx, uint64_t *lo, uint64_t *width)
{
	unsigned e, m;

	if (idx < 16) {
		*lo = idx;
		*width = 1;
		return;
	}
	e = (idx - 16u) / 8u + 4u;
	m = (idx - 16u) % 8u;
	*lo = (uint64_t)(8u + m) << (e - 3u);
	*width = 1ull << (e - 3u);
}

void hist_add(struct ns_hist *h, uint64_t v)
{
	h->count++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
	h->bucket[hist_index(v)]++;
}

uint64_t hist_percentile(const struct ns_hist *h, double p)
{
	uint64_t rank, seen = 0, lo, width, mid;

	if (h->count == 0)
		return 0;
	rank = (uint64_t)(p * (double)h->count);
	if (rank >= h->count)
		rank = h->count - 1;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen > rank) {
			hist_bounds(i, &lo, &width);
			mid = lo + width / 2;
			return mid > h->max ? h->max : mid;
		}
	}
	return h->max;
}

const uint32_t late_edges_us[LATE_BUCKETS - 1] = {10, 50, 100, 250, 500, 1000, 2000, 5000, 10000, 50000};

void late_hist_add(struct late_hist *h, uint64_t late_ns)
{
	unsigned i = 0;

	COUNTER_ADD(h->count, 1);
	COUNTER_ADD(h->sum_ns, late_ns);
	if (late_ns > h->max_ns)
		__atomic_store_n(&h->max_ns, late_ns, __ATOMIC_RELAXED);
	while (i < LATE_BUCKETS - 1 && late_ns >= late_edges_us[i] * 1000ull)
		i++;
	COUNTER_ADD(h->bucket[i], 1);
}

/* ---- packet pool ----------------------------------------------------- */

struct pkt *pool_get(struct pkt_pool *pool)
{
	struct pkt *p = pool->free_list;

	if (p) {
		pool->free_list = (struct pkt *)p->aqm.next;
		pool->nfree--;
		p->aqm.next = NULL;
	}
	return p;
}

void pool_put(struct pkt_pool *pool, struct pkt *p)
{
	p->aqm.next = (struct aqm_pkt *)pool->free_list;
	pool->free_list = p;
	pool->nfree++;
}

/* ---- --capture (capture.h) ---------------------------------------------- */

/* p's frame as event ev at t; the check is here so that every call site
 * costs one test when capture is off. */
static inline void capture_pkt(struct link_dir *d, enum cap_event ev, uint64_t t, const struct pkt *p,
			       const char *reason, int64_t sojourn_ns)
{
	struct cap_rec r;

	if (!d->link->cap)
		return;
	r.t_ns = t;
	r.data = p->data;
	r.avail = r.len = p->aqm.len;
	r.reason = reason;
	r.sojourn_ns = sojourn_ns;
	r.ce = ev == CAP_DEQUEUE && p->aqm.ecn == AQM_ECN_CE;
	capture_record(d->link->cap, d->index, ev, &r);
}

/* A drop or mark the core made during the call under way (d->event_ns): a
 * frame that was queued says how long it had waited, so a reader can take
 * it out of the queue it keeps; the arriving one never was in it. */
static void capture_decision(struct link_dir *d, enum cap_event ev, const struct pkt *p, int why)
{
	int64_t sojourn = -1;

	if (!d->link->cap)
		return;
	if (p != d->arriving)
		sojourn = d->event_ns > p->arrival_ns ? (int64_t)(d->event_ns - p->arrival_ns) : 0;
	capture_pkt(d, ev, d->event_ns, p, drop_reason_key(why), sojourn);
}

void dir_capture_discard(struct link_dir *d, uint64_t t, const uint8_t *data, uint32_t avail,
			 uint32_t len, const char *reason)
{
	struct cap_rec r = {.t_ns = t, .data = data, .avail = avail, .len = len, .reason = reason,
			    .sojourn_ns = -1, .ce = 0};

	if (d->link->cap)
		capture_record(d->link->cap, d->index, CAP_DISCARD, &r);
}

/* ---- the core's environment (host/aqm_host.c) -------------------------- */

static void dir_drop(void *owner, struct aqm_pkt *ap, enum aqm_drop_reason why)
{
	struct link_dir *d = owner;
	struct pkt *p = (struct pkt *)ap;
	struct flow_stats *f = &d->flows[p->flow_idx];

	if ((unsigned)why < AQM_DROP_REASONS) {
		d->drops[why]++;
		f->drops[why]++;
	}
	f->drop_bytes += ap->len;
	capture_decision(d, CAP_DROP, p, why);
	pool_put(&d->link->pool, p);
}

/* The core marked ap CE instead of dropping it (ecn=1): counted here, the
 * frame itself rewritten when it is sent (serve_until). */
static void dir_mark(void *owner, struct aqm_pkt *ap, enum aqm_drop_reason why)
{
	struct link_dir *d = owner;
	struct pkt *p = (struct pkt *)ap;

	if ((unsigned)why < AQM_DROP_REASONS) {
		d->marks[why]++;
		d->flows[p->flow_idx].marks[why]++;
	}
	capture_decision(d, CAP_MARK, p, why);
}

/* ---- flows ----------------------------------------------------------- */

static uint32_t flow_lookup(struct link_dir *d, const struct frame_info *fi)
{
	uint32_t mask = FLOW_TABLE_SIZE - 1;
	uint32_t i = fi->flow_hash & mask;

	for (unsigned probe = 0; probe < 32; probe++, i = (i + 1) & mask) {
		struct flow_stats *f = &d->flows[i];
		if (f->used && f->hash == fi->flow_hash)
			return i;
		if (!f->used) {
			f->used = 1;
			f->hash = fi->flow_hash;
			f->key = fi->key;
			f->dscp = fi->dscp;
			d->nflows++;
			return i;
		}
	}
	return FLOW_OTHER;
}

/* ---- direction ------------------------------------------------------- */

int dir_init_models(struct link_dir *d, char *err, size_t errlen)
{
	const struct link_config *cfg = &d->link->cfg;
	struct aqm_queue *rebuilt;
	char why[256];

	loss_seed(&d->loss, (cfg->seed ^ 0x6c6f7373ull) + (uint64_t)d->index); /* "loss" */
	if (cfg->loss[d->index] && loss_parse(cfg->loss[d->index], &d->loss, err, errlen) < 0)
		return -1;
	if (!cfg->trace_path[d->index])
		return 0;
	if (trace_load(&d->trace, cfg->trace_path[d->index], err, errlen) < 0)
		return -1;
	if (check_rate(trace_rate_bps(&d->trace), why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: its average: %.200s", cfg->trace_path[d->index], why);
		return -1;
	}
	/* The disciplines follow its average, as a link's rate (a discipline
	 * given no rate_bps: dir_prepare_rate). */
	if (dir_prepare_rate(d, trace_rate_bps(&d->trace), &rebuilt, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "the discipline refuses the trace's average rate (%llu bit/s): %.200s",
			 (unsigned long long)trace_rate_bps(&d->trace), why);
		return -1;
	}
	dir_commit_rate(d, trace_rate_bps(&d->trace), rebuilt);
	return 0;
}

int dir_init(struct link *l, int index, char *err, size_t errlen)
{
	struct link_dir *d = &l->dir[index];
	uint32_t cap = 1;

	memset(d, 0, sizeof(*d));
	d->link = l;
	d->index = index;
	d->name = index == DIR_AB ? "ab" : "ba";
	d->rx_fd = d->tx_fd = -1;
	d->rate_bps = l->cfg.rate_bps[index];
	d->delay_ns = l->cfg.delay_ns[index];
	/* Direction ab draws what ckcd-replay --seed draws; ba its own stream. */
	aqm_host_init(&d->host, l->cfg.seed + (uint64_t)index, dir_drop, d);
	/* --release-lateness has a stream of its own ("late"), so turning it
	 * on leaves the discipline's draws, and ckcd-replay's, as they were. */
	aqm_rng_seed(&d->late_rng, (l->cfg.seed ^ 0x6c617465ull) + (uint64_t)index);
	d->host.mark = dir_mark;
	d->env = aqm_host_env(&d->host, d->rate_bps);
	while (cap < l->cfg.pool_pkts)
		cap <<= 1;
	d->line = calloc(cap, sizeof(*d->line));
	d->freed = calloc(cap, sizeof(*d->freed));
	d->flows = calloc(FLOW_TABLE_SIZE + 1, sizeof(*d->flows));
	d->samples = calloc(SAMPLE_RING, sizeof(*d->samples));
	d->tx_wake_fd = -1;
	if (!d->line || !d->freed || !d->flows || !d->samples) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	d->line_mask = cap - 1;
	d->flows[FLOW_OTHER].used = 1;
	if (host_key_resolve(l->cfg.qdisc[index], l->hash_seed, d->spec, sizeof(d->spec), err, errlen) < 0)
		return -1;
	d->q = aqm_create(d->spec, &d->env, err, errlen);
	return d->q ? 0 : -1;
}

void dir_destroy(struct link_dir *d)
{
	if (d->q)
		aqm_destroy(d->q);
	d->q = NULL;
	trace_free(&d->trace);
	free(d->line);
	free(d->freed);
	free(d->flows);
	free(d->samples);
	d->freed = NULL;
	d->line = NULL;
	d->flows = NULL;
	d->samples = NULL;
}

int dir_set_qdisc(struct link_dir *d, const char *spec, char *err, size_t errlen)
{
	char resolved[sizeof(d->spec)];

	if (host_key_resolve(spec, d->link->hash_seed, resolved, sizeof(resolved), err, errlen) < 0)
		return -1;
	d->event_ns = now_ns(); /* the time of what it drops (flush, overflow) */
	if (aqm_reconfigure(&d->q, resolved, err, errlen) < 0)
		return -1;
	memcpy(d->spec, resolved, sizeof(resolved));
	return 0;
}

/* The discipline as it would be at rate_bps, built but not in use: *rebuilt
 * is NULL when the rate does not change it (no rate_bps its spec leaves out,
 * so it does not follow the link). -1 (err set) when the spec is refused at
 * that rate. Changes nothing: a set_link over both directions prepares both
 * before it commits either. */
int dir_prepare_rate(struct link_dir *d, uint64_t rate_bps, struct aqm_queue **rebuilt,
		     char *err, size_t errlen)
{
	struct aqm_env env = d->env;
	struct aqm_queue *trial;
	char now[QDISC_SPEC_MAX], then[QDISC_SPEC_MAX];

	*rebuilt = NULL;
	env.rate_bps = rate_bps;
	trial = aqm_create(d->spec, &env, err, errlen);
	if (!trial)
		return -1;
	aqm_describe(trial, then, sizeof(then));
	aqm_describe(d->q, now, sizeof(now));
	if (strcmp(now, then) == 0)
		aqm_destroy(trial);
	else
		*rebuilt = trial;
	return 0;
}

/* The new rate from the next frame on, with the discipline dir_prepare_rate()
 * rebuilt for it (queued packets carried over, as set_qdisc does). Cannot fail. */
void dir_commit_rate(struct link_dir *d, uint64_t rate_bps, struct aqm_queue *rebuilt)
{
	d->env.rate_bps = rate_bps;
	d->event_ns = now_ns(); /* the time of what a rebuilt discipline drops */
	aqm_set_env_rate(d->q, rate_bps);
	if (rebuilt)
		aqm_replace(&d->q, rebuilt);
	d->rate_bps = rate_bps;
}

uint32_t dir_line_len(const struct link_dir *d)
{
	return d->line_tail - __atomic_load_n(&d->line_head, __ATOMIC_RELAXED);
}

void dir_reclaim(struct link_dir *d)
{
	uint32_t tail = __atomic_load_n(&d->freed_tail, __ATOMIC_ACQUIRE);

	while (d->freed_head != tail)
		pool_put(&d->link->pool, d->freed[d->freed_head++ & d->line_mask]);
}

/* Into the queue at t (the queue served up to t). */
static void enqueue_at(struct link_dir *d, struct pkt *p, uint64_t t)
{
	p->arrival_ns = t;
	/* An idle serializer cannot start in the past. The queue was served
	 * up to t, so an empty queue means the link has been idle. */
	if (d->free_ns < t && aqm_qlen_pkts(d->q) == 0)
		d->free_ns = t;
	d->event_ns = t;
	d->arriving = p;
	if (aqm_enqueue(d->q, &p->aqm, t) == AQM_QUEUED)
		capture_pkt(d, CAP_ENQUEUE, t, p, NULL, -1);
	d->arriving = NULL;
}

void dir_arrive(struct link_dir *d, struct pkt *p, uint32_t len, uint64_t t)
{
	const struct link_config *cfg = &d->link->cfg;
	struct frame_info fi;
	struct flow_stats *f;
	int h;

	frame_classify(p->data, len, d->link->hash_seed, &fi);
	p->flow_idx = flow_lookup(d, &fi);
	f = &d->flows[p->flow_idx];
	f->rx_pkts++;
	f->rx_bytes += len;
	d->rx_frames++;
	d->rx_bytes += len;

	p->aqm.next = NULL;
	p->aqm.flow_hash = fi.flow_hash;
	p->aqm.host_hash = fi.host_hash;
	p->aqm.len = len;
	p->aqm.dscp = fi.dscp;
	p->aqm.ecn = fi.ecn;
	p->aqm.band = 0;
	p->aqm.frame = p->data;
	h = cfg->n_host_delay ? host_delay_find(cfg->host_delay, cfg->n_host_delay, &fi.key) : -1;
	if (h >= 0 && cfg->host_delay[h].delay_ns > 0) {
		/* One host, one constant delay: its line stays in due order. */
		struct access_line *a = &d->access[h];

		if (a->count >= d->link->pool.count / HOST_LINE_SHARE) {
			d->host_delay_drops++;
			dir_capture_discard(d, t, p->data, len, len, "host_delay");
			pool_put(&d->link->pool, p);
			return;
		}
		a->count++;
		p->arrival_ns = t + cfg->host_delay[h].delay_ns;
		if (a->tail)
			a->tail->aqm.next = &p->aqm;
		else
			a->head = p;
		a->tail = p;
		d->access_pkts++;
		return;
	}
	enqueue_at(d, p, t);
	dir_serve(d, t);
}

/* The host line whose head is due first, or -1 when every line is empty. */
static int access_first(const struct link_dir *d)
{
	int best = -1;

	for (unsigned i = 0; i < d->link->cfg.n_host_delay && d->access_pkts; i++) {
		const struct pkt *p = d->access[i].head;
		if (p && (best < 0 || p->arrival_ns < d->access[best].head->arrival_ns))
			best = (int)i;
	}
	return best;
}

/* When the first host-delayed frame is due, or UINT64_MAX. */
static uint64_t access_next_due(const struct link_dir *d)
{
	int h = access_first(d);

	return h < 0 ? UINT64_MAX : d->access[h].head->arrival_ns;
}

static uint64_t tx_time_ns(const struct link_dir *d, uint32_t len)
{
	uint64_t bits = (uint64_t)(len + d->link->cfg.overhead_bytes) * 8u;
	return (bits * 1000000000ull + d->rate_bps - 1) / d->rate_bps;
}

/* --release-lateness D, a test knob: how much do results depend on the
 * daemon releasing frames late? Each frame is held past its release_ns by
 * a draw uniform in [0, 2D) (mean D); the sender sends it at pkt_send_at()
 * and the schedule statistics, measured against release_ns, count the hold
 * as lateness, so late_mean_us sees it; "own" (tx.c, count_late) measures
 * past the hold and the wait it causes, the daemon's lateness alone. Not a
 * constant: that would only be more propagation delay, and real lateness
 * (a late wake-up, a busy sender) varies frame to frame. Only the release
 * moves: the serializer's start and free times, and so the rate, stay the
 * schedule's. The line is FIFO, so a frame never leaves before the one
 * ahead of it: one drawn short behind one drawn long waits for it. Uniform,
 * not exponential, because it is bounded: the frame ahead is held to its
 * release + 2D at most, so the wait behind it never holds a frame past 2D,
 * and over any window longer than 2D the link delivers its rate. With the
 * order an exponential draw becomes a running maximum of an unbounded
 * tail: at a frame per 242 us (50 Mbit/s) a mean of 500 us reads ~830 us,
 * and each rare long draw stalls every frame behind it, a pause rather
 * than lateness. The uniform's mean reads D when frames are over 2D apart
 * and up to 2D when closer (~585 us for 500 us at 50 Mbit/s): the closer
 * they are, the nearer 2D and the less jitter, so the knob's effect
 * depends on the rate and experiments take the measured mean, not D, as
 * the lateness they ran at. Drawn here, by the main thread, when the frame
 * enters the delay line: the sender keeps no state for it, and
 * --single-thread shares the code. */
static uint32_t draw_lateness(struct link_dir *d)
{
	uint64_t span = 2 * d->link->cfg.release_lateness_ns;

	if (!span)
		return 0;
	return (uint32_t)(((uint64_t)aqm_rng_u32(&d->late_rng) * span) >> 32);
}

/* A frame dequeued at start after sojourn: its flow's, the histograms' and
 * the samples' share, before the frame is published to the sender thread
 * (which may free it at once). */
static void record_dequeue(struct link_dir *d, struct pkt *p, uint64_t start, uint64_t sojourn)
{
	struct deq_sample *s;

	d->flows[p->flow_idx].deq_pkts++;
	d->flows[p->flow_idx].sojourn_ns += sojourn;
	hist_add(&d->sojourn, sojourn);
	hist_add(&d->sojourn_log, sojourn);
	s = &d->samples[d->sample_pos++ % SAMPLE_RING];
	s->t_ns = start - d->link->start_ns;
	s->sojourn_ns = sojourn;
	s->qlen_pkts = aqm_qlen_pkts(d->q);
	s->len = p->aqm.len;
	d->sample_count++;
}

/* What a frame takes of a trace's opportunities: its IP packet and 4 bytes,
 * as Mahimahi's tun device counts it (1504 = a 1500-byte packet and its
 * tun header), so a full-size packet takes one opportunity there and here.
 * --overhead, a fixed-rate wire's framing, does not apply. */
static uint32_t trace_bytes(uint32_t len)
{
	return (len > ETH_HDR_LEN ? len - ETH_HDR_LEN : len) + TRACE_TUN_BYTES;
}

/* When the serializer can start the next frame: when it is free, or with a
 * trace the first delivery opportunity from then. */
static uint64_t next_start(const struct link_dir *d)
{
	return d->trace.ms ? trace_next(&d->trace, d->free_ns) : d->free_ns;
}

/* The frame took its time on the link and is lost on the way (--loss):
 * counted apart from the queue's drops. */
static int lost_on_link(struct link_dir *d, struct pkt *p)
{
	if (d->loss.kind == LOSS_NONE || !loss_drop(&d->loss))
		return 0;
	d->lost_frames++;
	d->lost_bytes += p->aqm.len;
	d->flows[p->flow_idx].lost++;
	capture_pkt(d, CAP_LOST, d->free_ns, p, NULL, -1); /* at the end of its time on the link */
	pool_put(&d->link->pool, p);
	return 1;
}

/* Starts every transmission due by t; *first_release is the release time
 * of the first frame it put in the delay line, if it was still unset. */
static void serve_until(struct link_dir *d, uint64_t t, uint64_t *first_release)
{
	uint64_t start;

	/* With a trace the frame leaves the queue at its opportunity, not
	 * before: its wait for one is queueing delay, which the discipline
	 * measures as a real cellular link's would be. */
	while ((start = next_start(d)) <= t) {
		struct aqm_pkt *ap;
		struct pkt *p;
		uint64_t sojourn;

		d->event_ns = start;
		ap = aqm_dequeue(d->q, start);
		if (!ap)
			break;
		p = (struct pkt *)ap;
		sojourn = start > p->arrival_ns ? start - p->arrival_ns : 0;
		/* Captured as it was queued, before CE is written into it (the
		 * comment says ce=1): a reader matches a dequeue to its enqueue
		 * by the bytes. */
		capture_pkt(d, CAP_DEQUEUE, start, p, NULL, (int64_t)sojourn);
		if (ap->ecn == AQM_ECN_CE && !frame_set_ce(p->data, ap->len))
			d->ce_not_written++;
		d->free_ns = d->trace.ms ? trace_take(&d->trace, start, trace_bytes(ap->len))
					 : start + tx_time_ns(d, ap->len);
		record_dequeue(d, p, start, sojourn);
		if (lost_on_link(d, p))
			continue;
		p->release_ns = d->free_ns + d->delay_ns;
		p->late_ns = draw_lateness(d);
		if (*first_release == UINT64_MAX)
			*first_release = p->release_ns;
		d->line[d->line_tail & d->line_mask] = p;
		/* seq_cst pairs with the sender's store of tx_sleep_until and
		 * re-read of line_tail: one of us always sees the other. */
		__atomic_store_n(&d->line_tail, d->line_tail + 1, __ATOMIC_SEQ_CST);
	}
}

void dir_serve(struct link_dir *d, uint64_t t)
{
	uint64_t first_release = UINT64_MAX;
	int h;

	/* Host-delayed frames due by t reach the queue at their own times,
	 * in time order, each after the queue was served up to it: they meet
	 * the queue the link would have had then. */
	while ((h = access_first(d)) >= 0 && d->access[h].head->arrival_ns <= t) {
		struct access_line *a = &d->access[h];
		struct pkt *p = a->head;

		a->head = (struct pkt *)p->aqm.next;
		if (!a->head)
			a->tail = NULL;
		a->count--;
		p->aqm.next = NULL;
		d->access_pkts--;
		serve_until(d, p->arrival_ns, &first_release);
		enqueue_at(d, p, p->arrival_ns);
	}
	serve_until(d, t, &first_release);
	/* Wake the sender if its line was empty (tx_sleep_until is then
	 * UINT64_MAX) or the first new frame is due before the line's head
	 * (only after set_link lowered the delay). Otherwise the sender
	 * reaches the new frames behind the head; with --release-batch it
	 * may sleep past their release on purpose. */
	if (first_release < __atomic_load_n(&d->tx_sleep_until, __ATOMIC_SEQ_CST)) {
		uint64_t one = 1;
		if (write(d->tx_wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is already non-zero: the sender will wake */
		}
	}
}

uint64_t dir_next_event(const struct link_dir *d)
{
	uint64_t next = UINT64_MAX, access = access_next_due(d);

	if (d->link->cfg.sender_threads) {
		/* Serving is exact whenever it happens: dir_serve() dequeues
		 * each frame at its own start time (the core is handed that
		 * time, not now), and every arrival, control request and log
		 * tick serves up to its own time first, so events still meet
		 * in time order. What a wake-up must do is hand the sender a
		 * frame before its release (start + serialization + delay):
		 * waking half a delay before the head could be due, rather
		 * than when it starts, serves half a delay's worth of frames
		 * per wake-up instead of one (at 100 Mbit/s and 10 ms, ~40),
		 * and these wake-ups were a large part of the daemon's CPU
		 * (docs/ckcd-link.md, "Where the CPU goes"). Half the delay
		 * stays the sender's margin against a late or busy main
		 * thread (the log, a large stats reply). Under 2 x
		 * SERVE_LEAD_NS of delay there is little to gain: serve at
		 * each start, as before, which gives the sender the whole
		 * delay. */
		uint64_t lead = d->delay_ns >= 2 * SERVE_LEAD_NS ? d->delay_ns / 2 : d->delay_ns;

		if (aqm_qlen_pkts(d->q) > 0)
			next = next_start(d) + d->delay_ns - lead;
		/* A host-delayed frame enters the queue when due and can
		 * leave it no sooner: the same lead before its release. */
		if (access != UINT64_MAX && access + d->delay_ns - lead < next)
			next = access + d->delay_ns - lead;
		return next;
	}
	/* Single thread: the releases are ours too. The head of the queue
	 * cannot be released before its start (next_start) + delay: waking
	 * then is early enough to serve it. */
	if (d->line_head != d->line_tail)
		next = pkt_send_at(d->line[d->line_head & d->line_mask]);
	if (aqm_qlen_pkts(d->q) > 0 && next_start(d) + d->delay_ns < next)
		next = next_start(d) + d->delay_ns;
	if (access != UINT64_MAX && access + d->delay_ns < next)
		next = access + d->delay_ns;
	return next;
}
