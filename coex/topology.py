"""What the controller knows of the network, and paths through it.

Switches are identified by datapath id, ports by number. Inter-switch links
come from LLDP (see ryu_app/discovery.py) and expire when not refreshed; hosts
are learned from the packets they send, but only on edge ports (ports that
are not the end of a known link), so a packet that crossed a link never moves
a host. Paths are shortest paths by hop count with deterministic tie-breaking
(lowest dpids first), so the same network always gets the same paths.

`version` counts the changes to the switch graph (ports, links; hosts do not count), so a
planner can plan once per topology and look its answers up until the version moves.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, NamedTuple

import networkx as nx

PortRef = tuple[int, int]  # (dpid, port_no)


class Hop(NamedTuple):
    """One switch on a path: packets enter on in_port and leave on out_port."""
    dpid: int
    in_port: int
    out_port: int


@dataclasses.dataclass
class HostLocation:
    mac: str
    dpid: int
    port: int
    ipv4: str | None
    seen_at: float


class NoPath(Exception):
    """The two endpoints are not connected by known links."""


class NetworkMap:
    def __init__(self, link_max_age_s: float = 3.5, host_move_after_s: float = 5.0):
        self.link_max_age_s = link_max_age_s
        self.host_move_after_s = host_move_after_s
        self.ports: dict[int, set[int]] = {}          # dpid -> physical port numbers
        self._link_seen: dict[tuple[PortRef, PortRef], float] = {}  # directed link -> last LLDP
        self.hosts: dict[str, HostLocation] = {}      # mac -> location
        self.version = 0                              # bumped whenever graph() may change
        # Looked up on every packet-in, so kept as indexes rather than scans (a storm of
        # packet-ins on a 256-host network would otherwise cost hosts x links each):
        self._mac_by_ip: dict[str, str] = {}          # checked against `hosts` on use
        self._link_ports: set[PortRef] = set()        # ends of known links, as of _link_ports_version
        self._link_ports_version = -1

    # --- switches and ports -------------------------------------------------

    def add_switch(self, dpid: int, ports: Iterable[int] = ()) -> None:
        before = self.ports.get(dpid)
        self.ports.setdefault(dpid, set()).update(ports)
        if before is None or self.ports[dpid] != before:
            self.version += 1

    def add_port(self, dpid: int, port: int) -> None:
        self.add_switch(dpid, (port,))

    def remove_port(self, dpid: int, port: int) -> list[tuple[PortRef, PortRef]]:
        """A port went away or down: forget it and every link on it. Returns the removed links."""
        self.ports.get(dpid, set()).discard(port)
        gone = [l for l in self._link_seen if (dpid, port) in l]
        for link in gone:
            del self._link_seen[link]
        self.version += 1
        self._forget_hosts([m for m, h in self.hosts.items() if (h.dpid, h.port) == (dpid, port)])
        return gone

    # --- links ---------------------------------------------------------------

    def add_link(self, src: PortRef, dst: PortRef, now: float) -> bool:
        """Record that an LLDP frame sent from src arrived at dst. True if the link is new."""
        new = (src, dst) not in self._link_seen and (dst, src) not in self._link_seen
        self._link_seen[(src, dst)] = now
        if new:  # a refresh (every LLDP round) leaves the graph as it was
            self.version += 1
        # A port that turns out to be a link end was never a host port.
        self._forget_hosts([m for m, h in self.hosts.items() if (h.dpid, h.port) in (src, dst)])
        return new

    def expire_links(self, now: float) -> list[tuple[PortRef, PortRef]]:
        """Forget links heard of in neither direction for link_max_age_s. One direction's
        LLDP frames can be lost to a congested queue (a bottleneck overloaded at twice its
        rate drops every other frame, so three in a row now and then); while the other
        direction's still arrive, both ends are up and joined, and the link stays."""
        def stale(link) -> bool:
            seen = self._link_seen.get(link)
            return seen is None or now - seen > self.link_max_age_s

        gone = [l for l in self._link_seen if stale(l) and stale((l[1], l[0]))]
        for link in gone:
            del self._link_seen[link]
        if gone:
            self.version += 1
        return gone

    def links(self) -> list[tuple[PortRef, PortRef]]:
        """Undirected links, each once, as (lower end, higher end)."""
        return sorted({tuple(sorted(l)) for l in self._link_seen})

    def is_link_port(self, dpid: int, port: int) -> bool:
        if self._link_ports_version != self.version:  # links only come and go with the version
            self._link_ports = {end for link in self._link_seen for end in link}
            self._link_ports_version = self.version
        return (dpid, port) in self._link_ports

    def edge_ports(self, dpid: int) -> list[int]:
        return sorted(p for p in self.ports.get(dpid, ()) if not self.is_link_port(dpid, p))

    # --- hosts ---------------------------------------------------------------

    def learn_host(self, mac: str, ipv4: str | None, dpid: int, port: int, now: float) -> bool:
        """Learn or refresh a host seen at (dpid, port). Returns True if its location changed.

        A host already known on another edge port moves only after
        host_move_after_s of silence there: during LLDP start-up a flooded
        copy can arrive on a port not yet known as a link end.
        """
        if self.is_link_port(dpid, port):
            return False
        known = self.hosts.get(mac)
        if known and (known.dpid, known.port) != (dpid, port):
            if now - known.seen_at < self.host_move_after_s:
                return False
        moved = known is None or (known.dpid, known.port) != (dpid, port)
        ip = ipv4 or (known.ipv4 if known else None)
        self.hosts[mac] = HostLocation(mac, dpid, port, ip, now)
        if ip is not None and self.host_by_ip(ip) is None:
            self._mac_by_ip[ip] = mac
        return moved

    def host_by_ip(self, ipv4: str) -> HostLocation | None:
        """The host with this address (the one learned first, if two claim it)."""
        mac = self._mac_by_ip.get(ipv4)
        if mac is None:
            return None  # every address a host has is in the index
        host = self.hosts.get(mac)
        if host is not None and host.ipv4 == ipv4:
            return host
        del self._mac_by_ip[ipv4]  # that host changed its address: another may have it
        for host in self.hosts.values():
            if host.ipv4 == ipv4:
                self._mac_by_ip[ipv4] = host.mac
                return host
        return None

    def _forget_hosts(self, macs: list[str]) -> None:
        for mac in macs:
            ip = self.hosts.pop(mac).ipv4
            if ip is not None and self._mac_by_ip.get(ip) == mac:
                del self._mac_by_ip[ip]
                for other in self.hosts.values():  # another host that claims it takes its place
                    if other.ipv4 == ip:
                        self._mac_by_ip[ip] = other.mac
                        break

    # --- paths ---------------------------------------------------------------

    def graph(self, exclude: Iterable[tuple[int, int]] = ()) -> nx.Graph:
        """Switch graph, one edge per adjacent pair; edge attribute 'ports' maps dpid -> local port."""
        excluded = {frozenset(e) for e in exclude}
        g = nx.Graph()
        g.add_nodes_from(sorted(self.ports))
        for (a, pa), (b, pb) in self.links():
            if a == b or frozenset((a, b)) in excluded:
                continue
            if g.has_edge(a, b):  # parallel links: keep the lowest port pair
                continue
            g.add_edge(a, b, ports={a: pa, b: pb})
        return g

    def switch_path(self, src_dpid: int, dst_dpid: int, graph: nx.Graph | None = None) -> list[int]:
        g = graph if graph is not None else self.graph()
        if src_dpid not in g or dst_dpid not in g:
            raise NoPath(f"switch {src_dpid:#x} or {dst_dpid:#x} is not known")
        try:
            # All shortest paths, smallest dpid sequence first: deterministic ties.
            return min(nx.all_shortest_paths(g, src_dpid, dst_dpid))
        except nx.NetworkXNoPath:
            raise NoPath(f"no known links join {src_dpid:#x} and {dst_dpid:#x}") from None

    def host_path(self, src: HostLocation, dst: HostLocation, switches: list[int] | None = None,
                  graph: nx.Graph | None = None) -> list[Hop]:
        """The hops from src's port to dst's port, along `switches` or the shortest path
        (in `graph`, this map's current graph unless one is given)."""
        g = graph if graph is not None else self.graph()
        path = switches if switches is not None else self.switch_path(src.dpid, dst.dpid, g)
        hops = []
        in_port = src.port
        for here, nxt in zip(path, path[1:]):
            if not g.has_edge(here, nxt):
                raise NoPath(f"no known link between {here:#x} and {nxt:#x}")
            ports = g.edges[here, nxt]["ports"]
            hops.append(Hop(here, in_port, ports[here]))
            in_port = ports[nxt]
        hops.append(Hop(path[-1], in_port, dst.port))
        return hops
