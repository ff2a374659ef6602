"""coex.forwarding.ForwardingPlan: what forwarding the CoEx approaches (Hock et al., CoEx)
ask of table 0 and of every hop, decided without a switch."""

from coex.forwarding import (PRIO_AGG_PATH, PRIO_DEFAULT_MARK, PRIO_PATH, PRIO_RULE_BASE, ForwardingPlan,
                             aggregate_ids)
from coex.policy import Policy
from coex.ports import PortState
from coex.sflow import FlowKey
from coex.topology import Hop, NetworkMap

# The two-path testbed: h1 at s1 port 1, h3 at s4 port 1; s1 -3/1- s2 -2/3- s4 and
# s1 -4/1- s3 -2/4- s4 (dpid, port at each end).
TWO_PATH_LINKS = [(1, 3, 2, 1), (2, 2, 4, 3), (1, 4, 3, 1), (3, 2, 4, 4)]
BOTTLENECK = {"dpid": 1, "port": 3, "capacity_bps": 40_000_000}


def two_path_net() -> NetworkMap:
    net = NetworkMap()
    for a, pa, b, pb in TWO_PATH_LINKS:
        net.add_link((a, pa), (b, pb), now=0.0)
        net.add_port(a, pa)
        net.add_port(b, pb)
    for dpid in (1, 4):
        net.add_port(dpid, 1)
    net.learn_host("00:00:00:00:00:01", "10.0.0.1", 1, 1, now=0.0)
    net.learn_host("00:00:00:00:00:03", "10.0.0.3", 4, 1, now=0.0)
    return net


def plan_for(**approaches) -> ForwardingPlan:
    return ForwardingPlan(Policy.from_dict({"ports": [BOTTLENECK], "approaches": approaches}))


def path(plan: ForwardingPlan, net: NetworkMap, aggregate: str) -> list[Hop]:
    return plan.path(net, aggregate, net.host_by_ip("10.0.0.1"), net.host_by_ip("10.0.0.3"))


def switches(hops: list[Hop]) -> list[int]:
    return [h.dpid for h in hops]


# --- Separate Paths ----------------------------------------------------------------------

def test_separate_paths_gives_two_aggregates_disjoint_paths():
    net, plan = two_path_net(), plan_for(separate_paths=True)
    assert switches(path(plan, net, "low_delay")) == [1, 2, 4]
    assert switches(path(plan, net, "queue_filling")) == [1, 3, 4]
    assert path(plan, net, "queue_filling") == [Hop(1, 1, 4), Hop(3, 1, 2), Hop(4, 4, 1)]


def test_separate_paths_leaves_aggregates_without_own_path_on_the_shortest():
    net, plan = two_path_net(), plan_for(separate_paths=True)
    assert switches(path(plan, net, "default")) == switches(path(plan, net, "penalized")) == [1, 2, 4]


def test_without_separate_paths_every_aggregate_shares_the_shortest_path():
    net, plan = two_path_net(), plan_for()
    assert {tuple(switches(path(plan, net, a))) for a in ("low_delay", "queue_filling")} == {(1, 2, 4)}


def test_separate_paths_is_planned_once_per_topology_and_replanned_when_it_changes():
    net, plan = two_path_net(), plan_for(separate_paths=True)
    graphs = []
    build = net.graph
    net.graph = lambda *a: graphs.append(1) or build(*a)
    for t in range(50):  # packet-ins of an unchanged network, LLDP refreshing its links
        path(plan, net, "queue_filling")
        net.add_link((1, 3), (2, 1), now=float(t))
    assert len(graphs) == 1
    net.remove_port(3, 2)  # the link s3-s4 goes down: queue_filling shares the survivor
    assert switches(path(plan, net, "queue_filling")) == [1, 2, 4]
    assert len(graphs) == 2


# --- Limited Queue -----------------------------------------------------------------------

def tree_flows(plan: ForwardingPlan, net: NetworkMap, aggregate: str, dst_ip: str = "10.0.0.3"):
    return plan.tree_flows(aggregate, dst_ip, plan.tree(net, aggregate, net.host_by_ip(dst_ip)), {})


def test_limited_queue_meters_the_aggregate_on_the_hop_that_leaves_by_the_port():
    net, plan = two_path_net(), plan_for(limited_queue={"enabled": True})
    [meter] = plan.meters
    flows = tree_flows(plan, net, "queue_filling")
    # Toward h3 (s4 port 1): s1 leaves by the bottleneck port 3 (metered), s2 and s3 by
    # their links to s4, s4 by h3's port.
    assert [(f.dpid, f.out_port, f.meter_id) for f in flows] == [(1, 3, meter.meter_id), (2, 2, None),
                                                                  (3, 2, None), (4, 1, None)]


def test_limited_queue_leaves_other_aggregates_unmetered():
    net, plan = two_path_net(), plan_for(limited_queue={"enabled": True})
    for agg in ("low_delay", "default"):
        assert [f.meter_id for f in tree_flows(plan, net, agg)] == [None, None, None, None]


# --- Separate Queues -----------------------------------------------------------------------

def bottleneck_flow(plan: ForwardingPlan, aggregate: str, backend: str | None):
    state = PortState(name="s1-eth3", queue_backend=backend)
    return plan.hop_flow(aggregate, "10.0.0.3", 1, 3, state)


def test_separate_queues_with_ovsdb_queues_sends_the_hop_into_the_aggregates_queue():
    plan = plan_for(separate_queues=True)
    indexes = {a: bottleneck_flow(plan, a, "ovsdb-queue").queue_index
               for a in ("default", "low_delay", "penalized", "queue_filling")}
    assert indexes["default"] == 0 and len(set(indexes.values())) == 4


def test_separate_queues_elsewhere_classifies_by_dscp_not_set_queue():
    # tc-htb and ckcd-link classify the DSCP table 0 marked; set_queue is lost in userspace.
    for backend in ("tc-htb", "ckcd-link", None):
        assert bottleneck_flow(plan_for(separate_queues=True), "low_delay", backend).queue_index is None
    assert bottleneck_flow(plan_for(), "low_delay", "ovsdb-queue").queue_index is None
    off_policy_port = plan_for(separate_queues=True).hop_flow(
        "low_delay", "10.0.0.3", 2, 2, PortState(queue_backend="ovsdb-queue"))
    assert off_policy_port.queue_index is None


# --- aggregates and their flows ---------------------------------------------------------------

def test_aggregate_ids_follow_the_policys_order_and_default_is_zero():
    policy = Policy.from_dict({})
    ids = aggregate_ids(policy)
    names = [a.name for a in policy.aggregates if a.name != "default"]
    assert list(ids) == names and list(ids.values()) == [1, 2, 3]
    plan = ForwardingPlan(policy)
    assert plan.agg_id("default") == 0
    assert all(plan.aggregate_of(i) == name for name, i in ids.items())
    assert plan.aggregate_of(0) == plan.aggregate_of(99) == "default"  # no rule matched


def test_the_default_path_sits_below_the_aggregates_paths():
    plan = plan_for()
    default, other = (bottleneck_flow(plan, a, None) for a in ("default", "low_delay"))
    assert (default.priority, default.agg_id) == (PRIO_PATH, 0)
    assert (other.priority, other.agg_id) == (PRIO_AGG_PATH, plan.agg_id("low_delay"))
    assert PRIO_AGG_PATH > PRIO_PATH


# --- table 0: which aggregate a packet joins -----------------------------------------------------

RULES = [{"name": "bulk", "aggregate": "queue_filling", "priority": 5, "match": {"ip_proto": 6, "tp_dst": 5201}},
         {"name": "voip", "aggregate": "default", "match": {"ip_proto": 17}}]


def classify_plan(**approaches) -> ForwardingPlan:
    return ForwardingPlan(Policy.from_dict({"rules": RULES, "approaches": approaches}))


def test_separate_queues_marks_each_rules_aggregate_dscp_and_unclassified_ipv4_the_defaults():
    plan = classify_plan(separate_queues=True)
    dscp = {a.name: a.dscp for a in plan.policy.aggregates}
    by_prio = {f.priority: f for f in plan.classify_flows()}
    bulk, voip, unclassified = by_prio[PRIO_RULE_BASE + 5], by_prio[PRIO_RULE_BASE], by_prio[PRIO_DEFAULT_MARK]
    assert (bulk.agg_id, bulk.dscp) == (plan.agg_id("queue_filling"), dscp["queue_filling"])
    assert (voip.agg_id, voip.dscp) == (0, dscp["default"])
    assert (unclassified.match, unclassified.agg_id, unclassified.dscp) == (None, None, dscp["default"])
    assert bulk.match.tp_dst == 5201


def test_without_separate_queues_table_0_only_names_the_aggregate():
    flows = classify_plan().classify_flows()
    assert len(flows) == len(RULES) and all(f.dscp is None for f in flows)
    assert sorted(f.agg_id for f in flows) == [0, classify_plan().agg_id("queue_filling")]


def test_a_heavy_hitter_joins_the_penalized_aggregate_above_every_rule():
    key = FlowKey("10.0.0.1", "10.0.0.3", 6, 43210, 5201)
    for approaches, marked in (({}, False), ({"separate_queues": True}, True)):
        plan = classify_plan(**approaches)
        steer = plan.steer_flow(key)
        assert steer.match == key and steer.agg_id == plan.agg_id("penalized")
        assert steer.priority > PRIO_RULE_BASE + 1000  # above the highest rule priority a policy may set
        assert (steer.dscp == plan.policy.aggregate("penalized").dscp) if marked else steer.dscp is None
