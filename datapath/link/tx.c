/* tx.c - the sender thread of one direction: sleeps until the delay line's
 * head is due, sends every due frame with sendmmsg, hands the sent frames
 * back to the main thread. See the threading note in link.h. */
#define _GNU_SOURCE
#include "link.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define TX_BATCH 64

static void raise_max(uint64_t *max, uint64_t v)
{
	uint64_t cur = __atomic_load_n(max, __ATOMIC_RELAXED);

	while (v > cur && !__atomic_compare_exchange_n(max, &cur, v, 0, __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

static void give_back(struct link_dir *d, struct pkt *p)
{
	d->freed[d->freed_tail & d->line_mask] = p;
	__atomic_store_n(&d->freed_tail, d->freed_tail + 1, __ATOMIC_RELEASE);
}

/* A frame sent at t, in both lateness records. schedule: t against its
 * release_ns, so a --release-lateness hold and the wait behind a frame held
 * longer (the line is FIFO) count. own: t against the earliest the frame
 * could leave given those, the running max of pkt_send_at over the frames
 * sent so far (eff_due_ns): what the daemon itself added, a late wake-up or
 * a busy sender, which a hold must not hide. Without holds release_ns only
 * grows along the line (unless set_link lowered the delay), so own is
 * schedule. Never negative: each frame sent was due by its t, and t only
 * grows. */
static void count_late(struct link_dir *d, const struct pkt *p, uint64_t t)
{
	uint64_t late = t - p->release_ns;

	if (pkt_send_at(p) > d->eff_due_ns)
		d->eff_due_ns = pkt_send_at(p);
	late_hist_add(&d->late, late);
	late_hist_add(&d->own_late, t - d->eff_due_ns);
	raise_max(&d->log_late_max_ns, late);
}

/* p's entry of a sendmmsg batch: out of d's interface, with p's own
 * ethertype (the kernel takes the protocol from the address). */
static void put_msg(const struct link_dir *d, struct pkt *p, struct mmsghdr *msg,
		    struct iovec *iov, struct sockaddr_ll *to)
{
	iov->iov_base = p->data;
	iov->iov_len = p->aqm.len;
	memset(to, 0, sizeof(*to));
	to->sll_family = AF_PACKET;
	to->sll_ifindex = d->tx_ifindex;
	memcpy(&to->sll_protocol, p->data + 12, 2); /* ethertype, network order */
	memset(msg, 0, sizeof(*msg));
	msg->msg_hdr.msg_name = to;
	msg->msg_hdr.msg_namelen = sizeof(*to);
	msg->msg_hdr.msg_iov = iov;
	msg->msg_hdr.msg_iovlen = 1;
}

/* Sends the frames due at t (at most TX_BATCH); returns how many left the
 * line. */
static int send_due(struct link_dir *d, uint32_t tail, uint64_t t)
{
	struct mmsghdr msgs[TX_BATCH];
	struct iovec iov[TX_BATCH];
	struct sockaddr_ll to[TX_BATCH];
	struct pkt *batch[TX_BATCH];
	int lost[TX_BATCH];
	uint32_t head = d->line_head;
	int n = 0, sent = 0;

	while (n < TX_BATCH && head != tail) {
		struct pkt *p = d->line[head & d->line_mask];

		if (pkt_send_at(p) > t)
			break;
		head++;
		batch[n] = p;
		lost[n] = 0;
		put_msg(d, p, &msgs[n], &iov[n], &to[n]);
		count_late(d, p, t);
		n++;
	}
	if (n == 0)
		return 0;
	__atomic_store_n(&d->line_head, head, __ATOMIC_RELEASE);
	while (sent < n) {
		int r = sendmmsg(d->tx_fd, msgs + sent, (unsigned)(n - sent), MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			COUNTER_ADD(d->tx_errors, 1); /* this frame is lost; go on with the rest */
			lost[sent] = 1;
			sent++;
			continue;
		}
		sent += r;
	}
	for (int i = 0; i < n; i++) {
		struct pkt *p = batch[i];

		if (!lost[i]) {
			struct flow_stats *f = &d->flows[p->flow_idx];
			COUNTER_ADD(f->tx_pkts, 1);
			COUNTER_ADD(f->tx_bytes, p->aqm.len);
			COUNTER_ADD(d->tx_frames, 1);
			COUNTER_ADD(d->tx_bytes, p->aqm.len);
		}
		give_back(d, p);
	}
	return n;
}

void tx_release_inline(struct link_dir *d)
{
	while (send_due(d, d->line_tail, now_ns()) == TX_BATCH)
		;
}

/* With a head queued (else both stay UINT64_MAX): *deadline, when the
 * sender next wakes to send, and *head_due, what it tells the main thread
 * it waits for (tx_sleep_until). */
static void head_times(const struct link_dir *d, uint32_t tail, uint64_t last_send,
		       uint64_t *head_due, uint64_t *deadline)
{
	uint64_t batch = d->link->cfg.release_batch_ns;
	const struct pkt *h;

	if (d->line_head == tail)
		return;
	h = d->line[d->line_head & d->line_mask];
	/* The head is sent when --release-lateness lets it (pipe.c), but
	 * the main thread is told its release, as with no lateness: a
	 * frame queued behind it and released before that must not wake
	 * us for nothing (the line is FIFO), and tx_wake keeps measuring
	 * the wake-ups alone. */
	*head_due = h->release_ns;
	*deadline = pkt_send_at(h);
	/* --release-batch: a wake-up costs tens of us of CPU on a VM
	 * (docs/ckcd-link.md), one per frame without batching; with it,
	 * the next send waits until a batch after the last one, and
	 * what is due by then leaves together, late by under a batch
	 * (the lateness statistics count it). */
	if (batch && *deadline < last_send + batch)
		*deadline = last_send + batch;
}

static void *tx_main(void *arg)
{
	struct link_dir *d = arg;
	struct pollfd pfd = {.fd = d->tx_wake_fd, .events = POLLIN};
	uint64_t last_send = 0;

	/* Per thread: release times are only as good as the wake-ups. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	while (!__atomic_load_n(&d->tx_stop, __ATOMIC_ACQUIRE)) {
		uint32_t tail = __atomic_load_n(&d->line_tail, __ATOMIC_ACQUIRE);
		uint64_t t = now_ns(), deadline = UINT64_MAX, head_due = UINT64_MAX;
		struct timespec ts, *timeout = NULL;
		int r;

		if (send_due(d, tail, t) > 0) {
			last_send = t;
			continue;
		}
		head_times(d, tail, last_send, &head_due, &deadline);
		/* Announce the sleep, then look again: a frame queued in
		 * between is either seen here or signalled by the main thread.
		 * The main thread wakes us for a frame due before head_due:
		 * the line is FIFO, so with a head queued none is. */
		__atomic_store_n(&d->tx_sleep_until, head_due, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&d->line_tail, __ATOMIC_SEQ_CST) != tail ||
		    __atomic_load_n(&d->tx_stop, __ATOMIC_SEQ_CST)) {
			__atomic_store_n(&d->tx_sleep_until, 0, __ATOMIC_SEQ_CST);
			continue;
		}
		if (deadline != UINT64_MAX) {
			uint64_t wait = deadline > t ? deadline - t : 0;
			ts.tv_sec = (time_t)(wait / 1000000000ull);
			ts.tv_nsec = (long)(wait % 1000000000ull);
			timeout = &ts;
		}
		r = ppoll(&pfd, 1, timeout, NULL);
		__atomic_store_n(&d->tx_sleep_until, 0, __ATOMIC_SEQ_CST);
		if (r > 0) {
			uint64_t v;
			if (read(d->tx_wake_fd, &v, sizeof(v)) < 0) {
				/* already drained */
			}
		} else if (r == 0) {
			/* How late the wake-up itself was: the part of release
			 * lateness the scheduler/VM caused, not the sending. */
			uint64_t woke = now_ns();
			late_hist_add(&d->tx_wake, woke > deadline ? woke - deadline : 0);
		}
	}
	return NULL;
}

int tx_start(struct link_dir *d, char *err, size_t errlen)
{
	int e;

	d->tx_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->tx_wake_fd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return -1;
	}
	e = pthread_create(&d->tx_thread, NULL, tx_main, d);
	if (e) {
		snprintf(err, errlen, "sender thread: %s", strerror(e));
		return -1;
	}
	d->tx_started = 1;
	return 0;
}

void tx_stop(struct link_dir *d)
{
	uint64_t one = 1;

	if (!d->tx_started)
		return;
	__atomic_store_n(&d->tx_stop, 1, __ATOMIC_SEQ_CST);
	if (write(d->tx_wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: the thread will wake */
	}
	pthread_join(d->tx_thread, NULL);
	d->tx_started = 0;
	close(d->tx_wake_fd);
	d->tx_wake_fd = -1;
}
