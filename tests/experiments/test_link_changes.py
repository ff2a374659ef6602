"""[[link_changes]]: the bottleneck's rate or delay changed during a run (seed 002, Figs. 4-6:
the bandwidth halved or doubled at 30 s), without a lab: parsing and its refusals, scaling with
--duration, and utilization measured against the rate the link had over the window."""

import pytest

from experiments.analysis.metrics import _mean_rate_bps
from experiments.scenario.model import ScenarioError
from experiments.scenario.catalog import parse_scenario, resolve

BASE = {"name": "t", "topology": "dumbbell", "duration_s": 60, "disciplines": ["cocoa"],
        "link": {"rate_mbps": 20, "delay_ms": 10, "buffer_pkts": 100},
        "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}]}


def test_changes_parse_in_order_and_scale_with_the_run():
    sc = parse_scenario({**BASE, "link_changes": [{"at_s": 30, "rate_mbps": 10}, {"at_s": 45, "delay_ms": 5}]})
    assert [(c.at_s, c.rate_bps, c.delay_ms) for c in sc.link_changes] == [(30, 10_000_000, None), (45, None, 5)]
    assert [c.at_s for c in sc.with_duration(30).link_changes] == [15, 22.5]


@pytest.mark.parametrize("change,key", [
    ({"at_s": 30}, "link_changes[0].rate_mbps"),                      # changes nothing
    ({"at_s": 61, "rate_mbps": 10}, "link_changes[0].at_s"),          # after the run
    ({"at_s": 30, "rate_mbps": 10, "rate_bps": 10}, "link_changes[0].rate_bps"),
    ({"at_s": 30, "rate_mbps": 10, "buffer_pkts": 5}, "link_changes[0].buffer_pkts"),
])
def test_bad_changes_are_refused_naming_the_key(change, key):
    with pytest.raises(ScenarioError) as e:
        parse_scenario({**BASE, "link_changes": [change]})
    assert key in str(e.value)


def test_changes_must_come_in_time_order():
    with pytest.raises(ScenarioError, match=r"link_changes\[1\]\.at_s"):
        parse_scenario({**BASE, "link_changes": [{"at_s": 30, "rate_mbps": 10}, {"at_s": 20, "rate_mbps": 5}]})


def test_utilization_is_over_the_rate_the_link_had():
    # 20 Mbit/s until 30 s, then 10: over [10, 50] the link could carry (20*20 + 10*20)/40 = 15
    applied = [{"at_s": 30.0, "rate_bps": 10_000_000, "delay_ms": None}]
    assert _mean_rate_bps(20_000_000, applied, 10, 50) == pytest.approx(15_000_000)
    assert _mean_rate_bps(20_000_000, [], 10, 50) == 20_000_000
    assert _mean_rate_bps(20_000_000, [{"at_s": 40.0, "rate_bps": None, "delay_ms": 5}], 10, 50) == 20_000_000


def test_the_seed002_rate_change_scenarios_parse():
    for name, after in (("cocoa_halve", 10_000_000), ("cocoa_double", 40_000_000)):
        sc = resolve(name)
        assert sc.link.rate_bps == 20_000_000 and [c.rate_bps for c in sc.link_changes] == [after]
