"""The ckcd-coex controller: events in, flow-mods out.

Decisions are made by the pure core: coex.topology.NetworkMap (where hosts are, shortest
paths), coex.policy.Policy (which aggregate a flow belongs to), coex.forwarding.ForwardingPlan
(aggregate ids, the path of each aggregate, each hop's meter and queue), coex.planner (queue
plans) and coex.ports (a port's discipline, the record of what was configured on it). This
module turns OpenFlow events into calls on them and their answers into OpenFlow messages
(ryu_app/flows.py) and port configuration (ovs_config).

Forwarding model (docs/architecture.md has the details):
- ARP never floods in the data plane: proxy ARP for known hosts, edge ports otherwise;
- IPv4 between known hosts gets flows on every switch of its path, per aggregate;
- one function, _sync_switch(), brings a switch to the state the policy and the known
  paths ask for; it runs on connect, on reconnect and after every policy change, so a
  reconnecting switch, a restarted controller and a REST change all converge the same way.
"""

from __future__ import annotations

import sys
import time

from ryu import cfg
from ryu.app.wsgi import WSGIApplication
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.lib.packet import arp, ethernet, ipv4, packet
from ryu.ofproto import ofproto_v1_3

from coex import planner
from coex.forwarding import DEFAULT, PENALIZED, ForwardingPlan
from coex.policy import Policy, PolicyError
from coex.ports import APPLIED, LINK_FALLBACK_SPEC, PortState, link_discipline
from coex.steering import bridge_sampling
from coex.store import PolicyStore
from coex.topology import HostLocation, NetworkMap, NoPath
from ovs_config import aqm, queues, sflow
from ovs_config.ovsdb import LOCAL, Ovsdb, OvsdbError
from ryu_app import discovery, flows, rest
from ryu_app.config import CoexConfig
from ryu_app.heavy_hitters import HeavyHitterService

LLDP_INTERVAL_S = 1.0
FLOW_STATS_TIMEOUT_S = 1.0  # a scrape waits this long for the switches' flow counters
FLOOD_DEDUP_S = 1.0  # the same frame is flooded by the controller at most once per second
SWITCH_HOST_INTERVAL_S = 5.0  # ports in error are retried, kernel qdisc stats re-read, this often


class CoexController(app_manager.RyuApp):
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
        self.port_state: dict[tuple[int, int], PortState] = {}  # what we configured on each policy port
        self.link_base_spec: dict[tuple[int, int], str] = {}  # ckcd-link discipline before we changed it
        self.paths: dict[tuple[str, str, str], list] = {}  # (aggregate, src ip, dst ip) -> hops
        self._recent_floods: dict[bytes, float] = {}
        self.bridge_names: dict[int, str] = {}            # dpid -> OVS bridge name (its LOCAL port)
        self.steered: set = set()                          # flow keys steered into 'penalized'
        self._flow_stats_wait: dict[int, tuple] = {}       # xid -> (hub.Event, entries), flow_stats()
        self.ovsdb_errors: dict[int, str] = {}             # dpid -> why its OVSDB did not answer last
        self.heavy_hitters = HeavyHitterService(self)
        self.store = PolicyStore(self.config.db_path)
        self.policy, self.policy_version = self.store.load()
        self._apply_policy_file()
        self._plan_policy()
        rest.register(kwargs["wsgi"], self)
        # Detection as the policy says from the start (its collector listening), not only once a
        # bottleneck port's switch connects: GET /heavy-hitters says what it waits for.
        self.heavy_hitters.configure(self.policy.heavy_hitters, self.policy.ports)
        self.logger.info("ckcd-coex controller loaded (OpenFlow 1.3); policy version %d from %s; "
                         "REST on http://%s:%s/coex/v1", self.policy_version, self.config.db_path,
                         cfg.CONF.wsapi_host, cfg.CONF.wsapi_port)
        hub.spawn(self._discovery_loop)
        # Its own green thread: a switch host's OVSDB that does not answer costs its timeout
        # here, never LLDP's rhythm (links would expire) nor a packet-in's answer.
        hub.spawn(self._switch_host_loop)

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
            self.policy_version = self.store.save(wanted, f"policy file {self.config.policy_path}")
            self.policy = wanted

    def _plan_policy(self) -> None:
        self.plan = ForwardingPlan(self.policy)

    def apply_policy(self, new: Policy, summary: str) -> int:
        """Store a validated policy (committed before this returns) and enforce it everywhere."""
        version = self.store.save(new, summary)
        self.policy, self.policy_version = new, version
        self._plan_policy()
        self.logger.info("policy version %d: %s", version, summary)
        old, self.paths = self.paths, {}
        for agg, src_ip, dst_ip in old:
            src, dst = self.net.host_by_ip(src_ip), self.net.host_by_ip(dst_ip)
            if self.plan.knows(agg):
                if src and dst:
                    try:
                        self.paths[(agg, src_ip, dst_ip)] = self.plan.path(self.net, agg, src, dst)
                    except NoPath:
                        pass
        self._configure_ports()  # queues exist before flows send into them
        for dp in list(self.datapaths.values()):
            self._sync_switch(dp)
        self._configure_heavy_hitters()
        return version

    def _configure_heavy_hitters(self) -> None:
        """sFlow agents on the bridges of the bottleneck ports, sending to `collector` (the
        embedded collector, or sFlow-RT's sFlow port); detectors on the ports."""
        hh = self.policy.heavy_hitters
        sampling = bridge_sampling(hh, self.policy.ports)  # dpid -> 1-in-N
        for dpid, bridge in sorted(self.bridge_names.items()):
            db = self.ovsdb_of(dpid)
            host = self.policy.switch_host(dpid)
            collector = host.collector if host is not None and host.collector else hh.collector
            try:
                if hh.enabled and dpid in sampling:
                    if sflow.ensure_sflow(bridge, sampling=sampling[dpid], polling_s=hh.polling_s,
                                          target=sflow.validate_target(collector), vsctl=db.vsctl):
                        self.logger.info("sFlow agent on %s (%s) samples 1-in-%d, sends to %s (%s)", bridge,
                                         db.where, sampling[dpid], collector, hh.source)
                elif sflow.sflow_settings(bridge, vsctl=db.vsctl) is not None:
                    sflow.disable_sflow(bridge, vsctl=db.vsctl)
            except (ValueError, RuntimeError) as err:
                self.logger.error("sFlow on %s (%s): %s", bridge, db.where, err)
        self.heavy_hitters.configure(hh, self.policy.ports)

    def steer(self, key) -> None:
        """Put one flow into the penalized aggregate on every switch (above every rule).

        The penalized path flows of its host pair go in first, so its packets never miss
        table 1 and wait for the controller: a heavy hitter is the flow whose packets a
        busy controller can least afford to see one by one."""
        self.steered.add(key)
        src, dst = self.net.host_by_ip(key.src_ip), self.net.host_by_ip(key.dst_ip)
        if src is not None and dst is not None:
            try:
                self._install_pair(PENALIZED, src, dst)
            except NoPath as err:  # packet-ins for the pair will say so again
                self.logger.warning("no penalized path %s -> %s: %s", key.src_ip, key.dst_ip, err)
        for dp in list(self.datapaths.values()):
            self._install_steering(dp, key)

    def unsteer(self, key) -> None:
        self.steered.discard(key)
        for dp in list(self.datapaths.values()):
            flows.delete_our_flows(dp, flows.TABLE_CLASSIFY, flows.five_tuple_match(dp.ofproto_parser, key))

    def _install_steering(self, dp, key) -> None:
        flows.add_classify_flow(dp, self.plan.steer_flow(key))

    def ovsdb_of(self, dpid: int) -> Ovsdb:
        """The switch host's OVSDB: its policy entry's remote, else this machine's."""
        host = self.policy.switch_host(dpid)
        return Ovsdb(host.ovsdb) if host is not None else LOCAL

    def _configure_ports(self) -> None:
        """Queues (Separate Queues) and disciplines on every policy port whose switch is
        known; clear the rest."""
        wanted = {(p.dpid, p.port): p for p in self.policy.ports}
        for key in list(self.port_state):
            if key not in wanted:
                self._clear_port(key)
        for key, port in wanted.items():
            name = self.port_names.get(key)
            old = self.port_state.get(key, PortState())
            state = PortState(name=name)
            if name is not None:
                self._configure_port(key, port, state, old)
            self.port_state[key] = state

    def _configure_port(self, key, port, state: PortState, old: PortState) -> None:
        """Queues first, then the discipline; a backend error stops there and is the status,
        so GET /state says how far the port got. The same error is logged once, not at each
        retry."""
        db = self.ovsdb_of(key[0])
        try:
            state.aqm_backend = aqm.backend_of(state.name, db)
            state.queue_backend = queues.choose_backend(state.name, state.aqm_backend,
                                                        self.config.queue_backend, db)
            if self.policy.approaches.separate_queues:
                self._apply_queues(port, state, db)
            else:
                self._clear_queues(state.name, state.queue_backend, db)
            self._set_discipline(key, port, state, db)
            state.status = APPLIED
            self.ovsdb_errors.pop(key[0], None)
        except (queues.QueueBackendError, aqm.AqmBackendError, OvsdbError) as err:
            state.status = f"error: {err}"
            if isinstance(err, OvsdbError):
                self.ovsdb_errors[key[0]] = str(err)
            if state.status != old.status:
                self.logger.error("port %s of switch %016x: %s", state.name, key[0], err)
        if old.status.startswith("error") and state.status == APPLIED:
            self.logger.info("port %s of switch %016x: applied (%s)", state.name, key[0], db.where)

    def _apply_queues(self, port, state: PortState, db: Ovsdb) -> None:
        plan = planner.queue_plan(self.policy, port)
        if state.queue_backend == "tc-htb":
            queues.apply_tc_htb(state.name, plan)
        elif state.queue_backend == "ovsdb-queue":
            queues.apply_ovsdb_queues(state.name, plan, db)
        state.queues = plan.classes

    def _set_discipline(self, key, port, state: PortState, db: Ovsdb) -> None:
        """ckcd-link: what coex.ports.link_discipline decides (bands under Separate Queues).
        sch_ckcd: the port's AQM as the kernel qdisc, at the root shaped to the port's
        capacity, or under each of OVS's linux-htb queues when those are the port's QoS."""
        if state.aqm_backend == aqm.LINK_BACKEND and state.queue_backend == "ckcd-link":
            if key not in self.link_base_spec:
                self.link_base_spec[key] = aqm.current_discipline(state.name, db) or LINK_FALLBACK_SPEC
            spec = link_discipline(self.policy, port, self.link_base_spec[key])
            aqm.attach_discipline(state.name, spec, db)
            state.discipline = spec  # only what the link took
        elif state.aqm_backend == aqm.KERNEL_BACKEND:
            if port.aqm is None:
                if "ckcd-qdisc" in aqm.interface_ids(state.name, db):
                    aqm.detach_kernel(state.name, db)
                return
            spec = port.aqm.spec(port.capacity_bps)
            under_queues = self.policy.approaches.separate_queues and state.queue_backend == "ovsdb-queue"
            state.qdisc = aqm.attach_discipline(state.name, spec, db, backend=aqm.KERNEL_BACKEND,
                                                rate_bps=None if under_queues else port.capacity_bps,
                                                own_root=not under_queues)
            state.discipline = spec
        elif port.aqm is not None:
            raise aqm.AqmBackendError(aqm.no_backend_reason(state.name, db))

    def aqm_backend(self, dpid: int, port: int) -> tuple[str | None, str]:
        """The port's discipline backend, or None with the reason (for REST's 409)."""
        name = self.port_names.get((dpid, port))
        if name is None:
            return None, f"switch {dpid:#x} has not named port {port} yet"
        db = self.ovsdb_of(dpid)
        try:
            backend = aqm.backend_of(name, db)
            return backend, "" if backend else aqm.no_backend_reason(name, db)
        except OvsdbError as err:
            return None, str(err)

    def _clear_queues(self, name: str, backend: str, db: Ovsdb) -> None:
        if backend == "tc-htb":
            queues.clear_tc(name)
        elif backend == "ovsdb-queue":
            queues.clear_ovsdb_queues(name, db)

    def _clear_port(self, key) -> None:
        state = self.port_state.pop(key, PortState())
        if state.name is None or state.queue_backend is None:
            return
        db = self.ovsdb_of(key[0])
        try:
            self._clear_queues(state.name, state.queue_backend, db)
            if key in self.link_base_spec:  # give the link back the discipline it came with
                aqm.attach_discipline(state.name, self.link_base_spec.pop(key), db)
            elif state.aqm_backend == aqm.KERNEL_BACKEND and state.discipline is not None:
                aqm.detach_kernel(state.name, db)
        except (queues.QueueBackendError, aqm.AqmBackendError, OvsdbError) as err:
            self.logger.error("port %s: %s", state.name, err)

    def _switch_host_loop(self):
        """Retry ports whose configuration failed (a switch host's OVSDB that was down comes
        back; an agent that was not running starts), and re-read the kernel qdiscs' stats
        for GET /state."""
        while True:
            hub.sleep(SWITCH_HOST_INTERVAL_S)
            for key, state in list(self.port_state.items()):
                port = self.policy.port(*key)
                if port is None or state.name is None or key[0] not in self.datapaths:
                    continue
                if state.status.startswith("error"):
                    fresh = PortState(name=state.name)
                    self._configure_port(key, port, fresh, state)
                    if self.port_state.get(key) is state:
                        self.port_state[key] = fresh
                        if fresh.status == APPLIED:
                            self._configure_heavy_hitters()
                elif state.aqm_backend == aqm.KERNEL_BACKEND and state.discipline is not None:
                    try:
                        state.qdisc = aqm.kernel_status(state.name, self.ovsdb_of(key[0]))
                    except OvsdbError as err:
                        state.qdisc = {"error": str(err)}

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
            self._sync_switch(dp)
        elif ev.state == DEAD_DISPATCHER and self.datapaths.get(dp.id) is dp:
            # Keep its links, hosts and paths: a switch that comes back gets them
            # re-installed; one that stays away loses its links to LLDP expiry,
            # which reroutes the paths through it.
            del self.datapaths[dp.id]
            self.logger.info("switch %016x disconnected", dp.id)

    def _sync_switch(self, dp) -> None:
        """Make the switch hold exactly what policy and known paths ask of it."""
        flows.delete_our_flows(dp)
        flows.install_base_flows(dp)
        for flow in self.plan.classify_flows():
            flows.add_classify_flow(dp, flow)
        for key in self.steered:
            self._install_steering(dp, key)
        flows.set_meters(dp, [m for m in self.plan.meters if m.dpid == dp.id])
        for key, hops in self.paths.items():
            for hop in hops:
                if hop.dpid == dp.id:
                    self._install_hop(key, hop)

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    def _on_port_desc(self, ev):
        dp = ev.msg.datapath
        for port in ev.msg.body:
            if port.port_no < dp.ofproto.OFPP_MAX:
                self._learn_port(dp.id, port)
            elif port.port_no == dp.ofproto.OFPP_LOCAL:
                name = port.name.decode() if isinstance(port.name, bytes) else port.name
                self.bridge_names[dp.id] = name
        self._send_lldp(dp)
        if any(p.dpid == dp.id for p in self.policy.ports):
            self._configure_ports()
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
            gone = self.net.remove_port(dp.id, port.port_no)
            if gone:
                self.logger.info("link down at %016x port %d", dp.id, port.port_no)
                self._reroute_after_link_loss(gone)
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
            self.net.learn_host(eth.src, arp_pkt.src_ip, dp.id, in_port, now)
            self._handle_arp(dp, in_port, eth, arp_pkt, msg.data)
        elif ip_pkt is not None:
            self.net.learn_host(eth.src, ip_pkt.src, dp.id, in_port, now)
            # The switch already classified the packet: its aggregate id is in the metadata.
            agg = self.plan.aggregate_of(msg.match.get("metadata", 0) & flows.METADATA_MASK)
            self._handle_ipv4(dp, in_port, ip_pkt, agg, msg.data)
        # Anything else (IPv6, other multicast) is not forwarded: the lab is IPv4.

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
            return
        try:
            hops = self._install_pair(agg, src, dst)
            if (DEFAULT, dst.ipv4, src.ipv4) not in self.paths:  # replies need no packet-in
                self._install_pair(DEFAULT, dst, src)
        except NoPath as err:
            self.logger.warning("no path %s -> %s: %s", ip_pkt.src, ip_pkt.dst, err)
            return
        for hop in hops:
            if hop.dpid == dp.id:
                flows.packet_out(dp, [hop.out_port], data)
                return

    # --- paths ----------------------------------------------------------------------

    def _install_pair(self, agg: str, src: HostLocation, dst: HostLocation):
        hops = self.plan.path(self.net, agg, src, dst)
        key = (agg, src.ipv4, dst.ipv4)
        if self.paths.get(key) != hops:
            old = self.paths.get(key)
            if old:
                self._remove_path_flows(key, old)
            for hop in reversed(hops):  # last hop first: a packet never outruns its rule
                self._install_hop(key, hop)
            self.paths[key] = hops
            self.logger.info("path %s %s -> %s: %s", agg, src.ipv4, dst.ipv4,
                             " ".join(f"{h.dpid:x}:{h.in_port}>{h.out_port}" for h in hops))
        return hops

    def _install_hop(self, key, hop):
        dp = self.datapaths.get(hop.dpid)
        if dp is None:
            return
        flows.add_hop_flow(dp, self.plan.hop_flow(*key, hop, self.port_state.get((hop.dpid, hop.out_port))))

    def _remove_path_flows(self, key, hops):
        agg, src_ip, dst_ip = key
        for hop in hops:
            dp = self.datapaths.get(hop.dpid)
            if dp is not None:
                agg_id = self.plan.agg_ids.get(agg)  # None (metadata 0) for the default
                flows.delete_our_flows(dp, flows.TABLE_FORWARD,
                                       flows.path_match(dp.ofproto_parser, src_ip, dst_ip, agg_id))

    def _reroute_after_link_loss(self, gone_links):
        gone_ports = {end for link in gone_links for end in link}

        def uses_gone_link(hops):
            return any((h.dpid, h.out_port) in gone_ports or (h.dpid, h.in_port) in gone_ports
                       for h in hops)

        for key in [k for k, hops in self.paths.items() if uses_gone_link(hops)]:
            self._remove_path_flows(key, self.paths.pop(key))
            agg, src_ip, dst_ip = key
            src, dst = self.net.host_by_ip(src_ip), self.net.host_by_ip(dst_ip)
            if src and dst:
                try:
                    self._install_pair(agg, src, dst)
                except NoPath:
                    self.logger.warning("no path left for %s %s -> %s", agg, src_ip, dst_ip)

    # --- controller-driven flooding -------------------------------------------------

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

    # --- flow counters, asked when GET /metrics is scraped ------------------------------

    def flow_stats(self, timeout_s: float = FLOW_STATS_TIMEOUT_S) -> dict[int, list]:
        """The counters of our table-1 path flows on every connected switch, asked now:
        dpid -> OFPFlowStats entries. A switch that has not answered within timeout_s is left
        out (a scrape must not hang on one)."""
        waiting = {}
        for dpid, dp in list(self.datapaths.items()):
            req = flows.path_flow_stats_request(dp)
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
        wait = self._flow_stats_wait.get(msg.xid)
        if wait is None:
            return
        wait[1].extend(msg.body)
        if not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            wait[0].set()

    # --- what the REST API reads ----------------------------------------------------

    def effective_state(self) -> dict:
        switches = []
        for dpid in sorted(set(self.net.ports) | set(self.datapaths)):
            switches.append({
                "dpid": dpid, "connected": dpid in self.datapaths, "ovsdb": self.ovsdb_of(dpid).where,
                **({"ovsdb_error": self.ovsdb_errors[dpid]} if dpid in self.ovsdb_errors else {}),
                "ports": sorted(self.net.ports.get(dpid, ())),
                "meters": [vars(m) for m in self.plan.meters if m.dpid == dpid],
                "paths": [{"aggregate": a, "src": s, "dst": d,
                           "hop": {"in_port": h.in_port, "out_port": h.out_port}}
                          for (a, s, d), hops in sorted(self.paths.items()) for h in hops if h.dpid == dpid],
            })
        return {
            "policy_version": self.policy_version,
            "switches": switches,
            "links": [{"a": {"dpid": a[0], "port": a[1]}, "b": {"dpid": b[0], "port": b[1]}}
                      for a, b in self.net.links()],
            "hosts": [{"mac": h.mac, "ipv4": h.ipv4, "dpid": h.dpid, "port": h.port}
                      for h in sorted(self.net.hosts.values(), key=lambda h: h.ipv4 or "")],
            "ports": [{"dpid": k[0], "port": k[1], **v.to_dict()} for k, v in sorted(self.port_state.items())],
        }
