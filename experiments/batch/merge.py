"""`ckcd-coex merge DIR... --out DIR`: the shards of one batch, back in one results directory.

Each shard directory holds its `batch.json` (experiments/batch/plan.py) and its runs. Merging
checks, before anything is copied, that the directories are shards of one batch (same grid,
same order, same number of shards, same project version), that no shard and no directory is
given twice, and that together they hold every run of the batch's plan, each complete, once.
The runs are then copied under OUT/runs/ and OUT gets the report, CSV and JSON of the whole
batch: means and 95 % confidence intervals over all repeats, wherever each repeat ran.
"""

from __future__ import annotations

import json
import os
import shutil

from experiments.batch.plan import BATCH_FILE, BatchError, describe_difference, read_batch_file
from experiments.batch.records import finished, read_record, run_key, walk_records
from experiments.names import is_safe_name


def merge_shards(shard_dirs: list[str], out_dir: str, allow_missing: bool = False, log=print) -> list[dict]:
    """Copy the shards' runs into out_dir (which must be new or empty) and return their
    records in the batch's plan order; the caller writes the report."""
    batches = _read_shards(shard_dirs, out_dir)
    first_dir, first = batches[0]
    held: dict[str, tuple[str, dict]] = {}  # plan key -> the shard directory holding it complete, its record
    problems: list[str] = []
    for shard_dir, batch in batches:
        mine = batch["plan"][batch["shard"]["index"]::batch["shard"]["count"]]
        resume = f"`ckcd-coex run ... --shard {batch['shard']['index']}/{batch['shard']['count']} --resume`"
        for key in mine:
            record = read_record(os.path.join(shard_dir, "runs", key))
            if record is None:
                problems.append(f"{key}: not in {shard_dir} (the shard was interrupted? {resume} finishes it)")
            elif record.get("error") or record.get("metrics") is None:
                problems.append(f"{key}: failed in {shard_dir} ({record.get('error')}); {resume} reruns it")
            elif record.get("batch_id") != batch["batch_id"]:
                problems.append(f"{key}: {shard_dir} holds a run of another batch under this name")
            else:
                held[key] = (shard_dir, record)
        for key, record in _extra_runs(shard_dir, batch).items():
            if key in held:
                problems.append(f"{key}: an extra run in {shard_dir} and in {held[key][0]}")
            else:
                held[key] = (shard_dir, record)
    count = first["shard"]["count"]
    have = {b["shard"]["index"] for _, b in batches}
    absent = [i for i in range(count) if i not in have]
    if absent:
        problems.insert(0, f"shard(s) {', '.join(f'{i}/{count}' for i in absent)} not given: "
                           f"{sum(len(first['plan'][i::count]) for i in absent)} runs of the batch are missing")
    if problems and not allow_missing:
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise BatchError("the shards do not hold the whole batch (--allow-missing merges what is there):\n  "
                         + "\n  ".join(problems[:10]) + more)
    for p in problems:
        log(f"merge: missing {p}")
    os.makedirs(out_dir, exist_ok=True)
    for key, (shard_dir, _) in held.items():
        _check_tree(os.path.join(shard_dir, "runs", key))
    records = []
    extras = sorted(set(held) - set(first["plan"]))
    for key in first["plan"] + extras:
        if key in held:
            shard_dir, record = held[key]
            shutil.copytree(os.path.join(shard_dir, "runs", key), os.path.join(out_dir, "runs", key))
            records.append(record)
    merged = {**first, "shard": {"index": 0, "count": 1},
              "merged_from": [{"dir": os.path.abspath(d), "shard": b["shard"], "created": b.get("created"),
                               "command": b.get("command")} for d, b in batches],
              "missing": sorted(set(first["plan"]) - set(held))}
    with open(os.path.join(out_dir, BATCH_FILE), "w") as f:
        json.dump(merged, f, indent=1)
    log(f"merge: {len(records) - len(extras)} of {len(first['plan'])} runs of batch {first['batch_id']} "
        + (f"and {len(extras)} extra runs (--until-trusted) " if extras else "")
        + f"from {len(batches)} shard(s) into {out_dir}")
    return records


def _extra_runs(shard_dir: str, batch: dict) -> dict[str, dict]:
    """The finished runs of this batch the shard holds beyond the plan: --until-trusted's."""
    plan = set(batch["plan"])
    return {run_key(r): r for r in walk_records(shard_dir)
            if r.get("batch_id") == batch["batch_id"] and run_key(r) not in plan and finished(r)}


def _read_shards(shard_dirs: list[str], out_dir: str) -> list[tuple[str, dict]]:
    if not shard_dirs:
        raise BatchError("no shard directories given")
    seen: dict[str, str] = {}
    batches = []
    out_real = os.path.realpath(out_dir)
    for d in shard_dirs:
        real = os.path.realpath(d)
        if real in seen:
            raise BatchError(f"{d}: given twice (as {seen[real]} too): a shard's runs would count twice")
        if real == out_real:
            raise BatchError(f"{d}: is the output directory; merge into a new one")
        seen[real] = d
        batch = read_batch_file(d)
        if batch is None:
            raise BatchError(f"{d}: no {BATCH_FILE}: not a results directory of `ckcd-coex run` (or made before "
                             f"batches were recorded)")
        if "merged_from" in batch:
            raise BatchError(f"{d}: is itself a merge; give the shard directories it came from")
        _check_plan(d, batch)
        batches.append((d, batch))
    first_dir, first = batches[0]
    if not first["project"].get("commit"):
        raise BatchError(f"{first_dir}: the project version it was made by is unknown (git could not read the "
                         f"checkout), so shards of different versions could not be told apart; run from a git checkout")
    indices: dict[int, str] = {}
    for d, b in batches:
        # The batch id is a string in a file: the fields it stands for must agree as well.
        same = all(b.get(k) == first.get(k) for k in ("batch_id", "grid_id", "plan", "shuffled", "seed", "project")) \
            and b["shard"]["count"] == first["shard"]["count"]
        if not same:
            raise BatchError(f"{d} and {first_dir} are not shards of one batch: {describe_difference(first, b)}")
        i = b["shard"]["index"]
        if i in indices:
            raise BatchError(f"{d} and {indices[i]} are both shard {i}/{b['shard']['count']}: merge one of them")
        indices[i] = d
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        raise BatchError(f"--out {out_dir}: not empty; merge into a new directory")
    return sorted(batches, key=lambda db: db[1]["shard"]["index"])


def _check_tree(run_dir: str) -> None:
    """A run's directory holds plain files the runner wrote: a symlink or a device in it (or the
    directory being one) would make the merge copy what it points at."""
    if os.path.islink(run_dir) or not os.path.isdir(run_dir):
        raise BatchError(f"{run_dir}: not a plain directory (a symlink?); a run directory holds only files")
    for dirpath, dirnames, filenames in os.walk(run_dir):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not (os.path.isfile(path) or os.path.isdir(path)):
                raise BatchError(f"{path}: a symlink or special file in a run's directory; not merged")




def _check_plan(d: str, batch: dict) -> None:
    """batch.json is a file anyone could have edited: its keys must not lead out of runs/."""
    plan = batch["plan"]  # a list of distinct strings (read_batch_file)
    for key in plan:
        parts = key.split("/")
        # A plan key names a directory under runs/: scenario, case, repN, each a safe name.
        if len(parts) != 3 or not all(is_safe_name(p) for p in parts):
            raise BatchError(f"{d}/{BATCH_FILE}: {key!r} is not a run's name (scenario/case/repN)")
