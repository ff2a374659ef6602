#!/usr/bin/env python3
"""ckcd-link's CPU against how exactly it releases frames: one CUBIC flow through the daemon
at 100 Mbit/s, 10 ms each way, "ckcd limit=80" (the shaped case of bench_link_forwarding.py),
once per --release-batch value. A sender thread wakes once per frame without batching, and a
wake-up costs tens of microseconds of CPU on our VMs (docs/ckcd-link.md, "Where the CPU
goes"); batching trades that for frames up to a batch late, which the lateness statistics
count. Writes bench/results/link_release.json beside bench/baseline/link_release.json
(--update-baseline rewrites the baseline). Holds the lab lock; asserts nothing.

    python3 bench/bench_link_release.py [--seconds 10] [--batches 0,100us,250us,500us,1ms]
"""

from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "link"))

from bench_link_forwarding import SHAPED_SPEC, through_daemon  # noqa: E402
from benchlib import fmt, machine, save  # noqa: E402
from linklab import NetLab  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.link_daemon import DEFAULT_BINARY  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--batches", default="0,100us,250us,500us,1ms",
                    help="comma-separated --release-batch values")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 1
    if not DEFAULT_BINARY.exists():
        print(f"{DEFAULT_BINARY} missing: make -C datapath", file=sys.stderr)
        return 1
    rows = []
    with lab_lock():
        lab = NetLab()
        try:
            lab.up()
            for batch in args.batches.split(","):
                # 0 is the default: not passed, so an older binary (CKCD_LINK_BIN) runs it too
                extra = () if batch == "0" else ("--release-batch", batch)
                r = through_daemon(lab, args.seconds, 100_000_000, 10.0, SHAPED_SPEC, extra)
                rows.append({"release_batch": batch, **r})
                print(f"--release-batch {batch}: {r['goodput_bps'] / 1e6:.1f} Mbit/s, ckcd-link "
                      f"{r['daemon_cpu_pct']} % of a core, releases late {r['late_mean_us']:.0f} us on "
                      f"average, {100 * r['late_over_1ms_frac']:.2f} % over 1 ms", flush=True)
        finally:
            lab.down()
    doc = {"machine": machine(), "seconds": args.seconds, "spec": SHAPED_SPEC, "rows": rows}
    base = save("link_release", doc, args.update_baseline)
    old = {r["release_batch"]: r for r in base.get("rows", [])}
    print(f"\n{'batch':>8} {'CPU %':>8} {'late us':>9} {'>1ms %':>8} {'Mbit/s':>8}   baseline: CPU %, late us")
    for r in rows:
        b = old.get(r["release_batch"], {})
        print(f"{r['release_batch']:>8} {fmt(r['daemon_cpu_pct']):>8} {fmt(r['late_mean_us']):>9} "
              f"{fmt(100 * r['late_over_1ms_frac']):>8} {fmt(r['goodput_bps'] / 1e6):>8}   "
              f"{fmt(b.get('daemon_cpu_pct'))}, {fmt(b.get('late_mean_us'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
