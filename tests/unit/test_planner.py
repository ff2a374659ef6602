"""Plans from policy: forwarding trees and disjoint paths per aggregate (Separate Paths,
Hock et al.), meters, queues."""

import itertools

import networkx as nx

from coex.planner import aggregate_trees, meter_plans, next_hops_toward, queue_plan, walk
from coex.policy import Policy
from coex.topology import NetworkMap


def two_paths() -> nx.Graph:
    return nx.Graph([(1, 2), (2, 4), (1, 3), (3, 4)])


def paths(graph: nx.Graph, src: int, dst: int, aggregates: list[str]) -> dict[str, list[int]]:
    return {agg: walk(tree, src, dst) for agg, tree in aggregate_trees(graph, dst, aggregates).items()}


def test_two_aggregates_get_edge_disjoint_paths():
    assert paths(two_paths(), 1, 4, ["low_delay", "queue_filling"]) == {"low_delay": [1, 2, 4],
                                                                       "queue_filling": [1, 3, 4]}
    # and back: the trees toward s1 split the same way
    assert paths(two_paths(), 4, 1, ["low_delay", "queue_filling"]) == {"low_delay": [4, 2, 1],
                                                                       "queue_filling": [4, 3, 1]}


def test_three_aggregates_on_two_paths_share_least():
    got = paths(two_paths(), 1, 4, ["a", "b", "c"])
    assert got["a"] != got["b"]
    assert got["c"] in (got["a"], got["b"])  # no third disjoint path: reuse one


def test_longer_disjoint_path_is_used_rather_than_sharing():
    g = nx.Graph([(1, 2), (2, 9), (1, 3), (3, 4), (4, 5), (5, 9)])
    assert paths(g, 1, 9, ["low_delay", "queue_filling"]) == {"low_delay": [1, 2, 9],
                                                              "queue_filling": [1, 3, 4, 5, 9]}


def test_without_a_second_path_both_share_the_only_one():
    g = nx.Graph([(1, 2)])
    assert paths(g, 1, 2, ["a", "b"]) == {"a": [1, 2], "b": [1, 2]}


def test_the_shared_tree_gives_every_source_the_maps_shortest_path():
    """Keyed on the destination, a switch forwards all packets for it one way: the tree's
    walk from any source must be the deterministic shortest path of NetworkMap (lowest
    dpid sequence), so forwarding per destination changes no path the pair flows took."""
    graph = nx.random_regular_graph(3, 12, seed=7)
    net = NetworkMap()
    for a, b in graph.edges:
        net.add_link((a, 100 + b), (b, 100 + a), now=0.0)
    for dst in graph:
        tree = next_hops_toward(graph, dst)
        assert set(tree) == set(graph) - {dst}
        for src in tree:
            assert walk(tree, src, dst) == net.switch_path(src, dst), (src, dst)


def test_trees_reach_only_the_switches_joined_to_the_destination():
    graph = nx.Graph([(1, 2), (3, 4)])
    assert next_hops_toward(graph, 1) == {2: 1}
    assert list(itertools.chain(*(aggregate_trees(graph, 4, ["a", "b"]).values()))) == [3, 3]


def test_meter_at_half_capacity_with_burst_from_rate():
    p = Policy.from_dict({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 40_000_000}],
                          "approaches": {"limited_queue": {"enabled": True}}})
    [m] = meter_plans(p)
    assert (m.dpid, m.port, m.meter_id, m.aggregate) == (1, 3, 1, "queue_filling")
    assert m.rate_kbps == 20_000
    assert m.burst_kbit == 5_000  # 250 ms at 20 Mbit/s: the burst that held TCP at the rate


def test_meter_burst_never_below_one_megabit():
    p = Policy.from_dict({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 2_000_000}],
                          "approaches": {"limited_queue": {"enabled": True, "burst_ms": 10}}})
    assert meter_plans(p)[0].burst_kbit == 1000


def test_meter_burst_covers_two_round_trips_of_a_long_path():
    p = Policy.from_dict({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 100_000_000}],
                          "approaches": {"limited_queue": {"enabled": True, "rtt_ms": 300}}})
    [m] = meter_plans(p)
    assert m.rate_kbps == 50_000 and m.burst_kbit == 30_000  # 2 x 300 ms at 50 Mbit/s
    short = Policy.from_dict({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 100_000_000}],
                              "approaches": {"limited_queue": {"enabled": True, "rtt_ms": 40}}})
    assert meter_plans(short)[0].burst_kbit == 12_500  # 2 x 40 ms is below the 250 ms floor


def test_no_meters_when_limited_queue_is_off():
    p = Policy.from_dict({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 40_000_000}]})
    assert meter_plans(p) == []


def test_queue_shares_follow_weights_and_may_borrow_everything():
    p = Policy.from_dict({"aggregates": {"low_delay": {"queue_weight": 1}, "queue_filling": {"queue_weight": 3},
                                         "default": {"queue_weight": 1}, "penalized": {"queue_weight": 1}},
                          "ports": [{"dpid": 1, "port": 3, "capacity_bps": 60_000_000}]})
    plan = queue_plan(p, p.ports[0])
    assert plan.class_of("default").index == 0 == plan.default_index
    assert plan.class_of("low_delay").rate_bps == 10_000_000
    assert plan.class_of("queue_filling").rate_bps == 30_000_000
    assert all(c.ceil_bps == 60_000_000 for c in plan.classes)
    assert len({c.index for c in plan.classes}) == 4
