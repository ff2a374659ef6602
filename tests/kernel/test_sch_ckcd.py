"""sch_ckcd.ko and q_ckcd.so in a real kernel (Debian 12's 6.1 under qemu, tests/kernel/lab.py).

One boot for the whole module: a guest script runs every step below in order and prints,
per step, its output and exit code between markers; each test then checks one step like
Linux's tc-testing cases do (a command, its expected exit code, a `tc -s qdisc show`
pattern). Traffic: UDP through a veth pair into a namespace, shaped by an HTB class of
1 Mbit/s with ckcd as its leaf, so the leaf's queue fills and drops.
"""

import json
import re

import pytest

from tests.conftest import REPO
from tests.kernel import lab

SCRIPT = r"""
export TC_LIB_DIR=/lab
step() { n=$1; shift; echo "@@BEGIN $n"; "$@" 2>&1; echo "@@END $n rc=$?"; }
show() { $TC -s qdisc show dev v0; }

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
step del_root $TC qdisc del dev v0 root

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
sleep 0.5
# Two UDP flows at 4 Mbit/s each into the 1 Mbit/s class: the leaf fills and drops.
iperf3 -c 10.9.0.2 -p 5201 -u -b 4M -l 1200 -t 6 >/dev/null 2>&1 &
iperf3 -c 10.9.0.2 -p 5202 -u -b 4M -l 1200 -t 6 >/dev/null 2>&1 &
sleep 2.5
step before_change show
step change_leaf $TC qdisc change dev v0 parent 1:1 handle 10: ckcd limit 100 $LEAF
step after_change show
sleep 1
step traffic show
step json $TC -j -s qdisc show dev v0
# reset with packets queued (device down), then destroy with packets queued
step reset sh -c "$IP link set v0 down && $IP link set v0 up"
sleep 1
step del_with_backlog $TC qdisc del dev v0 root
wait
step cleanup sh -c "$IP link del v0; $IP netns del ns"
step unload rmmod sch_ckcd
step lsmod sh -c "lsmod | grep -c sch_ckcd"
step dmesg sh -c "dmesg | grep -E 'WARNING|BUG|Call Trace|KASAN|leak|ckcd' || true"
"""


@pytest.fixture(scope="module")
def vm():
    """Build the module and plugin, boot the lab once, return {step: (rc, output)}."""
    try:
        lab.check_prerequisites()
    except lab.LabUnavailable as e:
        pytest.fail(f"kernel lab: {e}")  # `make test` installs these: they must run, not skip
    from ovs_config.lablock import lab_lock

    ko, so = lab.build_sch_ckcd(REPO)
    with lab_lock():  # TCG takes a whole core: no other lab beside it
        res = lab.run(SCRIPT, {"lab/sch_ckcd.ko": ko, "lab/q_ckcd.so": so}, timeout_s=180)
    assert res.exit_status is not None, f"the VM did not finish:\n{res.console[-3000:]}"
    steps = {}
    for m in re.finditer(r"@@BEGIN (\w+)\n(.*?)@@END \1 rc=(\d+)", res.output, re.S):
        steps[m.group(1)] = (int(m.group(3)), m.group(2))
    return steps


def step(vm, name, rc=0):
    assert name in vm, f"step {name} did not run; steps: {sorted(vm)}"
    got, out = vm[name]
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
    drops = re.search(r"drops:((?: [\w-]+ \d+)+)", text).group(1).split()
    st["drops"] = {drops[i]: int(drops[i + 1]) for i in range(0, len(drops), 2)}
    st["active_flows"] = int(re.search(r"active_flows (\d+)", text).group(1))
    st["fair_share_bps"] = int(re.search(r"fair_share_bps (\d+)", text).group(1))
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


# Expected lines: the taint notes of any unsigned out-of-tree module, and HTB's one-time
# note when a leaf's dequeue returns nothing although it had packets, which a discipline
# that drops at dequeue does when it drops the last ones (CKCD's d_th; sch_codel's too).
EXPECTED_DMESG = ("taints kernel", "module verification failed", "htb: ckcd qdisc 10: is non-work-conserving?")


def test_dmesg_has_no_warning(vm):
    out = step(vm, "dmesg")
    bad = [line for line in out.splitlines() if not any(e in line for e in EXPECTED_DMESG)]
    assert not bad, out
