"""The ckcd-coex controller's OpenFlow shell: events in, flow-mods, meters and packet-outs out.

The controller is three parts (docs/controller.md):
- this shell, the Ryu app: it turns OpenFlow events into calls on the pure core and the
  core's answers into OpenFlow messages (ryu_app/flows.py), with its helpers: the trees it
  keeps installed (ryu_app/trees.py), what it does with packet-ins (ryu_app/packet_in.py),
  what switches hold of ours and the writes to them (ryu_app/switch_sync.py), heavy-hitter
  steering (ryu_app/steering_actions.py) and flow counters read on demand
  (ryu_app/flow_counters.py);
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

import os
import platform
import socket
import sys
import time

from coex import switch_state
from coex.policy import Policy, PolicyError
from coex.election import LeaderLock
from coex.store import PolicyStore, StaleVersion, StoreError
from coex.topology import NetworkMap
from ovs_config.link_stats import LinkStatsReader
from ovs_config.ovsdb import SSL_ENV
from ovs_config.switch_host import SwitchHostConfigurator
from ryu_app import discovery, flows, rest
from ryu_app.framework import (CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, App, WSGIApplication, cfg, hub,
                               ofp_event, ofproto_v1_3, set_ev_cls)
from ryu_app.config import CoexConfig
from ryu_app.flow_counters import FlowCounters
from ryu_app.multipart import MultipartReads
from ryu_app.framework_choice import chosen_version
from ryu_app.election import Election
from ryu_app.heavy_hitters import HeavyHitterService
from ryu_app.packet_in import PacketIn
from ryu_app.steering_actions import SteeringActions
from ryu_app.roles import MASTER, Roles
from ryu_app.switch_sync import SwitchSync
from ryu_app.trees import Trees
from ryu_app.view import ControllerView, PolicyInForce

LLDP_INTERVAL_S = 1.0


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
        self.reads = MultipartReads()                      # table reads in flight, by (dpid, xid)
        self.roles = Roles(self.logger)                    # our role on each switch; leading or not
        self.sync = SwitchSync(self.logger, self.reads, self.roles.may_write)  # what switches hold; writes
        self.counters = FlowCounters(self.datapaths, self.reads)
        self.switch_hosts = SwitchHostConfigurator(self.port_names, self.config.queue_backend, self.logger)
        self.store, self.lock = self._open_store()
        self.saving = 0  # REST saves under way
        self.identity = f"{socket.gethostname()} pid {os.getpid()}, REST port {cfg.CONF.wsapi_port}"
        self.in_force = PolicyInForce(*self.store.load())
        self._apply_policy_file()
        self.trees = Trees(net=self.net, datapaths=self.datapaths, sync=self.sync, in_force=self.in_force,
                           switch_hosts=self.switch_hosts, logger=self.logger)
        self.packet_in = PacketIn(net=self.net, datapaths=self.datapaths, trees=self.trees,
                                  in_force=self.in_force, logger=self.logger, may_write=self.roles.may_write)
        self.steering = SteeringActions(net=self.net, datapaths=self.datapaths, sync=self.sync, trees=self.trees,
                                        in_force=self.in_force, counters=self.counters, logger=self.logger)
        self.view = ControllerView(in_force=self.in_force, net=self.net, datapaths=self.datapaths,
                                   port_names=self.port_names, trees=self.trees.trees,
                                   switch_hosts=self.switch_hosts, store=self.store,
                                   read_path_counters=self.counters.read, links=LinkStatsReader(),
                                   switch_errors=self.sync.error_counts, switch_writes=self.sync.write_counts,
                                   in_sync=self.sync.fresh, roles=self.roles)
        self.heavy_hitters = HeavyHitterService(self.view, self.steering, self.logger, self._remember_steering,
                                                leading=lambda: self.roles.leading,
                                                listen=self.config.sflow_collector)
        self.collectors: list[str] = []  # the live instances' sFlow collectors, as the leader last read them
        rest.register(kwargs["wsgi"], rest.CoexApi(self.view, self.heavy_hitters, self.apply_policy,
                                                   self.config.token, self.logger))
        self.election = Election(self)
        try:
            if not self.election.try_to_lead():  # alone, we lead before the first switch connects
                self.heavy_hitters.configure(self.policy.heavy_hitters, self.policy.ports)  # detect standing by
        except OSError as err:  # the leader's lock file cannot be trusted
            self.logger.error("%s", err)
            raise SystemExit(2) from None
        fw = chosen_version()
        self.logger.info("ckcd-coex controller loaded (OpenFlow 1.3, %s %s, Python %s); policy version %d "
                         "from %s; REST on http://%s:%s/coex/v1", fw["name"], fw["version"],
                         platform.python_version(), self.in_force.version, self.config.db_path,
                         cfg.CONF.wsapi_host, cfg.CONF.wsapi_port)
        hub.spawn(self._discovery_loop)
        hub.spawn(self.election.run_forever)
        # Its own green thread: a switch host's OVSDB that does not answer costs its timeout
        # there, never LLDP's rhythm (links would expire) nor a packet-in's answer.
        hub.spawn(self.switch_hosts.run_forever, hub.sleep,
                  lambda: self.datapaths.keys() if self.roles.leading else (), self.configure_heavy_hitters)

    def _open_store(self):
        """The policy store and the leader's lock: an OVSDB cluster's when CKCD_COEX_CLUSTER
        names one, else the SQLite file and a lock file beside it (docs/ha.md). One that cannot
        be opened stops the controller with one line."""
        try:
            if self.config.cluster is not None:
                from coex.ovsdb_state import OvsdbStore  # needs python3-openvswitch only here
                store = OvsdbStore(self.config.cluster, tuple(os.environ.get(SSL_ENV[option]) for option in
                                                              ("--private-key", "--certificate", "--ca-cert")))
                return store, store
            return PolicyStore(self.config.db_path), LeaderLock(self.config.db_path + ".leader")
        except (StoreError, OSError) as err:
            self.logger.error("the policy store cannot be opened: %s", err)
            raise SystemExit(2) from None

    @property
    def policy(self) -> Policy:
        return self.in_force.policy

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
        """Store a validated policy (committed before this returns) and, leading, enforce it
        everywhere; a standby leaves that to the leader, which reads the store (docs/ha.md).
        Refused (409) if another instance stored a version since ours."""
        self.saving += 1  # the election loop's follow_store leaves the version we save to us
        try:
            version = self.store.save(new, summary, based_on=self.in_force.version)
        except StaleVersion as err:
            raise rest.ApiError(409, str(err), "version") from None
        except StoreError as err:  # the state cluster without a majority: stored or not, we cannot say
            raise rest.ApiError(503, f"the policy store did not confirm the change, which may or may not be "
                                     f"stored (GET /policy says): {err}", "store") from None
        finally:
            self.saving -= 1
        self.in_force.replace(new, version)
        self.logger.info("policy version %d: %s", version, summary)
        if self.roles.leading:
            self.enforce_policy()
        return version

    def enforce_policy(self) -> None:
        """The policy in force on every switch, its ports and heavy-hitter detection; blocks
        until the switches confirmed it (or a timeout). ApiError 502 naming a switch that
        refused or did not answer."""
        version = self.in_force.version
        self.trees.replan()  # installed by _sync_switch below
        self.switch_hosts.configure_ports(self.policy)  # queues exist before flows send into them
        writes = [self._sync_switch(dp) for dp in list(self.datapaths.values())]
        self.configure_heavy_hitters()
        errors, late = self.sync.wait(writes)
        if errors or late:
            raise rest.ApiError(502, f"policy version {version} is stored and in force, but not on every switch: "
                                + "; ".join([str(e) for e in errors[:5]] + [f"switch {d:016x} did not confirm the "
                                                                           "change in time" for d in late]),
                                "switch")

    def _remember_steering(self, flow: dict, dpid: int, port: int, record: dict | None) -> None:
        if self.roles.leading:  # a leader stepping down releases nothing for its successor
            try:
                self.store.set_steered(flow, dpid, port, record)
            except StoreError as err:  # our successor may then release or steer it anew
                self.logger.error("heavy hitter %s at %s:%s not stored for the next leader: %s", flow, dpid, port, err)

    def configure_heavy_hitters(self) -> None:
        """Detection on the policy's ports, on every instance (a standby's acts on nothing);
        then, leading, the bridges' sFlow agents (sending to every instance's collector) and
        counter refresh (ovs_config.switch_host): a standby changes no switch."""
        self.heavy_hitters.configure(self.policy.heavy_hitters, self.policy.ports)
        self.election.configure_sampling(self.roles.term)

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
            self.roles.forget(dp.id)
            self.election.ask_role(dp)  # nothing is written to it before it answers
        elif ev.state == DEAD_DISPATCHER and self.datapaths.get(dp.id) is dp:
            # Keep its links, hosts and paths: a switch that comes back gets them
            # re-installed; one that stays away loses its links to LLDP expiry,
            # which reroutes the paths through it.
            del self.datapaths[dp.id]
            self.sync.forget(dp.id)
            self.roles.forget(dp.id)
            self.logger.info("switch %016x disconnected", dp.id)

    def _wanted(self, dpid: int) -> switch_state.SwitchState:
        """Everything of ours switch dpid should hold now (coex.switch_state.desired)."""
        return switch_state.desired(self.in_force.plan, self.policy.packet_in, dpid, self.trees.trees,
                                    self.steering.steered, self.heavy_hitters.counted_on(dpid),
                                    self.switch_hosts.port_state)

    def _sync_switch(self, dp):
        """Bring the switch to what policy and known paths ask of it, sending only what differs;
        a switch whose tables are not known (or that refused a message since) is read first.
        Blocks for that read: call it where waiting is allowed (not in an event handler)."""
        if self.sync.fresh(dp.id):
            return self.sync.converge(dp, self._wanted(dp.id))
        return self.sync.reconcile(dp, lambda: self._wanted(dp.id), self.trees.adopt)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _on_error(self, ev):
        msg = ev.msg
        ofp = msg.datapath.ofproto
        if msg.type == ofp.OFPET_ROLE_REQUEST_FAILED:
            self.election.on_role_refused(msg.datapath, self.roles.on_error(msg.datapath.id, msg), msg.code)
            return
        if (msg.type, msg.code) == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_IS_SLAVE) and self.roles.leading:
            # In OpenFlow 1.3 a switch demotes its master without a word when another claims
            # MASTER: a newer term began elsewhere.
            self.roles.forget(msg.datapath.id)
            self.election.step_down(f"switch {msg.datapath.id:016x} took us for a SLAVE: another instance "
                                    "claimed MASTER")
        names = {v: k for k, v in vars(ofp).items() if k.startswith("OFPET_") and isinstance(v, int)}
        if self.sync.on_error(msg.datapath.id, msg, names.get(msg.type, f"type {msg.type}")) is None:
            self.logger.warning("switch %016x sent an error for none of our writes: type %d code %d",
                                msg.datapath.id or 0, msg.type, msg.code)

    @set_ev_cls(ofp_event.EventOFPRoleReply, MAIN_DISPATCHER)
    def _on_role_reply(self, ev):
        dp = ev.msg.datapath
        if self.roles.on_reply(dp.id, ev.msg) == MASTER:
            # its tables are read and answered through this event loop: wait for them elsewhere
            hub.spawn(self._take_switch, dp)

    def _take_switch(self, dp) -> None:
        """A switch that just confirmed us as MASTER: what it holds read and adopted, brought
        to what we want, its links probed. (Its ports are configured through OVSDB by
        leadership, not by role: when its port list comes, or when we take over.)"""
        self.sync.forget(dp.id)
        self.sync.reconcile(dp, lambda: self._wanted(dp.id), self.trees.adopt)
        self._send_lldp(dp)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _on_barrier(self, ev):
        self.sync.on_barrier(ev.msg.datapath.id, ev.msg.xid)

    @set_ev_cls(ofp_event.EventOFPMeterConfigStatsReply, MAIN_DISPATCHER)
    def _on_meter_config(self, ev):
        self.reads.on_reply(ev.msg.datapath.id, ev.msg)

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
            if self.roles.leading:
                self.switch_hosts.configure_ports(self.policy)
            self.configure_heavy_hitters()  # the port's name is known: its detectors can start

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
                self.trees.reroute_after_link_loss(gone)
            self.trees.forget_lost_hosts(known)
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
                self.trees.reroute_after_link_loss(gone)
            hub.sleep(LLDP_INTERVAL_S)

    def _send_lldp(self, dp):
        if not self.roles.may_write(dp.id):  # a standby learns links from the leader's probes
            return
        for port in sorted(self.net.ports.get(dp.id, ())):
            hw = self.port_hw.get((dp.id, port), "00:00:00:00:00:00")
            flows.packet_out(dp, [port], discovery.build_lldp(dp.id, port, hw))

    # --- packets and counters ---------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _on_packet_in(self, ev):
        msg = ev.msg
        # The switch already classified the packet: its aggregate id is in the metadata.
        self.packet_in.handle(msg.datapath, msg.match["in_port"], msg.data, msg.match.get("metadata", 0),
                              act=self.roles.may_write(msg.datapath.id))

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _on_flow_stats(self, ev):
        self.reads.on_reply(ev.msg.datapath.id, ev.msg)
