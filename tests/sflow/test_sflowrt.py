"""The sFlow-RT backend: coex.sflowrt (pure) and ryu_app.sflowrt_client (HTTP).

sFlow-RT cannot be installed on our machines (it is on no registry we reach), so these tests
use response bodies written by hand from its documentation (sflow-rt.com/reference.php,
"Defining Flows" and the REST API table): PUT /flow/{name}/json takes {"keys", "value", ...};
GET /activeflows/{agent}/{name}/json answers a JSON array of {"key", "value", "agent",
"dataSource"}, where "key" joins the key attributes with commas and "value" is per second
(bytes/s for value "bytes"). The client is tested against a stub HTTP server (sflowrt_stub.py)
that answers with those bodies and records what it was sent.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from coex.heavy_hitters import HeavyHitterConfig, HeavyHitterDetector
from coex.sflow import FlowKey
from coex.sflowrt import (DEFAULT_KEYS, PORT_KEYS, SFlowRTFormatError, feed_detector, flow_definition,
                          parse_active_flows, parse_flow_key)
from ryu_app.sflowrt_client import SFlowRTClient, SFlowRTError
from sflowrt_stub import StubSFlowRT, active_flow_entry

# As documented: a JSON array, largest first, one entry per flow key.
ACTIVEFLOWS_BODY = json.dumps([
    {"key": "10.0.0.1,10.0.0.3,6,43210,5201", "value": 6250000.0, "agent": "10.0.0.254",
     "dataSource": "2"},
    {"key": "10.0.0.2,10.0.0.4,6,43211,5201", "value": 1250000.5, "agent": "10.0.0.254",
     "dataSource": "2"},
    {"key": "10.0.0.3,10.0.0.1,6,5201,43210", "value": 51234.0, "agent": "10.0.0.254",
     "dataSource": "4"},
])


def test_flow_definition_body():
    assert flow_definition() == {"keys": "ipsource,ipdestination,ipprotocol,tcpsourceport,"
                                         "tcpdestinationport", "value": "bytes"}
    assert flow_definition(value="frames", filter="ipprotocol=6", t=2, n=20) == {
        "keys": DEFAULT_KEYS, "value": "frames", "filter": "ipprotocol=6", "t": 2, "n": 20}


@pytest.mark.parametrize("kw, name", [
    ({"keys": ""}, "keys"), ({"keys": "ipsource, ipdestination"}, "keys"),
    ({"value": "packets"}, "value"), ({"t": 0}, "t"), ({"n": 0}, "n"), ({"filter": ""}, "filter"),
])
def test_flow_definition_validation(kw, name):
    with pytest.raises(ValueError, match=name):
        flow_definition(**kw)


def test_parse_active_flows():
    res = parse_active_flows(ACTIVEFLOWS_BODY)
    assert res.rejected == 0 and len(res.flows) == 3
    top = res.flows[0]
    assert top.flow_key == FlowKey("10.0.0.1", "10.0.0.3", 6, 43210, 5201)
    assert top.value == 6250000.0 and top.rate_bps == 50e6  # bytes/s -> bit/s
    assert (top.agent, top.data_source) == ("10.0.0.254", "2")
    assert [f.value for f in res.flows] == sorted((f.value for f in res.flows), reverse=True)


def test_parse_active_flows_skips_bad_entries_and_keeps_the_largest_per_key():
    body = [
        {"key": "10.0.0.1,10.0.0.3,6,1,2", "value": 10.0, "agent": "a", "dataSource": "1"},
        {"key": "10.0.0.1,10.0.0.3,6,1,2", "value": 30.0, "agent": "b", "dataSource": "7"},
        {"key": "10.0.0.1,10.0.0.3,6,1,2"},                 # no value
        {"key": 5, "value": 1.0},                           # key not a string
        {"key": "x", "value": float("inf")},                # not finite
        {"key": "x", "value": -1},                          # negative
        {"key": "x", "value": True},                        # bool is not a number here
        "not an object",
        {"key": "not,an,ip,tuple,x", "value": 3.0},         # kept, but no FlowKey
    ]
    res = parse_active_flows(body)
    assert res.rejected == 6
    assert [(f.key, f.value, f.agent) for f in res.flows] == [
        ("10.0.0.1,10.0.0.3,6,1,2", 30.0, "b"), ("not,an,ip,tuple,x", 3.0, "")]
    assert res.flows[1].flow_key is None


def test_parse_active_flows_rejects_bodies_not_in_the_documented_format():
    for body in ('{"key": "a"}', "not json", b"\xff\xfe", "null"):
        with pytest.raises(SFlowRTFormatError):
            parse_active_flows(body)
    assert parse_active_flows("[]").flows == []


def test_frames_value_has_no_bit_rate():
    res = parse_active_flows(ACTIVEFLOWS_BODY, value="frames")
    assert res.flows[0].rate_bps is None


def test_parse_flow_key_variants():
    assert parse_flow_key("2001:db8::1,2001:db8::2,17,53,4000", "ipsource,ipdestination,"
                          "ipprotocol,udpsourceport,udpdestinationport") == \
        FlowKey("2001:db8::1", "2001:db8::2", 17, 53, 4000)
    assert parse_flow_key("10.0.0.1,10.0.0.3,6,1") is None
    assert parse_flow_key("10.0.0.1,10.0.0.3,6,1,70000") is None
    assert parse_flow_key("10.0.0.1,10.0.0.3,6", "ipsource,ipdestination,ipprotocol") == \
        FlowKey("10.0.0.1", "10.0.0.3", 6, 0, 0)


def test_feeds_the_same_detector():
    det = HeavyHitterDetector(HeavyHitterConfig(threshold_bps=20e6))
    events = feed_detector(det, parse_active_flows(ACTIVEFLOWS_BODY), now=1.0)
    assert [(e.kind, e.key.src_port, e.estimate_bps) for e in events] == [
        ("detected", 43210, 50e6)]
    assert det.estimate_bps(FlowKey("10.0.0.2", "10.0.0.4", 6, 43211, 5201), 1.0) == \
        pytest.approx(10.000004e6)


# ------------------------------------------------------------------ the HTTP client

@pytest.fixture
def stub():
    with StubSFlowRT() as server:
        server.set_active_flows(json.loads(ACTIVEFLOWS_BODY))
        yield server.url, server.requests


def test_client_defines_polls_and_feeds(stub):
    url, requests = stub
    client = SFlowRTClient(url)
    assert client.version() == "3.0-1688"
    client.define_flow()
    det = HeavyHitterDetector(HeavyHitterConfig(threshold_bps=20e6))
    events = client.poll_into(det, now=3.0, max_flows=50)
    client.delete_flow()
    assert [e.kind for e in events] == ["detected"]
    assert requests[1] == ("PUT", "/flow/ckcd_coex_flows/json",
                           {"keys": DEFAULT_KEYS, "value": "bytes"})
    method, path, _ = requests[2]
    assert method == "GET" and path == ("/activeflows/ALL/ckcd_coex_flows/json?"
                                        "maxFlows=50&minValue=0&aggMode=max")
    assert requests[3] == ("DELETE", "/flow/ckcd_coex_flows/json", None)


def test_client_errors_are_typed(stub):
    url, _ = stub
    client = SFlowRTClient(url)
    with pytest.raises(SFlowRTError, match="404"):
        client.active_flows("other")
    with pytest.raises(SFlowRTError):
        SFlowRTClient("http://127.0.0.1:9", timeout_s=0.5).version()  # nothing listens


def test_client_validates_arguments():
    with pytest.raises(ValueError, match="base_url"):
        SFlowRTClient("ftp://x")
    with pytest.raises(ValueError, match="timeout_s"):
        SFlowRTClient(timeout_s=0)
    client = SFlowRTClient()
    with pytest.raises(ValueError, match="name"):
        client.define_flow("bad/name")
    with pytest.raises(ValueError, match="max_flows"):
        client.active_flows(max_flows=0)
    with pytest.raises(ValueError, match="agg_mode"):
        client.active_flows(agg_mode="median")


# ------------------------------------------------------------------ which port a flow crosses

def test_port_keys_give_the_output_port_of_each_flow():
    """OVS's flow samples come from the bridge (data source type 2, index 1000: our captures),
    so sFlow-RT's dataSource does not name a port; the outputifindex key does."""
    assert PORT_KEYS == DEFAULT_KEYS + ",outputifindex"
    body = [active_flow_entry(["10.0.0.1", "10.0.0.3", 6, 43210, 5201, 185], 3.75e6),
            active_flow_entry(["10.0.0.1", "10.0.0.3", 6, 43210, 5201, 187], 3.7e6),
            {"key": "10.0.0.1,10.0.0.3,6,43210,5201,x", "value": 1.0}]
    res = parse_active_flows(body, keys=PORT_KEYS)
    assert [(f.flow_key.src_port, f.output_ifindex, f.input_ifindex, f.data_source) for f in res.flows] == [
        (43210, 185, None, "2.1000"), (43210, 187, None, "2.1000"), (43210, None, None, "")]
    both = parse_active_flows([active_flow_entry(["10.0.0.1", "10.0.0.3", 6, 1, 2, 180, 185], 1.0)],
                              keys="ipsource,ipdestination,ipprotocol,tcpsourceport,tcpdestinationport,"
                                   "inputifindex,outputifindex")
    assert (both.flows[0].input_ifindex, both.flows[0].output_ifindex) == (180, 185)
    # without the keys, nothing is guessed
    assert parse_active_flows(ACTIVEFLOWS_BODY).flows[0].output_ifindex is None


def test_port_watch_keys_sflowrt_flows_by_output_ifindex_not_data_source():
    """A port's detectors take, of one sFlow-RT answer, the flow leaving by that port
    (outputifindex = the port's ifIndex) although its dataSource is the bridge's; the same
    flow's entry for another port and a flow to another port are not theirs: only the first
    is steered."""
    from coex.policy import HeavyHitters
    from coex.steering import PortWatch, SteeringBook
    hh = HeavyHitters(enabled=True, source="sflow-rt", threshold_bps=10_000_000, capacity_share=None)
    watch = PortWatch(1, 3, "s1-eth3", 1, 50_000_000, hh)
    book = SteeringBook()
    big = ["10.0.0.1", "10.0.0.3", 6, 43210, 5201]
    other = ["10.0.0.2", "10.0.0.4", 6, 43211, 5201]
    body = [active_flow_entry(big + [1], 3.75e6), active_flow_entry(big + [7], 3.75e6),
            active_flow_entry(other + [7], 5e6)]
    now = time.monotonic()
    decisions = book.apply(watch.key, watch.observe_active_flows(parse_active_flows(body, keys=PORT_KEYS), now),
                           now, time.time())
    assert [(d.action, d.flow) for d in decisions] == [("steer", FlowKey("10.0.0.1", "10.0.0.3", 6, 43210, 5201))]
    [record] = book.recent()
    assert record["decision"] == "steered" and record["estimate_bps"] == 30_000_000


def test_mode_detector_with_sflowrt_is_refused_not_run():
    """sFlow-RT gives flow rates, not the packet samples the mode of history counts."""
    from coex.policy import HeavyHitters
    from tests.unit.controller_parts import ControllerParts
    service = ControllerParts().heavy_hitters  # the real service over the real view
    service.configure(HeavyHitters(enabled=True, source="sflow-rt", detector="mode"),
                      [SimpleNamespace(dpid=1, port=3, capacity_bps=50_000_000)])
    report = service.report()
    assert report["ports"] == [] and "mode" in report["error"] and service._threads == []
