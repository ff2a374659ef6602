"""From policy and topology to concrete plans: which path each aggregate takes, which meter
sits on which port, which queues a port gets. Pure: graphs and policies in, plans out."""

from __future__ import annotations

import dataclasses

import networkx as nx

from coex.policy import Policy, Port

# Meter bursts. A meter drops what exceeds its bucket, and a TCP flow sends its window as a
# burst at the line rate: to average the meter rate R, Reno/CUBIC's window must reach about
# 4/3 R x RTT (it halves at a loss), so the bucket must hold that much - BURST_RTTS round
# trips of the aggregate at R. Independently of the RTT, our userspace datapath needs
# 250 ms at R (measured at 20 Mbit/s, sub-ms RTT: burst 1000 kbit -> 7 Mbit/s, 5000 -> 19,
# 20000 -> 21): vswitchd forwards in batches. The larger wins; never below the paper's 1 Mbit.
BURST_RTTS = 2.0
DEFAULT_BURST_MS = 250.0
MIN_BURST_KBIT = 1000


def meter_burst_ms(lq) -> float:
    """The burst, as time at the meter rate: the policy's, else the larger of 2 RTTs and 250 ms."""
    return lq.burst_ms if lq.burst_ms is not None else max(DEFAULT_BURST_MS, BURST_RTTS * lq.rtt_ms)


# --- forwarding trees (per destination) and Separate Paths ----------------------------------

NextHops = dict[int, int]  # switch -> the neighbour it forwards to toward the destination


def next_hops_toward(graph: nx.Graph, dst: int, load: dict[frozenset, int] | None = None) -> NextHops:
    """Every switch joined to `dst` and the neighbour it forwards to on its way there.

    Forwarding keyed on the destination needs the paths toward one destination to form a
    tree: a switch forwards every packet for dst the same way, wherever it came from. Costs
    are hops plus, for each link, len(graph) x `load` (how many switches' paths of earlier
    aggregates cross it), so a path that shares fewer loaded links always wins over a
    shorter one that shares more. Each switch takes the cheapest neighbour, the lowest
    dpid on a tie: with no load this is the lowest-dpid-sequence shortest path that
    NetworkMap.switch_path gives, so the tree and the pair paths agree.
    """
    load = load or {}
    heavy = len(graph)

    def cost(a: int, b: int) -> int:
        return 1 + heavy * load.get(frozenset((a, b)), 0)

    dist = nx.single_source_dijkstra_path_length(graph, dst, weight=lambda a, b, _: cost(a, b))
    return {v: min(u for u in graph[v] if u in dist and dist[u] + cost(v, u) == dist[v])
            for v in dist if v != dst}


def walk(next_hops: NextHops, src: int, dst: int) -> list[int]:
    """The switch path from src along a tree toward dst (KeyError: src is not joined)."""
    path = [src]
    while path[-1] != dst:
        path.append(next_hops[path[-1]])
    return path


def aggregate_trees(graph: nx.Graph, dst: int, aggregates: list[str]) -> dict[str, NextHops]:
    """Separate Paths: one tree toward dst per aggregate, in the order given (the first the
    shortest), each avoiding the links the earlier ones load where the graph allows.

    Per destination, not per pair: an aggregate's tree is shared by every source, so the
    paths two aggregates take from one source are edge-disjoint when the graph has room for
    disjoint trees, which a ring or the two-path testbed has; where it has not, the later
    aggregate shares the links fewest earlier paths cross (docs/architecture.md).
    """
    trees: dict[str, NextHops] = {}
    load: dict[frozenset, int] = {}
    for agg in aggregates:
        tree = next_hops_toward(graph, dst, load)
        for src in tree:
            path = walk(tree, src, dst)
            for edge in zip(path, path[1:]):
                load[frozenset(edge)] = load.get(frozenset(edge), 0) + 1
        trees[agg] = tree
    return trees


# --- Limited Queue ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MeterPlan:
    dpid: int
    port: int          # the bottleneck port whose egress the meter limits
    meter_id: int
    aggregate: str
    rate_kbps: int
    burst_kbit: int


def meter_plans(policy: Policy) -> list[MeterPlan]:
    lq = policy.approaches.limited_queue
    if not lq.enabled:
        return []
    plans = []
    next_id: dict[int, int] = {}
    for port in sorted(policy.ports, key=lambda p: (p.dpid, p.port)):
        rate_bps = lq.rate_bps if lq.rate_bps is not None else lq.fraction * port.capacity_bps
        rate_kbps = max(8, int(rate_bps // 1000))
        burst_kbit = max(MIN_BURST_KBIT, int(rate_kbps * meter_burst_ms(lq) / 1000))
        meter_id = next_id.get(port.dpid, 1)
        next_id[port.dpid] = meter_id + 1
        plans.append(MeterPlan(port.dpid, port.port, meter_id, lq.aggregate, rate_kbps, burst_kbit))
    return plans


# --- Separate Queues ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QueueClass:
    aggregate: str
    dscp: int
    weight: int
    index: int         # band number (ckcd-link) / class minor (tc) / queue id (OVSDB)
    rate_bps: int      # guaranteed share: capacity * weight / sum(weights)
    ceil_bps: int      # may borrow up to the whole port: work-conserving


@dataclasses.dataclass(frozen=True)
class QueuePlan:
    dpid: int
    port: int
    capacity_bps: int
    classes: tuple[QueueClass, ...]
    default_index: int  # where unmarked traffic goes: the 'default' aggregate's queue

    def class_of(self, aggregate: str) -> QueueClass:
        return next(c for c in self.classes if c.aggregate == aggregate)


def queue_plan(policy: Policy, port: Port) -> QueuePlan:
    """Every aggregate gets a queue on the port; 'default' is queue 0."""
    aggs = sorted(policy.aggregates, key=lambda a: (a.name != "default", a.name))
    total = sum(a.queue_weight for a in aggs)
    classes = tuple(
        QueueClass(a.name, a.dscp, a.queue_weight, i, port.capacity_bps * a.queue_weight // total,
                   port.capacity_bps)
        for i, a in enumerate(aggs))
    return QueuePlan(port.dpid, port.port, port.capacity_bps, classes, default_index=0)
