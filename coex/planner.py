"""From policy and topology to concrete plans: which path each aggregate takes, which meter
sits on which port, which queues a port gets. Pure: graphs and policies in, plans out."""

from __future__ import annotations

import dataclasses
import itertools

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


# --- Separate Paths -------------------------------------------------------------------

def aggregate_paths(graph: nx.Graph, src: int, dst: int, aggregates: list[str]) -> dict[str, list[int]]:
    """One switch path per aggregate between src and dst, edge-disjoint where the graph allows.

    Aggregates get paths in the order given (the first the shortest). With fewer disjoint
    paths than aggregates, the rest take the path that shares the fewest links with the
    paths already handed out (then the shortest, then the lowest dpids).
    """
    if not aggregates:
        return {}
    if src == dst:
        return {a: [src] for a in aggregates}
    disjoint = sorted((list(p) for p in nx.edge_disjoint_paths(graph, src, dst)),
                      key=lambda p: (len(p), p))
    paths: dict[str, list[int]] = {}
    used: dict[frozenset, int] = {}
    for agg in aggregates:
        if disjoint:
            path = disjoint.pop(0)
        else:
            path = min(_simple_paths(graph, src, dst),
                       key=lambda p: (sum(used.get(frozenset(e), 0) for e in zip(p, p[1:])), len(p), p))
        for edge in zip(path, path[1:]):
            used[frozenset(edge)] = used.get(frozenset(edge), 0) + 1
        paths[agg] = path
    return paths


def _simple_paths(graph: nx.Graph, src: int, dst: int, limit: int = 64):
    """Up to `limit` loop-free paths, shortest first (enough for lab topologies)."""
    return list(itertools.islice(nx.shortest_simple_paths(graph, src, dst), limit))


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
