"""A three-namespace lab for ckcd-link: host A and host B joined through a
middle namespace that either runs ckcd-link on its two veth ends or bridges
them in the kernel (for comparison).

    A: <tag>a  ha (10.77.0.1/24) ==veth== la  \
                                                M: <tag>m  (ckcd-link la<->lb, or br0)
    B: <tag>b  hb (10.77.0.2/24) ==veth== lb  /

Offloads (tso gso gro tx) are off on all four veths: with them on, the
hosts hand 64 KiB super-frames to the veth and the daemon (rightly) drops
them as oversize. Each host namespace has tcp_no_metrics_save=1 and a
flushed tcp_metrics table so one run's cached cwnd/ssthresh cannot leak
into the next. IPv6 is off everywhere (no RS/DAD noise in the flow stats).

The caller must hold the lab lock (ovs_config.lablock.lab_lock) for the
lab's whole life. Everything is removed by down(), which is safe to call
on a half-built lab.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Optional

from tests.waiting import eventually

RATE_BPS = 50_000_000  # a test's daemon unless it says otherwise (conftest.daemon_factory)
DELAY_MS = 10.0        # one way
HOST_A_IP = "10.77.0.1"
HOST_B_IP = "10.77.0.2"


def sh(*args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=timeout)


class NetLab:
    def __init__(self, tag: Optional[str] = None):
        tag = tag or f"ckcdt{os.getpid()}"
        self.tag = tag
        self.ns_a, self.ns_b, self.ns_m = f"{tag}a", f"{tag}b", f"{tag}m"
        short = f"ck{os.getpid() % 10_000_000}"
        self.if_ha, self.if_la = f"{short}ha", f"{short}la"
        self.if_hb, self.if_lb = f"{short}hb", f"{short}lb"
        self._procs: list[subprocess.Popen] = []
        self.bridged = False
        self._port = 5200

    def next_port(self) -> int:
        """A fresh iperf3 port: a one-off server from the previous run may
        still hold the old one for a moment."""
        self._port += 1
        return self._port

    # -- build / tear down ------------------------------------------------------

    def up(self, mtu: int = 1500) -> "NetLab":
        for ns in (self.ns_a, self.ns_b, self.ns_m):
            sh("ip", "netns", "add", ns)
            self.ns(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            self.ns(ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
            self.ns(ns, "ip", "link", "set", "lo", "up")
        for host_if, link_if, host_ns, ip in ((self.if_ha, self.if_la, self.ns_a, HOST_A_IP),
                                              (self.if_hb, self.if_lb, self.ns_b, HOST_B_IP)):
            sh("ip", "link", "add", host_if, "mtu", str(mtu), "type", "veth",
               "peer", "name", link_if, "mtu", str(mtu))
            sh("ip", "link", "set", host_if, "netns", host_ns)
            sh("ip", "link", "set", link_if, "netns", self.ns_m)
            self.ns(host_ns, "ip", "addr", "add", f"{ip}/24", "dev", host_if)
            for ns, ifname in ((host_ns, host_if), (self.ns_m, link_if)):
                self.ns(ns, "ethtool", "-K", ifname, "tso", "off", "gso", "off",
                        "gro", "off", "tx", "off")
                self.ns(ns, "ip", "link", "set", ifname, "up")
            self.ns(host_ns, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1")
        self.flush_tcp_metrics()
        return self

    def down(self) -> None:
        for p in self._procs:
            self._kill(p)
        self._procs.clear()
        for ns in (self.ns_a, self.ns_b, self.ns_m):
            sh("ip", "netns", "del", ns, check=False)
        # veths die with their namespace; a half-built lab may have left
        # one in the root namespace.
        for ifname in (self.if_ha, self.if_hb, self.if_la, self.if_lb):
            sh("ip", "link", "del", ifname, check=False)

    def __enter__(self) -> "NetLab":
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc) -> None:
        self.down()

    def bridge(self) -> None:
        """Join la and lb with a kernel bridge in the middle namespace."""
        self.ns(self.ns_m, "ip", "link", "add", "br0", "type", "bridge")
        self.ns(self.ns_m, "ip", "link", "set", self.if_la, "master", "br0")
        self.ns(self.ns_m, "ip", "link", "set", self.if_lb, "master", "br0")
        self.ns(self.ns_m, "ethtool", "-K", "br0", "tso", "off", "gso", "off",
                "gro", "off", "tx", "off", check=False)
        self.ns(self.ns_m, "ip", "link", "set", "br0", "up")
        self.bridged = True

    def unbridge(self) -> None:
        if self.bridged:
            self.ns(self.ns_m, "ip", "link", "del", "br0")
            self.bridged = False

    def flush_tcp_metrics(self) -> None:
        for ns in (self.ns_a, self.ns_b):
            self.ns(ns, "ip", "tcp_metrics", "flush", check=False)

    # -- processes ----------------------------------------------------------------

    def ns(self, ns: str, *args: str, check: bool = True, timeout: float = 60.0):
        return sh("ip", "netns", "exec", ns, *args, check=check, timeout=timeout)

    def popen(self, ns: str, *args: str, **kw) -> subprocess.Popen:
        p = subprocess.Popen(["ip", "netns", "exec", ns, *args], **kw)
        self._procs.append(p)
        return p

    @staticmethod
    def _kill(p: subprocess.Popen) -> None:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop(self, p: subprocess.Popen) -> None:
        self._kill(p)
        if p in self._procs:
            self._procs.remove(p)

    def iperf_server(self, port: int) -> subprocess.Popen:
        """A one-off iperf3 server on host B; waits until it listens (it does within tens of
        milliseconds; 5 s is for a loaded host)."""
        p = self.popen(self.ns_b, "iperf3", "-s", "-1", "-p", str(port),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        eventually(lambda: self.ns(self.ns_b, "ss", "-Htln", f"sport = :{port}", check=False).stdout.strip(),
                   timeout_s=5, interval_s=0.05, what=f"iperf3 server listening on port {port}")
        return p

    def iperf_client(self, port: int, cc: str, seconds: int, omit: int = 0,
                     extra: tuple = ()) -> subprocess.Popen:
        """iperf3 from A to B with congestion control cc (always explicit: the
        machine's default is bbr); JSON on stdout."""
        args = ["iperf3", "-c", HOST_B_IP, "-p", str(port), "-t", str(seconds), "-C", cc, "-J"]
        if omit:
            args += ["-O", str(omit)]
        return self.popen(self.ns_a, *args, *extra, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def iperf_goodput_bps(result: dict) -> float:
    """Receiver-side goodput of an iperf3 -J result."""
    return float(result["end"]["sum_received"]["bits_per_second"])


def jain(xs: list[float]) -> float:
    """Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 is perfectly fair."""
    s, s2 = sum(xs), sum(x * x for x in xs)
    return (s * s) / (len(xs) * s2) if s2 else 0.0
