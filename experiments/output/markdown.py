"""report.md: how to read it, the headline against the paper, a section per scenario with its
cases' table and the runs it leaves out, and the fidelity of every run."""

from __future__ import annotations

import copy
import datetime
import json
import os
import platform

from experiments.analysis import metrics as analysis
from experiments.analysis.fidelity import RTT_EXCESS_MAX_MS, SCHEDULE_MAX_LATE_MEAN_US, SCHEDULE_MAX_OVER_1MS_FRACTION
from experiments.analysis.summary import MIN_TRUSTED
from experiments.batch.provenance import version_label
from experiments.output.text import fmt
from experiments.scenario.model import Scenario


def ci_cell(stat: dict, digits: int = 1, scale: float = 1.0) -> str:
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


def _rtt_group_cell(group: dict) -> str:
    ping = group.get("ping_rtt_ms") or {}
    return ci_cell(group["mean_mbps"]) + (f", {ci_cell(ping)}" if ping.get("mean") is not None else "")


def case_table(entries: list[dict]) -> list[str]:
    groups = sorted({g for e in entries for g in e["classes"]})
    aggs = sorted({a for e in entries for a in e["aggregates"]})
    # flows of different base RTTs (access delays): each RTT's mean rate and min RTT
    rtts = sorted({g for e in entries for g in e["rtts"]}, key=analysis.group_order)
    rtts = rtts if len(rtts) > 1 else []
    # ECN marks only where some case marked (a discipline with ecn=1 and ECN-capable flows)
    marks = any(v["mean"] for e in entries for v in e.get("marks_by_reason", {}).values())
    head = ["case", "Jain"] + [f"{g} Mbit/s/flow" for g in groups] + [f"{a} Mbit/s, sRTT ms" for a in aggs] + \
           [f"{g}: Mbit/s/flow" + (", ping RTT ms" if any(e["rtts"].get(g, {}).get("ping_rtt_ms", {}).get("mean")
                                                           is not None for e in entries) else "") for g in rtts] + \
           ["total Mbit/s", "util.", "queue delay mean / p95 / p99 ms", "RTT mean / p95 / p99 ms", "drops"] + \
           (["ECN marks"] if marks else []) + ["CPU %", "trusted / runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        drops = ", ".join(f"{k} {v['mean']:.0f}" for k, v in e["drops_by_reason"].items() if v["mean"]) or "0"
        cells = [e["case"], ci_cell(e["jain"], 3)]
        cells += [ci_cell(e["classes"][g]["mean_mbps"]) if g in e["classes"] else "" for g in groups]
        cells += [f"{ci_cell(e['aggregates'][a]['total_mbps'])}, {ci_cell(e['aggregates'][a]['srtt_ms'])}"
                  if a in e["aggregates"] else "" for a in aggs]
        cells += [_rtt_group_cell(e["rtts"][g]) if g in e["rtts"] else "" for g in rtts]
        cells += [ci_cell(e["total_mbps"]), ci_cell(e["utilization"], 0, 100) + " %",
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


def udp_flow_table(entries: list[dict]) -> list[str]:
    head = ["case", "real-time flow", "loss %", "one-way delay ms", "p95 ms", "jitter ms", "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        for label, g in e.get("udp_flows", {}).items():
            lines.append("| " + " | ".join([e["case"], label, ci_cell(g["loss_fraction"], 2, 100), ci_cell(g["owd_ms"]),
                                             ci_cell(g["owd_p95_ms"]), ci_cell(g["jitter_ms"], 2), str(g["runs"])]) + " |")
    return lines


def capture_table(entries: list[dict]) -> list[str]:
    head = ["case", "link", "sojourn from the capture mean / p50 / p95 / p99 ms",
            "ckcd-link's own mean / p95 / p99 ms", "drops in the capture", "runs read"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        own = " / ".join(fmt(e[k]["mean"], 2) for k in ("queue_delay_mean_ms", "queue_delay_p95_ms",
                                                        "queue_delay_p99_ms"))
        for name, c in e.get("capture", {}).items():
            measured = " / ".join(ci_cell(c[k], 2) for k in ("mean", "p50", "p95", "p99"))
            lines.append("| " + " | ".join([e["case"], name, measured, own, ci_cell(c["drops"], 0), str(c["runs"])]) + " |")
    return lines


def reverse_table(entries: list[dict]) -> list[str]:
    head = ["case", "reverse flows' Jain", "their goodput Mbit/s", "utilization of the reverse direction"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        if e.get("reverse"):
            r = e["reverse"]
            lines.append("| " + " | ".join([e["case"], ci_cell(r["jain"], 3), ci_cell(r["total_mbps"]),
                                             ci_cell(r["utilization"], 1, 100) + " %"]) + " |")
    return lines


def mptcp_table(entries: list[dict]) -> list[str]:
    head = ["case", "MPTCP connection", "goodput Mbit/s", "per subflow Mbit/s", "fair shares",
            "runs with every subflow carrying data"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        for label, c in e.get("mptcp", {}).items():
            lines.append("| " + " | ".join([e["case"], label, ci_cell(c["mean_mbps"]),
                                             " + ".join(ci_cell(s) for s in c["subflow_mbps"]), ci_cell(c["fair_shares"], 2),
                                             f"{c['runs_all_subflows']} of {c['runs']}"]) + " |")
    return lines


def phase_table(entries: list[dict]) -> list[str]:
    """Per case, a row per part of the window between link changes (summary._phase_summary);
    Jain's index only where a part held more than one flow."""
    jain = any(p["flows"] > 1 for e in entries for p in e.get("phases", []))
    head = ["case", "part of the window s", "link Mbit/s", "goodput Mbit/s", "util."] + (["Jain"] if jain else []) + \
           ["queue delay mean / p95 ms", "RTT mean ms", "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        for p in e.get("phases", []):
            span = f"{round(p['from_s'], 1):g}–{round(p['to_s'], 1):g}"
            cells = [e["case"], span, f"{p['rate_mbps']:g}", ci_cell(p["total_mbps"]),
                     ci_cell(p["utilization"], 0, 100) + " %"] + ([ci_cell(p["jain"], 3)] if jain else [])
            cells += [f"{ci_cell(p['queue_delay_mean_ms'], 2)} / {ci_cell(p['queue_delay_p95_ms'], 2)}",
                      ci_cell(p["rtt_mean_ms"]), str(p["runs"])]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def short_flow_table(entries: list[dict]) -> list[str]:
    head = ["case", "short flows", "size KB", "completed / started (failed)", "FCT p50 ms", "p95 ms", "p99 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        for label, g in e.get("short_flows", {}).items():
            for size, p in g["by_size_kb"].items():
                lines.append("| " + " | ".join([e["case"], label, size, f"{g['completed']} / {g['started']} "
                                                 f"({g['failed']})", ci_cell(p["p50"]), ci_cell(p["p95"]), ci_cell(p["p99"])])
                             + " |")
    return lines


def write_markdown(path: str, records, summary, head, plots, command, batches: list[dict]) -> None:
    base_rtt = {r["scenario"]["name"]: 2 * r["scenario"]["link"]["delay_ms"] for r in records}
    pooled_untrusted = any(e["includes_untrusted"] for e in summary)
    lines = _introduction(command, head, base_rtt, pooled_untrusted) + _provenance_lines(batches, records)
    for name in dict.fromkeys(e["scenario"] for e in summary):
        lines += _scenario_section(name, records, [e for e in summary if e["scenario"] == name], plots.get(name, []))
    lines += _grid_sections(records, summary)
    lines += _fidelity_section(records)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# A grid's members side by side: per case, the numbers a reader compares along the grid, and
# the releases' measured lateness (the emulator's own error, which a grid over it varies).
GRID_COLUMNS = (("Jain", "jain", 3, 1.0), ("util. %", "utilization", 1, 100.0),
                ("queue delay ms", "queue_delay_mean_ms", 2, 1.0), ("RTT ms", "rtt_mean_ms", 1, 1.0),
                ("release late us", "release_late_mean_us", 0, 1.0))


def _grid_sections(records, summary: list[dict]) -> list[str]:
    """For each grid whose members ran here, its grid_table under the grid's name."""
    grids: dict[str, list[dict]] = {}
    for r in records:
        sc = r["scenario"]
        if sc.get("grid_point") and sc["name"] not in [m["name"] for m in grids.get(_grid_of(sc), [])]:
            grids.setdefault(_grid_of(sc), []).append(sc)
    lines = []
    for members in grids.values():
        # records made before members named their grid: its title, the members' common start
        grid = members[0].get("grid") or os.path.commonprefix([m["title"] for m in members]).rsplit(", ", 1)[0]
        entries = [dict(e, grid_point=sc["grid_point"]) for sc in members for e in summary if e["scenario"] == sc["name"]]
        lines += ["", f"## Across the grid `{grid}`", ""] + grid_table(entries)
    return lines


def grid_table(entries: list[dict]) -> list[str]:
    """One table across a grid's members: a row per grid point (in the order of its values) and
    case, the GRID_COLUMNS with their CIs, and trusted / runs. Entries without a grid_point are
    not in it."""
    rows = sorted((e for e in entries if e.get("grid_point")),
                  key=lambda e: [(0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))
                                 for v in e["grid_point"].values()])
    if not rows:
        return []
    keys = list(rows[0]["grid_point"])
    head = keys + ["case"] + [title for title, *_ in GRID_COLUMNS] + ["trusted / runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in rows:
        cells = [json.dumps(e["grid_point"].get(k)) for k in keys] + [e["case"]]
        cells += [ci_cell(e[key], digits, scale) for _title, key, digits, scale in GRID_COLUMNS]
        lines.append("| " + " | ".join(cells + [_counts_cell(e) + _warning(e)]) + " |")
    return lines


def _grid_of(sc: dict) -> str:
    """Which grid a member belongs to: its `grid`, or for records made before members carried
    it, its definition with the swept values taken out (equal for every member of one grid)."""
    if sc.get("grid"):
        return sc["grid"]
    rest = {k: v for k, v in copy.deepcopy(sc).items() if k not in ("name", "title", "grid_point")}
    for dotted in sc["grid_point"]:
        *path, last = dotted.split(".")
        node = rest
        for part in path:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = None
        else:
            node[last] = None
    return json.dumps(rest, sort_keys=True)


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


def _link_text(link: dict) -> str:
    """The bottleneck as a reader needs it: rate (or trace), delay, buffer, loss, and the reverse
    direction where it differs (records from before these keys have none of them)."""
    rate = (f"trace {link['trace']} ({link['rate_bps'] / 1e6:.2f} Mbit/s on average)" if link.get("trace")
            else f"{link['rate_bps'] / 1e6:g} Mbit/s")
    text = f"{rate}, {link['delay_ms']:g} ms each way, buffer {link['buffer_pkts']} packets"
    if link.get("loss"):
        text += f", loss `{link['loss']}`"
    reverse = {k: v for k, v in (link.get("reverse") or {}).items() if v is not None}
    if reverse:
        parts = [f"trace {reverse['trace']}" if "trace" in reverse else
                 f"{reverse['rate_bps'] / 1e6:g} Mbit/s" if "rate_bps" in reverse else None,
                 f"{reverse['delay_ms']:g} ms" if "delay_ms" in reverse else None,
                 f"buffer {reverse['buffer_pkts']} packets" if "buffer_pkts" in reverse else None,
                 f"loss `{reverse['loss']}`" if "loss" in reverse else None]
        text += "; back: " + ", ".join(p for p in parts if p)
    return text


# The tables a scenario's section adds when its cases recorded more than the case table shows:
# the summary's key, the caption, the table.
_EXTRA_TABLES = (
    ("phases", "Either side of each link change (`[[link_changes]]`): the window cut where the change took effect, "
               "each part's own means over runs; a part begins at its change, so it includes the transition "
               "that follows.", phase_table),
    ("short_flows", "Short flows: completion time (connect to last byte) of the transfers started in the window, "
                    "mean over runs of each run's percentiles; unfinished transfers were still running when the "
                    "run ended.", short_flow_table),
    ("udp_flows", "Real-time flows (constant-rate UDP): datagrams lost, one-way delay (sender to receiver, one "
                  "clock) and RFC 3550 jitter over the window, mean over runs.", udp_flow_table),
    ("capture", "Packet capture (`[link] capture`): each forward frame's sojourn measured from ckcd-link's pcapng "
                "(its dequeue's time less its enqueue's) over the window, beside the link's own statistics; the "
                "files are `capture-<link>.pcapng` in each run's directory.", capture_table),
    ("reverse", "Reverse flows (sent from the receivers' side, through the link's reverse direction, which then "
                "runs the case's discipline too): their own Jain's index and utilization; the table above is the "
                "forward flows'.", reverse_table),
    ("mptcp", "Multipath TCP: each connection's goodput, its subflows' and its fair shares (its goodput over the "
              "mean single-path flow's: 1 is one flow's share, 2 two flows'), mean over runs.", mptcp_table),
)


def _scenario_section(name: str, records, entries: list[dict], plots: list[str]) -> list[str]:
    """One scenario: its setup and flows, the table of its cases, its plots."""
    sc = next(r["scenario"] for r in records if r["scenario"]["name"] == name)
    w = next((r["metrics"]["window_s"] for r in records if r["scenario"]["name"] == name and r.get("metrics")),
             None)
    lines = ["", f"## {sc['title']} (`{name}`)", "",
             (f"{sc['source']}. " if sc.get("source") else "") + f"Topology {sc['topology']}; link {_link_text(sc['link'])}; "
             f"{sc['duration_s']:g} s per run"
             + (f", measured over {w[0]:g}-{w[1]:g} s" if w else "") + f". Flows: {_flow_list(sc)}."]
    if sc.get("grid_point"):
        lines += ["", "Grid point: " + ", ".join(f"`{k} = {json.dumps(v)}`" for k, v in sc["grid_point"].items())
                  + "."]
    if sc.get("notes"):
        lines += ["", sc["notes"]]
    lines += [""] + case_table(entries) + trust_notes(entries)
    for key, caption, table in _EXTRA_TABLES:
        if any(e.get(key) for e in entries):
            lines += ["", caption, ""] + table(entries)
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
                     + (f" [{f['aggregate']}]" if f.get("aggregate") and not f.get("subflow_aggregates") else "")
                     + (f" MPTCP, {f['subflows']} subflows" if f.get("mptcp") else "")
                     + (f" [{', '.join(f['subflow_aggregates'])}]" if f.get("subflow_aggregates") else "")
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
                     f"kept its schedule (≤ {100 * SCHEDULE_MAX_OVER_1MS_FRACTION:g} % of releases more than 1 ms "
                     f"late, mean ≤ {SCHEDULE_MAX_LATE_MEAN_US:g} µs) and ping's RTT was within "
                     f"{RTT_EXCESS_MAX_MS:g} ms of what the emulated link explains.")
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
