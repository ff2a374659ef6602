"""ryu_app.heavy_hitters across a policy edit and a change of leader: detection restarts (and
releases what it steered) only when its own settings or ports change, and a new leader takes
over its predecessor's steerings from the shared store as they are.

Runs on tests/unit/controller_parts (the real HeavyHitterService, its real embedded collector
on a free UDP port of loopback, the switch actions recorded, not sent: there is no switch).
"""

from __future__ import annotations

import socket
import time

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


def heavy(service):
    """FLOW sent at 40 Mbit/s (1-in-1 samples of 1500-byte frames for 2 s) into the port's
    detector, its events handed to the service as the collector's would be: returns the watch."""
    watch = service.watches[(DPID, 1)]
    now = t = time.monotonic() - 2.0
    while t < now + 2.0:
        service._apply(watch, watch.detector.observe(FLOW, 1500, 1, t), t)
        t += 1500 * 8 / 40e6
    assert FLOW in watch.detector.heavy_hitters()
    return watch


def test_a_standby_detects_but_acts_only_when_it_leads(parts):
    """Rule (every instance detects, only the leader steers): a standby's detectors hold a
    heavy flow and GET /heavy-hitters names it in `detected`, but nothing is steered, counted
    or remembered; taking over, lead() acts on it at once (with counting, as a suspect)."""
    leading, remembered = [False], []
    service = parts.heavy_hitters
    service.leading, service.remember = lambda: leading[0], lambda *args: remembered.append(args)
    for counting in (False, True):
        parts.sent.clear()
        remembered.clear()
        pol = policy(counting=counting)
        service.configure(pol.heavy_hitters, pol.ports)
        heavy(service)
        report = service.report()
        assert report["acting"] is False and [d["flow"]["src_port"] for d in report["detected"]] == [40000]
        assert parts.sent == [] and service.book.steered() == set() and remembered == []
        leading[0] = True
        service.lead()
        wanted = ("install_counting", DPID, FLOW) if counting else ("steer", FLOW)
        assert parts.sent == [wanted], (counting, parts.sent)
        assert len(remembered) == (0 if counting else 1)  # a suspect is the leader's own business
        assert service.report()["acting"] is True
        leading[0] = False
        service.stand_by()


def test_stepping_down_leaves_the_steering_to_the_successor(parts):
    """Rule: stand_by() forgets what this instance steered without releasing it: no release is
    recorded or remembered (the store keeps the steering for the next leader), the flow leaves
    only our own idea of the switches (written by nobody while we stand by)."""
    remembered = []
    service = parts.heavy_hitters
    service.remember = lambda *args: remembered.append(args)
    pol = policy()
    service.configure(pol.heavy_hitters, pol.ports)
    steer(parts)
    remembered.clear()
    service.stand_by()
    assert service.book.steered() == set() and ("unsteer", FLOW) in parts.sent
    assert remembered == [] and [r["decision"] for r in service.book.recent()] == ["steered"]


def test_a_collector_whose_port_is_taken_listens_once_it_is_free(parts):
    """Rule: a collector that cannot listen (the instance that led before us still holds the
    address) says why in `error` and listens when tried again after the port is free."""
    pol = policy()
    first = ControllerParts().heavy_hitters
    first.configure(pol.heavy_hitters, pol.ports)
    service = parts.heavy_hitters
    service.configure(pol.heavy_hitters, pol.ports)
    try:
        assert first._open_listener()
        assert not service._open_listener()
        assert "cannot listen on 127.0.0.1:" in service.report()["error"]
    finally:
        first.stop()
    assert service._open_listener() and service.report()["error"] is None
    assert service.collector_address() == pol.heavy_hitters.collector


def test_an_instance_listens_on_its_own_collector_address(parts):
    """Rule: CKCD_COEX_SFLOW_COLLECTOR (the service's `listen`) is where this instance's
    collector listens, whatever the policy's collector; sFlow-RT as source: none."""
    service = parts.heavy_hitters
    own = f"127.0.0.1:{free_udp_port()}"
    service.listen = own
    pol = policy()
    service.configure(pol.heavy_hitters, pol.ports)
    assert service.collector_address() == own and service._open_listener()
    assert service.listener.address[1] == int(own.rpartition(":")[2])
    rt = pol.edited(lambda d: d["heavy_hitters"].update(source="sflow-rt"))
    service.configure(rt.heavy_hitters, rt.ports)
    assert service.collector_address() is None
