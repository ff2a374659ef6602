"""The report's CSV files: one row per case (summary.csv), per flow of a run (flows.csv), and every
time series in long form (timeseries.csv)."""

from __future__ import annotations

import csv

from experiments.analysis import metrics as analysis
from experiments.analysis.summary import SCALARS


def summary_csv(path: str, summary: list[dict]) -> None:
    classes = sorted({c for e in summary for c in e["classes"]})
    aggs = sorted({a for e in summary for a in e["aggregates"]})
    head = ["scenario", "case", "discipline", "approach", "runs", "trusted", "pooled", "includes_untrusted"]
    for name in SCALARS:
        head += [name, f"{name}_ci95"]
    head += [f"{c}_mean_mbps" for c in classes] + [f"{a}_total_mbps" for a in aggs] + [f"{a}_srtt_ms" for a in aggs]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for e in summary:
            row = [e["scenario"], e["case"], e["discipline"], e["approach"], e["runs"], e["trusted"], e["pooled"],
                   int(e["includes_untrusted"])]
            for name in SCALARS:
                row += [_csv_num(e[name]["mean"]), _csv_num(e[name]["ci95"])]
            row += [_csv_num(e["classes"].get(c, {}).get("mean_mbps", {}).get("mean")) for c in classes]
            row += [_csv_num(e["aggregates"].get(a, {}).get("total_mbps", {}).get("mean")) for a in aggs]
            row += [_csv_num(e["aggregates"].get(a, {}).get("srtt_ms", {}).get("mean")) for a in aggs]
            w.writerow(row)


def flows_csv(path: str, records: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", "case", "rep", "batch_id", "trusted", "flow", "cc", "aggregate", "mean_mbps",
                    "srtt_mean_ms",
                    "srtt_p95_ms", "base_rtt_ms", "min_rtt_ms", "cwnd_mean_pkts", "retransmits", "link_drops",
                    "link_marks", "ecn", "error"])
        for r in records:
            for fl in (r.get("metrics") or {}).get("flows", []):
                w.writerow([r["scenario"]["name"], r["case"]["name"], r["rep"], r.get("batch_id") or "",
                            int(r["metrics"]["fidelity"]["trusted"]), fl["label"], fl["cc"],
                            fl["aggregate"] or "", _csv_num(fl["mean_mbps"]), _csv_num(fl["srtt_ms"]["mean"]),
                            _csv_num(fl["srtt_ms"]["p95"]), _csv_num(fl.get("base_rtt_ms")),
                            _csv_num(fl.get("min_rtt_ms")), _csv_num((fl.get("cwnd_pkts") or {}).get("mean")),
                            fl["retransmits"], fl["link_drops"], fl.get("link_marks", 0),
                            int(bool(fl.get("ecn"))), fl["error"] or ""])


def timeseries_csv(path: str, records: list[dict]) -> None:
    """Every run's time series in long form, one value a row: each flow's goodput (iperf3's
    receiver, per second), sRTT, cwnd and min RTT (the kernel's, every tcp_info_interval_s),
    Jain's index over the flows sending in each second (flow "all"), and each completed short
    transfer's completion time at its start (series fct_ms_<size>kb)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", "case", "rep", "flow", "cc", "t_s", "series", "value"])
        for r in records:
            if not r.get("flows"):
                continue
            head = [r["scenario"]["name"], r["case"]["name"], r["rep"]]
            for fl in r["flows"]:
                for t, mbps, *_ in fl.get("goodput", []):
                    w.writerow(head + [fl["label"], fl["cc"], t, "goodput_mbps", _csv_num(mbps)])
                for t, srtt, cwnd, min_rtt, *_ in fl.get("tcp_info") or []:
                    for name, v in (("srtt_ms", srtt), ("cwnd_pkts", cwnd), ("min_rtt_ms", min_rtt)):
                        if v is not None:
                            w.writerow(head + [fl["label"], fl["cc"], t, name, _csv_num(v)])
            for t, j in analysis.jain_series(r["flows"]):
                w.writerow(head + ["all", "", t, "jain", _csv_num(j)])
            for g in r.get("short_flows", []):  # one row per completed transfer, at its start
                for x in g["transfers"]:
                    if x.get("ok"):
                        w.writerow(head + [g["label"], g["cc"], x["t"], f"fct_ms_{x['size'] / 1000:g}kb",
                                           _csv_num(x["fct_ms"])])


def _csv_num(v):
    return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)
