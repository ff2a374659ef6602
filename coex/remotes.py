"""Addresses from settings and the shared store, checked before anything connects or listens:
the state cluster's (CKCD_COEX_CLUSTER, docs/ha.md: comma-separated OVSDB remotes, each
tcp:HOST:PORT, ssl:HOST:PORT or unix:/PATH), and sFlow collectors ('ip:port' or '[ipv6]:port',
where an instance listens and the bridges' agents send)."""

from __future__ import annotations

import ipaddress
import re

from coex.policy import PolicyError

REMOTE = re.compile(r"(tcp|ssl):(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}|unix:/[A-Za-z0-9._/-]+")


def parse_remotes(value: str) -> str:
    """The remotes, blanks around commas removed; PolicyError naming the setting and the entry
    that is not a remote (a path with '..' in it is refused: say the directory plainly)."""
    remotes = [r.strip() for r in value.split(",")]
    for r in remotes:
        if not REMOTE.fullmatch(r) or ".." in r.split(":", 1)[1].split("/"):
            raise PolicyError(f"CKCD_COEX_CLUSTER: {r!r} is not an OVSDB remote (tcp:HOST:PORT, ssl:HOST:PORT "
                              "or unix:/PATH)", "CKCD_COEX_CLUSTER")
    return ",".join(remotes)


def sflow_target(target: str) -> str:
    """'ip:port' with an IPv4 address, or '[ipv6]:port', normalised; ValueError saying what is
    wrong. An address, never a name: OVS's agent takes addresses only, and a value from the
    shared store must not make anyone look a name up."""
    if not isinstance(target, str):
        raise ValueError(f"target must be a string 'ip:port', got {target!r}")
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:([0-9]{1,5})|([0-9.]+):([0-9]{1,5})", target.strip())
    if not m:
        raise ValueError(f"target must be 'ip:port' or '[ipv6]:port', got {target!r}")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"target {target!r}: {host!r} is not an IP address") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"target {target!r}: port must be 1..65535")
    return f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"


def collector_problem(target: str) -> str | None:
    """Why `target` cannot be an instance's collector, which is where it listens and where the
    bridges' agents send (so every instance gets each sample once): None when it can. Only a
    plain unicast address: not a wildcard (0.0.0.0 reaches a socket bound to 127.0.0.1, and
    would send that instance every sample twice), not an IPv4-mapped IPv6 one (the same
    instance under a second name), not multicast or broadcast."""
    try:
        target = sflow_target(target)
    except ValueError as err:
        return str(err)
    addr = ipaddress.ip_address(target.rpartition(":")[0].strip("[]"))
    if addr.is_unspecified:
        return f"{target}: the bridges send to this address, so it must be one of the host's (not 0.0.0.0 or ::)"
    if addr.version == 6 and addr.ipv4_mapped is not None:
        return f"{target}: say the IPv4 address {addr.ipv4_mapped} itself"
    if addr.is_multicast or str(addr) == "255.255.255.255":
        return f"{target}: a multicast or broadcast address is not one collector"
    return None


def instance_collector(value: str) -> str:
    """CKCD_COEX_SFLOW_COLLECTOR, checked (collector_problem) and normalised; PolicyError naming
    the setting."""
    problem = collector_problem(value)
    if problem:
        raise PolicyError(f"CKCD_COEX_SFLOW_COLLECTOR: {value!r}: {problem}", "CKCD_COEX_SFLOW_COLLECTOR")
    return sflow_target(value)
