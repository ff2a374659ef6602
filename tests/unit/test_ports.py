"""coex.ports: the discipline a ckcd-link bottleneck runs (Hock et al., CoEx: Separate
Queues) and the port record GET /coex/v1/state shows."""

import json

from coex.planner import queue_plan
from coex.policy import Policy
from coex.ports import PortState, link_discipline

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
