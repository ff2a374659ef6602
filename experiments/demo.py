"""The short demo behind `make demo`.

Today: the controller forwarding over the private userspace OVS in the CKCD
dumbbell, one BBR and one CUBIC flow at once (h1 -> h3, h2 -> h4), a printed
table and a Markdown report. The bottleneck link with delay and the AQMs
(ckcd-link) replaces the plain s1-s2 link when the experiment runner lands.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time

from experiments.lab import Controller, mininet_net
from experiments.metrics import jain_index
from experiments.traffic import goodput_bps, iperf3, sender_cc
from ovs_config.lablock import lab_lock
from ovs_config.private_ovs import PrivateOVS
from topologies.dumbbell import Dumbbell


def _step(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_demo(duration_s: float = 10.0, out_dir: str = "results/demo") -> int:
    os.makedirs(out_dir, exist_ok=True)
    _step("waiting for the lab lock (one lab per machine)")
    with lab_lock():
        _step("starting the private Open vSwitch (userspace datapath)")
        with PrivateOVS():
            ctl_log = os.path.abspath(os.path.join(out_dir, "controller.log"))
            if os.path.exists(ctl_log):
                os.unlink(ctl_log)
            _step("starting ryu-manager ckcd_coex")
            with Controller(log_path=ctl_log) as ctl:
                _step("starting Mininet: the CKCD dumbbell h1,h2 - s1 - s2 - h3,h4")
                with mininet_net(Dumbbell(), ctl) as net:
                    loss = net.pingAll(timeout=2)
                    _step(f"pingall: {loss:.0f} % loss")
                    h1, h2, h3, h4 = net.get("h1", "h2", "h3", "h4")
                    _step(f"BBR h1->h3 and CUBIC h2->h4 together for {duration_s:g} s")
                    reports = {}

                    def flow(name, client, server, cc, port):
                        reports[name] = iperf3(client, server, cc, duration_s, port=port)

                    threads = [threading.Thread(target=flow, args=("bbr", h1, h3, "bbr", 5301)),
                               threading.Thread(target=flow, args=("cubic", h2, h4, "cubic", 5302))]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
    rows = [(name, sender_cc(r), goodput_bps(r) / 1e6) for name, r in sorted(reports.items())]
    jain = jain_index([mbps for *_, mbps in rows])
    table = ["| flow | congestion control | goodput (Mbit/s) |", "|---|---|---|"]
    table += [f"| {name} | {cc} | {mbps:.1f} |" for name, cc, mbps in rows]
    table.append(f"\nJain's fairness index: {jain:.3f} (1 = equal shares)")
    print("\n".join(table))
    report = os.path.join(out_dir, "report.md")
    with open(report, "w") as f:
        f.write(f"# ckcd-coex demo, {datetime.datetime.now().isoformat(timespec='seconds')}\n\n")
        f.write("Dumbbell h1,h2 - s1 - s2 - h3,h4 on the private userspace OVS, forwarded by "
                "`ryu-manager ckcd_coex`; no bottleneck emulation yet (unshaped veths, ~0.3 ms RTT), "
                "so this shows forwarding, not the BBR/CUBIC unfairness of a small buffer.\n\n")
        f.write(f"Pingall loss: {loss:.0f} %. Each flow ran {duration_s:g} s.\n\n")
        f.write("\n".join(table) + "\n")
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"pingall_loss_pct": loss, "duration_s": duration_s, "jain": jain,
                   "flows": [{"name": n, "cc": cc, "goodput_mbps": m} for n, cc, m in rows]}, f, indent=2)
    _step(f"lab torn down; report: {os.path.abspath(report)}")
    return 0 if loss == 0 else 1
