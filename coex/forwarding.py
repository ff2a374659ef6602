"""What forwarding a policy asks for: which aggregate a packet joins in table 0 (its metadata
id, and its DSCP under Separate Queues), the switch path each aggregate takes between two
switches (Separate Paths), and what every hop of a path does with the aggregate's packets in
table 1 - its meter (Limited Queue) and its queue (Separate Queues).

Pure: a policy, a coex.topology.NetworkMap and the ports' states in; hop lists and plain
flow descriptions out. ryu_app turns the descriptions into flow-mods (ryu_app/flows.py).
A ForwardingPlan belongs to one policy (the controller makes a new one per policy) and
plans paths once per topology version of the map, then looks them up.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import networkx as nx

from coex import planner
from coex.policy import Match, Policy
from coex.ports import PortState
from coex.topology import Hop, HostLocation, NetworkMap, PortRef

DEFAULT = "default"
PENALIZED = "penalized"     # where a heavy hitter is steered
DEFAULT_ID = 0              # table 0 leaves the metadata at 0 when no rule matched

PRIO_DEFAULT_MARK = 1       # table 0: unclassified IPv4 gets the default aggregate's DSCP
PRIO_RULE_BASE = 1000       # table 0: + rule priority (0..1000)
PRIO_STEER = 2100           # table 0: a heavy hitter's 5-tuple, above every rule
PRIO_PATH = 100             # table 1: the default aggregate's path flows
PRIO_AGG_PATH = 200         # table 1: another aggregate's path flows (they match its metadata)
PATH_IDLE_TIMEOUT_S = 60    # a pair that stopped talking gives its flows back


def aggregate_ids(policy: Policy) -> dict[str, int]:
    """Metadata ids 1, 2, ... in the policy's order of aggregates; 'default' has none (0)."""
    names = [a.name for a in policy.aggregates if a.name != DEFAULT]
    return {name: i + 1 for i, name in enumerate(names)}


@dataclasses.dataclass(frozen=True)
class ClassifyFlow:
    """One table-0 flow: the packets it matches join an aggregate (see ryu_app/flows.py)."""
    priority: int
    match: Match | tuple | None  # a rule's Match, one flow's 5-tuple (a FlowKey), None: any IPv4
    agg_id: int | None           # written into the metadata; None leaves it (0: default)
    dscp: int | None             # Separate Queues: the aggregate's DSCP; None keeps the host's


@dataclasses.dataclass(frozen=True)
class HopFlow:
    """One path flow on one switch, as plain values (table 1, see ryu_app/flows.py)."""
    dpid: int
    priority: int
    agg_id: int                # matched in the metadata (0: the default aggregate)
    src_ip: str
    dst_ip: str
    out_port: int
    meter_id: int | None       # Limited Queue: the meter of the port this hop leaves by
    queue_index: int | None    # Separate Queues via set_queue (OVSDB-queue ports only)
    idle_timeout_s: int = PATH_IDLE_TIMEOUT_S


class ForwardingPlan:
    def __init__(self, policy: Policy):
        self.policy = policy
        self.agg_ids = aggregate_ids(policy)
        self.agg_by_id = {i: name for name, i in self.agg_ids.items()}
        self.meters = planner.meter_plans(policy)
        self._meter_ids = {(m.dpid, m.port, m.aggregate): m.meter_id for m in self.meters}
        self._queue_plans = {(p.dpid, p.port): planner.queue_plan(policy, p) for p in policy.ports}
        sp = policy.approaches.separate_paths
        self._own_path = [a.name for a in policy.aggregates if a.own_path] if sp else []
        self._version = None       # the map's topology version the cache below was planned for
        self._graph: nx.Graph | None = None
        self._switch_paths: dict[tuple[int, int], dict[str | None, list[int]]] = {}

    # --- aggregates ---------------------------------------------------------------

    def knows(self, aggregate: str) -> bool:
        return aggregate == DEFAULT or aggregate in self.agg_ids

    def agg_id(self, aggregate: str) -> int:
        return DEFAULT_ID if aggregate == DEFAULT else self.agg_ids[aggregate]

    def aggregate_of(self, agg_id: int) -> str:
        """The aggregate whose id table 0 wrote into a packet's metadata."""
        return self.agg_by_id.get(agg_id, DEFAULT)

    # --- table 0: classification ------------------------------------------------------

    def classify_flows(self) -> list[ClassifyFlow]:
        """One flow per policy rule; under Separate Queues also one that marks unclassified
        IPv4 with the default aggregate's DSCP, whatever DSCP the host chose."""
        flows = [ClassifyFlow(PRIO_RULE_BASE + r.priority, r.match, self.agg_id(r.aggregate),
                              self._dscp(r.aggregate)) for r in self.policy.rules]
        if self.policy.approaches.separate_queues:
            flows.append(ClassifyFlow(PRIO_DEFAULT_MARK, None, None, self._dscp(DEFAULT)))
        return flows

    def steer_flow(self, flow_key: tuple) -> ClassifyFlow:
        """A heavy hitter's 5-tuple into the penalized aggregate, above every rule."""
        return ClassifyFlow(PRIO_STEER, flow_key, self.agg_id(PENALIZED), self._dscp(PENALIZED))

    def _dscp(self, aggregate: str) -> int | None:
        # Separate Queues: the ports' queues (bands, HTB classes) select by this DSCP.
        return self.policy.aggregate(aggregate).dscp if self.policy.approaches.separate_queues else None

    # --- Separate Paths -----------------------------------------------------------

    def path(self, net: NetworkMap, aggregate: str, src: HostLocation, dst: HostLocation) -> list[Hop]:
        """The hops of `aggregate` from src to dst: its own (edge-disjoint where the graph
        allows) under Separate Paths if it has own_path, else the shortest path."""
        switches = self._pair_paths(net, src.dpid, dst.dpid)
        return net.host_path(src, dst, switches.get(aggregate, switches[None]), self._graph)

    def _pair_paths(self, net: NetworkMap, src_dpid: int, dst_dpid: int) -> dict[str | None, list[int]]:
        if net.version != self._version:
            self._version, self._graph, self._switch_paths = net.version, net.graph(), {}
        key = (src_dpid, dst_dpid)
        if key not in self._switch_paths:
            # The shortest path first: it raises NoPath when the two are not joined at all.
            paths = {None: net.switch_path(src_dpid, dst_dpid, self._graph)}
            paths.update(planner.aggregate_paths(self._graph, src_dpid, dst_dpid, self._own_path))
            self._switch_paths[key] = paths
        return self._switch_paths[key]

    # --- what each hop does -------------------------------------------------------

    def hop_flows(self, aggregate: str, src_ip: str, dst_ip: str, hops: list[Hop],
                  port_states: Mapping[PortRef, PortState]) -> list[HopFlow]:
        return [self.hop_flow(aggregate, src_ip, dst_ip, h, port_states.get((h.dpid, h.out_port)))
                for h in hops]

    def hop_flow(self, aggregate: str, src_ip: str, dst_ip: str, hop: Hop,
                 out_state: PortState | None) -> HopFlow:
        """The path flow of one hop: the aggregate's meter if the hop leaves by a Limited
        Queue port, its queue if it leaves by a Separate Queues port served by OVSDB queues
        (other backends classify by the DSCP that table 0 marked)."""
        out = (hop.dpid, hop.out_port)
        queue = None
        backend = out_state.queue_backend if out_state else None
        if out in self._queue_plans and self.policy.approaches.separate_queues and backend == "ovsdb-queue":
            # From the plan of this policy, not from the port's last state.
            queue = self._queue_plans[out].class_of(aggregate).index
        agg_id = self.agg_id(aggregate)
        return HopFlow(hop.dpid, PRIO_PATH if aggregate == DEFAULT else PRIO_AGG_PATH, agg_id,
                       src_ip, dst_ip, hop.out_port, self._meter_ids.get((*out, aggregate)), queue)

