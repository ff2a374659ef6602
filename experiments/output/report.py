"""Results on disk: results.json, summary.csv, flows.csv, timeseries.csv, report.md and PNG plots.

`write_report(out_dir, records)` renders everything from the run records; `ckcd-coex report DIR`
calls it on the records saved under DIR/runs, so a report can be re-rendered (or rendered with a
changed warm-up or plot style) without running the lab again.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import platform

from experiments.analysis import metrics as analysis
from experiments.analysis.fidelity import RTT_EXCESS_MAX_MS
from experiments.analysis.summary import MIN_TRUSTED, PAPER, SCALARS, full_buffer_ms, headline, summarize
from experiments.batch.plan import read_batch_file
from experiments.batch.provenance import version_label
from experiments.output.text import fmt
from experiments.scenario.model import Scenario

CC_COLORS = {"bbr": "tab:blue", "cubic": "tab:orange", "reno": "tab:green"}
CASE_ORDER = ("droptail", "red", "codel", "choke", "ckcd")
STATISTICS = (f"means over runs ± the half-width of their 95 % confidence interval (Student's t with n - 1 degrees "
              f"of freedom, n = the runs pooled; no ± with one run); only trusted runs are pooled unless the report "
              f"says otherwise; a case with fewer than {MIN_TRUSTED} trusted runs is marked")


def write_report(out_dir: str, records: list[dict], command: str | None = None, *,
                 include_untrusted: bool = False, batches: list[dict] | None = None) -> dict:
    """Recompute metrics from the records, write every output file; returns the summary.
    Means pool trusted runs only unless include_untrusted. `batches`: the batch files the
    records came from (default: out_dir's own)."""
    for rec in records:
        if not rec.get("error"):
            rec["metrics"] = analysis.run_metrics(rec)
    summary = summarize(records, include_untrusted=include_untrusted)
    if batches is None:
        own = read_batch_file(out_dir)
        batches = [own] if own else []
    head = headline(summary, {r["scenario"]["name"]: full_buffer_ms(r["scenario"]) for r in records})
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"generated": datetime.datetime.now().isoformat(timespec="seconds"), "command": command,
                   "paper": PAPER, "statistics": STATISTICS, "include_untrusted": include_untrusted,
                   "headline": head, "summary": summary,
                   "runs": [{"scenario": r["scenario"]["name"], "case": r["case"]["name"], "rep": r["rep"],
                             "batch_id": r.get("batch_id"), "qdisc": r.get("qdisc"), "error": r.get("error"),
                             "metrics": r.get("metrics")}
                            for r in records]}, f, indent=1)
    _summary_csv(os.path.join(out_dir, "summary.csv"), summary)
    _flows_csv(os.path.join(out_dir, "flows.csv"), records)
    _timeseries_csv(os.path.join(out_dir, "timeseries.csv"), records)
    plots = _plots(out_dir, records, summary)
    _markdown(os.path.join(out_dir, "report.md"), records, summary, head, plots, command, batches)
    return {"summary": summary, "headline": head, "plots": plots}


# --- CSV ---------------------------------------------------------------------------------------------

def _summary_csv(path: str, summary: list[dict]) -> None:
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


def _flows_csv(path: str, records: list[dict]) -> None:
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


def _timeseries_csv(path: str, records: list[dict]) -> None:
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


# --- plots --------------------------------------------------------------------------------------------

def _plots(out_dir: str, records: list[dict], summary: list[dict]) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir = os.path.join(out_dir, "plots")
    os.makedirs(plot_dir, exist_ok=True)
    plots: dict = {}
    scenarios = list(dict.fromkeys(r["scenario"]["name"] for r in records))
    for name in scenarios:
        first = {}
        measured = [r for r in records if r["scenario"]["name"] == name and r.get("metrics")]
        # each case's first trusted run, or its first measured one where none was trusted
        for r in sorted(measured, key=lambda r: not r["metrics"]["fidelity"]["trusted"]):
            first.setdefault(r["case"]["name"], r)
        first = {case: first[case] for case in dict.fromkeys(r["case"]["name"] for r in measured)}
        if not first:
            continue
        plots[name] = []
        path = os.path.join(plot_dir, f"{name}_timeseries.png")
        _timeseries(plt, path, list(first.values()))
        plots[name].append(os.path.relpath(path, out_dir))
        if any(f.get("tcp_info") for r in first.values() for f in r["flows"]):
            path = os.path.join(plot_dir, f"{name}_flows.png")
            _flow_dynamics(plt, path, list(first.values()))
            plots[name].append(os.path.relpath(path, out_dir))
        entries = [e for e in summary if e["scenario"] == name and e["jain"]["n"]]
        if entries:
            path = os.path.join(plot_dir, f"{name}_bars.png")
            _bars(plt, path, entries)
            plots[name].append(os.path.relpath(path, out_dir))
    return plots


def _timeseries(plt, path: str, records: list[dict]) -> None:
    """Seed 000 Fig. 5(a)-(e) / Fig. 8: throughput of each flow and delay over time, one row per case;
    where a case ran CKCD, a third column shows its mechanism (_ckcd_thresholds)."""
    n = len(records)
    ckcd = any(link.get("ckcd") for r in records for link in r["links"].values())
    fig, axes = plt.subplots(n, 3 if ckcd else 2, figsize=(18 if ckcd else 12, 2.6 * n), squeeze=False)
    for row, rec in zip(axes, records):
        ax_t, ax_d = row[:2]
        if ckcd:
            _ckcd_thresholds(row[2], rec)
        m = rec["metrics"]
        many = len(rec["flows"]) > 5
        seen = set()
        for f in rec["flows"]:
            if not f["goodput"]:
                continue
            t, v = [p[0] for p in f["goodput"]], [p[1] for p in f["goodput"]]  # (t, Mbit/s, seconds)
            color = CC_COLORS.get(f["cc"]) if many else None
            label = f["cc"] if many else f["label"]
            ax_t.plot(t, v, lw=1, color=color, label=None if label in seen else label)
            seen.add(label)
        ax_t.axvspan(*m["window_s"], color="0.93", zorder=0)
        ax_t.set_ylabel("Mbit/s")
        ax_t.set_title(f"{rec['case']['name']}: throughput (Jain {m['jain']:.2f})", fontsize=9)
        ax_t.legend(fontsize=7, loc="upper right", ncol=3)
        for name, link in rec["links"].items():
            pts = _smooth([(r["t"], r["sojourn_ms"]) for r in link["series"]
                           if r["sojourn_ms"] is not None and r["t"] >= 0], 1.0)
            if pts:
                t, v = zip(*pts)
                ax_d.plot(t, v, lw=1, label=f"queueing delay {name}")
        if rec.get("ping"):
            t, v = zip(*rec["ping"])
            ax_d.plot(t, v, lw=0.7, color="0.4", label="ping RTT")
        ax_d.axvspan(*m["window_s"], color="0.93", zorder=0)
        ax_d.set_ylabel("ms")
        ax_d.set_ylim(bottom=0)
        ax_d.set_xlim(left=0)
        ax_d.set_title(f"{rec['case']['name']}: delay (queue mean {fmt(m['queue_delay_ms']['mean'])} ms, "
                       f"RTT {fmt(m['rtt_ms']['mean'])} ms)", fontsize=9)
        ax_d.legend(fontsize=7, loc="upper right")
    for ax in axes[-1]:
        ax.set_xlabel("time (s); shaded: measurement window")
    sc = records[0]["scenario"]
    fig.suptitle(f"{sc['title']} - {sc['link']['rate_bps'] / 1e6:g} Mbit/s, {sc['link']['delay_ms']:g} ms, "
                 f"{sc['link']['buffer_pkts']} packets", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _flow_dynamics(plt, path: str, records: list[dict]) -> None:
    """Per case: each flow's cwnd and sRTT over time (the kernel's, ss -tin), and Jain's index
    over the flows sending in each second."""
    n = len(records)
    fig, axes = plt.subplots(n, 3, figsize=(18, 2.6 * n), squeeze=False)
    for (ax_c, ax_r, ax_j), rec in zip(axes, records):
        many = len(rec["flows"]) > 5
        seen = set()
        base_rtt = {m["label"]: m.get("base_rtt_ms") for m in rec["metrics"]["flows"]}
        rtts_differ = len(set(base_rtt.values())) > 1
        for f in rec["flows"]:
            rows = f.get("tcp_info") or []
            label = (f["cc"] if many else f["label"]) + \
                (f" {base_rtt[f['label']]:g} ms" if rtts_differ and base_rtt.get(f["label"]) else "")
            color = CC_COLORS.get(f["cc"]) if many else None
            for ax, col in ((ax_c, 2), (ax_r, 1)):
                pts = [(row[0], row[col]) for row in rows if row[col] is not None]
                if pts:
                    t, v = zip(*pts)
                    ax.plot(t, v, lw=0.8, color=color, label=None if label in seen else label)
            seen.add(label)
        jain = analysis.jain_series(rec["flows"])
        if jain:
            t, v = zip(*jain)
            ax_j.plot(t, v, lw=1, color="0.3")
        for ax, unit, what in ((ax_c, "packets", "cwnd"), (ax_r, "ms", "sRTT"), (ax_j, "Jain", "Jain's index")):
            ax.axvspan(*rec["metrics"]["window_s"], color="0.93", zorder=0)
            ax.set_ylabel(unit)
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            ax.set_title(f"{rec['case']['name']}: {what}", fontsize=9)
        ax_j.set_ylim(0, 1.02)
        ax_c.legend(fontsize=7, loc="upper right", ncol=3)
    for ax in axes[-1]:
        ax.set_xlabel("time (s); shaded: measurement window")
    fig.suptitle(f"{records[0]['scenario']['title']}: per-flow TCP state", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _ckcd_thresholds(ax, rec: dict) -> None:
    """Seed 000's Algorithm 1 at work: each flow's delay threshold d_th (log scale: it spans
    dth_min_ms to dth_max_ms) and, in gray on the right axis, the active-flow count I behind
    mu_f = C / I - which counts every flow of a window, pings and control connections too."""
    points = next((link["ckcd"] for link in rec["links"].values() if link.get("ckcd")), [])
    if not points:
        ax.set_axis_off()
        ax.set_title(f"{rec['case']['name']}: not CKCD", fontsize=9)
        return
    many = len(rec["flows"]) > 5
    seen = set()
    for f in rec["flows"]:
        pts = [(p["t"], p["flows"][f["key"]][1]) for p in points if f.get("key") in p["flows"]]
        if not pts:
            continue
        t, v = zip(*pts)
        label = f["cc"] if many else f["label"]
        ax.plot(t, v, lw=0.8, color=CC_COLORS.get(f["cc"]) if many else None,
                label=None if label in seen else label)
        seen.add(label)
    ax.set_yscale("log")
    ax.set_ylabel("d_th (ms)")
    ax.set_xlim(left=0)
    ax.axvspan(*rec["metrics"]["window_s"], color="0.93", zorder=0)
    twin = ax.twinx()
    twin.step([p["t"] for p in points], [p["active"] for p in points], where="post", color="0.55", lw=0.8)
    twin.set_ylabel("I (active flows)", color="0.4")
    twin.set_ylim(bottom=0)
    ax.set_title(f"{rec['case']['name']}: CKCD d_th per flow; I in gray", fontsize=9)
    if seen:
        ax.legend(fontsize=7, loc="upper left", ncol=3)


def _smooth(points, width_s: float):
    """Means over consecutive width_s bins (the 100 ms log is too jagged to read)."""
    out, acc, start = [], [], None
    for t, v in points:
        if start is None:
            start = t
        if t - start >= width_s and acc:
            out.append((start + width_s / 2, sum(acc) / len(acc)))
            acc, start = [], t
        acc.append(v)
    if acc:
        out.append((start + width_s / 2, sum(acc) / len(acc)))
    return out


def _bars(plt, path: str, entries: list[dict]) -> None:
    """Seed 000 Fig. 5(f)(g), 6, 7: fairness, throughput per class, delay per case, with 95 % CIs."""
    import numpy as np

    names = [e["case"] for e in entries]
    x = np.arange(len(names))
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(14, 3.6))

    def err(stat):
        return 0 if stat["ci95"] is None else stat["ci95"]
    a1.bar(x, [e["jain"]["mean"] for e in entries], yerr=[err(e["jain"]) for e in entries], color="tab:purple")
    a1.set_ylim(0, 1.05)
    a1.set_title("Jain's fairness index", fontsize=9)
    groups = sorted({c for e in entries for c in (e["aggregates"] or e["classes"])})
    key = "aggregates" if any(e["aggregates"] for e in entries) else "classes"
    width = 0.8 / (len(groups) + 1)
    for k, g in enumerate(groups):
        vals = [e[key].get(g, {}).get("total_mbps", {}).get("mean") or 0 for e in entries]
        a2.bar(x + (k - len(groups) / 2) * width, vals, width, label=g, color=CC_COLORS.get(g))
    a2.bar(x + (len(groups) / 2) * width, [e["total_mbps"]["mean"] for e in entries], width,
           yerr=[err(e["total_mbps"]) for e in entries], label="total", color="0.6")
    a2.set_title(f"throughput per {'aggregate' if key == 'aggregates' else 'congestion control'} (Mbit/s)",
                 fontsize=9)
    a2.legend(fontsize=7)
    w = 0.38
    a3.bar(x - w / 2, [e["queue_delay_mean_ms"]["mean"] or 0 for e in entries], w,
           yerr=[err(e["queue_delay_mean_ms"]) for e in entries], label="queueing delay (mean)")
    a3.bar(x + w / 2, [e["rtt_mean_ms"]["mean"] or 0 for e in entries], w,
           yerr=[err(e["rtt_mean_ms"]) for e in entries], label="ping RTT (mean)")
    a3.set_title("delay (ms)", fontsize=9)
    a3.legend(fontsize=7)
    for ax in (a1, a2, a3):
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=20, fontsize=8)
    fig.suptitle(entries[0]["scenario"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- Markdown -------------------------------------------------------------------------------------------

def _ci(stat: dict, digits: int = 1, scale: float = 1.0) -> str:
    if stat["mean"] is None:
        return "n/a"
    s = f"{stat['mean'] * scale:.{digits}f}"
    return s + (f" ± {stat['ci95'] * scale:.{digits}f}" if stat["ci95"] is not None else "")


def _pct(v) -> str:
    return "n/a" if v is None else f"{100 * v:+.0f} %"


def headline_table(head: list[dict]) -> list[str]:
    lines = ["| scenario | Jain DropTail | Jain CKCD | fairness vs DropTail (paper: up to +62 %) | "
             "queueing delay DropTail → CKCD (paper: up to −92 % latency) | ping RTT DropTail → CKCD | "
             "CKCD utilization (paper: 96 %) | trusted / runs DropTail, CKCD |", "|---|---|---|---|---|---|---|---|"]
    for h in head:
        lines.append(
            f"| {h['scenario']} | {h['jain_droptail']:.3f} | {h['jain_ckcd']:.3f} | {_pct(h['fairness_gain'])} | "
            f"{fmt(h['queue_delay_droptail_ms'], 2)} → {fmt(h['queue_delay_ckcd_ms'], 2)} ms "
            f"({_pct(h['queue_delay_reduction'] and -h['queue_delay_reduction'])}"
            + (f"; {_pct(-h['queue_delay_vs_full_buffer'])} against a full buffer, "
               f"{fmt(h['full_buffer_ms'], 1)} ms" if h.get("queue_delay_vs_full_buffer") is not None else "")
            + ") | "
            f"{fmt(h['rtt_droptail_ms'])} → {fmt(h['rtt_ckcd_ms'])} ms "
            f"({_pct(h['rtt_reduction'] and -h['rtt_reduction'])}) | "
            f"{fmt(h['utilization_ckcd'] and 100 * h['utilization_ckcd'], 0)} % | "
            f"{_counts_cell(h['runs_droptail'])}, {_counts_cell(h['runs_ckcd'])}{_warning(h)} |")
    return lines


def _counts_cell(counts: dict) -> str:
    return f"{counts['trusted']} / {counts['runs']}"


def _warning(entry: dict) -> str:
    """What a reader must know before quoting a row: too few trusted runs, untrusted ones pooled."""
    notes = ([f"fewer than {MIN_TRUSTED} trusted"] if entry["few_trusted"] else []) + \
        (["untrusted runs pooled"] if entry["includes_untrusted"] else [])
    return f" (**{'; '.join(notes)}**)" if notes else ""


def trust_notes(entries: list[dict]) -> list[str]:
    """Below a table: the runs its means leave out (or pool, with --include-untrusted) and why."""
    lines = []
    for e in entries:
        verb = "pooled although untrusted" if e["includes_untrusted"] else "left out"
        for run in e["untrusted_runs"]:
            lines.append(f"- {e['case']} {run['run']}: {verb}: {'; '.join(run['reasons'])}")
        if e["failed"]:
            lines.append(f"- {e['case']}: {e['failed']} failed run(s): {'; '.join(e['errors'])}")
    return ["", "Runs not in the means:" if lines and not any(e["includes_untrusted"] for e in entries)
            else "Untrusted and failed runs:", ""] + lines if lines else []


def case_table(entries: list[dict]) -> list[str]:
    groups = sorted({g for e in entries for g in e["classes"]})
    aggs = sorted({a for e in entries for a in e["aggregates"]})
    # flows of different base RTTs (access delays): each RTT's mean rate and min RTT
    rtts = sorted({g for e in entries for g in e["rtts"]}, key=analysis.group_order)
    rtts = rtts if len(rtts) > 1 else []
    # ECN marks only where some case marked (a discipline with ecn=1 and ECN-capable flows)
    marks = any(v["mean"] for e in entries for v in e.get("marks_by_reason", {}).values())
    head = ["case", "Jain"] + [f"{g} Mbit/s/flow" for g in groups] + [f"{a} Mbit/s, sRTT ms" for a in aggs] + \
           [f"{g}: Mbit/s/flow" for g in rtts] + \
           ["total Mbit/s", "util.", "queue delay mean / p95 / p99 ms", "RTT mean / p95 / p99 ms", "drops"] + \
           (["ECN marks"] if marks else []) + ["CPU %", "trusted / runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        drops = ", ".join(f"{k} {v['mean']:.0f}" for k, v in e["drops_by_reason"].items() if v["mean"]) or "0"
        cells = [e["case"], _ci(e["jain"], 3)]
        cells += [_ci(e["classes"][g]["mean_mbps"]) if g in e["classes"] else "" for g in groups]
        cells += [f"{_ci(e['aggregates'][a]['total_mbps'])}, {_ci(e['aggregates'][a]['srtt_ms'])}"
                  if a in e["aggregates"] else "" for a in aggs]
        cells += [_ci(e["rtts"][g]["mean_mbps"]) if g in e["rtts"] else "" for g in rtts]
        cells += [_ci(e["total_mbps"]), _ci(e["utilization"], 0, 100) + " %",
                  " / ".join(fmt(e[k]["mean"], 2) for k in ("queue_delay_mean_ms", "queue_delay_p95_ms",
                                                            "queue_delay_p99_ms")),
                  " / ".join(fmt(e[k]["mean"]) for k in ("rtt_mean_ms", "rtt_p95_ms", "rtt_p99_ms")),
                  drops]
        if marks:
            cells.append(", ".join(f"{k} {v['mean']:.0f}" for k, v in e["marks_by_reason"].items() if v["mean"])
                         or "0")
        cells += [fmt(e["cpu_mean_pct"]["mean"], 0), _counts_cell(e) + _warning(e)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def short_flow_table(entries: list[dict]) -> list[str]:
    head = ["case", "short flows", "size KB", "completed / started (failed)", "FCT p50 ms", "p95 ms", "p99 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        for label, g in e.get("short_flows", {}).items():
            for size, p in g["by_size_kb"].items():
                lines.append("| " + " | ".join([e["case"], label, size, f"{g['completed']} / {g['started']} "
                                                 f"({g['failed']})", _ci(p["p50"]), _ci(p["p95"]), _ci(p["p99"])])
                             + " |")
    return lines


def _markdown(path: str, records, summary, head, plots, command, batches: list[dict]) -> None:
    base_rtt = {r["scenario"]["name"]: 2 * r["scenario"]["link"]["delay_ms"] for r in records}
    pooled_untrusted = any(e["includes_untrusted"] for e in summary)
    lines = _introduction(command, head, base_rtt, pooled_untrusted) + _provenance_lines(batches, records)
    for name in dict.fromkeys(e["scenario"] for e in summary):
        lines += _scenario_section(name, records, [e for e in summary if e["scenario"] == name], plots.get(name, []))
    lines += _fidelity_section(records)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _batch_line(batch: dict) -> str:
    order = f"order shuffled by seed {batch['seed']}" if batch.get("shuffled") else "run in the order written"
    part = (f"merged from {len(batch['merged_from'])} shards" if batch.get("merged_from") else
            f"shard {batch['shard']['index']}/{batch['shard']['count']}" if batch["shard"]["count"] > 1 else
            "one machine")
    missing = f"; **{len(batch['missing'])} runs missing**" if batch.get("missing") else ""
    return (f"Batch `{batch['batch_id']}` (grid `{batch['grid_id']}`): {len(batch['plan'])} runs, {order}, "
            f"{part}{missing}; project commit {version_label(batch['project'])}.")


def _provenance_lines(batches: list[dict], records: list[dict]) -> list[str]:
    """Which batches these runs are, and what made them: the batch files' ids and the runs' own
    provenance (a merge or a pooled report can bring runs from several machines and versions)."""
    lines = []
    for batch in batches:
        lines += ["", _batch_line(batch)]
    made = [r.get("provenance") or {} for r in records]
    versions: dict[str, int] = {}
    for p in made:
        if p.get("project"):
            versions[version_label(p["project"])] = versions.get(version_label(p["project"]), 0) + 1
    hosts = sorted({p.get("host") for p in made if p.get("host")})
    kernels = sorted({p.get("kernel") for p in made if p.get("kernel")})
    if hosts or kernels:
        lines += ["", f"Runs made on {', '.join(hosts) or 'an unrecorded host'} (Linux {', '.join(kernels) or '?'}); "
                      "each run's run.json holds its full provenance: sysctls, tool versions, discipline specs."]
    if len(versions) > 1:
        lines += ["", "**Runs of several project versions are pooled here:** "
                  + ", ".join(f"{v} ({n} runs)" for v, n in sorted(versions.items()))
                  + " (`ckcd-coex report --same-version` refuses this)."]
    return lines


def _introduction(command: str | None, head: list[dict], base_rtt_ms: dict[str, float],
                  pooled_untrusted: bool = False) -> list[str]:
    """Where and how the report was made, how to read its numbers, and the headline against the paper."""
    lines = ["# ckcd-coex experiment report", "",
             f"Generated {datetime.datetime.now().isoformat(timespec='seconds')} on {platform.node()} "
             f"({os.cpu_count()} cores, Linux {platform.release()})."]
    if command:
        lines += ["", f"Command: `{command}`"]
    pooled = ("**Untrusted runs are pooled into these means (--include-untrusted)**; each table lists them"
              if pooled_untrusted else "Only trusted runs are pooled (column \"trusted / runs\"); each table lists "
              "the untrusted runs it leaves out and why")
    lines += ["", f"Values are means over runs ± the half-width of their 95 % confidence interval (Student's t with "
              f"n − 1 degrees of freedom, n = the runs pooled; no ± with one run). {pooled}; a case with fewer than "
              f"{MIN_TRUSTED} trusted runs is marked. Each run's values are taken "
              "over its scenario's measurement window (warm-up skipped). Throughput is "
              "TCP goodput (the ceiling is 95.6 % of the link rate); queueing delay is ckcd-link's sojourn "
              "time at the bottleneck; RTT is ping's (base RTT = 2 × the link delay, plus the access delays of "
              "its hosts where a scenario gives them). See docs/experiments.md."]
    if head:
        lines += ["", "## Against the paper (seed 000, CKCD vs DropTail)", ""] + headline_table(head)
        floors = sorted({base_rtt_ms[h["scenario"]] for h in head if h["scenario"] in base_rtt_ms})
        floor = " or ".join(f"{f:g} ms" for f in floors) or "2 × the link delay"
        lines += ["", "The paper's latency is end-to-end delay measured on its own testbed; here the base RTT "
                  f"(2 × the link delay: {floor}) is the same for every discipline, so the reduction of the "
                  "*queueing* delay is the comparable number and the RTT reduction is bounded by that floor."]
    return lines


def _scenario_section(name: str, records, entries: list[dict], plots: list[str]) -> list[str]:
    """One scenario: its setup and flows, the table of its cases, its plots."""
    sc = next(r["scenario"] for r in records if r["scenario"]["name"] == name)
    w = next((r["metrics"]["window_s"] for r in records if r["scenario"]["name"] == name and r.get("metrics")),
             None)
    lines = ["", f"## {sc['title']} (`{name}`)", "",
             (f"{sc['source']}. " if sc.get("source") else "") + f"Topology {sc['topology']}; link {sc['link']['rate_bps'] / 1e6:g} Mbit/s, "
             f"{sc['link']['delay_ms']:g} ms each way, buffer {sc['link']['buffer_pkts']} packets; "
             f"{sc['duration_s']:g} s per run"
             + (f", measured over {w[0]:g}-{w[1]:g} s" if w else "") + f". Flows: {_flow_list(sc)}."]
    if sc.get("grid_point"):
        lines += ["", "Grid point: " + ", ".join(f"`{k} = {json.dumps(v)}`" for k, v in sc["grid_point"].items())
                  + "."]
    if sc.get("notes"):
        lines += ["", sc["notes"]]
    lines += [""] + case_table(entries) + trust_notes(entries)
    if any(e.get("short_flows") for e in entries):
        lines += ["", "Short flows: completion time (connect to last byte) of the transfers started in the "
                  "window, mean over runs of each run's percentiles; unfinished transfers were still running "
                  "when the run ended.", ""] + short_flow_table(entries)
    for p in plots:
        lines += ["", f"![{os.path.basename(p)}]({p})"]
    return lines


def _flow_list(sc: dict) -> str:
    """`label src→dst`, with the base RTT where access delays make the flows' differ, the
    aggregate, the rate of an application-limited flow, and start-stop where they are not the
    whole run."""
    scenario = Scenario.from_dict(sc)

    def rtt(f) -> str:
        return f" ({scenario.base_rtt_ms(f['src'], f['dst']):g} ms RTT)" if scenario.access_delay_ms else ""
    return ", ".join(f"{f['label']} {f['src']}→{f['dst']}" + rtt(f)
                     + (f" [{f['aggregate']}]" if f.get("aggregate") else "")
                     + (f" at {f['rate_bps'] / 1e6:g} Mbit/s" if f.get("rate_bps") else "")
                     + (f" {f['start_s']:g}-{f['stop_s']:g} s" if f["start_s"] or f["stop_s"] != sc["duration_s"]
                        else "") for f in sc["flows"])


def _fidelity_section(records) -> list[str]:
    """Which runs were untrusted or failed and why, and the CPU over all runs."""
    bad = [(r, r["metrics"]["fidelity"]["reasons"]) for r in records
           if r.get("metrics") and not r["metrics"]["fidelity"]["trusted"]]
    failed = [r for r in records if r.get("error")]
    lines = ["", "## Fidelity", ""]
    if not bad and not failed:
        lines.append("Every run was trusted: the CPU was never saturated for more than 10 % of a run, ckcd-link "
                     "kept its schedule (≤ 5 % of releases more than 1 ms late, mean ≤ 1 ms) and ping's RTT was "
                     f"within {RTT_EXCESS_MAX_MS:g} ms of what the emulated link explains.")
    for r, reasons in bad:
        lines.append(f"- untrusted: {r['scenario']['name']}/{r['case']['name']} rep {r['rep']}: {'; '.join(reasons)}")
    for r in failed:
        lines.append(f"- failed: {r['scenario']['name']}/{r['case']['name']} rep {r['rep']}: {r['error']}")
    cpu = [r["metrics"]["cpu"] for r in records if r.get("metrics")]
    if cpu:
        lines += ["", f"CPU over all runs: machine {fmt(_avg(c['mean_pct'] for c in cpu), 0)} % of "
                  f"{os.cpu_count()} cores on average (steal {fmt(_avg(c['steal_mean_pct'] for c in cpu), 1)} %), "
                  f"ovs-vswitchd {fmt(_avg(c['vswitchd_core_pct'] for c in cpu), 0)} % of a core, ckcd-link "
                  f"{fmt(_avg(c['links_core_pct'] for c in cpu), 0)} % of a core."]
    return lines


def _avg(values):
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
