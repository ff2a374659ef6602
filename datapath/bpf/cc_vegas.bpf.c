// SPDX-License-Identifier: GPL-2.0
/* cc_vegas.bpf.c - TCP Vegas (Brakmo and Peterson, IEEE JSAC 13(8), 1995) as a BPF
 * congestion control, registered as "bpf_vegas": a delay-based sender.
 *
 * Once per round trip (from the snd_nxt at its start until an ACK passes it) Vegas compares
 * the rate it expects, cwnd / BaseRTT, with the rate it got, cwnd / RTT, where BaseRTT is the
 * smallest RTT the connection has seen and RTT the smallest of this round's samples. Their
 * difference times BaseRTT is the number of its own packets sitting in queues:
 *     diff = cwnd (RTT - BaseRTT) / RTT
 * Below alpha (2) it adds a packet to cwnd, above beta (4) it removes one, between it holds.
 * In slow start it leaves once diff exceeds gamma (1), setting cwnd to what the path holds
 * without queueing. A round with fewer than three RTT samples says too little (delayed ACKs,
 * a short window): that round grows as Reno does. Losses are Reno's: half of cwnd.
 */
#include "cc_common.h"

char _license[] SEC("license") = "GPL";

#define VEGAS_ALPHA 2 /* packets queued: below, grow */
#define VEGAS_BETA 4  /* above, shrink */
#define VEGAS_GAMMA 1 /* leave slow start above */
#define NO_RTT 0x7fffffffU

struct vegas {
	__u32 round_end; /* snd_nxt when this round began */
	__u32 base_rtt;	 /* smallest RTT seen, in us */
	__u32 min_rtt;	 /* smallest RTT of this round, in us */
	__u32 samples;	 /* RTT samples this round */
	__u32 active;	 /* 0 during loss recovery: Reno then */
};

static __always_inline void round_start(struct vegas *v, struct tcp_sock *tp)
{
	v->round_end = tp->snd_nxt;
	v->min_rtt = NO_RTT;
	v->samples = 0;
}

SEC("struct_ops/vegas_init")
void BPF_PROG(vegas_init, struct sock *sk)
{
	struct vegas *v = cc_priv(sk);

	v->base_rtt = NO_RTT;
	v->active = 1;
	round_start(v, cc_tcp(sk));
}

SEC("struct_ops/vegas_pkts_acked")
void BPF_PROG(vegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct vegas *v = cc_priv(sk);
	__u32 rtt;

	if (sample->rtt_us <= 0)
		return;
	rtt = (__u32)sample->rtt_us + 1; /* never 0: it divides */
	v->base_rtt = cc_min(v->base_rtt, rtt);
	v->min_rtt = cc_min(v->min_rtt, rtt);
	v->samples++;
}

/* The end of a round with enough samples: cwnd moves by at most one packet (or, leaving
 * slow start, to what the path holds). True when the connection stays in slow start. */
static __always_inline int vegas_adjust(struct tcp_sock *tp, struct vegas *v)
{
	__u32 cwnd = tp->snd_cwnd, rtt = v->min_rtt;
	__u32 diff = (__u32)((__u64)cwnd * (rtt - v->base_rtt) / rtt);

	if (tp->snd_cwnd < tp->snd_ssthresh) {
		if (diff > VEGAS_GAMMA) {
			cwnd = cc_max((__u32)((__u64)cwnd * v->base_rtt / rtt), 2);
			tp->snd_ssthresh = cwnd - 1 > 2 ? cwnd - 1 : 2;
			tp->snd_cwnd = cwnd;
			return 0;
		}
		return 1;
	}
	if (diff > VEGAS_BETA) {
		tp->snd_cwnd = cc_max(cwnd - 1, 2);
		tp->snd_ssthresh = cc_min(tp->snd_ssthresh, tp->snd_cwnd);
	} else if (diff < VEGAS_ALPHA && cwnd < tp->snd_cwnd_clamp) {
		tp->snd_cwnd = cwnd + 1;
	}
	return 0;
}

SEC("struct_ops/vegas_cong_avoid")
void BPF_PROG(vegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = cc_tcp(sk);
	struct vegas *v = cc_priv(sk);

	if (!v->active) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (!cc_seq_after(ack, v->round_end)) {
		if (tp->snd_cwnd < tp->snd_ssthresh)
			tcp_slow_start(tp, acked);
		return;
	}
	if (v->samples < 3 || v->min_rtt == NO_RTT)
		tcp_reno_cong_avoid(sk, ack, acked);
	else if (vegas_adjust(tp, v))
		tcp_slow_start(tp, acked);
	round_start(v, tp);
}

/* Vegas runs only while nothing is being recovered; afterwards it starts a new round. */
SEC("struct_ops/vegas_set_state")
void BPF_PROG(vegas_set_state, struct sock *sk, __u8 new_state)
{
	struct vegas *v = cc_priv(sk);

	v->active = new_state == TCP_CA_Open;
	if (v->active)
		round_start(v, cc_tcp(sk));
}

/* After idle the path may have changed: measure BaseRTT again. */
SEC("struct_ops/vegas_cwnd_event")
void BPF_PROG(vegas_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct vegas *v = cc_priv(sk);

	if (ev == CA_EVENT_CWND_RESTART || ev == CA_EVENT_TX_START) {
		v->base_rtt = NO_RTT;
		round_start(v, cc_tcp(sk));
	}
}

SEC("struct_ops/vegas_ssthresh")
__u32 BPF_PROG(vegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/vegas_undo_cwnd")
__u32 BPF_PROG(vegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops ckcd_bpf_vegas = {
	.init = (void *)vegas_init,
	.pkts_acked = (void *)vegas_pkts_acked,
	.cong_avoid = (void *)vegas_cong_avoid,
	.set_state = (void *)vegas_set_state,
	.cwnd_event = (void *)vegas_cwnd_event,
	.ssthresh = (void *)vegas_ssthresh,
	.undo_cwnd = (void *)vegas_undo_cwnd,
	.flags = CC_FLAG_NON_RESTRICTED,
	.name = "bpf_vegas",
};
