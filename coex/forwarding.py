"""What forwarding a policy asks for: which aggregate a packet joins in table 0 (its metadata
id, and its DSCP under Separate Queues), the tree each aggregate's packets follow toward a
destination host (its own tree per aggregate under Separate Paths), and what each switch of
the tree does with them in table 1 - the out port, its meter (Limited Queue) and its queue
(Separate Queues).

Forwarding is keyed on the destination, as Faucet and Ryu's simple_switch_13 key theirs: a
switch holds one table-1 flow per (aggregate, destination host) it forwards toward, so the
state grows with hosts x aggregates, not with host pairs.

Pure: a policy, a coex.topology.NetworkMap and the ports' states in; trees, hop lists and
plain flow descriptions out. ryu_app turns the descriptions into flow-mods
(ryu_app/flows.py). A ForwardingPlan belongs to one policy (the controller makes a new one
per policy) and plans the switch trees once per topology version of the map, then looks them
up.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import networkx as nx

from coex import planner
from coex.policy import Match, Policy
from coex.ports import PortState
from coex.topology import Hop, HostLocation, NetworkMap, NoPath, PortRef

DEFAULT = "default"
PENALIZED = "penalized"     # where a heavy hitter is steered
DEFAULT_ID = 0              # table 0 leaves the metadata at 0 when no rule matched

PRIO_DEFAULT_MARK = 1       # table 0: unclassified IPv4 gets the default aggregate's DSCP
PRIO_RULE_BASE = 1000       # table 0: + rule priority (0..1000)
PRIO_STEER = 2100           # table 0: a heavy hitter's 5-tuple, above every rule
PRIO_COUNT = 2050           # table 0: a suspect's 5-tuple, counted (coex/counting.py), same treatment as without
PRIO_PATH = 100             # table 1: the default aggregate's flows toward a destination
PRIO_AGG_PATH = 200         # table 1: another aggregate's (they match its metadata)


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
    """One switch's flow toward a destination host, as plain values (table 1, see
    ryu_app/flows.py). No idle timeout: there is one per (aggregate, host), and the
    controller removes it when the host or the tree through this switch goes."""
    dpid: int
    priority: int
    agg_id: int                # matched in the metadata (0: the default aggregate)
    dst_ip: str
    out_port: int
    meter_id: int | None       # Limited Queue: the meter of the port this hop leaves by
    queue_index: int | None    # Separate Queues via set_queue (OVSDB-queue ports only)


Tree = dict[int, int]  # dpid -> the port a switch sends an aggregate's packets for one host out of


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
        self._trees: dict[int, dict[str | None, planner.NextHops]] = {}  # dst dpid -> aggregate -> tree

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

    def count_flow(self, flow_key) -> ClassifyFlow | None:
        """A heavy-hitter suspect's counting flow: its 5-tuple, treated as the rules would
        treat it (the same aggregate id and DSCP), so counting changes no forwarding. None
        when the 5-tuple cannot say: a rule that matches on DSCP or the ingress host could
        take the flow before the one its 5-tuple matches."""
        pkt = {"ipv4_src": flow_key.src_ip, "ipv4_dst": flow_key.dst_ip, "ip_proto": flow_key.protocol,
               "tp_src": flow_key.src_port, "tp_dst": flow_key.dst_port}
        aggregate = DEFAULT
        for rule in self.policy.rules_by_precedence():
            beyond_5_tuple = rule.match.dscp is not None or rule.match.eth_src is not None
            if beyond_5_tuple and dataclasses.replace(rule.match, dscp=None, eth_src=None).matches(pkt):
                return None
            if rule.match.matches(pkt):
                aggregate = rule.aggregate
                break
        return ClassifyFlow(PRIO_COUNT, flow_key, self.agg_id(aggregate), self._dscp(aggregate))

    def _dscp(self, aggregate: str) -> int | None:
        # Separate Queues: the ports' queues (bands, HTB classes) select by this DSCP.
        return self.policy.aggregate(aggregate).dscp if self.policy.approaches.separate_queues else None

    # --- trees toward a destination (Separate Paths: one per own-path aggregate) --------

    def tree(self, net: NetworkMap, aggregate: str, dst: HostLocation) -> Tree:
        """Every switch joined to dst's switch and the port it sends `aggregate`'s packets for
        dst out of: the host's own port at its switch, the link toward it elsewhere. Raises
        NoPath if dst's switch is not known."""
        next_hops = self._next_hops(net, aggregate, dst.dpid)
        tree = {dst.dpid: dst.port}
        for dpid, nxt in next_hops.items():
            tree[dpid] = self._graph.edges[dpid, nxt]["ports"][dpid]
        return tree

    def path(self, net: NetworkMap, aggregate: str, src: HostLocation, dst: HostLocation) -> list[Hop]:
        """The hops `aggregate`'s packets take from src to dst: along its tree toward dst."""
        next_hops = self._next_hops(net, aggregate, dst.dpid)
        try:
            switches = planner.walk(next_hops, src.dpid, dst.dpid)
        except KeyError:
            raise NoPath(f"no known links join {src.dpid:#x} and {dst.dpid:#x}") from None
        return net.host_path(src, dst, switches, self._graph)

    def _next_hops(self, net: NetworkMap, aggregate: str, dst_dpid: int) -> planner.NextHops:
        if net.version != self._version:
            self._version, self._graph, self._trees = net.version, net.graph(), {}
        if dst_dpid not in self._graph:
            raise NoPath(f"switch {dst_dpid:#x} is not known")
        if dst_dpid not in self._trees:
            # The shared tree, and under Separate Paths one per own-path aggregate.
            trees = {None: planner.next_hops_toward(self._graph, dst_dpid)}
            trees.update(planner.aggregate_trees(self._graph, dst_dpid, self._own_path))
            self._trees[dst_dpid] = trees
        trees = self._trees[dst_dpid]
        return trees.get(aggregate, trees[None])

    # --- what each hop does -------------------------------------------------------

    def tree_flows(self, aggregate: str, dst_ip: str, tree: Tree,
                   port_states: Mapping[PortRef, PortState]) -> list[HopFlow]:
        return [self.hop_flow(aggregate, dst_ip, dpid, out_port, port_states.get((dpid, out_port)))
                for dpid, out_port in sorted(tree.items())]

    def hop_flow(self, aggregate: str, dst_ip: str, dpid: int, out_port: int,
                 out_state: PortState | None) -> HopFlow:
        """The flow of one switch toward dst: the aggregate's meter if it leaves by a Limited
        Queue port, its queue if it leaves by a Separate Queues port served by OVSDB queues
        (other backends classify by the DSCP that table 0 marked)."""
        out = (dpid, out_port)
        queue = None
        backend = out_state.queue_backend if out_state else None
        if out in self._queue_plans and self.policy.approaches.separate_queues and backend == "ovsdb-queue":
            # From the plan of this policy, not from the port's last state.
            queue = self._queue_plans[out].class_of(aggregate).index
        return HopFlow(dpid, PRIO_PATH if aggregate == DEFAULT else PRIO_AGG_PATH, self.agg_id(aggregate),
                       dst_ip, out_port, self._meter_ids.get((*out, aggregate)), queue)
