"""Results on disk: results.json, summary.csv, flows.csv, timeseries.csv, report.md and PNG plots.

`write_report(out_dir, records)` renders everything from the run records; `ckcd-coex report DIR`
calls it on the records saved under DIR/runs, so a report can be re-rendered (or rendered with a
changed warm-up or plot style) without running the lab again. The CSV files (csv_files.py), the
plots (plots.py) and the Markdown (markdown.py) are written by modules of their own.
"""

from __future__ import annotations

import datetime
import json
import os

from experiments.analysis import metrics as analysis
from experiments.analysis.summary import MIN_TRUSTED, PAPER, full_buffer_ms, headline, summarize
from experiments.batch.plan import read_batch_file
from experiments.output.csv_files import flows_csv, summary_csv, timeseries_csv
from experiments.output.markdown import write_markdown
from experiments.output.plots import plots_of


STATISTICS = (f"means over runs ± the half-width of their 95 % confidence interval (Student's t with n - 1 degrees "
              f"of freedom, n = the runs pooled; no ± with one run); only trusted runs are pooled unless the report "
              f"says otherwise; a case with fewer than {MIN_TRUSTED} trusted runs is marked")


def write_report(out_dir: str, records: list[dict], command: str | None = None, *,
                 include_untrusted: bool = False, batches: list[dict] | None = None) -> dict:
    """Recompute metrics from the records, write every output file; returns the summary.
    Means pool trusted runs only unless include_untrusted. `batches`: the batch files the
    records came from (default: out_dir's own)."""
    analysis.measure_records(records)
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
    summary_csv(os.path.join(out_dir, "summary.csv"), summary)
    flows_csv(os.path.join(out_dir, "flows.csv"), records)
    timeseries_csv(os.path.join(out_dir, "timeseries.csv"), records)
    plots = plots_of(out_dir, records, summary)
    write_markdown(os.path.join(out_dir, "report.md"), records, summary, head, plots, command, batches)
    return {"summary": summary, "headline": head, "plots": plots}
