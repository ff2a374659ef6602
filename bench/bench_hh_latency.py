"""Heavy-hitter detection latency, end to end on the real lab: from the moment a flow
above the threshold starts to the moment its steering flow is on the switch.

Dumbbell, s1:3 declared a 50 Mbit/s bottleneck, threshold 30 % of it (15 Mbit/s),
sampling 1-in-64 (and 1-in-256), window 3 s: a TCP flow paced at 30 Mbit/s (2x the
threshold) starts; we poll the switch's flow table every 50 ms. Its rate is above the
threshold from its first round trip (sub-millisecond RTT here), so the latency counts
from its start. Goal (issue 5): p95 <= 1 s.

    .venv/bin/python bench/bench_hh_latency.py [--runs 10] [--update-baseline]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchlib import machine, save, side_by_side  # noqa: E402
from experiments.lab import controlled_net  # noqa: E402
from experiments.traffic import iperf3  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.private_ovs import PrivateOVS, ofctl  # noqa: E402
from topologies.dumbbell import Dumbbell  # noqa: E402

SFLOW_PORT = 16344


def steering_visible(port: int) -> bool:
    return any(re.search(rf"priority=2100,tcp,.*tp_dst={port}\b", line)
               for line in ofctl("dump-flows", "s1").splitlines())


def one_run(net, port: int, timeout_s: float = 6.0) -> float | None:
    h1, h3 = net.get("h1", "h3")
    flow = threading.Thread(target=iperf3, args=(h1, h3, "cubic"),
                            kwargs={"duration_s": 3, "port": port, "extra": "-b 30M"})
    started = time.monotonic()
    flow.start()
    seen = None
    while time.monotonic() - started < timeout_s:
        if steering_visible(port):
            seen = time.monotonic() - started
            break
        time.sleep(0.05)
    flow.join()
    deadline = time.monotonic() + 15
    while steering_visible(port) and time.monotonic() < deadline:  # released before the next run
        time.sleep(0.2)
    return seen


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--min-window", type=float, default=1.0, help="detector min_window_s (default 1.0)")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (Mininet, OVS)", file=sys.stderr)
        return 1
    doc = {"benchmark": "hh_latency", "machine": machine(), "runs": args.runs,
           "min_window_s": args.min_window, "cases": {}}
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work, \
            controlled_net(Dumbbell(), work, of_port=16703, rest_port=18120) as (net, ctl, api):
        api.ok("PUT", "/ports/1/3", {"capacity_bps": 50_000_000})
        for sampling in (64, 256):
            api.ok("PUT", "/heavy-hitters/config", {
                "enabled": True, "collector": f"127.0.0.1:{SFLOW_PORT}", "sampling": sampling,
                "capacity_share": 0.3, "window_s": 3, "min_hold_s": 1,
                "min_window_s": args.min_window})
            latencies, misses = [], 0
            for i in range(args.runs):
                seen = one_run(net, 5400 + i)
                print(f"1-in-{sampling} run {i + 1}/{args.runs}: "
                      f"{'missed' if seen is None else f'{seen:.3f} s'}", flush=True)
                if seen is None:
                    misses += 1
                else:
                    latencies.append(seen)
            doc["cases"][f"1-in-{sampling}"] = {
                "detected": len(latencies), "missed": misses,
                "p50_s": round(statistics.median(latencies), 3) if latencies else None,
                "p95_s": round(pct(latencies, 0.95), 3) if latencies else None,
                "max_s": round(max(latencies), 3) if latencies else None}
    base = save("hh_latency", doc, args.update_baseline)

    def flat(d):
        return {f"{case} {k}": v for case, r in d.get("cases", {}).items() for k, v in r.items()}
    side_by_side(flat(doc), flat(base), base.get("machine"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
