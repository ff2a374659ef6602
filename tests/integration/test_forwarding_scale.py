"""Forwarding state and the packet-in limit at more hosts: Mininet's own
TreeTopo(depth=2, fanout=4), 5 switches and 16 hosts, under the real `ryu-manager ckcd_coex`.
Its own module: the lab of test_forwarding.py (same switch names) is gone before this starts.
bench/bench_controller_load.py measures the same at 64 and 256 hosts beside simple_switch_13."""

from __future__ import annotations

import json
import re
import sys

import pytest
from mininet.topolib import TreeTopo

from experiments.lab.net import Controller, mininet_net
from ovs_config.private_ovs import ofctl
from ryu_app import flows
from tests.integration.test_forwarding import OF_PORT, REST_PORT, Lab, path_flows
from tests.waiting import eventually

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

TREE_HOSTS = 16  # Mininet's TreeTopo(depth=2, fanout=4): root s1, edge switches s2-s5, 4 hosts each


@pytest.fixture(scope="module")
def tree_lab(private_ovs, tmp_path_factory):
    log = tmp_path_factory.mktemp("ryu-tree") / "ryu.log"
    ctl = Controller(of_port=OF_PORT, rest_port=REST_PORT, log_path=str(log)).start()
    holder = Lab(None, ctl)
    try:
        with mininet_net(TreeTopo(depth=2, fanout=4), ctl) as net:
            holder.net = net
            yield holder
    finally:
        holder.ctl.stop()


def flow_count(switch: str) -> int:
    return sum(1 for line in ofctl("dump-flows", switch).splitlines() if "cookie=" in line)


def test_forwarding_state_grows_with_hosts_not_pairs(tree_lab):
    """Every switch holds one default flow per destination host, whichever pairs talked:
    TreeTopo(2,4)'s 240 host pairs leave 16 forwarding flows on each switch (the pair
    flows of before: 192 on the root, 120 on an edge switch). Paths stay the shortest: an
    edge switch sends a host on another edge switch up to the root."""
    assert tree_lab.net.pingAll(timeout=2) == 0.0
    ips = sorted(h.IP() for h in tree_lab.net.hosts)
    for switch in tree_lab.net.switches:
        out = dict(path_flows(switch.name))
        assert sorted(out) == ips, (switch.name, out)
        assert len(path_flows(switch.name)) == TREE_HOSTS
        assert flow_count(switch.name) <= 4 * TREE_HOSTS, ofctl("dump-flows", switch.name)
    # s2 holds h1-h4 on ports 1-4 and reaches the root through port 5.
    s2 = dict(path_flows("s2"))
    assert [s2[f"10.0.0.{i}"] for i in range(1, 5)] == [1, 2, 3, 4]
    assert {s2[f"10.0.0.{i}"] for i in range(5, 17)} == {5}


def meter_counts(switch: str) -> tuple[int, int]:
    """(packets into the packet-in meter, packets its drop band dropped) on the switch."""
    stats = ofctl("meter-stats", switch, f"meter={flows.PACKET_IN_METER_ID}")
    into = int(re.search(r"packet_in_count:(\d+)", stats).group(1))
    dropped = int(re.search(r"\b0: packet_count:(\d+)", stats).group(1))
    return into, dropped


def test_packet_in_limit_cuts_a_storm_at_the_switch(tree_lab):
    """Protection under load: a host sending frames to 3000 unknown destinations
    at 2000/s (a scan) reaches the controller at the policy's limit, 200/s, not at its own
    rate; the rest is dropped by the switch's meter. Tolerance: the limit x the
    storm's duration + the burst, + 20 % (the meter's token bucket refills in steps)."""
    api = tree_lab.api
    try:
        api.ok("PUT", "/packet-in", {"limit_pps": 200, "burst": 100})
        eventually(lambda: "rate=200 burst_size=100" in ofctl("dump-meters", "s2"), what="the limit on s2")
        before = meter_counts("s2")
        h1 = tree_lab.net.get("h1")
        storm = json.loads(h1.cmd(f"{sys.executable} -m experiments.lab.storm h1-eth0 --count 3000 --rate 2000")
                           .strip().splitlines()[-1])
        sent, took = storm["sent"], storm["t_last"] - storm["t_first"]
        seen = [before]

        def settled():  # the switch has counted what reached it (the datapath may drop some first)
            now = meter_counts("s2")
            seen.append(now)
            return now if now == seen[-2] and now != before else None
        after = eventually(settled, timeout_s=10, interval_s=0.5, what="s2's meter counts settled")
        into, dropped = after[0] - before[0], after[1] - before[1]
        passed = into - dropped
        allowed = 1.2 * (200 * took + 100)
        print(f"storm: {sent} frames in {took:.2f} s; into s2's meter {into}, passed {passed}, "
              f"dropped {dropped}")
        assert into >= 0.5 * sent, "most of the storm reached the switch's table"
        assert passed <= allowed, (passed, allowed)
        assert dropped >= into - allowed
        # The controller stayed responsive and forwarding with flows was untouched.
        assert tree_lab.net.ping(tree_lab.net.get("h1", "h16"), timeout=2) == 0.0
    finally:
        api.ok("PUT", "/packet-in", {})
    assert "rate=1000 burst_size=1000" in ofctl("dump-meters", "s2")
