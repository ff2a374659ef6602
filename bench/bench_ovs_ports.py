#!/usr/bin/env python3
"""Open vSwitch's CPU per forwarded frame on the lab's kind of bridge (userspace datapath,
`datapath_type=netdev`), by port type: `system` (an AF_PACKET socket per port, what the lab
uses) against `afxdp-nonpmd` (an AF_XDP socket per port, served by vswitchd's main thread,
no busy-polling PMD thread; Debian's OVS is built with it).

Two namespaces joined through a private OVS bridge with one NORMAL flow (tests/link/linklab.py's
veths, offloads off, the middle ends moved to the root namespace where vswitchd runs); one
CUBIC flow A->B, paced at 100 Mbit/s (iperf3 -b) and unpaced. For each: goodput, vswitchd's
CPU (% of a core and us per frame, frames estimated from the bytes sent: one per 1448 bytes and
an ACK per two) and the machine's busy share. Writes
bench/results/ovs_ports.json beside bench/baseline/ovs_ports.json (--update-baseline).
Holds the lab lock; asserts nothing; a port type that does not come up is reported, not fatal.

    python3 bench/bench_ovs_ports.py [--seconds 10] [--types system,afxdp-nonpmd]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "link"))

from bench_link_forwarding import cpu_seconds  # noqa: E402
from benchlib import fmt, machine, save  # noqa: E402
from linklab import NetLab, iperf_goodput_bps, sh  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.private_ovs import PrivateOVS  # noqa: E402

BRIDGE = "bperf0"


def machine_ticks() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields[:8]), fields[3] + fields[4]


def vswitchd_pid(ovs: PrivateOVS) -> int:
    with open(ovs._pidfile("ovs-vswitchd")) as f:
        return int(f.read())


def one_flow(lab: NetLab, seconds: int, rate: str | None) -> dict:
    port = lab.next_port()
    lab.iperf_server(port)
    extra = ("-b", rate) if rate else ()
    c = lab.iperf_client(port, "cubic", seconds, omit=1, extra=extra)
    out, _ = c.communicate(timeout=seconds + 30)
    res = json.loads(out)
    lab.flush_tcp_metrics()
    if "error" in res:
        raise RuntimeError(res["error"])
    return res


def measure(ovs: PrivateOVS, lab: NetLab, port_type: str, seconds: int) -> dict:
    ovs.vsctl("--if-exists", "del-br", BRIDGE)
    ovs.vsctl("add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev")
    for name in (lab.if_la, lab.if_lb):
        ovs.vsctl("add-port", BRIDGE, name, "--", "set", "interface", name, f"type={port_type}")
    time.sleep(1)  # the ports' sockets and XDP programs come up asynchronously
    errors = {n: ovs.vsctl("get", "interface", n, "error").strip() for n in (lab.if_la, lab.if_lb)}
    if any(e not in ("[]", '""') for e in errors.values()):
        return {"port_type": port_type, "error": errors}
    pid = vswitchd_pid(ovs)
    out = {"port_type": port_type}
    for case, rate in (("paced_100mbit", "100M"), ("unpaced", None)):
        (m0, i0), c0, t0 = machine_ticks(), cpu_seconds(pid), time.monotonic()
        res = one_flow(lab, seconds, rate)
        (m1, i1), c1, t1 = machine_ticks(), cpu_seconds(pid), time.monotonic()
        frames = res["end"]["sum_sent"]["bytes"] / 1448 * 1.5  # data frames, and an ACK every other
        out[case] = {"goodput_mbps": round(iperf_goodput_bps(res) / 1e6, 1),
                     "vswitchd_core_pct": round(100 * (c1 - c0) / (t1 - t0), 1),
                     "vswitchd_us_per_frame": round(1e6 * (c1 - c0) / frames, 2),
                     "machine_busy_pct": round(100 * (1 - (i1 - i0) / (m1 - m0)), 1)}
    ovs.vsctl("del-br", BRIDGE)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--types", default="system,afxdp-nonpmd")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root", file=sys.stderr)
        return 1
    rows = []
    with lab_lock():
        ovs = PrivateOVS().start()
        lab = NetLab()
        try:
            lab.up()
            for name in (lab.if_la, lab.if_lb):  # vswitchd lives in the root namespace
                lab.ns(lab.ns_m, "ip", "link", "set", name, "netns", "1")
                sh("ip", "link", "set", name, "up")
            for port_type in args.types.split(","):
                try:
                    rows.append(measure(ovs, lab, port_type, args.seconds))
                except Exception as err:  # a port type this kernel or build cannot run
                    rows.append({"port_type": port_type, "error": f"{type(err).__name__}: {err}"})
                    ovs.vsctl("--if-exists", "del-br", BRIDGE)
                print(json.dumps(rows[-1]), flush=True)
        finally:
            lab.down()
            ovs.stop()
    doc = {"machine": machine(), "seconds": args.seconds, "rows": rows}
    base = save("ovs_ports", doc, args.update_baseline)
    old = {r["port_type"]: r for r in base.get("rows", [])}
    print(f"\n{'port type':>14} {'case':>14} {'Mbit/s':>8} {'vswitchd %':>11} {'us/frame':>9} {'busy %':>7}"
          "   baseline vswitchd %")
    for r in rows:
        for case in ("paced_100mbit", "unpaced"):
            if case not in r:
                continue
            c, b = r[case], old.get(r["port_type"], {}).get(case, {})
            print(f"{r['port_type']:>14} {case:>14} {fmt(c['goodput_mbps']):>8} {fmt(c['vswitchd_core_pct']):>11} "
                  f"{fmt(c['vswitchd_us_per_frame']):>9} {fmt(c['machine_busy_pct']):>7}   "
                  f"{fmt(b.get('vswitchd_core_pct'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
