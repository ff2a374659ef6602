"""sch_ckcd on every Debian kernel line the lab boots (tests/kernel/kernels.py): 6.1, 6.12, 7.3.

6.1 runs the whole VM suite (test_sch_ckcd.py) and the DKMS package checks (test_dkms.py).
Here, for every line, the module builds against that kernel's headers with no warning; and
for 6.12 and 7.3, DKMS builds it (scripts/dkms.sh --build-only, in a throwaway overlay of the
trixie root where their headers live) and one VM boot per kernel, shared by all its checks,
runs a lean set with the module DKMS built: the kernel loads it by itself at the first `tc
qdisc add ... ckcd`, bad options are refused with their extack message and the old
configuration kept, `change` keeps what it is not told and the queued packets, every
discipline of the core is an HTB leaf under UDP overload, HTB leaves that drop at dequeue are
drained with HTB's backlog consistent (the non-work-conserving case), a leaf's record of
BBR+CUBIC replays through ckcd-replay to the same verdicts, the module unloads, and dmesg
has no WARN, BUG or oops. The 7.3 boot also cross-checks the core's DualPI2 against Linux's
own sch_dualpi2 (in Linux from 6.17 on; Debian leaves it out, linux_dualpi2.py builds it), loaded
before the script and configured through our q_dualpi2.so: a DCTCP and a CUBIC flow through
each. Each test's id names its kernel line ([kernel-7.3]); the boot prints the exact version.

A missing prerequisite (qemu, the trixie root, a kernel's headers or image) fails the test:
`make test` installs or fetches all of them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter

import pytest

from tests.conftest import REPO
from tests.datapath.replaylib import build as replay_bin
from experiments.lab import bpf_cc
from tests.kernel import bpf_twins, kbuild, kernels, lab, linux_dualpi2
from tests.kernel.test_sch_ckcd import (EXPECTED_DMESG, ckcd_stats, htb_and_leaves, kernel_verdicts,
                                        replay_verdict, step)

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

NEW_LINES = tuple(kernels.LINES)  # 6.12 and 7.3
# In-tree modules of the lean boots (one cached initramfs per kernel): veths, the HTB parent,
# netem for the RTT, BBR.
LEAN_MODULES = ("veth", "sch_htb", "sch_netem", "tcp_bbr")
# The disciplines docs/kernel.md names; the VM runs every one the module reports, these at least.
DOCUMENTED = ("droptail", "red", "codel", "hdcodel", "choke", "sred", "fred", "sfb", "care", "ckcd",
              "cocoa", "bands")


def kernel_id(line: str) -> str:
    return f"kernel-{line}"


def version_of(line: str) -> str:
    try:
        return kernels.resolve(line)
    except kernels.LabUnavailable as e:
        pytest.fail(f"kernel {line}: {e}")


@pytest.mark.parametrize("line", kernels.ALL_LINES, ids=kernel_id)
def test_module_builds_without_warnings(line):
    """Rule: sch_ckcd builds against each line's headers (`make -C datapath/kernel module KVER=V
    KDIR=...`, into a build directory of that kernel's own) with no compiler or modpost warning,
    for that kernel (vermagic), and carries the alias the kernel asks for when it loads a
    qdisc kind by itself: net-sch-ckcd from 6.9 on, none before (6.1 asks for sch_ckcd)."""
    version = version_of(line)
    try:
        ko, out = kbuild.make_module(REPO, version)
    except kernels.LabUnavailable as e:
        pytest.fail(f"kernel {line}: {e}")
    assert ko == os.path.join(REPO, "datapath", "kernel", "build", "kernels", version, "sch_ckcd.ko")
    warnings = [x for x in out.splitlines() if re.search(r"\bwarning\b", x, re.I)]
    assert not warnings, "\n".join(warnings)
    info = kbuild.modinfo(ko)
    assert info["vermagic"][0].split()[0] == version, info["vermagic"]
    major, minor = map(int, version.split(".")[:2])
    assert info.get("alias", []) == (["net-sch-ckcd"] if (major, minor) >= (6, 9) else []), info.get("alias")


@pytest.fixture(scope="module", params=NEW_LINES, ids=kernel_id)
def line(request):
    return request.param


@pytest.fixture(scope="module")
def dkms_built(line):
    """scripts/dkms.sh --build-only -k V for the line's kernel; (version, the .ko, DKMS's output)."""
    version = version_of(line)
    try:
        ko, out = kbuild.dkms_module(REPO, version)
    except kernels.LabUnavailable as e:
        pytest.fail(f"kernel {line}: {e}")
    return version, ko, out


def test_dkms_builds_for_the_kernel_and_leaves_the_root_unchanged(dkms_built):
    """Rule: DKMS (Debian 13's, in the trixie root with the line's headers) builds sch_ckcd for that
    kernel and signs it; the copy the lab boots is a plain .ko whatever DKMS compressed; and
    nothing DKMS registered stays in the cached root (it ran in a throwaway overlay)."""
    version, ko, out = dkms_built
    assert "building sch_ckcd/" in out and f"for {version}" in out, out
    assert ko == os.path.join(REPO, "datapath", "kernel", "build", "dkms", version, "sch_ckcd.ko")
    with open(ko, "rb") as f:
        assert f.read(4) == b"\x7fELF", "the lab's copy is not a plain module"
    info = kbuild.modinfo(ko)
    assert info["vermagic"][0].split()[0] == version and info["name"] == ["sch_ckcd"], info
    signer = subprocess.run(["modinfo", "-F", "signer", ko], text=True, capture_output=True).stdout.strip()
    assert signer == "DKMS module signing key", signer
    from tests.platform import trixie

    assert not os.path.exists(os.path.join(trixie.ROOT, "var/lib/dkms/sch_ckcd")), "DKMS state left in the root"
    assert not [d for d in os.listdir(os.path.join(trixie.ROOT, "usr/src")) if d.startswith("sch_ckcd-")]


SCRIPT = r"""
export TC_LIB_DIR=/lab
# as test_sch_ckcd's, and the guest's uptime at each step's end (the report's phases)
step() { n=$1; shift; echo "@@BEGIN $n"; "$@" 2>&1; r=$?; echo "@@END $n rc=$r t=$(cut -d' ' -f1 /proc/uptime)"; }
""" + lab.MEASURED + r"""KV=$(uname -r)
step uname uname -r
step crng sh -c "dmesg | grep -c 'random: crng init done'"
# Installed where DKMS installs it, and not loaded: the first tc qdisc add of kind ckcd loads it.
step autoload sh -c "mkdir -p /lib/modules/$KV/updates/dkms && cp /lab/sch_ckcd.ko /lib/modules/$KV/updates/dkms/ &&
  ln -sf /usr/bin/kmod /tmp/depmod && /tmp/depmod -a && $IP link add v0 type veth peer name v1 &&
  $TC qdisc add dev v0 root ckcd limit 80 delta 100ms d 5ms rate 100mbit rtt 20ms && lsmod | grep -c '^sch_ckcd '"
step show_root $TC qdisc show dev v0
step bad_limit $TC qdisc change dev v0 root ckcd limit 0
step bad_conflict $TC qdisc change dev v0 root ckcd dth_min 60ms
step bad_spec $TC qdisc change dev v0 root ckcd spec "droptail ecn=1"
step show_after_bad $TC qdisc show dev v0
step unknown_disc $TC qdisc change dev v0 root ckcd spec "nosuch limit=3"
step chg_keep sh -c "$TC qdisc change dev v0 root ckcd limit 120 && $TC qdisc show dev v0"
step del_root sh -c "$TC qdisc del dev v0 root && $IP link del v0"

# a -> router r -> b, offloads off (a packet limit counts MTU frames), netem 20 ms on b's ACKs;
# the qdisc under test is the leaf of an HTB class on r's egress towards b.
step tcp_setup sh -c '
for n in a r b; do $IP netns add $n && $IP -n $n link set lo up || exit 1; done
$IP link add va netns a type veth peer name ra netns r && $IP link add rb netns r type veth peer name vb netns b || exit 1
$IP -n a addr add 10.8.1.1/24 dev va && $IP -n r addr add 10.8.1.254/24 dev ra &&
$IP -n r addr add 10.8.2.254/24 dev rb && $IP -n b addr add 10.8.2.1/24 dev vb || exit 1
for x in a:va r:ra r:rb b:vb; do n=${x%:*}; d=${x#*:}
  $IP -n $n link set $d up && $IP netns exec $n /usr/sbin/ethtool -K $d tso off gso off gro off || exit 1; done
$IP -n a route add default via 10.8.1.254 && $IP -n b route add default via 10.8.2.254 &&
$IP netns exec r sysctl -qw net.ipv4.ip_forward=1 &&
modprobe tcp_bbr && modprobe sch_netem && modprobe sch_htb &&
$IP netns exec b $TC qdisc add dev vb root netem delay 20ms limit 10000 &&
for p in 5301 5302 5303 5304 5305; do $IP netns exec b iperf3 -s -D -p $p || exit 1; done &&
$IP netns exec a ping -c 2 -W 2 10.8.2.1'
R="$IP netns exec r $TC"
htb_class() {  # RATE: r's egress towards b, one HTB class at RATE
  $R qdisc add dev rb root handle 1: htb default 1 && $R class add dev rb parent 1: classid 1:1 htb rate $1 ceil $1
}
udp() {  # PORT MBIT SECONDS: a UDP flow from a to b
  $IP netns exec a iperf3 -c 10.8.2.1 -p $1 -u -b ${2}M -l 1200 -t $3 >/dev/null 2>&1
}

# Every discipline the module reports, each in turn grafted as a new leaf of a 10 Mbit/s HTB class
# under one 20 Mbit/s UDP flow, for 1 s each (a new handle each time: a new qdisc replaces the old).
DISCS=$($TC qdisc add dev lo root ckcd spec nosuch 2>&1 | sed -n 's/.*(known: \(.*\)).*/\1/p')
step discs echo $DISCS
htb_class 10mbit
set -- $DISCS
# ended below (ip netns exec execs iperf3: $! is its PID); its own server, which no later step meets closing
$IP netns exec a iperf3 -c 10.8.2.1 -p 5305 -u -b 20M -l 1200 -t $((2 * $# + 5)) >/dev/null 2>&1 & u=$!
class_sent() { n=$($R -s class show dev rb classid 1:1 | sed -n 's/.*Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p' | head -1); echo ${n:-0}; }
i=0; while [ "$(class_sent)" -lt 100 ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done  # the flow runs (<= 15 s)
h=100
for d in $DISCS; do
  case $d in bands) leaf="ckcd spec bands|ckcd|droptail";; *) leaf="ckcd disc $d";; esac
  h=$((h + 1))
  $R qdisc replace dev rb parent 1:1 handle $h: $leaf || echo "FAILED $d"
  sleep 1
  echo "$d $($R -s qdisc show dev rb parent 1:1 | grep -o 'Sent [0-9]* bytes [0-9]* pkt (dropped [0-9]*' | head -1)"
done > /tmp/every.txt 2>&1
kill $u; wait
$R qdisc del dev rb root
step every_disc cat /tmp/every.txt

# change under load: a standing queue (qmin/qmax near the limit, d_th above its delay) carried over
LEAF="rate 1mbit qmin 40 qmax 55 dth_min 5s dth_max 10s delta 10s"
chg_setup() { htb_class 1mbit && $R qdisc add dev rb parent 1:1 handle 10: ckcd limit 60 $LEAF; }
step chg_setup chg_setup
udp 5301 4 8 & udp 5302 4 8 &
backlog() { n=$($R -s qdisc show dev rb parent 1:1 | grep -o 'backlog [0-9]*b [0-9]*p' | head -1 | sed 's/.* //; s/p//'); echo ${n:-0}; }
i=0; while [ "$(backlog)" -lt 30 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done  # a standing queue (<= 10 s)
step chg_before $R -s qdisc show dev rb parent 1:1
step chg_leaf $R qdisc change dev rb parent 1:1 handle 10: ckcd limit 100 $LEAF
step chg_after $R -s qdisc show dev rb parent 1:1
wait
step chg_traffic $R -s qdisc show dev rb parent 1:1
$R qdisc del dev rb root

# Leaves that drop at dequeue (d_th of 0.01-0.02 ms: nearly every packet is late), one HTB level
# and two: bursts, then silence; HTB's one-time note counts a leaf that came back empty with packets.
nonwc() { dmesg | grep -c 'is non-work-conserving'; }
TINY="rate 10mbit dth_min 0.01ms dth_max 0.02ms delta 1ms d 0.01ms qmin 20 qmax 150"
bursts() {  # two rounds of 0.5 s at 20 Mbit/s on each of three ports, 1.5 s of silence after each
  for r in 1 2; do
    for p in 5301 5302 5303; do $IP netns exec a iperf3 -c 10.8.2.1 -p $p -u -b 20M -l 1200 -n 1250000 >/dev/null 2>&1 & done
    wait; sleep 1.5
  done
}
step drain_one sh -c "$R qdisc add dev rb root handle 1: htb default 1 &&
  $R class add dev rb parent 1: classid 1:1 htb rate 10mbit ceil 10mbit &&
  $R qdisc add dev rb parent 1:1 handle 10: ckcd limit 200 $TINY"
step drain_one_nonwc_before nonwc
bursts
step drain_one_show $R -s qdisc show dev rb
step drain_one_nonwc_after nonwc
$R qdisc del dev rb root
step drain_two sh -c "$R qdisc add dev rb root handle 1: htb default 11 &&
  $R class add dev rb parent 1: classid 1:1 htb rate 20mbit ceil 20mbit &&
  $R class add dev rb parent 1:1 classid 1:11 htb rate 10mbit ceil 20mbit &&
  $R class add dev rb parent 1:1 classid 1:12 htb rate 10mbit ceil 20mbit &&
  $R qdisc add dev rb parent 1:11 handle 11: ckcd limit 200 $TINY &&
  $R qdisc add dev rb parent 1:12 handle 12: ckcd limit 200 $TINY"
step drain_two_nonwc_before nonwc
bursts
step drain_two_show $R -s qdisc show dev rb
step drain_two_nonwc_after nonwc
$R qdisc del dev rb root

# The record: 5 s of ECN-capable BBR+CUBIC through a 5 Mbit/s ckcd leaf with ecn 1 (a rate the
# emulated CPU fills even on a busy host, so the queue and its delay marks come every time).
REC=/sys/module/sch_ckcd/parameters/record_events
step rec_setup sh -c "mount -t debugfs none /sys/kernel/debug && echo 200000 > $REC &&
  $R qdisc add dev rb root handle 1: htb default 1 && $R class add dev rb parent 1: classid 1:1 htb rate 5mbit ceil 5mbit &&
  $R qdisc add dev rb parent 1:1 handle 10: ckcd limit 16 rate 5mbit rtt 20ms ecn 1 && echo 0 > $REC"
flows() {
  $IP netns exec a sysctl -qw net.ipv4.tcp_ecn=1
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5303 -C bbr -t $1 -f m > /tmp/bbr.txt 2>&1 & b=$!
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5304 -C cubic -t $1 -f m > /tmp/cubic.txt 2>&1 & c=$!
  wait $b; rb=$?; wait $c; rc=$?
  echo "bbr $(grep receiver /tmp/bbr.txt)"; echo "cubic $(grep receiver /tmp/cubic.txt)"
  [ $rb = 0 ] && [ $rc = 0 ]
}
measured rec_flows flows 5
step rec_spec $R -j qdisc show dev rb parent 1:1
step rec_dump sh -c "cat /sys/kernel/debug/sch_ckcd/*-rb-10"
step rec_del $R qdisc del dev rb root
step rec_gone sh -c "ls /sys/kernel/debug/sch_ckcd/"

@@DUALPI2@@
step cleanup sh -c "$IP netns del a; $IP netns del r; $IP netns del b"
step unload rmmod sch_ckcd
step lsmod sh -c "lsmod | grep -c sch_ckcd"
step dmesg sh -c "dmesg | grep -E 'WARNING|BUG|Call Trace|KASAN|UBSAN|leak|Oops|ckcd|non-work-conserving' || true"
"""

# The lines whose kernel has Linux's sch_dualpi2 (in Linux from 6.17 on): their boot also loads it
# (this kernel's own net/sched/sch_dualpi2.c built out of tree: tests/kernel/linux_dualpi2.py) and
# runs the DualPI2 cross-check, with tcp_dctcp in the initramfs.
DUALPI2_LINES = ("7.3",)
DUALPI2_MODULES = ("tcp_dctcp",)
# RFC 9332's defaults, which are Linux's (target 15 ms, tupdate 16 ms, alpha 0.16 Hz and beta 3.2
# Hz, a 1 ms step threshold in L, coupling k = 2, 10 % of the scheduler's weight for C), with
# any_ect: DCTCP sends ECT(0), which Linux's default l4s_ect (ECT(1) only) would put in C. The
# limit is the PIE cross-check's 1000 packets: the queue is held by the AQM, not by a tail.
DUALPI2_LINUX = ("limit 1000 target 15ms tupdate 16ms alpha 0.16 beta 3.2 step_thresh 1ms coupling_factor 2 "
                 "classic_protection 10 any_ect drop_on_overload drop_dequeue")
# The same in the core's names and units (datapath/core/dualpi2.c); Linux keeps alpha and beta in
# 1/256 Hz (41/256 and 819/256, 0.1 % off), the core in 1/10^4 Hz.
DUALPI2_CORE = ("dualpi2 limit=1000 target_ms=15 tupdate_ms=16 alpha=0.16 beta=3.2 step_thresh_ms=1 coupling=2 "
                "c_protection=10 ecn_mask=3 drop_overload=1 drop_early=0")
DUALPI2_SECONDS = 12

DUALPI2_SCRIPT = r"""
# DualPI2: Linux's sch_dualpi2 (loaded before the script) configured through our q_dualpi2.so,
# then a DCTCP flow (ECT(0): the L queue) and a CUBIC flow (Not-ECT: C) through the 20 Mbit/s
# HTB class of r's egress, 20 ms RTT, with Linux's dualpi2 and then the core's as the leaf.
DP2="@@LINUX@@"
step dp2_module sh -c "grep -c '^sch_dualpi2 ' /proc/modules"
step dp2_show sh -c "$R qdisc add dev rb root handle 1: dualpi2 $DP2 && $R qdisc show dev rb"
step dp2_change sh -c "$R qdisc change dev rb root dualpi2 step_thresh 3packets l4s_ect overflow drop_enqueue \
  classic_protection 0 && $R qdisc show dev rb"
step dp2_bad_limit $R qdisc change dev rb root dualpi2 limit 0
step dp2_bad_alpha $R qdisc change dev rb root dualpi2 alpha 0.001
step dp2_bad_step $R qdisc change dev rb root dualpi2 step_thresh 3q
step dp2_bad_protection $R qdisc change dev rb root dualpi2 classic_protection 101
step dp2_bad_tupdate $R qdisc change dev rb root dualpi2 tupdate 4294968us
step dp2_bad_whole $R qdisc change dev rb root dualpi2 limit 5.
step dp2_kept sh -c "$R qdisc show dev rb && $R qdisc del dev rb root"
# CUBIC's packets Not-ECT (a's tcp_ecn 0). iperf3 sets -C's control after connect(), too late
# for DCTCP to ask for ECN in its SYN, so the DCTCP flow goes to a second address of b through a
# route of a's whose congctl makes its connections DCTCP from the SYN on. Its receiver runs DCTCP
# too: b's listener accepts an ECT SYN only then, and its ACKs echo each CE mark as it comes (a
# classic receiver repeats ECE until the sender's CWR). A namespace may default only to a control
# the allowed list names. b only ACKs, so the CUBIC flow's receiver is not affected.
step dp2_setup sh -c "$IP netns exec a sysctl -qw net.ipv4.tcp_ecn=0 && modprobe tcp_dctcp &&
  sysctl -qw net.ipv4.tcp_allowed_congestion_control='reno cubic dctcp' &&
  $IP netns exec b sysctl -qw net.ipv4.tcp_congestion_control=dctcp && $IP netns exec b iperf3 -s -D -p 5306 &&
  $IP -n b addr add 10.8.2.2/24 dev vb && $IP -n a route add 10.8.2.2/32 via 10.8.1.254 congctl dctcp"
# The leaf's tc -s, and the core's own counters (its debugfs state, mounted by rec_setup)
dp2_state() { $R -s qdisc show dev rb parent 1:1; cat /sys/kernel/debug/sch_ckcd/*-rb-10.state 2>/dev/null; }
dctcp_cubic() {  # SECONDS LEAF...: both flows through the leaf, its state every 0.5 s and at the end
  t=$1; shift
  $R qdisc add dev rb root handle 1: htb default 1 && $R class add dev rb parent 1: classid 1:1 htb rate 20mbit \
    ceil 20mbit && $R qdisc add dev rb parent 1:1 handle 10: "$@" || return 1
  $IP netns exec a iperf3 -c 10.8.2.2 -p 5306 -C dctcp -t $t -f m > /tmp/dctcp.txt 2>&1 & d=$!
  $IP netns exec a iperf3 -c 10.8.2.1 -p 5304 -C cubic -t $t -f m > /tmp/cubic.txt 2>&1 & c=$!
  while kill -0 $d 2>/dev/null; do echo "@sample $(dp2_state | tr '\n' ' ')"; sleep 0.5; done
  wait $d; rd=$?; wait $c; rc=$?
  echo "dctcp $(grep receiver /tmp/dctcp.txt)"; echo "cubic $(grep receiver /tmp/cubic.txt)"
  dp2_state
  $R qdisc del dev rb root
  [ $rd = 0 ] && [ $rc = 0 ]
}
measured dp2_linux dctcp_cubic @@SECONDS@@ dualpi2 $DP2
measured dp2_core dctcp_cubic @@SECONDS@@ ckcd spec "@@CORE@@"
"""


# The line whose boot also runs our BPF congestion controls against the kernel's modules of the same
# algorithm (tests/kernel/bpf_twins.py): one boot is enough, and 7.3's already loads tcp_dctcp.
BPF_CC_LINES = ("7.3",)


def script_for(line: str) -> str:
    """The lean set's script for the line's boot: with the DualPI2 part where the kernel has it,
    and the BPF congestion controls' part on BPF_CC_LINES."""
    part = ""
    if line in DUALPI2_LINES:
        part = (DUALPI2_SCRIPT.replace("@@LINUX@@", DUALPI2_LINUX).replace("@@CORE@@", DUALPI2_CORE)
                .replace("@@SECONDS@@", str(DUALPI2_SECONDS)))
    if line in BPF_CC_LINES:
        part += bpf_twins.script()
    return SCRIPT.replace("@@DUALPI2@@\n", part)


@pytest.fixture(scope="module")
def vm(line, dkms_built):
    """One boot of the line's kernel with the module DKMS built for it; its lab.Steps,
    {step: (rc, output)}."""
    version, ko, _ = dkms_built
    files, extra, modules, programs = {"lab/sch_ckcd.ko": ko}, [], LEAN_MODULES, lab.HOST_PROGRAMS
    try:
        lab.check_prerequisites(version)
        files["lab/q_ckcd.so"] = lab.build_plugin(REPO)
        if line in DUALPI2_LINES:
            extra.append(linux_dualpi2.sch_dualpi2(version))
            files["lab/q_dualpi2.so"] = linux_dualpi2.plugin(REPO)
            modules += DUALPI2_MODULES
        if line in BPF_CC_LINES:
            if not os.path.exists(bpf_twins.BPFTOOL):
                raise kernels.LabUnavailable(f"no {bpf_twins.BPFTOOL} for the guest: install bpftool "
                                             "(make setup-tests does)")
            files.update(bpf_twins.files())
            modules += tuple(m for m in bpf_twins.MODULES if m not in modules)
            programs += (bpf_twins.BPFTOOL,)
    except (kernels.LabUnavailable, bpf_cc.BpfUnavailable) as e:
        pytest.fail(f"kernel {line}: {e}")
    from ovs_config.lablock import lab_lock

    with lab_lock():  # TCG takes a whole core: no other lab beside it
        res = lab.run(script_for(line), files, timeout_s=600, modules=modules, kernel=version,
                      extra_modules=extra, programs=programs)
    assert res.exit_status is not None, f"the {version} VM did not finish:\n{res.console[-3000:]}"
    ends = dict(re.findall(r"@@END (\w+) rc=\d+ t=([\d.]+)", res.output))  # the last try's, if measured again
    print(f"{version}: {res.seconds:.1f} s in qemu; guest uptime at the end of " +
          ", ".join(f"{name} {float(ends[name]):.0f} s" for name in PHASES if name in ends))
    return lab.Steps(res)


# The steps that end each part of the script, for the timing line the fixture prints.
PHASES = ("uname", "del_root", "tcp_setup", "every_disc", "chg_traffic", "drain_one_nonwc_after",
          "drain_two_nonwc_after", "rec_gone", "dp2_kept", "dp2_linux", "dp2_core", "cc_unregister", "dmesg")


def test_boots_the_lines_kernel_and_loads_the_module_by_itself(vm, dkms_built):
    """Rule: the VM runs the line's own kernel, and with sch_ckcd installed where DKMS installs it
    (updates/dkms, depmod run), the first `tc qdisc add ... ckcd` makes the kernel load it: 6.12
    and 7.3 ask for the alias net-sch-ckcd, which the module must carry."""
    version = dkms_built[0]
    assert step(vm, "uname").strip() == version
    assert step(vm, "autoload").strip().splitlines()[-1] == "1", "sch_ckcd was not loaded by tc qdisc add"
    assert re.search(r"qdisc ckcd 8\w*: root refcnt \d+ limit 80 delta_ms 100 d_ms 5 omega 0.002 "
                     r"rate_bps 100000000 rtt_ms 20 ", step(vm, "show_root")), step(vm, "show_root")


def test_the_guests_random_generator_is_ready_before_the_script(vm):
    """Rule: the lab's guest CPU offers RDRAND, so the kernel seeds its random generator while it
    boots. Seeded later, from interrupt timing alone, it becomes ready some 16 s in, under traffic,
    and the kernel then turns its readiness on by patching live code: under TCG one such patch met
    iperf3 drawing random numbers and the 6.12 guest died (an int3 Oops in crng_make_state)."""
    assert step(vm, "crng").strip() == "1"


def test_bad_options_refused_with_extack_and_old_config_kept(vm):
    """Rule: a bad value, a conflict and a parameter the discipline lacks are refused by the kernel
    with the extack message naming the option; the running qdisc keeps its configuration;
    an unknown discipline is answered with the core's list."""
    assert "Error: ckcd: invalid value for option 'limit' (allowed 1..1000000 packets)" in \
        step(vm, "bad_limit", rc=2)
    assert "Error: ckcd: option 'dth_min_ms' conflicts with another option's value" in \
        step(vm, "bad_conflict", rc=2)
    assert "Error: ckcd: unknown parameter 'ecn' for this discipline" in step(vm, "bad_spec", rc=2)
    assert step(vm, "show_after_bad") == step(vm, "show_root")
    assert "Error: ckcd: unknown discipline in the spec (known: droptail " in step(vm, "unknown_disc", rc=2)


def test_change_keeps_what_it_is_not_told(vm):
    """Rule: `change ... limit 120` sets the limit and keeps every other running parameter."""
    out = step(vm, "chg_keep")
    assert re.search(r"root refcnt \d+ limit 120 delta_ms 100 d_ms 5 omega 0.002 rate_bps 100000000 rtt_ms 20 ",
                     out), out
    step(vm, "del_root")


def test_every_discipline_is_an_htb_leaf_under_udp(vm):
    """Rule: every discipline the module reports (the documented ones at least) is accepted as a
    new leaf of an HTB class under load and passes traffic: in 1 s of 20 Mbit/s UDP into
    10 Mbit/s it sends more than 100 packets."""
    step(vm, "tcp_setup")
    discs = step(vm, "discs").split()
    assert set(DOCUMENTED) <= set(discs), discs
    lines = step(vm, "every_disc").splitlines()
    assert [x.split()[0] for x in lines] == discs and not any("FAILED" in x for x in lines), lines
    for x in lines:
        m = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped \d+", x)
        assert m and int(m.group(1)) > 100, x


def test_change_under_load_keeps_queued_packets(vm):
    """Rule: change with a standing queue swaps the configuration in and carries the queued
    packets over (none flushed), and every drop of the UDP overload has a core reason."""
    step(vm, "chg_setup")
    before = ckcd_stats(step(vm, "chg_before"), "10:")
    step(vm, "chg_leaf")
    after = ckcd_stats(step(vm, "chg_after"), "10:")
    assert before["backlog_pkts"] > 20, before["text"]
    assert "limit 100 " in after["text"] and after["drops"]["flush"] == 0 and after["backlog_pkts"] > 0, after["text"]
    assert after["sent_pkts"] >= before["sent_pkts"], (before["text"], after["text"])
    traffic = ckcd_stats(step(vm, "chg_traffic"), "10:")
    assert traffic["dropped"] > 100 and sum(traffic["drops"].values()) == traffic["dropped"], traffic["text"]


@pytest.mark.parametrize("case", ["drain_one", "drain_two"])
def test_leaf_that_drops_at_dequeue_drains_and_keeps_htb_consistent(vm, case):
    """Rule: a leaf that drops at dequeue never leaves HTB counting packets it does not hold and
    never hands HTB nothing while it has packets (HTB's one-time "non-work-conserving" note):
    after bursts and silence HTB's backlog is 0, each leaf's drops have reasons, and the note
    count did not move."""
    step(vm, case)
    shown = step(vm, case + "_show")
    counts = [vm[f"{case}_nonwc_{when}"][1].strip() for when in ("before", "after")]
    assert counts[0] == counts[1], counts
    root, leaves = htb_and_leaves(shown)
    assert leaves and root == 0, (root, leaves)
    for st in leaves.values():
        assert st["backlog_pkts"] == 0 and sum(st["drops"].values()) == st["dropped"], st["text"]
    assert sum(st["drops"]["delay"] for st in leaves.values()) > 50, leaves


def test_record_replays_to_the_same_verdicts(vm, tmp_path):
    """Rule: the kernel qdisc and ckcd-replay, fed the same inputs (the leaf's record of 5 s of
    ECN-capable BBR+CUBIC at 5 Mbit/s), send, mark and drop exactly the same packets for the same
    reasons, drawing exactly the recorded random numbers (test_sch_ckcd's cross-check (a), on this
    kernel). Enough to mean something: over 1000 packets, drops of two reasons and marks."""
    step(vm, "rec_setup")
    print(step(vm, "rec_flows"))
    [leaf] = json.loads(step(vm, "rec_spec"))
    record = step(vm, "rec_dump")
    step(vm, "rec_del")
    assert step(vm, "rec_gone").strip() == "", "the record's debugfs file goes with its qdisc"
    n, cap = map(int, re.search(r"# events (\d+) of (\d+)", record).groups())
    assert n < cap, "the record filled: not every verdict is in it"
    kernel = kernel_verdicts(record)
    drops = [v for v in kernel.values() if not v.startswith("sent")]
    assert len(kernel) > 1000 and len(drops) > 20 and len(set(drops)) >= 2, (len(kernel), Counter(drops))
    assert sum(v.startswith("sent, marked") for v in kernel.values()) > 20, Counter(kernel.values())
    path = tmp_path / "record.txt"
    path.write_text(record)
    out = subprocess.run([replay_bin(), "--qdisc", leaf["options"]["spec"], "--events", str(path)],
                         capture_output=True, text=True, check=True).stdout
    lines = [json.loads(x) for x in out.splitlines()]
    replay = {p["seq"]: replay_verdict(p) for p in lines if p["type"] == "pkt"}
    [events] = [e for e in lines if e["type"] == "events"]
    differ = sorted(seq for seq in kernel.keys() | replay.keys() if kernel.get(seq) != replay.get(seq))
    print(f"record: {len(kernel)} packets, {dict(Counter(kernel.values()))}, {events['random_recorded']} random draws")
    assert not differ, [(seq, kernel.get(seq), replay.get(seq)) for seq in differ[:10]]
    assert events["random_used"] == events["random_recorded"] and events["random_past_record"] == 0, events


def test_unloads_and_dmesg_is_clean(vm):
    """Rule: with its qdiscs gone the module unloads, and the kernel logged no WARN, BUG, oops,
    KASAN/UBSAN report or HTB note; only an out-of-tree module's taint lines."""
    step(vm, "cleanup")
    step(vm, "unload")
    assert step(vm, "lsmod", rc=1).strip() == "0"
    out = step(vm, "dmesg")
    bad = [x for x in out.splitlines() if not any(e in x for e in EXPECTED_DMESG)]
    assert not bad, out


def test_extra_module_built_for_another_kernel_is_refused_before_booting():
    """Rule: lab.run's extra_modules reads each module's vermagic before a boot is spent on it:
    6.12's build offered to 7.3 is refused, naming both versions."""
    v612, v73 = version_of("6.12"), version_of("7.3")
    ko, _ = kbuild.make_module(REPO, v612)
    with pytest.raises(ValueError, match=rf"built for {re.escape(v612)}, not {re.escape(v73)}"):
        lab.extra_modules_for([ko], v73)


def test_extra_module_is_loaded_before_the_script(tmp_path):
    """Rule: an out-of-tree module given as extra_modules (here sch_ckcd built for 7.3, as .ko.xz
    the way Debian 13 ships modules) is in the booted kernel when the script starts."""
    import lzma

    version = version_of("7.3")
    ko, _ = kbuild.make_module(REPO, version)
    packed = tmp_path / "sch_ckcd.ko.xz"
    with open(ko, "rb") as src, lzma.open(packed, "wb", format=lzma.FORMAT_XZ) as dst:
        dst.write(src.read())
    from ovs_config.lablock import lab_lock

    with lab_lock():
        res = lab.run("uname -r; grep '^sch_ckcd ' /proc/modules", timeout_s=180, modules=LEAN_MODULES,
                      kernel=version, extra_modules=[str(packed)])
    assert res.exit_status == 0, res.console[-3000:]
    first, second = res.output.splitlines()[:2]
    assert first == version and " Live " in second, res.output


@pytest.mark.parametrize("dp2_line", DUALPI2_LINES, ids=kernel_id)
def test_linux_dualpi2_is_the_kernels_own_built_without_warnings(dp2_line):
    """Rule: the sch_dualpi2.ko the cross-check loads is Linux's own net/sched/sch_dualpi2.c from
    the line's kernel's Debian source package (linux-source-M.N at linux-image-V's version),
    built unmodified out of tree against that kernel's headers with no compiler or modpost
    warning, for that kernel (vermagic), under the name and alias the kernel gives it."""
    version = version_of(dp2_line)
    try:
        ko = linux_dualpi2.sch_dualpi2(version)
    except kernels.LabUnavailable as e:
        pytest.fail(f"kernel {dp2_line}: {e}")
    warnings = [x for x in linux_dualpi2.make_log(ko).splitlines() if re.search(r"\bwarning\b", x, re.I)]
    assert not warnings, "\n".join(warnings)
    info = kbuild.modinfo(ko)
    assert info["vermagic"][0].split()[0] == version and info["name"] == ["sch_dualpi2"], info
    assert info.get("alias") == ["net-sch-dualpi2"], info.get("alias")
    origin = linux_dualpi2._read_record(os.path.dirname(ko))
    major_minor = ".".join(version.split(".")[:2])
    assert origin.get("package") == f"linux-source-{major_minor}", origin
    assert origin.get("member") == f"linux-source-{major_minor}/net/sched/sch_dualpi2.c", origin
    assert origin.get("ko-sha256") == linux_dualpi2._sha256(ko), origin


# Linux's sch_dualpi2 exists from 6.17 on: these tests take the boots of DUALPI2_LINES only.
only_dualpi2_lines = pytest.mark.parametrize("line", DUALPI2_LINES, ids=kernel_id, indirect=True)


@only_dualpi2_lines
def test_linux_dualpi2_is_configured_through_our_tc_plugin(vm, line):
    """Rule: Linux's sch_dualpi2 is loaded before the script, and q_dualpi2.so (our tc plugin for a
    kind Debian's tc does not know) sends the options the kernel takes and prints them back as
    tc-dualpi2(8) writes them; a change keeps what it is not told; a value the kernel would refuse
    is refused by the plugin with a message naming the option, the running qdisc unchanged."""
    assert step(vm, "dp2_module").strip() == "1"
    shown = step(vm, "dp2_show")
    # alpha and beta go in as 41/256 and 819/256 Hz; Linux keeps them in its own units and dumps
    # them back truncated by one 1/256 (40/256 and 818/256): Linux's rounding, not ours
    assert re.search(r"qdisc dualpi2 1: root refcnt \d+ limit 1000p memlimit \d+B target 15ms tupdate 16ms "
                     r"alpha 0.156250 beta 3.195312 step_thresh 1ms min_qlen_step 0p coupling_factor 2 "
                     r"drop_on_overload drop_dequeue classic_protection 10% any_ect split_gso", shown), shown
    changed = step(vm, "dp2_change")
    assert re.search(r"limit 1000p .*target 15ms tupdate 16ms alpha 0.156250 beta 3.195312 step_thresh 3p "
                     r"min_qlen_step 0p coupling_factor 2 overflow drop_enqueue classic_protection 0% l4s_ect",
                     changed), changed
    for name, message in (("limit", 'option "limit": "0" is out of range 1..4294967295'),
                          ("alpha", 'option "alpha": "0.001" rounds to 0 in 1/256 Hz'),
                          ("step", 'option "step_thresh": "3q" is neither a time'),
                          ("protection", 'option "classic_protection": "101" is out of range 0..100'),
                          # the kernel keeps tupdate in ns in 32 bits: more than 4294967us it would clamp
                          ("tupdate", 'option "tupdate": "4294968us" is out of range 1us..4294967us'),
                          ("whole", 'option "limit": "5." is not a whole number')):
        assert message in step(vm, f"dp2_bad_{name}", rc=1)
    assert step(vm, "dp2_kept") == changed


def dualpi2_run(out: str) -> dict:
    """One dctcp_cubic run of either DualPI2: goodputs (Mbit/s, iperf3's receiver lines), the
    leaf's drops, its CE marks in all and the step's (Linux's xstats ecn_mark and step_marks, the
    core's of the same names in its debugfs state), and the queue delays (ms) of C and of L sampled
    every 0.5 s: Linux's xstats delay_c and delay_l, the core's delay_c_us and delay_l_us."""
    rates = {}
    for cc in ("dctcp", "cubic"):
        m = re.search(rf"^{cc} .*?([\d.]+) Mbits/sec\s+receiver", out, re.M)
        assert m, f"no {cc} receiver line:\n{out[-3000:]}"
        rates[cc] = float(m.group(1))
    final = out[out.rindex("\ncubic "):]
    dropped = int(re.search(r"Sent \d+ bytes \d+ pkt \(dropped (\d+)", final).group(1))
    marks = re.search(r"ecn_mark[ =](\d+) step_marks[ =](\d+)", final)
    in_l = re.search(r"pkts_in_l[ =](\d+)", final)
    assert marks and in_l, final
    delays = [tuple(int(x) / 1000 for x in m.groups()) for m in
              (re.search(r"delay_c(?:_us=| )(\d+)(?:us)? delay_l(?:_us=| )(\d+)", x)
               for x in out.splitlines() if x.startswith("@sample ")) if m]
    assert len(delays) >= 10, out[-3000:]
    c, l = [d[0] for d in delays], [d[1] for d in delays]
    return {"rates": rates, "dropped": dropped, "marks": int(marks.group(1)), "step_marks": int(marks.group(2)),
            "in_l": int(in_l.group(1)), "delay_c": (sum(c) / len(c), max(c)), "delay_l": (sum(l) / len(l), max(l)),
            "text": final}


@only_dualpi2_lines
def test_core_dualpi2_agrees_with_linux(vm, line):
    """Cross-check, rule: the core's DualPI2 through sch_ckcd treats a DCTCP flow (L, by any_ect)
    and a CUBIC flow (C) through the 20 Mbit/s HTB class as Linux's own sch_dualpi2 does with the
    same parameters (RFC 9332's defaults): the same split of the link, as many CE marks per L
    packet, the same share of them from the step, C's drops of the same order, and queue delays
    alike in C and below the 1 ms step in L.

    One 12 s run each, so each tolerance is the run-to-run spread measured in 8 runs of each
    (two boots, 2026-11-26; docs/kernel.md has the table), with margin:
    - DCTCP's share of the goodput: 0.19-0.20 under Linux, 0.19-0.22 under the core; within 10
      points, the other cross-checks' tolerance, three times that spread. Total goodput within
      25 % (17.7-18.9 Mbit/s measured; a busy host slows both);
    - CE marks per L packet: 0.257-0.273 and 0.246-0.280; within 0.08. The step's share of the
      marks: 0.82-0.88 and 0.81-0.90; within 0.15. The coupled marks (k p', the rest):
      119-174 and 99-197 a run; within 2.5x (1.9x between the extremes);
    - C's drops, which p_C = p'^2 makes few: 11-23 and 13-73 (a run's count follows p''s peak at
      CUBIC's slow-start overshoot, squared); within 100 of each other. A p_C of p' would drop
      some 1/p' = 50 times more, and no coupling none at all: both are far outside;
    - C's queue delay sampled every 0.5 s: means 6.5-12.2 and 7.3-11.8 ms, within 8 ms; peaks
      15.4-27.8 and 18.0-24.6 ms (CUBIC's overshoots), within 20 ms. L's mean delay below the
      step threshold (1 ms) in both: 0.01-0.18 and 0.00-0.09 ms measured."""
    step(vm, "dp2_setup")
    lin, core = dualpi2_run(step(vm, "dp2_linux")), dualpi2_run(step(vm, "dp2_core"))
    st = ckcd_stats(core["text"], "10:")
    for name, r in (("linux", lin), ("core", core)):
        print(f"{name}: {r['rates']}, dropped {r['dropped']}, marks {r['marks']} (step {r['step_marks']}) of "
              f"{r['in_l']} L packets, C delay mean/peak {r['delay_c'][0]:.1f}/{r['delay_c'][1]:.1f} ms, "
              f"L {r['delay_l'][0]:.2f}/{r['delay_l'][1]:.1f} ms")
    # the core's counters agree with its reasons: the step's marks are delay's, the coupled early's
    assert st["marks"]["delay"] == core["step_marks"] and sum(st["marks"].values()) == core["marks"], st["text"]
    assert sum(st["drops"].values()) == core["dropped"], st["text"]
    share = {k: r["rates"]["dctcp"] / sum(r["rates"].values()) for k, r in (("linux", lin), ("core", core))}
    assert abs(share["linux"] - share["core"]) <= 0.10, (lin["rates"], core["rates"])
    total = {k: sum(r["rates"].values()) for k, r in (("linux", lin), ("core", core))}
    assert abs(total["linux"] - total["core"]) <= 0.25 * total["linux"], total
    assert lin["in_l"] > 1000 and core["in_l"] > 1000, (lin["text"], core["text"])  # DCTCP was in L
    per_l = {k: r["marks"] / r["in_l"] for k, r in (("linux", lin), ("core", core))}
    assert abs(per_l["linux"] - per_l["core"]) <= 0.08, per_l
    step_share = {k: r["step_marks"] / r["marks"] for k, r in (("linux", lin), ("core", core))}
    assert abs(step_share["linux"] - step_share["core"]) <= 0.15, step_share
    coupled = {k: r["marks"] - r["step_marks"] for k, r in (("linux", lin), ("core", core))}
    assert coupled["linux"] > 20 and 1 / 2.5 <= coupled["core"] / coupled["linux"] <= 2.5, coupled
    assert abs(lin["dropped"] - core["dropped"]) <= 100, (lin["dropped"], st["drops"])
    assert abs(lin["delay_c"][0] - core["delay_c"][0]) <= 8, (lin["delay_c"], core["delay_c"])
    assert abs(lin["delay_c"][1] - core["delay_c"][1]) <= 20, (lin["delay_c"], core["delay_c"])
    assert lin["delay_l"][0] < 1 and core["delay_l"][0] < 1, (lin["delay_l"], core["delay_l"])


# Our BPF congestion controls against the kernel's modules: the boots of BPF_CC_LINES only.
only_bpf_cc_lines = pytest.mark.parametrize("line", BPF_CC_LINES, ids=kernel_id, indirect=True)


@only_bpf_cc_lines
def test_bpf_controls_register_beside_the_kernels_and_unregister(vm, line):
    """Rule: in the VM the kernel's module congestion controls are usable by name beside ours:
    tcp_dctcp and tcp_vegas load by modprobe, bpftool registers bpf_dctcp and bpf_vegas, and the
    kernel lists all four; unregistering ours takes them off its list and leaves its own."""
    listed = step(vm, "cc_setup")
    assert {"dctcp", "vegas", "bpf_dctcp", "bpf_vegas"} <= set(listed.split()), listed
    after = step(vm, "cc_unregister").split()
    assert {"dctcp", "vegas"} <= set(after) and not {"bpf_dctcp", "bpf_vegas"} & set(after), after


@only_bpf_cc_lines
def test_bpf_dctcp_matches_linux_dctcp(vm, line):
    """Twin check, rule: bpf_dctcp (RFC 8257, our BPF) carries one flow through a step marking
    at K = 4 ms as Linux's tcp_dctcp does: about the same goodput, the same fraction of its
    packets marked CE, the queue held near K, and no losses - DCTCP answers marks, not drops.

    One 10 s run each, so each tolerance is the spread of 4 runs of each (one 7.3 boot,
    2026-11-26; docs/congestion-controls.md has the table), with margin:
    - goodput 17.07-17.71 Mbit/s (Linux) and 16.32-17.07 (ours: 4 % lower on average); within
      15 % of Linux's, twice the widest gap between any two runs (7.8 %);
    - CE marks per packet sent 0.113-0.128 and 0.120-0.126; within 1.3x of each other (1.13x
      between the extremes). A control that halved on each mark as classic ECN does would be
      marked a few times per RTT, not on one packet in eight;
    - fq_codel's backlog sampled about twice a second: means 2.5-3.4 and 2.0-2.7 packets; within 2
      packets of each other, and both under K (6.6 packets);
    - drops: 0 in every run of both; at most 2 (a drop-tail 10240 packets away cannot drop)."""
    lin, ours = bpf_twins.run_twins(step(vm, "cc_dctcp_twins"))
    print(f"\ndctcp:     {bpf_twins.line(lin)}\nbpf_dctcp: {bpf_twins.line(ours)}")
    assert abs(ours["mbps"] - lin["mbps"]) <= 0.15 * lin["mbps"], (lin, ours)
    frac = {k: r["ce"] / r["sent"] for k, r in (("linux", lin), ("ours", ours))}
    assert frac["linux"] > 0.05 and 1 / 1.3 <= frac["ours"] / frac["linux"] <= 1.3, frac
    assert abs(ours["backlog"][0] - lin["backlog"][0]) <= 2, (lin["backlog"], ours["backlog"])
    assert max(lin["backlog"][0], ours["backlog"][0]) < 6.6, (lin["backlog"], ours["backlog"])
    assert lin["dropped"] <= 2 and ours["dropped"] <= 2, (lin, ours)


@only_bpf_cc_lines
def test_bpf_vegas_matches_linux_vegas(vm, line):
    """Twin check, rule: bpf_vegas (Brakmo and Peterson's Vegas, our BPF) carries one flow
    through a 100-packet FIFO as Linux's tcp_vegas does: about the same goodput, RTT and queue,
    a queue of a few packets where CUBIC, sent first through the same FIFO, builds one of tens.

    One 10 s run each; the spread of 4 runs of each (one 7.3 boot, 2026-11-26), with margin:
    - goodput 18.05-18.23 Mbit/s (Linux) and 17.78-18.39 (ours); within 10 % of Linux's, three
      times the widest gap between any two runs (3.4 %);
    - the sender's mean RTT 25.0-26.1 and 25.8-26.2 ms (20 ms of base); within 3 ms;
    - the FIFO's backlog sampled about twice a second: means 4.8-6.9 and 3.6-7.7 packets; within 6 of
      each other, and both under 12: Vegas's alpha-beta of 2-4 packets and TCG's timing noise.
      CUBIC's mean over its 10 s must be at least twice the larger (it fills toward the 100)."""
    cubic = bpf_twins.run(step(vm, "cc_cubic"))
    lin, ours = bpf_twins.run_twins(step(vm, "cc_vegas_twins"))
    print(f"\ncubic:     {bpf_twins.line(cubic)}\nvegas:     {bpf_twins.line(lin)}\n"
          f"bpf_vegas: {bpf_twins.line(ours)}")
    assert abs(ours["mbps"] - lin["mbps"]) <= 0.10 * lin["mbps"], (lin, ours)
    assert abs(ours["rtt_ms"] - lin["rtt_ms"]) <= 3, (lin["rtt_ms"], ours["rtt_ms"])
    assert abs(ours["backlog"][0] - lin["backlog"][0]) <= 6, (lin["backlog"], ours["backlog"])
    assert max(lin["backlog"][0], ours["backlog"][0]) < 12, (lin["backlog"], ours["backlog"])
    assert cubic["backlog"][0] >= 2 * max(lin["backlog"][0], ours["backlog"][0]), (cubic["backlog"], lin, ours)
