"""The ckcd-coex controller: events in, flow-mods out.

Decisions (where hosts are, which path a pair of hosts takes) are made by
coex.topology.NetworkMap; this module only turns OpenFlow events into calls on
it and its answers into OpenFlow messages.

Forwarding model:
- every switch gets a table-miss rule to the controller and an LLDP rule;
- ARP never floods in the data plane: the controller answers requests for
  known hosts itself (proxy ARP) and sends the rest out of edge ports only, so
  topologies with redundant links have no broadcast storms;
- IPv4 between two known hosts gets a flow on every switch of the shortest
  path, both directions, with an idle timeout;
- on (re)connect a switch loses our old flows and gets the base rules and
  every path through it again, so a reconnecting switch and a restarted
  controller both converge to the same state.
"""

from __future__ import annotations

import time

from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.lib.packet import arp, ethernet, ipv4, packet
from ryu.ofproto import ofproto_v1_3

from coex.topology import HostLocation, NetworkMap, NoPath
from ryu_app import discovery, flows

LLDP_INTERVAL_S = 1.0
PATH_IDLE_TIMEOUT_S = 60
FLOOD_DEDUP_S = 1.0  # the same frame is flooded by the controller at most once per second


class CoexController(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.net = NetworkMap(link_max_age_s=3.5 * LLDP_INTERVAL_S)
        self.datapaths: dict[int, object] = {}
        self.port_hw: dict[tuple[int, int], str] = {}     # (dpid, port) -> MAC, for LLDP
        self.paths: dict[tuple[str, str], list] = {}      # (src ip, dst ip) -> hops installed
        self._recent_floods: dict[bytes, float] = {}
        self.logger.info("ckcd-coex controller loaded (OpenFlow 1.3)")
        hub.spawn(self._discovery_loop)

    # --- switches -------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _on_features(self, ev):
        dp = ev.msg.datapath
        flows.delete_our_flows(dp)
        flows.install_base_flows(dp)
        dp.send_msg(dp.ofproto_parser.OFPPortDescStatsRequest(dp, 0))
        self.logger.info("switch %016x connected", dp.id)

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _on_state_change(self, ev):
        dp = ev.datapath
        if dp.id is None:
            return
        if ev.state == MAIN_DISPATCHER:
            self.datapaths[dp.id] = dp
            self.net.add_switch(dp.id)
            self._reinstall_paths_through(dp.id)
        elif ev.state == DEAD_DISPATCHER and self.datapaths.get(dp.id) is dp:
            # Keep its links, hosts and paths: a switch that comes back gets them
            # re-installed; one that stays away loses its links to LLDP expiry,
            # which reroutes the paths through it.
            del self.datapaths[dp.id]
            self.logger.info("switch %016x disconnected", dp.id)

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _on_port_desc(self, ev):
        dp = ev.msg.datapath
        for port in ev.msg.body:
            if port.port_no < dp.ofproto.OFPP_MAX:
                self.net.add_port(dp.id, port.port_no)
                self.port_hw[(dp.id, port.port_no)] = port.hw_addr
        self._send_lldp(dp)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _on_port_status(self, ev):
        dp, port = ev.msg.datapath, ev.msg.desc
        ofp = dp.ofproto
        if port.port_no >= ofp.OFPP_MAX:
            return
        down = (ev.msg.reason == ofp.OFPPR_DELETE or port.state & ofp.OFPPS_LINK_DOWN
                or port.config & ofp.OFPPC_PORT_DOWN)
        if down:
            gone = self.net.remove_port(dp.id, port.port_no)
            if gone:
                self.logger.info("link down at %016x port %d", dp.id, port.port_no)
                self._reroute_after_link_loss(gone)
        else:
            self.net.add_port(dp.id, port.port_no)
            self.port_hw[(dp.id, port.port_no)] = port.hw_addr
            self._send_lldp(dp)

    # --- discovery ------------------------------------------------------------

    def _discovery_loop(self):
        while True:
            for dp in list(self.datapaths.values()):
                self._send_lldp(dp)
            gone = self.net.expire_links(time.monotonic())
            if gone:
                self.logger.info("links expired: %s", gone)
                self._reroute_after_link_loss(gone)
            hub.sleep(LLDP_INTERVAL_S)

    def _send_lldp(self, dp):
        for port in sorted(self.net.ports.get(dp.id, ())):
            hw = self.port_hw.get((dp.id, port), "00:00:00:00:00:00")
            flows.packet_out(dp, [port], discovery.build_lldp(dp.id, port, hw))

    # --- packets --------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        in_port = msg.match["in_port"]
        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        if eth is None:
            return
        sender = discovery.parse_lldp(pkt) if eth.ethertype == 0x88CC else None
        if sender is not None:
            if self.net.add_link(sender, (dp.id, in_port), time.monotonic()):
                self.logger.info("link %016x:%d -> %016x:%d", sender[0], sender[1], dp.id, in_port)
            return
        if eth.ethertype == 0x88CC:
            return
        now = time.monotonic()
        arp_pkt = pkt.get_protocol(arp.arp)
        ip_pkt = pkt.get_protocol(ipv4.ipv4)
        if arp_pkt is not None:
            self.net.learn_host(eth.src, arp_pkt.src_ip, dp.id, in_port, now)
            self._handle_arp(dp, in_port, eth, arp_pkt, msg.data)
        elif ip_pkt is not None:
            self.net.learn_host(eth.src, ip_pkt.src, dp.id, in_port, now)
            self._handle_ipv4(dp, in_port, ip_pkt, msg.data)
        # Anything else (IPv6, other multicast) is not forwarded: the lab is IPv4.

    def _handle_arp(self, dp, in_port, eth, req, data):
        if req.opcode == arp.ARP_REQUEST:
            target = self.net.host_by_ip(req.dst_ip)
            if target is not None:
                reply = packet.Packet()
                reply.add_protocol(ethernet.ethernet(dst=eth.src, src=target.mac, ethertype=0x0806))
                reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=target.mac, src_ip=req.dst_ip,
                                           dst_mac=req.src_mac, dst_ip=req.src_ip))
                reply.serialize()
                flows.packet_out(dp, [in_port], bytes(reply.data))
                return
        else:
            target = self.net.host_by_ip(req.dst_ip)
            if target is not None:
                self._output_at_host(target, data)
                return
        self._flood_to_edges(data, exclude=(dp.id, in_port))

    def _handle_ipv4(self, dp, in_port, ip_pkt, data):
        src = self.net.host_by_ip(ip_pkt.src)
        dst = self.net.host_by_ip(ip_pkt.dst)
        if dst is None or src is None:
            self._flood_to_edges(data, exclude=(dp.id, in_port))
            return
        try:
            hops = self._install_pair(src, dst)
            self._install_pair(dst, src)
        except NoPath as err:
            self.logger.warning("no path %s -> %s: %s", ip_pkt.src, ip_pkt.dst, err)
            return
        for hop in hops:
            if hop.dpid == dp.id:
                flows.packet_out(dp, [hop.out_port], data)
                return

    # --- paths ----------------------------------------------------------------

    def _install_pair(self, src: HostLocation, dst: HostLocation):
        hops = self.net.host_path(src, dst)
        key = (src.ipv4, dst.ipv4)
        if self.paths.get(key) != hops:
            old = self.paths.get(key)
            if old:
                self._remove_path_flows(key, old)
            # Last hop first, so a packet never reaches a switch before its rule.
            for hop in reversed(hops):
                self._install_hop(key, hop)
            self.paths[key] = hops
            self.logger.info("path %s -> %s: %s", src.ipv4, dst.ipv4,
                             " ".join(f"{h.dpid:x}:{h.in_port}>{h.out_port}" for h in hops))
        return hops

    def _install_hop(self, key, hop):
        dp = self.datapaths.get(hop.dpid)
        if dp is None:
            return
        parser = dp.ofproto_parser
        flows.add_flow(dp, flows.PRIO_PATH, flows.ipv4_pair_match(parser, *key),
                       [parser.OFPActionOutput(hop.out_port)], idle_timeout=PATH_IDLE_TIMEOUT_S)

    def _remove_path_flows(self, key, hops):
        for hop in hops:
            dp = self.datapaths.get(hop.dpid)
            if dp is not None:
                flows.delete_our_flows(dp, flows.ipv4_pair_match(dp.ofproto_parser, *key))

    def _reinstall_paths_through(self, dpid: int):
        for key, hops in self.paths.items():
            for hop in hops:
                if hop.dpid == dpid:
                    self._install_hop(key, hop)

    def _forget_paths(self, predicate):
        for key in [k for k, hops in self.paths.items() if predicate(hops)]:
            self._remove_path_flows(key, self.paths.pop(key))

    def _reroute_after_link_loss(self, gone_links):
        gone_ports = {end for link in gone_links for end in link}

        def uses_gone_link(hops):
            return any((h.dpid, h.out_port) in gone_ports or (h.dpid, h.in_port) in gone_ports
                       for h in hops)

        affected = [k for k, hops in self.paths.items() if uses_gone_link(hops)]
        self._forget_paths(lambda hops: uses_gone_link(hops))
        for src_ip, dst_ip in affected:
            src, dst = self.net.host_by_ip(src_ip), self.net.host_by_ip(dst_ip)
            if src and dst:
                try:
                    self._install_pair(src, dst)
                except NoPath:
                    self.logger.warning("no path left for %s -> %s", src_ip, dst_ip)

    # --- controller-driven flooding ---------------------------------------------

    def _output_at_host(self, host: HostLocation, data: bytes):
        dp = self.datapaths.get(host.dpid)
        if dp is not None:
            flows.packet_out(dp, [host.port], data)

    def _flood_to_edges(self, data: bytes, exclude):
        now = time.monotonic()
        self._recent_floods = {k: t for k, t in self._recent_floods.items() if now - t < FLOOD_DEDUP_S}
        if data in self._recent_floods:
            return  # a copy that came back around: never flood it twice
        self._recent_floods[data] = now
        for dpid, dp in self.datapaths.items():
            ports = [p for p in self.net.edge_ports(dpid) if (dpid, p) != exclude]
            flows.packet_out(dp, ports, data)
