/* report.c - ckcd-link's JSON views: show, stats, samples and the
 * time-series log. Field meanings are documented in docs/ckcd-link.md. */
#include "link.h"
#include "control.h"

#include <stdlib.h>
#include <string.h>

static const char *const drop_keys[AQM_DROP_REASONS] = {
	[AQM_DROP_OVERFLOW] = "overflow",
	[AQM_DROP_EARLY] = "early",
	[AQM_DROP_CHOKE_MATCH] = "choke_match",
	[AQM_DROP_DELAY] = "delay",
	[AQM_DROP_PENALTY] = "penalty",
	[AQM_DROP_FLUSH] = "flush",
	[AQM_DROP_SHRINK] = "shrink",
};

const char *drop_reason_key(int why)
{
	return why >= 0 && why < AQM_DROP_REASONS ? drop_keys[why] : "unknown";
}

static void put_drops(struct jbuf *b, const char *key, const uint64_t *drops)
{
	jb_key(b, key);
	jb_obj_open(b);
	for (int i = 0; i < AQM_DROP_REASONS; i++)
		jb_ku64(b, drop_keys[i], drops[i]);
	jb_obj_close(b);
}

static void put_aqm_stats(struct jbuf *b, const struct aqm_stats *s)
{
	jb_ku64(b, "enq_pkts", s->enq_pkts);
	jb_ku64(b, "enq_bytes", s->enq_bytes);
	jb_ku64(b, "deq_pkts", s->deq_pkts);
	jb_ku64(b, "deq_bytes", s->deq_bytes);
	put_drops(b, "drops", s->drops);
	put_drops(b, "drop_bytes", s->drop_bytes);
	put_drops(b, "marks", s->marks);
}

static void put_hist_us(struct jbuf *b, const char *key, const struct ns_hist *h)
{
	jb_key(b, key);
	jb_obj_open(b);
	jb_ku64(b, "count", h->count);
	jb_kdbl(b, "mean", h->count ? (double)h->sum / (double)h->count / 1e3 : 0.0);
	jb_kdbl(b, "p50", (double)hist_percentile(h, 0.50) / 1e3);
	jb_kdbl(b, "p99", (double)hist_percentile(h, 0.99) / 1e3);
	jb_kdbl(b, "max", (double)h->max / 1e3);
	jb_obj_close(b);
}

static uint64_t late_over_1ms(const struct late_hist *h)
{
	uint64_t over = 0;

	for (unsigned i = 1; i < LATE_BUCKETS; i++)
		if (late_edges_us[i - 1] >= 1000)
			over += COUNTER_READ(h->bucket[i]);
	return over;
}

static void put_late(struct jbuf *b, const char *key, const char *count_key,
		     const struct late_hist *h)
{
	char label[32];

	uint64_t count = COUNTER_READ(h->count), sum = COUNTER_READ(h->sum_ns);

	jb_key(b, key);
	jb_obj_open(b);
	jb_ku64(b, count_key, count);
	jb_kdbl(b, "late_mean_us", count ? (double)sum / (double)count / 1e3 : 0.0);
	jb_kdbl(b, "late_max_us", (double)COUNTER_READ(h->max_ns) / 1e3);
	jb_ku64(b, "late_over_1ms", late_over_1ms(h));
	jb_key(b, "late_hist_us");
	jb_obj_open(b);
	for (unsigned i = 0; i < LATE_BUCKETS; i++) {
		if (i == 0)
			snprintf(label, sizeof(label), "<%u", late_edges_us[0]);
		else if (i == LATE_BUCKETS - 1)
			snprintf(label, sizeof(label), ">=%u", late_edges_us[i - 1]);
		else
			snprintf(label, sizeof(label), "%u-%u", late_edges_us[i - 1], late_edges_us[i]);
		jb_ku64(b, label, COUNTER_READ(h->bucket[i]));
	}
	jb_obj_close(b);
	jb_obj_close(b);
}

/* Big enough for CKCD's per-flow state of every flow of a window (~80 bytes a
 * flow); one buffer, since the daemon runs in one thread. */
static char text_buf[1 << 17];

/* "state": the numbers the core gives typed (aqm_get_xstats, or a band's
 * aqm_band_xstats), only those it flags: {"active_flows": N,
 * "fair_share_bps": N, "q_avg": X, "prob": P} (q_avg in packets, prob
 * dualpi2's p'). */
static void put_state(struct jbuf *b, const struct aqm_xstats *xs)
{
	jb_key(b, "state");
	jb_obj_open(b);
	if (xs->flags & AQM_XS_FLOWS)
		jb_ku64(b, "active_flows", xs->active_flows);
	if (xs->flags & AQM_XS_FAIR_SHARE)
		jb_ku64(b, "fair_share_bps", xs->fair_share_bps);
	if (xs->flags & AQM_XS_QAVG)
		jb_kdbl(b, "q_avg", (double)xs->q_avg_milli / 1000.0);
	if (xs->flags & AQM_XS_PROB)
		jb_kdbl(b, "prob", (double)xs->prob_e9 / 1e9);
	jb_obj_close(b);
}

/* The discipline's state: "xstats", its text (every detail, CKCD's per-flow
 * state too), and "state" (put_state). A bands queue's are its bands' summed
 * (flows) and the smallest (fair share); each entry of "bands" has its own. */
static void put_xstats(struct jbuf *b, const struct aqm_queue *q)
{
	struct aqm_xstats xs;

	aqm_xstats(q, text_buf, sizeof(text_buf));
	jb_kstr(b, "xstats", text_buf);
	aqm_get_xstats(q, &xs);
	put_state(b, &xs);
}

/* show: a direction's trace ("trace": its file, opportunities, period and
 * average) and loss model ("loss": the spec and its long-run rate), null
 * when it has none. */
static void put_link_models(struct jbuf *b, const struct link_dir *d)
{
	const struct link_config *cfg = &d->link->cfg;

	jb_key(b, "trace");
	if (d->trace.ms) {
		jb_obj_open(b);
		jb_kstr(b, "file", cfg->trace_path[d->index]);
		jb_ku64(b, "opportunities", d->trace.n);
		jb_kdbl(b, "period_ms", (double)d->trace.period_ns / 1e6);
		jb_ku64(b, "average_bps", trace_rate_bps(&d->trace));
		jb_obj_close(b);
	} else {
		jb_raw(b, "null", 4);
	}
	jb_key(b, "loss");
	if (d->loss.kind != LOSS_NONE) {
		jb_obj_open(b);
		jb_kstr(b, "spec", d->loss.spec);
		jb_kdbl(b, "rate", loss_rate(&d->loss));
		jb_obj_close(b);
	} else {
		jb_raw(b, "null", 4);
	}
}

static void put_qdisc(struct jbuf *b, const struct aqm_queue *q)
{
	aqm_describe(q, text_buf, sizeof(text_buf));
	jb_kstr(b, "qdisc", text_buf);
	put_xstats(b, q);
}

/* --capture's file, snap length and size limit (show, and stats' capture). */
static void put_capture_config(struct jbuf *b, const struct capture *c)
{
	jb_kstr(b, "file", capture_path(c));
	jb_ku64(b, "snaplen", capture_snaplen(c));
	jb_ku64(b, "max_mb", capture_max_bytes(c) >> 20);
}

/* stats' capture: records in the file per direction and event, and those
 * not written, by why. While the daemon runs the file trails the events
 * by the buffered chunks; the final stats are after the last write. */
static void put_capture(struct jbuf *b, const struct capture *c)
{
	struct capture_stats st;

	capture_get_stats(c, &st);
	jb_key(b, "capture");
	jb_obj_open(b);
	put_capture_config(b, c);
	jb_key(b, "records");
	jb_obj_open(b);
	for (int d = 0; d < CAP_DIRS; d++) {
		jb_key(b, capture_dir_name(d));
		jb_obj_open(b);
		for (int ev = 0; ev < CAP_EVENTS; ev++)
			jb_ku64(b, capture_event_name((enum cap_event)ev), st.records[d][ev]);
		jb_obj_close(b);
	}
	jb_obj_close(b);
	jb_ku64(b, "bytes", st.bytes);
	jb_ku64(b, "skipped", st.skipped);
	jb_ku64(b, "overrun", st.overrun);
	jb_ku64(b, "failed", st.failed);
	jb_key(b, "error");
	if (st.error)
		jb_str(b, strerror(st.error));
	else
		jb_raw(b, "null", 4);
	jb_obj_close(b);
}

void report_show(struct link *l, struct jbuf *b)
{
	jb_kstr(b, "if_a", l->cfg.if_name[0]);
	jb_kstr(b, "if_b", l->cfg.if_name[1]);
	jb_ku64(b, "mtu", l->cfg.mtu);
	jb_ku64(b, "overhead_bytes", l->cfg.overhead_bytes);
	jb_ku64(b, "pool_pkts", l->pool.count);
	jb_ku64(b, "seed", l->cfg.seed);
	jb_kdbl(b, "release_batch_us", (double)l->cfg.release_batch_ns / 1e3);
	jb_kdbl(b, "release_lateness_us", (double)l->cfg.release_lateness_ns / 1e3);
	jb_kdbl(b, "uptime_s", (double)(now_ns() - l->start_ns) / 1e9);
	jb_key(b, "host_delays");
	jb_arr_open(b);
	for (unsigned i = 0; i < l->cfg.n_host_delay; i++) {
		jb_obj_open(b);
		jb_kstr(b, "addr", l->cfg.host_delay[i].addr_text);
		jb_kdbl(b, "delay_ms", (double)l->cfg.host_delay[i].delay_ns / 1e6);
		jb_obj_close(b);
	}
	jb_arr_close(b);
	jb_kstr(b, "log", l->cfg.log_path ? l->cfg.log_path : "");
	jb_key(b, "disciplines");
	jb_arr_open(b);
	for (const char *const *n = aqm_discipline_names(); *n; n++)
		jb_str(b, *n);
	jb_arr_close(b);
	jb_key(b, "dirs");
	jb_obj_open(b);
	for (int i = 0; i < 2; i++) {
		struct link_dir *d = &l->dir[i];
		jb_key(b, d->name);
		jb_obj_open(b);
		jb_kstr(b, "from", l->cfg.if_name[i]);
		jb_kstr(b, "to", l->cfg.if_name[1 - i]);
		jb_ku64(b, "rate_bps", d->rate_bps);
		jb_kdbl(b, "delay_ms", (double)d->delay_ns / 1e6);
		put_link_models(b, d);
		jb_kstr(b, "rx_io", rx_io_name(d->ring.map ? RX_IO_RING : RX_IO_RECVMMSG));
		put_qdisc(b, d->q);
		jb_obj_close(b);
	}
	jb_obj_close(b);
	jb_key(b, "control");
	jb_obj_open(b);
	jb_ku64(b, "clients_dropped_unread", control_clients_dropped_unread());
	jb_obj_close(b);
	jb_key(b, "capture");
	if (l->cap) {
		jb_obj_open(b);
		put_capture_config(b, l->cap);
		jb_obj_close(b);
	} else {
		jb_raw(b, "null", 4);
	}
}

static int cmp_flow_bytes(const void *a, const void *b)
{
	const struct flow_stats *x = *(const struct flow_stats *const *)a;
	const struct flow_stats *y = *(const struct flow_stats *const *)b;
	uint64_t bx = x->rx_bytes, by = y->rx_bytes;
	return bx < by ? 1 : bx > by ? -1 : 0;
}

static void put_flow(struct jbuf *b, const struct flow_stats *f, int other)
{
	char key[160];
	uint64_t total = 0;

	for (int i = 0; i < AQM_DROP_REASONS; i++)
		total += f->drops[i];
	jb_obj_open(b);
	if (other) {
		jb_kstr(b, "flow", "other");
		jb_kstr(b, "key", "flows beyond the table");
	} else {
		snprintf(key, sizeof(key), "0x%08x", f->hash);
		jb_kstr(b, "flow", key);
		flow_key_format(&f->key, key, sizeof(key));
		jb_kstr(b, "key", key);
		jb_ku64(b, "dscp", f->dscp);
	}
	jb_ku64(b, "rx_pkts", f->rx_pkts);
	jb_ku64(b, "rx_bytes", f->rx_bytes);
	jb_ku64(b, "tx_pkts", COUNTER_READ(f->tx_pkts));
	jb_ku64(b, "tx_bytes", COUNTER_READ(f->tx_bytes));
	jb_ku64(b, "drop_pkts", total);
	jb_ku64(b, "drop_bytes", f->drop_bytes);
	jb_ku64(b, "lost", f->lost);
	put_drops(b, "drops", f->drops);
	put_drops(b, "marks", f->marks);
	jb_ku64(b, "deq_pkts", f->deq_pkts);
	jb_kdbl(b, "sojourn_us_mean", f->deq_pkts ? (double)f->sojourn_ns / (double)f->deq_pkts / 1e3 : 0.0);
	jb_obj_close(b);
}

static void put_flows(struct jbuf *b, struct link_dir *d, int max_flows)
{
	struct flow_stats **v = malloc(sizeof(*v) * (FLOW_TABLE_SIZE + 1));
	int n = 0;

	jb_ku64(b, "nflows", d->nflows);
	jb_key(b, "flows");
	jb_arr_open(b);
	if (v) {
		for (int i = 0; i < FLOW_TABLE_SIZE; i++)
			if (d->flows[i].used)
				v[n++] = &d->flows[i];
		qsort(v, (size_t)n, sizeof(*v), cmp_flow_bytes);
		for (int i = 0; i < n && i < max_flows; i++)
			put_flow(b, v[i], 0);
		if (d->flows[FLOW_OTHER].rx_pkts)
			put_flow(b, &d->flows[FLOW_OTHER], 1);
		free(v);
	}
	jb_arr_close(b);
}

/* A bands queue's bands, each with its own counters and state. */
static void put_bands(struct jbuf *b, const struct aqm_queue *q)
{
	unsigned nb = aqm_nbands(q);
	struct aqm_xstats bxs;

	if (nb <= 1)
		return;
	jb_key(b, "bands");
	jb_arr_open(b);
	for (unsigned k = 0; k < nb; k++) {
		jb_obj_open(b);
		jb_ku64(b, "band", k);
		jb_ku64(b, "qlen_pkts", aqm_band_qlen_pkts(q, k));
		put_aqm_stats(b, aqm_band_stats(q, k));
		aqm_band_xstats(q, k, &bxs);
		put_state(b, &bxs);
		jb_obj_close(b);
	}
	jb_arr_close(b);
}

static void put_dir(struct jbuf *b, struct link_dir *d, int max_flows)
{
	jb_key(b, d->name);
	jb_obj_open(b);
	jb_ku64(b, "rate_bps", d->rate_bps);
	jb_kdbl(b, "delay_ms", (double)d->delay_ns / 1e6);
	jb_ku64(b, "rx_frames", d->rx_frames);
	jb_ku64(b, "rx_bytes", d->rx_bytes);
	jb_ku64(b, "rx_runt", d->rx_runt);
	jb_ku64(b, "rx_oversize", d->rx_oversize);
	jb_ku64(b, "rx_no_buffer", d->rx_no_buffer);
	port_count_kernel_drops(d);
	jb_ku64(b, "rx_kernel_drops", d->rx_kernel_drops);
	jb_ku64(b, "rx_socket_errors", d->rx_socket_errors);
	jb_kstr(b, "rx_io", rx_io_name(d->ring.map ? RX_IO_RING : RX_IO_RECVMMSG));
	jb_ku64(b, "tx_frames", COUNTER_READ(d->tx_frames));
	jb_ku64(b, "tx_bytes", COUNTER_READ(d->tx_bytes));
	jb_ku64(b, "tx_errors", COUNTER_READ(d->tx_errors));
	jb_ku64(b, "qlen_pkts", aqm_qlen_pkts(d->q));
	jb_ku64(b, "qlen_bytes", aqm_qlen_bytes(d->q));
	jb_ku64(b, "delay_line_pkts", dir_line_len(d));
	jb_ku64(b, "host_delay_pkts", d->access_pkts);
	jb_ku64(b, "host_delay_drops", d->host_delay_drops);
	jb_ku64(b, "lost", d->lost_frames);
	jb_ku64(b, "lost_bytes", d->lost_bytes);
	put_drops(b, "drops", d->drops);
	put_drops(b, "marks", d->marks);
	jb_ku64(b, "ce_not_written", d->ce_not_written);
	put_qdisc(b, d->q);
	jb_key(b, "queue");
	jb_obj_open(b);
	put_aqm_stats(b, aqm_get_stats(d->q));
	jb_obj_close(b);
	put_bands(b, d->q);
	put_hist_us(b, "sojourn_us", &d->sojourn);
	put_late(b, "schedule", "releases", &d->late);
	put_late(b, "own", "releases", &d->own_late);
	put_late(b, "tx_wake", "wakeups", &d->tx_wake);
	if (max_flows > 0)
		put_flows(b, d, max_flows);
	jb_obj_close(b);
}

void report_stats(struct link *l, struct jbuf *b, int max_flows, int dir_mask)
{
	jb_kdbl(b, "uptime_s", (double)(now_ns() - l->start_ns) / 1e9);
	jb_ku64(b, "pool_free", l->pool.nfree);
	jb_ku64(b, "wakeups", l->wakeups);
	jb_key(b, "dirs");
	jb_obj_open(b);
	for (int i = 0; i < 2; i++)
		if (dir_mask & (1 << i))
			put_dir(b, &l->dir[i], max_flows);
	jb_obj_close(b);
	if (l->cap)
		put_capture(b, l->cap);
}

void report_samples(struct link_dir *d, struct jbuf *b, unsigned n)
{
	uint64_t have = d->sample_count < SAMPLE_RING ? d->sample_count : SAMPLE_RING;

	if (n > have)
		n = (unsigned)have;
	jb_kstr(b, "dir", d->name);
	jb_kstr(b, "fields", "t_s sojourn_us qlen_pkts len");
	jb_key(b, "samples");
	jb_arr_open(b);
	for (unsigned i = 0; i < n; i++) {
		uint32_t pos = (uint32_t)((d->sample_pos - n + i) % SAMPLE_RING);
		const struct deq_sample *s = &d->samples[pos];
		jb_arr_open(b);
		jb_dbl(b, (double)s->t_ns / 1e9);
		jb_dbl(b, (double)s->sojourn_ns / 1e3);
		jb_u64(b, s->qlen_pkts);
		jb_u64(b, s->len);
		jb_arr_close(b);
	}
	jb_arr_close(b);
}

/* One JSON line per direction per interval; counters are deltas since the
 * previous line. */
void report_log_tick(struct link *l, uint64_t t)
{
	struct jbuf b;

	if (!l->log)
		return;
	jb_init(&b);
	for (int i = 0; i < 2; i++) {
		struct link_dir *d = &l->dir[i];
		uint64_t drops_delta[AQM_DROP_REASONS], marks_delta[AQM_DROP_REASONS];
		uint64_t late_over = late_over_1ms(&d->late);
		uint64_t tx_frames = COUNTER_READ(d->tx_frames), tx_bytes = COUNTER_READ(d->tx_bytes);
		for (int k = 0; k < AQM_DROP_REASONS; k++) {
			drops_delta[k] = d->drops[k] - d->log_drops[k];
			d->log_drops[k] = d->drops[k];
			marks_delta[k] = d->marks[k] - d->log_marks[k];
			d->log_marks[k] = d->marks[k];
		}
		jb_obj_open(&b);
		jb_kdbl(&b, "t", (double)(t - l->start_ns) / 1e9);
		jb_kstr(&b, "dir", d->name);
		jb_kdbl(&b, "interval_s", (double)(t - l->log_prev_ns) / 1e9);
		jb_ku64(&b, "qlen_pkts", aqm_qlen_pkts(d->q));
		jb_ku64(&b, "qlen_bytes", aqm_qlen_bytes(d->q));
		jb_ku64(&b, "rx_frames", d->rx_frames - d->log_rx_frames);
		jb_ku64(&b, "tx_frames", tx_frames - d->log_tx_frames);
		jb_ku64(&b, "tx_bytes", tx_bytes - d->log_tx_bytes);
		jb_ku64(&b, "lost", d->lost_frames - d->log_lost);
		d->log_lost = d->lost_frames;
		put_drops(&b, "drops", drops_delta);
		put_drops(&b, "marks", marks_delta);
		put_hist_us(&b, "sojourn_us", &d->sojourn_log);
		jb_kdbl(&b, "late_max_us",
			(double)__atomic_exchange_n(&d->log_late_max_ns, 0, __ATOMIC_RELAXED) / 1e3);
		jb_ku64(&b, "late_over_1ms", late_over - d->log_late_over_1ms);
		jb_key(&b, "flows");
		jb_arr_open(&b);
		for (int k = 0; k <= FLOW_TABLE_SIZE; k++) {
			struct flow_stats *f = &d->flows[k];
			uint64_t drops = 0, marks = 0, f_tx_bytes, f_tx_pkts;
			char key[160];

			if (!f->used)
				continue;
			for (int r = 0; r < AQM_DROP_REASONS; r++) {
				drops += f->drops[r];
				marks += f->marks[r];
			}
			f_tx_bytes = COUNTER_READ(f->tx_bytes);
			f_tx_pkts = COUNTER_READ(f->tx_pkts);
			if (f_tx_bytes == f->log_tx_bytes && drops == f->log_drops && marks == f->log_marks &&
			    f->deq_pkts == f->log_deq_pkts && f->lost == f->log_lost)
				continue;
			jb_obj_open(&b);
			if (k == FLOW_OTHER) {
				jb_kstr(&b, "flow", "other");
			} else {
				snprintf(key, sizeof(key), "0x%08x", f->hash);
				jb_kstr(&b, "flow", key);
				flow_key_format(&f->key, key, sizeof(key));
				jb_kstr(&b, "key", key);
			}
			jb_ku64(&b, "tx_bytes", f_tx_bytes - f->log_tx_bytes);
			jb_ku64(&b, "tx_pkts", f_tx_pkts - f->log_tx_pkts);
			jb_ku64(&b, "drops", drops - f->log_drops);
			jb_ku64(&b, "marks", marks - f->log_marks);
			jb_ku64(&b, "lost", f->lost - f->log_lost);
			jb_ku64(&b, "deq_pkts", f->deq_pkts - f->log_deq_pkts);
			jb_ku64(&b, "sojourn_ns_sum", f->sojourn_ns - f->log_sojourn_ns);
			jb_obj_close(&b);
			f->log_tx_bytes = f_tx_bytes;
			f->log_tx_pkts = f_tx_pkts;
			f->log_drops = drops;
			f->log_marks = marks;
			f->log_deq_pkts = f->deq_pkts;
			f->log_lost = f->lost;
			f->log_sojourn_ns = f->sojourn_ns;
		}
		jb_arr_close(&b);
		/* the discipline's state now (CKCD: I, mu_f, each flow's mu_i, d_th and
		 * dropping state), so a run's log shows the mechanism over time */
		put_xstats(&b, d->q);
		jb_obj_close(&b);
		jb_raw(&b, "\n", 1);

		d->log_rx_frames = d->rx_frames;
		d->log_tx_frames = tx_frames;
		d->log_tx_bytes = tx_bytes;
		d->log_late_over_1ms = late_over;
		memset(&d->sojourn_log, 0, sizeof(d->sojourn_log));
	}
	if (b.len)
		fwrite(b.p, 1, b.len, l->log);
	fflush(l->log);
	jb_free(&b);
	l->log_prev_ns = t;
}
