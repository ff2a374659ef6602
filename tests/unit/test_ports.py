"""coex.ports: the discipline a ckcd-link bottleneck runs (Hock et al., CoEx: Separate
Queues) and the port record GET /coex/v1/state shows (with a kernel port's qdisc stats)."""

import json

from coex.planner import queue_plan
from coex.policy import Policy
from coex.ports import PortState, link_discipline
from controller_parts import DPID, ControllerParts
from ovs_config import aqm

BASE = "droptail limit=80"  # what the lab started the link with
CKCD = {"discipline": "ckcd", "params": {"limit": 80}}


def policy(aqm=None, **approaches) -> Policy:
    port = {"dpid": 1, "port": 3, "capacity_bps": 50_000_000}
    if aqm:
        port["aqm"] = aqm
    return Policy.from_dict({"ports": [port], "approaches": approaches})


def test_separate_queues_runs_one_band_per_aggregate_each_with_the_port_aqm():
    p = policy(CKCD, separate_queues=True)
    spec = link_discipline(p, p.ports[0], BASE)
    head, *bands = spec.split(" | ")
    assert head.startswith("bands weights=1,1,1,1 ")
    assert bands == ["ckcd limit=80 rate_bps=50000000"] * len(queue_plan(p, p.ports[0]).classes)


def test_separate_queues_without_a_port_aqm_keeps_the_links_own_discipline_in_each_band():
    p = policy(separate_queues=True)
    assert link_discipline(p, p.ports[0], BASE).split(" | ")[1:] == [BASE] * 4


def test_without_separate_queues_the_port_aqm_alone_else_the_base():
    with_aqm, plain = policy(CKCD), policy()
    assert link_discipline(with_aqm, with_aqm.ports[0], BASE) == "ckcd limit=80 rate_bps=50000000"
    assert link_discipline(plain, plain.ports[0], BASE) == BASE


def test_port_state_shows_only_what_was_configured_in_the_rest_answers_order():
    assert json.dumps(PortState().to_dict()) == '{"status": "waiting for the switch"}'
    p = policy(separate_queues=True)
    classes = queue_plan(p, p.ports[0]).classes
    state = PortState(name="s1-eth3", queue_backend="tc-htb", queues=classes, status="applied")
    shown = state.to_dict()
    assert list(shown) == ["name", "queue_backend", "queues", "status"]
    assert json.dumps(shown["queues"]) == json.dumps([vars(c) for c in classes])  # as before the dataclass


class AgentRow:
    """The Interface row ckcd-qdisc-agent wrote (ovs_config.aqm.interface_ids reads it)."""
    where = "tcp:192.0.2.10:6640"

    def __init__(self, ids: dict):
        self.ids = ids

    def find_one(self, table, name, columns):
        assert (table, name, columns) == ("Interface", "s1-eth1", ("external_ids",))
        return {"external_ids": self.ids}


def test_a_kernel_ports_state_shows_the_qdiscs_ecn_marks_beside_its_drops():
    """sch_ckcd with ecn=1 (xstats version 2): `tc -s -j` gives mark_<reason> beside drop_<reason>
    (tc 6.1 prints a qdisc's xstats among its own keys), and GET /state shows them as the agent
    reported them, numbers still."""
    reasons = ("overflow", "early", "choke-match", "delay", "penalty", "flush", "shrink")
    leaf = {"kind": "ckcd", "handle": "10:", "parent": "1:1", "options": {"spec": "ckcd limit=80 ecn=1"},
            **{f"drop_{r}": 0 for r in reasons}, "drop_overflow": 4,
            **{f"mark_{r}": 0 for r in reasons}, "mark_early": 31, "mark_delay": 2,
            "enq_pkts": 900, "deq_pkts": 896, "active_flows": 2, "fair_share_bps": 25_000_000}
    tc = [{"kind": "htb", "handle": "1:", "root": True}, leaf]
    qdisc = aqm.kernel_status("s1-eth1", AgentRow({"ckcd-qdisc-applied": "ckcd limit=80 ecn=1",
                                                   "ckcd-qdisc-stats": json.dumps(tc)}))
    parts = ControllerParts()
    parts.switch_hosts.port_state[(DPID, 1)] = PortState(
        name="s1-eth1", aqm_backend=aqm.KERNEL_BACKEND, discipline="ckcd limit=80 ecn=1", qdisc=qdisc,
        status="applied")
    status, state, _ = parts.api().handle("GET", "/coex/v1/state", {}, b"")
    assert status == 200
    [port] = state["ports"]
    assert port["qdisc"]["applied"] == "ckcd limit=80 ecn=1"
    [shown] = [q for q in port["qdisc"]["qdiscs"] if q["kind"] == "ckcd"]
    assert shown == leaf
    assert {k: v for k, v in shown.items() if k.startswith("mark_") and v} == {"mark_early": 31, "mark_delay": 2}
