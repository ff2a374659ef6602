"""A run whose link changes during its window (`[[link_changes]]`, seed 002's halved and doubled
rate) is also measured on each side of the change: the phases of a run's metrics, their means
over runs, the report's and the published tables' view of them."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from experiments import published, reproduce
from experiments.analysis.metrics import run_metrics
from experiments.analysis.summary import summarize
from experiments.output import markdown

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "run_record")
RUN = os.path.join("runs", "bbr_cubic", "droptail", "rep1", "run.json")


def _record(changes: list[dict] | None = None) -> dict:
    with open(os.path.join(FIXTURE, RUN)) as f:
        record = json.load(f)
    if changes is not None:
        record["link_changes"] = changes
    return record


def _halved_at(t: float) -> list[dict]:
    return [{"at_s": t, "rate_bps": 50_000_000, "delay_ms": None}]


def test_a_change_inside_the_window_cuts_it_into_parts_each_measured_against_its_own_rate():
    """Rule: the window is cut where the change took effect; each part's utilization is its
    goodput over the rate the link had in it."""
    m = run_metrics(_record(_halved_at(7.5)))
    w0, w1 = m["window_s"]
    phases = m["phases"]
    assert [(p["from_s"], p["to_s"]) for p in phases] == [(w0, 7.5), (7.5, w1)]
    assert [p["rate_mbps"] for p in phases] == [100.0, 50.0]
    for p in phases:
        assert p["utilization"] == pytest.approx(p["total_mbps"] / p["rate_mbps"])
        assert p["flows"] == len([f for f in m["flows"] if not f["reverse"]])
        assert p["queue_delay_ms"]["mean"] is not None and p["rtt_ms"]["n"] > 0


def test_the_parts_goodput_adds_up_to_the_windows():
    """Rule: the parts are the window's traffic divided, nothing counted twice or lost. Tolerance
    5 %: a part's goodput is read between its first and last ss sample, so the samples' spacing
    at each cut is not in either part."""
    m = run_metrics(_record(_halved_at(7.5)))
    w0, w1 = m["window_s"]
    carried = sum(p["total_mbps"] * (p["to_s"] - p["from_s"]) for p in m["phases"])
    assert carried == pytest.approx(m["total_mbps"] * (w1 - w0), rel=0.05)


@pytest.mark.parametrize("changes", [None, [], _halved_at(1.0), _halved_at(12.5)])
def test_no_change_inside_the_window_leaves_no_phases(changes):
    """Rule: a change before the window (in the warm-up) or after it, or none, gives no parts."""
    assert "phases" not in run_metrics(_record(changes))


def test_phases_are_averaged_over_runs_and_rendered_a_row_each():
    """Rule: each part's means are over the runs, with CIs, and the view has a row per case and
    part, with the part's bounds and rate."""
    records = []
    for rep, t in ((1, 7.5), (2, 7.6), (3, 7.4)):
        rec = _record(_halved_at(t))
        rec["rep"] = rep
        rec["metrics"] = run_metrics(rec)
        rec["metrics"]["fidelity"] = {"trusted": True, "reasons": []}
        records.append(rec)
    [entry] = summarize(records)
    first, second = entry["phases"]
    assert first["runs"] == second["runs"] == 3 and second["rate_mbps"] == 50.0
    assert first["to_s"] == pytest.approx(7.5) and second["total_mbps"]["n"] == 3
    assert second["total_mbps"]["ci95"] is not None
    lines = markdown.phase_table([entry])
    assert len(lines) == 2 + 2 and "| droptail | 3–7.5 | 100 |" in lines[2] and "| droptail | 7.5–12 | 50 |" in lines[3]
    assert "Jain" in lines[0]  # two flows share each part


def test_reproduce_from_saved_runs_measures_them_with_this_code(tmp_path):
    """Rule: `reproduce TABLE --from DIR` computes each run's metrics from what it saved, as
    `ckcd-coex report` does, not from the metrics the version that ran it wrote."""
    shutil.copytree(FIXTURE, tmp_path / "batch")
    path = tmp_path / "batch" / RUN
    rec = json.loads(path.read_text())
    rec["link_changes"] = _halved_at(7.5)
    assert "phases" not in rec["metrics"]
    path.write_text(json.dumps(rec))
    records, _ = reproduce._from_dirs([str(tmp_path / "batch")])
    assert len(records[0]["metrics"]["phases"]) == 2


def test_the_rate_change_table_shows_each_side_of_the_change():
    """Rule: the published table of seed 002's rate change has the phases view, and its summary
    holds both parts of every case."""
    assert "phases" in published.table("cocoa_change").views
    summary = published.read_summary("cocoa_change")
    assert all(len(e["phases"]) == 2 for e in summary["cases"])
    halve = [e for e in summary["cases"] if e["scenario"] == "cocoa_halve"]
    assert {p["rate_mbps"] for e in halve for p in e["phases"]} == {20.0, 10.0}
