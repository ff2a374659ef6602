"""Both directions loaded and a ping per RTT group, without a lab: which flows are reverse, the
reverse direction's discipline, which host pairs get a ping, and how the metrics keep the two
directions apart (the lab test is test_reverse_lab.py)."""

from __future__ import annotations

import pytest

from experiments.analysis.metrics import _group_ping_metrics, _reverse_metrics
from experiments.scenario.catalog import parse_scenario
from experiments.scenario.link_models import daemon_options
from experiments.scenario.model import ScenarioError

BASE = {"name": "t", "topology": "dumbbell", "duration_s": 10, "disciplines": ["ckcd"],
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}}


def scenario(flows, **over):
    return parse_scenario({**BASE, "flows": flows, **over}, "t.toml")


def test_a_flow_from_the_receivers_side_is_reverse_and_both_ends_must_be_on_opposite_sides():
    """Rule: src on the receivers' side makes a reverse flow; a flow whose two ends are on one
    side is refused naming dst; a reverse flow takes no aggregate and no MPTCP."""
    s = scenario([{"src": "h1", "dst": "h3", "cc": "cubic"}, {"src": "h4", "dst": "h2", "cc": "bbr"}])
    assert [(f.src, f.dst, f.reverse) for f in s.flows] == [("h1", "h3", False), ("h4", "h2", True)]
    assert s.has_reverse_flows
    for flow, key in (({"src": "h3", "dst": "h4"}, "flows[0].dst"), ({"src": "h1", "dst": "h2"}, "flows[0].dst"),
                      ({"src": "h3", "dst": "h1", "aggregate": "low_delay"}, "flows[0].aggregate"),
                      ({"src": "h3", "dst": "h1", "mptcp": True}, "flows[0].mptcp")):
        with pytest.raises(ScenarioError, match=key.replace("[", r"\[").replace("]", r"\]")):
            scenario([{"cc": "cubic", **flow}])


def test_the_reverse_direction_runs_the_cases_discipline_only_when_flows_are_sent_back():
    """Rule: with reverse flows the reverse direction gets the case's discipline at its own
    rate and buffer ([link.reverse], else the forward's); without, ckcd-link's droptail (or
    [link.reverse]'s buffer as droptail) as before."""
    link = {**BASE["link"], "reverse": {"rate_mbps": 10, "buffer_pkts": 40}}
    back = scenario([{"src": "h1", "dst": "h3", "cc": "cubic"}, {"src": "h3", "dst": "h1", "cc": "cubic"}], link=link)
    spec = back.reverse_qdisc_spec("ckcd")
    assert spec.startswith("ckcd limit=40 ") and "rate_bps=10000000" in spec
    assert daemon_options(back.link, spec)["qdisc_ba"] == spec
    forward = scenario([{"src": "h1", "dst": "h3", "cc": "cubic"}], link=link)
    assert not forward.has_reverse_flows
    assert daemon_options(forward.link)["qdisc_ba"] == "droptail limit=40"
    # what the core refuses at the reverse direction's buffer is refused when the file is read
    with pytest.raises(ScenarioError, match="reverse direction"):
        scenario([{"src": "h1", "dst": "h3", "cc": "cubic"}, {"src": "h3", "dst": "h1", "cc": "cubic"}],
                 disciplines=["red"], discipline_params={"red": {"min": 50, "max": 60}},
                 link={**BASE["link"], "reverse": {"buffer_pkts": 40}})


def test_per_rtt_group_pings_the_first_forward_flows_hosts_of_every_other_base_rtt():
    """Rule: one ping per base RTT of the forward flows other than the main ping's own, between
    the first such flow's hosts; reverse flows add none; without per_rtt_group there are none."""
    flows = [{"src": "h1", "dst": "h4", "cc": "cubic"}, {"src": "h2", "dst": "h5", "cc": "cubic"},
             {"src": "h3", "dst": "h6", "cc": "cubic"}, {"src": "h2", "dst": "h6", "cc": "bbr"},
             {"src": "h6", "dst": "h3", "cc": "cubic"}]
    over = {"hosts_per_side": 3, "access_delay_ms": {"h2": 15, "h3": 40, "h6": 5}}
    s = scenario(flows, ping={"src": "h1", "dst": "h4", "per_rtt_group": True}, **over)
    # h1>h4 20 ms (the main ping's), h2>h5 50 ms, h3>h6 110 ms, h2>h6 60 ms; h6>h3 is reverse
    assert s.group_pings() == [("h2", "h5"), ("h3", "h6"), ("h2", "h6")]
    assert scenario(flows, ping={"src": "h1", "dst": "h4"}, **over).group_pings() == []


def _flow(label: str, mbps: float, reverse: bool) -> dict:
    return {"label": label, "cc": "cubic", "mean_mbps": mbps, "reverse": reverse, "goodput_source": "tcp_info",
            "rtt_class": "20 ms RTT", "srtt_ms": {"mean": 20.0}, "min_rtt_ms": 20.0}


def test_reverse_flows_have_their_own_fairness_and_utilization_over_the_reverse_rate():
    """Rule: the reverse block is over the reverse flows alone and the reverse direction's
    rate times the links; no reverse flows, no block."""
    s = scenario([{"src": "h1", "dst": "h3", "cc": "cubic"}, {"src": "h3", "dst": "h1", "cc": "cubic"},
                  {"src": "h4", "dst": "h2", "cc": "cubic"}],
                 link={**BASE["link"], "reverse": {"rate_mbps": 10}})
    r = _reverse_metrics([_flow("a", 6.0, True), _flow("b", 3.0, True)], s, 1)
    assert r["flows"] == 2 and r["total_mbps"] == 9.0 and r["capacity_mbps"] == 10.0
    assert r["utilization"] == pytest.approx(0.9) and r["jain"] == pytest.approx(81 / 90)
    assert _reverse_metrics([], s, 1) is None


def test_a_group_pings_rtt_is_checked_against_its_own_base_rtt_and_its_own_queueing():
    """Rule: an RTT group's ping is explained by 2 x the link delay, its hosts' access delays
    and what its own frames waited in the link (their per-flow sojourn); 8 ms more than that
    untrusts the run with a reason naming the ping, 1 ms more does not."""
    s = scenario([{"src": "h1", "dst": "h3", "cc": "cubic"}, {"src": "h2", "dst": "h4", "cc": "cubic"}],
                 access_delay_ms={"h2": 20}, ping={"src": "h1", "dst": "h3", "per_rtt_group": True})
    link = {"ping_queue_delay_ms": 0.0, "queue_delay_ms": {"mean": 3.0}, "intended_late_rtt_ms": 0.0}
    # h2>h4's echo requests waited 2 ms in total, its replies 0: its own queueing is 2 ms
    record = {"group_ping_sojourn": {"h2>h4": [[5.0, "ab", 10, 20000.0], [5.0, "ba", 10, 0.0]]}}
    cpu = {"steal_mean_pct": 0.0}
    for excess_ms, untrusted in ((1.0, False), (8.0, True)):
        series = [[t, 40.0 + 2.0 + excess_ms] for t in range(2, 9)]
        m = _group_ping_metrics({"src": "h2", "dst": "h4", "series": series}, s, {"l0": record}, {"l0": link},
                                cpu, 0.0, 10.0)
        assert m["base_rtt_ms"] == 40.0 and m["rtt_class"] == "40 ms RTT"
        assert m["rtt_unexplained_ms"] == pytest.approx(excess_ms, abs=0.05)
        assert bool(m["reasons"]) == untrusted and all(r.startswith("ping h2→h4: ") for r in m["reasons"])
