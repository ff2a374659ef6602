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

which `ckcd-coex reproduce --render` rewrites; a test holds every marked table to its summary, so
a table in the docs is always what its summary says.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

from experiments.analysis.summary import summarize
from experiments.output import markdown
from experiments.output.csv_files import summary_csv

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLISHED_DIR = os.path.join(REPO, "results", "published")
FORMAT = 1


class PublishError(RuntimeError):
    """A table cannot be published from these runs; the message says why."""


@dataclasses.dataclass(frozen=True)
class Table:
    """A published table: the scenarios its batch runs (only the cases named in `only`, at
    duration_s instead of each scenario's own when given: `ckcd-coex run --only`, `--duration`),
    the trusted runs each case must have (`--repeat` and `--until-trusted` that many, with at
    most extra_max extra runs a case), which of the report's tables it shows ("cases", "mptcp",
    "reverse", "udp", "short", "capture") and the docs file that holds it."""
    name: str
    title: str
    scenarios: tuple[str, ...]
    views: tuple[str, ...]
    doc: str
    trusted: int = 3
    extra_max: int = 3
    minutes: int = 0  # what a batch costs on the project's 2-core machine, about
    only: tuple[str, ...] = ()
    duration_s: float | None = None

    @property
    def command(self) -> str:
        return f"ckcd-coex reproduce {self.name}"


TABLES = {t.name: t for t in (
    Table("mptcp", "Multipath TCP: one fair share or two (seed 000's question)", ("mptcp_dumbbell", "mptcp_paths"),
          ("mptcp", "cases"), "docs/experiments.md", minutes=20),
    Table("rrul", "Both directions loaded: BBR and CUBIC each way", ("rrul_bbr_cubic",), ("cases", "reverse"),
          "docs/experiments.md", extra_max=2, minutes=16),
    # seed 000's headline mixes at the paper's 120 s, five trusted runs a case
    Table("seed000_headline", "Seed 000: DropTail against CKCD for its three mixes (120 s)",
          ("bbr_cubic", "bbr_cubic_reno", "mixed15"), ("cases",), "docs/experiments.md", trusted=5, extra_max=3,
          minutes=90, only=("droptail", "ckcd")),
)}


def table(name: str) -> Table:
    if name not in TABLES:
        raise PublishError(f"no published table {name!r}: `ckcd-coex reproduce --list` lists them "
                           f"({', '.join(TABLES)})")
    return TABLES[name]


def summary_path(name: str, published_dir: str = PUBLISHED_DIR) -> str:
    return os.path.join(published_dir, f"{name}.json")


def build_summary(t: Table, records: list[dict], batches: list[dict]) -> dict:
    """The summary of a table from its runs: the report's per-case statistics over trusted runs,
    refused when a case of the table's scenarios has fewer than t.trusted trusted runs or none
    at all (a table is cut to the cases a reader needs, never published from fewer runs)."""
    mine = [r for r in records if r["scenario"]["name"] in t.scenarios
            and (not t.only or r["case"]["name"] in t.only)]
    cases = summarize(mine)
    missing = sorted(set(t.scenarios) - {e["scenario"] for e in cases})
    if missing:
        raise PublishError(f"{t.name}: no runs of {', '.join(missing)}")
    short = [f"{e['scenario']}/{e['case']} ({e['trusted']} of {e['runs']})" for e in cases if e["trusted"] < t.trusted]
    if short:
        raise PublishError(f"{t.name}: fewer than {t.trusted} trusted runs in {', '.join(short)}: run "
                           f"`{t.command} --resume` for more")
    first = mine[0].get("provenance") or {}
    return {"format": FORMAT, "table": t.name, "title": t.title, "command": t.command,
            "trusted_per_case": t.trusted,
            "batches": sorted(({k: b.get(k) for k in ("batch_id", "created", "command", "project")}
                               for b in batches if any(r.get("batch_id") == b.get("batch_id") for r in mine)),
                              key=lambda b: b["created"] or ""),
            "provenance": {k: first.get(k) for k in ("host", "kernel", "machine", "python", "tools")},
            "cases": cases}


def write_summary(summary: dict, published_dir: str = PUBLISHED_DIR) -> str:
    os.makedirs(published_dir, exist_ok=True)
    path = summary_path(summary["table"], published_dir)
    with open(path, "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    summary_csv(path[:-len(".json")] + ".csv", summary["cases"])
    return path


def read_summary(name: str, published_dir: str = PUBLISHED_DIR) -> dict:
    with open(summary_path(name, published_dir)) as f:
        summary = json.load(f)
    if summary.get("format") != FORMAT or summary.get("table") != name:
        raise PublishError(f"{summary_path(name, published_dir)}: not a format-{FORMAT} summary of {name!r}")
    return summary


_VIEWS = {"cases": markdown.case_table, "mptcp": markdown.mptcp_table, "reverse": markdown.reverse_table,
          "udp": markdown.udp_flow_table, "short": markdown.short_flow_table, "capture": markdown.capture_table}


def render(summary: dict) -> list[str]:
    """The table's markdown: how it was made (command, n, CIs, dates, commits, kernel), then per
    scenario the views its Table names, as the report renders them."""
    t = table(summary["table"])
    batches = summary["batches"]
    dates = sorted({(b["created"] or "")[:10] for b in batches})
    commits = sorted({(b["project"] or {}).get("commit", "")[:7] + ("+" if (b["project"] or {}).get("dirty") else "")
                      for b in batches})
    prov = summary["provenance"]
    lines = [f"Generated by `{t.command}` from `results/published/{t.name}.json`: n = {t.trusted} trusted runs "
             f"or more per case, means with 95 % CIs (Student's t); runs of {', '.join(dates)}, commit "
             f"{', '.join(commits)} (`+`: with changes the batch records), kernel {prov.get('kernel')}."]
    for scenario in t.scenarios:
        entries = [e for e in summary["cases"] if e["scenario"] == scenario]
        lines += ["", f"`{scenario}`:"]
        for view in t.views:
            lines += [""] + _VIEWS[view](entries)
        lines += markdown.trust_notes(entries)  # the runs left out, and why
    return lines


_MARKER = re.compile(r"(<!-- published:(?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)(<!-- /published:(?P=name) -->)",
                     re.S)


def rendered_docs(published_dir: str = PUBLISHED_DIR, repo: str = REPO) -> dict[str, tuple[str, str]]:
    """{docs file: (its text now, its text with every marked table rendered from its summary)}.
    A marker without a summary, a summary without a marker and a marker twice are refused."""
    names = sorted(n[:-len(".json")] for n in os.listdir(published_dir) if n.endswith(".json")) \
        if os.path.isdir(published_dir) else []
    seen: dict[str, str] = {}
    out = {}
    for doc in sorted({t.doc for t in TABLES.values()}):
        with open(os.path.join(repo, doc)) as f:
            text = f.read()

        def fill(m: re.Match) -> str:
            name = m.group("name")
            if name in seen:
                raise PublishError(f"{doc}: table {name!r} is marked twice (also in {seen[name]})")
            seen[name] = doc
            if name not in names:
                raise PublishError(f"{doc}: table {name!r} has no summary (results/published/{name}.json): "
                                   f"run `ckcd-coex reproduce {name}`")
            return m.group(1) + "\n".join(render(read_summary(name, published_dir))) + "\n" + m.group(4)
        out[doc] = (text, _MARKER.sub(fill, text))
    unplaced = sorted(set(names) - set(seen))
    if unplaced:
        raise PublishError(f"summaries with no table in the docs: {', '.join(unplaced)} (mark each with "
                           f"<!-- published:NAME --> ... <!-- /published:NAME --> in its Table's doc)")
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
