"""sch_ckcd.ko and q_ckcd.so in a real kernel (Debian 12's 6.1 under qemu, tests/kernel/lab.py).

One boot for the whole module: a guest script runs every step below in order and prints,
per step, its output and exit code between markers; each test then checks one step like
Linux's tc-testing cases do (a command, its expected exit code, a `tc -s qdisc show`
pattern). Traffic: UDP through a veth pair into a namespace, shaped by an HTB class of
1 Mbit/s with ckcd as its leaf, so the leaf's queue fills and drops; then BBR against CUBIC
through a router namespace whose 20 Mbit/s HTB class has the leaf under test (ckcd against
pfifo, the core's RED/CHOKe/CoDel/SFB/FQ-CoDel/PIE against Linux's), and one ckcd leaf's
record replayed through ckcd-replay (docs/kernel.md).
"""

import json
import re
import subprocess
from collections import Counter

import pytest

from tests.conftest import REPO
from tests.datapath.replaylib import build as replay_bin
from tests.kernel import lab

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

SCRIPT = r"""
export TC_LIB_DIR=/lab
step() { n=$1; shift; echo "@@BEGIN $n"; "$@" 2>&1; echo "@@END $n rc=$?"; }
""" + lab.MEASURED + r"""show() { $TC -s qdisc show dev v0; }

step load insmod /lab/sch_ckcd.ko
step veth sh -c "$IP link add v0 type veth peer name v1 && $IP link set v0 up && $IP link set v1 up"
step add_root $TC qdisc add dev v0 root handle 1: ckcd limit 80 delta 100ms d 5ms rate 100mbit rtt 20ms
step show_root $TC qdisc show dev v0
step bad_limit $TC qdisc change dev v0 root ckcd limit 0
step bad_conflict $TC qdisc change dev v0 root ckcd dth_min 60ms
step bad_name $TC qdisc change dev v0 root ckcd lmit 3
step show_after_bad $TC qdisc show dev v0
step core_spelling $TC qdisc change dev v0 root ckcd limit=81 d_ms=0.5 rate_bps=20000000
step show_core_spelling $TC qdisc show dev v0
step other_disc $TC qdisc change dev v0 root ckcd disc red limit 200
step show_other_disc $TC qdisc show dev v0
step bands_spec $TC qdisc change dev v0 root ckcd spec "bands map=46:0 | ckcd limit=40 | droptail limit=40"
step show_bands $TC qdisc show dev v0
step bad_spec_value $TC qdisc change dev v0 root ckcd spec "ckcd limit=abc"
step empty_spec $TC qdisc change dev v0 root ckcd spec ""
step bad_child $TC qdisc change dev v0 root ckcd spec "bands | bands | droptail"
step show_after_bad_spec $TC qdisc show dev v0
step unknown_disc $TC qdisc change dev v0 root ckcd spec "nosuch limit=3"
step del_root $TC qdisc del dev v0 root
# ecn where the discipline has none, and out of range: refused, the old configuration kept
step ecn_bad_base $TC qdisc add dev v0 root ckcd limit 77
step ecn_bad_disc $TC qdisc change dev v0 root ckcd spec "droptail ecn=1"
step ecn_bad_value $TC qdisc change dev v0 root ckcd ecn 2
step ecn_bad_kept $TC qdisc show dev v0
step ecn_bad_del $TC qdisc del dev v0 root

# change keeps what it is not told; a whole spec replaces; no options is refused
step chg_base $TC qdisc add dev v0 root ckcd limit 80 delta 100ms d 5ms rate 100mbit rtt 20ms
step chg_keep sh -c "$TC qdisc change dev v0 root ckcd limit 120 && $TC qdisc show dev v0"
step chg_empty $TC qdisc change dev v0 root ckcd
step chg_after_empty $TC qdisc show dev v0
step chg_to_red sh -c "$TC qdisc change dev v0 root ckcd disc red limit 200 && $TC qdisc show dev v0"
step chg_red_keep sh -c "$TC qdisc change dev v0 root ckcd max_p 0.05 && $TC qdisc show dev v0"
step chg_red_nod $TC qdisc change dev v0 root ckcd d 5ms
step chg_spec sh -c "$TC qdisc change dev v0 root ckcd spec 'ckcd limit=90' && $TC qdisc show dev v0"
# 8 ckcd bands: the dump is longer than any fixed buffer of old, and must come whole
step long_spec $TC qdisc change dev v0 root ckcd spec "bands map=46:0 | ckcd | ckcd | ckcd | ckcd | ckcd | ckcd | ckcd | ckcd"
step long_json $TC -j qdisc show dev v0
step del_chg $TC qdisc del dev v0 root

# The memory a spec may ask for is capped by the module parameter max_packets.
MAXP=/sys/module/sch_ckcd/parameters/max_packets
step cap_default cat $MAXP
step cap_one $TC qdisc add dev v0 root ckcd disc droptail limit 100001
step cap_bands $TC qdisc add dev v0 root ckcd spec "bands | droptail limit=60000 | droptail limit=60000"
step cap_raise sh -c "echo 200000 > $MAXP && $TC qdisc add dev v0 root ckcd spec 'bands | droptail limit=60000 | droptail limit=60000' && $TC qdisc del dev v0 root"
step cap_restore sh -c "echo 100000 > $MAXP && cat $MAXP"
step cap_zero sh -c "echo 0 > $MAXP"
step cap_gone $TC qdisc show dev v0

step htb sh -c "$TC qdisc add dev v0 root handle 1: htb default 1 && \
  $TC class add dev v0 parent 1: classid 1:1 htb rate 1mbit ceil 1mbit"
# qmin/qmax near the limit and d_th above this queue's ~0.5 s of delay leave a standing
# queue for the change step to carry over (CKCD's defaults at 1 Mbit/s and 20 ms keep 2-5
# packets). The limit stays below what the senders' socket buffers hold in flight (~90
# packets each), or UDP blocks in send instead of being dropped.
LEAF="rate 1mbit qmin 40 qmax 55 dth_min 5s dth_max 10s delta 10s"
step add_leaf $TC qdisc add dev v0 parent 1:1 handle 10: ckcd limit 60 $LEAF
step netns sh -c "$IP addr add 10.9.0.1/24 dev v0 && $IP netns add ns && $IP link set v1 netns ns && \
  $IP -n ns addr add 10.9.0.2/24 dev v1 && $IP -n ns link set v1 up && $IP -n ns link set lo up"
step ping ping -c 2 -W 2 10.9.0.2
$IP netns exec ns iperf3 -s -D -p 5201
$IP netns exec ns iperf3 -s -D -p 5202
$IP netns exec ns iperf3 -s -D -p 5203  # 5203/5204 for the pool's test: a server may still
$IP netns exec ns iperf3 -s -D -p 5204  # be closing the previous test when the next one starts
sleep 0.5
# Two UDP flows at 4 Mbit/s each into the 1 Mbit/s class: the leaf fills and drops. The waits
# below return at once on a host that gives the guest its CPU; the flows last long enough for
# them on one that does not (the leaf filled to 19 packets in 2.5 s at 39 % steal).
# the packets queued in leaf 10: (read from show's output)
leaf_backlog() { sed -n '/qdisc ckcd 10:/,$p' | grep -o 'backlog [0-9]*b [0-9]*p' | head -1 | sed 's/.* //; s/p//'; }
backlog() { show | leaf_backlog; }
# waits (0.1 s polls, at most 4 s) until the leaf holds at least $1 packets
wait_backlog() { i=0; while [ "$(backlog)" -lt "$1" ] && [ $i -lt 40 ]; do sleep 0.1; i=$((i+1)); done; }
iperf3 -c 10.9.0.2 -p 5201 -u -b 4M -l 1200 -t 15 >/dev/null 2>&1 & u1=$!
iperf3 -c 10.9.0.2 -p 5202 -u -b 4M -l 1200 -t 15 >/dev/null 2>&1 & u2=$!
# the snapshot that shows the standing queue, taken when it holds 21 packets or more (CKCD's
# CHOKe-like drops keep it near 20 at times; <= 4 s): the change follows it at once
full_show() { i=0; while out=$(show); [ "$(echo "$out" | leaf_backlog)" -lt 21 ] && [ $i -lt 40 ]; do
  sleep 0.1; i=$((i+1)); done; echo "$out"; }
sleep 2.5
step before_change full_show
step change_empty $TC qdisc change dev v0 parent 1:1 handle 10: ckcd
step change_leaf $TC qdisc change dev v0 parent 1:1 handle 10: ckcd limit 100 $LEAF
step after_change show
# both flows in the leaf at once (<= 4 s): a host that withheld the guest's CPU can leave one
# sender's packets out of a snapshot
active() { show | grep -oE 'active_flows [0-9]+' | grep -oE '[0-9]+$'; }
sleep 1; i=0; while [ "$(active)" -lt 2 ] 2>/dev/null && [ $i -lt 40 ]; do sleep 0.1; i=$((i+1)); done
step traffic show
step json $TC -j -s qdisc show dev v0
# reset with packets queued (device down), the senders stopped first so that between the two
# shows packets only leave; then destroy with packets queued, the senders going on
kill -STOP $u1 $u2
step reset_before show
step reset sh -c "$IP link set v0 down && $TC -s qdisc show dev v0 && $IP link set v0 up"
kill -CONT $u1 $u2
wait_backlog 10
step del_with_backlog $TC qdisc del dev v0 root
kill $u1 $u2 2>/dev/null; wait

# The descriptor pool grows at change: droptail limit 20 (a pool of 21) under the same
# overload, then limit 150: the queue must grow past 21 packets. Shrink to 10 (the excess
# dropped as overflow), and grow again (the pool kept its 151).
step grow_setup sh -c "$TC qdisc add dev v0 root handle 1: htb default 1 && \
  $TC class add dev v0 parent 1: classid 1:1 htb rate 1mbit ceil 1mbit && \
  $TC qdisc add dev v0 parent 1:1 handle 10: ckcd disc droptail limit 20"
iperf3 -c 10.9.0.2 -p 5203 -u -b 4M -l 1200 -t 6 >/dev/null 2>&1 &
iperf3 -c 10.9.0.2 -p 5204 -u -b 4M -l 1200 -t 6 >/dev/null 2>&1 &
wait_backlog 20
step grow_before show
step grow_change $TC qdisc change dev v0 parent 1:1 handle 10: ckcd disc droptail limit 150
wait_backlog 60
step grow_after show
step shrink_change sh -c "$TC qdisc change dev v0 parent 1:1 handle 10: ckcd disc droptail limit 10 && \
  $TC -s qdisc show dev v0"
step regrow_change $TC qdisc change dev v0 parent 1:1 handle 10: ckcd disc droptail limit 150
wait_backlog 60
step regrow_after show
wait
step grow_del $TC qdisc del dev v0 root

# TCP: BBR against CUBIC from namespace a to b through a router namespace r, whose egress
# towards b is an HTB class of 20 Mbit/s with the leaf under test; netem delays b's ACKs by
# 20 ms (the RTT; BDP 33 packets). A forwarded bottleneck, because a sender's own qdisc
# never overflows (TCP small queues hold the socket back). Offloads off on every veth, so
# a packet limit counts 1514-byte frames (docs/architecture.md).
step tcp_setup sh -c '
for n in a r b; do $IP netns add $n && $IP -n $n link set lo up || exit 1; done
$IP link add va netns a type veth peer name ra netns r && $IP link add rb netns r type veth peer name vb netns b || exit 1
$IP -n a addr add 10.8.1.1/24 dev va && $IP -n r addr add 10.8.1.254/24 dev ra &&
$IP -n r addr add 10.8.2.254/24 dev rb && $IP -n b addr add 10.8.2.1/24 dev vb || exit 1
for x in a:va r:ra r:rb b:vb; do n=${x%:*}; d=${x#*:}
  $IP -n $n link set $d up && $IP netns exec $n /usr/sbin/ethtool -K $d tso off gso off gro off || exit 1; done
$IP -n a route add default via 10.8.1.254 && $IP -n b route add default via 10.8.2.254 &&
$IP netns exec r sysctl -qw net.ipv4.ip_forward=1 &&
modprobe tcp_bbr && modprobe sch_netem && modprobe sch_red && modprobe sch_choke && modprobe sch_sfb && modprobe sch_pie &&
$IP netns exec b $TC qdisc add dev vb root netem delay 20ms limit 10000 &&
$IP netns exec b iperf3 -s -D -p 5301 && $IP netns exec b iperf3 -s -D -p 5302 && $IP netns exec b iperf3 -s -D -p 5303 &&
$IP netns exec a ping -c 2 -W 2 10.8.2.1'
# bbr_cubic SECONDS LEAF...: both flows through the leaf; prints their goodputs and the leaf
leaf_add() {  # LEAF...: r's egress towards b, a 20 Mbit/s HTB class with the leaf under test
  $IP netns exec r $TC qdisc add dev rb root handle 1: htb default 1 &&
  $IP netns exec r $TC class add dev rb parent 1: classid 1:1 htb rate 20mbit ceil 20mbit &&
  $IP netns exec r $TC qdisc add dev rb parent 1:1 handle 10: "$@"
}
flows() {  # SECONDS: one BBR and one CUBIC flow from a to b; prints their receiver lines
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5301 -C bbr -t $1 -f m > /tmp/bbr.txt 2>&1 & b=$!
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5302 -C cubic -t $1 -f m > /tmp/cubic.txt 2>&1 & c=$!
  wait $b; rb=$?; wait $c; rc=$?
  echo "bbr $(grep receiver /tmp/bbr.txt)"; echo "cubic $(grep receiver /tmp/cubic.txt)"
  [ $rb = 0 ] && [ $rc = 0 ]
}
bbr_cubic() {  # SECONDS LEAF...: both flows through the leaf; prints their goodputs and the leaf
  t=$1; shift
  leaf_add "$@" || return 1
  # Linux's pie runs its first update 0.5 s after it is created (its timer): the flows start
  # after it, as with the core's pie, whose updates start with the first packet
  [ "$1" = pie ] && sleep 0.6
  flows $t; r=$?
  $IP netns exec r $TC -s -d qdisc show dev rb parent 1:1
  $IP netns exec r $TC qdisc del dev rb root
  return $r
}
measured fair_pfifo bbr_cubic 12 pfifo limit 16
measured fair_ckcd bbr_cubic 12 ckcd limit 16 rate 20mbit rtt 20ms
# Cross-check (b): Linux's RED and CHOKe against the core's through sch_ckcd, same
# parameters. tc derives Wlog from burst (burst 48 gives 7 for min 15 and 9 for min 5).
# RED: min 15, max 45 packets (sch_red counts bytes: x 1514), max_p 0.1, Wlog 7. (With
# CHOKe's min 5 / max 15 / Wlog 9, BBR's start-up lifts both REDs' average above max and
# it stays there: both drop half of every packet and both TCP flows die - docs/kernel.md.)
measured xc_red_linux bbr_cubic 10 red limit 121120 min 22710 max 68130 avpkt 1514 burst 48 probability 0.1 bandwidth 20mbit
measured xc_red_core bbr_cubic 10 ckcd disc red limit 80 min 15 max 45 max_p 0.1 wlog 7 rate 20mbit avpkt 1514
# CHOKe: min 5, max 15 packets, max_p 0.1, Wlog 9.
measured xc_choke_linux bbr_cubic 10 choke limit 80 min 5 max 15 avpkt 1514 burst 48 probability 0.1 bandwidth 20mbit
measured xc_choke_core bbr_cubic 10 ckcd disc choke limit 80 min 5 max 15 max_p 0.1 wlog 9 rate 20mbit avpkt 1514
# CoDel: RFC 8289's defaults (target 5 ms, interval 100 ms), limit 80 packets.
measured xc_codel_linux bbr_cubic 10 codel limit 80 target 5ms interval 100ms noecn
measured xc_codel_core bbr_cubic 10 ckcd disc codel limit 80 target 5ms interval 100ms
# SFB: the kernel's defaults (max 25, target 20, increment 0.001, decrement 0.000167, penalty 10/s
# burst 20), which are the core's (docs/disciplines-004.md), limit 80 packets; no ECN. tc sends
# its own increment and decrement unless told (0.0005 and 0.00005: 33 and 3 in Q16, where the
# kernel's are 66 and 11), so both are given: tc rounds these two to 66 and 11, as the core does.
measured xc_sfb_linux bbr_cubic 10 sfb limit 80 increment 0.001 decrement 0.000167
measured xc_sfb_core bbr_cubic 10 ckcd disc sfb limit 80
# Cross-check (c), ECN: namespace a's flows ECN-capable (tcp_ecn=1; b accepts, its default 2),
# Linux's RED, CHOKe, CoDel, FQ-CoDel and PIE with `ecn` against the core's with ecn=1, same
# parameters as above. A frame the core marks leaves the qdisc CE (INET_ECN_set_ce at dequeue).
step ecn_on $IP netns exec a sysctl -w net.ipv4.tcp_ecn=1
# bbr_cubic, run again once if BBR stalled (under 2 Mbit/s; it gets 13-18 otherwise). BBR
# ignores CE, so RED's average can sit above max, where every Not-ECT packet is dropped - and
# Linux sends its retransmissions Not-ECT (RFC 3168 section 6.1.5): a BBR flow that lost one can
# back off RTO after RTO. Seen in Linux's RED (BBR 0.30 Mbit/s, CUBIC alone marked 768 times
# against 2900-7900 in 16 runs of each RED); in either implementation such a run says
# nothing about marking. The output of the run kept, after "stalled, rerun" if there were two.
bbr_cubic_live() {
  bbr_cubic "$@" > /tmp/live.txt 2>&1; r=$?
  if awk '/^bbr .*receiver/ { for (i = 1; i < NF; i++) if ($(i+1) == "Mbits/sec") v = $i }
          END { exit !(v != "" && v < 2) }' /tmp/live.txt; then
    echo "stalled, rerun: $(grep '^bbr ' /tmp/live.txt)"; bbr_cubic "$@"; return $?
  fi
  cat /tmp/live.txt; return $r
}
measured xe_red_linux bbr_cubic_live 10 red limit 121120 min 22710 max 68130 avpkt 1514 burst 48 probability 0.1 bandwidth 20mbit ecn
measured xe_red_core bbr_cubic_live 10 ckcd disc red limit 80 min 15 max 45 max_p 0.1 wlog 7 rate 20mbit avpkt 1514 ecn 1
measured xe_choke_linux bbr_cubic_live 10 choke limit 80 min 5 max 15 avpkt 1514 burst 48 probability 0.1 bandwidth 20mbit ecn
measured xe_choke_core bbr_cubic_live 10 ckcd disc choke limit 80 min 5 max 15 max_p 0.1 wlog 9 rate 20mbit avpkt 1514 ecn 1
measured xe_codel_linux bbr_cubic_live 10 codel limit 80 target 5ms interval 100ms ecn
measured xe_codel_core bbr_cubic_live 10 ckcd disc codel limit 80 target 5ms interval 100ms ecn 1
measured xe_fq_codel_linux bbr_cubic_live 10 fq_codel ecn
measured xe_fq_codel_core bbr_cubic_live 10 ckcd spec "fq_codel ecn=1"
measured xe_pie_linux bbr_cubic_live 10 pie limit 1000 target 15ms tupdate 16ms alpha 2 beta 20 ecn
measured xe_pie_core bbr_cubic_live 10 ckcd spec "pie limit=1000 target_ms=15 tupdate_ms=16 alpha=0.125 beta=1.25 ecn=1"
step ecn_off $IP netns exec a sysctl -w net.ipv4.tcp_ecn=2
# Cross-check (b), continued after the ECN runs, so that the runs above follow one another as when
# they were measured.
# FQ-CoDel: Linux's defaults (limit 10240, 1024 buckets, quantum 1514, target 5 ms, interval
# 100 ms), which are the core's but for ecn: the core's fq_codel drops as Linux's does with
# `noecn`. (At the 80-packet limit above, whether BBR's start-up overflows it, and so the
# share of overflow drops, is timing: 0-24 % in either implementation - docs/kernel.md.)
measured xc_fq_codel_linux bbr_cubic 10 fq_codel noecn
measured xc_fq_codel_core bbr_cubic 10 ckcd spec "fq_codel"
# PIE: RFC 8033's and Linux's defaults (limit 1000, target 15 ms, alpha 0.125 and beta 1.25 Hz,
# which tc gives in sixteenths: 2 and 20) but tupdate 16 ms: Linux's timer counts jiffies, and
# rounds 15 ms up to 16 at this kernel's HZ=250.
measured xc_pie_linux bbr_cubic 10 pie limit 1000 target 15ms tupdate 16ms alpha 2 beta 20 noecn
measured xc_pie_core bbr_cubic 10 ckcd spec "pie limit=1000 target_ms=15 tupdate_ms=16 alpha=0.125 beta=1.25"
# Cross-check (a): a leaf created while record_events is set records what it handed the
# core and what came back (datapath/kernel/ckcd_record.h), for ckcd-replay to run again.
REC=/sys/module/sch_ckcd/parameters/record_events
step rec_setup sh -c "mount -t debugfs none /sys/kernel/debug && echo 200000 > $REC"
step rec_too_many sh -c "echo 16777217 > $REC"
step rec_kept cat $REC
step rec_add leaf_add ckcd limit 16 rate 20mbit rtt 20ms ecn 1
echo 0 > $REC
# ECN-capable flows, so the record holds marks as well as drops
ecn_flows() { $IP netns exec a sysctl -qw net.ipv4.tcp_ecn=1 && flows $1; r=$?; $IP netns exec a sysctl -qw net.ipv4.tcp_ecn=2; return $r; }
measured rec_flows ecn_flows 3
# the per-flow state on demand, read while two flows run through the same leaf
state_during() { flows 3 >/dev/null & f=$!; sleep 1.5; cat /sys/kernel/debug/sch_ckcd/*-rb-10.state; wait $f; }
step rec_state state_during
step rec_spec $IP netns exec r $TC -j qdisc show dev rb parent 1:1
step rec_dump sh -c "cat /sys/kernel/debug/sch_ckcd/*-rb-10"
step rec_del $IP netns exec r $TC qdisc del dev rb root
step rec_gone sh -c "ls /sys/kernel/debug/sch_ckcd/"
# Two qdiscs on devices of one name in two network namespaces both get a record.
step rec_two sh -c 'echo 1000 > /sys/module/sch_ckcd/parameters/record_events &&
  $IP netns add n1 && $IP netns add n2 &&
  $IP -n n1 link add x0 type veth peer name y0 && $IP -n n2 link add x0 type veth peer name y0 &&
  $IP netns exec n1 $TC qdisc add dev x0 root ckcd && $IP netns exec n2 $TC qdisc add dev x0 root ckcd &&
  ls /sys/kernel/debug/sch_ckcd/ && $IP netns del n1 && $IP netns del n2 && echo 0 > /sys/module/sch_ckcd/parameters/record_events'
# A change ends a record: one configuration per record.
step rec_close sh -c 'echo 1000 > /sys/module/sch_ckcd/parameters/record_events && $IP netns add n3 &&
  $IP -n n3 link add x0 type veth peer name y0 && $IP netns exec n3 $TC qdisc add dev x0 root ckcd &&
  $IP netns exec n3 $TC qdisc change dev x0 root ckcd limit 50 && cat /sys/kernel/debug/sch_ckcd/*-x0-* ;
  $IP netns del n3; echo 0 > /sys/module/sch_ckcd/parameters/record_events'
# Cross-check (a) for the baselines: FQ-CoDel (flows by the host's hash, DRR) and PIE (its random
# draws) under ECN-capable BBR+CUBIC; DualPI2 classifying by ECN, with 6 Mbit/s of ECT(1) UDP
# (iperf3 -S 1 sets the ECN bits) in its L queue beside the Not-ECT TCP flows in C.
rec_disc() {  # SPEC ecn|l4s: the leaf's tc -j line, then its record of 3 s of that traffic
  echo 200000 > $REC && leaf_add ckcd spec "$1"; r=$?; echo 0 > $REC
  if [ $r != 0 ]; then :
  elif [ "$2" = ecn ]; then ecn_flows 3 >/dev/null; r=$?
  else $IP netns exec a iperf3 -c 10.8.2.1 -p 5303 -u -b 6M -l 1400 -S 1 -t 3 >/dev/null & u=$!
    flows 3 >/dev/null; r=$?; wait $u || r=1; fi
  [ $r = 0 ] && $IP netns exec r $TC -j qdisc show dev rb parent 1:1 && cat /sys/kernel/debug/sch_ckcd/*-rb-10; r=$?
  $IP netns exec r $TC qdisc del dev rb root 2>/dev/null; return $r  # no leaf left behind, whatever failed
}
measured rec_fq_codel rec_disc "fq_codel ecn=1" ecn
measured rec_pie rec_disc "pie ecn=1" ecn
measured rec_dualpi2 rec_disc "dualpi2" l4s
# A leaf that drops at dequeue under HTB, one level and two: bursts of several UDP flows, then
# silence. CKCD with d_th of 0.01-0.02 ms and Delta 1 ms judges nearly every packet late.
# HTB's one-time note per leaf that came back empty although it had packets, counted
nonwc() { dmesg | grep -c 'is non-work-conserving'; }
TINY="rate 10mbit dth_min 0.01ms dth_max 0.02ms delta 1ms d 0.01ms qmin 20 qmax 150"
bursts() {  # PORTS...: three 0.5 s bursts of 20 Mbit/s per port, each followed by 1.5 s of silence
  for r in 1 2 3; do
    for p in "$@"; do $IP netns exec a iperf3 -c 10.8.2.1 -p $p -u -b 20M -l 1200 -n 1250000 >/dev/null 2>&1 & done
    wait; sleep 1.5
  done
}
$IP netns exec b iperf3 -s -D -p 5303
step drain_one sh -c "$IP netns exec r $TC qdisc add dev rb root handle 1: htb default 1 &&
  $IP netns exec r $TC class add dev rb parent 1: classid 1:1 htb rate 10mbit ceil 10mbit &&
  $IP netns exec r $TC qdisc add dev rb parent 1:1 handle 10: ckcd limit 200 $TINY"
step drain_one_nonwc_before nonwc
bursts 5301 5302 5303
step drain_one_show $IP netns exec r $TC -s qdisc show dev rb
step drain_one_nonwc_after nonwc
$IP netns exec r $TC qdisc del dev rb root
step drain_two sh -c "$IP netns exec r $TC qdisc add dev rb root handle 1: htb default 11 &&
  $IP netns exec r $TC class add dev rb parent 1: classid 1:1 htb rate 20mbit ceil 20mbit &&
  $IP netns exec r $TC class add dev rb parent 1:1 classid 1:11 htb rate 10mbit ceil 20mbit &&
  $IP netns exec r $TC class add dev rb parent 1:1 classid 1:12 htb rate 10mbit ceil 20mbit &&
  $IP netns exec r $TC qdisc add dev rb parent 1:11 handle 11: ckcd limit 200 $TINY &&
  $IP netns exec r $TC qdisc add dev rb parent 1:12 handle 12: ckcd limit 200 $TINY"
step drain_two_nonwc_before nonwc
bursts 5301 5302 5303
step drain_two_show $IP netns exec r $TC -s qdisc show dev rb
step drain_two_nonwc_after nonwc
$IP netns exec r $TC qdisc del dev rb root
# Every discipline of the core as a leaf under UDP overload, then 200 changes under load.
for d in droptail red codel hdcodel choke sred fred sfb care ckcd cocoa fq_codel pie dualpi2 "spec bands|ckcd|droptail"; do
  case $d in spec*) leaf="ckcd spec ${d#spec }";; *) leaf="ckcd disc $d";; esac
  $IP netns exec r $TC qdisc add dev rb root handle 1: htb default 1 &&
  $IP netns exec r $TC class add dev rb parent 1: classid 1:1 htb rate 10mbit ceil 10mbit &&
  $IP netns exec r $TC qdisc add dev rb parent 1:1 handle 10: $leaf || echo "FAILED $d"
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5301 -u -b 20M -l 1200 -t 1 >/dev/null 2>&1
  echo "$d $($IP netns exec r $TC -s qdisc show dev rb parent 1:1 | grep -o 'Sent [0-9]* bytes [0-9]* pkt (dropped [0-9]*' | head -1)"
  $IP netns exec r $TC qdisc del dev rb root
done > /tmp/every.txt 2>&1
step every_disc_result cat /tmp/every.txt
step churn_setup sh -c "$IP netns exec r $TC qdisc add dev rb root handle 1: htb default 1 &&
  $IP netns exec r $TC class add dev rb parent 1: classid 1:1 htb rate 10mbit ceil 10mbit &&
  $IP netns exec r $TC qdisc add dev rb parent 1:1 handle 10: ckcd limit 100 rate 10mbit"
$IP netns exec a iperf3 -c 10.8.2.1 -p 5301 -u -b 20M -l 1200 -t 15 >/dev/null 2>&1 &
$IP netns exec a iperf3 -c 10.8.2.1 -p 5302 -C cubic -t 15 >/dev/null 2>&1 &
i=0; fails=0
while [ $i -lt 200 ]; do
  case $((i % 4)) in
    0) o="disc ckcd limit $((40 + i % 60))";; 1) o="disc red limit 80 min 10 max 30";; 2) o="disc codel limit 60";;
    3) o="";;
  esac
  if [ -n "$o" ]; then
    $IP netns exec r $TC qdisc change dev rb parent 1:1 handle 10: ckcd $o >/dev/null 2>&1 || fails=$((fails+1))
  else
    $IP netns exec r $TC qdisc change dev rb parent 1:1 handle 10: ckcd spec "bands | ckcd limit=30 | droptail limit=30" \
      >/dev/null 2>&1 || fails=$((fails+1))
  fi
  i=$((i+1))
done
step churn_done sh -c "echo changes 200 failed $fails; $IP netns exec r $TC -s qdisc show dev rb"
wait
$IP netns exec r $TC qdisc del dev rb root
step tcp_cleanup sh -c "$IP netns del a; $IP netns del r; $IP netns del b"
step cleanup sh -c "$IP link del v0; $IP netns del ns"
step unload rmmod sch_ckcd
step lsmod sh -c "lsmod | grep -c sch_ckcd"
step dmesg sh -c "dmesg | grep -E 'WARNING|BUG|Call Trace|KASAN|leak|ckcd' || true"
"""


@pytest.fixture(scope="module")
def vm():
    """Build the module and plugin, boot the lab once, return its lab.Steps, {step: (rc, output)}."""
    try:
        lab.check_prerequisites()
    except lab.LabUnavailable as e:
        pytest.fail(f"kernel lab: {e}")  # `make test` installs these: they must run, not skip
    return boot_steps(SCRIPT, "the sch_ckcd boot", 600)


def boot_steps(script: str, what: str, timeout_s: float) -> lab.Steps:
    """The script's steps from one boot of the lab (its measured steps run again while the
    host was disturbed: lab.MEASURED)."""
    from ovs_config.lablock import lab_lock

    ko, so = lab.build_sch_ckcd(REPO)
    with lab_lock():  # TCG takes a whole core: no other lab beside it
        res = lab.run(script, {"lab/sch_ckcd.ko": ko, "lab/q_ckcd.so": so}, timeout_s=timeout_s,
                      invalid=not_measured)
    assert res.exit_status is not None, f"{what} did not finish:\n{res.console[-3000:]}"
    return lab.Steps(res)


# What BBR and CUBIC carry together through the 20 Mbit/s class when the guest keeps up: 80 % of
# the 19.1 Mbit/s goodput ceiling (20 x 1448/1514), as test_ovs_kernel's FILLED_MBPS. On a quiet
# host every discipline here carries 16-19; a run under it measured the guest, at any steal (in a
# boot where no step reached STEAL_HIGH_PCT, fair_pfifo carried 13.6 and Linux's FQ-CoDel 14.1).
FILLED_MBPS = 0.8 * 20 * 1448 / 1514


def unfilled(name: str, output: str) -> str | None:
    """Why a measured BBR+CUBIC step's run (fair_, xc_, xe_) measured the guest, not the qdisc:
    its flows did not fill the class (lab.run's invalid)."""
    rates = re.findall(r"^(?:bbr|cubic) .*?([\d.]+) Mbits/sec\s+receiver", output, re.M)
    if not name.startswith(("fair_", "xc_", "xe_")) or len(rates) != 2:
        return None
    carried = sum(float(r) for r in rates)
    return f"BBR and CUBIC carried {carried:.1f} Mbit/s, under {FILLED_MBPS:.1f}" if carried < FILLED_MBPS else None


# What a baseline's record must hold to say anything (test_baselines_replay_to_the_kernels_verdicts).
RECORD_MIN_PACKETS, RECORD_MIN_MARKS = 1000, 20
RECORD_STEPS = ("rec_fq_codel", "rec_pie", "rec_dualpi2")


def too_few_decisions(name: str, output: str) -> str | None:
    """Why a measured record step's 3 s of traffic measured the guest, not the discipline: the
    record holds no more than RECORD_MIN_PACKETS packets or RECORD_MIN_MARKS marks (a CI run in
    a spell of steal recorded PIE marking 19)."""
    if name not in RECORD_STEPS or "# events" not in output:
        return None  # not a record, or the step failed: its test says why
    verdicts = kernel_verdicts(output.split("\n", 1)[-1])
    marks = sum(v.startswith("sent, marked") for v in verdicts.values())
    if len(verdicts) > RECORD_MIN_PACKETS and marks > RECORD_MIN_MARKS:
        return None
    return f"its record holds {len(verdicts)} packets and {marks} marks, not over {RECORD_MIN_PACKETS} and {RECORD_MIN_MARKS}"


def not_measured(name: str, output: str) -> str | None:
    """lab.run's invalid: why a measured step's run measured the guest rather than the qdisc."""
    return unfilled(name, output) or too_few_decisions(name, output)


def step(vm, name, rc=0):
    assert name in vm, f"step {name} did not run; steps: {sorted(vm)}"
    got, out = vm[name]
    stolen = getattr(vm, "disturbed", dict)()
    if name in stolen:  # in the captured output of a test that fails on it
        print(f"{name} ran while the hypervisor stole {stolen[name]:.0f} % of the host's CPU")
    assert got == rc, f"{name}: exit {got}, expected {rc}:\n{out}"
    return out


def ckcd_stats(show_out, handle):
    """The numbers of one ckcd qdisc in `tc -s qdisc show` output."""
    m = re.search(rf"qdisc ckcd {handle} .*?(?=\nqdisc |\Z)", show_out, re.S)
    assert m, f"no ckcd {handle} in:\n{show_out}"
    text = m.group(0)
    st = {"text": text}
    st["sent_pkts"] = int(re.search(r"Sent \d+ bytes (\d+) pkt", text).group(1))
    st["dropped"] = int(re.search(r"dropped (\d+)", text).group(1))
    st["backlog_pkts"] = int(re.search(r"backlog \S+ (\d+)p", text).group(1))
    core = re.search(r"enq_pkts (\d+) deq_pkts (\d+)", text)  # the core's own counts
    if core:
        st["enq_pkts"], st["deq_pkts"] = int(core.group(1)), int(core.group(2))
    drops = re.search(r"drops:((?: [\w-]+ \d+)+)", text).group(1).split()
    st["drops"] = {drops[i]: int(drops[i + 1]) for i in range(0, len(drops), 2)}
    marks = re.search(r"marks:((?: [\w-]+ \d+)+)", text).group(1).split()
    st["marks"] = {marks[i]: int(marks[i + 1]) for i in range(0, len(marks), 2)}
    over = re.search(r"overlimits (\d+)", text)
    st["overlimits"] = int(over.group(1)) if over else 0
    flows = re.search(r"active_flows (\d+) fair_share_bps (\d+)", text)
    if flows:  # ckcd only
        st["active_flows"], st["fair_share_bps"] = int(flows.group(1)), int(flows.group(2))
    return st


def test_module_loads(vm):
    step(vm, "load")


def test_add_root_shows_exactly_what_was_set(vm):
    step(vm, "add_root")
    out = step(vm, "show_root")
    # every parameter of the core's table, the given ones as given (tc units converted)
    assert re.search(r"qdisc ckcd 1: root refcnt \d+ limit 80 delta_ms 100 d_ms 5 omega 0.002 "
                     r"rate_bps 100000000 rtt_ms 20 avpkt 1500 qmin 0 qmax 0 k 100 dth_min_ms 0.5 "
                     r"dth_max_ms 50 window_ms 100 flows 1024", out), out


def test_bad_values_refused_naming_the_option_and_old_config_kept(vm):
    assert "Error: ckcd: invalid value for option 'limit' (allowed 1..1000000 packets)" in \
        step(vm, "bad_limit", rc=2)
    assert "Error: ckcd: option 'dth_min_ms' conflicts with another option's value" in \
        step(vm, "bad_conflict", rc=2)
    assert 'has no option "lmit"' in step(vm, "bad_name", rc=1)  # tc's side, from the same table
    assert step(vm, "show_after_bad") == step(vm, "show_root")


def test_core_spelling_and_other_disciplines(vm):
    step(vm, "core_spelling")
    assert re.search(r"limit 81 delta_ms 100 d_ms 0.5 .*rate_bps 20000000 ", step(vm, "show_core_spelling"))
    step(vm, "other_disc")
    assert re.search(r"qdisc ckcd 1: root refcnt \d+ disc red limit 200 ", step(vm, "show_other_disc"))
    step(vm, "del_root")


def test_whole_core_spec_and_malformed_specs(vm):
    step(vm, "bands_spec")
    shown = step(vm, "show_bands")
    assert re.search(r'qdisc ckcd 1: root refcnt \d+ spec "bands .*\| ckcd limit=40 .*\| droptail limit=40"', shown), shown
    assert "Error: ckcd: invalid value for option 'limit'" in step(vm, "bad_spec_value", rc=2)
    assert "Error: ckcd: invalid spec" in step(vm, "empty_spec", rc=2)
    assert "Error: ckcd" in step(vm, "bad_child", rc=2)
    assert step(vm, "show_after_bad_spec") == shown


def test_htb_leaf_counts_drops_by_reason(vm):
    step(vm, "htb")
    step(vm, "add_leaf")
    step(vm, "netns")
    step(vm, "ping")
    st = ckcd_stats(step(vm, "traffic"), "10:")
    assert st["sent_pkts"] > 100, st["text"]
    # 8 Mbit/s offered to 1 Mbit/s: most packets drop, and every drop has a reason
    assert st["dropped"] > 100, st["text"]
    assert sum(st["drops"].values()) == st["dropped"], st["text"]
    assert st["drops"]["overflow"] + st["drops"]["early"] + st["drops"]["choke-match"] > 0, st["text"]
    assert st["active_flows"] >= 2 and st["fair_share_bps"] <= 1000000 // 2, st["text"]


def test_json_output(vm):
    qdiscs = json.loads(step(vm, "json"))
    leaf = next(q for q in qdiscs if q["kind"] == "ckcd")
    assert leaf["options"]["spec"].startswith("ckcd limit=100 "), leaf
    xstats = leaf.get("xstats", leaf)  # tc 6.1 prints a qdisc's xstats among its own keys
    assert xstats["drop_overflow"] >= 0 and xstats["active_flows"] >= 1, leaf


def test_change_keeps_queued_packets(vm):
    before = ckcd_stats(step(vm, "before_change"), "10:")
    step(vm, "change_leaf")
    after_out = step(vm, "after_change")
    after = ckcd_stats(after_out, "10:")
    assert before["backlog_pkts"] > 20, before["text"]  # the queue was full when we changed it
    assert "limit 100 " in after["text"]
    # nothing flushed; at 1 Mbit/s ~100 packets/s leave, a show costs well under a second
    assert after["drops"]["flush"] == 0, after["text"]
    assert after["backlog_pkts"] > 0, after["text"]
    assert after["sent_pkts"] >= before["sent_pkts"], (before["text"], after["text"])


def test_reset_and_delete_with_backlog_then_unload_leave_nothing(vm):
    step(vm, "reset")
    step(vm, "del_with_backlog")
    step(vm, "cleanup")
    step(vm, "unload")
    assert step(vm, "lsmod", rc=1).strip() == "0"


# Expected lines: the taint notes of an out-of-tree module. No longer expected: HTB's
# "non-work-conserving" note, which a leaf whose dequeue dropped every packet it had used to
# cause; the core's CKCD now hands on the last packet as CoDel does (docs/kernel.md).
EXPECTED_DMESG = ("taints kernel", "module verification failed")


def test_dmesg_has_no_warning(vm):
    out = step(vm, "dmesg")
    bad = [line for line in out.splitlines() if not any(e in line for e in EXPECTED_DMESG)]
    assert not bad, out


def test_descriptor_pool_grows_at_change_and_keeps_its_size(vm):
    """Rule: the pool holds one descriptor more than the limits add up to, and grows at change."""
    step(vm, "grow_setup")
    before = ckcd_stats(step(vm, "grow_before"), "10:")
    assert 10 <= before["backlog_pkts"] <= 20, before["text"]  # full at limit 20 (pool of 21)
    step(vm, "grow_change")
    after = ckcd_stats(step(vm, "grow_after"), "10:")
    # Past the 21 descriptors the pool had: it grew. An empty pool would drop with no core
    # reason (and warn in dmesg), so the reasons would no longer add up to the drops.
    assert after["backlog_pkts"] > 21, after["text"]
    assert sum(after["drops"].values()) == after["dropped"], after["text"]
    assert after["dropped"] == after["drops"]["overflow"], after["text"]
    shrunk = ckcd_stats(step(vm, "shrink_change"), "10:")
    assert shrunk["backlog_pkts"] <= 10, shrunk["text"]  # the excess went as overflow drops
    assert shrunk["drops"]["overflow"] >= after["drops"]["overflow"] + after["backlog_pkts"] - 10, shrunk["text"]
    step(vm, "regrow_change")
    regrown = ckcd_stats(step(vm, "regrow_after"), "10:")
    assert regrown["backlog_pkts"] > 21, regrown["text"]
    assert sum(regrown["drops"].values()) == regrown["dropped"], regrown["text"]
    step(vm, "grow_del")


def tcp_run(vm, name):
    """Goodputs (Mbit/s, iperf3's receiver lines) and the leaf's tc -s -d text of one bbr_cubic run."""
    out = step(vm, name)
    rates = {}
    for cc in ("bbr", "cubic"):
        m = re.search(rf"^{cc} .*?([\d.]+) Mbits/sec\s+receiver", out, re.M)
        assert m, f"{name}: no {cc} receiver line:\n{out}"
        rates[cc] = float(m.group(1))
    sent = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+)", out)
    assert sent, out
    stalled = re.search(r"^stalled, rerun: .*", out, re.M)
    if stalled:
        print(f"{name}: {stalled.group(0)}")
        assert rates["bbr"] >= 2, f"{name}: BBR stalled in the rerun too:\n{out}"
    return {"rates": rates, "sent_pkts": int(sent.group(1)), "dropped": int(sent.group(2)), "text": out}


def second_boot(names) -> dict:
    """A fresh boot of the module that sets up the TCP lab and runs the named steps of SCRIPT
    again (with ECN on for the xe_ ones), for a cross-check whose first pair fell outside a
    tolerance. Returns {step: (rc, output)} as the vm fixture does."""
    return boot_steps(second_boot_script(names), "the second boot", 300)


def second_boot_script(names) -> str:
    """SCRIPT's prelude, module load and TCP lab set-up (and the ECN runs' set-up for xe_ steps),
    then the named steps as SCRIPT runs them."""
    setup = SCRIPT[:SCRIPT.index("step load")] + "step load insmod /lab/sch_ckcd.ko\n"
    setup += SCRIPT[SCRIPT.index("# TCP: BBR against CUBIC"):SCRIPT.index("measured fair_pfifo")]
    if any(n.startswith("xe_") for n in names):
        setup += SCRIPT[SCRIPT.index("step ecn_on"):SCRIPT.index("measured xe_")]
    for n in names:
        setup += re.search(rf"^(?:step|measured) {n} .*$", SCRIPT, re.M).group(0) + "\n"
    return setup


def cross_check(vm, linux_step, core_step, judge):
    """judge([linux runs], [core runs]) on the boot's pair of runs; if a tolerance fails it,
    the pair runs again in a second boot and judge decides on both pairs together.

    The tolerances are measured over single 10 s runs, whose spread under BBR's phases is
    wide (docs/kernel.md): a pair outside one is not yet evidence of a difference. Two pairs
    pooled halve the spread's effect, and an implementation that differs still fails, since
    the tolerances stay as they are. The first pair's failure is printed."""
    lin, core = [tcp_run(vm, linux_step)], [tcp_run(vm, core_step)]
    try:
        return judge(lin, core)
    except AssertionError as first:
        print(f"{linux_step} / {core_step}: one pair outside a tolerance, judged again on two: {first}")
    again = second_boot([linux_step, core_step])
    return judge(lin + [tcp_run(again, linux_step)], core + [tcp_run(again, core_step)])


def pooled(runs, count) -> dict:
    """The sum over runs of count(run): a dict of counts summed key by key, or a number."""
    values = [count(r) for r in runs]
    if isinstance(values[0], dict):
        return {k: sum(v[k] for v in values) for k in values[0]}
    return sum(values)


def mean_rates(runs) -> dict:
    """Each flow's goodput averaged over runs (Mbit/s)."""
    return {cc: sum(r["rates"][cc] for r in runs) / len(runs) for cc in runs[0]["rates"]}


@pytest.mark.parametrize("line, stalled", [
    ("bbr [  5]   0.00-10.02  sec   372 KBytes  0.30 Mbits/sec                  receiver", True),
    ("bbr [  5]   0.00-10.02  sec  16.3 MBytes  13.5 Mbits/sec                  receiver", False),
    ("bbr [  5]   0.00-10.02  sec  2.38 MBytes  1.99 Mbits/sec                  receiver", True),
    ("bbr ", False),  # iperf3 failed: no rate, the run's own error stands, no rerun
])
def test_only_a_stalled_bbr_run_is_run_again(tmp_path, line, stalled):
    """Rule: bbr_cubic_live (the ECN cross-checks' runs) runs a pair again only when BBR's
    receiver line is under 2 Mbit/s (the guest's awk, run here on iperf3's lines as the guest
    prints them; the first is the run that stalled in CI). The guest's awk is busybox's, the
    host's another; this program uses only what POSIX awk has, alike in both."""
    awk = re.search(r"if awk '(.*?)' /tmp/live.txt", SCRIPT, re.S).group(1)
    path = tmp_path / "live.txt"
    path.write_text(f"{line}\ncubic [  5]   0.00-10.03  sec  3.16 MBytes  2.64 Mbits/sec   receiver\n")
    assert (subprocess.run(["awk", awk, str(path)]).returncode == 0) == stalled


def jain(rates):
    xs = list(rates.values())
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def test_ckcd_fairer_than_pfifo_for_bbr_against_cubic(vm):
    """Rule: in the same 20 Mbit/s HTB class, ckcd's Jain index of BBR and
    CUBIC beats pfifo's (same 16-packet limit, half a BDP) by at least 0.15.

    Measured in this lab (docs/kernel.md): pfifo 0.57-0.66 (BBR takes 15-17 of 19 Mbit/s),
    ckcd 0.99-1.00. 0.15 is well under that 0.33-0.43 gap, so BBR's phase noise in a 12 s run
    under TCG cannot fail the test, while a ckcd no fairer than a FIFO would. ckcd must also
    reach 0.9 on its own, and keep the link used (at least 80 % of the 19.1 Mbit/s goodput
    ceiling, 20 x 1448/1514)."""
    step(vm, "tcp_setup")
    fifo, ckcd = tcp_run(vm, "fair_pfifo"), tcp_run(vm, "fair_ckcd")
    j_fifo, j_ckcd = jain(fifo["rates"]), jain(ckcd["rates"])
    assert j_ckcd >= 0.9 and j_ckcd - j_fifo >= 0.15, (fifo["rates"], ckcd["rates"], j_fifo, j_ckcd)
    assert sum(ckcd["rates"].values()) >= 0.8 * 20 * 1448 / 1514, ckcd["rates"]
    st = ckcd_stats(ckcd["text"], "10:")
    assert st["dropped"] > 0 and sum(st["drops"].values()) == st["dropped"], st["text"]  # every drop has a reason
    assert st["drops"]["delay"] + st["drops"]["choke-match"] + st["drops"]["early"] > 0, st["text"]


def linux_drops(text, dropped):
    """Drops of sch_red/sch_choke/sch_codel/sch_sfb/sch_fq_codel/sch_pie by the core's reasons,
    in packets: CHOKe's `matched` counts pairs; CoDel and FQ-CoDel count only their overflow
    drops (drop_overlimit), the rest of their drops are at dequeue, for delay; SFB's bucket,
    queue and child drops are the core's overflow; PIE's `dropped` counts its tail drops
    (`overlimit`) and its early drops together."""
    m = re.search(r"earlydrop (\d+) penaltydrop (\d+) bucketdrop (\d+) queuedrop (\d+) childdrop (\d+)", text)
    if m:
        early, penalty, bucket, queue, child = map(int, m.groups())
        return {"early": early, "penalty": penalty, "overflow": bucket + queue + child}
    m = re.search(r"drop_overlimit (\d+)", text)
    if m:
        return {"overflow": int(m.group(1)), "delay": dropped - int(m.group(1))}
    m = re.search(r"\boverlimit (\d+) dropped \d+", text)
    if m:
        return {"overflow": int(m.group(1)), "early": dropped - int(m.group(1))}
    early = int(re.search(r"early (\d+)", text).group(1))
    pdrop = int(re.search(r"pdrop (\d+)", text).group(1))
    m = re.search(r"matched (\d+)", text)
    return {"early": early, "overflow": pdrop, "choke-match": 2 * int(m.group(1)) if m else 0}


# How far CUBIC's share of the goodput may differ between Linux's qdisc and the core's in one
# 10 s run each (None: not compared). SFB's split is not repeatable in 10 s: over eight runs of
# each at the same increment and decrement (2026-11-27) CUBIC had 8-47 % under Linux's sch_sfb and
# 28-75 % under the core's - whichever flow's bins cross bin_size first keeps the higher p_m -
# while the drop counts of any two runs were within 1.6x and the early-drop shares within 8
# points. The share cannot tell the two implementations apart, so for SFB the other checks decide.
# PIE's split moves with BBR's phases: over eight runs of each on an otherwise idle host
# (2026-11-26) CUBIC had 15.6-25.7 % under Linux's sch_pie and 12.1-27.1 % under the core's,
# so two single runs differed by up to 13.6 points (9.6 within one round): 15 points. (On a
# host busy with other work, Linux's pie dropped 57 packets where the core dropped 177: the
# cross-checks need the lab alone on the machine, as make test runs it.)
SHARE_TOLERANCE = {"sfb": None, "pie": 0.15}

# How far the drop counts may differ (default: within 2x). PIE's count varies most from run
# to run: Linux's sch_pie dropped 151-329 packets in those eight runs (2.2x), the core's 205-309
# (the means 240 and 256), so one run of each may differ by more than 2x with neither wrong
# (309 against 151 is 2.05x): 2.5x.
DROP_RATIO_TOLERANCE = {"pie": 2.5}

# The drop reason each discipline is about: its share of the drops must agree.
CROSS_CHECK_REASON = {"red": "early", "choke": "choke-match", "codel": "delay", "sfb": "early",
                      "fq_codel": "delay", "pie": "early"}
# How far that share may differ (default 10 points). CoDel's other drops are tail drops,
# which happen only while BBR's start-up overshoots the 80-packet limit before CoDel's
# control law engages: whether they happen at all is a matter of timing. Measured over five
# runs of each on two vCPUs (2026-11-26): Linux's tail drops were 0, 3, 3, 7 and 28 of 399-455
# drops (0-6.4 %), the core's 0, 0, 0 and 1 in four runs and at least 52 of 483 (10.8 %) in the
# fifth. Dequeue drops stay the large majority in every run, so a CoDel that drops mostly at
# the tail still fails.
REASON_SHARE_TOLERANCE = {"codel": 0.20}


@pytest.mark.parametrize("disc", ["red", "choke", "codel", "sfb", "fq_codel", "pie"])
def test_core_baselines_agree_with_linux(vm, disc):
    """Cross-check (b), rule: the core's RED, CHOKe, CoDel, SFB, FQ-CoDel and PIE through
    sch_ckcd behave as Linux's sch_red, sch_choke, sch_codel, sch_sfb, sch_fq_codel and sch_pie
    on the same BBR+CUBIC traffic with the same parameters (docs/kernel.md has the measured
    table).

    One 10 s run each (a second pair if one falls outside: cross_check), so the tolerances
    cover run-to-run spread, measured over rounds of
    the same qdisc: drop counts varied by up to 1.75x (CHOKe: BBR's ProbeBW/ProbeRTT phases
    decide how much of the queue is its own to match; CoDel 294 vs 399 between the two), so
    drop counts must agree within 2x (PIE's within 2.5x: DROP_RATIO_TOLERANCE says why);
    CUBIC's share of the goodput within 10 points (spread seen: 7; PIE's and SFB's:
    SHARE_TOLERANCE); total goodput within 25 %. The reasons are structural and must agree
    closely: the share of drops that are RED's early drops, CHOKe's matches, CoDel's and
    FQ-CoDel's dequeue drops or PIE's early drops within 10 points (CoDel's within 20:
    REASON_SHARE_TOLERANCE says why). At Linux's defaults neither FQ-CoDel nor PIE reached its
    limit in any measured run: all their drops were dequeue (FQ-CoDel) or early (PIE) drops."""
    cross_check(vm, f"xc_{disc}_linux", f"xc_{disc}_core", lambda lin, core: judge_drops(disc, lin, core))


def judge_drops(disc, lin, core):
    """test_core_baselines_agree_with_linux's tolerances on runs of Linux's qdisc and the core's."""
    if disc in ("red", "choke"):
        for c, l_ in zip(core, lin):
            wlog = re.search(r"wlog (\d+)", c["text"]).group(1)
            assert f"ewma {wlog} " in l_["text"], l_["text"]  # tc's burst 48 maps to the core's wlog
    for r in lin:
        assert sum(linux_drops(r["text"], r["dropped"]).values()) == r["dropped"], r["text"]
    for r in core:
        assert sum(ckcd_stats(r["text"], "10:")["drops"].values()) == r["dropped"], r["text"]
    ld, cd = pooled(lin, lambda r: linux_drops(r["text"], r["dropped"])), \
        pooled(core, lambda r: ckcd_stats(r["text"], "10:")["drops"])
    ldrop, cdrop = sum(ld.values()), sum(cd.values())
    seen = f"Linux dropped {ld}, the core {cd} in {len(lin)} run(s) each"
    assert ldrop > 100 * len(lin) and cdrop > 100 * len(core), seen
    ratio_tolerance = DROP_RATIO_TOLERANCE.get(disc, 2.0)
    assert 1 / ratio_tolerance <= cdrop / ldrop <= ratio_tolerance, seen
    key = CROSS_CHECK_REASON[disc]
    assert abs(cd[key] / cdrop - ld[key] / ldrop) <= REASON_SHARE_TOLERANCE.get(disc, 0.10), seen
    rates = {"linux": mean_rates(lin), "core": mean_rates(core)}
    tolerance = SHARE_TOLERANCE.get(disc, 0.10)
    if tolerance is not None:
        share = {k: r["cubic"] / sum(r.values()) for k, r in rates.items()}
        assert abs(share["linux"] - share["core"]) <= tolerance, rates
    total = {k: sum(r.values()) for k, r in rates.items()}
    assert abs(total["linux"] - total["core"]) <= 0.25 * total["linux"], rates


# How far CUBIC's share of the goodput may be from half under either FQ-CoDel. Measured
# (2026-11-26): 49.1-49.9 % in 24 runs without ECN (twelve of Linux's, twelve of the core's, at
# Linux's default limit and at 80 packets), at most 0.9 points from half; with ECN 48.3-49.8 %
# on an otherwise idle host and 47.3 % in a run slowed by other work on the host. 4 points
# leaves room for that, and a queue that did not isolate the flows falls far outside: under
# one FIFO (PIE, same traffic) CUBIC got 12.1-27.1 %. Each side hashes the two flows into one
# of 1024 buckets with its own key, so one run in about a thousand puts them in one bucket on
# one side.
ISOLATION_TOLERANCE = 0.04


def test_fq_codel_isolates_bbr_from_cubic_as_linux_does(vm):
    """Cross-check (b), rule (RFC 8290 4.2, flow isolation): under Linux's sch_fq_codel and
    under the core's fq_codel through sch_ckcd, BBR and CUBIC each get half the goodput of the
    20 Mbit/s class, whatever BBR's indifference to loss would take from CUBIC in one FIFO:
    CUBIC's share within ISOLATION_TOLERANCE of 50 % under both."""
    for name in ("xc_fq_codel_linux", "xc_fq_codel_core"):
        rates = tcp_run(vm, name)["rates"]
        assert abs(rates["cubic"] / sum(rates.values()) - 0.5) <= ISOLATION_TOLERANCE, (name, rates)


def linux_marks(text: str) -> int:
    """CE marks of sch_red/sch_choke (`marked`: probabilistic and forced) or sch_codel,
    sch_fq_codel and sch_pie (`ecn_mark`)."""
    m = re.search(r"\b(?:marked|ecn_mark) (\d+)", text)
    assert m, text
    return int(m.group(1))


# The reason each discipline's marks are counted under in the core.
ECN_REASON = {"red": "early", "choke": "early", "codel": "delay", "fq_codel": "delay", "pie": "early"}


@pytest.mark.parametrize("disc", ["red", "choke", "codel", "fq_codel"])
def test_core_marks_as_linux_marks(vm, disc):
    """Cross-check (c), rule: with ECN-capable traffic the core's RED, CHOKe, CoDel and
    FQ-CoDel with ecn=1 mark where Linux's with `ecn` mark, and drop where they drop
    (docs/ecn.md). (PIE: test_core_pie_marks_as_linux_pie_marks.)

    Both flows are ECN-capable here, and BBR ignores CE: under RED and CHOKe without harddrop
    its marks do not slow it, the queue reaches the limit and the rest is tail drops, in both
    implementations alike. Under CHOKe (min 5, max 15) nearly every signal is a match, which
    drops both packets with or without ECN, so there are few marks in either (measured 4 and 6
    in 10 s): a handful of marks is compared as counts, not as a ratio. One 10 s run each, so
    the tolerances are the drop cross-check's: congestion signals (marks + drops) above 100 in
    both; marks within 2x of Linux's when Linux marked at least 100 times, else within 30 of
    them; the share of the signals that were marks (marks / (marks + drops)) within 10 points;
    total goodput within 25 %. Linux counts an arrival marked and then tail-dropped twice (its
    mark, and the child's drop), as the core does; the shares compare like with like. A run in
    which BBR stalled (its Not-ECT retransmissions dropped above max, RTO after RTO) is run again
    once in the guest (bbr_cubic_live): CUBIC alone is no traffic to compare marks on. A pair
    outside a tolerance gets a second pair (cross_check)."""
    cross_check(vm, f"xe_{disc}_linux", f"xe_{disc}_core", lambda lin, core: judge_marks(disc, lin, core))


def judge_marks(disc, lin, core):
    """test_core_marks_as_linux_marks's tolerances on runs of Linux's qdisc and the core's."""
    for r in core:
        marks = ckcd_stats(r["text"], "10:")["marks"]
        assert marks[ECN_REASON[disc]] == sum(marks.values()), marks  # one reason, as the discipline says
    lin_marks = pooled(lin, lambda r: linux_marks(r["text"]))
    core_marks = pooled(core, lambda r: sum(ckcd_stats(r["text"], "10:")["marks"].values()))
    ldrop, cdrop = pooled(lin, lambda r: r["dropped"]), pooled(core, lambda r: r["dropped"])
    seen = f"{disc}: Linux marked {lin_marks}, dropped {ldrop}; the core marked {core_marks}, dropped {cdrop}" \
        f" in {len(lin)} run(s) each"
    print(seen)
    n = len(lin)
    assert lin_marks + ldrop > 100 * n and core_marks + cdrop > 100 * n, seen
    if lin_marks >= 100 * n:
        assert 0.5 <= core_marks / lin_marks <= 2.0, seen
    else:
        assert abs(core_marks - lin_marks) <= 30 * n, seen
    share = {"linux": lin_marks / (lin_marks + ldrop), "core": core_marks / (core_marks + cdrop)}
    assert abs(share["linux"] - share["core"]) <= 0.10, (share, seen)
    total = {k: sum(mean_rates(r).values()) for k, r in (("linux", lin), ("core", core))}
    assert abs(total["linux"] - total["core"]) <= 0.25 * total["linux"], total


# Linux's sch_pie resets its accumulated probability on a drop, not on a mark: once the sum
# passes 8.5 (every draw from 0.85 on passed: about e^-7.65, 1 in 2000, per signal, so with
# ~500 signals in 10 s about one run in four), every ECN-capable arrival is marked until one
# is dropped (docs/baselines.md: the core resets on a mark too). Over eleven runs (2026-11-26)
# Linux marked 313-526 in eight, at most 3.2 % of the packets it passed, 920 (5.7 %) and 7641
# (46.5 %) in two, and 215 in one slowed by other work on the host; the core marked 373-550
# (at most 3.4 %) in the ten on an idle host, 170 in the slowed one. So Linux's count is
# compared with the core's as it is up to PIE_STORM_SHARE of Linux's packets, and capped
# there above it (a storm only adds marks).
PIE_STORM_SHARE = 0.04
# The share of signals that were marks is not compared: ECN-capable packets are dropped only
# while p > 10 %, which BBR, ignoring CE, pushes p across and back, so that share was
# 0.58-0.99 under Linux and 0.53-0.78 under the core in those runs (up to 31 points apart
# within one round). Marks were the larger part in every run of both: at least MIN_MARK_SHARE.
MIN_MARK_SHARE = 0.40


def test_core_pie_marks_as_linux_pie_marks(vm):
    """Cross-check (c), rule (RFC 8033 5.1, sch_pie's 10 % threshold): with ECN-capable
    traffic the core's pie with ecn=1 marks as Linux's `pie ecn` does: both make over 100
    marks; the core's marks within 2x of Linux's (Linux's capped at PIE_STORM_SHARE of its
    packets, which its marking storms exceed); marks at least MIN_MARK_SHARE of each one's
    congestion signals; total goodput within 25 %. A pair outside gets a second pair (cross_check)."""
    cross_check(vm, "xe_pie_linux", "xe_pie_core", judge_pie_marks)


def judge_pie_marks(lin, core):
    """test_core_pie_marks_as_linux_pie_marks's tolerances on runs of Linux's pie and the core's."""
    for r in core:
        marks = ckcd_stats(r["text"], "10:")["marks"]
        assert marks["early"] == sum(marks.values()), marks
    # a storm is capped run by run: it belongs to the run it happened in
    lin_marks = pooled(lin, lambda r: linux_marks(r["text"]))
    lin_capped = pooled(lin, lambda r: min(linux_marks(r["text"]), PIE_STORM_SHARE * r["sent_pkts"]))
    core_marks = pooled(core, lambda r: sum(ckcd_stats(r["text"], "10:")["marks"].values()))
    ldrop, cdrop = pooled(lin, lambda r: r["dropped"]), pooled(core, lambda r: r["dropped"])
    seen = f"pie: Linux marked {lin_marks} of {pooled(lin, lambda r: r['sent_pkts'])} (capped {lin_capped:.0f})," \
        f" dropped {ldrop}; the core marked {core_marks}, dropped {cdrop} in {len(lin)} run(s) each"
    print(seen)
    assert lin_marks > 100 * len(lin) and core_marks > 100 * len(core), seen
    assert core_marks <= 2 * lin_marks, seen
    assert core_marks >= 0.5 * lin_capped, seen
    for m, d in ((lin_marks, ldrop), (core_marks, cdrop)):
        assert m / (m + d) >= MIN_MARK_SHARE, seen
    total = {k: sum(mean_rates(r).values()) for k, r in (("linux", lin), ("core", core))}
    assert abs(total["linux"] - total["core"]) <= 0.25 * total["linux"], total


def test_ecn_refused_where_not_taken_keeps_the_old_configuration(vm):
    """Bad input: ecn on a discipline without it, or out of 0..1, is refused by the kernel with
    the core's message naming the parameter, and the running qdisc keeps its configuration."""
    out = step(vm, "ecn_bad_disc", rc=2)
    assert "unknown parameter 'ecn'" in out, out
    out = step(vm, "ecn_bad_value", rc=2)
    assert "invalid value for option 'ecn' (allowed 0..1" in out, out
    assert re.search(r"qdisc ckcd \S+ root refcnt \d+ limit 77 .* ecn 0 ", step(vm, "ecn_bad_kept")), \
        "the refused changes left the qdisc alone"


def kernel_verdicts(record: str) -> dict[int, str]:
    """seq -> 'sent', 'sent, marked <reason>' or the drop reason, from sch_ckcd's record (its
    d, m and x lines; a packet marked and then dropped counts as dropped)."""
    verdicts, marks, seq = {}, {}, 0
    for line in record.splitlines():
        kind, *f = line.split()
        if kind == "e":
            seq += 1
        elif kind == "d" and f[1] != "-":
            verdicts[int(f[1])] = "sent"
        elif kind == "x":
            verdicts[int(f[0])] = f[1]
        elif kind == "m":
            marks[int(f[0])] = f[1]
    return {s: f"sent, marked {marks[s]}" if v == "sent" and s in marks else v for s, v in verdicts.items()}


def arrival_ecn(record: str) -> dict[int, int]:
    """seq (the count of e lines before a packet's own) -> the ECN field it arrived with (its e
    line's last field: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE)."""
    return {seq: int(line.split()[-1]) for seq, line in
            enumerate(x for x in record.splitlines() if x.startswith("e "))}


def replay_verdict(p: dict) -> str:
    """A ckcd-replay packet line as kernel_verdicts words it."""
    if p["verdict"] != "sent":
        return p["reason"]
    return f"sent, marked {p['mark']}" if p.get("mark") else "sent"


def replayed(tmp_path, spec: str, record: str) -> tuple[dict, dict]:
    """ckcd-replay's verdicts on a record (seq -> kernel_verdicts' words) and its events line."""
    path = tmp_path / "record.txt"
    path.write_text(record)
    out = subprocess.run([replay_bin(), "--qdisc", spec, "--events", str(path)],
                         capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    [events] = [e for e in lines if e["type"] == "events"]
    return {p["seq"]: replay_verdict(p) for p in lines if p["type"] == "pkt"}, events


@pytest.mark.parametrize("disc, kinds", [
    ("fq_codel", {"delay"}),            # CoDel per flow: marks ECT, drops the Not-ECT retransmissions
    ("pie", {"early"}),                 # PIE's probability, drawn per packet
    ("dualpi2", {"early"}),             # C drops by p'^2, L marks by the coupling (or its step)
])
def test_baselines_replay_to_the_kernels_verdicts(vm, tmp_path, disc, kinds):
    """Cross-check (a) for FQ-CoDel, PIE and DualPI2, rule: fed the module's record of 3 s of
    traffic (rec_disc), ckcd-replay sends, marks and drops exactly the packets the kernel qdisc
    did, for the same reasons, drawing exactly the recorded random numbers: the baselines are
    one core in every host too. Traffic that reaches each one's mechanism: ECN-capable BBR+CUBIC
    through FQ-CoDel and PIE, and for DualPI2 ECT(1) UDP in its L queue beside Not-ECT TCP in
    C, so the record holds both queues' decisions. Enough to mean something: over 1000 packets,
    marks, and decisions of the discipline's own reasons (`kinds`, as drops or marks)."""
    out = step(vm, f"rec_{disc}")
    head, record = out.split("\n", 1)
    [leaf] = json.loads(head)
    n, cap = map(int, re.search(r"# events (\d+) of (\d+)", record).groups())
    assert n < cap, "the record filled: not every verdict is in it"
    kernel = kernel_verdicts(record)
    reasons = Counter(v.removeprefix("sent, marked ") for v in kernel.values() if v != "sent")
    print(f"{disc}: {len(kernel)} packets, {dict(Counter(kernel.values()))}")
    marks = sum(v.startswith("sent, marked") for v in kernel.values())
    assert len(kernel) > RECORD_MIN_PACKETS and marks > RECORD_MIN_MARKS, reasons
    assert kinds <= set(reasons), reasons
    if disc == "dualpi2":  # both queues decided: marks on the ECT(1) UDP in L, drops of Not-ECT TCP in C
        ecn = arrival_ecn(record)
        assert sum(v.startswith("sent, marked") and ecn[s] == 1 for s, v in kernel.items()) > 20, reasons
        assert sum(not v.startswith("sent") and ecn[s] == 0 for s, v in kernel.items()) > 20, reasons
    replay, events = replayed(tmp_path, leaf["options"]["spec"], record)
    differ = sorted(seq for seq in kernel.keys() | replay.keys() if kernel.get(seq) != replay.get(seq))
    assert not differ, [(seq, kernel.get(seq), replay.get(seq)) for seq in differ[:10]]
    assert events["random_used"] == events["random_recorded"] and events["random_past_record"] == 0, events
    if disc != "fq_codel":  # PIE and DualPI2 draw their random numbers from the host
        assert events["random_recorded"] > 100, events


def test_module_and_replay_reach_the_same_verdicts(vm, tmp_path):
    """Cross-check (a), rule: the core is one, its hosts many - fed the same inputs, the
    kernel qdisc and ckcd-replay must reach the same verdict on every packet.

    The module records 3 s of ECN-capable BBR+CUBIC through ckcd with ecn=1 (the fairness
    check's leaf): each arrival with its time, classification and ECN codepoint, each time HTB
    asked for a packet, each random number the core drew. ckcd-replay runs the same spec (tc
    -j's) on that record and must send, mark and drop exactly the same packets, for the same
    reasons, drawing exactly the recorded random numbers. Not a tolerance: any difference is a host that changes what
    the core decides."""
    step(vm, "rec_setup")
    step(vm, "rec_add")
    step(vm, "rec_flows")
    [leaf] = json.loads(step(vm, "rec_spec"))
    record = step(vm, "rec_dump")
    step(vm, "rec_del")
    assert step(vm, "rec_gone").strip() == "", "the record's debugfs file goes with its qdisc"
    n, cap = map(int, re.search(r"# events (\d+) of (\d+)", record).groups())
    assert n < cap, "the record filled: not every verdict is in it"
    kernel = kernel_verdicts(record)
    drops = [v for v in kernel.values() if not v.startswith("sent")]
    marked = [v for v in kernel.values() if v.startswith("sent, marked")]
    # enough to mean something: thousands of packets, drops of more than one reason, and marks
    assert len(kernel) > 2000 and len(drops) > 20 and len(set(drops)) >= 2, (len(kernel), Counter(drops))
    assert len(marked) > 20, Counter(marked)
    replay, events = replayed(tmp_path, leaf["options"]["spec"], record)
    differ = sorted(seq for seq in kernel.keys() | replay.keys() if kernel.get(seq) != replay.get(seq))
    print(f"record: {len(kernel)} packets, drops {dict(Counter(drops))}, marks {dict(Counter(marked))}, "
          f"{events['random_recorded']} random draws")
    assert not differ, [(seq, kernel.get(seq), replay.get(seq)) for seq in differ[:10]]
    assert events["random_used"] == events["random_recorded"] and events["random_past_record"] == 0, events


def test_record_size_beyond_what_kvmalloc_gives_is_refused(vm):
    """Bad input gets a clear error and changes nothing: 2^24 + 1 events (over 384 MiB, past
    kvmalloc's INT_MAX bytes, where it would warn) is refused when written, 200000 kept."""
    step(vm, "rec_too_many", rc=1)
    assert step(vm, "rec_kept").strip() == "200000"


def test_tcp_lab_cleaned_up(vm):
    step(vm, "tcp_cleanup")


def test_unknown_discipline_names_the_known_ones(vm):
    """Rule: the refusal of an unknown discipline lists the core's own names (aqm_discipline_names)."""
    out = step(vm, "unknown_disc", rc=2)
    assert "unknown discipline in the spec (known: droptail red codel hdcodel choke sred fred sfb care " \
           "ckcd cocoa fq_codel pie dualpi2 bands)" in out, out


def test_change_keeps_what_it_is_not_told(vm):
    """Rule: `tc qdisc change ... ckcd OPTION` changes that option and keeps the others, as Linux
    qdiscs do; another discipline starts from its defaults; a whole spec replaces everything;
    a change without options is refused with a message and changes nothing."""
    step(vm, "chg_base")
    keep = step(vm, "chg_keep")
    assert re.search(r"ckcd 8\w*: root refcnt \d+ limit 120 delta_ms 100 d_ms 5 omega 0.002 rate_bps 100000000 "
                     r"rtt_ms 20 ", keep), keep
    assert "change needs options" in step(vm, "chg_empty", rc=2)
    assert step(vm, "chg_after_empty") == keep
    red = step(vm, "chg_to_red")
    assert re.search(r"disc red limit 200 min 20 max 60 max_p 0.1 ", red), red
    red2 = step(vm, "chg_red_keep")
    assert re.search(r"disc red limit 200 min 20 max 60 max_p 0.05 ", red2), red2
    # CKCD's d_ms given to the running red: refused, naming it (the core's typed key)
    assert "Error: ckcd: unknown parameter 'd_ms' for this discipline" in step(vm, "chg_red_nod", rc=2)
    whole = step(vm, "chg_spec")
    assert re.search(r"root refcnt \d+ limit 90 delta_ms 100 d_ms 5 ", whole) and " disc " not in whole, whole
    step(vm, "del_chg")


def test_long_spec_dumps_whole_and_replays(vm):
    """Rule: dump returns the whole running spec, sized from the spec (8 ckcd bands describe to
    well over the old 1024-byte buffer), and that spec replays in ckcd-replay as it is."""
    step(vm, "long_spec")
    [q] = [q for q in json.loads(step(vm, "long_json")) if q["kind"] == "ckcd"]
    spec = q["options"]["spec"]
    assert len(spec) > 1024 and spec.count("| ckcd ") == 8 and spec.rstrip().endswith(spec.split()[-1]), spec
    assert re.search(r"\| ckcd limit=\d+( \w+=[\d.]+)+$", spec), spec[-200:]
    out = subprocess.run([replay_bin(), "--describe", "--qdisc", spec], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == spec


def test_memory_cap_refuses_with_a_message_naming_it(vm):
    """Rule: the limits of one qdisc's spec add up to at most the module parameter max_packets
    (default 100000): more is refused naming it, a raised cap lets the spec in, 0 is no value."""
    assert step(vm, "cap_default").strip() == "100000"
    for name in ("cap_one", "cap_bands"):
        assert "max_packets" in step(vm, name, rc=2), name
    step(vm, "cap_raise")
    assert step(vm, "cap_restore").strip() == "100000"
    step(vm, "cap_zero", rc=1)
    assert "ckcd" not in step(vm, "cap_gone")


def test_change_without_options_refused_under_load(vm):
    assert "change needs options" in step(vm, "change_empty", rc=2)


def test_reset_flushes_without_aqm_decisions(vm):
    """Rule: reset (the device going down) frees every queued packet as a flush, with no AQM
    decision: the qdisc is empty, the core counted as dequeued only what Linux counted as sent,
    and every packet the first show had queued was sent, dropped or flushed. Exact: the senders
    are stopped, so nothing arrives between the two shows, while the class goes on sending (at
    1 Mbit/s, a packet in 10 ms: the backlog at the reset is not the first show's). (Before:
    reset ran the AQM's dequeue, which counted them as sent.)"""
    before = ckcd_stats(step(vm, "reset_before"), "10:")
    assert before["backlog_pkts"] > 10, before["text"]
    after = ckcd_stats(step(vm, "reset"), "10:")
    texts = (before["text"], after["text"])
    assert after["backlog_pkts"] == 0, after["text"]
    moved = {k: after[k] - before[k] for k in ("enq_pkts", "deq_pkts", "sent_pkts")}
    drops = {why: n - before["drops"][why] for why, n in after["drops"].items()}
    assert moved["deq_pkts"] == moved["sent_pkts"], texts
    assert drops["flush"] > 0, texts
    assert before["backlog_pkts"] + moved["enq_pkts"] == moved["deq_pkts"] + sum(drops.values()), (moved, drops, texts)


def test_aqm_drops_of_the_arrival_count_as_overlimits(vm):
    """Rule: an early or match drop of the arriving packet is congestion (NET_XMIT_CN), counted in
    overlimits, as sch_red, sch_choke and sch_sfb count theirs; a full buffer is not."""
    st = ckcd_stats(step(vm, "traffic"), "10:")
    aqm = st["drops"]["early"] + st["drops"]["choke-match"] + st["drops"]["penalty"]
    assert aqm > 0, st["text"]
    # a match drops the queued victim too, which is no arrival: between the arrivals' drops and all
    assert st["drops"]["early"] <= st["overlimits"] <= aqm, st["text"]


def test_records_of_same_named_devices_in_two_namespaces(vm):
    """Rule: debugfs names of records cannot collide across network namespaces."""
    out = step(vm, "rec_two")
    assert len(set(re.findall(r"\b\d+-x0-[0-9a-f]+\b", out))) == 2, out


def test_change_closes_the_record(vm):
    """Rule: a record holds one configuration's inputs; a change ends it (its queue draws random
    numbers outside the lock, which would be a second writer)."""
    out = step(vm, "rec_close")
    assert re.search(r"# events \d+ of 1000 \(closed: the qdisc was changed\)", out), out


def htb_and_leaves(out):
    """(root htb backlog packets, {leaf handle: stats}) from tc -s qdisc show."""
    root = re.search(r"qdisc htb 1: root .*?backlog \S+ (\d+)p", out, re.S)
    leaves = {m.group(1): ckcd_stats(out, m.group(1)) for m in re.finditer(r"qdisc ckcd (\w+:) parent", out)}
    return int(root.group(1)), leaves


@pytest.mark.parametrize("case", ["drain_one", "drain_two"])
def test_leaf_that_drops_at_dequeue_keeps_htb_consistent(vm, case):
    """Rule: a leaf that drops at dequeue never tells HTB about drops while its own queue is
    empty (Linux's codel/fq_codel rule), and CKCD hands on the last packet of a dequeue that
    drops, as CoDel does: after bursts and silence, HTB's backlog is the leaves' (0), every
    packet was sent or dropped for a reason, and dmesg stays clean (test_dmesg_has_no_warning)."""
    step(vm, case)
    shown = step(vm, case + "_show")
    # HTB notes once per leaf that returned nothing although it had packets: none did here
    # (grep -c exits 1 when it counts 0)
    counts = [vm[f"{case}_nonwc_{when}"][1].strip() for when in ("before", "after")]
    assert counts[0] == counts[1], counts
    root, leaves = htb_and_leaves(shown)
    assert leaves and root == 0, (root, leaves)
    for st in leaves.values():
        assert st["backlog_pkts"] == 0 and sum(st["drops"].values()) == st["dropped"], st["text"]
    assert sum(st["drops"]["delay"] for st in leaves.values()) > 50, leaves


def test_every_discipline_under_traffic_and_changes_under_load(vm):
    """Rule: every core discipline runs as an HTB leaf under UDP overload, and 200 changes of
    limit, discipline and bands under UDP and TCP load are all accepted."""
    lines = step(vm, "every_disc_result").splitlines()
    assert len(lines) == 15 and not any("FAILED" in line for line in lines), lines
    for line in lines:
        m = re.search(r"Sent \d+ bytes (\d+) pkt", line)
        assert m and int(m.group(1)) > 100, line
    assert "changes 200 failed 0" in step(vm, "churn_done")


def test_per_flow_state_on_demand_in_debugfs(vm):
    """Rule: tc -s carries numbers only; the discipline's per-flow text state is formatted when
    debugfs <netns>-<dev>-<major>.state is read: CKCD's two flows, each with its rate and d_th."""
    out = step(vm, "rec_state")
    flows = re.findall(r"flow\.\d+=mu_bps:(\d+),dth_us:(\d+)", out)
    assert len(flows) >= 2 and out.startswith("qlen_pkts="), out[:500]
