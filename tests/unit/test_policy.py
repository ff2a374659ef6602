"""The policy document: validation names the field, classification follows precedence."""

import pytest

from coex.policy import Policy, PolicyError, Problem


def bulk_rule(**over):
    rule = {"name": "bulk", "aggregate": "queue_filling", "priority": 10,
            "match": {"ipv4_src": "10.0.0.1", "ip_proto": 6, "tp_dst": 5201}}
    rule.update(over)
    return rule


def test_defaults_have_the_four_aggregates():
    p = Policy.from_dict({})
    assert [a.name for a in p.aggregates] == ["default", "low_delay", "penalized", "queue_filling"]
    assert p.aggregate("low_delay").dscp == 46
    assert not p.approaches.separate_paths and not p.approaches.limited_queue.enabled


def test_round_trip_keeps_the_document():
    doc = {"rules": [bulk_rule()], "approaches": {"limited_queue": {"enabled": True, "fraction": 0.4}},
           "ports": [{"dpid": 1, "port": 3, "capacity_bps": 50_000_000,
                      "aqm": {"discipline": "ckcd", "params": {"limit": 80}}}]}
    p = Policy.from_dict(doc)
    assert Policy.from_dict(p.to_dict()) == p
    assert p.ports[0].aqm.spec() == "ckcd limit=80"
    assert p.ports[0].aqm.spec(50_000_000) == "ckcd limit=80 rate_bps=50000000"
    assert p.rules[0].match.ipv4_src == "10.0.0.1/32"


def test_classify_takes_the_highest_priority_match():
    p = Policy.from_dict({"rules": [
        bulk_rule(),
        {"name": "voice", "aggregate": "low_delay", "priority": 20, "match": {"ipv4_src": "10.0.0.0/24",
                                                                            "dscp": 46}},
    ]})
    pkt = {"ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.3", "ip_proto": 6, "tp_src": 40000,
           "tp_dst": 5201, "dscp": 0}
    assert p.classify(pkt) == "queue_filling"
    assert p.classify({**pkt, "dscp": 46}) == "low_delay"
    assert p.classify({**pkt, "tp_dst": 80}) == "default"
    assert p.classify({**pkt, "ipv4_src": "10.0.0.2"}) == "default"


@pytest.mark.parametrize("doc,field", [
    ({"rules": [bulk_rule(match={"tp_dst": 70000, "ip_proto": 6})]}, "rules[0].match.tp_dst"),
    ({"rules": [bulk_rule(match={"tp_dst": "80", "ip_proto": 6})]}, "rules[0].match.tp_dst"),
    ({"rules": [bulk_rule(match={"tp_dst": 80})]}, "rules[0].match.ip_proto"),
    ({"rules": [bulk_rule(match={"ipv4_src": "10.0.0.300"})]}, "rules[0].match.ipv4_src"),
    ({"rules": [bulk_rule(match={"vlan": 3})]}, "rules[0].match.vlan"),
    ({"rules": [bulk_rule(aggregate="nosuch")]}, "rules[0].aggregate"),
    ({"rules": [bulk_rule(name="Bad Name")]}, "rules[0].name"),
    ({"rules": [bulk_rule(priority=True)]}, "rules[0].priority"),
    ({"rules": "all"}, "rules"),
    ({"approaches": {"limited_queue": {"fraction": 1.5}}}, "approaches.limited_queue.fraction"),
    ({"approaches": {"separate_paths": "yes"}}, "approaches.separate_paths"),
    ({"ports": [{"dpid": 1, "port": 3}]}, "ports[0].capacity_bps"),
    ({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 0}]}, "ports[0].capacity_bps"),
    ({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 10**7, "aqm": {"discipline": "nosuch"}}]},
     "ports[0].aqm.discipline"),
    ({"aggregates": {"low_delay": {"queue_weight": 0}}}, "aggregates.low_delay.queue_weight"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_documents_name_the_field(doc, field):
    with pytest.raises(PolicyError) as err:
        Policy.from_dict(doc)
    assert err.value.field == field
    assert err.value.kind in Problem


def test_meter_rate_above_port_capacity_is_refused():
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 10_000_000}],
                          "approaches": {"limited_queue": {"enabled": True, "rate_bps": 20_000_000}}})
    assert err.value.field == "approaches.limited_queue.rate_bps"


def test_overlapping_rules_with_different_aggregates_conflict():
    a = bulk_rule()
    b = {"name": "web", "aggregate": "low_delay", "priority": 10, "match": {"ipv4_dst": "10.0.0.0/8"}}
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"rules": [a, b]})
    assert err.value.kind is Problem.CONFLICT and err.value.field == "rules[1].match"
    # A different priority resolves it, and so does a disjoint match.
    Policy.from_dict({"rules": [a, {**b, "priority": 11}]})
    Policy.from_dict({"rules": [a, {**b, "match": {"ipv4_src": "10.0.1.0/24"}}]})


def test_duplicate_rule_names_conflict():
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"rules": [bulk_rule(), bulk_rule(priority=3)]})
    assert err.value.kind is Problem.CONFLICT


def test_edited_validates_and_leaves_the_original_alone():
    p = Policy.from_dict({"rules": [bulk_rule()]})
    with pytest.raises(PolicyError):
        p.edited(lambda d: d["rules"].append({"name": "x"}))
    assert len(p.rules) == 1
    q = p.edited(lambda d: d["approaches"].update(separate_paths=True))
    assert q.approaches.separate_paths and not p.approaches.separate_paths


def test_the_default_policy_equals_its_round_trip():
    assert Policy.from_dict(Policy().to_dict()) == Policy()


PORT_10M = {"dpid": 1, "port": 3, "capacity_bps": 10_000_000}


@pytest.mark.parametrize("doc,field", [
    # str.isdigit() takes superscript two, int() does not: was a ValueError, not a PolicyError
    ({"heavy_hitters": {"collector": "\u00b2:\u00b2"}}, "heavy_hitters.collector"),
    ({"heavy_hitters": {"collector": "127.0.0.1:\u0666\u0663\u0664\u0663"}}, "heavy_hitters.collector"),
    ({"heavy_hitters": {"collector": "127.0.0.1:+6343"}}, "heavy_hitters.collector"),
    ({"heavy_hitters": {"collector": "host name:6343"}}, "heavy_hitters.collector"),
    ({"heavy_hitters": {"sflow_rt_url": "http://127.0.0.1:8008\n"}}, "heavy_hitters.sflow_rt_url"),
    # "$" also matches before a trailing newline; names and MACs end up in flows and specs
    ({"rules": [bulk_rule(name="bulk\n")]}, "rules[0].name"),
    ({"rules": [bulk_rule(match={"eth_src": "00:00:00:00:00:01\n"})]}, "rules[0].match.eth_src"),
    ({"ports": [{**PORT_10M, "aqm": {"discipline": "red", "params": {"limit\n": 5}}}]},
     "ports[0].aqm.params.limit\n"),
])
def test_text_fields_take_only_what_they_say(doc, field):
    with pytest.raises(PolicyError) as err:
        Policy.from_dict(doc)
    assert err.value.field == field and err.value.kind is Problem.INVALID


def test_aqm_rate_above_port_capacity_is_refused():
    aqm = {"discipline": "ckcd", "params": {"rate_bps": 10_000_001, "rtt_ms": 20}}
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"ports": [PORT_10M, {**PORT_10M, "port": 4, "aqm": aqm}]})
    assert err.value.field == "ports[1].aqm.params.rate_bps" and err.value.kind is Problem.CONFLICT  # two fields: 409
    Policy.from_dict({"ports": [{**PORT_10M, "aqm": {**aqm, "params": {"rate_bps": 10_000_000}}}]})


def test_heavy_hitter_threshold_above_every_port_is_refused():
    """A port's detector sees only flows leaving that port: none is faster than the port."""
    ports = [PORT_10M, {**PORT_10M, "port": 4, "capacity_bps": 100_000_000}]
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"ports": ports, "heavy_hitters": {"threshold_bps": 100_000_001}})
    assert err.value.field == "heavy_hitters.threshold_bps" and err.value.kind is Problem.CONFLICT  # two fields: 409
    # Above one port but not the other: it still applies to the wider one.
    Policy.from_dict({"ports": ports, "heavy_hitters": {"enabled": True, "threshold_bps": 100_000_000}})
    # Without ports there is nothing to compare with (detection cannot be enabled then).
    Policy.from_dict({"heavy_hitters": {"threshold_bps": 10**9}})
    # A port shrinking below the threshold is refused the same way.
    p = Policy.from_dict({"ports": ports, "heavy_hitters": {"threshold_bps": 50_000_000}})
    with pytest.raises(PolicyError) as err:
        p.edited(lambda d: d["ports"].pop(1))
    assert err.value.field == "heavy_hitters.threshold_bps"


def test_mode_detector_with_sflow_rt_is_refused():
    """sFlow-RT gives rates, not samples: the mode-of-history never names a flow."""
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"heavy_hitters": {"source": "sflow-rt", "detector": "mode"}})
    assert err.value.field == "heavy_hitters.detector" and err.value.kind is Problem.CONFLICT  # two fields: 409
    Policy.from_dict({"heavy_hitters": {"source": "sflow-rt", "detector": "rate"}})
    Policy.from_dict({"heavy_hitters": {"source": "embedded", "detector": "mode"}})


@pytest.mark.parametrize("text,value", [
    ("66", 66), ("0x42", 66), ("0X42", 66), ("0", 0),
    ("\u00b2", None), ("\u0661\u0662", None), ("+5", None), (" 5", None), ("5\n", None), ("1_0", None),
    ("", None), ("0x", None), ("0x1g", None), ("1" * 21, None),
])
def test_parse_uint_takes_ascii_digits_only(text, value):
    from coex.policy import parse_uint
    assert parse_uint(text, hex_ok=True) == value
