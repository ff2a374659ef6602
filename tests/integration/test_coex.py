"""The CoEx approaches on real OVS, the real ryu-manager and Mininet, driven through REST.

Each test changes policy only through the REST API and then checks what the switch
holds (dump-flows, dump-meters, tc) and what real kernel TCP does (iperf3).
"""

from __future__ import annotations

import contextlib
import re
import subprocess

import pytest

from experiments.lab.net import Controller, mininet_net, wait_switches_connected
from experiments.lab.rest_client import CoexClient
from experiments.lab.traffic import goodput_bps, iperf3, together
from ovs_config.private_ovs import ofctl, port_tx_bytes
from tests.hostload import HostLoad
from tests.integration.labkit import (FLOWED_BPS, METER_BURST_KBIT, METER_RATE_KBPS, REROUTE_TIMEOUT_S, RULES,
                                      metered_goodput_bps, weight_share_bounds)
from tests.waiting import eventually
from topologies.dumbbell import Dumbbell
from topologies.two_paths import TwoPaths

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

OF_PORT, REST_PORT = 16653, 18080
# Wire bytes per payload byte on a link that carries one aggregate's iperf3 flow: 1514/1448 =
# 1.046 for MTU frames, plus what TCP retransmitted (counted on the wire, once by iperf3) and
# the odd LLDP or ARP frame. 1.15 allows 10 % of that; the other aggregate's flow, as large,
# on the same link would double the ratio.
WIRE_PER_PAYLOAD = (1.0, 1.15)


class Lab:
    def __init__(self, net, ctl, api):
        self.net, self.ctl, self.api = net, ctl, api


@contextlib.contextmanager
def coex_lab(topo, tmp_path, env=None):
    ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=str(tmp_path / "ryu.log"),
                     db_path=str(tmp_path / "policy.sqlite"))
    ctl.env.update(env or {})
    ctl.start()
    lab = Lab(None, ctl, CoexClient(ctl.rest_url))
    try:
        with mininet_net(topo, ctl) as net:
            lab.net = net
            assert net.pingAll(timeout=2) == 0.0
            yield lab
    finally:
        lab.ctl.stop()


def received_bytes(report) -> int:
    return int(report["end"]["sum_received"]["bytes"])


@pytest.fixture
def twopaths(private_ovs, tmp_path):
    with coex_lab(TwoPaths(), tmp_path) as lab:
        yield lab


@pytest.fixture
def dumbbell(private_ovs, tmp_path):
    with coex_lab(Dumbbell(), tmp_path) as lab:
        yield lab


def test_separate_paths_carry_the_aggregates_on_different_links(twopaths):
    api = twopaths.api
    for rule in RULES:
        api.ok("POST", "/rules", rule)
    api.ok("PUT", "/approaches", {"separate_paths": True})
    h1, h2, h3, h4 = twopaths.net.get("h1", "h2", "h3", "h4")
    before = {"s2": port_tx_bytes("s2")[2], "s3": port_tx_bytes("s3")[2]}  # both toward s4
    with HostLoad() as load:
        interactive, bulk = together((h1, h3, "cubic", 4, 5301), (h2, h4, "cubic", 4, 5302))
    upper = port_tx_bytes("s2")[2] - before["s2"]
    lower = port_tx_bytes("s3")[2] - before["s3"]
    print(f"separate paths: s2->s4 {upper} B for interactive {received_bytes(interactive)} B; "
          f"s3->s4 {lower} B for bulk {received_bytes(bulk)} B")
    # Each link carries its aggregate's payload (plus headers) and nothing of the other's.
    low, high = WIRE_PER_PAYLOAD
    assert low <= upper / received_bytes(interactive) <= high, (upper, received_bytes(interactive), str(load))
    assert low <= lower / received_bytes(bulk) <= high, (lower, received_bytes(bulk), str(load))
    s1 = ofctl("dump-flows", "s1")
    assert re.search(r"priority=200,ip,metadata=0x\w+/0xff,nw_dst=10.0.0.4 actions=output:4", s1)
    assert re.search(r"priority=200,ip,metadata=0x\w+/0xff,nw_dst=10.0.0.3 actions=output:3", s1)


def test_separate_paths_reroute_when_a_link_goes_down(twopaths):
    api = twopaths.api
    for rule in RULES:
        api.ok("POST", "/rules", rule)
    api.ok("PUT", "/approaches", {"separate_paths": True})
    h2, h4 = twopaths.net.get("h2", "h4")
    assert goodput_bps(iperf3(h2, h4, "cubic", duration_s=1, port=5302)) > FLOWED_BPS
    bulk_path = r"metadata=0x\w+/0xff,nw_dst=10.0.0.4 actions=output:{}"
    assert re.search(bulk_path.format(4), ofctl("dump-flows", "s1")), "bulk starts on the lower path"
    twopaths.net.configLinkStatus("s1", "s3", "down")  # the bulk aggregate's own path
    try:
        eventually(lambda: re.search(bulk_path.format(3), ofctl("dump-flows", "s1")), timeout_s=REROUTE_TIMEOUT_S,
                   what="bulk moved to the upper path")
        assert goodput_bps(iperf3(h2, h4, "cubic", duration_s=1, port=5302)) > FLOWED_BPS
    finally:
        twopaths.net.configLinkStatus("s1", "s3", "up")


def test_limited_queue_meters_the_queue_filling_aggregate(dumbbell):
    api = dumbbell.api
    api.ok("POST", "/rules", RULES[1])
    api.ok("PUT", "/ports/1/3", {"capacity_bps": 40_000_000})
    api.ok("PUT", "/approaches", {"limited_queue": {"enabled": True, "fraction": 0.5}})
    meters = ofctl("dump-meters", "s1")
    meter = rf"meter=1 kbps burst stats bands=\s*type=drop rate={METER_RATE_KBPS} burst_size={METER_BURST_KBIT}"
    assert re.search(meter, meters), meters
    h1, h2, h3, h4 = dumbbell.net.get("h1", "h2", "h3", "h4")
    metered_goodput_bps(h1, h3)
    assert "meter:1" in ofctl("dump-flows", "s1")
    with HostLoad() as load:
        other = goodput_bps(iperf3(h2, h4, "cubic", duration_s=2, port=5999))  # default aggregate
    # 1.5 times the meter's rate: no flow the meter holds gets there (its ceiling is 19.7).
    assert other > 1.5 * METER_RATE_KBPS * 1e3, \
        f"the meter must hold only the queue-filling aggregate: default at {other / 1e6:.1f} Mbit/s; {load}"


def test_separate_queues_share_the_port_by_weight(dumbbell):
    api = dumbbell.api
    for rule in RULES:
        api.ok("POST", "/rules", rule)
    api.ok("PUT", "/aggregates/low_delay", {"queue_weight": 1})
    api.ok("PUT", "/aggregates/queue_filling", {"queue_weight": 3})
    api.ok("PUT", "/ports/1/3", {"capacity_bps": 40_000_000})
    api.ok("PUT", "/approaches", {"separate_queues": True})
    [port] = api.ok("GET", "/state")["ports"]
    assert port["queue_backend"] == "tc-htb" and port["status"] == "applied"
    classes = subprocess.run(["tc", "class", "show", "dev", "s1-eth3"], capture_output=True, text=True).stdout
    assert "class htb 1:11" in classes and "class htb 1:13" in classes
    assert "set_field:46->ip_dscp" in ofctl("dump-flows", "s1")
    h1, h2, h3, h4 = dumbbell.net.get("h1", "h2", "h3", "h4")
    with HostLoad() as load:
        low, bulk = together((h1, h3, "cubic", 8, 5301), (h2, h4, "cubic", 8, 5302))
    low_bps, bulk_bps = goodput_bps(low), goodput_bps(bulk)
    share = low_bps / (low_bps + bulk_bps)
    print(f"separate queues: low-delay {low_bps / 1e6:.2f}, bulk {bulk_bps / 1e6:.2f} Mbit/s, share {share:.3f}")
    low_share, high_share = weight_share_bounds()
    assert low_share <= share <= high_share, \
        f"low-delay share {share:.3f} ({low_bps / 1e6:.1f} vs {bulk_bps / 1e6:.1f}); {load}"
    # The port's HTB rate caps the wire, and goodput is less than the wire: a hard bound.
    assert low_bps + bulk_bps <= 40e6, f"{(low_bps + bulk_bps) / 1e6:.1f} Mbit/s through a 40 Mbit/s port; {load}"
    # Both classes carried their flow: 8 s at 10 (1:11) and 30 (1:13) Mbit/s are 10 and 30 MB;
    # half of that says each class, not the default one, carried its aggregate.
    stats = subprocess.run(["tc", "-s", "class", "show", "dev", "s1-eth3"], capture_output=True, text=True).stdout
    sent = {m.group(1): int(m.group(2)) for m in
            re.finditer(r"class htb (1:\d+) .*?Sent (\d+) bytes", stats, re.S)}
    assert sent["1:11"] > 5e6 and sent["1:13"] > 3 * 5e6, (sent, str(load))


def test_policy_survives_a_controller_restart(dumbbell):
    api = dumbbell.api
    api.ok("POST", "/rules", RULES[1])
    api.ok("PUT", "/ports/1/3", {"capacity_bps": 40_000_000})
    version = api.ok("PUT", "/approaches", {"limited_queue": {"enabled": True}})["version"]
    before = api.ok("GET", "/policy")
    dumbbell.ctl.kill()
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-meters", "s1"], check=True)
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", "s1"], check=True)
    dumbbell.ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=dumbbell.ctl.log_path,
                              db_path=dumbbell.ctl.env["CKCD_COEX_DB"]).start()
    wait_switches_connected(["s1", "s2"])
    # No REST call since the restart: the stored policy was re-applied on connect.
    assert api.ok("GET", "/policy") == before and before["version"] == version
    eventually(lambda: f"rate={METER_RATE_KBPS}" in ofctl("dump-meters", "s1"), what="meter re-applied on s1")
    assert re.search(r"priority=1000,tcp,tp_dst=5302 actions=write_metadata", ofctl("dump-flows", "s1"))
    h1, h3 = dumbbell.net.get("h1", "h3")
    metered_goodput_bps(h1, h3)  # the same meter, the same claim as before the restart


@pytest.fixture
def dumbbell_ovsdb_queues(private_ovs, tmp_path):
    with coex_lab(Dumbbell(), tmp_path, env={"CKCD_COEX_QUEUE_BACKEND": "ovsdb-queue"}) as lab:
        yield lab


def ovsdb_queues_of(port_name: str) -> dict[int, str]:
    """queue id -> Queue row uuid of the port's QoS row ({} when it has none)."""
    qos = subprocess.run(["ovs-vsctl", "get", "Port", port_name, "qos"], capture_output=True,
                         text=True, check=True).stdout.strip()
    if qos in ("[]", ""):
        return {}
    queues = subprocess.run(["ovs-vsctl", "get", "QoS", qos, "queues"], capture_output=True,
                            text=True, check=True).stdout
    return {int(k): v for k, v in re.findall(r"(\d+)=([0-9a-f-]{36})", queues)}


def test_ovsdb_queue_backend_on_a_switch_that_already_forwards(dumbbell_ovsdb_queues):
    """The kernel-host backend (forced: our bridges are userspace, where set_queue does not
    classify, docs/architecture.md). Turning Separate Queues on, and adding an aggregate, while paths
    are installed must give every path flow the set_queue of the *new* plan, and OVSDB the
    QoS/Queue rows OVS turns into linux-htb classes."""
    api = dumbbell_ovsdb_queues.api
    for rule in RULES:
        api.ok("POST", "/rules", rule)
    api.ok("PUT", "/ports/1/3", {"capacity_bps": 40_000_000})
    h1, h3 = dumbbell_ovsdb_queues.net.get("h1", "h3")
    assert goodput_bps(iperf3(h1, h3, "cubic", duration_s=1, port=5302)) > FLOWED_BPS  # paths installed
    assert ovsdb_queues_of("s1-eth3") == {}
    api.ok("PUT", "/approaches", {"separate_queues": True})
    [port] = api.ok("GET", "/state")["ports"]
    assert port["queue_backend"] == "ovsdb-queue" and port["status"] == "applied", port
    plan = {q["aggregate"]: q["index"] for q in port["queues"]}
    assert sorted(ovsdb_queues_of("s1-eth3")) == sorted(plan.values())
    # OVS's linux-htb maps queue N to class 1:N+1
    classes = subprocess.run(["tc", "class", "show", "dev", "s1-eth3"], capture_output=True, text=True).stdout
    for index in plan.values():
        assert f"class htb 1:{index + 1:x} " in classes, (index, classes)
    path = r"metadata=0x\w+/0xff,nw_dst=10.0.0.3 actions=set_queue:{},output:3"
    assert re.search(path.format(plan["queue_filling"]), ofctl("dump-flows", "s1"))

    api.ok("PUT", "/aggregates/bulk2", {"queue_weight": 2, "dscp": 12})
    api.ok("PUT", "/rules/bulk", {"aggregate": "bulk2", "match": {"ip_proto": 6, "tp_dst": 5302}})
    [port] = api.ok("GET", "/state")["ports"]
    plan = {q["aggregate"]: q["index"] for q in port["queues"]}
    assert "bulk2" in plan and sorted(ovsdb_queues_of("s1-eth3")) == sorted(plan.values())
    assert goodput_bps(iperf3(h1, h3, "cubic", duration_s=1, port=5302)) > FLOWED_BPS
    assert re.search(path.format(plan["bulk2"]), ofctl("dump-flows", "s1"))

    api.ok("PUT", "/approaches", {"separate_queues": False})
    assert ovsdb_queues_of("s1-eth3") == {}
    assert "set_queue" not in ofctl("dump-flows", "s1")
