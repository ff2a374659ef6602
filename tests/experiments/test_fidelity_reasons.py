"""The runner's trust verdict on a late ckcd-link: blamed on the hypervisor (and a rerun
advised) only when the VM's steal time was high. Records are minimal but in run.json's
shape: one link, one flow, CPU rows [t, busy %, steal %, vswitchd, runner, links]."""

from __future__ import annotations

from experiments.analysis import STEAL_HIGH_PCT, run_metrics
from experiments.scenario import parse_scenario

SCENARIO = parse_scenario({"name": "t", "topology": "dumbbell", "duration_s": 10, "warmup_s": 2,
                           "disciplines": ["droptail"], "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}],
                           "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}}, "test")


def record(steal_pct: float, late_fraction: float) -> dict:
    releases = 10_000
    final = {"dirs": {d: {"schedule": {"releases": releases, "late_over_1ms": int(late_fraction * releases),
                                       "late_mean_us": 300.0}} for d in ("ab", "ba")}}
    flow = {"label": "f1", "cc": "cubic", "goodput": [[5.0, 45.0]], "srtt": [[5.0, 25.0]], "error": None}
    return {"scenario": SCENARIO.to_dict(), "flows": [flow], "ping": [],
            "links": {"l0": {"series": [], "sojourn_samples": [], "final": final}},
            "cpu": [[t, 60.0, steal_pct, 20.0, 5.0, 30.0] for t in range(10)]}


def reasons(steal_pct: float, late_fraction: float) -> list[str]:
    return run_metrics(record(steal_pct, late_fraction))["fidelity"]["reasons"]


def test_late_link_under_steal_says_rerun():
    [why] = reasons(STEAL_HIGH_PCT + 11, 0.09)
    assert "fell behind its schedule (9.0 %" in why and "took 21 % of the CPU (steal): rerun" in why


def test_late_link_without_steal_is_ours():
    [why] = reasons(2.0, 0.09)
    assert "fell behind its schedule" in why and "steal" not in why


def test_kept_schedule_is_trusted_whatever_the_steal():
    assert reasons(30.0, 0.01) == []
