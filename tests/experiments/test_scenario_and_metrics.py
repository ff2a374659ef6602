"""Scenario files and metrics, without a lab."""

import pytest

from experiments.metrics import jain_index, mean_ci95, t_critical_95
from experiments.scenario import ScenarioError, builtin_names, parse_scenario, resolve

BASE = {"name": "t", "topology": "dumbbell", "duration_s": 10, "disciplines": ["droptail"],
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80},
        "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}]}


def with_(**over):
    doc = {**BASE, **over}
    return doc


def test_every_builtin_scenario_parses():
    names = builtin_names()
    assert {"demo", "bbr_cubic", "bbr_cubic_reno", "mixed15", "intra_cubic", "intra_bbr"} <= set(names)
    for name in names:
        sc = resolve(name)
        assert sc.cases(), name


def test_seed000_scenarios_use_table_ii():
    sc = resolve("bbr_cubic")
    assert sc.link.rate_bps == 100_000_000 and sc.link.buffer_pkts == 80
    assert set(sc.disciplines) == {"droptail", "red", "codel", "choke", "ckcd"}
    assert "rate_bps=100000000" in sc.qdisc_spec("ckcd")


@pytest.mark.parametrize("doc,key", [
    (with_(link={"rate_mbps": -5, "delay_ms": 10, "buffer_pkts": 80}), "link.rate_mbps"),
    (with_(flows=[{"src": "h1", "dst": "h3", "cc": "vegas"}]), "flows[0].cc"),
    (with_(flows=[{"src": "h9", "dst": "h3", "cc": "cubic"}]), "flows[0].src"),
    (with_(disciplines=["pie"]), "disciplines"),
    (with_(colour="red"), "colour"),
    (with_(duration_s="long"), "duration_s"),
])
def test_bad_scenarios_name_the_key(doc, key):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc, "test.toml")
    assert key in str(err.value)


def test_mean_and_confidence_interval():
    r = mean_ci95([1.0, 2.0, 3.0])
    # t(2) = 4.303, s = 1, n = 3: half-width 4.303 / sqrt(3) = 2.484
    assert r["mean"] == pytest.approx(2.0) and r["ci95"] == pytest.approx(2.484, abs=1e-3)
    assert mean_ci95([5.0]) == {"mean": 5.0, "ci95": None, "n": 1}
    assert t_critical_95(1) == pytest.approx(12.706, abs=1e-3)


def test_jain_bounds():
    assert jain_index([1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0]) == pytest.approx(1 / 3)
