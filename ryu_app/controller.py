"""The ckcd-coex controller's OpenFlow shell: events in, flow-mods, meters and packet-outs out.

The controller is three parts (docs/controller.md):
- this shell, the Ryu app: it turns OpenFlow events into calls on the pure core and the
  core's answers into OpenFlow messages (ryu_app/flows.py);
- the switch-host configurator (ovs_config/switch_host.py): queues, disciplines, sFlow
  agents and counter refresh through OVSDB and the link daemons, and their retry loop;
- the read-only view (ryu_app/view.py) that REST, /metrics, the dashboard and heavy-hitter
  detection read.

Decisions are the core's: coex.topology.NetworkMap (where hosts are, shortest paths),
coex.policy.Policy (which aggregate a flow belongs to), coex.forwarding.ForwardingPlan
(aggregate ids, the path of each aggregate, each hop's meter and queue), coex.planner and
coex.ports (what each port gets).

Forwarding model (docs/architecture.md has the details):
- ARP never floods in the data plane: proxy ARP for known hosts, edge ports otherwise;
- IPv4 is forwarded on its destination: per (aggregate, destination host) one flow on every
  switch joined to the host, along the aggregate's tree toward it (coex.forwarding), so a
  switch holds O(hosts x aggregates) flows, not O(host pairs);
- what a switch should hold is data (coex.switch_state.desired); ryu_app.switch_sync sends
  only the difference from what it holds: read back from its tables when it connects (a
  reconnecting switch or a restarted controller reconciles, and flows that did not change
  keep their age and counters), then kept as each change is written. A REST change waits for
  the switches' barriers and reports a switch's refusal as a 502 naming it.
"""

from __future__ import annotations

import platform
import sys
import time

from coex import switch_state
from coex.forwarding import DEFAULT, PENALIZED, PRIO_COUNT, PRIO_STEER, ForwardingPlan, Tree
from coex.policy import Policy, PolicyError
from coex.recent import Recent
from coex.store import PolicyStore
from coex.topology import HostLocation, NetworkMap, NoPath
from ovs_config.link_stats import LinkStatsReader
from ovs_config.switch_host import SwitchHostConfigurator
from ryu_app import discovery, flows, rest
from ryu_app.framework import (CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, App, WSGIApplication, arp, cfg,
                               ethernet, hub, ipv4, ofp_event, ofproto_v1_3, packet, set_ev_cls)
from ryu_app.config import CoexConfig
from ryu_app.framework_choice import chosen_version
from ryu_app.heavy_hitters import HeavyHitterService
from ryu_app.switch_sync import SwitchSync
from ryu_app.view import ControllerView, PolicyInForce

LLDP_INTERVAL_S = 1.0
FLOW_STATS_TIMEOUT_S = 1.0  # a scrape waits this long for the switches' flow counters
FLOOD_DEDUP_S = 1.0  # the same frame is flooded by the controller at most once per second
# Our own ARP probes for destinations we do not know (RFC 5227 form: sender IP 0.0.0.0, which
# the owner answers to this MAC, locally administered so it is nobody's), at most one per
# address per PROBE_INTERVAL_S and PROBE_BUDGET_PER_S in all: a scan of unknown addresses must
# not become a broadcast storm.
PROBE_MAC = "02:c0:e0:00:00:01"
PROBE_INTERVAL_S = 1.0
PROBE_BUDGET_PER_S = 50


class CoexController(App):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        try:
            self.config = CoexConfig.from_env()
        except PolicyError as err:  # a bad setting stops us with one line, as a bad policy file does
            self.logger.error("%s", err.message)
            raise SystemExit(2) from None
        if not any(a.startswith("--wsapi-host") for a in sys.argv):
            # Ryu's default is every interface; ours is loopback.
            cfg.CONF.set_override("wsapi_host", self.config.rest_host)
        self.net = NetworkMap(link_max_age_s=3.5 * LLDP_INTERVAL_S)
        self.datapaths: dict[int, object] = {}
        self.port_hw: dict[tuple[int, int], str] = {}     # (dpid, port) -> MAC, for LLDP
        self.port_names: dict[tuple[int, int], str] = {}  # (dpid, port) -> interface name
        self.trees: dict[tuple[str, str], Tree] = {}       # (aggregate, dst ip) -> dpid -> out port, installed
        self._recent_floods = Recent(FLOOD_DEDUP_S)       # frames the controller flooded
        self._probed = Recent(PROBE_INTERVAL_S)           # addresses we sent an ARP probe for
        self.steered: set = set()                          # flow keys steered into 'penalized'
        self.sync = SwitchSync(self.logger)                # what each switch holds of ours; writes to it
        self._flow_stats_wait: dict[int, tuple] = {}       # xid -> (hub.Event, entries), flow_stats()
        self.switch_hosts = SwitchHostConfigurator(self.port_names, self.config.queue_backend, self.logger)
        self.store = PolicyStore(self.config.db_path)
        self.in_force = PolicyInForce(*self.store.load())
        self._apply_policy_file()
        self.view = ControllerView(in_force=self.in_force, net=self.net, datapaths=self.datapaths,
                                   port_names=self.port_names, trees=self.trees, switch_hosts=self.switch_hosts,
                                   store=self.store, read_path_counters=self.flow_stats,
                                   links=LinkStatsReader(), switch_errors=self.sync.error_counts,
                                   switch_writes=self.sync.write_counts,
                                   in_sync=self.sync.fresh)
        self.heavy_hitters = HeavyHitterService(self.view, self, self.logger)
        rest.register(kwargs["wsgi"], rest.CoexApi(self.view, self.heavy_hitters, self.apply_policy,
                                                   self.config.token, self.logger))
        # Detection as the policy says from the start (its collector listening), not only once a
        # bottleneck port's switch connects: GET /heavy-hitters says what it waits for.
        self.heavy_hitters.configure(self.policy.heavy_hitters, self.policy.ports)
        fw = chosen_version()
        self.logger.info("ckcd-coex controller loaded (OpenFlow 1.3, %s %s, Python %s); policy version %d "
                         "from %s; REST on http://%s:%s/coex/v1", fw["name"], fw["version"],
                         platform.python_version(), self.in_force.version, self.config.db_path,
                         cfg.CONF.wsapi_host, cfg.CONF.wsapi_port)
        hub.spawn(self._discovery_loop)
        # Its own green thread: a switch host's OVSDB that does not answer costs its timeout
        # there, never LLDP's rhythm (links would expire) nor a packet-in's answer.
        hub.spawn(self.switch_hosts.run_forever, hub.sleep, lambda: self.datapaths.keys(),
                  self._configure_heavy_hitters)

    @property
    def policy(self) -> Policy:
        return self.in_force.policy

    @property
    def plan(self) -> ForwardingPlan:
        return self.in_force.plan

    # --- policy -------------------------------------------------------------------

    def _apply_policy_file(self) -> None:
        """CKCD_COEX_POLICY, if set, becomes the stored policy (a new version only if it
        differs). A bad file stops the controller with one line naming the field: running
        on with some other policy than the operator wrote would be worse."""
        try:
            wanted = self.config.policy_file()
            if wanted is not None:
                rest.check_port_disciplines(wanted)
        except PolicyError as err:
            field = f" (field {err.field})" if err.field else ""
            self.logger.error("%s%s", err.message, field)
            raise SystemExit(2) from None
        if wanted is not None and wanted.to_dict() != self.policy.to_dict():
            self.in_force.replace(wanted, self.store.save(wanted, f"policy file {self.config.policy_path}"))

    def apply_policy(self, new: Policy, summary: str) -> int:
        """Store a validated policy (committed before this returns) and enforce it everywhere."""
        version = self.store.save(new, summary)
        self.in_force.replace(new, version)
        self.logger.info("policy version %d: %s", version, summary)
        old = dict(self.trees)
        self.trees.clear()
        for agg, dst_ip in old:  # replanned here, installed by _sync_switch below
            dst = self.net.host_by_ip(dst_ip)
            if not self.plan.knows(agg):
                continue
            if dst is None:  # adopted from the switches after a restart: kept until the host shows
                self.trees[(agg, dst_ip)] = old[(agg, dst_ip)]
                continue
            try:
                self.trees[(agg, dst_ip)] = self.plan.tree(self.net, agg, dst)
            except NoPath:
                pass
        self.switch_hosts.configure_ports(new)  # queues exist before flows send into them
        writes = [self._sync_switch(dp) for dp in list(self.datapaths.values())]
        self._configure_heavy_hitters()
        errors, late = self.sync.wait(writes)
        if errors or late:
            raise rest.ApiError(502, f"policy version {version} is stored and in force, but not on every switch: "
                                + "; ".join([str(e) for e in errors[:5]] + [f"switch {d:016x} did not confirm the "
                                                                           "change in time" for d in late]),
                                "switch")
        return version

    def _configure_heavy_hitters(self) -> None:
        """The bridges' sFlow agents and counter refresh (ovs_config.switch_host), then the
        detectors on the ports."""
        self.switch_hosts.configure_sampling(self.policy)
        self.heavy_hitters.configure(self.policy.heavy_hitters, self.policy.ports)

    # --- what heavy-hitter detection asks of the switches (ryu_app.heavy_hitters.SwitchActions)

    def steer(self, key) -> None:
        """Put one flow into the penalized aggregate on every switch (above every rule).

        The penalized tree toward its destination goes in first, so its packets never miss
        table 1 and wait for the controller: a heavy hitter is the flow whose packets a
        busy controller can least afford to see one by one."""
        self.steered.add(key)
        dst = self.net.host_by_ip(key.dst_ip)
        if dst is not None:
            try:
                self._install_tree(PENALIZED, dst)
            except NoPath as err:  # packet-ins for the flow will say so again
                self.logger.warning("no penalized path %s -> %s: %s", key.src_ip, key.dst_ip, err)
        for dp in list(self.datapaths.values()):
            self.sync.change(dp, add=[switch_state.classify_flow(self.plan.steer_flow(key))])

    def unsteer(self, key) -> None:
        self.steered.discard(key)
        for dp in list(self.datapaths.values()):
            self.sync.change(dp, delete=[switch_state.classify_flow(self.plan.steer_flow(key))])

    def install_counting(self, dpid: int, key) -> bool:
        """A counting flow for one suspect (coex/counting.py) on switch dpid; False if the switch
        is not connected or the flow's 5-tuple cannot say how the rules would treat it."""
        dp, flow = self.datapaths.get(dpid), self.plan.count_flow(key)
        if dp is None or flow is None:
            return False
        self.sync.change(dp, add=[switch_state.classify_flow(flow, counting=True)])
        return True

    def remove_counting(self, dpid: int, key) -> None:
        dp = self.datapaths.get(dpid)
        if dp is not None:  # by its key and cookie alone: what it did may have changed with the policy
            self.sync.change(dp, delete=[switch_state.Flow(switch_state.TABLE_CLASSIFY, PRIO_COUNT,
                                                           switch_state.five_tuple_match(key),
                                                           cookie=switch_state.COUNT_COOKIE)])

    def classify_counters(self, dpid: int, timeout_s: float) -> list | None:
        """(priority, flow key, bytes) of the switch's counting and steering flows, read now;
        None if it did not answer within timeout_s."""
        entries = self.flow_stats(timeout_s, flows.classify_flow_stats_request, [dpid]).get(dpid)
        if entries is None:
            return None
        return [(e.priority, flows.flow_key_of(e.match), e.byte_count) for e in entries
                if e.priority in (PRIO_COUNT, PRIO_STEER)]

    # --- switches -------------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _on_features(self, ev):
        dp = ev.msg.datapath
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
            self.sync.forget(dp.id)
            # its tables are read and answered through this event loop: wait for them elsewhere
            hub.spawn(self.sync.reconcile, dp, lambda: self._wanted(dp.id), self._adopt_hops)
        elif ev.state == DEAD_DISPATCHER and self.datapaths.get(dp.id) is dp:
            # Keep its links, hosts and paths: a switch that comes back gets them
            # re-installed; one that stays away loses its links to LLDP expiry,
            # which reroutes the paths through it.
            del self.datapaths[dp.id]
            self.sync.forget(dp.id)
            self.logger.info("switch %016x disconnected", dp.id)

    def _wanted(self, dpid: int) -> switch_state.SwitchState:
        """Everything of ours switch dpid should hold now (coex.switch_state.desired)."""
        return switch_state.desired(self.plan, self.policy.packet_in, dpid, self.trees, self.steered,
                                    self.heavy_hitters.counted_on(dpid), self.switch_hosts.port_state)

    def _sync_switch(self, dp):
        """Bring the switch to what policy and known paths ask of it, sending only what differs;
        a switch whose tables are not known (or that refused a message since) is read first.
        Blocks for that read: call it where waiting is allowed (not in an event handler)."""
        if self.sync.fresh(dp.id):
            return self.sync.converge(dp, self._wanted(dp.id))
        return self.sync.reconcile(dp, lambda: self._wanted(dp.id), self._adopt_hops)

    def _adopt_hops(self, dpid: int, held: switch_state.SwitchState) -> None:
        """A restarted controller knows no trees while the switches still forward along them:
        each hop flow a switch holds toward a destination we have no tree for becomes part of
        that tree (coex.switch_state.hop_of), so the reconcile keeps it and established pairs
        are not touched. A host learned again gets its planned tree, which replaces what was
        adopted; an aggregate the policy no longer has is not adopted (its flows go)."""
        for flow in held.flows:
            hop = switch_state.hop_of(flow)
            if hop is None or hop.agg_id not in (0, *self.plan.agg_ids.values()):
                continue
            key = (self.plan.aggregate_of(hop.agg_id), hop.dst_ip)
            tree = self.trees.setdefault(key, {})
            tree.setdefault(dpid, hop.out_port)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _on_error(self, ev):
        msg = ev.msg
        ofp = msg.datapath.ofproto
        names = {v: k for k, v in vars(ofp).items() if k.startswith("OFPET_") and isinstance(v, int)}
        if self.sync.on_error(msg.datapath.id, msg, names.get(msg.type, f"type {msg.type}")) is None:
            self.logger.warning("switch %016x sent an error for none of our writes: type %d code %d",
                                msg.datapath.id or 0, msg.type, msg.code)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _on_barrier(self, ev):
        self.sync.on_barrier(ev.msg.datapath.id, ev.msg.xid)

    @set_ev_cls(ofp_event.EventOFPMeterConfigStatsReply, MAIN_DISPATCHER)
    def _on_meter_config(self, ev):
        self.sync.on_reply(ev.msg.datapath.id, ev.msg)

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _on_port_desc(self, ev):
        dp = ev.msg.datapath
        for port in ev.msg.body:
            if port.port_no < dp.ofproto.OFPP_MAX:
                self._learn_port(dp.id, port)
            elif port.port_no == dp.ofproto.OFPP_LOCAL:
                name = port.name.decode() if isinstance(port.name, bytes) else port.name
                self.switch_hosts.bridge_named(dp.id, name)
        self._send_lldp(dp)
        if any(p.dpid == dp.id for p in self.policy.ports):
            self.switch_hosts.configure_ports(self.policy)
            self._configure_heavy_hitters()

    def _learn_port(self, dpid: int, port) -> None:
        self.net.add_port(dpid, port.port_no)
        self.port_hw[(dpid, port.port_no)] = port.hw_addr
        name = port.name.decode() if isinstance(port.name, bytes) else port.name
        self.port_names[(dpid, port.port_no)] = name

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _on_port_status(self, ev):
        dp, port = ev.msg.datapath, ev.msg.desc
        ofp = dp.ofproto
        if port.port_no >= ofp.OFPP_MAX:
            return
        down = (ev.msg.reason == ofp.OFPPR_DELETE or port.state & ofp.OFPPS_LINK_DOWN
                or port.config & ofp.OFPPC_PORT_DOWN)
        if down:
            known = {h.ipv4 for h in self.net.hosts.values()}
            gone = self.net.remove_port(dp.id, port.port_no)
            if gone:
                self.logger.info("link down at %016x port %d", dp.id, port.port_no)
                self._reroute_after_link_loss(gone)
            self._forget_trees_of_lost_hosts(known)
        else:
            self._learn_port(dp.id, port)
            self._send_lldp(dp)

    # --- discovery ------------------------------------------------------------------

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

    # --- packets --------------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        in_port = msg.match["in_port"]
        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        if eth is None:
            return
        if eth.ethertype == 0x88CC:
            sender = discovery.parse_lldp(pkt)
            if sender is not None and self.net.add_link(sender, (dp.id, in_port), time.monotonic()):
                self.logger.info("link %016x:%d -> %016x:%d", sender[0], sender[1], dp.id, in_port)
            return
        now = time.monotonic()
        arp_pkt = pkt.get_protocol(arp.arp)
        ip_pkt = pkt.get_protocol(ipv4.ipv4)
        if arp_pkt is not None:
            self._learn_host(eth.src, arp_pkt.src_ip, dp.id, in_port, now)
            if eth.dst != PROBE_MAC:  # an answer to our probe has taught us all it had to
                self._handle_arp(dp, in_port, eth, arp_pkt, msg.data)
        elif ip_pkt is not None:
            self._learn_host(eth.src, ip_pkt.src, dp.id, in_port, now)
            # The switch already classified the packet: its aggregate id is in the metadata.
            agg = self.plan.aggregate_of(msg.match.get("metadata", 0) & flows.METADATA_MASK)
            self._handle_ipv4(dp, in_port, ip_pkt, agg, msg.data)
        # Anything else (IPv6, other multicast) is not forwarded: the lab is IPv4.

    def _learn_host(self, mac: str, ip: str, dpid: int, port: int, now: float) -> None:
        """A host new or moved gets the default tree toward it at once (and its other trees
        moved), so the first IPv4 packet to it, from anywhere, finds its flow: with
        forwarding keyed on the destination, a new host costs its ARP and no packet-in per
        peer."""
        if not self.net.learn_host(mac, ip, dpid, port, now):
            return
        host = self.net.hosts[mac]
        if host.ipv4 is None:
            return
        for agg in [DEFAULT] + [a for a, d in self.trees if d == host.ipv4 and a != DEFAULT]:
            try:
                self._install_tree(agg, host)
            except NoPath:
                pass  # its switch has no links yet: packet-ins install the tree later

    def _handle_arp(self, dp, in_port, eth, req, data):
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

    def _handle_ipv4(self, dp, in_port, ip_pkt, agg, data):
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
            tree = self._install_tree(agg, dst, resend_to=dp.id)
            if (DEFAULT, src.ipv4) not in self.trees:  # replies need no packet-in
                self._install_tree(DEFAULT, src)
        except NoPath as err:
            self.logger.warning("no path %s -> %s: %s", ip_pkt.src, ip_pkt.dst, err)
            return
        if dp.id in tree:
            flows.packet_out(dp, [tree[dp.id]], data)

    # --- trees toward destinations ------------------------------------------------------

    def _install_tree(self, agg: str, dst: HostLocation, resend_to: int | None = None) -> Tree:
        """Bring every switch's flow for (agg, dst) to the tree the plan gives now: send the
        flows that changed (and the one of `resend_to`), delete them on switches the tree
        left. The tree comes nearest the destination first, so a packet never outruns its
        flow."""
        key = (agg, dst.ipv4)
        tree = self.plan.tree(self.net, agg, dst)
        old = self.trees.get(key, {})
        for dpid, out_port in tree.items():
            if old.get(dpid) != out_port or dpid == resend_to:
                self._install_hop(agg, dst.ipv4, dpid, out_port)
        for dpid in old.keys() - tree.keys():
            self._remove_hop(agg, dst.ipv4, dpid, old[dpid])
        self.trees[key] = tree
        if old != tree:
            self.logger.info("tree %s -> %s (%016x:%d): %d switches%s", agg, dst.ipv4, dst.dpid, dst.port,
                             len(tree), ", replanned" if old else "")
        return tree

    def _install_hop(self, agg: str, dst_ip: str, dpid: int, out_port: int) -> None:
        dp = self.datapaths.get(dpid)
        if dp is not None:
            self.sync.change(dp, add=[self._hop(agg, dst_ip, dpid, out_port)])

    def _remove_hop(self, agg: str, dst_ip: str, dpid: int, out_port: int) -> None:
        dp = self.datapaths.get(dpid)
        if dp is not None:
            self.sync.change(dp, delete=[self._hop(agg, dst_ip, dpid, out_port)])

    def _hop(self, agg: str, dst_ip: str, dpid: int, out_port: int) -> switch_state.Flow:
        return switch_state.hop_flow(self.plan.hop_flow(agg, dst_ip, dpid, out_port,
                                                        self.switch_hosts.port_state.get((dpid, out_port))))

    def _drop_tree(self, key) -> None:
        for dpid, out_port in self.trees.pop(key, {}).items():
            self._remove_hop(*key, dpid, out_port)

    def _reroute_after_link_loss(self, gone_links):
        """Replan every tree that sent packets into a link that went; a switch cut off from
        the destination loses its flow (its packets come to us, and find no path)."""
        gone_ports = {end for link in gone_links for end in link}
        for key in [k for k, tree in self.trees.items() if any(hop in gone_ports for hop in tree.items())]:
            dst = self.net.host_by_ip(key[1])
            try:
                if dst is None:
                    raise NoPath(f"host {key[1]} is not known any more")
                self._install_tree(key[0], dst)
            except NoPath:
                self.logger.warning("no path left toward %s for %s", key[1], key[0])
                self._drop_tree(key)

    def _forget_trees_of_lost_hosts(self, known: set) -> None:
        """A host whose port went down is forgotten (NetworkMap.remove_port); so are the flows
        toward it. Only toward hosts `known` before: an adopted tree's host is not known yet."""
        for key in [k for k in self.trees if k[1] in known and self.net.host_by_ip(k[1]) is None]:
            self._drop_tree(key)

    # --- controller-driven flooding -------------------------------------------------

    def _output_at_host(self, host: HostLocation, data: bytes):
        dp = self.datapaths.get(host.dpid)
        if dp is not None:
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
            flows.packet_out(dp, ports, data)

    # --- flow counters, asked when GET /metrics is scraped ------------------------------

    def flow_stats(self, timeout_s: float = FLOW_STATS_TIMEOUT_S, request=flows.path_flow_stats_request,
                   dpids=None) -> dict[int, list]:
        """The counters of our table-1 forwarding flows (or what `request` asks for) on every
        connected switch (of `dpids`), asked now: dpid -> OFPFlowStats entries. A switch that
        has not answered within timeout_s is left out (a scrape must not hang on one)."""
        waiting = {}
        for dpid, dp in list(self.datapaths.items()):
            if dpids is not None and dpid not in dpids:
                continue
            req = request(dp)
            dp.set_xid(req)
            waiting[dpid] = self._flow_stats_wait[req.xid] = (hub.Event(), [], req.xid)
            dp.send_msg(req)
        deadline = time.monotonic() + timeout_s
        answered = {}
        try:
            for dpid, (done, entries, _) in waiting.items():
                if done.wait(max(0.0, deadline - time.monotonic())):
                    answered[dpid] = entries
        finally:
            for _, _, xid in waiting.values():
                self._flow_stats_wait.pop(xid, None)
        return answered

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _on_flow_stats(self, ev):
        msg = ev.msg
        if self.sync.on_reply(msg.datapath.id, msg):
            return
        wait = self._flow_stats_wait.get(msg.xid)
        if wait is None:
            return
        wait[1].extend(msg.body)
        if not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            wait[0].set()
