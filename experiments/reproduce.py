"""`ckcd-coex reproduce`: one command per published table (experiments/published.py).

    ckcd-coex reproduce --list                 the tables, what each costs, when each was made
    ckcd-coex reproduce TABLE [--resume]       run its batch (root, the lab), then rewrite its
                                               summary and its table in the docs
    ckcd-coex reproduce TABLE --resume --extra-max M
                                               run its short cases again, until each has had M
                                               extra runs in all (or has its trusted runs)
    ckcd-coex reproduce TABLE --from DIR...    the summary from saved runs instead (no root)
    ckcd-coex reproduce --render               every marked table in the docs from its summary
    ckcd-coex reproduce TABLE --run-args       its batch's arguments for cluster/sweep.sbatch, to
                                               run it as shards on Slurm (docs/cluster.md)
"""

from __future__ import annotations

import os
import shlex
import sys

from experiments import published
from experiments.cli import COUNT_MAX, non_negative_count


def add_parser(sub) -> None:
    p = sub.add_parser("reproduce", help="run what a published table needs and rewrite its summary "
                       "(results/published/) and its table in the docs; --list, --render",
                       description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("table", nargs="?", help="a published table's name (--list shows them)")
    p.add_argument("--list", action="store_true", help="the published tables, their cost and their summaries' dates")
    p.add_argument("--render", action="store_true", help="rewrite every marked table in the docs from its summary")
    p.add_argument("--from", dest="dirs", nargs="+", metavar="DIR", help="summarize these results directories' "
                   "runs instead of running (each with its batch.json)")
    p.add_argument("--out", help="results directory of the table's batch (default results/reproduce/TABLE)")
    p.add_argument("--resume", action="store_true", help="continue the batch --out holds (an interrupted run)")
    p.add_argument("--extra-max", type=non_negative_count, metavar="M", help="at most M extra runs in all for a "
                   "case short of trusted runs, counting those it had, instead of the table's own bound; with "
                   "--resume, runs the still short cases of the batch --out holds again (without a batch there, "
                   "runs the whole table with this bound)")
    p.add_argument("--run-args", action="store_true", help="print the table's batch as cluster/sweep.sbatch's "
                   "arguments (SCENARIO... -- OPTION...), to run it as shards on Slurm")
    p.set_defaults(func=cmd_reproduce, needs_root=False)


def cmd_reproduce(args) -> int:
    if args.list:
        print(_listing())
        return 0
    if args.render:
        changed = published.render_docs()
        print(f"reproduce: {', '.join(changed) if changed else 'no docs file'} changed")
        return 0
    if not args.table:
        print("ckcd-coex reproduce: name a table (or --list, --render)", file=sys.stderr)
        return 2
    try:
        t = published.table(args.table)
        if isinstance(t, published.VmTable):
            summary = _vm_summary(t, args)
        elif args.extra_max is not None and args.dirs:
            print("ckcd-coex reproduce: --extra-max bounds the extra runs of a batch this command runs: it takes "
                  "no --from", file=sys.stderr)
            return 2
        elif args.run_args:
            if args.dirs or args.out or args.resume:
                print("ckcd-coex reproduce: --run-args prints the table's batch and runs nothing: it takes no "
                      "--from, --out or --resume", file=sys.stderr)
                return 2
            print(shlex.join(run_args(t, _extra_max(t, args))))
            return 0
        else:
            records, batches = _from_dirs(args.dirs) if args.dirs else _run(t, args)
            summary = None if records is None else published.build_summary(t, records, batches)
        if summary is None:
            return 2
        path = published.write_summary(summary)
        changed = published.render_docs()
    except published.TooFewTrusted as err:
        print(f"ckcd-coex reproduce: {err}: {more_runs(err, args)}", file=sys.stderr)
        return 2
    except published.PublishError as err:
        print(f"ckcd-coex reproduce: {err}", file=sys.stderr)
        return 2
    print(f"reproduce: {os.path.relpath(path)} written; {', '.join(changed) or 'no docs file'} changed")
    return 0


def _listing() -> str:
    lines, todo = [], []
    width = max(len(name) for name in published.TABLES) + 2
    for t in published.TABLES.values():
        try:
            when = ", ".join(published.summary_dates(published.read_summary(t.name)))
        except (OSError, ValueError, published.PublishError):
            when = "no summary yet"
            todo.append(t)
        where = f"scenarios {', '.join(t.scenarios)}" if t.scenarios else "the kernel VM's cases"
        lines.append(f"{t.name:{width}}{t.title}\n{'':{width}}{where}; {t.trusted} trusted runs "
                     f"a case; about {t.minutes} min; {t.doc}; summary: {when}")
    minutes = sum(t.minutes for t in todo)
    lines.append(f"\n{len(published.TABLES)} tables, {len(published.TABLES) - len(todo)} with a summary; the other "
                 f"{len(todo)} need about {minutes // 60} h {minutes % 60:02d} min of lab time")
    return "\n".join(lines)


def more_runs(err: published.TooFewTrusted, args) -> str:
    """What runs more of the cases a summary was refused for. This command's batch has topped
    each short case up until its extra-run bound was spent (an interrupted batch never gets
    here), so a bare --resume would run nothing: the bound is raised, with room for as many
    untrusted runs again as trusted ones are missing. Saved runs (--from) get a batch of their
    own, with the table's options, beside them."""
    t = err.table
    missing = max(t.trusted - c.trusted for c in err.short)
    if args.dirs:
        return _more_from(t, err.short, missing, args.dirs)
    bound = _extra_max(t, args)
    more = min(COUNT_MAX, max(bound, *(c.extras for c in err.short)) + 2 * missing)
    out = f" --out={shlex.quote(args.out)}" if args.out else ""
    return (f"each case's bound of {bound} extra runs is spent, so a bare --resume runs nothing more; "
            f"`sudo .venv/bin/{t.command}{out} --resume --extra-max {more}` runs these cases again")


def _more_from(t: published.Table, short: list[published.ShortCase], missing: int, dirs: list[str]) -> str:
    """A batch of the short cases only, with the table's options, into a directory of its own,
    and the --from that pools it with the saved runs. --only names each short case's member and
    case, so a member's case that is not short may run too: more trusted runs of it do no harm."""
    names = sorted({part for c in short for part in c.label.split("/")})
    words = [*t.scenarios, "--only", ",".join(names), *_options(t, missing, t.extra_max)]
    more = os.path.join("results", "reproduce", f"{t.name}-more")
    return (f"run them again into a directory of their own, `sudo .venv/bin/ckcd-coex run {shlex.join(words)} "
            f"--out {more}`, then `.venv/bin/{t.command} --from {shlex.join([*dirs, more])}`")


def _extra_max(t: published.Table, args) -> int:
    """The extra-run bound a case gets: --extra-max when given, else the table's own."""
    return t.extra_max if args.extra_max is None else args.extra_max


def _options(t: published.Table, n: int, extra_max: int) -> list[str]:
    """`ckcd-coex run` options for n trusted runs a case of the table's batch (at its length)."""
    options = ["--repeat", str(n), "--until-trusted", str(n), "--extra-max", str(extra_max)]
    return options + (["--duration", repr(t.duration_s)] if t.duration_s else [])


def run_args(t: published.Table, extra_max: int | None = None) -> list[str]:
    """The table's batch as `ckcd-coex run` arguments, in cluster/sweep.sbatch's form: the
    scenarios, `--`, then the options (each shard tops its cases up to its share of the trusted
    runs, so the merged shards hold the table's n; at most extra_max extra runs a case and
    shard, the table's own bound by default)."""
    options = _options(t, t.trusted, t.extra_max if extra_max is None else extra_max)
    return [*t.scenarios, "--", *options, *(["--only", ",".join(t.only)] if t.only else [])]


def _vm_summary(t: published.VmTable, args) -> dict | None:
    """A VM table's summary: from the runs saved in one directory (--from), or from one boot of
    the kernel lab that runs them (root) and saves them under --out first."""
    from experiments.lab import vm_ecn

    if args.resume or args.run_args or args.extra_max is not None or (args.dirs and len(args.dirs) > 1):
        print(f"ckcd-coex reproduce: {t.name} runs in one boot of the kernel VM: it has no --resume, "
              "--extra-max or --run-args, and --from takes one directory", file=sys.stderr)
        return None
    if not args.dirs and os.geteuid() != 0:
        print("ckcd-coex reproduce: the kernel VM's network needs root; --from DIR summarizes saved runs without",
              file=sys.stderr)
        return None
    try:
        saved = vm_ecn.load(args.dirs[0]) if args.dirs else \
            vm_ecn.measure(t.trusted, t.duration_s, args.out or os.path.join("results", "reproduce", t.name))
    except (OSError, ValueError, RuntimeError) as err:
        raise published.PublishError(str(err)) from err
    return published.build_vm_summary(t, saved)


def _from_dirs(dirs: list[str]):
    from experiments.analysis.metrics import measure_records
    from experiments.batch.pool import pool_dirs

    records, batches = pool_dirs(dirs)
    return measure_records(records), batches


def _run(t: published.Table, args):
    if os.geteuid() != 0:
        print("ckcd-coex reproduce: running a table's batch needs root (Mininet, Open vSwitch, namespaces); "
              "--from DIR summarizes saved runs without", file=sys.stderr)
        return None, None
    from experiments.batch.pool import pool_dirs
    from experiments.output.report import write_report
    from experiments.run.orchestrate import run_batch
    out = args.out or os.path.join("results", "reproduce", t.name)
    command = "ckcd-coex " + shlex.join(sys.argv[1:])
    records = run_batch(t.batch(), out, resume=args.resume, command=command, until_trusted=t.trusted,
                        extra_max=_extra_max(t, args))
    write_report(out, records, command=command)
    # the batch's own runs, measured by this code as they ran (a resumed batch is of this version)
    return pool_dirs([out])
