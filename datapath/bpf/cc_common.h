/* cc_common.h - what both BPF congestion controls share: the kernel's helpers they call
 * (kfuncs the tcp_congestion_ops struct_ops may use), sequence comparison, and access to the
 * per-connection private area.
 *
 * Built against a vmlinux.h dumped from the running kernel's BTF (the Makefile does it); the
 * programs are CO-RE, so the same object loads on another kernel with BTF and struct_ops.
 */
#ifndef CKCD_CC_COMMON_H
#define CKCD_CC_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* include/net/tcp.h's flags for tcp_congestion_ops.flags (macros, so not in BTF). A network
 * namespace may make only a NON_RESTRICTED control its default, and the DCTCP receiver needs
 * its peer's SYN to negotiate ECN, which only a namespace default set before connect() does. */
#define CC_FLAG_NON_RESTRICTED 0x1
#define CC_FLAG_NEEDS_ECN 0x2
/* include/net/tcp.h's tcp_sock.ecn_flags bits */
#define CC_ECN_OK 0x1
#define CC_ECN_DEMAND_CWR 0x4

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

/* The struct_ops verifier hands a tcp_congestion_ops program its socket as a tcp_sock. */
static __always_inline struct tcp_sock *cc_tcp(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

/* icsk_ca_priv: 104 bytes per connection that belong to the congestion control. */
static __always_inline void *cc_priv(struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* a is after b in sequence space (wraps at 2^32) */
static __always_inline int cc_seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

static __always_inline __u32 cc_max(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

static __always_inline __u32 cc_min(__u32 a, __u32 b)
{
	return a < b ? a : b;
}

#endif
