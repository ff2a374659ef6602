"""The controller's parts that REST, /metrics and the dashboard read, for unit tests without
Ryu or a switch: the real ControllerView over a real NetworkMap (switch 0x42 with ports 1
and 2, connected), a real PolicyStore (SQLite in memory), the real PolicyInForce and the real
HeavyHitterService (configured by nobody, so idle).

Two things stand in, and say so: the switch host's answer to "which backend serves this
port?" is always ckcd-link (a real answer needs OVSDB, root and a running vswitchd; the lab
tests ask the real one), and the switch actions (steer, counting flows) are recorded, not
sent (there is no switch). apply_policy() stores and replans as the controller does, then
stops where the controller would talk to switches.
"""

from __future__ import annotations

import logging

from coex.policy import Policy
from coex.store import PolicyStore
from coex.topology import NetworkMap
from ovs_config.switch_host import SwitchHostConfigurator
from ryu_app.heavy_hitters import HeavyHitterService
from ryu_app.rest import CoexApi
from ryu_app.view import ControllerView, PolicyInForce

DPID = 0x42
LOGGER = logging.getLogger("controller_parts")


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
        self.view = ControllerView(in_force=self.in_force, net=self.net, datapaths=self.datapaths,
                                   port_names=self.port_names, trees=self.trees, switch_hosts=self.switch_hosts,
                                   store=self.store, read_path_counters=lambda: self.path_flows)
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
