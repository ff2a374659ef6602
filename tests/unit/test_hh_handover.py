"""ryu_app.heavy_hitters across a policy edit and a change of leader: detection restarts (and
releases what it steered) only when its own settings or ports change, and a new leader takes
over its predecessor's steerings from the shared store as they are.

Runs on tests/unit/controller_parts (the real HeavyHitterService, its real embedded collector
on a free UDP port of loopback, the switch actions recorded, not sent: there is no switch).
"""

from __future__ import annotations

import socket

import pytest

from coex.heavy_hitters import HeavyHitterEvent
from coex.policy import Policy
from coex.sflow import FlowKey
from tests.unit.controller_parts import DPID, ControllerParts

FLOW = FlowKey("10.0.0.1", "10.0.0.3", 6, 40000, 5201)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def parts():
    parts = ControllerParts()
    parts.port_names[(DPID, 1)] = "s1-eth1"
    yield parts
    parts.heavy_hitters.stop()


def policy(**hh) -> Policy:
    return Policy.from_dict({"ports": [{"dpid": DPID, "port": 1, "capacity_bps": 50_000_000}],
                             "heavy_hitters": {"enabled": True, "collector": f"127.0.0.1:{free_udp_port()}",
                                               **hh}})


def steer(parts) -> None:
    service = parts.heavy_hitters
    ev = HeavyHitterEvent("detected", 0.0, FLOW, 30e6, 15e6, "test", "rate")
    service._carry_out(service.book.apply((DPID, 1), [ev], 0.0, 0.0))
    assert ("steer", FLOW) in parts.sent


def test_a_policy_edit_elsewhere_keeps_steered_flows(parts):
    """Rule: configuring detection again with the same settings, ports and port names (a rule
    or an approach changed) restarts nothing and releases nothing; changed settings do."""
    pol = policy()
    service = parts.heavy_hitters
    service.configure(pol.heavy_hitters, pol.ports)
    steer(parts)
    service.configure(pol.heavy_hitters, pol.ports)
    assert service.book.steered() == {FLOW} and ("unsteer", FLOW) not in parts.sent
    changed = pol.edited(lambda d: d["heavy_hitters"].update(capacity_share=0.3))
    service.configure(changed.heavy_hitters, changed.ports)
    assert service.book.steered() == set() and ("unsteer", FLOW) in parts.sent


def test_a_new_leader_keeps_its_predecessors_steerings(parts):
    """Rule: adopt() takes each stored steering as in force (the book has it, the flow is
    steered on the switches, its record is the stored one) and adopting twice changes
    nothing more; what the leader steers and releases goes to `remember` for the next one."""
    remembered = []
    service = parts.heavy_hitters
    service.remember = lambda *args: remembered.append(args)
    pol = policy()
    service.configure(pol.heavy_hitters, pol.ports)
    record = {"decision": "steered", "flow": {"src_ip": FLOW.src_ip, "dst_ip": FLOW.dst_ip, "protocol": 6,
                                              "src_port": 40000, "dst_port": 5201},
              "dpid": DPID, "port": 1, "estimate_bps": 30_000_000, "time": 1.0, "monotonic_s": 123456.0}
    stored = [(record["flow"], DPID, 1, record)]
    service.adopt(stored)
    service.adopt(stored)
    assert service.book.is_steered(FLOW, (DPID, 1)) and parts.sent.count(("steer", FLOW)) == 1
    assert service.report()["current"][0]["detected_estimate_bps"] == 30_000_000
    service.stop()  # detection stops: the release is remembered (for a leader, the store forgets it)
    assert remembered == [(record["flow"], DPID, 1, None)]
