"""What several lab test modules share: policy rules, the traffic claims with their one
tolerance each (and why), and helpers for the controller, its REST API and its steering
flows. Fixtures are in conftest.py; no test module imports another.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time

from experiments.lab.net import Controller, wait_switches_connected
from experiments.lab.traffic import goodput_bps, iperf3
from ovs_config.private_ovs import ofctl
from tests.hostload import HostLoad
from tests.waiting import eventually

RULES = [
    {"name": "interactive", "aggregate": "low_delay", "match": {"ip_proto": 6, "tp_dst": 5301}},
    {"name": "bulk", "aggregate": "queue_filling", "match": {"ip_proto": 6, "tp_dst": 5302}},
]

# "It flowed": a TCP flow over an unshaped path of the private OVS carries tens to hundreds of
# Mbit/s; one that moves 1 Mbit/s got its path, one without a path moves nothing.
FLOWED_BPS = 1e6

# A link that goes down is reported by OVS's port-status at once and the controller reroutes
# on it; if that message were lost, LLDP expiry (3.5 s) reroutes. 10 s covers the second.
REROUTE_TIMEOUT_S = 10.0

# Limited Queue on the dumbbell's 40 Mbit/s port at fraction 0.5 meters the queue-filling
# aggregate at 20 Mbit/s with a 5000 kbit burst (coex/planner.py: 250 ms at the rate).
METER_RATE_KBPS, METER_BURST_KBIT = 20_000, 5_000
METERED_FLOW_S = 8
# One CUBIC flow through that meter, iperf3's receiver goodput. The meter counts frame bytes,
# iperf3 payload: the meter's ceiling is 20 x 1448/1514 = 19.1 Mbit/s of goodput, plus the
# bucket spent once (5000 kbit over 8 s: +0.6). Measured here at this burst: 19 Mbit/s
# (coex/planner.py). Lower bound 17: CUBIC halves its window at each policer drop
# and must climb back within the bucket, 2 Mbit/s (10 %) below the measurement leaves room
# for that on a loaded VM while a collapsed flow (7 Mbit/s at a 1000 kbit burst) fails.
# Upper bound 21: above the ceiling with its burst (19.7) the meter let more through than its
# rate; 21 is what a bucket four times ours (20000 kbit) gave.
METERED_GOODPUT_BPS = (17e6, 21e6)

# Separate Queues with weights 1:3 give the low-delay aggregate a 25 % share while both stay
# backlogged: measured 0.251 in five of five runs (DropTail bands in ckcd-link). 15 % relative
# (0.21-0.29) covers two CUBIC sawtooths over 8 s on a loaded VM; no weights (0.5) or reversed
# weights (0.75) are far outside.
LOW_DELAY_WEIGHT_SHARE = 0.25
WEIGHT_SHARE_TOLERANCE = 0.15


def weight_share_bounds(share: float = LOW_DELAY_WEIGHT_SHARE) -> tuple[float, float]:
    return share * (1 - WEIGHT_SHARE_TOLERANCE), share * (1 + WEIGHT_SHARE_TOLERANCE)


def metered_goodput_bps(client, server, port: int = 5302) -> tuple[float, HostLoad]:
    """Goodput of one CUBIC flow client -> server through the Limited Queue meter, and the
    host's CPU while it ran; asserts METERED_GOODPUT_BPS with both in the message."""
    with HostLoad() as load:
        bps = goodput_bps(iperf3(client, server, "cubic", duration_s=METERED_FLOW_S, port=port))
    print(f"metered CUBIC {bps / 1e6:.2f} Mbit/s (meter {METER_RATE_KBPS / 1e3:g} Mbit/s); {load}")
    low, high = METERED_GOODPUT_BPS
    assert low <= bps <= high, (f"metered CUBIC flow at {bps / 1e6:.1f} Mbit/s, expected "
                                f"{low / 1e6:g}-{high / 1e6:g} (meter {METER_RATE_KBPS / 1e3:g} Mbit/s); {load}")
    return bps, load


@contextlib.contextmanager
def controller_with_bridge(private_ovs, tmp, of_port: int, rest_port: int, bridge: str, dpid: int,
                           token: str | None = None):
    """A real ryu-manager, and a userspace bridge (dpid) with internal ports 1 and 2 connected to it."""
    ctl = Controller(of_port=of_port, rest_port=rest_port, log_path=str(tmp / "ryu.log"),
                     db_path=str(tmp / "policy.sqlite"), token=token).start()
    try:
        private_ovs.vsctl("--if-exists", "del-br", bridge)  # left by a run that crashed
        private_ovs.vsctl("add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev",
                          "protocols=OpenFlow13", f"other-config:datapath-id={dpid:016x}",
                          "--", "add-port", bridge, f"{bridge}p1", "--", "set", "interface", f"{bridge}p1",
                          "type=internal", "ofport_request=1",
                          "--", "add-port", bridge, f"{bridge}p2", "--", "set", "interface", f"{bridge}p2",
                          "type=internal", "ofport_request=2")
        private_ovs.vsctl("set-controller", bridge, f"tcp:127.0.0.1:{of_port}")
        wait_switches_connected([bridge])
        yield ctl
    finally:
        ctl.stop()
        private_ovs.vsctl("--if-exists", "del-br", bridge)


@contextlib.contextmanager
def dumbbell_through_link(tmp, of_port: int, rest_port: int, link_bps: int, name: str):
    """A real ryu-manager and the dumbbell whose s1:3 - s2:3 link is ckcd-link (5 ms, 80-packet
    DropTail), once LLDP has found that link and every host reaches every other; yields
    (net, REST client, the link's control, the daemon's pid)."""
    from experiments.lab.net import mininet_net
    from experiments.lab.rest_client import CoexClient
    from ovs_config.bottleneck import SwitchLink
    from ovs_config.link_daemon import LinkControl
    from topologies.dumbbell import Dumbbell

    ctl = Controller(of_port=of_port, rest_port=rest_port, log_path=str(tmp / "ryu.log"),
                     db_path=str(tmp / "policy.sqlite")).start()
    try:
        with mininet_net(Dumbbell(core_link=False), ctl, discovery_wait_s=0) as net, \
                SwitchLink("s1", 3, "s2", 3, rate_bps=link_bps, delay_ms=5,
                           qdisc="droptail limit=80", name=name) as link:
            api = CoexClient(ctl.rest_url)
            eventually(lambda: frozenset({(1, 3), (2, 3)}) in links_known(api),
                       what="LLDP finds s1:3 - s2:3 through the daemon")
            assert net.pingAll(timeout=2) == 0.0
            yield net, api, LinkControl(link.control_path), link.daemon.pid
    finally:
        ctl.stop()


def links_known(api) -> set[frozenset]:
    """The switch-to-switch links the controller has found by LLDP, as {(dpid, port), (dpid, port)}."""
    return {frozenset({(l["a"]["dpid"], l["a"]["port"]), (l["b"]["dpid"], l["b"]["port"])})
            for l in api.ok("GET", "/state")["links"]}


# -- heavy hitters: the steering flows on s1 ----------------------------------------------

SFLOW_PORT = 16343  # the embedded collector's port in the heavy-hitter labs
STEER_LINE = re.compile(r"n_bytes=(\d+),.*priority=2100,tcp,nw_src=(\S+),nw_dst=(\S+),tp_src=(\d+),"
                        r"tp_dst=(\d+) actions=(\S+)")
FLOW_TABLE_LOOK_S = 0.1  # how often run_watching reads s1's flow table: a sampling period, not a wait
# A steering flow goes when its flow was quiet for the detector's window (3 s in these tests)
# and has been steered min_hold_s (1 s); the next tick removes it. 10 s leaves twice that for
# a controller sharing 2 cores with vswitchd and the hosts.
RELEASE_TIMEOUT_S = 10.0


# The rate detector's estimate of one TCP flow paced at 30 Mbit/s (31.4 on the wire), sampled
# 1-in-64 over a 3 s window: ~40 samples/s, ~120 in the window, a standard error of about
# 1/sqrt(120) = 9 % (docs/sflow.md); 20-42 Mbit/s is -36/+34 % of the wire rate, ~3.5 sigma.
PACED_ESTIMATE_BPS = (20e6, 42e6)
# The same flow as the switch counts it (its steering or counting flow's bytes, coex/counting.py):
# exact up to iperf3's pacing and the 0.1 s between readings: the wire's 31.4 Mbit/s +-15 %.
PACED_COUNTED_BPS = (26.5e6, 36.5e6)


def steering_flows(bridge: str = "s1") -> list[str]:
    return [line for line in ofctl("dump-flows", bridge).splitlines() if "priority=2100" in line]


def parse_steering(line: str) -> dict:
    m = STEER_LINE.search(line)
    assert m, f"unexpected steering flow: {line}"
    return {"n_bytes": int(m.group(1)), "five_tuple": (m.group(2), m.group(3), int(m.group(4)), int(m.group(5))),
            "actions": m.group(6)}


def penalized_actions(api, separate_queues: bool) -> str:
    """The actions a steering flow must carry: the penalized aggregate's id in the metadata
    (ids are 1, 2, ... in policy order, default excluded: coex.forwarding.aggregate_ids), and its
    DSCP under Separate Queues (ryu_app/flows.py)."""
    names = [n for n in api.ok("GET", "/aggregates")["aggregates"] if n != "default"]
    mark = f"set_field:{api.ok('GET', '/aggregates/penalized')['dscp']}->ip_dscp," if separate_queues else ""
    return f"{mark}write_metadata:{names.index('penalized') + 1:#x}/0xff,goto_table:1"


def run_watching(api, flows, report_at_s: float) -> dict:
    """Run iperf3 flows [(client, server, port, rate, duration_s)] in parallel and watch s1's
    flow table all along: every steering flow ever seen (5-tuple -> first sight), when the
    first appeared, the byte counts of the one to port 5201, GET /heavy-hitters at
    report_at_s, and the host's CPU over the run ("load")."""
    out = {"reports": {}, "seen": {}, "first_after_s": None, "big_bytes": [], "during": None}

    def run(c, s, p, rate, duration):
        out["reports"][p] = iperf3(c, s, "cubic", duration_s=duration, port=p, extra=f"-b {rate}")

    threads = [threading.Thread(target=run, args=flow) for flow in flows]
    with HostLoad() as out["load"]:
        started = time.monotonic()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for line in steering_flows():
                flow = parse_steering(line)
                out["seen"].setdefault(flow["five_tuple"], flow)
                if flow["five_tuple"][3] == 5201:
                    out["big_bytes"].append(flow["n_bytes"])
                if out["first_after_s"] is None:
                    out["first_after_s"] = time.monotonic() - started
            if out["during"] is None and time.monotonic() - started > report_at_s:
                out["during"] = api.ok("GET", "/heavy-hitters")
            time.sleep(FLOW_TABLE_LOOK_S)
        for t in threads:
            t.join()
    return out


def wait_released(seen: dict, timeout_s: float = RELEASE_TIMEOUT_S) -> None:
    """Wait until no steering flow is left on s1, adding any seen meanwhile to `seen`."""
    def released() -> bool:
        lines = steering_flows()
        for line in lines:
            seen.setdefault(parse_steering(line)["five_tuple"], None)
        return not lines

    eventually(released, timeout_s=timeout_s, what="every steering flow released from s1")
