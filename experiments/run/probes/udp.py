"""Real-time flows ([[udp_flows]]): each flow's receiver on its receiving host and its
constant-rate sender on its sending host (udpflow.py, run in the hosts), and the receiver's
intervals read back."""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import sys
import time

from experiments.run.probes.jsonlines import read_rows
from experiments.scenario.model import Scenario

if TYPE_CHECKING:  # only named in annotations: case.py imports this module
    from experiments.run.case import Started

RECEIVE_GRACE_S = 5.0  # the receivers outlive the run by this, and are stopped with it


def start_udp_flows(started: Started, scenario: Scenario, net, run_dir: str, t0: float) -> None:
    """Each [[udp_flows]] flow's receiver, listening now, and its sender, which waits until the
    flow's start_s."""
    if not scenario.udp_flows:
        return
    for g in scenario.udp_flows:
        started.popen(net.get(g.dst), [sys.executable, "-m", "experiments.run.probes.udpflow", "receive", "--port",
                                       str(g.port), "--duration", f"{scenario.duration_s + RECEIVE_GRACE_S:g}"],
                      os.path.join(run_dir, f"udp-{g.port}.jsonl"))
    time.sleep(0.3)  # listening before the first datagram (start_s may be 0)
    for g in scenario.udp_flows:
        started.popen(net.get(g.src), [sys.executable, "-m", "experiments.run.probes.udpflow", "send", "--host",
                                       net.get(g.dst).IP(), "--port", str(g.port), "--rate", str(g.rate_bps),
                                       "--bytes", str(g.packet_bytes), "--duration", f"{g.stop_s - g.start_s:g}",
                                       "--start-after", f"{max(0.0, g.start_s - (time.monotonic() - t0)):g}"],
                      os.path.join(run_dir, f"udp-send-{g.port}.txt"))


def udp_flow_record(g, run_dir: str, t0: float) -> dict:
    """A [[udp_flows]] flow's intervals: [t since t0, received, lost, reordered, OWD mean, p50, p95,
    max ms, jitter ms]. The hosts share the runner's monotonic clock (namespaces of one kernel)."""
    rec = {"label": g.label, "src": g.src, "dst": g.dst, "rate_bps": g.rate_bps, "port": g.port,
           "intervals": [], "error": None}
    try:
        rows = read_rows(os.path.join(run_dir, f"udp-{g.port}.jsonl"))
    except OSError as err:
        rec["error"] = f"no receiver output: {err.strerror}"
        return rec
    for row in rows:
        if "mono" in row:
            owd = row["owd_ms"]
            rec["intervals"].append([round(row["mono"] - t0, 3), row["received"], row["lost"], row["reordered"],
                                     owd["mean"], owd["p50"], owd["p95"], owd["max"], row["jitter_ms"]])
    if not rec["intervals"]:
        rec["error"] = "the receiver reported no interval"
    return rec
