"""Heavy hitters with `source: sflow-rt`, end to end in the controller: the real ryu-manager,
real OVS and Mininet, and a stub in place of sFlow-RT.

sFlow-RT cannot be installed on our machines (it is on no registry we reach), so
tests/sflow/sflowrt_stub.py stands in for it: an HTTP server answering with bodies in the
format sFlow-RT documents (sflow-rt.com/reference.php: PUT /flow/{name}/json takes a flow
definition; GET /activeflows/{agent}/{name}/json answers a JSON array of
{"key", "value", "agent", "dataSource"}, the key being the definition's key values joined by
commas and the value per second, bytes/s for value "bytes"; sflow-rt.com/define_flow.php for
the flow keys inputifindex/outputifindex), written by hand from that documentation, plus a
UDP socket where the OVS agent is pointed, as it would be at sFlow-RT's sFlow port. The
rates it reports are set by this test, not measured from traffic: what is tested is that
the controller points the switch at "sFlow-RT", defines its flow there, and steers (and
releases) exactly the flow the answers name for the bottleneck port.
"""

from __future__ import annotations

import pytest

from coex.sflowrt import PORT_KEYS
from ovs_config.private_ovs import ofctl
from ovs_config.sflow import sflow_settings
from tests.integration.labkit import RELEASE_TIMEOUT_S, parse_steering, penalized_actions, steering_flows
from tests.sflow.sflowrt_stub import StubSFlowRT, active_flow_entry
from tests.waiting import eventually

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

STUB_SFLOW_PORT = 16345
BIG = ["10.0.0.1", "10.0.0.3", 6, 40001, 5201]
SMALL = ["10.0.0.2", "10.0.0.4", 6, 40002, 5202]
ACKS = ["10.0.0.3", "10.0.0.1", 6, 5201, 40001]


def ifindex(name: str) -> int:
    with open(f"/sys/class/net/{name}/ifindex") as f:
        return int(f.read())


@pytest.fixture
def stub():
    with StubSFlowRT(sflow_port=STUB_SFLOW_PORT) as server:
        yield server


def test_sflowrt_flow_is_steered_by_output_port_and_released(hh_lab, stub):
    net, api, ctl = hh_lab
    api.ok("PUT", "/ports/1/3", {"capacity_bps": 50_000_000})
    api.ok("PUT", "/approaches", {"separate_queues": True})  # so the steering flow marks DSCP too
    api.ok("PUT", "/heavy-hitters/config", {
        "enabled": True, "source": "sflow-rt", "sflow_rt_url": stub.url, "collector": stub.sflow_address,
        "sampling": 64, "polling_s": 1, "threshold_bps": 15_000_000, "window_s": 2, "min_hold_s": 1,
        # The rates here are the stub's, not the switch's traffic: a counting flow would (rightly)
        # count nothing and drop the suspect. Confirmation by counting is the same code whatever
        # the source (test_heavy_hitters.py runs it on real traffic); this tests sFlow-RT's path.
        "counting": False})

    # The OVS agent of the bottleneck's bridge sends to "sFlow-RT", and really does.
    settings = eventually(lambda: sflow_settings("s1"), what="sFlow on s1")
    assert settings["targets"] == f'["{stub.sflow_address}"]' and settings["sampling"] == "64", settings
    assert sflow_settings("s2") is None
    eventually(lambda: stub.datagrams > 0, what="sFlow datagrams at the stub")
    # The flow is defined with the port keys, then polled.
    eventually(lambda: any(p.startswith("/activeflows/ALL/ckcd_coex_flows/json") for p in stub.paths("GET")),
               what="activeflows polled")
    [definition] = [b for m, p, b in stub.requests if m == "PUT" and p == "/flow/ckcd_coex_flows/json"][:1]
    assert definition == {"keys": PORT_KEYS, "value": "bytes"}

    bottleneck, s1_h1, s2_h3 = ifindex("s1-eth3"), ifindex("s1-eth1"), ifindex("s2-eth1")
    # What sFlow-RT would report for OVS (agent 127.0.0.1 = the address of `lo`; every flow
    # sample's data source is the bridge, not a port): the big flow leaving s1 by the
    # bottleneck port at 30 Mbit/s and leaving s2 toward h3, its ACKs leaving s1 toward h1
    # (fast, but not on the bottleneck port), a small flow on the bottleneck port.
    stub.set_active_flows([
        active_flow_entry(BIG + [bottleneck], 3_750_000.0),
        active_flow_entry(BIG + [s2_h3], 3_750_000.0),
        active_flow_entry(ACKS + [s1_h1], 3_000_000.0),
        active_flow_entry(SMALL + [bottleneck], 125_000.0),
    ])
    # The controller polls sFlow-RT every polling_s (1 s) and steers on the first answer that
    # names the flow: 10 s is ten polls.
    [line] = eventually(steering_flows, timeout_s=10, what="a steering flow")
    flow = parse_steering(line)
    assert flow["five_tuple"] == ("10.0.0.1", "10.0.0.3", 40001, 5201)
    assert flow["actions"] == penalized_actions(api, separate_queues=True)

    report = api.ok("GET", "/heavy-hitters")
    assert report["source"] == "sflow-rt" and report.get("error") is None
    [steered] = [d for d in report["log"] if d["decision"] == "steered"]
    assert steered["flow"]["src_port"] == 40001 and steered["estimate_bps"] == 30_000_000
    assert (steered["dpid"], steered["port"]) == (1, 3)

    # sFlow-RT stops reporting it (the flow ended): stale after window_s, released.
    stub.set_active_flows([active_flow_entry(SMALL + [bottleneck], 125_000.0)])
    eventually(lambda: steering_flows() == [], timeout_s=RELEASE_TIMEOUT_S, what="the steering flow removed")
    report = api.ok("GET", "/heavy-hitters")
    assert report["current"] == []
    assert [(d["decision"], d["flow"]["src_port"], d.get("reason")) for d in report["log"]] == [
        ("steered", 40001, "above_high"), ("released", 40001, "idle")]
    assert "priority=2100" not in ofctl("dump-flows", "s2")
