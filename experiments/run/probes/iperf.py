"""The flows' bulk transfers: iperf3 servers and clients, started and read back.

Each flow is one iperf3 client on its sending host against a server on its receiving host,
started at the flow's start time, with the receiver's per-second goodput brought back in the
client's JSON (--get-server-output), the sender's sRTT per interval, and its data connection on
a port of its own (--cport) by which the ss sampler (ss.py) and ckcd-link's flow stats find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import json
import os
import subprocess
import time

from experiments.lab import mptcp
from experiments.scenario.model import Flow, Scenario

if TYPE_CHECKING:  # only named in annotations: case.py imports this module
    from experiments.run.case import Started
    from experiments.run.progress import Progress


def start_servers(started: Started, flows: list[Flow], net) -> None:
    for f in flows:  # -1: each serves one client and exits
        cmd = ["iperf3", "-s", "-1", "-J", "-p", str(f.port)]
        started.popen(net.get(f.dst), mptcp.run_under(cmd) if f.mptcp else cmd)


def start_clients_on_time(started: Started, scenario: Scenario, net, run_dir: str, t0: float,
                           progress: Progress | None) -> tuple[list[subprocess.Popen], dict[int, float]]:
    """Start each flow's client once its start_s has come (looked at every 0.2 s) until all have
    started and the run's duration is over. Returns the clients in start order, and when each
    flow (by its index in scenario.flows) started, in seconds since t0."""
    flows = scenario.flows
    pending = sorted(range(len(flows)), key=lambda i: flows[i].start_s)
    clients: list[subprocess.Popen] = []
    launched: dict[int, float] = {}
    end = t0 + scenario.duration_s
    while True:
        now = time.monotonic()
        while pending and now >= t0 + flows[pending[0]].start_s:
            i = pending.pop(0)
            clients.append(_start_client(started, flows[i], net, run_dir))
            launched[i] = time.monotonic() - t0
        if progress:
            progress.tick(now - t0)
        if now >= end and not pending:
            return clients, launched
        time.sleep(0.2)


def _start_client(started: Started, f: Flow, net, run_dir: str) -> subprocess.Popen:
    # -J --get-server-output: the receiver's per-second goodput comes back in the client's JSON
    # --cport: the data connection's own port, by which the ss sampler tells it from iperf3's
    # control connection to the same server port
    cmd = ["iperf3", "-c", net.get(f.dst).IP(), "-p", str(f.port), "--cport", str(client_port(f)),
           "-t", f"{f.duration_s:g}", "-C", f.cc, "-J", "--get-server-output", "-i", "1"]
    if f.rate_bps:
        cmd += ["-b", str(f.rate_bps)]
    if f.mptcp:
        cmd = mptcp.run_under(cmd)
    return started.popen(net.get(f.src), cmd, os.path.join(run_dir, f"iperf3-{f.port}.json"))


CLIENT_PORT_OFFSET = 20000  # a flow's iperf3 data connection leaves from its server port + this


def client_port(f: Flow) -> int:
    return f.port + CLIENT_PORT_OFFSET


def wait_for_clients(clients: list[subprocess.Popen], grace_s: float) -> None:
    """Until every client has exited, or grace_s for all of them together (those still running
    are killed with the rest)."""
    deadline = time.monotonic() + grace_s
    for proc in clients:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))


def flow_record(f, launched_s: float | None, run_dir: str, stats: dict, tcp_info: list,
                subflows: dict[str, list] | None = None) -> dict:
    """A flow's record: iperf3's report read back, its TCP state (tcp_info: its data connection's
    ss rows) and ckcd-link's counts of its frames; an MPTCP flow's further subflows (`subflows`:
    ss rows by local address:port) each with their own."""
    rec = {"label": f.label, "cc": f.cc, "src": f.src, "dst": f.dst, "port": f.port, "aggregate": f.aggregate,
           "ecn": f.ecn, "reverse": f.reverse,
           "start_s": f.start_s, "stop_s": f.stop_s, "rate_bps": f.rate_bps, "launched_s": launched_s,
           "goodput": [], "srtt": [], "tcp_info": tcp_info, "error": None,
           "min_rtt_ms": min((row[3] for row in tcp_info if row[3] is not None), default=None)}
    path = os.path.join(run_dir, f"iperf3-{f.port}.json")
    try:
        text = open(path).read()
        report = json.loads(text[text.index("{"):])
    except (OSError, ValueError):
        rec["error"] = "iperf3 gave no JSON" + (f" (it started at {launched_s:.1f} s)" if launched_s else
                                               " (never started)")
        return rec
    if "error" in report:
        rec["error"] = f"iperf3: {report['error']}"
        return rec
    base = launched_s or 0.0
    server = report.get("server_output_json") or {}
    for iv in server.get("intervals", []):
        s = iv["sum"]
        if s["seconds"] > 0.2:
            rec["goodput"].append([round(base + (s["start"] + s["end"]) / 2, 3), s["bytes"] * 8 / s["seconds"] / 1e6,
                                   round(s["seconds"], 6)])
    for iv in report.get("intervals", []):
        st = iv["streams"][0]
        if "rtt" in st and st["seconds"] > 0.2:
            rec["srtt"].append([round(base + (st["start"] + st["end"]) / 2, 3), st["rtt"] / 1000.0])
    end = report["end"]
    rec["goodput_total_mbps"] = end["sum_received"]["bits_per_second"] / 1e6
    rec["retransmits"] = end.get("sum_sent", {}).get("retransmits")
    rec["sender_cc"] = end.get("sender_tcp_congestion")
    conn = report["start"]["connected"][0]
    key = f"tcp {conn['local_host']}:{conn['local_port']}>{conn['remote_host']}:{conn['remote_port']}"
    rec["key"] = key
    direction = "ba" if f.reverse else "ab"
    rec["link_drops"], rec["link_marks"] = _link_counts(stats, key, direction)
    if f.mptcp:
        rec["subflows"] = []
        for local, rows in sorted((subflows or {}).items()):
            sub_key = f"tcp {local}>{conn['remote_host']}:{conn['remote_port']}"
            drops, marks = _link_counts(stats, sub_key, direction)
            rec["subflows"].append({"key": sub_key, "tcp_info": rows, "link_drops": drops, "link_marks": marks})
    return rec


def _link_counts(stats: dict, key: str, direction: str) -> tuple[dict, dict]:
    """ckcd-link's drops and marks by reason of the flow with this key, per link it crossed in
    `direction` (ab: the senders' data; ba: a reverse flow's)."""
    drops, marks = {}, {}
    for name, st in stats.items():
        for fl in st["dirs"][direction].get("flows", []):
            if fl["key"] == key:
                drops[name] = fl["drops"]
                marks[name] = fl.get("marks", {})
    return drops, marks
