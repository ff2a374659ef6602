"""`ckcd-coex demo` tells where to watch it: the dashboard's address, printed before
the runs start, is the one the runs' controller serves it on."""

from __future__ import annotations

from experiments import demo

from experiments.run import case


def test_demo_prints_the_dashboard_url_before_the_runs(monkeypatch, capsys, tmp_path):
    printed_before_runs = []

    def run_batch(scenarios, out_dir, log):
        printed_before_runs.append(capsys.readouterr().out)
        return []

    monkeypatch.setattr(demo, "run_batch", run_batch)
    monkeypatch.setattr(demo, "write_report", lambda out_dir, records, command, **_: {"summary": [], "headline": []})
    assert demo.run_demo(duration_s=5, out_dir=str(tmp_path)) == 0
    [before] = printed_before_runs
    assert f"http://127.0.0.1:{case.REST_PORT}/coex/v1/ui" in before
    assert f"http://127.0.0.1:{case.REST_PORT}/metrics" in before
