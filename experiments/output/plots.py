"""The report's plots (matplotlib, Agg): throughput and delay over time, per-flow TCP state, CKCD's
thresholds, bars of each case's means with their CIs (seed 000's Figs. 5-8), and each flow's
throughput against its delay (Pantheon's picture)."""

from __future__ import annotations

import os

from experiments.analysis import metrics as analysis
from experiments.output.text import fmt


CC_COLORS = {"bbr": "tab:blue", "cubic": "tab:orange", "reno": "tab:green"}


def plots_of(out_dir: str, records: list[dict], summary: list[dict]) -> dict:
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
        trusted = [r for r in measured if r["metrics"]["fidelity"]["trusted"]]
        if trusted:
            path = os.path.join(plot_dir, f"{name}_throughput_delay.png")
            _throughput_delay(plt, path, trusted)
            plots[name].append(os.path.relpath(path, out_dir))
    return plots


CASE_MARKERS = "os^Dv<>pP*"


def _throughput_delay(plt, path: str, records: list[dict]) -> None:
    """Pantheon's picture: each flow of each trusted run at its mean goodput (up) against the 95th
    percentile of its sRTT (the delay axis runs right to left, so better is up and right), one
    marker per case, one colour per congestion control."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    cases = list(dict.fromkeys(r["case"]["name"] for r in records))
    seen = set()
    for r in records:
        marker = CASE_MARKERS[cases.index(r["case"]["name"]) % len(CASE_MARKERS)]
        for f in r["metrics"]["flows"]:
            delay, rate = f["srtt_ms"]["p95"], f["mean_mbps"]
            if delay is None or rate is None:
                continue
            label = f"{r['case']['name']}: {f['cc']}"
            ax.scatter(delay, rate, marker=marker, color=CC_COLORS.get(f["cc"], "0.4"), alpha=0.75,
                       label=None if label in seen else label)
            seen.add(label)
    ax.invert_xaxis()
    ax.set_xlabel("sRTT, 95th percentile (ms)")
    ax.set_ylabel("goodput (Mbit/s)")
    n = len(records)
    ax.set_title(f"{records[0]['scenario']['name']}: each flow of {n} trusted run{'s' if n != 1 else ''}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


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
        # n on every bar group: a mean of fewer than three trusted runs says so where it is drawn
        ax.set_xticklabels([f"{e['case']}\n{e['trusted']}/{e['runs']} trusted" + (" (!)" if e["few_trusted"] else "")
                            for e in entries], rotation=20, fontsize=8)
    fig.suptitle(entries[0]["scenario"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
