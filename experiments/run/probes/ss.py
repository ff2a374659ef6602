"""Each flow's TCP state over time, from the kernel: `ss -tin` on every sending host at a fixed
interval (the scenario's `tcp_info_interval_s`), the sender socket's sRTT, cwnd, min RTT and
bytes acknowledged, how long it was held back by its receiver's window, its pacing and delivery
rates, its retransmissions and, for BBR, its bandwidth estimate and gains (its state machine:
startup, drain, the probing cycle), as TUM's BBR analyses read them.

The bytes acknowledged (tcp_info's tcpi_bytes_acked) are what the flow's receiver took in, as the
network delivered it: the flow's goodput over a window is their difference over its time. The
receiver's iperf3 counts bytes when it reads them, which on a busy machine is later than they
arrived, and so a window that ends with the flow (its last read empties the socket) can count more
than the link carried in it (docs/experiments.md, "Why goodput could read above the ceiling").
A reader that falls far enough behind fills its socket's buffer and closes the window: tcp_info's
rwnd_limited time says when the host, not the network, held a flow back.

iperf3's own intervals carry an sRTT and a cwnd too, but once per report interval (1 s), and its
`min_rtt` is the smallest of those smoothed samples. The kernel's `minrtt` (tcp_info's
tcpi_min_rtt: the smallest RTT measured over the connection, in a 300 s window) is what says
which base RTT a flow saw, so the flows' min RTTs are read here.

iperf3 opens two connections to its server's port: a control connection and the data
connection. The runner gives each flow's data connection a port of its own (iperf3 --cport), and
that is the socket read here.
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
_BUSY = re.compile(r"\bbusy:(\d+)ms")
_RWND_LIMITED = re.compile(r"\brwnd_limited:(\d+)ms")
# With -n, ss prints rates as plain bit/s ("pacing_rate 499438139056bps"); its retrans is
# "current/total" (tcpi_retrans/tcpi_total_retrans), left out while both are 0; BBR's own state is
# "bbr:(bw:...bps,mrtt:...,pacing_gain:...,cwnd_gain:...)" (TCP_CC_INFO's tcp_bbr_info).
_PACING = re.compile(r"\bpacing_rate (\d+)bps")
_DELIVERY = re.compile(r"\bdelivery_rate (\d+)bps")
_RETRANS = re.compile(r"\bretrans:\d+/(\d+)")
# An MPTCP subflow's line ends "tcp-ulp-mptcp flags:Mmec token:0000(id:0)/8c21ad10(id:0) ...": its
# local token and address id, then its peer's token (the connection's, the same on every subflow)
# and id.
_MPTCP_TOKEN = re.compile(r"\btcp-ulp-mptcp\b.*?\btoken:[0-9a-f]+\(id:\d+\)/([0-9a-f]+)\(id:\d+\)")
_BBR = re.compile(r"\bbbr:\(bw:(\d+)bps,mrtt:[\d.]+(?:,pacing_gain:([\d.]+))?(?:,cwnd_gain:([\d.]+))?\)")


@dataclasses.dataclass
class SocketInfo:
    local: str
    local_port: int
    peer: str
    peer_port: int
    srtt_ms: float | None
    cwnd: int | None  # segments
    min_rtt_ms: float | None
    bytes_acked: int | None = None
    busy_ms: int | None = None  # time with data in flight (tcpi_busy_time)
    rwnd_limited_ms: int | None = None  # of that, held back by the receiver's window
    pacing_rate_bps: int | None = None
    delivery_rate_bps: int | None = None  # the rate of the last delivery sample
    retrans_total: int | None = None      # segments retransmitted since the connection began
    bbr_bw_bps: int | None = None         # BBR's bottleneck bandwidth estimate (BBR only)
    bbr_pacing_gain: float | None = None  # its gain: 2.89 startup, 0.35 drain, 1.25/0.75/1 probing
    bbr_cwnd_gain: float | None = None
    mptcp_token: str | None = None  # an MPTCP subflow's connection (its peer's token)

    def row(self, t: float) -> list:
        """The sampler's row (TcpInfoSampler.series)."""
        return [t, self.srtt_ms, self.cwnd, self.min_rtt_ms, self.bytes_acked, self.busy_ms, self.rwnd_limited_ms,
                self.pacing_rate_bps, self.delivery_rate_bps, self.retrans_total, self.bbr_bw_bps,
                self.bbr_pacing_gain, self.bbr_cwnd_gain]


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
        out.append(_socket_info(addrs, line))
        addrs = None
    return out


def _number(pattern: re.Pattern, line: str, kind=int, group: int = 1):
    m = pattern.search(line)
    return kind(m.group(group)) if m and m.group(group) is not None else None


def _socket_info(addrs: re.Match, line: str) -> SocketInfo:
    """One socket: its address line's match and its info line."""
    busy = _number(_BUSY, line)
    bbr = _BBR.search(line)
    # a subflow from an address of a host's own prints it scoped: "10.0.1.1%h1-eth0"
    return SocketInfo(local=addrs.group(1).strip("[]").split("%")[0], local_port=int(addrs.group(2)),
                      peer=addrs.group(3).strip("[]"), peer_port=int(addrs.group(4)),
                      srtt_ms=_number(_RTT, line, float), cwnd=_number(_CWND, line),
                      min_rtt_ms=_number(_MINRTT, line, float), bytes_acked=_number(_ACKED, line), busy_ms=busy,
                      # ss leaves a zero out: busy with no rwnd_limited means never limited
                      rwnd_limited_ms=_number(_RWND_LIMITED, line) if _RWND_LIMITED.search(line) else (
                          0 if busy is not None else None),
                      pacing_rate_bps=_number(_PACING, line), delivery_rate_bps=_number(_DELIVERY, line),
                      # ss leaves it out while nothing was retransmitted
                      retrans_total=_number(_RETRANS, line) if _RETRANS.search(line) else (0 if busy is not None else None),
                      bbr_bw_bps=int(bbr.group(1)) if bbr else None,
                      bbr_pacing_gain=float(bbr.group(2)) if bbr and bbr.group(2) else None,
                      bbr_cwnd_gain=float(bbr.group(3)) if bbr and bbr.group(3) else None,
                      mptcp_token=_number(_MPTCP_TOKEN, line, str))


class TcpInfoSampler:
    """Samples every sending host until `stop` is set; `series[server port]` is the flow's rows
    (SocketInfo.row): [t since t0, sRTT ms, cwnd segments, min RTT ms, bytes acknowledged, busy ms,
    receiver-window-limited ms, pacing rate bit/s, delivery rate bit/s, retransmitted segments,
    BBR's bandwidth estimate bit/s, its pacing gain, its cwnd gain] (bytes, busy, limited and
    retransmitted cumulative since the connection started; BBR's None for other controls). `flows_by_host` maps each host to its
    flows' data-connection ports (iperf3 --cport) and their server ports. `errors` lists what
    went wrong (an ss that failed or hung), at most once per kind."""

    def __init__(self, hosts: dict, flows_by_host: dict[str, dict[int, int]], t0: float, interval_s: float,
                 stop: threading.Event):
        self.hosts = hosts  # name -> Mininet host
        self.flows_by_host = flows_by_host
        self.t0 = t0
        self.interval_s = interval_s
        self.stop = stop
        self.series: dict[int, list[list]] = {p: [] for ports in flows_by_host.values() for p in ports.values()}
        # an MPTCP flow's further subflows, by its server port and then the subflow's local address:port
        self.subflows: dict[int, dict[str, list[list]]] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        next_t = time.monotonic()
        while not self.stop.is_set():
            for name, ports in self.flows_by_host.items():
                self._sample(name, ports)
            # Behind (ss slower than the interval): sample again at once, but do not try to
            # catch up the rounds already missed.
            next_t = max(next_t + self.interval_s, time.monotonic())
            if self.stop.wait(max(0.0, next_t - time.monotonic())):
                return

    def _error(self, what: str) -> None:
        if what not in self.errors:
            self.errors.append(what)

    def _sample(self, name: str, ports: dict[int, int]) -> None:
        try:
            proc = self.hosts[name].popen(["ss", "-tinH", "state", "established"], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
        except OSError as err:
            self._error(f"{name}: ss: {err}")
            return
        try:
            text, err_text = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self._error(f"{name}: ss took over 5 s")
            return
        if proc.returncode != 0:
            self._error(f"{name}: ss exited {proc.returncode}: {err_text.strip()[:200]}")
            return
        t = round(time.monotonic() - self.t0, 3)
        sockets = parse_ss(text)
        connections = {}  # MPTCP token -> the flow's server port, from its first subflow
        for s in sockets:
            if s.local_port in ports:
                self.series[ports[s.local_port]].append(s.row(t))
                if s.mptcp_token:
                    connections[s.mptcp_token] = ports[s.local_port]
        for s in sockets:
            if s.local_port not in ports and s.mptcp_token in connections:
                by_address = self.subflows.setdefault(connections[s.mptcp_token], {})
                by_address.setdefault(f"{s.local}:{s.local_port}", []).append(s.row(t))
