"""A case's runs summarised: means and 95 % confidence intervals over its trusted runs (Student's
t over runs), the runs it left out and why, and seed 000's headline numbers against DropTail."""

from __future__ import annotations

from experiments.analysis.metrics import group_order
from experiments.analysis.stats import mean_ci95
from experiments.scenario.model import Scenario
from experiments.scenario.workloads import size_key


# The scalar metrics summarised per case: name -> how to read it from a run's metrics.
SCALARS = {
    "jain": lambda m: m["jain"],
    "total_mbps": lambda m: m["total_mbps"],
    "total_read_mbps": lambda m: m.get("total_read_mbps"),
    "wire_mbps": lambda m: m.get("wire_mbps"),
    "utilization": lambda m: m["utilization"],
    "queue_delay_mean_ms": lambda m: m["queue_delay_ms"]["mean"],
    "queue_delay_p95_ms": lambda m: m["queue_delay_ms"]["p95"],
    "queue_delay_p99_ms": lambda m: m["queue_delay_ms"]["p99"],
    "rtt_mean_ms": lambda m: m["rtt_ms"]["mean"],
    "rtt_p95_ms": lambda m: m["rtt_ms"]["p95"],
    "rtt_p99_ms": lambda m: m["rtt_ms"]["p99"],
    "rtt_unexplained_ms": lambda m: m.get("rtt_unexplained_ms"),
    "release_late_mean_us": lambda m: m.get("release_late_mean_us"),
    "drops": lambda m: sum(m["drops"].values()),
    "marks": lambda m: sum(m.get("marks", {}).values()),
    "cpu_mean_pct": lambda m: m["cpu"]["mean_pct"],
}


# A case's numbers rest on at least this many trusted runs before a table quotes them without a
# warning: with two, Student's t for a 95 % interval is 12.7 and the interval says little.
MIN_TRUSTED = 3


def run_name(record: dict) -> str:
    """`rep2`, with its batch where the record has one: runs of several batches can be pooled."""
    return f"rep{record['rep']}" + (f" of batch {record['batch_id']}" if record.get("batch_id") else "")


def summarize(records: list[dict], include_untrusted: bool = False) -> list[dict]:
    """One entry per (scenario, case), ordered by scenario name and then by the case's place in
    its scenario (so a report re-rendered from saved runs, which load in directory order, reads
    the same): mean and 95 % CI (Student's t over runs) of each scalar, per CC class and
    aggregate, drops by reason. Only trusted runs are pooled, unless include_untrusted; the
    entry counts runs, trusted runs and pooled runs, and names each untrusted run and why."""
    groups: dict = {}
    for rec in records:
        key = (rec["scenario"]["name"], rec["case"]["name"])
        groups.setdefault(key, []).append(rec)

    def place(key):
        cases = [c.name for c in Scenario.from_dict(groups[key][0]["scenario"]).cases()]
        return key[0], cases.index(key[1]) if key[1] in cases else len(cases), key[1]

    return [_case_summary(scenario, case, groups[(scenario, case)], include_untrusted)
            for scenario, case in sorted(groups, key=place)]


def _case_summary(scenario: str, case: str, recs: list[dict], include_untrusted: bool) -> dict:
    measured = [r for r in recs if r.get("metrics")]
    trusted = [r for r in measured if r["metrics"]["fidelity"]["trusted"]]
    untrusted = [r for r in measured if not r["metrics"]["fidelity"]["trusted"]]
    ok = measured if include_untrusted else trusted
    entry = {"scenario": scenario, "case": case, "discipline": recs[0]["case"]["discipline"],
             "approach": recs[0]["case"]["approach"], "runs": len(recs), "failed": len(recs) - len(measured),
             "trusted": len(trusted), "pooled": len(ok), "includes_untrusted": include_untrusted and bool(untrusted),
             "few_trusted": len(trusted) < MIN_TRUSTED,
             "untrusted_runs": [{"run": run_name(r), "reasons": r["metrics"]["fidelity"]["reasons"]} for r in untrusted],
             "untrusted_reasons": sorted({why for r in untrusted for why in r["metrics"]["fidelity"]["reasons"]}),
             "errors": [r["error"] for r in recs if r.get("error")]}
    if recs[0]["scenario"].get("grid_point"):  # a grid's member: where in the grid (markdown.grid_table)
        entry["grid_point"] = recs[0]["scenario"]["grid_point"]
    for name, read in SCALARS.items():
        entry[name] = mean_ci95([read(r["metrics"]) for r in ok])
    for group in ("classes", "aggregates", "rtts"):
        names = sorted({n for r in ok for n in r["metrics"][group]}, key=group_order)
        entry[group] = {n: {stat: mean_ci95([r["metrics"][group][n].get(stat) for r in ok if n in r["metrics"][group]])
                            for stat in ("mean_mbps", "total_mbps", "srtt_ms", "ping_rtt_ms")}
                        for n in names}
    entry["short_flows"] = _short_flow_summary(ok)
    entry["udp_flows"] = _udp_flow_summary(ok)
    entry["mptcp"] = _mptcp_summary(ok)
    phases = _phase_summary(ok)
    if phases:
        entry["phases"] = phases
    captures = _capture_summary(ok)
    if captures:
        entry["capture"] = captures
    reverse = [r["metrics"]["reverse"] for r in ok if r["metrics"].get("reverse")]
    if reverse:  # the reverse flows' own fairness and utilization (metrics.py, _reverse_metrics)
        entry["reverse"] = {stat: mean_ci95([m[stat] for m in reverse])
                            for stat in ("jain", "total_mbps", "utilization")}
    for key, out in (("drops", "drops_by_reason"), ("marks", "marks_by_reason")):
        reasons = sorted({k for r in ok for k in r["metrics"].get(key, {})})
        entry[out] = {k: mean_ci95([r["metrics"].get(key, {}).get(k, 0) for r in ok]) for k in reasons}
    return entry


PHASE_STATS = {"total_mbps": lambda p: p["total_mbps"], "utilization": lambda p: p["utilization"],
               "jain": lambda p: p["jain"], "queue_delay_mean_ms": lambda p: p["queue_delay_ms"]["mean"],
               "queue_delay_p95_ms": lambda p: p["queue_delay_ms"]["p95"], "rtt_mean_ms": lambda p: p["rtt_ms"]["mean"]}


def _phase_summary(ok: list[dict]) -> list[dict]:
    """Per part of the window between link changes (metrics.phase_metrics), in order: its mean
    bounds and rate over the runs, and the mean of each PHASE_STATS over them (with CIs)."""
    width = max((len(r["metrics"].get("phases", [])) for r in ok), default=0)
    out = []
    for k in range(width):
        parts = [r["metrics"]["phases"][k] for r in ok if len(r["metrics"].get("phases", [])) > k]
        mean = lambda key: mean_ci95([p[key] for p in parts])["mean"]  # noqa: E731
        out.append({"from_s": mean("from_s"), "to_s": mean("to_s"), "rate_mbps": mean("rate_mbps"),
                    "flows": max(p["flows"] for p in parts),
                    "runs": len(parts),
                    **{stat: mean_ci95([read(p) for p in parts])
                       for stat, read in PHASE_STATS.items()}})
    return out


UDP_STATS = ("loss_fraction", "owd_ms", "owd_p95_ms", "jitter_ms")


def _udp_flow_summary(ok: list[dict]) -> dict:
    """Per real-time flow: the mean over runs of each run's loss, one-way delay and jitter (with CIs)."""
    out: dict = {}
    for label in sorted({g for r in ok for g in r["metrics"].get("udp_flows", {})}):
        runs = [r["metrics"]["udp_flows"][label] for r in ok if label in r["metrics"].get("udp_flows", {})]
        out[label] = {stat: mean_ci95([m[stat] for m in runs if m[stat] is not None]) for stat in UDP_STATS}
        out[label]["runs"] = len(runs)
    return out


def _capture_summary(ok: list[dict]) -> dict:
    """Per link with a packet capture: the mean over runs of the sojourn percentiles measured from
    it, and of the drops it recorded (with CIs)."""
    out: dict = {}
    for name in sorted({n for r in ok for n in r["metrics"].get("capture", {})}):
        runs = [r["metrics"]["capture"][name] for r in ok
                if not (r["metrics"].get("capture", {}).get(name) or {}).get("error", True)]
        out[name] = {stat: mean_ci95([m["sojourn_ms"][stat] for m in runs]) for stat in ("mean", "p50", "p95", "p99")}
        out[name]["drops"] = mean_ci95([m["drops"] for m in runs])
        out[name]["runs"] = len(runs)
    return out


def _mptcp_summary(ok: list[dict]) -> dict:
    """Per MPTCP connection: the mean over runs of its goodput, its fair shares and each
    subflow's goodput (with CIs), and in how many runs every subflow carried data."""
    out: dict = {}
    for label in sorted({c for r in ok for c in r["metrics"].get("mptcp", {})}):
        runs = [r["metrics"]["mptcp"][label] for r in ok if label in r["metrics"].get("mptcp", {})]
        width = max(len(m["subflow_mbps"]) for m in runs)
        out[label] = {"mean_mbps": mean_ci95([m["mean_mbps"] for m in runs if m["mean_mbps"] is not None]),
                      "fair_shares": mean_ci95([m["fair_shares"] for m in runs if m["fair_shares"] is not None]),
                      "subflow_mbps": [mean_ci95([(m["subflow_mbps"][k] or 0.0) for m in runs
                                                  if k < len(m["subflow_mbps"])]) for k in range(width)],
                      "runs_all_subflows": sum(1 for m in runs if m["subflows_active"] == width), "runs": len(runs)}
    return out


def _short_flow_summary(ok: list[dict]) -> dict:
    """Per short-flow group and size: the mean over runs of each run's FCT p50/p95/p99 (with CIs)
    and the completed and started transfers summed over the runs."""
    out: dict = {}
    for label in sorted({g for r in ok for g in r["metrics"].get("short_flows", {})}):
        runs = [r["metrics"]["short_flows"][label] for r in ok if label in r["metrics"].get("short_flows", {})]
        sizes = sorted({s for m in runs for s in m["by_size_kb"]}, key=size_key)
        out[label] = {"started": sum(m["started"] for m in runs), "completed": sum(m["completed"] for m in runs),
                      "failed": sum(m["failed"] for m in runs),
                      "by_size_kb": {s: {p: mean_ci95([m["by_size_kb"][s][p] for m in runs
                                                       if s in m["by_size_kb"]]) for p in ("p50", "p95", "p99")}
                                     for s in sizes}}
    return out


PAPER = {"fairness_gain": 0.62, "latency_reduction": 0.92, "utilization": 0.96}


def full_buffer_ms(scenario: dict) -> float:
    """The queueing delay of a full bottleneck buffer: buffer_pkts MTU frames at the link rate."""
    link = scenario["link"]
    return link["buffer_pkts"] * 1514 * 8 / link["rate_bps"] * 1000


def headline(summary: list[dict], full_buffer: dict[str, float] | None = None) -> list[dict]:
    """Per scenario that ran both DropTail and CKCD (no approach): seed 000's headline numbers,
    ours. Fairness gain = Jain(CKCD)/Jain(DropTail) - 1; latency reduction = 1 - CKCD/DropTail,
    once for the mean queueing delay and once for the mean ping RTT; CKCD's utilization.
    "−92 % latency" has two readings in our lab, both given: CKCD's mean queueing delay against
    DropTail's mean, and against a full buffer (`full_buffer`: scenario -> ms, full_buffer_ms)."""
    by = {(e["scenario"], e["case"]): e for e in summary}
    rows = []
    for scenario in dict.fromkeys(e["scenario"] for e in summary):
        dt, ck = by.get((scenario, "droptail")), by.get((scenario, "ckcd"))
        if not dt or not ck or dt["jain"]["mean"] is None or ck["jain"]["mean"] is None:
            continue

        def reduction(key):
            a, b = dt[key]["mean"], ck[key]["mean"]
            return None if a in (None, 0) or b is None else 1 - b / a
        rows.append({"scenario": scenario, "jain_droptail": dt["jain"]["mean"], "jain_ckcd": ck["jain"]["mean"],
                     "fairness_gain": ck["jain"]["mean"] / dt["jain"]["mean"] - 1,
                     "queue_delay_droptail_ms": dt["queue_delay_mean_ms"]["mean"],
                     "queue_delay_ckcd_ms": ck["queue_delay_mean_ms"]["mean"],
                     "queue_delay_reduction": reduction("queue_delay_mean_ms"),
                     "full_buffer_ms": (full_buffer or {}).get(scenario),
                     "queue_delay_vs_full_buffer": None if not (full_buffer or {}).get(scenario)
                     or ck["queue_delay_mean_ms"]["mean"] is None
                     else 1 - ck["queue_delay_mean_ms"]["mean"] / full_buffer[scenario],
                     "rtt_droptail_ms": dt["rtt_mean_ms"]["mean"], "rtt_ckcd_ms": ck["rtt_mean_ms"]["mean"],
                     "rtt_reduction": reduction("rtt_mean_ms"),
                     "utilization_droptail": dt["utilization"]["mean"],
                     "utilization_ckcd": ck["utilization"]["mean"],
                     "runs_droptail": _counts(dt), "runs_ckcd": _counts(ck),
                     "few_trusted": dt["few_trusted"] or ck["few_trusted"],
                     "includes_untrusted": dt["includes_untrusted"] or ck["includes_untrusted"]})
    return rows


def _counts(entry: dict) -> dict:
    return {k: entry[k] for k in ("runs", "trusted", "pooled")}
