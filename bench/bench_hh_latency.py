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
batching + estimator, and with counting the counter's part, `counted_for_s` in the log) and
detected -> visible (flow_mod + our polling). Release: from iperf3's
end (the flow stops) to its steering flow gone from the switch (min_hold_s 1 s; with counting,
its counter's last second below the low threshold).
Goal: p95 <= 1 s; with confirmation by counting, p95 <= 0.5 s with the sampling the controller chooses
("chosen": the policy leaves `sampling` out), <= 1 s at 1-in-256, precision >= 0.99.

Confirmation by counting (the policy's default `counting`): sFlow suspects a flow at
half the threshold and a counting flow's counter confirms it. Beside each elephant a mouse
runs, paced at 0.7x the threshold (h2 -> h4): above the suspects' bar, so sFlow suspects it
often, and below the threshold, so steering it is a false positive; precision = elephants
steered / all flows steered. `--no-counting` measures sFlow's decision alone, as before.

    .venv/bin/python bench/bench_hh_latency.py [--runs 10] [--min-window 1.0] [--no-counting] [--update-baseline]
    .venv/bin/python bench/bench_hh_latency.py --only thr15M      (one threshold case, printed, not saved)
    .venv/bin/python bench/bench_hh_latency.py --polling-cost-only (the CPU of counting, also beside a mouse)
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
from experiments.lab.net import controlled_net  # noqa: E402
from experiments.lab.traffic import iperf3  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.private_ovs import PrivateOVS, ofctl  # noqa: E402
from tests.hostload import ProcCpu, vswitchd_pid  # noqa: E402
from tests.waiting import eventually  # noqa: E402
from topologies.dumbbell import Dumbbell  # noqa: E402

SFLOW_PORT = 16344
SAMPLINGS = (None, 64, 256)  # None: the controller chooses (coex.steering.chosen_sampling)
# name: declared port capacity, threshold share of it, the paced flow (2x the threshold)
MOUSE_PORT_OFFSET = 1000
POLL_COST_S = 8
MOUSE_SHARE = 0.7  # of the threshold
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


def one_run(net, api, port: int, rate: str, mouse_rate: str, timeout_s: float = 6.0) -> dict | None:
    h1, h2, h3, h4 = net.get("h1", "h2", "h3", "h4")
    sniffer = first_data_frame(port)
    time.sleep(0.5)  # tcpdump is listening
    flow = threading.Thread(target=iperf3, args=(h1, h3, "cubic"),
                            kwargs={"duration_s": 3, "port": port, "extra": f"-b {rate}"})
    mouse = threading.Thread(target=iperf3, args=(h2, h4, "cubic"),
                             kwargs={"duration_s": 3, "port": port + MOUSE_PORT_OFFSET, "extra": f"-b {mouse_rate}"})
    launched = time.time()
    mouse.start()
    flow.start()
    visible = None
    while time.time() - launched < timeout_s:
        if steering_visible(port):
            visible = time.time()
            break
        time.sleep(0.05)
    flow.join()
    ended = time.time()  # iperf3 has stopped sending: the flow is below any release level from here
    mouse.join()
    try:
        out, _ = sniffer.communicate(timeout=5)
        start = float(out.split()[0])
    except (subprocess.TimeoutExpired, IndexError, ValueError):
        sniffer.kill()
        sniffer.wait()
        start = None
    log = api.ok("GET", "/heavy-hitters")["log"]
    steers = [e for e in log if e["decision"] == "steered" and e["flow"]["dst_port"] == port and e["time"] >= launched]
    decided = [e["time"] for e in steers]
    counted_for = [e["counted_for_s"] for e in steers if "counted_for_s" in e]
    mouse_steers = [e for e in log if e["decision"] == "steered" and e["time"] >= launched
                    and e["flow"]["dst_port"] == port + MOUSE_PORT_OFFSET]
    mouse_steered = bool(mouse_steers)
    for e in mouse_steers:  # what made it look heavy: its counted rate, and when
        print(f"  mouse steered {e['time'] - launched:.3f} s after launch at {e['estimate_bps'] / 1e6:.1f} Mbit/s "
              f"({e['reason']}; counted for {e.get('counted_for_s')} s)", flush=True)
    deadline = time.monotonic() + 15
    released = None
    while time.monotonic() < deadline:  # released before the next run
        if released is None and not steering_visible(port):
            released = time.time()
        if released is not None and not steering_visible(port + MOUSE_PORT_OFFSET):
            break
        time.sleep(0.05)
    if visible is None or start is None:
        return {"missed": True, "mouse_steered": mouse_steered}
    return {"latency_s": visible - start, "to_decision_s": decided[0] - start if decided else None,
            "counted_for_s": counted_for[0] if counted_for else None,
            "launch_to_start_s": start - launched, "mouse_steered": mouse_steered,
            "release_s": None if released is None else max(0.0, released - ended)}


def polling_cost(net, api, ctl_pid: int, port: int, counting: bool, mouse: bool = False) -> dict:
    """CPU of ryu-manager and ovs-vswitchd over POLL_COST_S while one flow is steered, with the
    counters polled (counting) or not: what reading the counters every 0.1 s costs. With `mouse`
    a flow at 0.7x the threshold runs beside it: a suspect counted for a second every ~3 s (its
    switch's counters are then read every 0.05 s)."""
    sc = SCENARIOS["thr15M"]
    api.ok("PUT", "/ports/1/3", {"capacity_bps": sc["capacity_bps"]})
    api.ok("PUT", "/heavy-hitters/config", {"enabled": True, "collector": f"127.0.0.1:{SFLOW_PORT}",
                                            "sampling": 64, "capacity_share": sc["share"], "window_s": 3,
                                            "min_hold_s": 1, "counting": counting})
    h1, h2, h3, h4 = net.get("h1", "h2", "h3", "h4")
    flows = [threading.Thread(target=iperf3, args=(h1, h3, "cubic"),
                              kwargs={"duration_s": POLL_COST_S + 4, "port": port, "extra": f"-b {sc['flow']}"})]
    if mouse:
        rate = f"{MOUSE_SHARE * sc['capacity_bps'] * sc['share'] / 1e6:.1f}M"
        flows.append(threading.Thread(target=iperf3, args=(h2, h4, "cubic"),
                                      kwargs={"duration_s": POLL_COST_S + 4, "port": port + MOUSE_PORT_OFFSET,
                                              "extra": f"-b {rate}"}))
    for f in flows:
        f.start()
    eventually(lambda: steering_visible(port), timeout_s=4, what="the flow steered")
    with ProcCpu({"ryu_manager": ctl_pid, "vswitchd": vswitchd_pid()}) as cpu:
        time.sleep(POLL_COST_S)  # a fixed measuring span, not a wait for an effect
    for f in flows:
        f.join()
    deadline = time.monotonic() + 15
    while steering_visible(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    return cpu.core_pct


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="flows per case (default 10)")
    ap.add_argument("--min-window", type=float, default=1.0, help="detector min_window_s (default 1.0)")
    ap.add_argument("--no-counting", action="store_true", help="sFlow's estimate decides (counting off)")
    ap.add_argument("--polling-cost-only", action="store_true",
                    help="only the CPU of polling the counters (printed, not saved)")
    ap.add_argument("--only", choices=sorted(SCENARIOS), help="one threshold case (printed, not saved)")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.runs <= 100:
        ap.error("--runs must be between 1 and 100")
    if os.geteuid() != 0:
        print("needs root (Mininet, OVS)", file=sys.stderr)
        return 1
    doc = {"benchmark": "hh_latency", "machine": machine(), "runs": args.runs,
           "min_window_s": args.min_window, "counting": not args.no_counting, "cases": {}}
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work, \
            controlled_net(Dumbbell(), work, of_port=16703, rest_port=18120) as (net, ctl, api):
        tcp_port = 5400  # a fresh port per run: the log lookup and the release wait key on it
        for name, sc in ({} if args.polling_cost_only else SCENARIOS).items():
            if args.only and name != args.only:
                continue
            api.ok("PUT", "/ports/1/3", {"capacity_bps": sc["capacity_bps"]})
            threshold = sc["capacity_bps"] * sc["share"]
            mouse_rate = f"{MOUSE_SHARE * threshold / 1e6:.1f}M"
            for sampling in SAMPLINGS:
                api.ok("PUT", "/heavy-hitters/config", {
                    "enabled": True, "collector": f"127.0.0.1:{SFLOW_PORT}",
                    **({} if sampling is None else {"sampling": sampling}),
                    "capacity_share": sc["share"], "window_s": 3, "min_hold_s": 1,
                    "min_window_s": args.min_window, "counting": not args.no_counting})
                chosen = api.ok("GET", "/heavy-hitters")["ports"][0]["sampling"]
                case = f"{name}/1-in-{sampling}" if sampling else f"{name}/chosen-1-in-{chosen}"
                latencies, decisions, misses, false_steers, releases, counted = [], [], 0, 0, [], []
                for i in range(args.runs):
                    tcp_port += 1
                    r = one_run(net, api, tcp_port, sc["flow"], mouse_rate)
                    false_steers += r["mouse_steered"]
                    if r.get("missed"):
                        misses += 1
                        print(f"{case} run {i + 1}/{args.runs}: missed", flush=True)
                        continue
                    latencies.append(r["latency_s"])
                    if r["release_s"] is not None:
                        releases.append(r["release_s"])
                    if r["to_decision_s"] is not None:
                        decisions.append(r["to_decision_s"])
                    if r["counted_for_s"] is not None:
                        counted.append(r["counted_for_s"])
                    decided = "?" if r["to_decision_s"] is None else f"{r['to_decision_s']:.3f}"
                    split = "" if r["counted_for_s"] is None else f", {r['counted_for_s']:.3f} s of it counting"
                    print(f"{case} run {i + 1}/{args.runs}: {r['latency_s']:.3f} s (decided after "
                          f"{decided} s{split}; iperf3 launch to first frame {r['launch_to_start_s']:.3f} s)",
                          flush=True)
                doc["cases"][case] = {
                    "threshold_bps": round(sc["capacity_bps"] * sc["share"]), "flow": sc["flow"],
                    "detected": len(latencies), "missed": misses, "mouse": mouse_rate,
                    "mice_steered": false_steers,
                    "precision": round(len(latencies) / (len(latencies) + false_steers), 3)
                    if latencies or false_steers else None,
                    "recall": round(len(latencies) / args.runs, 3),
                    "p50_s": round(statistics.median(latencies), 3) if latencies else None,
                    "p95_s": round(pct(latencies, 0.95), 3) if latencies else None,
                    "max_s": round(max(latencies), 3) if latencies else None,
                    "decision_p50_s": round(statistics.median(decisions), 3) if decisions else None,
                    "decision_p95_s": round(pct(decisions, 0.95), 3) if decisions else None,
                    "counting_p50_s": round(statistics.median(counted), 3) if counted else None,
                    "counting_p95_s": round(pct(counted, 0.95), 3) if counted else None,
                    "release_p50_s": round(statistics.median(releases), 3) if releases else None,
                    "release_p95_s": round(pct(releases, 0.95), 3) if releases else None}
        if not args.no_counting and not args.only:
            on = polling_cost(net, api, ctl.proc.pid, 5900, counting=True)
            off = polling_cost(net, api, ctl.proc.pid, 5901, counting=False)
            doc["polling_cost_core_pct"] = {"counting": on, "sflow_only": off}
            print(f"CPU while one flow is steered (% of a core): counting {on}, sFlow only {off}", flush=True)
            if args.polling_cost_only:  # and while a mouse beside it is suspected and counted again and again
                on = polling_cost(net, api, ctl.proc.pid, 5902, counting=True, mouse=True)
                off = polling_cost(net, api, ctl.proc.pid, 5903, counting=False, mouse=True)
                print(f"... with a mouse at {MOUSE_SHARE}x beside it: counting {on}, sFlow only {off}", flush=True)
    if args.only:
        for case, r in doc["cases"].items():
            print(case, {k: r[k] for k in ("precision", "recall", "p50_s", "p95_s", "counting_p50_s",
                                           "counting_p95_s", "release_p95_s")}, flush=True)
    if args.polling_cost_only or args.only:
        return 0
    base = save("hh_latency", doc, args.update_baseline)

    def flat(d):
        return {f"{case} {k}": v for case, r in d.get("cases", {}).items() for k, v in r.items()}
    side_by_side(flat(doc), flat(base), base.get("machine"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
