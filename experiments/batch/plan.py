"""A batch: the runs one `ckcd-coex run` is asked for, in one recorded order, and the part of
it (a shard) this machine runs.

The plan is every (scenario, case, repeat) of the scenarios given, each grid already expanded
to its members. Its order is shuffled by a seed, as Flent shuffles its batches: run in the
written order, every repeat of one case would sit next to the others in time, and a slow drift
of the machine (another tenant, thermal throttling, a filling disk) would look like a
difference between cases. The seed is recorded; by default it comes from the grid itself, so
every shard of a batch, started anywhere, computes the same order without being told.

A shard I/N takes the plan's items I, I+N, I+2N, ... into a directory of its own. Its
`batch.json` says which batch it is part of:

- `grid_id`: a hash of every expanded scenario (all keys, run length and repeats included);
- `batch_id`: a hash of the grid, the order (seed or none), the number of shards and the
  project's version: shards with the same `batch_id` are parts of one batch;
- `project`: git commit, whether the tree was dirty, and a hash of the difference;
- `plan`: every run of the whole batch in order, as `scenario/case/repN`; `shard`: I and N.

`ckcd-coex merge` (experiments/batch/merge.py) puts the shards back together; `--resume` runs only
what a shard's directory does not yet hold complete.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import random
import re

from experiments.batch.provenance import version_label
from experiments.scenario.model import Case, Scenario

BATCH_FILE = "batch.json"
FORMAT = 1


class BatchError(ValueError):
    """A shard, a resume or a merge that cannot be done as asked; the message says why."""


@dataclasses.dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """'I/N' with 0 <= I < N."""
        match = re.fullmatch(r"([0-9]{1,6})/([0-9]{1,6})", text)
        if not match:
            raise BatchError(f"--shard {text!r}: expected I/N, e.g. 0/2 (the first of two shards)")
        index, count = int(match[1]), int(match[2])
        if count < 1:
            raise BatchError(f"--shard {text!r}: the number of shards N must be at least 1")
        if index >= count:
            raise BatchError(f"--shard {text!r}: the shard index must be 0 to {count - 1} (counted from 0)")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclasses.dataclass
class PlanItem:
    scenario: Scenario
    case: Case
    rep: int

    @property
    def key(self) -> str:
        """`scenario/case/repN`: the run's directory under runs/, and its name in a plan."""
        return f"{self.scenario.name}/{self.case.name}/rep{self.rep}"


@dataclasses.dataclass
class Batch:
    scenarios: list[Scenario]
    shuffled: bool
    seed: int | None
    shard: Shard
    grid_id: str
    project: dict
    plan: list[PlanItem]  # the whole batch's runs, in the order they are run

    @property
    def batch_id(self) -> str:
        return _digest({"grid": self.grid_id, "seed": self.seed if self.shuffled else None,
                        "shards": self.shard.count, "project": self.project})

    def mine(self) -> list[PlanItem]:
        """This shard's runs: every N-th item of the plan from offset I."""
        return self.plan[self.shard.index::self.shard.count]

    def to_dict(self, command: str | None = None) -> dict:
        return {"format": FORMAT, "batch_id": self.batch_id, "grid_id": self.grid_id,
                "shuffled": self.shuffled, "seed": self.seed, "shard": dataclasses.asdict(self.shard),
                "project": self.project, "plan": [item.key for item in self.plan],
                "scenarios": {sc.name: {"grid_point": sc.grid_point, "repeat": sc.repeat,
                                        "disciplines": {d: sc.qdisc_spec(d) for d in sc.disciplines}}
                              for sc in self.scenarios},
                "command": command, "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def grid_id(scenarios: list[Scenario]) -> str:
    return _digest([sc.to_dict() for sc in scenarios])


def declared_order(scenarios: list[Scenario]) -> list[PlanItem]:
    """Scenarios as given, each one's cases as written, repeats last: the order a reader
    expects in a report."""
    return [PlanItem(sc, case, rep) for sc in scenarios for case in sc.cases() for rep in range(1, sc.repeat + 1)]


def plan_batch(scenarios: list[Scenario], project: dict, shard: Shard = Shard(0, 1), shuffle: bool = True,
               seed: int | None = None) -> Batch:
    """The batch of these scenarios: its order (shuffled by `seed`, by default one drawn from
    the grid's id) and which of it is `shard`'s."""
    names = [sc.name for sc in scenarios]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise BatchError(f"scenario {dup!r} is in the batch twice: its runs would share a directory")
    gid = grid_id(scenarios)
    plan = declared_order(scenarios)
    if shuffle:
        if seed is None:
            seed = int(gid[:8], 16)
        random.Random(seed).shuffle(plan)
    else:
        seed = None
    return Batch(scenarios, shuffle, seed, shard, gid, project, plan)


def write_batch_file(out_dir: str, batch: Batch, command: str | None) -> None:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, BATCH_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(batch.to_dict(command), f, indent=1)
    os.replace(path + ".tmp", path)


def read_batch_file(out_dir: str) -> dict | None:
    """The directory's batch.json, or None when it has none (a directory from before batches)."""
    path = os.path.join(out_dir, BATCH_FILE)
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise BatchError(f"{path}: unreadable ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BatchError(f"{path}: not a batch file of format {FORMAT}")
    _check_fields(path, data)
    return data


SHARDS_MAX = 100_000


def _check_fields(path: str, data: dict) -> None:
    """Every field a reader uses, with its type, so a hand-edited or truncated file is refused
    here, with its name, instead of failing somewhere later."""
    def bad(field: str, why: str):
        return BatchError(f"{path}: {field} {why}")

    for field in ("batch_id", "grid_id"):
        if not isinstance(data.get(field), str):
            raise bad(field, "is missing or not a string")
    plan = data.get("plan")
    if not isinstance(plan, list) or not all(isinstance(k, str) for k in plan):
        raise bad("plan", "is missing or not a list of run names")
    if len(set(plan)) != len(plan):
        raise bad("plan", "names a run twice")
    shard = data.get("shard")
    if not isinstance(shard, dict) or not all(type(shard.get(k)) is int for k in ("index", "count")) \
            or not 0 <= shard["index"] < shard["count"] <= SHARDS_MAX:
        raise bad("shard", f"is not {{index, count}} with 0 <= index < count <= {SHARDS_MAX}")
    if type(data.get("shuffled")) is not bool or not (data.get("seed") is None or type(data["seed"]) is int):
        raise bad("shuffled/seed", "are missing or of the wrong type")
    project = data.get("project")
    if not isinstance(project, dict) or not (project.get("commit") is None or isinstance(project["commit"], str)):
        raise bad("project", "is missing or its commit is not a string")
    for field in ("merged_from", "missing"):
        if field in data and not isinstance(data[field], list):
            raise bad(field, "is not a list")


def check_resume(out_dir: str, batch: Batch) -> None:
    """--resume continues the batch the directory holds, never another one."""
    held = read_batch_file(out_dir)
    if held is None:
        return  # nothing started there yet: resuming is starting
    if held["batch_id"] != batch.batch_id or held["shard"] != dataclasses.asdict(batch.shard):
        why = describe_difference(held, batch.to_dict())
        raise BatchError(f"--resume: {out_dir} holds shard {held['shard']['index']}/{held['shard']['count']} of "
                         f"batch {held['batch_id']}, not this one ({why}); give the same scenarios and options, "
                         f"or run into another directory")


def describe_difference(a: dict, b: dict) -> str:
    """Why two batch files are not of one batch, in the words a user acts on."""
    if a.get("grid_id") != b.get("grid_id") or a.get("plan") != b.get("plan"):
        return "different grids: other scenarios, grid values, run length or repeats"
    if a.get("project") != b.get("project"):
        return (f"different project versions: commit {version_label(a['project'])} and {version_label(b['project'])}")
    if a["shard"]["count"] != b["shard"]["count"]:  # both checked by read_batch_file
        return f"different batches: split into {a['shard']['count']} and {b['shard']['count']} shards"
    if (a.get("shuffled"), a.get("seed")) != (b.get("shuffled"), b.get("seed")):
        return f"different batches: run orders from seed {a['seed']} and {b['seed']}"
    return "different batches"


def complete(record: dict | None, batch_id: str) -> bool:
    """A run --resume keeps: finished without error, made by this batch."""
    return isinstance(record, dict) and not record.get("error") and record.get("metrics") is not None \
        and record.get("batch_id") == batch_id


def _digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
