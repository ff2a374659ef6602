"""The lab's hosts as a run sets them up and reads them: per-namespace TCP settings, and the
kernel's TCP counters a run records per sending host."""

from __future__ import annotations

from experiments.lab import mptcp
from experiments.lab.traffic import BPF_CONGESTION_CONTROLS, ECN_CONGESTION_CONTROLS
from experiments.scenario.model import Scenario


class HostSetupError(RuntimeError):
    pass


def host_setup(scenario: Scenario, net) -> dict:
    """The scenario's per-host settings, per-namespace sysctls: TCP's SACK, and ECN - 1 (ask for
    it) on a host that sends ECN-capable flows, else 2 (Linux's default: accept it when asked,
    never ask); for BPF congestion controls, the default control and orphan retries below.
    The access delays are the links' (--host-delay), recorded here beside them."""
    sack = 1 if scenario.tcp_sack else 0
    ecn_senders = {f.src for f in scenario.flows if f.ecn}
    tcp_ecn = {}
    for host in net.hosts:
        tcp_ecn[host.name] = 1 if host.name in ecn_senders else 2
        for key, value in (("tcp_sack", sack), ("tcp_ecn", tcp_ecn[host.name])):
            _set(host, key, value)
    defaults = _default_congestion_controls(scenario, net)
    orphans = _short_orphans(scenario, net)
    setup = {"tcp_sack": scenario.tcp_sack, "tcp_ecn": tcp_ecn, "access_delay_ms": dict(scenario.access_delay_ms),
             "tcp_congestion_control": defaults, "tcp_orphan_retries": orphans}
    if any(f.mptcp for f in scenario.flows):
        setup["mptcp"] = mptcp.setup_hosts(scenario.flows, net)
    return setup


def _set(host, key: str, value) -> None:
    host.cmd(f"sysctl -qw net.ipv4.{key}={value}")
    if host.cmd(f"sysctl -n net.ipv4.{key}").strip() != str(value):
        raise HostSetupError(f"{host.name}: net.ipv4.{key} did not take the value {value}")


def _default_congestion_controls(scenario: Scenario, net) -> dict:
    """A congestion control that negotiates ECN made the default of both ends' namespaces: the
    sender's SYN must ask for ECN before iperf3 sets -C, and the receiver's socket must run its
    receiver side (the scenario check keeps such hosts to that one control)."""
    wanted = {}
    for f in scenario.flows:
        if f.cc in ECN_CONGESTION_CONTROLS:
            wanted[f.src] = wanted[f.dst] = f.cc
    for name, cc in sorted(wanted.items()):
        _set(net.get(name), "tcp_congestion_control", cc)
    return wanted


# A socket closed while the lab is torn down (its peer's namespace already gone) lives on as
# an orphan, resending its FIN up to tcp_orphan_retries times (0 means 8: minutes), and holds
# its congestion control all the while: a BPF one could not be freed until then. One retry
# ends such an orphan within a second; it changes nothing while the flows run.
BPF_HOST_ORPHAN_RETRIES = 1


def _short_orphans(scenario: Scenario, net) -> dict:
    hosts = sorted({h for f in (*scenario.flows, *scenario.short_flows) if f.cc in BPF_CONGESTION_CONTROLS
                    for h in (f.src, f.dst)})
    for name in hosts:
        _set(net.get(name), "tcp_orphan_retries", BPF_HOST_ORPHAN_RETRIES)
    return {name: BPF_HOST_ORPHAN_RETRIES for name in hosts}


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
