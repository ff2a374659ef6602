"""Published results as data: each table the docs publish is rendered from a committed summary
(results/published/<table>.json and .csv), which `ckcd-coex reproduce TABLE` rewrites from the
trusted runs of the batch it runs (or of saved runs, `--from DIR`).

A summary holds, per case, the trusted n, the means and 95 % CIs and the reasons any run was left
out (the report's own statistics, experiments/analysis/summary.py: trusted runs only, never
pooled by hand), and its provenance: the batches' commits and commands, the kernel and machine,
the date and the command that reproduces it. The docs hold each table between markers,

    <!-- published:mptcp -->
    ...rendered from results/published/mptcp.json...
    <!-- /published:mptcp -->

which `ckcd-coex reproduce --render` rewrites, with the README's short form of a table
(`headline:NAME`) and the list of every table and its state (`index:tables`, in
docs/results/README.md); a test holds every marker to its summary, so a table in the docs is
always what its summary says.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import re

from experiments import regimes
from experiments.analysis.summary import headline, summarize
from experiments.output import markdown
from experiments.output.csv_files import summary_csv

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLISHED_DIR = os.path.join(REPO, "results", "published")
FORMAT = 1


class PublishError(RuntimeError):
    """A table cannot be published from these runs; the message says why."""


@dataclasses.dataclass(frozen=True)
class ShortCase:
    """A case with fewer trusted runs than its table asks: how many it has, of how many runs, and
    how many of those were extra runs (numbered after their batch's planned repeats)."""
    label: str
    trusted: int
    runs: int
    extras: int


class TooFewTrusted(PublishError):
    """A summary refused because cases are short of trusted runs; `short` names them, so the
    caller can say what would run more of them (that depends on how the runs were made)."""

    def __init__(self, t: "Table", short: list[ShortCase]):
        self.table, self.short = t, short
        cases = ", ".join(f"{c.label} ({c.trusted} of {c.runs}, {c.extras} of them extra)" for c in short)
        super().__init__(f"{t.name}: fewer than {t.trusted} trusted runs in {cases}")


@dataclasses.dataclass(frozen=True)
class Table:
    """A published table: the scenarios its batch runs (grids by name, each member of theirs;
    only the members and cases named in `only`, at duration_s instead of each scenario's own
    when given: `ckcd-coex run --only`, `--duration`), the trusted runs each case must have
    (`--until-trusted` that many, with at most extra_max extra runs a case), which of the
    report's tables it shows ("cases", "mptcp", "reverse", "udp", "short", "capture", "phases"; "grid": one
    table across a grid's members instead of one per member), the
    docs page that holds it and, where a paper has the figure, what the paper reports."""
    name: str
    title: str
    scenarios: tuple[str, ...]
    views: tuple[str, ...]
    doc: str
    trusted: int = 3
    extra_max: int = 3
    only: tuple[str, ...] = ()
    duration_s: float | None = None
    paper: str = ""

    @property
    def command(self) -> str:
        return f"ckcd-coex reproduce {self.name}"

    def batch(self) -> list:
        """Its batch's scenarios, as `ckcd-coex run` selects them: grids expanded to their members,
        `only` and `duration_s` applied, each case `trusted` times."""
        from experiments.scenario.catalog import select  # the scenario files, read when asked

        return select(list(self.scenarios), self.duration_s, self.trusted, list(self.only))

    @property
    def minutes(self) -> int:
        """What its batch costs on the project's 2-core machine, about: n runs of each case, each
        its length and RUN_OVERHEAD_S, and EXTRA_ALLOWANCE for runs left out and run again;
        rounded up to 5 minutes."""
        seconds = sum(len(sc.cases()) * sc.repeat * (sc.duration_s + RUN_OVERHEAD_S) for sc in self.batch())
        return 5 * math.ceil(seconds * EXTRA_ALLOWANCE / 300)


@dataclasses.dataclass(frozen=True)
class VmTable:
    """A published table measured in the kernel VM rather than in the lab: real kernel qdiscs
    (Linux's and sch_ckcd) under qemu, every case and repeat in one boot
    (experiments/lab/vm_ecn.py). Its runs are trusted by the VM's own checks (vm_ecn's module
    docstring), `trusted` runs of each of its cases, `duration_s` each."""
    name: str
    title: str
    doc: str
    trusted: int = 3
    duration_s: int = 20
    scenarios: tuple[str, ...] = ()  # none: the VM runs its cases, not the lab's scenarios

    @property
    def command(self) -> str:
        return f"ckcd-coex reproduce {self.name}"

    @property
    def minutes(self) -> int:
        """The boot and n runs of each case with their overhead, with EXTRA_ALLOWANCE for runs
        measured again; rounded up to 5 minutes."""
        from experiments.lab import vm_ecn

        return 5 * math.ceil(vm_ecn.minutes(self.trusted, self.duration_s) * EXTRA_ALLOWANCE / 5)


# Bring-up and tear-down per run, measured on the project's 2-core machine (2026-11-27: 31 runs of
# 120 s in 68 min, 18 of 60 s in 21 min), and the share of runs left out and run again.
RUN_OVERHEAD_S = 12.0
EXTRA_ALLOWANCE = 1.1
RESULTS = "docs/results"
_SEED000_PAPER = ("Seed 000 (Liu et al., its Mininet experiments of section IV) reports for CKCD against DropTail "
                  "inter-flow fairness up to +62 %, average latency up to −92 % and 96 % link utilization.")
_SEED000_TABLE2 = ("Seed 000 draws this comparison as histograms (Figs. 5–7, 120 s runs) and prints no numbers for "
                   "it. With one BBR and one CUBIC flow, CKCD and CHOKe share the link fairly where RED, CoDel and "
                   "DropTail do not, and CKCD has the lowest delay at a utilization like the others'; with a Reno "
                   "flow added, CKCD's lead in fairness grows; with fifteen flows, CKCD stays the fairest with the "
                   "lowest mean delay.")
# Seed 004's Tables 1 and 2 (ns-2; nine paths of 134-330 ms RTT, 10 % of the BDP, long and short
# flows, reverse UDP), Jain's index / throughput in Mbit/s per AQM, for the columns the lab runs
_SEED004 = "Seed 004 (ns-2, its Tables 1 and 2: flows over nine paths of 134–330 ms RTT, with short flows and reverse UDP)"
_SEED004_CUBIC_10 = ("DT 0.91 / 86.4, RED 0.98 / 99.5, SRED 0.92 / 86.3, FRED 0.84 / 54.7, CHOKe 0.96 / 97.7, "
                     "SFB 0.90 / 22.1, CARE 0.96 / 64.4")
_SEED004_10 = (f"{_SEED004} reports at 10 flows Jain's index / throughput in Mbit/s: New Reno DT 0.88 / 37.2, RED 0.83 / "
               "98.0, SRED 0.75 / 42.3, FRED 0.81 / 17.4, CHOKe 0.81 / 91.2, SFB 0.88 / 9.2, CARE 0.89 / 39.9; Sack DT "
               "0.82 / 52.6, RED 0.87 / 98.6, SRED 0.75 / 48.5, FRED 0.84 / 21.3, CHOKe 0.89 / 87.0, SFB 0.86 / 10.2, "
               f"CARE 0.92 / 47.3; Cubic {_SEED004_CUBIC_10}. Its flows differ in RTT and these here do not; CKCD "
               "is not in the paper.")
_SEED004_100 = (f"{_SEED004} reports for Cubic at 100 flows Jain's index / throughput in Mbit/s: DT 0.88 / 99.5, RED "
                "0.95 / 92.8, SRED 0.92 / 93.8, FRED 0.86 / 92.6, CHOKe 0.94 / 99.8, SFB 0.80 / 69.5, CARE 0.94 / "
                "96.6. Its flows differ in RTT and these here do not; CKCD is not in the paper.")
_SEED004_PATHS = (f"{_SEED004} reports for Cubic at 10 flows Jain's index / throughput in Mbit/s: "
                  f"{_SEED004_CUBIC_10}. CKCD is not in the paper.")
TABLES = {t.name: t for t in (
    # seed 000's headline mixes at the paper's 120 s, five trusted runs a case
    Table("seed000_headline", "Seed 000: DropTail against CKCD for its three mixes (120 s)",
          ("bbr_cubic", "bbr_cubic_reno", "mixed15"), ("cases",), f"{RESULTS}/bbr-vs-loss-based.md", trusted=5,
          extra_max=3, only=("droptail", "ckcd"), paper=_SEED000_PAPER),
    # every discipline side by side at 60 s (DropTail and CKCD again, so the comparison is within one batch)
    Table("seed000_disciplines", "Seed 000: every discipline of Table II and the Linux baselines (60 s)",
          ("bbr_cubic", "bbr_cubic_reno", "mixed15"), ("cases",), f"{RESULTS}/bbr-vs-loss-based.md",
          duration_s=60, paper=_SEED000_TABLE2),
    Table("seed000_intra", "Seed 000: five flows of one congestion control (60 s)",
          ("intra_cubic", "intra_bbr"), ("cases",), f"{RESULTS}/bbr-vs-loss-based.md",
          duration_s=60),
    Table("coex", "Seed 001: Separate Paths, Separate Queues and Limited Queue at 20 Mbit/s",
          ("coex_queues", "coex_queues_paced", "coex_paths"), ("cases",), f"{RESULTS}/coex-approaches.md"),
    Table("cocoa", "Seed 002: Cocoa against DropTail and CoDel with one long flow (120 s)",
          ("cocoa_cubic", "cocoa_reno"), ("cases",), f"{RESULTS}/cocoa.md",
          paper="Seed 002's Table 1 (one flow, 100 Mbit/s, 50 ms RTT, 240 s, mean of 10 runs) reports utilization / "
                "mean RTT: Cubic under fq 96.2 % / 54 ms, fq_codel 92.6 % / 52 ms, Cocoa 98.5 % / 66.5 ms; Reno "
                "84.1 % / 52.7 ms, 81.1 % / 51.5 ms, 97.9 % / 98.2 ms. Its fq with one flow is DropTail's 100 "
                "packets here and its fq_codel is CoDel; its utilization is of the link's capacity, which TCP's "
                "goodput here cannot exceed 95.6 % of (headers), so compare the disciplines' ratios."),
    Table("cocoa_change", "Seed 002, Figs. 4–6: the link rate halved and doubled under one CUBIC flow",
          ("cocoa_halve", "cocoa_double"), ("cases", "phases"), f"{RESULTS}/cocoa.md"),
    Table("hdcodel", "Seed 003: dynamic CoDel with ten CUBIC and ten Reno connections, at 1, 16 and 64 ms",
          ("hdcodel_fair",), ("cases",), f"{RESULTS}/hdcodel.md",
          only=("hdcodel_fair_rtt1ms", "hdcodel_fair_rtt16ms", "hdcodel_fair_rtt64ms")),
    Table("hdcodel_bbr", "Seed 003's mechanism where CoDel is unfair: ten BBR against ten CUBIC connections",
          ("hdcodel_bbr",), ("cases",), f"{RESULTS}/hdcodel.md"),
    Table("seed004", "Seed 004, Table 1 at 10 flows: which AQM with which TCP",
          ("seed004_newreno", "seed004_sack", "seed004_cubic"), ("cases",), f"{RESULTS}/aqm-and-tcp.md",
          paper=_SEED004_10),
    Table("seed004_100", "Seed 004 at 100 flows, CUBIC", ("seed004_cubic_100",), ("cases",),
          f"{RESULTS}/aqm-and-tcp.md", paper=_SEED004_100),
    Table("seed004_paths", "Seed 004 with the paper's nine paths (134–330 ms RTT), CUBIC", ("seed004_paths_cubic",),
          ("cases",), f"{RESULTS}/aqm-and-tcp.md", paper=_SEED004_PATHS),
    Table("rtt", "RTT unfairness: a 10 ms and a 50 ms flow of one congestion control",
          ("rtt_bbr", "rtt_cubic", "rtt_bbr_deep"), ("cases",), f"{RESULTS}/rtt-unfairness.md"),
    Table("short_flows", "Short transfers beside long BBR and CUBIC flows", ("short_mix", "short_websearch"),
          ("cases", "short"), f"{RESULTS}/short-flows.md"),
    Table("ecn", "ECN: marking CUBIC (and BBR) under CKCD", ("ecn_bbr_cubic", "ecn_bbr_both"), ("cases",),
          f"{RESULTS}/ecn.md"),
    Table("dctcp_cubic", "Classic against scalable: DCTCP and CUBIC in one bottleneck", ("dctcp_cubic",),
          ("cases",), f"{RESULTS}/ecn.md"),
    VmTable("dctcp_cubic_vm", "Classic against scalable in a real kernel: DCTCP and CUBIC under Linux's AQMs and "
            "sch_ckcd", f"{RESULTS}/ecn.md"),
    Table("link_models", "Link models: an on-off trace, random loss and asymmetric access",
          ("trace_onoff", "lossy_link", "asymmetric_access"), ("cases",), f"{RESULTS}/link-models.md"),
    Table("realtime", "A real-time UDP flow beside BBR and CUBIC", ("realtime_bbr_cubic",), ("cases", "udp"),
          f"{RESULTS}/link-models.md"),
    Table("batching", "What batching ckcd-link's releases changes: BBR + CUBIC, exact and 1 ms batches",
          ("release_batching",), ("grid",), f"{RESULTS}/emulation.md"),
    # the fidelity check's limits on release lateness and unexplained RTT are read from this curve
    Table("lateness", "How late may the emulator be: BBR + CUBIC with every release made late on purpose",
          ("emulator_lateness",), ("grid",), "docs/experiments.md"),
    # CKCD's readings of seed 000, each in its section of docs/ckcd.md
    Table("ckcd_k", "CKCD's eq. 9: the steepness k of d_th, fairness against utilization", ("ckcd_k_curve",),
          ("cases",), "docs/ckcd.md"),
    Table("ckcd_mu", "CKCD's μ_i: admitted or served bytes, one window or smoothed", ("ckcd_mu",), ("cases",),
          "docs/ckcd.md"),
    Table("ckcd_active", "CKCD's I: which flows count as active", ("ckcd_active_min",), ("cases",), "docs/ckcd.md"),
    Table("ckcd_dequeue", "CKCD's dequeue: CoDel's spacing, a new flow's threshold", ("ckcd_dequeue",), ("cases",),
          "docs/ckcd.md"),
    Table("mptcp", "Multipath TCP: one fair share or two (seed 000's question)", ("mptcp_dumbbell", "mptcp_paths"),
          ("mptcp", "cases"), f"{RESULTS}/mptcp.md"),
    Table("rrul", "Both directions loaded: BBR and CUBIC each way", ("rrul_bbr_cubic",), ("cases", "reverse"),
          f"{RESULTS}/both-directions.md", extra_max=2),
)}


def table(name: str) -> Table | VmTable:
    if name not in TABLES:
        raise PublishError(f"no published table {name!r}: `ckcd-coex reproduce --list` lists them "
                           f"({', '.join(TABLES)})")
    return TABLES[name]


def summary_path(name: str, published_dir: str = PUBLISHED_DIR) -> str:
    return os.path.join(published_dir, f"{name}.json")


def expected_runs(t: Table) -> list[tuple[str, str]]:
    """The (scenario, case) pairs the table's batch runs, in the batch's order of scenarios: a
    grid's members by their own names, `only` and `duration_s` applied as `ckcd-coex run` does."""
    return [(sc.name, case.name) for sc in t.batch() for case in sc.cases()]


def build_summary(t: Table, records: list[dict], batches: list[dict]) -> dict:
    """The summary of a table from its runs: the report's per-case statistics over trusted runs
    of the (scenario, case) pairs its batch runs, refused when one of them has fewer than
    t.trusted trusted runs or none at all (a table is cut to the cases a reader needs, never
    published from fewer runs)."""
    want = expected_runs(t)
    wanted = set(want)
    mine = [r for r in records if (r["scenario"]["name"], r["case"]["name"]) in wanted]
    cases = summarize(mine)
    have = {(e["scenario"], e["case"]) for e in cases}
    missing = [f"{s}/{c}" for s, c in want if (s, c) not in have]
    if missing:
        raise PublishError(f"{t.name}: no runs of {', '.join(missing)}")
    # a run numbered after its own batch's planned repeats is an extra run (orchestrate.extra_rep)
    extras = collections.Counter((r["scenario"]["name"], r["case"]["name"]) for r in mine
                                 if isinstance(r.get("rep"), int) and isinstance(r["scenario"].get("repeat"), int)
                                 and r["rep"] > r["scenario"]["repeat"])
    short = [ShortCase(f"{e['scenario']}/{e['case']}", e["trusted"], e["runs"], extras[e["scenario"], e["case"]])
             for e in cases if e["trusted"] < t.trusted]
    if short:
        raise TooFewTrusted(t, short)
    first = mine[0].get("provenance") or {}
    return {"format": FORMAT, "table": t.name, "title": t.title, "command": t.command,
            "trusted_per_case": t.trusted, "scenarios": list(dict.fromkeys(s for s, _ in want)),
            "batches": sorted(({k: b.get(k) for k in ("batch_id", "created", "command", "project")}
                               for b in batches if any(r.get("batch_id") == b.get("batch_id") for r in mine)),
                              key=lambda b: b["created"] or ""),
            "provenance": {k: first.get(k) for k in ("host", "kernel", "machine", "python", "tools")},
            "cases": cases}


def build_vm_summary(t: VmTable, saved: dict) -> dict:
    """The summary of a VM table from what its boot saved (vm_ecn.load's, or measure's), its runs
    judged by this code (vm_ecn.measured_runs); refused as a lab table's is when a case has fewer
    than t.trusted trusted runs, and when the runs were not of the table's length."""
    from experiments.lab import vm_ecn

    if saved["duration_s"] != t.duration_s:
        raise PublishError(f"{t.name}: its runs are of {t.duration_s} s, these of {saved['duration_s']} s")
    cases = vm_ecn.summarize(vm_ecn.measured_runs(saved["runs"]))
    short = [f"{e['case']} ({e['trusted']} of {e['runs']})" for e in cases if e["trusted"] < t.trusted]
    if short:
        raise PublishError(f"{t.name}: fewer than {t.trusted} trusted runs in {', '.join(short)}: run "
                           f"`{t.command}` again")
    host = saved["provenance"]
    return {"format": FORMAT, "table": t.name, "title": t.title, "command": t.command, "trusted_per_case": t.trusted,
            "kind": "vm", "duration_s": t.duration_s,
            "batches": [{"batch_id": None, "created": saved["created"], "command": t.command,
                         "project": host.get("project")}],
            "provenance": {"host": host.get("host"), "kernel": saved.get("kernel"), "machine": host.get("machine"),
                           "python": host.get("python"), "tools": {"iperf3": (host.get("tools") or {}).get("iperf3")}},
            "cases": cases}


def write_summary(summary: dict, published_dir: str = PUBLISHED_DIR) -> str:
    os.makedirs(published_dir, exist_ok=True)
    path = summary_path(summary["table"], published_dir)
    with open(path, "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    if summary.get("kind") == "vm":
        from experiments.lab import vm_ecn

        vm_ecn.summary_csv(path[:-len(".json")] + ".csv", summary["cases"])
    else:
        summary_csv(path[:-len(".json")] + ".csv", summary["cases"])
    return path


def read_summary(name: str, published_dir: str = PUBLISHED_DIR) -> dict:
    with open(summary_path(name, published_dir)) as f:
        summary = json.load(f)
    if summary.get("format") != FORMAT or summary.get("table") != name:
        raise PublishError(f"{summary_path(name, published_dir)}: not a format-{FORMAT} summary of {name!r}")
    return summary


_VIEWS = {"cases": markdown.case_table, "mptcp": markdown.mptcp_table, "reverse": markdown.reverse_table,
          "udp": markdown.udp_flow_table, "short": markdown.short_flow_table, "capture": markdown.capture_table,
          "phases": markdown.phase_table}


def render(summary: dict) -> list[str]:
    """The table's markdown: how it was made (command, n, CIs, dates, commits, kernel), what the
    paper reports where it has the figure, then per scenario the views its Table names, as the
    report renders them, and the runs left out."""
    t = table(summary["table"])
    if isinstance(t, VmTable):
        from experiments.lab import vm_ecn

        return [_made_line(t, summary), ""] + vm_ecn.table(summary["cases"]) + [""] + vm_ecn.case_list() \
            + markdown.trust_notes(summary["cases"])
    lines = [_made_line(t, summary)] + (["", t.paper] if t.paper else [])
    if "grid" in t.views:  # one table across the grid's members, before any of their own
        lines += [""] + markdown.grid_table(summary["cases"])
    per_scenario = [view for view in t.views if view != "grid"]
    for scenario in summary.get("scenarios") or t.scenarios:
        entries = [e for e in summary["cases"] if e["scenario"] == scenario]
        notes = markdown.trust_notes(entries)  # the runs left out, and why
        if per_scenario or notes:
            lines += ["", f"`{scenario}`:"]
        for view in per_scenario:
            lines += [""] + _VIEWS[view](entries)
        lines += notes
    return lines


def _made_line(t: Table, summary: dict) -> str:
    batches = summary["batches"]
    commits = sorted({(b["project"] or {}).get("commit", "")[:7] + ("+" if (b["project"] or {}).get("dirty") else "")
                      for b in batches})
    return (f"Generated by `{t.command}` from `results/published/{t.name}.json`: n = {t.trusted} trusted runs "
            f"or more per case, means with 95 % CIs (Student's t); runs of {', '.join(summary_dates(summary))}, commit "
            f"{', '.join(commits)} (`+`: with changes the batch records), "
            + (f"{t.duration_s} s runs in the kernel VM, kernel {summary['provenance'].get('kernel')} under qemu."
               if isinstance(t, VmTable) else f"kernel {summary['provenance'].get('kernel')}."))


def summary_dates(summary: dict) -> list[str]:
    """The days the summary's batches were made."""
    return sorted({(b["created"] or "")[:10] for b in summary["batches"]})


def render_headline(summary: dict) -> list[str]:
    """The README's headline: per mix, DropTail and CKCD side by side (Jain, utilization, mean
    queueing delay and RTT with their CIs), what CKCD changes, and what the paper reports."""
    t = table(summary["table"])
    lines = ["| flows | discipline | Jain | utilization | queueing delay mean ms | RTT mean ms | trusted / runs |",
             "|---|---|---|---|---|---|---|"]
    for e in summary["cases"]:
        lines.append(f"| `{e['scenario']}` | {e['case']} | {markdown.ci_cell(e['jain'], 3)} | "
                     f"{markdown.ci_cell(e['utilization'], 0, 100)} % | "
                     f"{markdown.ci_cell(e['queue_delay_mean_ms'], 2)} | "
                     f"{markdown.ci_cell(e['rtt_mean_ms'])} | {e['trusted']} / {e['runs']} |")
    lines.append("")
    for h in headline(summary["cases"]):
        lines.append(f"- `{h['scenario']}`: CKCD against DropTail, fairness {_signed_pct(h['fairness_gain'])}, mean "
                     f"queueing delay {_signed_pct(-h['queue_delay_reduction'])}, utilization "
                     f"{100 * h['utilization_ckcd']:.0f} % (DropTail {100 * h['utilization_droptail']:.0f} %).")
    return lines + ["", t.paper, "", _made_line(t, summary)]


def _signed_pct(fraction: float) -> str:
    return f"{100 * fraction:+.0f} %".replace("-", "−")


def render_index(published_dir: str = PUBLISHED_DIR) -> list[str]:
    """Every published table: its question, n, lab time, page and the date of its summary, or
    that it has not been run with the project's current code yet."""
    lines = ["| table | what it answers | trusted runs a case | lab time, about | page | summary |",
             "|---|---|---|---|---|---|"]
    for t in TABLES.values():
        try:
            made = ", ".join(summary_dates(read_summary(t.name, published_dir)))
        except OSError:
            made = "not yet run"
        page = os.path.relpath(t.doc, RESULTS)
        lines.append(f"| `{t.name}` | {t.title} | {t.trusted} | {t.minutes} min | [{page}]({page}) | {made} |")
    return lines


# <!-- published:NAME --> a table in full (once in all the docs), <!-- headline:NAME --> its
# short form (the README's), <!-- index:tables --> the list of every table and <!-- index:regimes -->
# which discipline is best where (experiments/regimes.py)
_MARKER = re.compile(r"(<!-- (?P<kind>published|headline|index):(?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)"
                     r"(<!-- /(?P=kind):(?P=name) -->)", re.S)
INDEX_DOC = f"{RESULTS}/README.md"


def render_regimes(published_dir: str = PUBLISHED_DIR) -> list[str]:
    """The regime table (experiments/regimes.py) from the summaries there are."""
    summaries = {}
    for name in {r.table for r in regimes.REGIMES}:
        try:
            summaries[name] = read_summary(name, published_dir)
        except OSError:
            pass
    return regimes.render(summaries)


_INDEXES = {"tables": render_index, "regimes": render_regimes}


def _docs(repo: str) -> list[str]:
    """The files that may hold markers: each table's page that exists, the README, the results index."""
    return sorted(d for d in {t.doc for t in TABLES.values()} | {"README.md", INDEX_DOC}
                  if os.path.exists(os.path.join(repo, d)))


def rendered_docs(published_dir: str = PUBLISHED_DIR, repo: str = REPO) -> dict[str, tuple[str, str]]:
    """{docs file: (its text now, its text with every marker rendered from the summaries)}.
    A marker without a summary, a summary without its full table, a full table twice and an
    unknown marker are refused."""
    names = sorted(n[:-len(".json")] for n in os.listdir(published_dir) if n.endswith(".json")) \
        if os.path.isdir(published_dir) else []
    seen: dict[str, str] = {}
    out = {}
    for doc in _docs(repo):
        with open(os.path.join(repo, doc)) as f:
            text = f.read()

        def fill(m: re.Match) -> str:
            kind, name = m.group("kind"), m.group("name")
            if kind == "index":
                if name not in _INDEXES:
                    raise PublishError(f"{doc}: unknown marker index:{name} (index:tables lists the tables, "
                                       "index:regimes the regime table)")
                return m.group(1) + "\n".join(_INDEXES[name](published_dir)) + "\n" + m.group(5)
            if kind == "published" and name in seen:
                raise PublishError(f"{doc}: table {name!r} is marked twice (also in {seen[name]})")
            if name not in names:
                raise PublishError(f"{doc}: table {name!r} has no summary (results/published/{name}.json): "
                                   f"run `ckcd-coex reproduce {name}`")
            summary = read_summary(name, published_dir)
            if kind == "headline":
                return m.group(1) + "\n".join(render_headline(summary)) + "\n" + m.group(5)
            seen[name] = doc
            return m.group(1) + "\n".join(render(summary)) + "\n" + m.group(5)
        out[doc] = (text, _MARKER.sub(fill, text))
    unplaced = sorted(set(names) - set(seen))
    if unplaced:
        raise PublishError(f"summaries with no table in the docs: {', '.join(unplaced)} (mark each with "
                           f"<!-- published:NAME --> ... <!-- /published:NAME --> in its Table's page)")
    return out


def render_docs(published_dir: str = PUBLISHED_DIR, repo: str = REPO) -> list[str]:
    """Rewrite every marked table from its summary; returns the docs files that changed."""
    changed = []
    for doc, (now, want) in rendered_docs(published_dir, repo).items():
        if now != want:
            with open(os.path.join(repo, doc), "w") as f:
                f.write(want)
            changed.append(doc)
    return changed
