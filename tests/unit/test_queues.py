"""Separate Queues backends: what each is told to configure for a queue plan.

The tc-htb and ckcd-link backends also run for real in tests/integration; the OVSDB
queue backend needs a kernel-datapath host, so its ovs-vsctl arguments are checked
here against the QoS/Queue schema columns it must set.
"""

import os
import subprocess

from coex.planner import queue_plan
from coex.policy import Policy
from ovs_config.queues import bands_spec, ovsdb_queue_commands, tc_htb_commands

REPLAY = os.path.join(os.path.dirname(__file__), "..", "..", "datapath", "build", "ckcd-replay")


def plan(**weights):
    aggs = {name: {"queue_weight": w} for name, w in weights.items()}
    p = Policy.from_dict({"aggregates": aggs, "approaches": {"separate_queues": True},
                          "ports": [{"dpid": 1, "port": 3, "capacity_bps": 40_000_000}]})
    return queue_plan(p, p.ports[0])


def test_htb_gives_each_aggregate_a_class_and_a_tos_filter():
    cmds = [" ".join(c) for c in tc_htb_commands("s1-eth3", plan(low_delay=1, queue_filling=3))]
    assert cmds[0] == "tc qdisc replace dev s1-eth3 root handle 1: htb default 10"
    assert "classid 1:1 htb rate 40000000bit ceil 40000000bit" in cmds[1]
    # default(1) low_delay(1) penalized(1) queue_filling(3): total 6
    assert any("classid 1:11 htb rate 6666666bit ceil 40000000bit" in c for c in cmds)
    assert any("classid 1:13 htb rate 20000000bit ceil 40000000bit" in c for c in cmds)
    # EF (46) -> TOS 0xb8 -> low_delay's class; the default class has no filter.
    assert any("match ip tos 0xb8 0xfc flowid 1:11" in c for c in cmds)
    assert not any("flowid 1:10" in c for c in cmds)


def test_ovsdb_queues_one_queue_per_aggregate_with_min_and_max_rate():
    args = ovsdb_queue_commands("s1-eth3", plan(low_delay=1, queue_filling=3))
    text = " ".join(args)
    assert "set Port s1-eth3 qos=@coexqos" in text
    assert "type=linux-htb other-config:max-rate=40000000" in text
    assert "queues:0=@q0 queues:1=@q1 queues:2=@q2 queues:3=@q3" in text
    assert "--id=@q3 create Queue other-config:min-rate=20000000 other-config:max-rate=40000000" in text
    # marked ours, so clear_ovsdb_queues destroys these rows and never someone else's
    assert text.count("external_ids:ckcd-coex=true") == 1 + 4, text


def test_bands_spec_is_accepted_by_the_real_core_parser():
    spec = bands_spec(plan(low_delay=1, queue_filling=3), band_discipline="ckcd limit=80")
    assert spec.startswith("bands weights=1,1,1,3 map=46:1,8:2,10:3 default=0 penalized=2 | ckcd limit=80")
    out = subprocess.run([REPLAY, "--describe", "--qdisc", spec], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("| ckcd limit=80") == 4
