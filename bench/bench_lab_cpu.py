#!/usr/bin/env python3
"""What a whole lab run costs the machine: the seed 000 BBR + CUBIC scenario (bbr_cubic, DropTail,
100 Mbit/s, 10 ms each way; the real controller, Mininet, the private OVS, ckcd-link, iperf3)
run by the experiment runner, once per setting, and the CPU the runner records every second
(run.json `cpu`): the machine's busy share of both cores, vswitchd's, ckcd-link's and the
runner's share of one core, with the run's own result (Jain's index, total goodput, trusted).

Settings: `exact` (every frame at its release time, the default) and `batch1ms`
(`link.release_batch_us = 1000`: ckcd-link's senders wake at most once a millisecond, which
also hands vswitchd its frames in batches; docs/ckcd-link.md). CKCD_LINK_BIN points the runner
at another ckcd-link build, to compare versions in the same conditions. Writes
bench/results/lab_cpu.json beside bench/baseline/lab_cpu.json (--update-baseline). Holds the
lab lock (through the runner); asserts nothing.

    python3 bench/bench_lab_cpu.py [--duration 120] [--settings exact,batch1ms] [--label NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchlib import fmt, machine, save  # noqa: E402
from experiments.run.probes.cpu import CpuSample  # noqa: E402

SCENARIO = os.path.join(REPO, "experiments", "scenarios", "bbr_cubic.toml")
SETTINGS = {"exact": 0, "batch1ms": 1000}


def scenario_with_batch(batch_us: int, tmp: str) -> str:
    """bbr_cubic.toml with link.release_batch_us set (0: the file itself)."""
    if not batch_us:
        return SCENARIO
    with open(SCENARIO) as f:
        text = f.read()
    marker = "[link]\n"
    assert marker in text, "bbr_cubic.toml has no [link] table"
    path = os.path.join(tmp, "bbr_cubic.toml")
    with open(path, "w") as f:
        f.write(text.replace(marker, f"{marker}release_batch_us = {batch_us}\n", 1))
    return path


def run(setting: str, duration: int, tmp: str) -> dict:
    out = os.path.join(tmp, setting)
    cmd = [os.path.join(REPO, ".venv", "bin", "ckcd-coex"), "run", scenario_with_batch(SETTINGS[setting], tmp),
           "--only", "droptail", "--duration", str(duration), "--out", out]
    subprocess.run(cmd, check=True, cwd=REPO)
    [path] = [os.path.join(d, "run.json") for d, _, files in os.walk(out) if "run.json" in files]
    with open(path) as f:
        rec = json.load(f)
    cpu = [CpuSample.from_row(r) for r in rec["cpu"]]
    m = rec["metrics"]
    mean = lambda xs: round(statistics.mean(x for x in xs if x is not None), 1)  # noqa: E731
    return {"setting": setting, "release_batch_us": SETTINGS[setting],
            "busy_pct": mean(s.busy_pct for s in cpu), "steal_pct": mean(s.steal_pct for s in cpu),
            "vswitchd_core_pct": mean(s.vswitchd_core_pct for s in cpu),
            "links_core_pct": mean(s.links_core_pct for s in cpu),
            "runner_core_pct": mean(s.runner_core_pct for s in cpu),
            "jain": m.get("jain"), "total_mbps": m.get("total_mbps"),
            "trusted": m["fidelity"]["trusted"], "untrusted_reasons": m["fidelity"]["reasons"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=int, default=120)
    ap.add_argument("--settings", default="exact,batch1ms")
    ap.add_argument("--label", default="", help="a name for this build (e.g. 'before'), kept in the JSON")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the lab)", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="ckcd-labcpu-") as tmp:
        for setting in args.settings.split(","):
            rows.append(run(setting, args.duration, tmp))
            print(json.dumps(rows[-1]), flush=True)
    doc = {"machine": machine(), "duration_s": args.duration, "label": args.label,
           "ckcd_link": os.environ.get("CKCD_LINK_BIN", "datapath/build/ckcd-link"), "rows": rows}
    base = save("lab_cpu", doc, args.update_baseline)
    old = {r["setting"]: r for r in base.get("rows", [])}
    print(f"\n{'setting':>9} {'busy %':>7} {'vswitchd':>9} {'ckcd-link':>10} {'Jain':>6} {'Mbit/s':>7} {'trusted':>8}"
          "   baseline busy %, vswitchd, ckcd-link")
    for r in rows:
        b = old.get(r["setting"], {})
        print(f"{r['setting']:>9} {fmt(r['busy_pct']):>7} {fmt(r['vswitchd_core_pct']):>9} "
              f"{fmt(r['links_core_pct']):>10} {fmt(r['jain']):>6} {fmt(r['total_mbps']):>7} {str(r['trusted']):>8}   "
              f"{fmt(b.get('busy_pct'))}, {fmt(b.get('vswitchd_core_pct'))}, {fmt(b.get('links_core_pct'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
