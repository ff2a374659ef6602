"""`ckcd-coex`: the lab's command line.

  ckcd-coex demo               BBR vs CUBIC, DropTail vs CKCD, 30 s each: table + results/demo/report.md
  ckcd-coex run [SCENARIO...]  run scenarios (built-in names, groups seed000/seed001/all, or TOML files)
  ckcd-coex run ... --shard I/N --out DIR   one shard of a batch (every N-th run from I), e.g. under Slurm
  ckcd-coex merge DIR... --out DIR   the shards of one batch into one report, CSV and JSON
  ckcd-coex report DIR         re-render DIR's report, CSV, JSON and plots from its saved runs
  ckcd-coex report DIR... --out DIR  pool the trusted runs of each case over several batches
  ckcd-coex export --flent DIR one .flent.gz per run of DIR, for Flent's plots
  ckcd-coex list               the built-in scenarios, their cases and run time
  ckcd-coex clean              remove what a crashed run left: private OVS, controller, Mininet leftovers
  ckcd-coex ovs start|stop|status   the private OVS for your own `mn`: eval "$(ckcd-coex ovs start)"
"""

from __future__ import annotations

import argparse
import re
import contextlib
import os
import shlex
import subprocess
import sys


def cmd_demo(args) -> int:
    from experiments.demo import run_demo

    return run_demo(duration_s=args.duration, out_dir=args.out)


COUNT_MAX = 1000  # runs per case, trusted runs, extra runs: more is a typo, not a batch


def _count(text: str, least: int) -> int:
    """A count of runs: ASCII digits only (int() would also take '+3', ' 3', '3_000' and other
    scripts' digits), from `least` to COUNT_MAX, so a slip cannot keep a root lab busy for days."""
    if not re.fullmatch(r"[0-9]{1,4}", text) or not least <= int(text) <= COUNT_MAX:
        raise argparse.ArgumentTypeError(f"expected a whole number from {least} to {COUNT_MAX}, got {text!r}")
    return int(text)


def _positive_int(text: str) -> int:
    return _count(text, 1)


def non_negative_count(text: str) -> int:
    return _count(text, 0)


def _shard(text: str):
    from experiments.batch.plan import BatchError, Shard

    try:
        return Shard.parse(text)
    except BatchError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix(f"--shard {text!r}: ")) from None


def _only(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []


def cmd_run(args) -> int:
    from experiments.batch import provenance
    from experiments.batch.plan import Shard, plan_batch
    from experiments.output.report import write_report
    from experiments.run.orchestrate import run_batch
    from experiments.scenario.catalog import select

    if args.extra_max is not None and not args.until_trusted:
        print("ckcd-coex run: --extra-max bounds --until-trusted's extra runs: give --until-trusted N too",
              file=sys.stderr)
        return 2
    shard = args.shard or Shard(0, 1)
    scenarios = select(args.scenarios, args.duration, args.repeat, _only(args.only))
    if not scenarios:
        print(f"ckcd-coex run: --only {args.only} matches no case", file=sys.stderr)
        return 2
    batch = plan_batch(scenarios, provenance.project_version(), shard, shuffle=not args.no_shuffle, seed=args.seed)
    command = "ckcd-coex " + shlex.join(sys.argv[1:])
    records = run_batch(scenarios, args.out, batch=batch, resume=args.resume, command=command,
                        until_trusted=args.until_trusted, extra_max=args.extra_max)
    out = write_report(args.out, records, command=command, include_untrusted=args.include_untrusted)
    from experiments.output.markdown import headline_table
    if out["headline"]:
        print("\n".join(headline_table(out["headline"])))
    print(f"report: {os.path.abspath(os.path.join(args.out, 'report.md'))}")
    return 1 if any(e["failed"] for e in out["summary"]) else 0


def cmd_report(args) -> int:
    from experiments.batch.pool import pool_dirs
    from experiments.output.report import write_report

    out_dir = args.out or args.dirs[0]
    if len(args.dirs) > 1 and not args.out:
        print("ckcd-coex report: several directories pool into a new one: give --out DIR", file=sys.stderr)
        return 2
    if args.out and len(args.dirs) > 1 and os.path.realpath(args.out) in {os.path.realpath(d) for d in args.dirs}:
        print(f"ckcd-coex report: --out {args.out} is one of the pooled directories: its own report would be "
              "replaced by the pooled one; give a new directory", file=sys.stderr)
        return 2
    records, batches = pool_dirs(args.dirs, same_version=args.same_version)
    if not records:
        return 1
    out = write_report(out_dir, records, command="ckcd-coex " + shlex.join(sys.argv[1:]) if args.out else None,
                       include_untrusted=args.include_untrusted, batches=batches)
    print(f"report: {os.path.abspath(os.path.join(out_dir, 'report.md'))} ({len(records)} runs from "
          f"{len(args.dirs)} directories, {sum(len(p) for p in out['plots'].values())} plots)")
    return 0


def cmd_merge(args) -> int:
    from experiments.batch.merge import merge_shards
    from experiments.output.markdown import headline_table
    from experiments.output.report import write_report

    records = merge_shards(args.dirs, args.out, allow_missing=args.allow_missing)
    out = write_report(args.out, records, command="ckcd-coex " + shlex.join(sys.argv[1:]))
    if out["headline"]:
        print("\n".join(headline_table(out["headline"])))
    print(f"report: {os.path.abspath(os.path.join(args.out, 'report.md'))} ({len(records)} runs)")
    return 0


def cmd_export(args) -> int:
    from experiments.output.flent import export_flent

    try:
        written = export_flent(args.dir, args.out)
    except ValueError as err:  # a name in a record that cannot be a file name: nothing was written
        print(f"ckcd-coex export: {err}", file=sys.stderr)
        return 2
    print(f"export: {len(written)} Flent files under {os.path.abspath(args.out or os.path.join(args.dir, 'flent'))}")
    return 0 if written else 1


def cmd_list(args) -> int:
    from experiments.run.orchestrate import RUN_OVERHEAD_S
    from experiments.scenario.catalog import GROUPS, builtin_names, resolve

    total = 0.0
    for name in builtin_names():
        sc = resolve(name)
        runs = len(sc.cases()) * sc.repeat * len(sc.expanded())
        t = runs * (sc.duration_s + RUN_OVERHEAD_S)
        total += t if name != "demo" else 0
        swept = f" at {len(sc.expanded())} grid points" if sc.sweep else ""
        print(f"{name:18s} {len(sc.cases())} cases{swept} x {sc.duration_s:g} s  ~{t / 60:.0f} min  "
              f"{', '.join(c.name for c in sc.cases())}  - {sc.title}")
    for g, members in GROUPS.items():
        print(f"group {g}: {' '.join(members)}")
    print(f"all (without demo): ~{total / 60:.0f} min")
    return 0


def cmd_clean(args) -> int:
    from ovs_config.lablock import LAB_LOCK_PATH, lab_lock
    from ovs_config.private_ovs import PrivateOVS

    try:  # never clean up under a lab that is running: that is not a crash's leftovers
        with lab_lock(timeout_s=0):
            pass
    except TimeoutError:
        holder = open(LAB_LOCK_PATH).read().strip()
        print(f"clean: a lab is running (pid {holder} holds {LAB_LOCK_PATH}); not touching it",
              file=sys.stderr)
        return 1

    ovs = PrivateOVS()
    if ovs.running():
        os.environ.update(ovs.env())
        # Mininet's cleanup, pointed at our OVS by the environment: bridges, veths, its processes.
        subprocess.run(["mn", "-c"], capture_output=True)
    ovs.stop(force=True)
    from experiments.lab import bpf_cc

    for name in bpf_cc.remove_leftovers():
        print(f"clean: unregistered the BPF congestion control {name}")
    for launcher in ("ryu-manager", "ckcd-coex-controller"):
        subprocess.run(["pkill", "-f", f"{launcher} .*ckcd_coex"], capture_output=True)
    print("clean: private OVS stopped, controller and Mininet leftovers removed")
    return 0


# `ckcd-coex ovs`: the private OVS for a user's own `mn`, ovs-vsctl and ovs-ofctl. Its stdout is
# only the shell line that points them at it (eval "$(ckcd-coex ovs start)"), its talk is stderr.
# It holds no lab lock: a lock lives as long as a process, and a forgotten OVS would make every
# lab wait in silence. It starts under the lock instead, so never beside a lab, and labs refuse to
# start while it runs, naming `ckcd-coex ovs stop` (ovs_config.private_ovs).

def _manual_ovs():
    from ovs_config.private_ovs import MANUAL_RUN_DIR, PrivateOVS

    return PrivateOVS(MANUAL_RUN_DIR)


def _ovs_say(text: str) -> None:
    print(f"ovs: {text}", file=sys.stderr)


def _print_export(ovs) -> None:
    print("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in ovs.env().items()))


def _ancestors() -> set[int]:
    pids, pid = set(), os.getppid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:  # it exited meanwhile: its ancestors are no longer ours to know
            break
    return pids


def _enter_lab_lock(stack) -> int | None:
    """Take the lab lock into stack; the pid of another lab that holds it, else None. A lock held
    by a process that started this one (a test running the README's commands) is that lab's own."""
    from ovs_config.lablock import LAB_LOCK_PATH, lab_lock

    try:
        stack.enter_context(lab_lock(timeout_s=0))
        return None
    except TimeoutError:
        holder = int(open(LAB_LOCK_PATH).read().strip() or 0)
        return None if holder in _ancestors() else holder


def _ovs_start(ovs) -> int:
    if ovs.running():
        _ovs_say(f"already running in {ovs.run_dir}")
    else:
        with contextlib.ExitStack() as stack:
            holder = _enter_lab_lock(stack)
            if holder:
                _ovs_say(f"a lab is running (pid {holder} holds the lab lock): wait for it to end, then "
                         "run this again")
                return 1
            ovs.start()
        _ovs_say(f"started in {ovs.run_dir} (userspace datapath); labs (make test, make demo) refuse "
                 "to run beside it: `ckcd-coex ovs stop` when you are done")
    _print_export(ovs)
    return 0


def _ovs_stop(ovs) -> int:
    bridges = ovs.vsctl("list-br").split() if ovs.running() else []
    ovs.stop(force=True)
    _ovs_say(f"stopped; removed {len(bridges)} bridge(s) {' '.join(bridges)}".rstrip())
    print("unset " + " ".join(ovs.env()))
    return 0


def _ovs_status(ovs) -> int:
    if not ovs.running():
        _ovs_say("not running (`ckcd-coex ovs start` starts it)")
        return 3  # LSB's "not running"
    _ovs_say(f"running in {ovs.run_dir}; bridges: {' '.join(ovs.vsctl('list-br').split()) or 'none'}")
    _print_export(ovs)
    return 0


def cmd_ovs(args) -> int:
    return {"start": _ovs_start, "stop": _ovs_stop, "status": _ovs_status}[args.action](_manual_ovs())


def _run_parser(sub) -> None:
    # allow_abbrev=False: an abbreviation (`--sh`) would pass the sweep script's check of which
    # options it forwards, and a future option could make an old abbreviation mean another one.
    run = sub.add_parser("run", help="run scenarios and write results, CSV, plots and a report",
                         allow_abbrev=False)
    run.add_argument("scenarios", nargs="*", help="built-in names, groups (seed000, seed001, all) or TOML "
                     "files (default: seed000)")
    run.add_argument("--duration", type=float, help="seconds per run (start/stop times scale with it)")
    run.add_argument("--repeat", type=_positive_int, help="runs per case (default: the scenario's, 1)")
    run.add_argument("--only", help="comma-separated disciplines, approaches or case names to keep, "
                     "e.g. droptail,ckcd")
    run.add_argument("--out", default="results/run", help="results directory (default results/run)")
    run.add_argument("--shard", metavar="I/N", type=_shard, help="run only shard I of N (from 0): every N-th run of the "
                     "batch's order from the I-th; each shard into its own --out, then `ckcd-coex merge`")
    run.add_argument("--seed", type=int, help="the seed that shuffles the run order (default: one derived "
                     "from the grid, so every shard agrees; recorded in DIR/batch.json)")
    run.add_argument("--no-shuffle", action="store_true", help="run in the order written (scenarios, "
                     "cases, repeats) instead of a shuffled one")
    run.add_argument("--resume", action="store_true", help="keep the runs --out already holds complete for "
                     "this batch and run the rest (an interrupted batch or shard); without it a directory that "
                     "holds finished runs is refused, never written over")
    run.add_argument("--until-trusted", type=_positive_int, metavar="N", help="after the planned runs, run "
                     "each case again until it has N trusted runs (extra runs numbered after the plan's; in a shard, "
                     "until it has the shard's share of N)")
    run.add_argument("--extra-max", type=non_negative_count, metavar="M", help="at most M extra runs per case "
                     "(per case and shard, in a shard) for --until-trusted (default N)")
    run.add_argument("--include-untrusted", action="store_true", help="pool untrusted runs into the report's "
                     "means too (marked as such; by default only trusted runs are)")
    run.set_defaults(func=cmd_run, needs_root=True)


def _offline_parsers(sub) -> None:
    """The commands that read saved runs only: no root, no lab."""
    merge = sub.add_parser("merge", help="merge the shard directories of one batch into one report")
    merge.add_argument("dirs", nargs="+", metavar="DIR", help="shard directories (each with its batch.json)")
    merge.add_argument("--out", required=True, help="a new directory for the merged runs and report")
    merge.add_argument("--allow-missing", action="store_true", help="merge even if runs of the batch are "
                       "missing or failed (they are listed)")
    merge.set_defaults(func=cmd_merge, needs_root=False)
    export = sub.add_parser("export", help="write the runs of a results directory in another tool's format")
    export.add_argument("--flent", dest="dir", required=True, metavar="DIR",
                        help="one Flent data file (.flent.gz) per run of DIR")
    export.add_argument("--out", help="where the files go (default DIR/flent)")
    export.set_defaults(func=cmd_export, needs_root=False)
    report = sub.add_parser("report", help="re-render the report of a results directory from its saved runs, or "
                            "pool several directories' runs per case")
    report.add_argument("dirs", nargs="+", metavar="DIR", help="results directories (batches, shards, merges)")
    report.add_argument("--out", help="where the report goes (default: DIR; required with several DIRs)")
    report.add_argument("--include-untrusted", action="store_true", help="pool untrusted runs into the means "
                        "too (marked as such)")
    report.add_argument("--same-version", action="store_true", help="refuse runs made by more than one "
                        "version of the project")
    report.set_defaults(func=cmd_report, needs_root=False)
    lst = sub.add_parser("list", help="the built-in scenarios")
    lst.set_defaults(func=cmd_list, needs_root=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ckcd-coex", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="short BBR-vs-CUBIC run with a printed table and a report")
    demo.add_argument("--duration", type=float, default=30.0, help="seconds per traffic run (default 30)")
    demo.add_argument("--out", default="results/demo", help="report directory (default results/demo)")
    demo.set_defaults(func=cmd_demo)
    _run_parser(sub)
    _offline_parsers(sub)
    from experiments.reproduce import add_parser as add_reproduce
    add_reproduce(sub)
    clean = sub.add_parser("clean", help="stop and remove everything a lab run may have left")
    clean.set_defaults(func=cmd_clean)
    ovs = sub.add_parser("ovs", help="the private Open vSwitch for your own mn: prints the export line it needs")
    ovs.add_argument("action", choices=["start", "stop", "status"])
    ovs.set_defaults(func=cmd_ovs)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "needs_root", True) and os.geteuid() != 0:
        print("ckcd-coex: must run as root (Mininet, Open vSwitch, namespaces)", file=sys.stderr)
        return 2
    from experiments.batch.plan import BatchError
    from experiments.lab.bpf_cc import BpfUnavailable
    from experiments.lab.mptcp import MptcpUnavailable
    from experiments.lab.net import teardown_on_sigterm
    from experiments.scenario.model import ScenarioError
    from ovs_config.private_ovs import OVSError

    teardown_on_sigterm()
    try:
        return args.func(args)
    except (ScenarioError, BatchError) as err:
        print(f"ckcd-coex: {err}", file=sys.stderr)
        return 2
    except OVSError as err:  # e.g. a lab refusing to start beside `ckcd-coex ovs start`'s OVS
        print(f"ckcd-coex: {err}", file=sys.stderr)
        return 1
    except (BpfUnavailable, MptcpUnavailable) as err:  # a scenario's BPF control or MPTCP cannot run here
        print(f"ckcd-coex: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ckcd-coex: interrupted; the lab was torn down", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
