"""coex.switch_state: what a switch should hold as data, and the smallest change that takes it
there - decided without a switch, as Faucet's valve decides its flow-mods."""

from coex.forwarding import DEFAULT, ForwardingPlan
from coex.policy import PacketIn, Policy
from coex.sflow import FlowKey
from coex.switch_state import (COOKIE, COUNT_COOKIE, PACKET_IN_METER_ID, TABLE_CLASSIFY, TABLE_FORWARD, Delta,
                               Flow, Hop, Meter, SwitchState, desired, diff, hop_of, prefix_mask, rule_match)

BOTTLENECK = {"dpid": 1, "port": 3, "capacity_bps": 40_000_000}
RULE = {"name": "bulk", "aggregate": "queue_filling", "priority": 10, "match": {"ipv4_src": "10.0.0.1/32", "ip_proto": 6}}
TREES = {(DEFAULT, "10.0.0.3"): {1: 3, 2: 2, 4: 1}, ("queue_filling", "10.0.0.3"): {1: 3, 2: 2, 4: 1},
         (DEFAULT, "10.0.0.1"): {4: 3, 2: 1, 1: 1}}
HEAVY = FlowKey("10.0.0.1", "10.0.0.3", 6, 40000, 5201)


def policy(rules=(RULE,), **approaches) -> Policy:
    return Policy.from_dict({"ports": [BOTTLENECK], "rules": list(rules), "approaches": approaches})


def state(pol: Policy, dpid: int = 1, trees=TREES, **kw) -> SwitchState:
    return desired(ForwardingPlan(pol), pol.packet_in, dpid, trees, **kw)


def kinds(delta: Delta) -> dict[str, int]:
    return {k: len(v) for k, v in vars(delta).items() if v}


def test_an_unchanged_switch_gets_nothing():
    """Rule: a reconnect, a restart or a policy edit that leaves a switch's state as it is
    sends that switch no message at all (no flush, no re-add: flows keep their age and counters)."""
    s = state(policy())
    assert not diff(s, s) and diff(s, s).steps() == []


def test_a_rule_moved_to_another_aggregate_is_modified_in_place_and_nothing_else_moves():
    """Rule: editing one rule changes one table-0 flow's instructions (its metadata), as a
    modify of that flow: hop flows, base flows and meters are not in the delta."""
    old = state(policy())
    new = state(policy([dict(RULE, aggregate="low_delay")]))
    delta = diff(old, new)
    assert kinds(delta) == {"modify_flows": 1}
    [flow] = delta.modify_flows
    assert flow.table == TABLE_CLASSIFY and flow.priority == 1010 and flow.metadata != [
        f for f in old.flows if f.key == flow.key][0].metadata


def test_a_rule_added_or_removed_is_one_add_or_one_strict_delete():
    two = [RULE, {"name": "lan", "aggregate": "low_delay", "priority": 20, "match": {"ipv4_dst": "10.0.1.0/24"}}]
    old, new = state(policy()), state(policy(two))
    added = diff(old, new)
    assert kinds(added) == {"add_flows": 1}
    assert added.add_flows[0].match == (("eth_type", 0x0800), ("ipv4_dst", ("10.0.1.0", "255.255.255.0")))
    removed = diff(new, old)
    assert kinds(removed) == {"delete_flows": 1} and removed.delete_flows == added.add_flows


def test_a_switch_not_on_a_tree_gets_none_of_its_hops():
    """Rule: a switch holds its hop of the trees through it only (switch 3 is on none)."""
    assert not [f for f in state(policy(), dpid=3).flows if f.table == TABLE_FORWARD and f.priority > 0]
    hops = sorted(f for f in state(policy(), dpid=2).flows if f.table == TABLE_FORWARD and f.priority > 0)
    assert [(dict(f.match)["ipv4_dst"], f.actions) for f in hops] == [
        ("10.0.0.1", (("output", 1),)), ("10.0.0.3", (("output", 2),)), ("10.0.0.3", (("output", 2),))]


def test_what_a_switch_lost_or_kept_from_before_is_reconciled():
    """Rule: after a reconnect the switch's own table is the starting point - a hop it lost is
    added again, a hop of a tree that has gone is deleted, the rest stay untouched."""
    wanted = state(policy())
    lost = next(f for f in wanted.flows if f.table == TABLE_FORWARD and f.priority > 0)
    stale = Flow(TABLE_FORWARD, 100, (("eth_type", 0x0800), ("ipv4_dst", "10.0.0.9"), ("metadata", (0, 0xFF))),
                 (("output", 2),))
    held = SwitchState.of((wanted.flows - {lost}) | {stale}, wanted.meters)
    delta = diff(held, wanted)
    assert kinds(delta) == {"delete_flows": 1, "add_flows": 1}
    assert delta.delete_flows == (stale,) and delta.add_flows == (lost,)


def test_steering_and_counting_flows_come_and_go_alone():
    """Rule: a steered heavy hitter is one table-0 flow above every rule; a counted suspect one
    flow with its own cookie and idle timeout; each goes without touching the rest."""
    base = state(policy())
    steered = state(policy(), steered=[HEAVY])
    assert kinds(diff(base, steered)) == {"add_flows": 1}
    assert kinds(diff(steered, base)) == {"delete_flows": 1}
    counted = state(policy(), counted=[HEAVY])
    [count] = diff(base, counted).add_flows
    assert count.cookie == COUNT_COOKIE and count.idle_timeout == 2 and count.priority == 2050


def test_a_flow_whose_cookie_changes_is_replaced_since_a_modify_keeps_the_cookie():
    """Rule: OpenFlow's modify changes instructions only; a different cookie or idle timeout
    (a counting flow where a plain one was) is a delete and an add."""
    plain = Flow(TABLE_CLASSIFY, 2050, (("eth_type", 0x0800),), goto=1, metadata=1)
    counting = Flow(TABLE_CLASSIFY, 2050, (("eth_type", 0x0800),), goto=1, metadata=1, cookie=COUNT_COOKIE,
                    idle_timeout=2)
    delta = diff(SwitchState.of([plain]), SwitchState.of([counting]))
    assert delta.delete_flows == (plain,) and delta.add_flows == (counting,) and not delta.modify_flows


def test_limited_queue_meters_come_before_the_flows_that_use_them():
    """Rule: turning Limited Queue on adds its meters in a step before the hop flows that now
    point at them (a flow-mod naming a meter that does not exist is refused)."""
    old, new = state(policy()), state(policy(limited_queue={"enabled": True}))
    delta = diff(old, new)
    assert delta.add_meters and {f.meter for f in delta.modify_flows} & {m.meter_id for m in delta.add_meters}
    steps = delta.steps()
    meter_step = next(i for i, s in enumerate(steps) if any(c == "add_meter" for c, _ in s))
    for i, s in enumerate(steps):
        for command, value in s:
            if command == "modify_flow" and value.meter in {m.meter_id for m in delta.add_meters}:
                assert i > meter_step, steps


def test_a_flow_lets_go_of_a_meter_before_the_meter_is_deleted():
    """Rule: OpenFlow deletes a meter's flows with it, so lifting the packet-in limit modifies
    table 1's miss flow (no meter) in a step before the meter is deleted - else the miss flow
    would go with the meter and no new flow would reach the controller."""
    limited, free = policy(), Policy.from_dict({"ports": [BOTTLENECK], "rules": [RULE],
                                                "packet_in": {"limit_pps": None}})
    delta = diff(state(limited), state(free))
    assert [m.meter_id for m in delta.delete_meters] == [PACKET_IN_METER_ID]
    steps = delta.steps()
    [miss] = delta.modify_flows
    assert miss.table == TABLE_FORWARD and miss.priority == 0 and miss.meter is None
    where = {command: i for i, s in enumerate(steps) for command, _ in s}
    assert where["modify_flow"] < where["delete_meter"], steps


def test_a_meter_whose_rate_changes_is_modified():
    old = state(policy(limited_queue={"enabled": True}))
    new = state(policy(limited_queue={"enabled": True, "fraction": 0.3}))
    delta = diff(old, new)
    assert kinds(delta) == {"modify_meters": 1}, delta
    assert SwitchState.of(meters=[Meter(1, "kbps", 10, 1)]) != SwitchState.of(meters=[Meter(1, "kbps", 11, 1)])


def test_two_held_flows_of_one_key_leave_only_the_wanted_one():
    """A stale read can show two flows of one key; the one wanted stays, the other goes."""
    want = Flow(TABLE_FORWARD, 100, (("ipv4_dst", "10.0.0.1"),), (("output", 1),))
    other = Flow(TABLE_FORWARD, 100, (("ipv4_dst", "10.0.0.1"),), (("output", 2),), cookie=COOKIE | 7)
    delta = diff(SwitchState.of([want, other]), SwitchState.of([want]))
    assert delta.delete_flows == (other,) and not delta.add_flows and not delta.modify_flows


def test_matches_are_plain_sorted_fields():
    m = rule_match(policy().rules[0].match)
    assert m == (("eth_type", 0x0800), ("ip_proto", 6), ("ipv4_src", "10.0.0.1"))
    assert prefix_mask(24) == "255.255.255.0" and prefix_mask(0) == "0.0.0.0"


def test_the_packet_in_meter_and_base_flows_follow_the_policy():
    s = state(policy())
    assert Meter(PACKET_IN_METER_ID, "pktps", PacketIn().limit_pps, PacketIn().burst) in s.meters
    assert {(f.table, f.priority) for f in s.flows if f.priority in (0, 65000)} == {(0, 0), (0, 65000), (1, 0)}


def test_a_forwarding_flow_says_which_tree_hop_it_is_and_no_other_flow_does():
    """Rule: hop_of reads back what hop_flow wrote (a restarted controller adopts the trees the
    switches hold from it), with or without a meter or queue; base, classification and foreign
    flows are no hop."""
    pol = policy(limited_queue={"enabled": True})
    s, qf = state(pol, dpid=1), ForwardingPlan(pol).agg_id("queue_filling")
    hops = {hop_of(f) for f in s.flows} - {None}
    assert hops == {Hop(0, "10.0.0.3", 3), Hop(qf, "10.0.0.3", 3), Hop(0, "10.0.0.1", 1)}, hops
    assert any(f.meter is not None and hop_of(f) == Hop(qf, "10.0.0.3", 3) for f in s.flows)  # metered, read alike
    foreign = Flow(TABLE_FORWARD, 100, (("ipv4_dst", "10.0.0.3"), ("metadata", (0, 0xFF))), (("output", 3),),
                   cookie=0x1234)
    assert hop_of(foreign) is None
