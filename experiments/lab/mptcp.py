"""Multipath TCP in the lab: what a host needs for a flow marked `mptcp = true`.

Linux's MPTCP (RFC 8684) is in the kernel; a program that opens plain TCP sockets runs over it
under `mptcpize run` (Debian's mptcpd), which makes its socket() calls ask for IPPROTO_MPTCP.
The kernel's own path manager opens the extra subflows, but only from a local address that no
subflow of the connection uses yet: a host with one address gets one subflow. So an MPTCP sender
is multihomed, as a phone with Wi-Fi and LTE is: one more interface per extra subflow, each a link
of its own to its switch (experiments/lab/topos.py), with an address of its own in the host's
subnet (k = 1, 2, ...: 10.0.0.1 -> 10.0.0.65, 10.0.0.129), a routing table that sends what
leaves from that address out of that interface, and an MPTCP endpoint with the `subflow` flag:
the path manager joins each of the host's MPTCP connections from every such address to the
peer's. A second address on the same interface would not do: the controller knows a host by its
MAC with one IPv4 address (coex/topology.py).

Each subflow is a TCP connection of its own to the network, with its own 5-tuple: ckcd-link's
flow statistics, the CoEx rules (by source address) and ss see them apart. Upstream Linux couples
no congestion control across subflows: each runs its own. The receiver's limit on subflows is
raised as well, or it refuses the joins.
"""

from __future__ import annotations

import ipaddress
import re
import shutil

MAX_SUBFLOWS = 4  # a few per connection is what MPTCP is used with; the kernel allows 8 endpoints
MPTCPIZE = "mptcpize"


class MptcpUnavailable(RuntimeError):
    """MPTCP flows cannot run here; the message says why and what to do."""


def prerequisites_missing() -> str | None:
    if shutil.which(MPTCPIZE) is None:
        return f"{MPTCPIZE} not found: install Debian's mptcpd (make setup-tests does)"
    try:
        with open("/proc/sys/net/mptcp/enabled") as f:
            if f.read().strip() != "1":
                return "MPTCP is disabled in this kernel (net.mptcp.enabled = 0)"
    except OSError:
        return "this kernel has no MPTCP (no /proc/sys/net/mptcp: CONFIG_MPTCP is off)"
    return None


def run_under(cmd: list[str]) -> list[str]:
    """`cmd` with its TCP sockets made MPTCP sockets."""
    return [MPTCPIZE, "run", *cmd]


def subflow_address(ip: str, k: int) -> str:
    """The address a host's k-th extra subflow leaves from (k >= 1): its own plus 64 k, in the
    lab's subnet (10.0.0.0/24 on two paths) and apart from every host's first address (at most
    16 hosts)."""
    if not 1 <= k < MAX_SUBFLOWS:
        raise ValueError(f"extra subflow {k}: expected 1..{MAX_SUBFLOWS - 1}")
    first = ipaddress.IPv4Address(ip)
    if int(first) & 0xff >= 64:
        raise ValueError(f"{ip}: a host's first address ends below .64 in the lab")
    return str(first + 64 * k)


def extra_interfaces(flows) -> dict[str, int]:
    """{sender: its interfaces beyond the first}: one per extra subflow of its MPTCP flows."""
    return {f.src: f.subflows - 1 for f in flows if f.mptcp}


_ENDPOINT = re.compile(r"^(\S+) id \d+ subflow\b")


def setup_hosts(flows, net) -> dict:
    """Every MPTCP flow's sender gets its subflows' addresses, routes and endpoints, and every
    MPTCP receiver its subflow limit. Returns {host: {"addresses": [...], "subflows": n}}."""
    senders = extra_interfaces(flows)
    receivers: dict[str, int] = {}
    for f in flows:
        if f.mptcp:
            receivers[f.dst] = max(receivers.get(f.dst, 1), f.subflows)
    done = {}
    for name, extra in sorted(senders.items()):
        done[name] = {"addresses": _sender(net.get(name), extra), "subflows": extra + 1}
    for name, subflows in sorted(receivers.items()):
        _cmd(net.get(name), f"ip mptcp limits set subflows {subflows - 1} add_addr_accepted 0")
        done.setdefault(name, {"addresses": [], "subflows": subflows})
    return done


def _sender(host, extra: int) -> list[str]:
    """Interface k (k = 1..extra) gets subflow_address(k), a table of its own (ROUTE_TABLE + k)
    for what leaves from it, and an endpoint. arp_ignore 1 and arp_announce 2: each interface
    answers and asks ARP for its own address only, or the first would answer for all (ARP flux)."""
    first = host.defaultIntf()
    subnet = ipaddress.IPv4Interface(f"{first.IP()}/{first.prefixLen}").network
    intfs = [i for i in host.intfList() if i.name != first.name]
    if len(intfs) != extra:
        raise MptcpUnavailable(f"{host.name}: {len(intfs)} extra interfaces, expected {extra}")
    for key, value in (("arp_ignore", 1), ("arp_announce", 2)):
        _cmd(host, f"sysctl -qw net.ipv4.conf.all.{key}={value}")
    _cmd(host, "ip mptcp endpoint flush")
    _cmd(host, f"ip mptcp limits set subflows {extra} add_addr_accepted 0")
    addresses = []
    for k, intf in enumerate(intfs, start=1):
        address = subflow_address(host.IP(), k)
        _cmd(host, f"ip addr add {address}/{subnet.prefixlen} dev {intf.name}")
        _cmd(host, f"ip link set {intf.name} up")
        _cmd(host, f"ip route add {subnet} dev {intf.name} src {address} table {ROUTE_TABLE + k}")
        _cmd(host, f"ip rule add from {address} table {ROUTE_TABLE + k}")
        _cmd(host, f"ip mptcp endpoint add {address} dev {intf.name} subflow")
        addresses.append(address)
    shown = [m.group(1) for line in host.cmd("ip mptcp endpoint show").splitlines()
             if (m := _ENDPOINT.match(line.strip()))]
    if shown != addresses:
        raise MptcpUnavailable(f"{host.name}: its MPTCP endpoints read back as {shown}, not {addresses}")
    return addresses


ROUTE_TABLE = 100  # the extra interfaces' routing tables: 101, 102, ...


def _cmd(host, command: str) -> None:
    out = host.cmd(f"{command} 2>&1; echo rc=$?")
    if not out.rstrip().endswith("rc=0"):
        raise MptcpUnavailable(f"{host.name}: `{command}` failed: {out.strip()[-300:]}")
