"""What the controller knows, read-only: the one thing REST, /metrics, the dashboard and
heavy-hitter detection read, instead of the controller's own attributes.

The controller (ryu_app/controller.py) owns and changes the state: the policy in force
(PolicyInForce), the network map, the connected switches, the trees it installed; the
switch-host configurator (ovs_config/switch_host.py) owns what it configured on each port;
each ckcd-link owns its counters (read through ovs_config.link_stats).
A ControllerView holds references to them, answers from them at the moment it is asked
(there is no second copy to go stale) and hands out no way to change them: copies of the
mutable records, read-only mappings, plain values.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping

from coex.forwarding import ForwardingPlan, Tree
from coex.policy import Policy
from coex.ports import PortState
from coex.store import PolicyStore
from coex.topology import HostLocation, NetworkMap
from ovs_config.aqm import LINK_BACKEND
from ovs_config.link_stats import DirectionStats, LinkDirection, LinkStatsReader
from ovs_config.switch_host import PortRef, SwitchHostConfigurator


class PolicyInForce:
    """The policy the controller enforces, its stored version and the forwarding plan made
    from it: replaced together, so a reader never sees a plan of another policy."""

    def __init__(self, policy: Policy, version: int):
        self.replace(policy, version)

    def replace(self, policy: Policy, version: int) -> None:
        self.policy, self.version, self.plan = policy, version, ForwardingPlan(policy)


class ControllerView:
    def __init__(self, *, in_force: PolicyInForce, net: NetworkMap, datapaths: Mapping[int, object],
                 port_names: Mapping[PortRef, str], trees: Mapping[tuple[str, str], Tree],
                 switch_hosts: SwitchHostConfigurator, store: PolicyStore,
                 read_path_counters: Callable[[], dict[int, list]], links: LinkStatsReader,
                 switch_errors: Mapping[tuple[int, str], int] | None = None,
                 switch_writes: Mapping[tuple[int, str], int] | None = None,
                 in_sync: Callable[[int], bool] = lambda dpid: False, roles=None):
        """read_path_counters: the switches' counters of their table-1 forwarding flows, asked
        now (dpid -> OFPFlowStats entries; a switch that did not answer in time is left out).
        links: the ckcd-link daemons' counters, read when asked. switch_errors: the OFPT_ERRORs
        switches sent for our messages, by (dpid, OFPET name); switch_writes: the flow-mods and
        meter-mods sent, by (dpid, command); in_sync(dpid): whether the switch's tables were read
        and hold what was sent since (all three ryu_app.switch_sync). roles: ours on each switch,
        and whether we lead (ryu_app.roles.Roles; None: a single instance that leads)."""
        self._roles = roles
        self._in_force, self._net, self._datapaths = in_force, net, datapaths
        self._port_names, self._trees, self._switch_hosts = port_names, trees, switch_hosts
        self._store, self._read_path_counters, self._links = store, read_path_counters, links
        self._switch_errors = switch_errors if switch_errors is not None else {}
        self._switch_writes = switch_writes if switch_writes is not None else {}
        self._in_sync = in_sync

    # --- the policy ---------------------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        """The policy in force (frozen: edits make a new one, coex.policy.Policy.edited)."""
        return self._in_force.policy

    @property
    def policy_version(self) -> int:
        return self._in_force.version

    def aggregate_of(self, agg_id: int) -> str:
        """The aggregate whose id a forwarding flow carries in its metadata."""
        return self._in_force.plan.aggregate_of(agg_id)

    def changes(self) -> list[dict]:
        """The latest accepted policy changes, newest first (coex.store)."""
        return self._store.changes()

    # --- switches, ports, links, hosts ---------------------------------------------------

    def switches_connected(self) -> int:
        return len(self._datapaths)

    def switch_errors(self) -> dict[tuple[int, str], int]:
        """OFPT_ERRORs the switches sent for our messages since start, by (dpid, OFPET name)."""
        return dict(self._switch_errors)

    def switch_writes(self) -> dict[tuple[int, str], int]:
        """Flow-mods and meter-mods sent since start, by (dpid, command: add_flow, modify_flow,
        delete_flow, add_meter, modify_meter, delete_meter)."""
        return dict(self._switch_writes)

    def is_connected(self, dpid: int) -> bool:
        return dpid in self._datapaths

    def has_port(self, dpid: int, port: int) -> bool:
        """Whether the switch has reported this port (and it has not gone down)."""
        return port in self._net.ports.get(dpid, ())

    def link_count(self) -> int:
        return len(self._net.links())

    def host_count(self) -> int:
        return len(self._net.hosts)

    def port_names(self) -> Mapping[PortRef, str]:
        """(dpid, port) -> the interface name its switch gave it."""
        return types.MappingProxyType(self._port_names)

    def port_state(self, key: PortRef) -> PortState | None:
        """A copy of what was configured on a policy port (None for other ports)."""
        state = self._switch_hosts.port_state.get(key)
        return None if state is None else dataclasses.replace(state)

    def aqm_backend(self, dpid: int, port: int) -> tuple[str | None, str]:
        """The port's discipline backend, or None with the reason (asks the switch host)."""
        return self._switch_hosts.aqm_backend(dpid, port)

    def path_counters(self) -> dict[int, list]:
        return self._read_path_counters()

    # --- ckcd-link's counters -----------------------------------------------------------------

    def served_links(self) -> dict[str, LinkDirection]:
        """Interface name -> the ckcd-link direction leaving the switch through it (asks OVSDB)."""
        return self._links.served()

    def link_stats(self, where: LinkDirection) -> DirectionStats | None:
        """That direction's counters now (asks the daemon); None when it does not answer."""
        return self._links.read(where)

    def leadership(self) -> dict:
        """GET /health's part on leading (docs/ha.md): leader or standby, the term (its epoch)
        while leading, and how many connected switches confirmed us as their MASTER."""
        roles = self._roles
        if roles is None:
            return {"role": "leader", "term": None, "switches_master": len(self._datapaths)}
        return {"role": "leader" if roles.leading else "standby",
                "term": roles.term.epoch if roles.term else None,
                "switches_master": sum(1 for d in self._datapaths if roles.may_write(d))}

    # --- GET /state ---------------------------------------------------------------------------

    def effective_state(self) -> dict:
        """What is installed on which switch, with which backend: the GET /state document
        (docs/rest.md)."""
        plan, net, switch_hosts = self._in_force.plan, self._net, self._switch_hosts
        switches = []
        for dpid in sorted(set(net.ports) | set(self._datapaths)):
            error = switch_hosts.ovsdb_errors.get(dpid)
            switches.append({
                "dpid": dpid, "connected": dpid in self._datapaths,
                "in_sync": dpid in self._datapaths and self._in_sync(dpid), "ovsdb": switch_hosts.ovsdb_of(dpid).where,
                **({"ovsdb_error": error} if error is not None else {}),
                "ports": sorted(net.ports.get(dpid, ())),
                "meters": [dict(vars(m)) for m in plan.meters if m.dpid == dpid],
                "forwarding": [{"aggregate": a, "dst": d, "out_port": tree[dpid]}
                               for (a, d), tree in sorted(self._trees.items()) if dpid in tree],
            })
        return {
            "policy_version": self.policy_version,
            "switches": switches,
            "links": [{"a": {"dpid": a[0], "port": a[1]}, "b": {"dpid": b[0], "port": b[1]}}
                      for a, b in net.links()],
            "hosts": [_host_dict(h) for h in sorted(net.hosts.values(), key=lambda h: h.ipv4 or "")],
            "ports": self._port_entries(),
        }

    def _port_entries(self) -> list[dict]:
        """Each policy port's record; a port served by ckcd-link with that link direction's
        live queue, drops and marks by reason (`link`), read as GET /metrics reads them. OVSDB is
        asked which link serves which port only when a port's discipline backend is ckcd-link."""
        ports = sorted(self._switch_hosts.port_state.items())
        served = self.served_links() if any(s.aqm_backend == LINK_BACKEND for _, s in ports) else {}
        entries = []
        for (dpid, port), state in ports:
            entry = {"dpid": dpid, "port": port, **state.to_dict()}
            stats = self.link_stats(served[state.name]) if state.name in served else None
            if stats is not None:
                entry["link"] = {"qlen_pkts": stats.qlen_pkts, "drops": dict(stats.drops),
                                 "marks": dict(stats.marks)}
            entries.append(entry)
        return entries


def _host_dict(h: HostLocation) -> dict:
    return {"mac": h.mac, "ipv4": h.ipv4, "dpid": h.dpid, "port": h.port}
