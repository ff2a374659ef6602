"""What the controller does with the packets switches send it: LLDP teaches links, ARP and
IPv4 teach hosts; ARP is answered for known hosts (proxy ARP) and otherwise sent to the edge
ports, never flooded in the data plane; an IPv4 packet that missed gets its tree installed
(ryu_app/trees.py) and is sent on along it. A destination nobody knows is asked for with
our own ARP probe (RFC 5227 form), within a budget, so a scan of unknown addresses cannot
become a broadcast storm.
"""

from __future__ import annotations

import time

from coex.forwarding import DEFAULT
from coex.recent import Recent
from coex.topology import HostLocation, NoPath
from ryu_app import discovery, flows
from ryu_app.framework import arp, ethernet, ipv4, packet

FLOOD_DEDUP_S = 1.0  # the same frame is flooded by the controller at most once per second
# Our probes' sender: sender IP 0.0.0.0, which the owner answers to this MAC, locally
# administered so it is nobody's. At most one per address per PROBE_INTERVAL_S and
# PROBE_BUDGET_PER_S in all.
PROBE_MAC = "02:c0:e0:00:00:01"
PROBE_INTERVAL_S = 1.0
PROBE_BUDGET_PER_S = 50
LLDP_ETHERTYPE = 0x88CC


class PacketIn:
    def __init__(self, *, net, datapaths, trees, in_force, logger, may_write=lambda dpid: True):
        self.net, self.datapaths, self.trees = net, datapaths, trees
        self.in_force, self.logger = in_force, logger
        self.may_write = may_write  # a packet-out goes only to a switch that confirmed us MASTER
        self._recent_floods = Recent(FLOOD_DEDUP_S)  # frames the controller flooded
        self._probed = Recent(PROBE_INTERVAL_S)      # addresses we sent an ARP probe for

    def handle(self, dp, in_port: int, data: bytes, metadata: int, act: bool = True) -> None:
        """One packet-in from switch dp's port in_port; metadata is what the switch's
        classification wrote (the packet's aggregate id). With act False (a standby,
        docs/ha.md) only links and hosts are learned: no answer, no tree."""
        pkt = packet.Packet(data)
        eth = pkt.get_protocol(ethernet.ethernet)
        if eth is None:
            return
        if eth.ethertype == LLDP_ETHERTYPE:
            sender = discovery.parse_lldp(pkt)
            if sender is not None and self.net.add_link(sender, (dp.id, in_port), time.monotonic()):
                self.logger.info("link %016x:%d -> %016x:%d", sender[0], sender[1], dp.id, in_port)
            return
        now = time.monotonic()
        arp_pkt = pkt.get_protocol(arp.arp)
        ip_pkt = pkt.get_protocol(ipv4.ipv4)
        if not act:
            src_ip = arp_pkt.src_ip if arp_pkt is not None else ip_pkt.src if ip_pkt is not None else None
            if src_ip is not None:
                self.net.learn_host(eth.src, src_ip, dp.id, in_port, now)
        elif arp_pkt is not None:
            self._learn_host(eth.src, arp_pkt.src_ip, dp.id, in_port, now)
            if eth.dst != PROBE_MAC:  # an answer to our probe has taught us all it had to
                self._arp(dp, in_port, eth, arp_pkt, data)
        elif ip_pkt is not None:
            self._learn_host(eth.src, ip_pkt.src, dp.id, in_port, now)
            agg = self.in_force.plan.aggregate_of(metadata & flows.METADATA_MASK)
            self._ipv4(dp, in_port, ip_pkt, agg, data)
        # Anything else (IPv6, other multicast) is not forwarded: the lab is IPv4.

    def _learn_host(self, mac: str, ip: str, dpid: int, port: int, now: float) -> None:
        if not self.net.learn_host(mac, ip, dpid, port, now):
            return
        host = self.net.hosts[mac]
        if host.ipv4 is not None:
            self.trees.host_learned(host)

    def _arp(self, dp, in_port, eth, req, data):
        target = self.net.host_by_ip(req.dst_ip)
        if req.opcode == arp.ARP_REQUEST and target is not None:
            reply = packet.Packet()
            reply.add_protocol(ethernet.ethernet(dst=eth.src, src=target.mac, ethertype=0x0806))
            reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=target.mac, src_ip=req.dst_ip,
                                       dst_mac=req.src_mac, dst_ip=req.src_ip))
            reply.serialize()
            flows.packet_out(dp, [in_port], bytes(reply.data))
        elif req.opcode != arp.ARP_REQUEST and target is not None:
            self._output_at_host(target, data)
        else:
            self._flood_to_edges(data, exclude=(dp.id, in_port))

    def _ipv4(self, dp, in_port, ip_pkt, agg, data):
        src = self.net.host_by_ip(ip_pkt.src)
        dst = self.net.host_by_ip(ip_pkt.dst)
        if dst is None or src is None:
            self._flood_to_edges(data, exclude=(dp.id, in_port))
            if dst is None:
                # Forwarding on the destination sends a host's own packets along the trees
                # toward its peers without a packet-in, so a host that kept its ARP cache
                # across our restart may never show itself: ask for it.
                self._probe(ip_pkt.dst)
            return
        try:
            # This switch missed: its flow toward dst is sent again even if we had installed it
            # (lost, or the switch reconnected in between).
            tree = self.trees.install(agg, dst, resend_to=dp.id)
            if (DEFAULT, src.ipv4) not in self.trees.trees:  # replies need no packet-in
                self.trees.install(DEFAULT, src)
        except NoPath as err:
            self.logger.warning("no path %s -> %s: %s", ip_pkt.src, ip_pkt.dst, err)
            return
        if dp.id in tree:
            flows.packet_out(dp, [tree[dp.id]], data)

    def _output_at_host(self, host: HostLocation, data: bytes):
        dp = self.datapaths.get(host.dpid)
        if dp is not None and self.may_write(dp.id):
            flows.packet_out(dp, [host.port], data)

    def _probe(self, ip: str) -> None:
        now = time.monotonic()
        self._probed.expire(now)
        if len(self._probed) >= PROBE_BUDGET_PER_S * PROBE_INTERVAL_S or not self._probed.add_if_new(ip, now):
            return
        probe = packet.Packet()
        probe.add_protocol(ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src=PROBE_MAC, ethertype=0x0806))
        probe.add_protocol(arp.arp(opcode=arp.ARP_REQUEST, src_mac=PROBE_MAC, src_ip="0.0.0.0",
                                   dst_mac="00:00:00:00:00:00", dst_ip=ip))
        probe.serialize()
        self._flood_to_edges(bytes(probe.data), exclude=None)

    def _flood_to_edges(self, data: bytes, exclude):
        if not self._recent_floods.add_if_new(data, time.monotonic()):
            return  # a copy that came back around: never flood it twice
        for dpid, dp in self.datapaths.items():
            ports = [p for p in self.net.edge_ports(dpid) if (dpid, p) != exclude]
            if self.may_write(dpid):
                flows.packet_out(dp, ports, data)
