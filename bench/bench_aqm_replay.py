#!/usr/bin/env python3
"""Per-packet cost of each AQM discipline (ns/packet), 2 and 100 flows, 80-packet buffer.

Runs datapath/build/aqm-bench (enqueue/dequeue loops on a simulated 100 Mbit/s
link at 1.1x load, no I/O, timed with clock_gettime), keeps the best of
--repeat runs per case, writes bench/results/aqm_replay.json and prints it
beside bench/baseline/aqm_replay.json. --update-baseline also rewrites the
baseline (commit it). Never asserts on timings: read the table.

    python3 bench/bench_aqm_replay.py [--repeat 5] [--packets 2000000] [--update-baseline]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "datapath", "build", "aqm-bench")
RESULT = os.path.join(REPO, "bench", "results", "aqm_replay.json")
BASELINE = os.path.join(REPO, "bench", "baseline", "aqm_replay.json")

CASES = {
    "droptail": "droptail limit=80",
    "red": "red limit=80",
    "codel": "codel limit=80",
    "choke": "choke limit=80",
    "ckcd": "ckcd limit=80",
    "bands": "bands weights=1,1 map=46:1 | ckcd limit=80 | droptail limit=80",
}
FLOWS = (2, 100)


def machine() -> dict:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def run_case(spec: str, flows: int, packets: int, repeat: int) -> dict:
    best = None
    for _ in range(repeat):
        out = subprocess.run([BENCH, "--qdisc", spec, "--flows", str(flows), "--packets", str(packets)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        if best is None or r["ns_per_pkt"] < best["ns_per_pkt"]:
            best = r
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--packets", type=int, default=2_000_000)
    ap.add_argument("--update-baseline", action="store_true")
    a = ap.parse_args()
    subprocess.run(["make", "-s", "-C", os.path.join(REPO, "datapath")], check=True, stdout=subprocess.DEVNULL)
    results = {}
    for name, spec in CASES.items():
        for flows in FLOWS:
            r = run_case(spec, flows, a.packets, a.repeat)
            results[f"{name}/{flows}"] = {"spec": spec, "flows": flows, "ns_per_pkt": r["ns_per_pkt"],
                                          "mean_qlen": r["mean_qlen"], "drops": r["drops"]}
    doc = {"benchmark": "aqm_replay", "unit": "ns/packet (best of %d)" % a.repeat, "packets": a.packets,
           "load": 1.1, "rate_bps": 100_000_000, "machine": machine(), "results": results}
    os.makedirs(os.path.dirname(RESULT), exist_ok=True)
    with open(RESULT, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    base = {}
    if os.path.exists(BASELINE):
        with open(BASELINE) as f:
            base = json.load(f).get("results", {})
    print(f"{'case':<14} {'ns/pkt':>8} {'baseline':>9} {'ratio':>6} {'x droptail':>10} {'mean qlen':>9}")
    for key, r in results.items():
        b = base.get(key, {}).get("ns_per_pkt")
        dt = results[f"droptail/{r['flows']}"]["ns_per_pkt"]
        print(f"{key:<14} {r['ns_per_pkt']:>8.1f} {b if b is not None else '-':>9} "
              f"{(r['ns_per_pkt'] / b if b else float('nan')):>6.2f} {r['ns_per_pkt'] / dt:>10.2f} "
              f"{r['mean_qlen']:>9.1f}")
    print(f"results: {os.path.relpath(RESULT, REPO)}")
    if a.update_baseline:
        os.makedirs(os.path.dirname(BASELINE), exist_ok=True)
        with open(BASELINE, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(f"baseline updated: {os.path.relpath(BASELINE, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
