"""`ckcd-coex report DIR...`: the runs of several results directories pooled per case.

A case measured in several batches (another day, more repetitions, a shard, `--until-trusted`'s
extra runs) is one sample of runs, so its means and confidence intervals take all of them —
but only when every run measured the same thing. Runs are pooled per (scenario, case) name, and
refused when two runs under one name come from different scenario definitions (the first
differing key is named; `repeat` is not part of a definition: it only says how many runs a
batch asked for) or when one run is given twice (a shard and the merge made of it).

Runs of different project versions, kernels or machines are pooled and listed in the report;
`same_version` refuses runs of more than one project version instead.
"""

from __future__ import annotations

import os

from experiments.batch.plan import BatchError, read_batch_file
from experiments.batch.provenance import version_label
from experiments.batch.records import load_records, run_key

NOT_DEFINITION = ("repeat",)  # scenario keys that do not change what a run measures


class PoolError(BatchError):
    """Runs that cannot be pooled; the message names the directories and the key."""


def pool_dirs(dirs: list[str], same_version: bool = False, log=None) -> tuple[list[dict], list[dict]]:
    """The records of every directory, checked to be poolable, and the batch files they came from."""
    records, batches, origin = [], [], {}
    seen: dict[str, str] = {}
    for d in dirs:
        real = os.path.realpath(d)
        if real in seen:
            raise PoolError(f"{d}: given twice (as {seen[real]} too): its runs would count twice")
        seen[real] = d
        batch = read_batch_file(d)
        if batch:
            batches.append(batch)
        for record in load_records(d, log):
            ident = (record.get("batch_id"), run_key(record))
            if ident in origin:
                raise PoolError(f"{origin[ident]} and {d} both hold run {ident[1]} of batch {ident[0]} (a shard "
                                f"and the merge made of it?): give only one of them")
            origin[ident] = d
            records.append(record)
    check_definitions(records, origin)
    if same_version:
        check_one_version(records)
    return records, batches


def check_definitions(records: list[dict], origin: dict | None = None) -> None:
    """Every run of one (scenario, case) name ran the same scenario definition."""
    first: dict[tuple, dict] = {}
    where = origin or {}
    for record in records:
        name = (record["scenario"]["name"], record["case"]["name"])
        if name not in first:
            first[name] = record
            continue
        key = definition_difference(first[name]["scenario"], record["scenario"])
        if key is not None:
            a, b = first[name], record
            raise PoolError(f"{'/'.join(name)}: runs of different scenarios under one name cannot be pooled: "
                            f"{key} is {_at(a['scenario'], key)!r} in {_place(a, where)} and "
                            f"{_at(b['scenario'], key)!r} in {_place(b, where)}")


def check_one_version(records: list[dict]) -> None:
    versions: dict[str, list[str]] = {}
    for record in records:
        label = version_label((record.get("provenance") or {}).get("project"))
        versions.setdefault(label, []).append(run_key(record))
    if len(versions) > 1:
        raise PoolError("--same-version: the runs come from " + str(len(versions)) + " project versions: "
                        + "; ".join(f"{v} ({len(keys)} runs, e.g. {keys[0]})" for v, keys in sorted(versions.items())))


def definition_difference(a, b, path: str = "") -> str | None:
    """The first key (dotted, `flows.1.cc`) at which two scenario definitions differ, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if not path and k in NOT_DEFINITION:
                continue
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                return sub
            found = definition_difference(a[k], b[k], sub)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return path
        for i, (x, y) in enumerate(zip(a, b)):
            found = definition_difference(x, y, f"{path}.{i}")
            if found is not None:
                return found
        return None
    return None if a == b and type(a) is type(b) or (_number(a) and _number(b) and a == b) else path


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _at(tree, dotted: str):
    for part in dotted.split("."):
        if isinstance(tree, list):
            tree = tree[int(part)] if int(part) < len(tree) else "(absent)"
        elif isinstance(tree, dict):
            tree = tree.get(part, "(absent)")
    return tree


def _place(record: dict, origin: dict) -> str:
    d = origin.get((record.get("batch_id"), run_key(record)))
    return f"{d}/runs/{run_key(record)}" if d else run_key(record)
