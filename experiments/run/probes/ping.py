"""Ping across the bottleneck for the whole run: started on the scenario's ping source, its
replies read back with their wall-clock stamps (-D) as [t since the run's start, RTT ms]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import os

from experiments.scenario.model import Scenario

if TYPE_CHECKING:  # only named in annotations: case.py imports this module
    from experiments.run.case import Started


def start_ping(started: Started, scenario: Scenario, net, run_dir: str) -> None:
    """Ping for the whole run, each reply stamped with the wall clock (-D), into ping.txt; with
    per_rtt_group one more per other RTT group (Scenario.group_pings) into its own file."""
    ping = scenario.ping
    for src, dst, path in [(ping.src, ping.dst, "ping.txt")] + [
            (s, d, group_ping_file(s, d)) for s, d in scenario.group_pings()]:
        started.popen(net.get(src), ["ping", "-n", "-D", "-i", f"{ping.interval_s:g}", "-w",
                                     f"{scenario.duration_s:g}", net.get(dst).IP()], os.path.join(run_dir, path))


def group_ping_file(src: str, dst: str) -> str:
    return f"ping-{src}-{dst}.txt"


def ping_series(path: str, wall0: float) -> list:
    out = []
    with contextlib.suppress(OSError):
        for line in open(path):
            # [1795317446.123456] 64 bytes from 10.0.0.3: icmp_seq=1 ttl=64 time=20.4 ms
            if line.startswith("[") and "time=" in line:
                stamp = float(line[1:line.index("]")])
                rtt = float(line.split("time=")[1].split()[0])
                out.append([round(stamp - wall0, 3), rtt])
    return out
