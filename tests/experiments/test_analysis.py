"""Run metrics from synthetic run records (no lab): warm-up window, utilization, delays,
drops, fidelity, summaries over repeats and the comparison with the paper."""

import csv
import json
import os

import pytest

from experiments.analysis import metrics as analysis
from experiments.analysis.summary import full_buffer_ms, headline, summarize
from experiments.analysis import fidelity
from experiments.analysis.stats import percentile, window_rate
from experiments.output.report import write_report
from experiments.scenario.model import ScenarioError
from experiments.scenario.catalog import parse_scenario

DOC = {"name": "syn", "topology": "dumbbell", "duration_s": 40, "warmup_s": 10, "disciplines": ["droptail", "ckcd"],
       "link": {"rate_mbps": 100, "delay_ms": 10, "buffer_pkts": 80},
       "flows": [{"src": "h1", "dst": "h3", "cc": "bbr"}, {"src": "h2", "dst": "h4", "cc": "cubic"}],
       "ping": {"src": "h1", "dst": "h3"}}


def schedule(late=0):
    return {"releases": 1000, "late_over_1ms": late, "late_mean_us": 100.0}


def record(case, bbr_mbps, cubic_mbps, sojourn_ms, rtt_ms, cpu_busy=50.0, late=0):
    sc = parse_scenario(DOC, "syn.toml")
    secs = [t + 0.5 for t in range(40)]
    # During the warm-up (t < 10 s) the flows send something else entirely: it must not count.
    flows = [{"label": "bbr", "cc": "bbr", "aggregate": None, "error": None, "retransmits": 0,
              "goodput": [[t, 999.0 if t < 10 else bbr_mbps, 1.0] for t in secs], "srtt": [[t, rtt_ms] for t in secs]},
             {"label": "cubic", "cc": "cubic", "aggregate": None, "error": None, "retransmits": 0,
              "goodput": [[t, 0.0 if t < 10 else cubic_mbps, 1.0] for t in secs], "srtt": [[t, rtt_ms] for t in secs]}]
    series = [{"t": t / 10, "interval_s": 0.1, "qlen_pkts": 10, "tx_bytes": 1_250_000 * 0.9,
               "sojourn_ms": 50.0 if t < 100 else sojourn_ms, "sojourn_count": 800,
               "drops": {"overflow": 1 if t >= 100 else 100, "early": 0}} for t in range(400)]
    samples = [[t / 100, 50.0 if t < 1000 else sojourn_ms] for t in range(4000)]
    final = {"dirs": {"ab": {"schedule": schedule(late)}, "ba": {"schedule": schedule()}}}
    return {"scenario": sc.to_dict(), "case": {"name": case, "discipline": case, "approach": "none"}, "rep": 1,
            "error": None, "flows": flows, "ping": [[t / 5, rtt_ms] for t in range(200)],
            "links": {"l0": {"series": series, "sojourn_samples": samples, "final": final}},
            "cpu": [[t, cpu_busy, 1.0, 70.0, 5.0, 45.0] for t in range(40)]}


def test_means_skip_the_warm_up():
    m = analysis.run_metrics(record("droptail", 80.0, 10.0, 6.0, 26.0))
    assert m["window_s"] == [10.0, 40.0]
    bbr, cubic = m["flows"]
    assert bbr["mean_mbps"] == pytest.approx(80.0) and cubic["mean_mbps"] == pytest.approx(10.0)
    assert m["total_mbps"] == pytest.approx(90.0) and m["utilization"] == pytest.approx(0.90)
    assert m["jain"] == pytest.approx(90 ** 2 / (2 * (80 ** 2 + 10 ** 2)))
    assert m["classes"]["bbr"]["mean_mbps"] == pytest.approx(80.0)
    assert m["queue_delay_ms"]["mean"] == pytest.approx(6.0) and m["queue_delay_ms"]["p99"] == pytest.approx(6.0)
    assert m["rtt_ms"]["mean"] == pytest.approx(26.0)
    assert m["drops"] == {"overflow": 300, "early": 0}  # the 300 log rows of 10.0-39.9 s
    assert m["links"]["l0"]["busy"] == pytest.approx(0.9)
    assert m["fidelity"] == {"trusted": True, "reasons": []}


def test_fidelity_names_the_reason():
    m = analysis.run_metrics(record("ckcd", 45.0, 45.0, 1.0, 21.0, cpu_busy=95.0, late=200))
    assert not m["fidelity"]["trusted"]
    text = " ".join(m["fidelity"]["reasons"])
    assert "CPU above 90 %" in text and "fell behind its schedule" in text


def test_means_pool_trusted_runs_only_and_name_the_others(tmp_path):
    """Rule: a case's means and CIs pool its trusted runs only; untrusted runs are counted and
    named with their reasons, in the summary and under the report's table; fewer than three
    trusted runs is said wherever the case's numbers appear; --include-untrusted pools them,
    marked as such."""
    recs = [record("droptail", 80.0, 10.0, 6.0, 26.0), record("droptail", 84.0, 6.0, 6.2, 26.2),
            record("droptail", 60.0, 10.0, 9.0, 40.0, cpu_busy=95.0)]
    for rep, r in enumerate(recs, 1):
        r["rep"], r["batch_id"] = rep, "b1"
        r["metrics"] = analysis.run_metrics(r)
    [entry] = summarize(recs)
    assert (entry["runs"], entry["trusted"], entry["pooled"], entry["few_trusted"]) == (3, 2, 2, True)
    assert entry["total_mbps"]["mean"] == pytest.approx(90.0) and entry["total_mbps"]["n"] == 2
    assert entry["utilization"]["mean"] == pytest.approx(0.90)  # 70 Mbit/s of the untrusted run left out
    [run] = entry["untrusted_runs"]
    assert run["run"] == "rep3 of batch b1" and "CPU above 90 %" in run["reasons"][0]
    write_report(str(tmp_path), recs)
    text = (tmp_path / "report.md").read_text()
    assert "| 2 / 3 (**fewer than 3 trusted**) |" in text
    assert "- droptail rep3 of batch b1: left out: CPU above 90 %" in text
    assert "Only trusted runs are pooled" in text and "Student's t with n − 1 degrees of freedom" in text
    [pooled] = summarize(recs, include_untrusted=True)
    assert pooled["pooled"] == 3 and pooled["includes_untrusted"]
    assert pooled["total_mbps"]["mean"] == pytest.approx((90.0 + 90.0 + 70.0) / 3)
    write_report(str(tmp_path), recs, include_untrusted=True)
    assert "untrusted runs pooled" in (tmp_path / "report.md").read_text()
    row = next(csv.DictReader(open(tmp_path / "summary.csv")))
    assert (row["runs"], row["trusted"], row["pooled"], row["includes_untrusted"]) == ("3", "2", "3", "1")


def test_goodput_comes_from_the_bytes_the_sender_saw_acknowledged():
    """Rule: a flow's goodput over the window is its sender's tcp_info bytes_acked growth (what
    the network delivered); iperf3's receiver reads, which a late reader bunches up at the flow's
    end, are kept beside it (read_mbps) and used only for records without those samples."""
    rec = record("droptail", 60.0, 40.0, 6.0, 26.0)  # iperf3 reads: 100 Mbit/s, above the ceiling
    for f, mbps in zip(rec["flows"], (55.0, 39.0)):
        f["tcp_info"] = [[t / 2, 21.0, 40, 20.1, int(mbps * 1e6 / 8 * t / 2)] for t in range(81)]
    m = analysis.run_metrics(rec)
    bbr, cubic = m["flows"]
    assert (bbr["mean_mbps"], bbr["read_mbps"], bbr["goodput_source"]) == (pytest.approx(55.0), 60.0, "tcp_info")
    assert m["utilization"] == pytest.approx(0.94) and m["fidelity"]["trusted"]


def test_a_flow_held_back_by_its_receivers_window_untrusts_the_run():
    """Rule: tcp_info's rwnd_limited time over busy time in the window, above 5 %, means the
    receiving host (its iperf3 reading late) and not the network set the flow's rate."""
    rec = record("droptail", 60.0, 30.0, 6.0, 26.0)
    for f, limited_ms_per_s in zip(rec["flows"], (0, 200)):  # cubic: held back 20 % of the time
        f["tcp_info"] = [[t / 2, 21.0, 40, 20.1, int(45e6 / 8 * t / 2), 500 * t, limited_ms_per_s * t // 2]
                         for t in range(81)]
    m = analysis.run_metrics(rec)
    assert [f["rwnd_limited_fraction"] for f in m["flows"]] == [0.0, pytest.approx(0.2)]
    [why] = m["fidelity"]["reasons"]
    assert why.startswith("flow cubic was held back by its receiver's window 20 % of its busy time")


def test_a_reading_above_the_goodput_ceiling_untrusts_its_run():
    """Rule: TCP payload cannot exceed 1448/1514 of the link rate; a run whose utilization reads
    above that by more than CEILING_TOLERANCE is untrusted, naming the reading and its source."""
    at = fidelity.GOODPUT_CEILING + fidelity.CEILING_TOLERANCE
    ok = analysis.run_metrics(record("droptail", 100 * at - 30.01, 30.0, 6.0, 26.0))
    assert ok["fidelity"]["trusted"]
    over = analysis.run_metrics(record("droptail", 99.6 - 30.0, 30.0, 6.0, 26.0))
    assert not over["fidelity"]["trusted"]
    [why] = over["fidelity"]["reasons"]
    assert why.startswith("utilization 99.6 % is above TCP's goodput ceiling of 95.6 %") and "iperf3" in why


def test_an_intended_lateness_is_judged_by_the_senders_own_wake_ups():
    """Rule: with link.release_lateness_us set (a lateness put there on purpose), the schedule
    check judges ckcd-link's wake-ups (tx_wake), and the lateness the releases show beyond them is
    part of what the link explains of ping's RTT; without the key the same stats untrust the run."""
    late = {"releases": 1000, "late_over_1ms": 200, "late_mean_us": 700.0}  # 20 % over 1 ms
    wake = {"wakeups": 1000, "late_over_1ms": 0, "late_mean_us": 40.0}
    doc = dict(DOC, link=dict(DOC["link"], release_lateness_us=600))
    rec = record("droptail", 60.0, 30.0, 6.0, 26.0 + 1.32 + 0.8)  # 0.8 ms unexplained: within 1.1 ms
    rec["links"]["l0"]["final"] = {"dirs": {d: {"schedule": late, "tx_wake": wake} for d in ("ab", "ba")}}
    rec["scenario"] = parse_scenario(doc, "syn.toml").to_dict()
    m = analysis.run_metrics(rec)
    assert m["links"]["l0"]["schedule"]["measured"] == "tx_wake"
    assert m["links"]["l0"]["intended_late_rtt_ms"] == pytest.approx(1.32)
    assert m["fidelity"] == {"trusted": True, "reasons": []}
    # a ckcd-link that reports its own lateness per frame is judged by that record
    own = {"releases": 1000, "late_over_1ms": 0, "late_mean_us": 30.0}
    for d in rec["links"]["l0"]["final"]["dirs"].values():
        d["own"] = own
    m = analysis.run_metrics(rec)
    assert m["links"]["l0"]["schedule"]["measured"] == "own" and m["fidelity"]["trusted"]
    assert m["links"]["l0"]["intended_late_rtt_ms"] == pytest.approx(2 * (700 - 30) / 1000)
    rec["scenario"] = parse_scenario(DOC, "syn.toml").to_dict()
    reasons = " ".join(analysis.run_metrics(rec)["fidelity"]["reasons"])
    assert "fell behind its schedule (20.0 % of releases > 1 ms late" in reasons and "ping RTT" in reasons


def test_a_release_batch_is_judged_by_the_senders_wake_ups_against_the_batch():
    """Rule: with link.release_batch_us every frame waits up to a batch on purpose, and ckcd-link's
    per-frame `own` record does not take that wait out; the schedule check judges its wake-ups
    against the batch's deadlines (tx_wake), and the releases' lateness beyond them is part of
    what the link explains of ping's RTT. Without the key the same stats untrust the run."""
    late = {"releases": 1000, "late_over_1ms": 40, "late_mean_us": 480.0}  # 4 % over 1 ms
    own = dict(late)  # follows the frames' send times: the batch's wait is in it
    wake = {"wakeups": 1000, "late_over_1ms": 0, "late_mean_us": 45.0}
    doc = dict(DOC, link=dict(DOC["link"], release_batch_us=1000))
    rec = record("droptail", 60.0, 30.0, 6.0, 26.0 + 0.87 + 0.6)  # 0.6 ms unexplained: within 1.1 ms
    rec["links"]["l0"]["final"] = {"dirs": {d: {"schedule": late, "own": own, "tx_wake": wake} for d in ("ab", "ba")}}
    rec["scenario"] = parse_scenario(doc, "syn.toml").to_dict()
    m = analysis.run_metrics(rec)
    assert m["links"]["l0"]["schedule"]["measured"] == "tx_wake"
    assert m["links"]["l0"]["intended_late_rtt_ms"] == pytest.approx(2 * (480 - 45) / 1000)
    assert m["fidelity"] == {"trusted": True, "reasons": []}
    rec["scenario"] = parse_scenario(DOC, "syn.toml").to_dict()
    reasons = " ".join(analysis.run_metrics(rec)["fidelity"]["reasons"])
    assert "fell behind its schedule (4.0 % of releases > 1 ms late" in reasons and "ping RTT" in reasons


def test_summary_and_headline_against_droptail():
    recs = [record("droptail", 80.0, 10.0, 6.0, 26.0), record("droptail", 82.0, 8.0, 6.2, 26.2),
            record("ckcd", 45.0, 45.0, 1.0, 21.0), record("ckcd", 44.0, 46.0, 1.2, 21.2)]
    for r in recs:
        r["metrics"] = analysis.run_metrics(r)
    summary = summarize(recs)
    assert [e["case"] for e in summary] == ["droptail", "ckcd"]
    dt = summary[0]
    assert dt["runs"] == 2 and dt["trusted"] == 2 and dt["jain"]["n"] == 2 and dt["jain"]["ci95"] > 0
    [head] = headline(summary)
    assert head["jain_ckcd"] > 0.99
    assert head["fairness_gain"] == pytest.approx(head["jain_ckcd"] / head["jain_droptail"] - 1)
    assert head["queue_delay_reduction"] == pytest.approx(1 - 1.1 / 6.1)
    assert head["queue_delay_vs_full_buffer"] is None  # no buffer size given
    [head] = headline(summary, {recs[0]["scenario"]["name"]: full_buffer_ms(recs[0]["scenario"])})
    full = recs[0]["scenario"]["link"]["buffer_pkts"] * 1514 * 8 / recs[0]["scenario"]["link"]["rate_bps"] * 1e3
    assert head["full_buffer_ms"] == pytest.approx(full)
    assert head["queue_delay_vs_full_buffer"] == pytest.approx(1 - 1.1 / full)
    assert head["runs_droptail"] == head["runs_ckcd"] == {"runs": 2, "trusted": 2, "pooled": 2}
    assert head["few_trusted"] and not head["includes_untrusted"]  # two trusted runs are fewer than three


def test_window_scales_with_duration_and_staggered_flows():
    doc = dict(DOC, duration_s=120, flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "count": 5,
                                            "start_every_s": 15}])
    sc = parse_scenario(doc, "t")
    assert [f.start_s for f in sc.flows] == [0, 15, 30, 45, 60]
    assert sc.measure_window_s == (70, 120)
    short = sc.with_duration(60)
    assert [f.start_s for f in short.flows] == [0, 7.5, 15, 22.5, 30] and short.measure_window_s == (40, 60)
    with pytest.raises(ScenarioError, match="flows\\[0\\].start_every_s"):
        parse_scenario(dict(DOC, flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "count": 5,
                                         "start_every_s": 10}]), "t")


def test_only_picks_cases():
    sc = parse_scenario(dict(DOC, disciplines=["droptail", "red", "ckcd"]), "t")
    assert [c.name for c in sc.restricted(["ckcd", "droptail"]).cases()] == ["droptail", "ckcd"]
    assert sc.restricted(["nosuch"]) is None


def test_coex_scenarios_need_aggregates_and_twopaths_for_separate_paths():
    with pytest.raises(ScenarioError, match="approaches"):
        parse_scenario(dict(DOC, approaches=["separate_paths"]), "t")
    with pytest.raises(ScenarioError, match="flows"):
        parse_scenario(dict(DOC, approaches=["separate_queues"]), "t")
    with pytest.raises(ScenarioError, match="discipline_params.ckcd"):
        parse_scenario(dict(DOC, discipline_params={"ckcd": {"limt": 80}}), "t")


def test_percentile_and_window_helpers():
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile(list(range(101)), 99) == pytest.approx(99)
    assert window_rate([[0, 100], [5, 1], [6, 3], [9, 100]], 5, 6) == pytest.approx(2)
    assert window_rate([], 0, 1) is None
    # weighted by interval length: 1 s at 90 and a 0.25 s tail read at 200 carried 140 Mbit in 1.25 s
    assert window_rate([[10.5, 90.0, 1.0], [11.1, 200.0, 0.25]], 10, 12) == pytest.approx(112.0)


def test_report_renders_from_records_without_a_lab(tmp_path):
    """What `ckcd-coex report` writes, from records in the form the runner saves them."""
    records = [record("droptail", 80.0, 10.0, 6.0, 26.0), record("ckcd", 50.0, 40.0, 1.5, 21.5)]
    out = write_report(str(tmp_path), records, command="ckcd-coex run syn.toml")
    [head] = out["headline"]
    assert head["jain_droptail"] == pytest.approx(90 ** 2 / (2 * (80 ** 2 + 10 ** 2)))
    assert head["jain_ckcd"] == pytest.approx(90 ** 2 / (2 * (50 ** 2 + 40 ** 2)))
    assert head["queue_delay_reduction"] == pytest.approx(1 - 1.5 / 6.0)
    # the throughput-delay scatter (Pantheon's picture) too: both runs are trusted
    assert {os.path.basename(p) for p in out["plots"]["syn"]} == {"syn_timeseries.png", "syn_bars.png",
                                                                  "syn_throughput_delay.png"}
    for p in out["plots"]["syn"]:
        assert os.path.getsize(os.path.join(tmp_path, p)) > 10_000
    with open(tmp_path / "summary.csv") as f:
        rows = {r["case"]: r for r in csv.DictReader(f)}
    assert float(rows["ckcd"]["total_mbps"]) == pytest.approx(90.0)
    assert json.load(open(tmp_path / "results.json"))["summary"] == out["summary"]
    report = (tmp_path / "report.md").read_text()
    assert "ckcd-coex run syn.toml" in report and "plots/syn_bars.png" in report


def test_flows_of_different_base_rtts_are_grouped_with_their_min_rtt_and_cwnd(tmp_path):
    """An access delay on h1 gives its flow a longer base RTT: the metrics group the flows by base
    RTT ("rtts"), carry each flow's min RTT (the kernel's) and its cwnd over the window, and Jain's
    index over time counts the flows sending in each second."""
    rec = record("droptail", 60.0, 30.0, 6.0, 26.0)
    doc = dict(DOC, access_delay_ms={"h1": 30})
    rec["scenario"] = parse_scenario(doc, "syn.toml").to_dict()
    for fl, (src, dst), min_rtt in zip(rec["flows"], (("h1", "h3"), ("h2", "h4")), (50.3, 20.2)):
        fl.update(src=src, dst=dst, min_rtt_ms=min_rtt,
                  tcp_info=[[t + 0.25, 25.0, 5 if t < 10 else 40, min_rtt] for t in range(40)])
    m = analysis.run_metrics(rec)
    far, near = m["flows"]
    assert (far["base_rtt_ms"], far["rtt_class"], far["min_rtt_ms"]) == (50.0, "50 ms RTT", 50.3)
    assert (near["base_rtt_ms"], near["rtt_class"]) == (20.0, "20 ms RTT")
    assert far["cwnd_pkts"]["mean"] == pytest.approx(40)  # the warm-up's 5 packets left out
    assert list(m["rtts"]) == ["20 ms RTT", "50 ms RTT"]  # by number, not by text
    assert m["rtts"]["50 ms RTT"]["mean_mbps"] == pytest.approx(60.0)
    assert m["rtts"]["20 ms RTT"]["min_rtt_ms"] == pytest.approx(20.2)
    series = analysis.jain_series(rec["flows"])
    assert series[0] == [0.5, pytest.approx(0.5)]  # the warm-up: bbr 999, cubic 0 Mbit/s
    assert series[-1] == [39.5, pytest.approx(90 ** 2 / (2 * (60 ** 2 + 30 ** 2)))]
    rec["metrics"] = m
    summary = summarize([rec])
    assert summary[0]["rtts"]["50 ms RTT"]["mean_mbps"]["mean"] == pytest.approx(60.0)
    # The report: each RTT's rate in the case table, the per-flow dynamics plot, the long CSV.
    out = write_report(str(tmp_path), [rec])
    assert os.path.exists(tmp_path / "plots" / "syn_flows.png") and "plots/syn_flows.png" in out["plots"]["syn"]
    assert "50 ms RTT: Mbit/s/flow" in (tmp_path / "report.md").read_text()
    assert "Flows: bbr h1→h3 (50 ms RTT), cubic h2→h4 (20 ms RTT)." in (tmp_path / "report.md").read_text()
    rows = list(csv.DictReader(open(tmp_path / "timeseries.csv")))
    assert {r["series"] for r in rows} == {"goodput_mbps", "srtt_ms", "cwnd_pkts", "min_rtt_ms", "jain"}
    assert [r["value"] for r in rows if r["flow"] == "bbr" and r["series"] == "min_rtt_ms"][0] == "50.3"
    flows = list(csv.DictReader(open(tmp_path / "flows.csv")))
    assert (flows[0]["base_rtt_ms"], flows[0]["min_rtt_ms"]) == ("50", "50.3")


def test_short_flows_completion_times_by_size_in_the_window(tmp_path):
    """Transfers started in the window count: completed ones give FCT percentiles per size, failed
    ones are counted, those without a line (still running at the end) are started - completed -
    failed; the summary averages each run's percentiles; the report has a table."""
    rec = record("ckcd", 45.0, 45.0, 1.0, 21.0)
    doc = dict(DOC, short_flows=[{"src": "h1", "dst": "h3", "cc": "cubic", "sizes_kb": [50, 1000],
                                  "rate_per_s": 2}])
    rec["scenario"] = parse_scenario(doc, "syn.toml").to_dict()
    transfers = [{"t": 5.0, "size": 50_000, "ok": True, "fct_ms": 999.0}]  # in the warm-up: not counted
    transfers += [{"t": 10.0 + i, "size": 50_000, "ok": True, "fct_ms": 40.0 + i} for i in range(10)]
    transfers += [{"t": 20.0 + i, "size": 1_000_000, "ok": True, "fct_ms": 200.0} for i in range(4)]
    transfers += [{"t": 30.0, "size": 1_000_000, "ok": False, "error": "reset"}]
    rec["short_flows"] = [{"label": "short-cubic-1", "cc": "cubic", "transfers": transfers, "error": None}]
    m = analysis.run_metrics(rec)
    g = m["short_flows"]["short-cubic-1"]
    assert (g["started"], g["completed"], g["failed"]) == (15, 14, 1)
    assert g["by_size_kb"]["50"]["p50"] == pytest.approx(percentile([40.0 + i for i in range(10)], 50))
    assert g["by_size_kb"]["1000"]["p99"] == pytest.approx(200.0)
    rec["metrics"] = m
    [entry] = summarize([rec])
    assert entry["short_flows"]["short-cubic-1"]["by_size_kb"]["1000"]["p95"]["mean"] == pytest.approx(200.0)
    write_report(str(tmp_path), [rec])
    report = (tmp_path / "report.md").read_text()
    assert "| ckcd | short-cubic-1 | 1000 | 14 / 15 (1) | 200.0 | 200.0 | 200.0 |" in report
    fct_rows = [r for r in csv.DictReader(open(tmp_path / "timeseries.csv")) if r["series"].startswith("fct_ms")]
    assert len(fct_rows) == 15 and {r["series"] for r in fct_rows} == {"fct_ms_50kb", "fct_ms_1000kb"}


def test_jain_over_time_counts_each_flow_once_a_second():
    """A flow's short last interval can share a second with the one before: the second's value is
    the flow's rate over both (length-weighted), not two flows."""
    a = {"goodput": [[1.1, 10.0, 1.0], [1.75, 40.0, 0.3]]}  # (10 x 1 + 40 x 0.3) / 1.3 = 16.92
    b = {"goodput": [[1.5, 22.0 / 1.3, 1.0]]}
    [[t, j]] = analysis.jain_series([a, b])
    assert t == 1.5 and j == pytest.approx(1.0)


def test_a_grids_members_are_tabled_side_by_side(tmp_path):
    """Rule: the report puts a grid's members in one table, a row per grid point and case, with
    each column's CI and trusted / runs; records made before members named their grid are
    grouped by their definition less the swept values."""
    grid = parse_scenario(dict(DOC, sweep={"link": {"buffer_pkts": [40, 80]}}), "syn.toml")
    recs = []
    for member, bbr in zip(grid.expanded(), (70.0, 60.0)):
        for rep in (1, 2):
            rec = record("droptail", bbr, 20.0, 6.0, 26.0)
            rec["scenario"], rec["rep"] = member.to_dict(), rep
            recs.append(rec)
    write_report(str(tmp_path), recs)
    text = (tmp_path / "report.md").read_text()
    assert "## Across the grid `syn`" in text
    assert "| 40 | droptail | 0." in text and "| 80 | droptail | 0." in text and "| 2 / 2 (**fewer than 3" in text
    for rec in recs:
        del rec["scenario"]["grid"]
    write_report(str(tmp_path), recs)
    assert "## Across the grid `syn`" in (tmp_path / "report.md").read_text()  # its title: "syn"
