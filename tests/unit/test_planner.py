"""Plans from policy: disjoint paths per aggregate, meters, queues."""

import networkx as nx

from coex.planner import aggregate_paths, meter_plans, queue_plan
from coex.policy import Policy


def two_paths() -> nx.Graph:
    return nx.Graph([(1, 2), (2, 4), (1, 3), (3, 4)])


def test_two_aggregates_get_edge_disjoint_paths():
    paths = aggregate_paths(two_paths(), 1, 4, ["low_delay", "queue_filling"])
    assert paths == {"low_delay": [1, 2, 4], "queue_filling": [1, 3, 4]}


def test_three_aggregates_on_two_paths_share_least():
    paths = aggregate_paths(two_paths(), 1, 4, ["a", "b", "c"])
    assert paths["a"] != paths["b"]
    assert paths["c"] in (paths["a"], paths["b"])  # no third disjoint path: reuse one


def test_longer_disjoint_path_is_used_rather_than_sharing():
    g = nx.Graph([(1, 2), (2, 9), (1, 3), (3, 4), (4, 5), (5, 9)])
    paths = aggregate_paths(g, 1, 9, ["low_delay", "queue_filling"])
    assert paths == {"low_delay": [1, 2, 9], "queue_filling": [1, 3, 4, 5, 9]}


def test_without_a_second_path_both_share_the_only_one():
    g = nx.Graph([(1, 2)])
    assert aggregate_paths(g, 1, 2, ["a", "b"]) == {"a": [1, 2], "b": [1, 2]}


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
