"""The short demo behind `make demo`: seed 000's first experiment, shortened.

BBR (h1 -> h3) and CUBIC (h2 -> h4) share the dumbbell's bottleneck, ckcd-link at 100 Mbit/s,
10 ms each way, an 80-packet buffer, forwarded by the private userspace OVS under
`ryu-manager ckcd_coex`: once with DropTail, once with CKCD, 30 s each. Prints the comparison
and writes the report (Markdown, CSV, JSON, plots) under results/demo.
"""

from __future__ import annotations

import os
import time

from experiments.output.text import fmt
from experiments.batch.records import finished_runs
from experiments.output.report import write_report
from experiments.run.case import REST_PORT
from experiments.run.orchestrate import run_batch
from experiments.scenario.catalog import resolve

DASHBOARD_URL = f"http://127.0.0.1:{REST_PORT}/coex/v1/ui"


def _step(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def demo_table(summary: list[dict]) -> str:
    rows = ["| discipline | BBR Mbit/s | CUBIC Mbit/s | Jain | total Mbit/s | utilization | queueing delay mean / p99 ms "
            "| ping RTT mean ms | trusted / runs |", "|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        c = e["classes"]
        rows.append(f"| {e['case']} | {fmt(c.get('bbr', {}).get('mean_mbps', {}).get('mean'))} | "
                    f"{fmt(c.get('cubic', {}).get('mean_mbps', {}).get('mean'))} | {fmt(e['jain']['mean'], 3)} | "
                    f"{fmt(e['total_mbps']['mean'])} | {fmt(e['utilization']['mean'] and 100 * e['utilization']['mean'], 0)} % | "
                    f"{fmt(e['queue_delay_mean_ms']['mean'], 2)} / {fmt(e['queue_delay_p99_ms']['mean'], 2)} | "
                    f"{fmt(e['rtt_mean_ms']['mean'])} | {e['trusted']} / {e['runs']} |")
    return "\n".join(rows)


def keep_previous(out_dir: str) -> str | None:
    """An earlier demo's results move aside, to OUT-<when it was made>, instead of being written
    over (a results directory holds one batch, and a finished run is never deleted)."""
    if not finished_runs(out_dir):
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(os.path.getmtime(out_dir)))
    dest = f"{out_dir.rstrip('/')}-{stamp}"
    n = 1
    while os.path.lexists(dest):
        dest, n = f"{out_dir.rstrip('/')}-{stamp}.{n}", n + 1
    os.rename(out_dir, dest)
    return dest


def run_demo(duration_s: float = 30.0, out_dir: str = "results/demo") -> int:
    scenario = resolve("demo")
    if duration_s != scenario.duration_s:
        scenario = scenario.with_duration(duration_s)
    _step(f"BBR vs CUBIC through ckcd-link (100 Mbit/s, 10 ms, 80 packets), DropTail then CKCD, "
          f"{duration_s:g} s each; lab: private OVS, ryu-manager ckcd_coex, Mininet dumbbell")
    _step(f"watch it live while the runs go on: {DASHBOARD_URL} (queueing delay, drops, throughput; "
          f"each run starts its own controller there, the page keeps polling; Prometheus metrics at "
          f"http://127.0.0.1:{REST_PORT}/metrics; from another machine: ssh -L {REST_PORT}:127.0.0.1:{REST_PORT})")
    kept = keep_previous(out_dir)
    if kept:
        _step(f"the previous demo's runs are kept in {kept}")
    records = run_batch([scenario], out_dir, log=_step)
    # One run per case is a look at the lab, not a result: its numbers are shown even when the
    # run was untrusted, and the table and report say so.
    out = write_report(out_dir, records, command=f"ckcd-coex demo --duration {duration_s:g}",
                       include_untrusted=True)
    print()
    print(demo_table(out["summary"]))
    for h in out["headline"]:
        print(f"\nCKCD vs DropTail: fairness {100 * h['fairness_gain']:+.0f} % (paper: up to +62 %), queueing delay "
              f"{-100 * h['queue_delay_reduction']:+.0f} % (paper: latency up to -92 %), utilization "
              f"{100 * h['utilization_ckcd']:.0f} % (paper: 96 %)" if h["queue_delay_reduction"] is not None else "")
    untrusted = [e for e in out["summary"] if e["trusted"] < e["runs"]]
    for e in untrusted:
        print(f"untrusted {e['case']}: {'; '.join(e['untrusted_reasons'] or e['errors'])}")
    print(f"\nreport: {os.path.abspath(os.path.join(out_dir, 'report.md'))} (plots in {os.path.abspath(out_dir)}/plots)")
    failed = any(e["failed"] for e in out["summary"])
    return 1 if failed else 0
