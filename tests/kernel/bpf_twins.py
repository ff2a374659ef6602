"""Our BPF congestion controls against their kernel twins, in a kernel VM's boot.

bpf_dctcp and bpf_vegas (datapath/bpf, struct_ops registered by the guest's bpftool) and
Linux's tcp_dctcp and tcp_vegas modules, loaded by name, each carry one flow alone for SECONDS
through r's 20 Mbit/s HTB class (20 ms RTT; the namespaces of test_kernel_lines' script), and
a CUBIC flow first through the Vegas runs' FIFO, the queue a loss-based sender builds there:
- DCTCP through fq_codel with ce_threshold 4 ms, a step marking at K = 4 ms (6.6 packets, over
  RFC 8257's guideline of a seventh of the BDP, 4.7 packets, for full throughput), its CoDel
  target at 30 ms so that the step alone marks;
- Vegas through a 100-packet FIFO: its queue is its own alpha-beta of 2-4 packets, where
  CUBIC's is the buffer.

SCRIPT is a part of the boot's script (its step function, $IP, $TC, $R and the a-r-b
namespaces); run() parses one flow's output, run_twins() a twins step's (Linux's control, then
ours, measured as one step so that the host judges the pair's steal together).
"""

from __future__ import annotations

import json
import re

from experiments.lab import bpf_cc

# The guest's copy of the host's bpftool (lab.run's programs), the objects at /lab/<source>.bpf.o.
BPFTOOL = "/usr/sbin/bpftool"
MODULES = ("tcp_dctcp", "tcp_vegas")
SECONDS = 10
DCTCP_LEAF = "fq_codel ce_threshold 4ms target 30ms"
FIFO_LEAF = "pfifo limit 100"

SCRIPT = r"""
# BPF congestion controls against their kernel twins (tests/kernel/bpf_twins.py).
BPFTOOL=@@BPFTOOL@@
step cc_setup sh -c "modprobe tcp_dctcp && modprobe tcp_vegas &&
  sysctl -qw net.ipv4.tcp_allowed_congestion_control='reno cubic dctcp vegas' &&
  $BPFTOOL struct_ops register /lab/cc_dctcp.bpf.o && $BPFTOOL struct_ops register /lab/cc_vegas.bpf.o &&
  cat /proc/sys/net/ipv4/tcp_available_congestion_control"
# CC PORT SECONDS LEAF...: one flow of CC through the leaf; the leaf's backlog every 0.25 s (and a tc run), its
# tc -s, iperf3's JSON. CC is both namespaces' default for the run and b's listener (on a port of
# its own: the last run's one-off server may still hold its port) is made after: a control that
# needs ECN asks for it in its SYN, and b accepts an ECT SYN only on a listener of a control that
# needs ECN too (whose ACKs then echo each CE mark as it comes). Every way out leaves no leaf and
# CUBIC the default.
one_flow() {
  cc=$1; port=$2; t=$3; shift 3
  # a measured run again on the same port: the last run's one-off server is leaving (<= 5 s)
  hex=$(printf '%04X' $port); i=0
  while $IP netns exec b cat /proc/net/tcp /proc/net/tcp6 | grep -qE ":$hex [0-9A-F]+:0000 0A" && [ $i -lt 50 ]
  do sleep 0.1; i=$((i+1)); done
  $IP netns exec a sysctl -qw net.ipv4.tcp_congestion_control=$cc &&
    $IP netns exec b sysctl -qw net.ipv4.tcp_congestion_control=$cc &&
    htb_class 20mbit && $R qdisc add dev rb parent 1:1 handle 10: "$@" &&
    $IP netns exec b iperf3 -s -1 -D -p $port && flow_through $port $t; r=$?
  $R qdisc del dev rb root 2>/dev/null
  $IP netns exec a sysctl -qw net.ipv4.tcp_congestion_control=cubic; $IP netns exec b sysctl -qw net.ipv4.tcp_congestion_control=cubic
  return $r
}
flow_through() {  # PORT SECONDS
  # iperf3 -D returns before it listens: wait (<= 5 s) for the port, in hex, in state LISTEN (0A)
  hex=$(printf '%04X' $1); i=0
  until $IP netns exec b cat /proc/net/tcp /proc/net/tcp6 | grep -qE ":$hex [0-9A-F]+:0000 0A" || [ $i -ge 50 ]
  do sleep 0.1; i=$((i+1)); done
  $IP netns exec a iperf3 -c 10.8.2.1 -p $1 -t $2 -J > /tmp/one.json 2>&1 & f=$!
  # tc prints a backlog near a multiple of 1024 bytes as e.g. 34Kb: the packets are what counts
  while kill -0 $f 2>/dev/null; do
    echo "@backlog $($R -s qdisc show dev rb parent 1:1 | grep -oE 'backlog [0-9.]+[KMG]?b [0-9]+p')"; sleep 0.25
  done
  wait $f; r=$?
  $R -s qdisc show dev rb parent 1:1; cat /tmp/one.json
  return $r
}
# LINUX_CC PORT OURS PORT SECONDS LEAF...: the twins one after the other, in one measured step, so
# that the host judges them as a pair: a spell of steal during either runs both again (two
# steps judged apart could compare a run at 29 % steal with one at 21 %)
twins() {
  lin=$1; lp=$2; ours=$3; op=$4; t=$5; shift 5
  one_flow $lin $lp $t "$@"; tr=$?; echo "@@TWIN"; one_flow $ours $op $t "$@" && return $tr  # one_flow sets r
}
measured cc_cubic one_flow cubic 5311 @@SECONDS@@ @@FIFO@@
measured cc_dctcp_twins twins dctcp 5312 bpf_dctcp 5313 @@SECONDS@@ @@DCTCP@@
measured cc_vegas_twins twins vegas 5314 bpf_vegas 5315 @@SECONDS@@ @@FIFO@@
step cc_unregister sh -c "$BPFTOOL struct_ops unregister name ckcd_bpf_dctcp &&
  $BPFTOOL struct_ops unregister name ckcd_bpf_vegas && cat /proc/sys/net/ipv4/tcp_available_congestion_control"
"""


def script() -> str:
    return (SCRIPT.replace("@@BPFTOOL@@", BPFTOOL).replace("@@SECONDS@@", str(SECONDS))
            .replace("@@FIFO@@", FIFO_LEAF).replace("@@DCTCP@@", DCTCP_LEAF))


def files() -> dict[str, str]:
    """The guest files: our controls' objects, built on the host (CO-RE: they load on the guest's
    kernel by its BTF)."""
    bpf_cc.build()
    return {f"lab/{c.source}.bpf.o": f"{bpf_cc.BPF_DIR}/build/{c.source}.bpf.o" for c in bpf_cc.BPF_CONTROLS.values()}


def run(out: str) -> dict:
    """One one_flow step: goodput (Mbit/s, iperf3's receiver), the sender's retransmits and mean
    RTT (ms), the leaf's packets sent, drops and CE marks (fq_codel's ce_mark), and its backlog in
    packets sampled about twice a second (mean, max)."""
    result = json.loads(out[out.index("\n{") + 1:])
    assert "error" not in result, result["error"]
    sender = result["end"]["streams"][0]["sender"]
    sent = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+)", out)
    backlog = [int(x) for x in re.findall(r"^@backlog backlog \S+ (\d+)p", out, re.M)]
    ce = re.search(r"\bce_mark (\d+)", out)
    # a sample every 0.25 s plus an `ip netns exec r tc` under TCG, itself ~0.25 s: 19 in 10 s
    # measured; one a second is enough for a mean
    assert sent and len(backlog) >= SECONDS, (len(backlog), out[:3000])
    return {"mbps": result["end"]["sum_received"]["bits_per_second"] / 1e6,
            "retransmits": sender["retransmits"], "rtt_ms": sender["mean_rtt"] / 1000,
            "sent": int(sent.group(1)), "dropped": int(sent.group(2)), "ce": int(ce.group(1)) if ce else 0,
            "backlog": (sum(backlog) / len(backlog), max(backlog))}


def run_twins(out: str) -> tuple[dict, dict]:
    """One twins step: run() of Linux's control and of ours."""
    lin, ours = out.split("\n@@TWIN\n", 1)
    return run(lin), run(ours)


def line(r: dict) -> str:
    return (f"{r['mbps']:.2f} Mbit/s, {r['retransmits']} retransmits, RTT {r['rtt_ms']:.1f} ms, {r['sent']} sent, "
            f"{r['dropped']} dropped, {r['ce']} CE, backlog mean/max {r['backlog'][0]:.1f}/{r['backlog'][1]} packets")
