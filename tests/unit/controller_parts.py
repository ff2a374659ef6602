"""The controller's parts that REST, /metrics and the dashboard read, for unit tests without
Ryu or a switch: the real ControllerView over a real NetworkMap (switch 0x42 with ports 1
and 2, connected), a real PolicyStore (SQLite in memory), the real PolicyInForce and the real
HeavyHitterService (configured by nobody, so idle).

Three things stand in, and say so: the switch host's answer to "which backend serves this
port?" is always ckcd-link (a real answer needs OVSDB, root and a running vswitchd; the lab
tests ask the real one); the ckcd-link daemons (which interface a link serves: the test's
`link_ports`, none unless it says; a daemon's `stats`: FakeLink answering LINK_STATS, a
recorded reply of ckcd-link with its ECN marks); and the switch actions (steer, counting
flows) are recorded, not sent (there is no switch). apply_policy() stores and replans as the
controller does, then stops where the controller would talk to switches.
"""

from __future__ import annotations

import logging

from coex.policy import Policy
from coex.store import PolicyStore
from coex.topology import NetworkMap
from ovs_config.link_stats import LinkStatsReader
from ovs_config.switch_host import SwitchHostConfigurator
from ryu_app.heavy_hitters import HeavyHitterService
from ryu_app.rest import CoexApi
from ryu_app.view import ControllerView, PolicyInForce

DPID = 0x42
LOGGER = logging.getLogger("controller_parts")
# One direction of ckcd-link's `stats` reply (docs/ckcd-link.md), what FakeLink answers; a test
# may replace it (monkeypatch.setattr(controller_parts, "LINK_STATS", ...)).
LINK_STATS = {"rate_bps": 50_000_000, "delay_ms": 5, "qlen_pkts": 12, "qlen_bytes": 18168, "tx_frames": 1000,
              "tx_bytes": 1_514_000, "drops": {"overflow": 7, "early": 2},
              "marks": {"early": 5, "delay": 3}, "ce_not_written": 0,
              "qdisc": "bands weights=1,3 map=46:1 | ckcd limit=80 | droptail limit=80",
              "xstats": "band=0 deficit=0 qlen_pkts=3 active_flows=2 fair_share_bps=12500000 band=1 deficit=5 qlen_pkts=9",
              "sojourn_us": {"count": 1000, "mean": 2000.0, "p50": 1500.0, "p99": 9000.0, "max": 12000.0}}
LINK_CONTROL_PATH = "/run/l0.sock"  # the one ckcd-link FakeLink stands in for, serving its direction "ab"


class FakeLink:
    """The control socket of the ckcd-link at LINK_CONTROL_PATH (ovs_config.link_daemon.LinkControl):
    `stats` of its direction "ab", flows left out, answered with LINK_STATS."""

    def __init__(self, path):
        self.path = path

    def stats(self, direction, max_flows=64):
        assert (self.path, direction, max_flows) == (LINK_CONTROL_PATH, "ab", 0)
        return {"ok": True, "dirs": {"ab": LINK_STATS}}


class LinkServedHosts(SwitchHostConfigurator):
    """Every port is served by ckcd-link (stands in for the OVSDB lookup)."""

    def aqm_backend(self, dpid: int, port: int) -> tuple[str | None, str]:
        return "ckcd-link", ""


class ControllerParts:
    def __init__(self, token: str | None = None):
        self.token = token
        self.in_force = PolicyInForce(Policy(), 0)
        self.net = NetworkMap()
        self.net.add_switch(DPID, (1, 2))
        self.datapaths: dict[int, object] = {DPID: object()}
        self.port_names: dict[tuple[int, int], str] = {}
        self.trees: dict = {}
        self.path_flows: dict[int, list] = {}  # what the switches' forwarding-flow counters answer
        self.store = PolicyStore(":memory:")
        self.switch_hosts = LinkServedHosts(self.port_names, "auto", LOGGER)
        # interface name -> (control socket, direction) of the ckcd-link serving it, as OVSDB would say
        self.link_ports: dict[str, tuple[str, str]] = {}
        self.view = ControllerView(in_force=self.in_force, net=self.net, datapaths=self.datapaths,
                                   port_names=self.port_names, trees=self.trees, switch_hosts=self.switch_hosts,
                                   store=self.store, read_path_counters=lambda: self.path_flows,
                                   links=LinkStatsReader(link_ports=lambda: self.link_ports, link_control=FakeLink))
        self.sent: list[tuple] = []  # switch actions asked for: (name, args)
        self.heavy_hitters = HeavyHitterService(self.view, self, LOGGER)

    @property
    def policy(self) -> Policy:
        return self.in_force.policy

    @property
    def policy_version(self) -> int:
        return self.in_force.version

    def apply_policy(self, new: Policy, summary: str) -> int:
        version = self.store.save(new, summary)
        self.in_force.replace(new, version)
        return version

    def api(self) -> CoexApi:
        return CoexApi(self.view, self.heavy_hitters, self.apply_policy, self.token, LOGGER)

    # ryu_app.heavy_hitters.SwitchActions, recorded
    def steer(self, key):
        self.sent.append(("steer", key))

    def unsteer(self, key):
        self.sent.append(("unsteer", key))

    def install_counting(self, dpid, key):
        self.sent.append(("install_counting", dpid, key))
        return True

    def remove_counting(self, dpid, key):
        self.sent.append(("remove_counting", dpid, key))

    def classify_counters(self, dpid, timeout_s):
        return []
