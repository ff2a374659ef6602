// SPDX-License-Identifier: GPL-2.0
/* cc_dctcp.bpf.c - DCTCP (RFC 8257) as a BPF congestion control, registered as "bpf_dctcp".
 *
 * Sender (RFC 8257 section 3.3): over each observation window of about one RTT (from the
 * snd_nxt at its start until snd_una passes it) the fraction F of delivered packets that were
 * CE-marked updates alpha <- (1 - g) alpha + g F, g = 1/16; an ECE reduces cwnd to
 * cwnd (1 - alpha / 2) once per window (the kernel calls ssthresh once per CWR episode). A loss
 * halves cwnd as standard TCP does (section 3.5). The delivered and CE-delivered counts are the
 * kernel's own (tcp_sock.delivered, delivered_ce), so CE is counted per packet, not per ACK.
 *
 * Receiver (section 3.2): ECE on every ACK follows the CE state of the packets it covers. A
 * change of that state is acknowledged at once; with a delayed ACK pending, the packets received
 * before the change are acknowledged first, with the old state, so one ACK never mixes the two.
 *
 * alpha starts at 1 (a fresh connection reacts to its first marks as standard ECN does, RFC
 * 8257 section 4.2 leaves the initial value open).
 */
#include "cc_common.h"

char _license[] SEC("license") = "GPL";

#define ALPHA_ONE 1024U /* alpha in [0, 1], scaled */
#define G_SHIFT 4	/* g = 2^-4 = 1/16 (RFC 8257 section 4.2) */

struct dctcp {
	__u32 window_end;	  /* snd_nxt when the window began */
	__u32 delivered_at_start; /* tcp_sock.delivered then */
	__u32 ce_at_start;	  /* tcp_sock.delivered_ce then */
	__u32 alpha;		  /* scaled by ALPHA_ONE */
	__u32 loss_cwnd;	  /* cwnd before the last reduction, for undo */
	__u32 rx_ce;		  /* receiver: the last data packet was CE */
	__u32 rx_prior_rcv_nxt;	  /* receiver: rcv_nxt at the last CE-state event */
};

static __always_inline void window_start(struct dctcp *ca, struct tcp_sock *tp)
{
	ca->window_end = tp->snd_nxt;
	ca->delivered_at_start = tp->delivered;
	ca->ce_at_start = tp->delivered_ce;
}

SEC("struct_ops/dctcp_init")
void BPF_PROG(dctcp_init, struct sock *sk)
{
	struct dctcp *ca = cc_priv(sk);

	window_start(ca, cc_tcp(sk));
	ca->alpha = ALPHA_ONE;
	ca->loss_cwnd = 0;
	ca->rx_ce = 0;
	ca->rx_prior_rcv_nxt = cc_tcp(sk)->rcv_nxt;
}

/* At the end of each observation window: alpha <- alpha - alpha g + F g. */
SEC("struct_ops/dctcp_in_ack_event")
void BPF_PROG(dctcp_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = cc_tcp(sk);
	struct dctcp *ca = cc_priv(sk);
	__u32 delivered, marked;
	__u64 gain = 0;

	if (cc_seq_after(ca->window_end, tp->snd_una))
		return;
	delivered = tp->delivered - ca->delivered_at_start;
	marked = tp->delivered_ce - ca->ce_at_start;
	/* A window that delivered nothing (it began with nothing in flight) has no F: alpha
	 * stays. Otherwise it must be able to decay to 0 (RFC 8257 section 4.2): below 16/1024
	 * alpha >> G_SHIFT is 0, so the whole of alpha goes. */
	if (delivered > 0) {
		__u32 decay = ca->alpha >> G_SHIFT;

		gain = ((__u64)cc_min(marked, delivered) * ALPHA_ONE / delivered) >> G_SHIFT;
		ca->alpha = ca->alpha - (decay ? decay : ca->alpha) + (__u32)gain;
		if (ca->alpha > ALPHA_ONE)
			ca->alpha = ALPHA_ONE;
	}
	window_start(ca, tp);
}

/* An ECE: cwnd (1 - alpha / 2). A loss halves instead: fast recovery in dctcp_set_state, a
 * retransmission timeout in dctcp_cwnd_event (CA_EVENT_LOSS). */
SEC("struct_ops/dctcp_ssthresh")
__u32 BPF_PROG(dctcp_ssthresh, struct sock *sk)
{
	struct dctcp *ca = cc_priv(sk);
	__u32 cwnd = cc_tcp(sk)->snd_cwnd;

	ca->loss_cwnd = cwnd;
	return cc_max(cwnd - (__u32)(((__u64)cwnd * ca->alpha) >> 11), 2);
}

/* A loss: standard TCP's halving (RFC 8257 section 3.5) of the cwnd the loss found. */
static __always_inline void react_to_loss(struct sock *sk)
{
	struct tcp_sock *tp = cc_tcp(sk);
	struct dctcp *ca = cc_priv(sk);

	ca->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = cc_max(tp->snd_cwnd >> 1, 2);
}

/* Only Recovery here: the kernel calls set_state(TCP_CA_Loss) after tcp_enter_loss() has set
 * cwnd to packets in flight + 1, so halving there gave ssthresh 2 and an undo to nothing.
 * A timeout is handled at CA_EVENT_LOSS, sent right after ssthresh() with cwnd untouched and
 * once per window (tcp_enter_loss). */
SEC("struct_ops/dctcp_set_state")
void BPF_PROG(dctcp_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Recovery &&
	    new_state != ((struct inet_connection_sock *)sk)->icsk_ca_state)
		react_to_loss(sk);
}

static __always_inline void set_ece(struct tcp_sock *tp, __u32 ce)
{
	if (ce)
		tp->ecn_flags |= CC_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~CC_ECN_DEMAND_CWR;
}

/* Receiver: a change of CE state with a delayed ACK pending acknowledges what came before
 * the change at once, with the old ECE (set again here: a CWR from the sender may have
 * cleared DEMAND_CWR since), and the packet that changed it is acknowledged at once too
 * (RFC 8257 section 3.2: an immediate ACK on every change of state). */
static __always_inline void rx_ce_state(struct sock *sk, __u32 ce)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct tcp_sock *tp = cc_tcp(sk);
	struct dctcp *ca = cc_priv(sk);

	if (ca->rx_ce != ce) {
		if (icsk->icsk_ack.pending & ICSK_ACK_TIMER) {
			set_ece(tp, ca->rx_ce);
			bpf_tcp_send_ack(tp, ca->rx_prior_rcv_nxt);
		}
		icsk->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	ca->rx_ce = ce;
	ca->rx_prior_rcv_nxt = tp->rcv_nxt;
	set_ece(tp, ce);
}

SEC("struct_ops/dctcp_cwnd_event")
void BPF_PROG(dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == CA_EVENT_ECN_IS_CE)
		rx_ce_state(sk, 1);
	else if (ev == CA_EVENT_ECN_NO_CE)
		rx_ce_state(sk, 0);
	else if (ev == CA_EVENT_LOSS)
		react_to_loss(sk);
}

SEC("struct_ops/dctcp_cong_avoid")
void BPF_PROG(dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/dctcp_undo_cwnd")
__u32 BPF_PROG(dctcp_undo_cwnd, struct sock *sk)
{
	struct dctcp *ca = cc_priv(sk);

	return cc_max(cc_tcp(sk)->snd_cwnd, ca->loss_cwnd);
}

SEC(".struct_ops")
struct tcp_congestion_ops ckcd_bpf_dctcp = {
	.init = (void *)dctcp_init,
	.in_ack_event = (void *)dctcp_in_ack_event,
	.ssthresh = (void *)dctcp_ssthresh,
	.set_state = (void *)dctcp_set_state,
	.cwnd_event = (void *)dctcp_cwnd_event,
	.cong_avoid = (void *)dctcp_cong_avoid,
	.undo_cwnd = (void *)dctcp_undo_cwnd,
	.flags = CC_FLAG_NEEDS_ECN | CC_FLAG_NON_RESTRICTED,
	.name = "bpf_dctcp",
};
