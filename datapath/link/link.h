/* link.h - ckcd-link's state: two interfaces, one emulated direction each
 * way (queue discipline -> serializer at the link rate -> delay line), a
 * shared packet pool, the control socket and the time-series log.
 *
 * Emulation model (per direction, all times CLOCK_MONOTONIC ns):
 *   arrival  t_a   = when the frame was read from the receive socket
 *   enqueue        into the aqm_queue at t_a (the discipline may drop)
 *   start    t_s   = max(link free time, t_a): the serializer takes the head
 *                    of the queue (aqm_dequeue at t_s, sojourn = t_s - t_a)
 *   free     t_f   = t_s + (len + overhead) * 8 / rate
 *   release  t_r   = t_f + delay: the frame is sent on the other interface
 * With --trace, t_s is the first delivery opportunity at or after the
 * serializer is free and t_f the one that carries the frame's last byte
 * (trace.h); with --loss, a frame may be lost at t_f instead of released
 * (loss.h), counted apart from the queue's drops. With --capture every
 * such event of a frame is also a record in a pcapng file (capture.h),
 * all of them made on the main thread.
 * The times are computed from arrivals and the link state, never from when
 * a timer happened to fire; how late the real send was against t_r is
 * recorded (struct late_hist) so experiments can tell whether the daemon
 * kept its schedule. --release-lateness holds each frame past t_r on
 * purpose; it is sent at pkt_send_at(), in order.
 *
 * Threads: the main thread reads both interfaces, runs the disciplines and
 * the serializers, and answers the control socket. Each direction has a
 * sender thread that owns the delay line's head: it sleeps until the head's
 * pkt_send_at() and sends. Sending into a veth runs the receiving host's
 * network stack inline in the sender, so this keeps that work (tens of us
 * per frame) off the path that reads arrivals and off the other direction's
 * releases.
 * Main -> sender: the delay line (single-producer single-consumer ring) plus
 * an eventfd when the line was empty or a new frame is due before its head.
 * Sender -> main: a ring of sent frames to return to the pool. Counters
 * written by a sender are single-writer and read with relaxed atomics. */
#ifndef CKCD_LINK_LINK_H
#define CKCD_LINK_LINK_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/aqm.h"
#include "../host/aqm_host.h"
#include "capture.h"
#include "frame.h"
#include "host_delay.h"
#include "json.h"
#include "loss.h"
#include "trace.h"

#define DIR_AB 0
#define DIR_BA 1

/* A frame in flight through the daemon. */
struct pkt {
	struct aqm_pkt aqm;  /* first: the core hands back struct aqm_pkt * */
	uint64_t arrival_ns;
	uint64_t release_ns;
	uint32_t flow_idx;   /* index into the direction's flow table */
	uint32_t late_ns;    /* --release-lateness: held this long past release_ns (pipe.c) */
	uint8_t data[];      /* frame bytes (aqm.len of them) */
};

/* When the sender may send p: its release plus the artificial lateness,
 * which the schedule statistics count like any other (they measure against
 * release_ns) and the "own" ones do not (tx.c, count_late). */
static inline uint64_t pkt_send_at(const struct pkt *p)
{
	return p->release_ns + p->late_ns;
}

struct pkt_pool {
	uint8_t *mem;
	size_t stride;
	uint32_t count;
	uint32_t nfree;
	struct pkt *free_list; /* linked through aqm.next */
};

/* Log-linear histogram of nanosecond values: 8 sub-buckets per power of
 * two, so a percentile read from it is within 1/16 of the true value. */
#define HIST_BUCKETS 512
struct ns_hist {
	uint64_t count, sum, max;
	uint32_t bucket[HIST_BUCKETS];
};

void hist_add(struct ns_hist *h, uint64_t v);
uint64_t hist_percentile(const struct ns_hist *h, double p);

/* How late releases were against their computed time. Fixed edges in us. */
#define LATE_BUCKETS 11
extern const uint32_t late_edges_us[LATE_BUCKETS - 1];
struct late_hist {
	uint64_t count, sum_ns, max_ns;
	uint64_t bucket[LATE_BUCKETS];
};

/* Single-writer counters read by another thread. */
#define COUNTER_ADD(x, v) __atomic_store_n(&(x), (x) + (v), __ATOMIC_RELAXED)
#define COUNTER_READ(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

void late_hist_add(struct late_hist *h, uint64_t late_ns); /* single writer */

#define FLOW_TABLE_SIZE 4096 /* power of two; flows beyond it go to the last slot */
#define FLOW_OTHER (FLOW_TABLE_SIZE)

struct flow_stats {
	uint32_t hash;
	uint8_t used;
	uint8_t dscp;
	struct flow_key key;
	uint64_t rx_pkts, rx_bytes; /* arrived at the link */
	uint64_t tx_pkts, tx_bytes; /* delivered to the far side */
	uint64_t drops[AQM_DROP_REASONS];
	uint64_t drop_bytes;
	uint64_t lost; /* lost on the link (--loss), after the queue */
	uint64_t marks[AQM_DROP_REASONS]; /* ECN CE marks instead of drops, by reason */
	/* dequeued and their summed sojourn: one flow's own queueing delay, which
	 * under a multi-queue discipline differs from the link's mean (a ping
	 * waits in its own queue, not in the mean of all of them) */
	uint64_t deq_pkts, sojourn_ns;
	/* values at the previous log line, for per-interval deltas */
	uint64_t log_tx_bytes, log_tx_pkts, log_drops, log_marks, log_deq_pkts, log_sojourn_ns, log_lost;
};

/* A --host-delay line holds at most this share of the pool (pool_pkts /
 * 4): the access link has no rate, so an unresponsive sender could
 * otherwise fill the pool with delayed frames and starve every other host
 * and the reverse direction. */
#define HOST_LINE_SHARE 4

#define RELEASE_BATCH_MAX_NS 10000000ull /* --release-batch at most 10 ms */
#define RELEASE_LATENESS_MAX_NS 10000000ull /* --release-lateness: a mean of at most 10 ms */
/* A draw is below 2 x the mean and is kept in struct pkt's uint32_t late_ns. */
_Static_assert(2 * RELEASE_LATENESS_MAX_NS <= UINT32_MAX, "a lateness draw fits pkt.late_ns");
/* With sender threads and a delay of at least twice this, the main thread
 * serves a queue half a delay before its head could be due at the sender
 * (dir_next_event); under it, at each frame's start. */
#define SERVE_LEAD_NS 1000000ull

/* Recent dequeues, for the "samples" command. */
#define SAMPLE_RING 1024
struct deq_sample {
	uint64_t t_ns;
	uint64_t sojourn_ns;
	uint32_t qlen_pkts;
	uint32_t len;
};

struct link;

#define QDISC_SPEC_MAX 2048

/* How a direction reads its interface (--rx-io). */
enum rx_io {
	RX_IO_AUTO = 0, /* the ring, or recvmmsg where the kernel refuses one */
	RX_IO_RING,     /* PACKET_RX_RING (TPACKET_V2), mapped: no system call per batch */
	RX_IO_RECVMMSG, /* recvmmsg into the frame pool: one system call and one copy per batch */
};
const char *rx_io_name(enum rx_io io);

/* A TPACKET_V2 receive ring: the kernel copies each frame into the next
 * free slot and flips its status to user; the main thread copies it into
 * the pool (frames are held for the link's delay, far longer than a slot
 * may be) and hands the slot back. */
struct rx_ring {
	uint8_t *map;        /* NULL: no ring, recvmmsg */
	size_t map_len;
	uint32_t frame_size; /* bytes per slot */
	uint32_t frames;     /* slots */
	uint32_t next;       /* the slot to look at next */
};

/* Frames of one --host-delay host waiting out its delay before the queue:
 * FIFO, linked through aqm.next, each due at its arrival_ns. */
struct access_line {
	struct pkt *head, *tail;
	uint32_t count;
};

struct link_dir {
	struct link *link;
	int index;          /* DIR_AB or DIR_BA */
	const char *name;   /* "ab" / "ba" */
	int rx_fd, tx_fd;
	int tx_ifindex;
	struct rx_ring ring;    /* on rx_fd, when it has one */
	struct aqm_queue *q;
	struct aqm_host host;   /* the core's random numbers and drop callback */
	struct aqm_env env;     /* made from host; env.rate_bps follows rate_bps */
	char spec[QDISC_SPEC_MAX]; /* the discipline as given (--qdisc, set_qdisc): re-applied on a rate change */

	/* the serializer (main thread only) */
	uint64_t rate_bps;  /* with a trace, its average */
	uint64_t delay_ns;
	uint64_t free_ns; /* the serializer is busy until then */
	struct trace trace; /* --trace: the service follows it (ms NULL: the rate does) */
	struct loss loss;   /* --loss: frames lost on the link after the queue */
	uint64_t lost_frames, lost_bytes;
	uint64_t log_lost; /* lost_frames at the previous log line */
	struct aqm_rng late_rng; /* --release-lateness draws (pipe.c) */

	/* --host-delay: one line per host of cfg.host_delay (main thread only) */
	struct access_line access[HOST_DELAY_MAX];
	uint32_t access_pkts;
	uint64_t host_delay_drops; /* arrivals refused by a full host line (HOST_LINE_SHARE) */

	/* delay line: FIFO ring of packets waiting for pkt_send_at(); the main
	 * thread writes line_tail, the sender thread line_head (atomics) */
	struct pkt **line;
	uint32_t line_mask, line_head, line_tail;
	/* sent frames on their way back to the pool: the sender writes
	 * freed_tail, the main thread freed_head */
	struct pkt **freed;
	uint32_t freed_head, freed_tail;

	/* sender thread */
	pthread_t tx_thread;
	int tx_started;
	int tx_wake_fd;          /* eventfd, main -> sender */
	uint64_t tx_sleep_until; /* while the sender waits: its head's t_r (release_ns, not
				  * pkt_send_at: tx.c, head_times), UINT64_MAX if the line
				  * is empty; 0 while it runs */
	int tx_stop;

	/* counters (main thread) */
	uint64_t rx_frames, rx_bytes, rx_runt, rx_oversize, rx_no_buffer, rx_outgoing;
	uint64_t rx_kernel_drops; /* frames the socket dropped before we read them (PACKET_STATISTICS) */
	uint64_t rx_socket_errors; /* errors the socket reported (the interface went down) */
	/* counters (sender thread) */
	uint64_t tx_frames, tx_bytes, tx_errors;
	struct late_hist tx_wake; /* sender's wake-ups against their deadline */
	uint64_t drops[AQM_DROP_REASONS]; /* mirrors the core's, plus FLUSH on reconfigure */
	uint64_t marks[AQM_DROP_REASONS]; /* ECN CE marks, by the reason they replace */
	uint64_t ce_not_written; /* marked by the core but the frame would not take CE (never expected) */
	/* --capture: the time of the core call under way (an enqueue, a
	 * dequeue, a reconfiguration), which the core's drop and mark
	 * callbacks are not told, and the frame that call is enqueueing (a
	 * drop of any other one was queued, and has a sojourn) */
	uint64_t event_ns;
	const struct pkt *arriving;

	struct ns_hist sojourn;     /* since start */
	struct ns_hist sojourn_log; /* since the previous log line */
	/* written by whichever thread sends (the sender thread, or the main
	 * thread with --single-thread); tx.c, count_late */
	struct late_hist late;      /* "schedule": each frame's send against its release_ns */
	struct late_hist own_late;  /* "own": against eff_due_ns, the daemon's own lateness */
	uint64_t eff_due_ns;        /* max pkt_send_at() of the frames sent so far */
	uint64_t log_late_max_ns;   /* largest lateness since the previous log line (atomic) */
	uint64_t log_late_over_1ms; /* late_over_1ms at the previous log line */
	uint64_t log_rx_frames, log_tx_frames, log_tx_bytes;
	uint64_t log_drops[AQM_DROP_REASONS];
	uint64_t log_marks[AQM_DROP_REASONS];

	struct flow_stats *flows; /* FLOW_TABLE_SIZE + 1 ("other") */
	uint32_t nflows;

	struct deq_sample *samples;
	uint32_t sample_pos;
	uint64_t sample_count;
};

struct link_config {
	const char *if_name[2];
	uint64_t rate_bps[2];
	uint64_t delay_ns[2];
	const char *qdisc[2];
	const char *trace_path[2]; /* --trace, --trace-ba: NULL for a fixed rate */
	const char *loss[2];       /* --loss, --loss-ba: NULL for none */
	uint32_t mtu;
	uint32_t overhead_bytes;
	uint32_t pool_pkts;
	const char *control_path;
	const char *log_path;
	uint64_t log_interval_ns;
	uint64_t seed;
	int seed_given;
	int quiet;
	int sender_threads; /* one sender thread per direction (default) */
	uint64_t release_batch_ns; /* a sender wakes at most this often (0: at every release) */
	uint64_t release_lateness_ns; /* mean artificial lateness of a release (0: none) */
	enum rx_io rx_io;          /* asked for; each direction's ring says what it got */
	struct host_delay host_delay[HOST_DELAY_MAX]; /* --host-delay, both directions */
	unsigned n_host_delay;
	const char *capture_path;  /* --capture: NULL for none */
	uint32_t snaplen;          /* --snaplen */
	uint64_t capture_max_mb;   /* --capture-max-mb */
};

struct link {
	struct link_config cfg;
	struct link_dir dir[2];
	struct pkt_pool pool;
	uint64_t start_ns;
	uint64_t hash_seed;
	uint64_t wakeups;
	FILE *log;
	uint64_t next_log_ns;
	uint64_t log_prev_ns;
	struct capture *cap; /* --capture, or NULL */
};

uint64_t now_ns(void);

/* pipe.c: one direction of the emulated link */
int dir_init(struct link *l, int index, char *err, size_t errlen);
/* After dir_init: the direction's --trace (its average becomes the rate;
 * its time 0 is set when the link starts) and --loss. -1 with err. */
int dir_init_models(struct link_dir *d, char *err, size_t errlen);
void dir_destroy(struct link_dir *d);
/* A frame of len bytes read at t into p (already validated); the caller
 * has served the queue up to t. A frame from a --host-delay host waits out
 * its delay first and reaches the queue at t + that delay. */
void dir_arrive(struct link_dir *d, struct pkt *p, uint32_t len, uint64_t t);
/* Serializer catch-up: start every transmission due by t, admitting the
 * host-delayed frames due by t at their own times on the way. */
void dir_serve(struct link_dir *d, uint64_t t);
/* Return the frames the sender has sent to the pool. */
void dir_reclaim(struct link_dir *d);
/* When the main thread must next serve this direction, or UINT64_MAX. */
uint64_t dir_next_event(const struct link_dir *d);
/* --capture: a frame discarded before the queue at t, avail of its len
 * bytes readable at data; reason is the counter it is in (rx_oversize). */
void dir_capture_discard(struct link_dir *d, uint64_t t, const uint8_t *data, uint32_t avail,
			 uint32_t len, const char *reason);

/* tx.c: the sender thread of a direction */
int tx_start(struct link_dir *d, char *err, size_t errlen);
void tx_stop(struct link_dir *d);
/* --single-thread: send the due frames from the main thread. */
void tx_release_inline(struct link_dir *d);
uint32_t dir_line_len(const struct link_dir *d);
int dir_set_qdisc(struct link_dir *d, const char *spec, char *err, size_t errlen);
int dir_prepare_rate(struct link_dir *d, uint64_t rate_bps, struct aqm_queue **rebuilt,
		     char *err, size_t errlen);
void dir_commit_rate(struct link_dir *d, uint64_t rate_bps, struct aqm_queue *rebuilt);

struct pkt *pool_get(struct pkt_pool *pool);
void pool_put(struct pkt_pool *pool, struct pkt *p);

/* port.c: AF_PACKET sockets */
/* Opens ifname's socket and, unless io is RX_IO_RECVMMSG, maps a receive
 * ring on it (*ring; map stays NULL without one). RX_IO_AUTO falls back to
 * recvmmsg, saying so on stderr; RX_IO_RING fails instead. */
int port_open(const char *ifname, int *ifindex, enum rx_io io, uint32_t max_frame,
	      struct rx_ring *ring, char *err, size_t errlen);
void port_close(int fd, struct rx_ring *ring);
/* After EPOLLERR on d's socket: read (and so clear) the error, count and
 * log it. */
void port_clear_error(struct link_dir *d, const char *ifname);
/* Adds what the kernel dropped on d's socket since the last call to
 * d->rx_kernel_drops (the kernel's counter resets on each read). */
void port_count_kernel_drops(struct link_dir *d);
/* Reads up to budget frames from d->rx_fd into the direction; returns the
 * number of frames read (0 when the socket is drained). */
int port_receive(struct link_dir *d, int budget);
/* Warn when an offload that would hand us super-frames is on. */
void port_check_offloads(const char *ifname);

/* report.c: JSON views */
void report_show(struct link *l, struct jbuf *b);
void report_stats(struct link *l, struct jbuf *b, int max_flows, int dir_mask);
void report_samples(struct link_dir *d, struct jbuf *b, unsigned n);
void report_log_tick(struct link *l, uint64_t t);
const char *drop_reason_key(int why);

/* control.c: UNIX-socket line protocol */
int control_open(struct link *l, int epfd, char *err, size_t errlen);
void control_event(struct link *l, int epfd, void *tag, uint32_t events);
void control_close(struct link *l);

#endif
