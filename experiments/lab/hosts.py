"""The lab's hosts as a run sets them up and reads them: per-namespace TCP settings, and the
kernel's TCP counters a run records per sending host."""

from __future__ import annotations

from experiments.scenario.model import Scenario


class HostSetupError(RuntimeError):
    pass


def host_setup(scenario: Scenario, net) -> dict:
    """The scenario's per-host settings, per-namespace sysctls: TCP's SACK, and ECN - 1 (ask for
    it) on a host that sends ECN-capable flows, else 2 (Linux's default: accept it when asked,
    never ask). The access delays are the links' (--host-delay), recorded here beside them."""
    sack = 1 if scenario.tcp_sack else 0
    ecn_senders = {f.src for f in scenario.flows if f.ecn}
    tcp_ecn = {}
    for host in net.hosts:
        tcp_ecn[host.name] = 1 if host.name in ecn_senders else 2
        for key, value in (("tcp_sack", sack), ("tcp_ecn", tcp_ecn[host.name])):
            host.cmd(f"sysctl -qw net.ipv4.{key}={value}")
            if host.cmd(f"sysctl -n net.ipv4.{key}").strip() != str(value):
                raise HostSetupError(f"{host.name}: net.ipv4.{key} did not take the value {value}")
    return {"tcp_sack": scenario.tcp_sack, "tcp_ecn": tcp_ecn, "access_delay_ms": dict(scenario.access_delay_ms)}


# The kernel's TCP counters a run records per sending host (/proc/net/netstat, TcpExt: the
# host's network namespace): segments delivered, and those acknowledged with ECE - the CE marks
# the receiver echoed, i.e. the congestion signals an ECN sender saw.
TCP_COUNTERS = {"TCPDelivered": "delivered", "TCPDeliveredCE": "delivered_ce"}


def tcp_counters(host) -> dict:
    """TCP_COUNTERS of a Mininet host's namespace now ({} if /proc/net/netstat says none)."""
    return parse_netstat(host.cmd("cat /proc/net/netstat"))


def parse_netstat(text: str) -> dict:
    """TCP_COUNTERS from /proc/net/netstat's TcpExt header and value lines."""
    lines = [line.split() for line in text.splitlines() if line.startswith("TcpExt:")]
    if len(lines) < 2:
        return {}
    values = dict(zip(lines[0][1:], lines[1][1:]))
    return {name: int(values[key]) for key, name in TCP_COUNTERS.items() if key in values}
