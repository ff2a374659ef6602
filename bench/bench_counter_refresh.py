"""How fresh an OpenFlow flow's byte counter is on our OVS, and what a fresher one costs.

OVS credits its datapath's counts to the OpenFlow rules only when a revalidator runs
(ovs_config/counter_refresh.py); confirming heavy hitters by counting reads those counters.
On the lab's dumbbell, for OVS's default and each other_config:max-revalidator setting:

- gaps: a 30 Mbit/s iperf3 flow h1 -> h3 runs 4 s while its forwarding flow on s1 is read
  with ovs-ofctl every ~5 ms; the gaps between the times its n_bytes changed.
- credit at install: a 5-tuple flow (priority 2050, as a counting flow) goes in on that running
  flow five times; its first value, in seconds of the flow's bytes (what the install's
  revalidation credited it with from before it existed).
- cost: the same flow for 4 s without our reads; ovs-vswitchd's CPU (% of one core) and the
  datapath flows it revalidates.

    sudo .venv/bin/python bench/bench_counter_refresh.py [--settings default,100,50,20] [--update-baseline]
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
from ovs_config.ovsdb import LOCAL  # noqa: E402
from ovs_config.private_ovs import PrivateOVS, ofctl  # noqa: E402
from tests.hostload import ProcCpu, vswitchd_pid  # noqa: E402
from tests.waiting import eventually  # noqa: E402
from topologies.dumbbell import Dumbbell  # noqa: E402

FLOW_RATE_BPS = 30_000_000
RUN_S = 4.0
COUNTING_MATCH = "table=0,cookie=0x77/-1"


def set_refresh(setting: str) -> None:
    if setting == "default":
        LOCAL.vsctl("remove", "Open_vSwitch", ".", "other_config", "max-revalidator")
    else:
        LOCAL.vsctl("set", "Open_vSwitch", ".", f"other_config:max-revalidator={int(setting)}")


def forwarding_bytes() -> int:
    """n_bytes of s1's table-1 flows toward h3 (the flow's forwarding flow)."""
    return sum(int(m.group(1)) for line in ofctl("dump-flows", "s1", "table=1").splitlines()
               if "10.0.0.3" in line for m in [re.search(r"n_bytes=(\d+)", line)] if m)


def counting_bytes() -> int | None:
    m = re.search(r"n_bytes=(\d+)", ofctl("dump-flows", "s1", COUNTING_MATCH))
    return int(m.group(1)) if m else None


def with_flow(h1, h3, port: int, seconds: float):
    t = threading.Thread(target=iperf3, args=(h1, h3, "cubic"),
                         kwargs={"duration_s": seconds, "port": port, "extra": f"-b {FLOW_RATE_BPS // 1_000_000}M"})
    t.start()
    return t


def change_gaps(h1, h3, port: int) -> list[float]:
    flow = with_flow(h1, h3, port, RUN_S)
    time.sleep(0.5)  # past iperf3's start
    changes, last, t0 = [], None, time.monotonic()
    while time.monotonic() - t0 < RUN_S - 1.0:
        b = forwarding_bytes()
        if b != last:
            changes.append(time.monotonic())
            last = b
        time.sleep(0.005)
    flow.join()
    return [b - a for a, b in zip(changes[1:], changes[2:])]  # from the second change: whole gaps


def install_credit(h1, h3, port: int, trials: int = 5) -> list[float]:
    """The first value a new 5-tuple flow shows, in seconds of the running flow's bytes."""
    flow = with_flow(h1, h3, port, 1.0 + trials * 1.0)
    before = forwarding_bytes()
    eventually(lambda: forwarding_bytes() > before + 100_000, timeout_s=5, what="the flow under way")
    credits = []
    for _ in range(trials):
        ofctl("add-flow", "s1", "table=0,cookie=0x77,priority=2050,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.3,"
              f"tp_dst={port},actions=goto_table:1")
        t0, first = time.monotonic(), None
        while first is None and time.monotonic() - t0 < 0.8:
            b = counting_bytes()
            if b:
                first = b
            time.sleep(0.005)
        credits.append(None if first is None else round(first * 8 / FLOW_RATE_BPS, 3))  # None: no value in 0.8 s
        ofctl("del-flows", "s1", COUNTING_MATCH)
        time.sleep(0.2)
    flow.join()
    return credits


def cost(h1, h3, port: int) -> dict:
    flow = with_flow(h1, h3, port, RUN_S + 1.0)
    time.sleep(0.5)
    with ProcCpu({"vswitchd": vswitchd_pid()}) as cpu:
        time.sleep(RUN_S)  # a fixed measuring span, not a wait for an effect
    dumped = subprocess.run(["ovs-appctl", "-t", os.path.join(os.environ["OVS_RUNDIR"], "ovs-vswitchd.ctl"),
                             "dpctl/dump-flows", "netdev@ovs-netdev"], capture_output=True, text=True)
    if dumped.returncode != 0:
        raise RuntimeError(f"ovs-appctl dpctl/dump-flows: {dumped.stderr.strip()}")
    dp_flows = len([line for line in dumped.stdout.splitlines() if line.strip()])
    flow.join()
    return {"vswitchd_core_pct": cpu.core_pct["vswitchd"], "datapath_flows": dp_flows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", default="default,100,50,20",
                    help="max-revalidator values in ms, 'default' for OVS's own (default: default,100,50,20)")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    for s in settings:
        if s != "default" and not (s.isdigit() and 10 <= int(s) <= 10_000):
            ap.error(f"--settings: {s!r} is neither 'default' nor 10..10000 ms")
    if os.geteuid() != 0:
        print("needs root (Mininet, OVS)", file=sys.stderr)
        return 1
    doc = {"benchmark": "counter_refresh", "machine": machine(), "flow_bps": FLOW_RATE_BPS, "settings": {}}
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory() as work, \
            controlled_net(Dumbbell(), work, of_port=16704, rest_port=18121) as (net, ctl, api):
        h1, h3 = net.get("h1", "h3")
        h1.cmd("ping -c 2 -W 1 10.0.0.3")
        port = 5600
        for s in settings:
            set_refresh(s)
            gaps = change_gaps(h1, h3, port := port + 1)
            credit = install_credit(h1, h3, port := port + 1)
            spent = cost(h1, h3, port := port + 1)
            row = {"gap_p50_s": round(statistics.median(gaps), 3) if gaps else None,
                   "gap_max_s": round(max(gaps), 3) if gaps else None, "gaps": len(gaps),
                   "install_credit_s": credit, **spent}
            doc["settings"][s] = row
            print(f"max-revalidator {s}: counter moves every {row['gap_p50_s']} s (max {row['gap_max_s']}); "
                  f"credited at install {credit} s of the flow; vswitchd {spent['vswitchd_core_pct']} % of a "
                  f"core over {spent['datapath_flows']} datapath flows", flush=True)
        set_refresh("default")
    base = save("counter_refresh", doc, args.update_baseline)

    def flat(d):
        return {f"{s} {k}": v for s, r in d.get("settings", {}).items() for k, v in r.items()
                if not isinstance(v, list)}
    side_by_side(flat(doc), flat(base), base.get("machine"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
