"""Each flow's TCP state over time, from the kernel: `ss -tin` on every sending host at a fixed
interval (the scenario's `tcp_info_interval_s`), the sender socket's sRTT, cwnd and min RTT.

iperf3's own intervals carry an sRTT and a cwnd too, but once per report interval (1 s), and its
`min_rtt` is the smallest of those smoothed samples. The kernel's `minrtt` (tcp_info's
tcpi_min_rtt: the smallest RTT measured over the connection, in a 300 s window) is what says
which base RTT a flow saw, so the flows' min RTTs are read here.

iperf3 opens two connections to its server's port: a control connection and the data
connection. The data connection is the one with the most bytes acknowledged.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import threading
import time

# "0  0  10.0.0.1:40000 10.0.0.3:5201" then an indented line of key:value tokens
_ADDRS = re.compile(r"^\S+\s+\S+\s+(\S+):(\d+)\s+(\S+):(\d+)\s*$")
_RTT = re.compile(r"\brtt:([\d.]+)/")
_CWND = re.compile(r"\bcwnd:(\d+)")
_MINRTT = re.compile(r"\bminrtt:([\d.]+)")
_ACKED = re.compile(r"\bbytes_acked:(\d+)")


@dataclasses.dataclass
class SocketInfo:
    local: str
    local_port: int
    peer: str
    peer_port: int
    srtt_ms: float | None
    cwnd: int | None  # segments
    min_rtt_ms: float | None
    bytes_acked: int


def parse_ss(text: str) -> list[SocketInfo]:
    """`ss -tinH` output: one SocketInfo per socket that has an address line and an info line."""
    out: list[SocketInfo] = []
    addrs = None
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _ADDRS.match(line)
        if m and not line[0].isspace():
            addrs = m
            continue
        if addrs is None:
            continue
        rtt, cwnd, minrtt, acked = (r.search(line) for r in (_RTT, _CWND, _MINRTT, _ACKED))
        out.append(SocketInfo(local=addrs.group(1).strip("[]"), local_port=int(addrs.group(2)),
                              peer=addrs.group(3).strip("[]"), peer_port=int(addrs.group(4)),
                              srtt_ms=float(rtt.group(1)) if rtt else None,
                              cwnd=int(cwnd.group(1)) if cwnd else None,
                              min_rtt_ms=float(minrtt.group(1)) if minrtt else None,
                              bytes_acked=int(acked.group(1)) if acked else 0))
        addrs = None
    return out


def data_sockets(infos: list[SocketInfo]) -> dict[int, SocketInfo]:
    """By the server port: the socket with the most bytes acknowledged (iperf3's data
    connection, not its control connection to the same port)."""
    best: dict[int, SocketInfo] = {}
    for s in infos:
        if s.peer_port not in best or s.bytes_acked > best[s.peer_port].bytes_acked:
            best[s.peer_port] = s
    return best


class TcpInfoSampler:
    """Samples every sending host until `stop` is set; `series[port]` is the flow's rows
    [t since t0, sRTT ms, cwnd segments, min RTT ms]."""

    def __init__(self, hosts: dict, ports_by_host: dict[str, list[int]], t0: float, interval_s: float,
                 stop: threading.Event):
        self.hosts = hosts  # name -> Mininet host
        self.ports_by_host = ports_by_host
        self.t0 = t0
        self.interval_s = interval_s
        self.stop = stop
        self.series: dict[int, list[list]] = {p: [] for ports in ports_by_host.values() for p in ports}
        self.errors = 0

    def run(self) -> None:
        next_t = time.monotonic()
        while not self.stop.is_set():
            for name, ports in self.ports_by_host.items():
                self._sample(name, ports)
            next_t += self.interval_s
            if self.stop.wait(max(0.0, next_t - time.monotonic())):
                return

    def _sample(self, name: str, ports: list[int]) -> None:
        try:
            proc = self.hosts[name].popen(["ss", "-tinH", "state", "established"], stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True)
            text, _ = proc.communicate(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.errors += 1
            return
        t = round(time.monotonic() - self.t0, 3)
        found = data_sockets([s for s in parse_ss(text) if s.peer_port in ports])
        for port, s in found.items():
            self.series[port].append([t, s.srtt_ms, s.cwnd, s.min_rtt_ms])
