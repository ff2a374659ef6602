"""Heavy-hitter detection latency, end to end on the real lab: from the moment a flow
above the threshold starts to the moment its steering flow is on the switch.

Dumbbell, s1:3 declared a bottleneck, window 3 s, sampling 1-in-64 and 1-in-256; a TCP
flow paced at 2x the threshold starts. Two cases (SCENARIOS): threshold 15 Mbit/s (30 %
of a 50 Mbit/s port, a 30 Mbit/s flow: ~10 samples/s at 1-in-256, the sample-starved
case) and 50 Mbit/s (10 % of 500 Mbit/s, a 100 Mbit/s flow: ~32 samples/s at 1-in-256, as
the simulated port1g case of bench_sflow_decode.py). The flow's rate is above the threshold from its first round trip
(sub-millisecond RTT here), so the latency counts from its first full-size data frame
on s1's port toward h1 (tcpdump's kernel timestamp), not from when we launched iperf3
(which spends ~0.3 s on its server, its start-up and its control connection first). We
poll the switch's flow table every 50 ms for the steering flow, and split the latency at
the controller's decision (its log in GET /heavy-hitters): start -> detected (sFlow agent
batching + estimator) and detected -> visible (flow_mod + our polling).
Goal (issue 5): p95 <= 1 s.

    .venv/bin/python bench/bench_hh_latency.py [--runs 10] [--min-window 1.0] [--update-baseline]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
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
SAMPLINGS = (64, 256)
# name: declared port capacity, threshold share of it, the paced flow (2x the threshold)
SCENARIOS = {
    "thr15M": {"capacity_bps": 50_000_000, "share": 0.3, "flow": "30M"},
    "thr50M": {"capacity_bps": 500_000_000, "share": 0.1, "flow": "100M"},
}


def steering_visible(port: int) -> bool:
    return any(re.search(rf"priority=2100,tcp,.*tp_dst={port}\b", line)
               for line in ofctl("dump-flows", "s1").splitlines())


def first_data_frame(port: int) -> subprocess.Popen:
    """tcpdump on s1's port toward h1, waiting for the first full-size frame to `port`."""
    return subprocess.Popen(["tcpdump", "-i", "s1-eth1", "-tt", "-n", "-l", "-c", "1",
                             f"tcp dst port {port} and greater 1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def one_run(net, api, port: int, rate: str, timeout_s: float = 6.0) -> dict | None:
    h1, h3 = net.get("h1", "h3")
    sniffer = first_data_frame(port)
    time.sleep(0.5)  # tcpdump is listening
    flow = threading.Thread(target=iperf3, args=(h1, h3, "cubic"),
                            kwargs={"duration_s": 3, "port": port, "extra": f"-b {rate}"})
    launched = time.time()
    flow.start()
    visible = None
    while time.time() - launched < timeout_s:
        if steering_visible(port):
            visible = time.time()
            break
        time.sleep(0.05)
    flow.join()
    try:
        out, _ = sniffer.communicate(timeout=5)
        start = float(out.split()[0])
    except (subprocess.TimeoutExpired, IndexError, ValueError):
        sniffer.kill()
        sniffer.wait()
        start = None
    decided = [e["time"] for e in api.ok("GET", "/heavy-hitters")["log"]
               if e["decision"] == "steered" and e["flow"]["dst_port"] == port and e["time"] >= launched]
    deadline = time.monotonic() + 15
    while steering_visible(port) and time.monotonic() < deadline:  # released before the next run
        time.sleep(0.2)
    if visible is None or start is None:
        return None
    return {"latency_s": visible - start, "to_decision_s": decided[0] - start if decided else None,
            "launch_to_start_s": start - launched}


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="flows per case (default 10)")
    ap.add_argument("--min-window", type=float, default=1.0, help="detector min_window_s (default 1.0)")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.runs <= 100:
        ap.error("--runs must be between 1 and 100")
    if os.geteuid() != 0:
        print("needs root (Mininet, OVS)", file=sys.stderr)
        return 1
    doc = {"benchmark": "hh_latency", "machine": machine(), "runs": args.runs,
           "min_window_s": args.min_window, "cases": {}}
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work, \
            controlled_net(Dumbbell(), work, of_port=16703, rest_port=18120) as (net, ctl, api):
        tcp_port = 5400  # a fresh port per run: the log lookup and the release wait key on it
        for name, sc in SCENARIOS.items():
            api.ok("PUT", "/ports/1/3", {"capacity_bps": sc["capacity_bps"]})
            for sampling in SAMPLINGS:
                api.ok("PUT", "/heavy-hitters/config", {
                    "enabled": True, "collector": f"127.0.0.1:{SFLOW_PORT}", "sampling": sampling,
                    "capacity_share": sc["share"], "window_s": 3, "min_hold_s": 1,
                    "min_window_s": args.min_window})
                case = f"{name}/1-in-{sampling}"
                latencies, decisions, misses = [], [], 0
                for i in range(args.runs):
                    tcp_port += 1
                    r = one_run(net, api, tcp_port, sc["flow"])
                    if r is None:
                        misses += 1
                        print(f"{case} run {i + 1}/{args.runs}: missed", flush=True)
                        continue
                    latencies.append(r["latency_s"])
                    if r["to_decision_s"] is not None:
                        decisions.append(r["to_decision_s"])
                    decided = "?" if r["to_decision_s"] is None else f"{r['to_decision_s']:.3f}"
                    print(f"{case} run {i + 1}/{args.runs}: {r['latency_s']:.3f} s (decided after "
                          f"{decided} s; iperf3 launch to first frame {r['launch_to_start_s']:.3f} s)", flush=True)
                doc["cases"][case] = {
                    "threshold_bps": round(sc["capacity_bps"] * sc["share"]), "flow": sc["flow"],
                    "detected": len(latencies), "missed": misses,
                    "p50_s": round(statistics.median(latencies), 3) if latencies else None,
                    "p95_s": round(pct(latencies, 0.95), 3) if latencies else None,
                    "max_s": round(max(latencies), 3) if latencies else None,
                    "decision_p50_s": round(statistics.median(decisions), 3) if decisions else None,
                    "decision_p95_s": round(pct(decisions, 0.95), 3) if decisions else None}
    base = save("hh_latency", doc, args.update_baseline)

    def flat(d):
        return {f"{case} {k}": v for case, r in d.get("cases", {}).items() for k, v in r.items()}
    side_by_side(flat(doc), flat(base), base.get("machine"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
