"""A batch's runs, one after another, on this machine: scenarios -> lab runs -> records on disk.

The whole batch holds the lab lock (one lab per machine) and the private OVS; each run is a
fresh lab (case.py). A failed run is recorded and the batch goes on; a finished run is never
written over (batch/records.py); --until-trusted tops short cases up with extra runs.
"""

from __future__ import annotations

import os
import time

from experiments.output.text import fmt
from experiments.batch import provenance
from experiments.batch.plan import (Batch, BatchError, PlanItem, Shard, check_resume, complete, declared_order,
                                    plan_batch, read_batch_file, write_batch_file)
from experiments.lab import bpf_cc, mptcp
from experiments.batch.records import finished, finished_runs, read_record, run_dir_of, run_key, trusted, \
    walk_records, write_json
from experiments.run.case import failed_record, run_case
from experiments.run.progress import Progress
from experiments.scenario.model import Scenario
from ovs_config.lablock import lab_lock
from ovs_config.private_ovs import PrivateOVS


RUN_OVERHEAD_S = 15.0  # bring-up and tear-down per run, for the first time estimate


def _log(msg: str) -> None:
    print(msg, flush=True)  # a batch's log is often a file: lines must not wait in a buffer


def run_batch(scenarios: list[Scenario], out_dir: str, log=_log, *, batch: Batch | None = None,
              resume: bool = False, command: str | None = None, until_trusted: int | None = None,
              extra_max: int | None = None) -> list[dict]:
    """Run this machine's part of a batch (all of it by default: every case of every scenario
    `repeat` times, in an order shuffled by a seed drawn from the grid) and return the run
    records of that part, in the scenarios' declared order (also on disk).

    A results directory holds one batch: one that holds finished runs is refused unless
    `resume`, which keeps the runs it holds complete for this batch and runs the rest. With
    `until_trusted` N, a case of this shard with fewer trusted runs than its share of N
    (shard_target; N itself unsharded) gets extra runs (numbered after the plan's, see
    extra_rep) until it has that share, at most `extra_max` per case in this shard."""
    if batch is None:
        batch = plan_batch(scenarios, provenance.project_version())
    _check_bpf_controls(scenarios)
    _check_mptcp(scenarios)
    if resume:
        check_resume(out_dir, batch)
    else:
        _refuse_finished_runs(out_dir)
    write_batch_file(out_dir, batch, command)
    held = _held_runs(out_dir, batch) if resume else {}
    todo = [item for item in batch.mine() if item.key not in held]
    lab = _BatchLab(out_dir, {"batch_id": batch.batch_id, "provenance": provenance.collect()}, log,
                    Progress([item.scenario.duration_s for item in todo], RUN_OVERHEAD_S))
    records = dict(held)
    _log_plan(log, batch, out_dir, resume, held, lab.progress)
    with lab_lock(timeout_s=4 * 3600), PrivateOVS():
        for item in todo:
            records[item.key] = lab.run(item)
        if until_trusted:
            _top_up(lab, batch, records, until_trusted, until_trusted if extra_max is None else extra_max)
        lab.progress.close()
    return _declared(batch, records)


def _check_bpf_controls(scenarios: list[Scenario]) -> None:
    """Scenarios with BPF congestion controls need them here: checked, and the objects built,
    before any lab starts (a missing clang would otherwise fail every run of the batch)."""
    wanted = sorted({f.cc for s in scenarios for f in (*s.flows, *s.short_flows)} & set(bpf_cc.BPF_CONTROLS))
    if not wanted:
        return
    why = bpf_cc.prerequisites_missing()
    if why:
        raise bpf_cc.BpfUnavailable(f"{', '.join(wanted)}: {why}")
    bpf_cc.build()


def _check_mptcp(scenarios: list[Scenario]) -> None:
    """MPTCP flows need mptcpize and the kernel's MPTCP, checked before any lab starts."""
    if any(f.mptcp for s in scenarios for f in s.flows):
        why = mptcp.prerequisites_missing()
        if why:
            raise mptcp.MptcpUnavailable(f"MPTCP flows: {why}")


def _refuse_finished_runs(out_dir: str) -> None:
    done = finished_runs(out_dir)
    if done:
        held = read_batch_file(out_dir)
        of = f" of batch {held['batch_id']}" if held else ""
        raise BatchError(f"--out {out_dir} already holds {len(done)} finished runs{of} (e.g. {done[0]}), which a "
                         f"new batch would write over: run into a new directory and pool both with `ckcd-coex "
                         f"report {out_dir} NEWDIR --out POOLED`, or add --resume to continue that batch")


def _held_runs(out_dir: str, batch: Batch) -> dict[str, dict]:
    """This batch's runs out_dir holds: the complete ones of the plan, and every extra run
    (--until-trusted's, failed ones too: their repetition numbers are spent)."""
    plan = {item.key for item in batch.plan}
    held = {}
    for record in walk_records(out_dir):
        if record.get("batch_id") != batch.batch_id:
            continue
        key = run_key(record)
        if complete(record, batch.batch_id) or key not in plan:
            held[key] = record
    return held


def _log_plan(log, batch: Batch, out_dir: str, resume: bool, held: dict[str, dict], progress: Progress) -> None:
    mine = batch.mine()
    part = f"shard {batch.shard} of batch {batch.batch_id}: {len(mine)} of {len(batch.plan)} runs" \
        if batch.shard.count > 1 else f"batch {batch.batch_id}: {len(mine)} runs"
    order = f"order shuffled by seed {batch.seed}" if batch.shuffled else "in the order written"
    log(f"[runner] {part}, {order}")
    if resume:
        untrusted = sum(1 for r in held.values() if finished(r) and not trusted(r))
        log(f"[runner] --resume: {len(held)} runs of this batch in {out_dir} kept ({untrusted} of them untrusted"
            + ("; --until-trusted N runs their cases again" if untrusted else "") + f"), {len(progress.durations)} to run")
    log(f"[runner] {len(progress.durations)} runs, about {progress.fmt(progress.remaining_s())} "
        f"(waiting for the lab lock: one lab per machine)")


class _BatchLab:
    """Runs one item after another into out_dir, keeping the progress line and the log."""

    def __init__(self, out_dir: str, made_by: dict, log, progress: Progress):
        self.out_dir, self.made_by, self.log, self.progress = out_dir, made_by, log, progress
        self.index = 0

    def run(self, item: PlanItem, note: str = "") -> dict:
        scenario, case, rep = item.scenario, item.case, item.rep
        run_dir = run_dir_of(self.out_dir, scenario.name, case.name, rep)
        label = f"{scenario.name}/{case.name} rep {rep}/{scenario.repeat}{note}"
        self.progress.begin_run(self.index, label)
        started = time.monotonic()
        try:
            record = run_case(scenario, case, rep, run_dir, self.progress, made_by=self.made_by)
        except KeyboardInterrupt:
            self.progress.close()
            raise
        except Exception as err:  # one failed run must not lose the batch
            record = {**failed_record(scenario, case, rep, f"{type(err).__name__}: {err}"), **self.made_by}
            if not finished(read_record(run_dir)):  # the refusal to write over a finished run
                write_json(os.path.join(run_dir, "run.json"), record)
        self.progress.end_run(time.monotonic() - started)
        self.index += 1
        self.log(f"[runner] {label}: {_outcome(record)}")
        return record


def _outcome(record: dict) -> str:
    m = record.get("metrics") or {}
    if record.get("error"):
        return f"FAILED: {record['error']}"
    trust = "trusted" if m["fidelity"]["trusted"] else "UNTRUSTED: " + "; ".join(m["fidelity"]["reasons"])
    return (f"Jain {m['jain']:.3f}, total {m['total_mbps']:.1f} Mbit/s, "
            f"queue delay {fmt(m['queue_delay_ms']['mean'])} ms, RTT {fmt(m['rtt_ms']['mean'])} ms "
            f"({trust})")


def extra_rep(repeat: int, shard: Shard, k: int) -> int:
    """The repetition number of a case's k-th extra run (from 0) in a shard: after the plan's
    1..repeat, interleaved by shard as the plan is, so two shards never pick the same number."""
    return repeat + 1 + shard.index + k * shard.count


def shard_target(until: int, planned_here: int, repeat: int) -> int:
    """The trusted runs a shard tops a case up to: its share of `until`, in proportion to the runs
    of the case the shard planned (the plan deals a case's `repeat` runs over the shards), rounded
    up, so the merged batch has at least `until` and no shard tops up for another. Unsharded, a
    shard plans all `repeat` runs and the target is `until` itself."""
    return -(-until * planned_here // repeat)


def _top_up(lab: _BatchLab, batch: Batch, records: dict[str, dict], until: int, extra_max: int) -> None:
    """Extra runs, one per short case a round (so a drift of the machine spreads over all of
    them), until each case of this shard has its share of `until` trusted runs (shard_target)
    or has had extra_max extras."""
    mine = batch.mine()
    cases = list(dict.fromkeys((item.scenario.name, item.case.name) for item in mine))
    by_name = {(item.scenario.name, item.case.name): item for item in mine}
    planned = {c: sum(1 for item in mine if (item.scenario.name, item.case.name) == c) for c in cases}
    target = {c: shard_target(until, planned[c], by_name[c].scenario.repeat) for c in cases}

    def runs_of(case):
        return [r for r in records.values() if (r["scenario"]["name"], r["case"]["name"]) == case]

    def extras_of(case):
        return sum(1 for r in runs_of(case) if r["rep"] > by_name[case].scenario.repeat)

    def short(case):
        return sum(1 for r in runs_of(case) if trusted(r)) < target[case] and extras_of(case) < extra_max
    while any(short(c) for c in cases):
        for case in [c for c in cases if short(c)]:
            item = by_name[case]
            rep = extra_rep(item.scenario.repeat, batch.shard, extras_of(case))
            lab.progress.durations.append(item.scenario.duration_s)
            have = sum(1 for r in runs_of(case) if trusted(r))
            record = lab.run(PlanItem(item.scenario, item.case, rep), f" (extra: {have}/{target[case]} trusted)")
            records[f"{case[0]}/{case[1]}/rep{rep}"] = record
    for case in cases:
        have, extras = sum(1 for r in runs_of(case) if trusted(r)), extras_of(case)
        if extras or have < target[case]:
            share = f" (this shard's share: {target[case]})" if batch.shard.count > 1 else ""
            lab.log(f"[runner] --until-trusted {until}{share}: {case[0]}/{case[1]} has {have} trusted of "
                    f"{len(runs_of(case))} runs after {extras} extra" + (f" (the bound of {extra_max} is spent)"
                                                                        if have < target[case] else ""))


def _declared(batch: Batch, records: dict[str, dict]) -> list[dict]:
    """The records in the scenarios' declared order (cases as written, repetitions in order)."""
    place = {(item.scenario.name, item.case.name): n for n, item in enumerate(declared_order(batch.scenarios))}
    return sorted(records.values(), key=lambda r: (place.get((r["scenario"]["name"], r["case"]["name"]), 0), r["rep"]))
