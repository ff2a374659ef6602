"""The regime table (experiments/regimes.py): per regime, the best discipline for fairness, delay
and utilization, with every other whose confidence interval overlaps the best one's, generated
from the published summaries."""

from __future__ import annotations

from experiments import published, regimes


def _entry(case: str, approach: str = "none", **stats) -> dict:
    e = {"case": case, "scenario": "s", "approach": approach}
    for key in ("jain", "queue_delay_mean_ms", "utilization"):
        mean, ci = stats.get(key, (None, None))
        e[key] = {"mean": mean, "ci95": ci, "n": 3}
    return e


def test_the_best_mean_wins_and_every_case_whose_interval_overlaps_it_is_named_beside_it():
    """Rule: the best is the highest mean (the lowest where lower is better); a case is tied when
    |difference of means| <= the sum of the two CI half-widths, and a case without the value
    takes no part."""
    entries = [_entry("a", jain=(0.90, 0.02)), _entry("b", jain=(0.95, 0.02)), _entry("c", jain=(0.92, 0.015)),
               _entry("d", jain=(0.80, 0.2)), _entry("e")]
    top, ties = regimes.best(entries, "jain", higher=True)
    assert top["case"] == "b" and [e["case"] for e in ties] == ["c", "d"]  # a: 0.05 > 0.04; c: 0.03 <= 0.035
    top, ties = regimes.best(entries, "jain", higher=False)
    assert top["case"] == "d" and [e["case"] for e in ties] == ["a", "b", "c"]  # d's CI is 0.2 wide
    assert regimes.best([_entry("e")], "jain", True) is None


def test_every_regime_names_a_scenario_its_table_runs():
    """Rule: a regime points at a registered table and at one of the scenarios (grid members by
    their own names) that table's batch runs, so its row fills in when the table is published."""
    for r in regimes.REGIMES:
        scenarios = {s for s, _ in published.expected_runs(published.TABLES[r.table])}
        assert r.scenario in scenarios, r


def test_a_regime_without_a_summary_says_so_and_approaches_do_not_compete():
    """Rule: a regime whose table has no summary reads "not yet run"; a case with a CoEx approach
    is left out of the comparison (it changes the network, not the discipline)."""
    rrul = published.read_summary("rrul")
    lines = regimes.render({"rrul": rrul})
    row = next(line for line in lines if "`rrul_bbr_cubic`" in line)
    fairest = max((e for e in rrul["cases"]), key=lambda e: e["jain"]["mean"])
    assert f"| {fairest['case']} {fairest['jain']['mean']:.3f}" in row
    assert all("not yet run" in line for line in lines[2:] if "`rrul`" not in line)
    cases = [_entry("ckcd", jain=(0.9, 0.01)), _entry("ckcd+separate_paths", "separate_paths", jain=(0.99, 0.01))]
    summary = {"cases": [dict(e, scenario="mptcp_paths") for e in cases]}
    fake = regimes.Regime("r", "mptcp", "mptcp_paths")
    original = regimes.REGIMES
    try:
        regimes.REGIMES = (fake,)
        row = regimes.render({"mptcp": summary})[2]
    finally:
        regimes.REGIMES = original
    assert "| ckcd 0.900 ± 0.010 |" in row and "separate_paths" not in row.split("|", 3)[3]
