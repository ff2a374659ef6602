"""Run records on disk: reading, writing and finding them, without the lab.

A results directory holds one batch (`batch.json`) and its runs, one `run.json` per run under
`runs/<scenario>/<case>/rep<N>/`. The offline commands (`report`, `merge`, `export`) read runs
through this module only, so they need neither Mininet nor root.

A run is **finished** when its record has metrics (trusted or not): such a directory is never
emptied or written over, by a new batch or by `--resume` (a failed run, with an error and no
metrics, may be run again in its place).
"""

from __future__ import annotations

import json
import os
import sys

from experiments.batch.plan import read_batch_file

RUN_FILE = "run.json"


def runs_root(out_dir: str) -> str:
    return os.path.join(out_dir, "runs")


def run_dir_of(out_dir: str, scenario_name: str, case_name: str, rep: int) -> str:
    return os.path.join(runs_root(out_dir), scenario_name, case_name, f"rep{rep}")


def run_key(record: dict) -> str:
    """`scenario/case/repN`: the run's directory under runs/ and its name in a batch's plan."""
    return f"{record['scenario']['name']}/{record['case']['name']}/rep{record['rep']}"


def read_record(run_dir: str) -> dict | None:
    """The run record in run_dir, None if it was never written, was cut short, is not a plain
    file (a planted symlink) or is not a record (a JSON object)."""
    path = os.path.join(run_dir, RUN_FILE)
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def finished(record: dict | None) -> bool:
    """The run ran to its end and was measured (trusted or not)."""
    return isinstance(record, dict) and not record.get("error") and record.get("metrics") is not None


def trusted(record: dict | None) -> bool:
    return finished(record) and bool(record["metrics"]["fidelity"]["trusted"])


def write_json(path: str, data) -> None:
    """Written whole or not at all: a reader (or a crash) never sees half a file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, separators=(",", ":"))
    os.replace(tmp, path)


def walk_records(out_dir: str) -> list[dict]:
    """Every readable run record under out_dir/runs, by scenario, case and repetition."""
    records = []
    for dirpath, dirnames, filenames in os.walk(runs_root(out_dir)):
        dirnames.sort()
        if RUN_FILE in filenames:
            record = read_record(dirpath)
            if record is not None:
                records.append(record)
    return sorted(records, key=lambda r: (str(r.get("scenario", {}).get("name")), str(r.get("case", {}).get("name")),
                                          r.get("rep") if isinstance(r.get("rep"), int) else 0))


def finished_runs(out_dir: str) -> list[str]:
    """The keys of the finished runs out_dir holds, of any batch."""
    return [run_key(r) for r in walk_records(out_dir) if finished(r)]


def load_records(out_dir: str, log=None) -> list[dict]:
    """The run records under out_dir/runs; with a batch.json, only its batch's (a directory
    written before a results directory held one batch may hold another batch's runs too)."""
    say = log or (lambda msg: print(msg, file=sys.stderr))
    records = walk_records(out_dir)
    batch = read_batch_file(out_dir)
    if batch:
        others = [r for r in records if r.get("batch_id") != batch["batch_id"]]
        if others:
            say(f"{len(others)} runs under {runs_root(out_dir)} are of other batches than {batch['batch_id']} "
                f"(batch.json): left out")
            records = [r for r in records if r.get("batch_id") == batch["batch_id"]]
    if not records:
        say(f"no runs under {runs_root(out_dir)}")
    return records
