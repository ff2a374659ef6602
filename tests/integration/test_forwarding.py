"""The controller forwarding real traffic over the private, userspace OVS in Mininet.

Each topology gets one lab (OVS, the real `ryu-manager ckcd_coex`, Mininet);
the tests run in order and the last ones kill, restart and disconnect things.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from experiments.lab.net import Controller, mininet_net, wait_switches_connected
from experiments.lab.rest_client import CoexClient
from experiments.lab.traffic import goodput_bps, iperf3, sender_cc
from ovs_config.private_ovs import ofctl
from tests.hostload import HostLoad
from tests.integration.labkit import FLOWED_BPS, REROUTE_TIMEOUT_S, links_known
from tests.waiting import eventually
from topologies.dumbbell import Dumbbell
from topologies.two_paths import TwoPaths

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

OF_PORT, REST_PORT = 16653, 18070  # not 6653, 8080: leave a user's own controller's ports alone
TOPOLOGIES = {"dumbbell": Dumbbell, "twopaths": TwoPaths}
# LLDP runs every second and one round finds every link; 10 s is ten rounds, for a restarted
# controller that also re-syncs every switch on a loaded 2-core VM.
DISCOVERY_TIMEOUT_S = 10.0


class Lab:
    def __init__(self, net, ctl):
        self.net, self.ctl = net, ctl

    @property
    def api(self) -> CoexClient:
        return CoexClient(self.ctl.rest_url)

    def switch_links(self) -> int:
        """How many switch-to-switch links the topology has."""
        switches = set(self.net.switches)
        return sum(1 for link in self.net.links if {link.intf1.node, link.intf2.node} <= switches)


@pytest.fixture(scope="module", params=sorted(TOPOLOGIES))
def lab(request, private_ovs, tmp_path_factory):
    log = tmp_path_factory.mktemp("ryu") / "ryu.log"
    ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=str(log)).start()
    holder = Lab(None, ctl)
    try:
        with mininet_net(TOPOLOGIES[request.param](), ctl) as net:
            holder.net = net
            yield holder
    finally:
        holder.ctl.stop()


def path_flows(switch: str, with_packets: bool = False) -> list[tuple]:
    """(dst ip, out port[, n_packets]) of the default aggregate's IPv4 forwarding flows the
    switch holds: one per destination host (coex.forwarding)."""
    flows = []
    for line in ofctl("dump-flows", switch).splitlines():
        m = re.search(r"n_packets=(\d+),.*priority=100,ip,(?:metadata=0/0xff,)?nw_dst=([\d.]+) "
                      r"actions=output:(\d+)", line)
        if m:
            flow = (m.group(2), int(m.group(3)))
            flows.append(flow + (int(m.group(1)),) if with_packets else flow)
    return flows


def test_controller_logs_our_app(lab):
    assert "ckcd-coex controller loaded (OpenFlow 1.3, " in lab.ctl.log()


def test_pingall_without_loss(lab):
    assert lab.net.pingAll(timeout=2) == 0.0


def test_path_flows_are_on_the_switches(lab):
    lab.net.pingAll(timeout=2)
    out = dict(path_flows("s1"))
    # Forwarding per destination: s1 holds exactly one flow toward each of the four hosts,
    # not one per pair.
    assert sorted(out) == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"], out
    assert len(path_flows("s1")) == 4
    # Toward h3 s1 sends to the core (not back to a host port 1 or 2); toward h1 out of h1's port.
    assert out["10.0.0.3"] >= 3 and out["10.0.0.4"] >= 3
    assert (out["10.0.0.1"], out["10.0.0.2"]) == (1, 2)


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_tcp_flow_completes(lab, cc):
    h1, h3 = lab.net.get("h1", "h3")
    with HostLoad() as load:
        report = iperf3(h1, h3, cc, duration_s=3)
    assert sender_cc(report) == cc
    assert goodput_bps(report) > FLOWED_BPS, f"{goodput_bps(report) / 1e6:.2f} Mbit/s; {load}"


def test_reconnecting_switch_gets_its_flows_back(lab):
    lab.net.pingAll(timeout=2)
    before = path_flows("s1", with_packets=True)
    assert before and all(n > 0 for *_, n in before)  # every path has carried pings
    subprocess.run(["ovs-vsctl", "del-controller", "s1"], check=True)
    # A real disconnect: the controller has seen s1 go before it comes back.
    eventually(lambda: not any(s["connected"] for s in lab.api.ok("GET", "/state")["switches"] if s["dpid"] == 1),
               timeout_s=5, what="the controller saw s1 disconnect (OVS closes the connection at once)")
    subprocess.run(["ovs-vsctl", "set-controller", "s1", f"tcp:127.0.0.1:{OF_PORT}"], check=True)
    wait_switches_connected(["s1"])
    # No traffic since the reconnect, yet the same paths are there. A bridge left without any
    # controller is flushed by OVS (its connection manager empties the tables when the set of
    # controllers goes from some to none), so the controller read an empty s1 on reconnect and
    # installed the paths again (fresh flows have zero packet counts).
    def reinstalled():
        after = path_flows("s1", with_packets=True)
        return all(n == 0 for *_, n in after) and {f[:2] for f in after} == {f[:2] for f in before}
    eventually(reinstalled, what="s1's path flows re-installed with zero counters")
    assert lab.net.pingAll(timeout=2) == 0.0


def test_forwarding_kept_across_a_controller_killed_and_restarted(lab):
    """Rule: a controller killed and started again reads what the switches hold and keeps the
    paths it finds (it knows no link or host yet): the path flows of s1 are the ones it had,
    every pair still pings, and once LLDP has found the links new traffic flows too."""
    lab.net.pingAll(timeout=2)
    before = set(path_flows("s1"))
    assert before
    done = "switch 0000000000000001 reconciled"
    earlier = lab.ctl.log().count(done)  # the log is appended to, controller after controller
    lab.ctl.kill()
    lab.ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=lab.ctl.log_path).start()
    wait_switches_connected([s.name for s in lab.net.switches])
    eventually(lambda: lab.ctl.log().count(done) > earlier, what="s1 reconciled by the new controller")
    assert set(path_flows("s1")) == before
    assert lab.net.pingAll(timeout=2) == 0.0
    eventually(lambda: len(links_known(lab.api)) == lab.switch_links(), timeout_s=DISCOVERY_TIMEOUT_S,
               what="the restarted controller found every switch-to-switch link")
    h2, h4 = lab.net.get("h2", "h4")
    with HostLoad() as load:
        bps = goodput_bps(iperf3(h2, h4, "cubic", duration_s=2))
    assert bps > FLOWED_BPS, f"{bps / 1e6:.2f} Mbit/s; {load}"


# Only the topology with a second path can reroute (the dumbbell has none): the test takes
# that one of the module's labs instead of skipping the other.
@pytest.mark.parametrize("lab", ["twopaths"], indirect=True)
def test_link_failure_reroutes_over_the_other_path(lab):
    h1, h3 = lab.net.get("h1", "h3")
    assert lab.net.ping([h1, h3], timeout=2) == 0.0
    assert ("10.0.0.3", 3) in path_flows("s1")  # upper path: s1 port 3 -> s2
    lab.net.configLinkStatus("s1", "s2", "down")
    try:
        eventually(lambda: ("10.0.0.3", 4) in path_flows("s1"), timeout_s=REROUTE_TIMEOUT_S,
                   what="toward h3 rerouted to the lower path (s1 port 4 -> s3)")

        def s3_toward_h3() -> int:  # s3 holds its flow of the tree all along: count its packets
            return sum(n for dst, _, n in path_flows("s3", with_packets=True) if dst == "10.0.0.3")
        crossed = s3_toward_h3()
        assert lab.net.ping([h1, h3], timeout=2) == 0.0
        assert s3_toward_h3() > crossed, "h1's pings to h3 did not cross s3"
    finally:
        lab.net.configLinkStatus("s1", "s2", "up")

