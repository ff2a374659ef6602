"""The switch hosts' side of a policy: what the controller configures through OVSDB and the
link daemons rather than through OpenFlow (docs/controller.md).

For every bottleneck port of the policy whose switch has named it: its queues (Separate
Queues: tc-htb, OVSDB Queue rows or ckcd-link bands) and its discipline (ckcd-link, or the
kernel qdisc sch_ckcd through the switch host's agent); for every bridge with such a port:
its sFlow agent, and how often OVS credits its flow counters when counting confirms heavy
hitters. A port whose host did not answer keeps its error as its status and is tried again
by run_forever(), which also re-reads the kernel qdiscs' statistics.

What to configure is decided in coex (coex.planner, coex.ports, coex.steering); how each
backend is driven is in ovs_config.queues, .aqm, .sflow and .counter_refresh. This class
holds what was configured where (PortState per port) and nothing of OpenFlow: the
controller tells it the names the switches gave their ports and bridges.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from coex import planner
from coex.policy import Policy, Port
from coex.ports import APPLIED, LINK_FALLBACK_SPEC, PortState, link_discipline
from coex.steering import bridge_sampling, confirms_by_counting, sampling_targets
from ovs_config import aqm, counter_refresh, queues, sflow
from ovs_config.ovsdb import LOCAL, Ovsdb, OvsdbError

PortRef = tuple[int, int]  # (dpid, OpenFlow port number)
RETRY_INTERVAL_S = 5.0  # ports in error are retried, kernel qdisc stats re-read, this often
BACKEND_ERRORS = (queues.QueueBackendError, aqm.AqmBackendError, OvsdbError)


class SwitchHostConfigurator:
    def __init__(self, port_names: Mapping[PortRef, str], queue_backend: str, logger: logging.Logger):
        """port_names: the interface name of each (dpid, port) as its switch reported it (the
        controller's map, read live); queue_backend: the operator's choice for Separate
        Queues ("auto" picks per port, ovs_config.queues.choose_backend)."""
        self.port_names = port_names
        self.queue_backend = queue_backend
        self.logger = logger
        self.policy = Policy()
        self.port_state: dict[PortRef, PortState] = {}   # what we configured on each policy port
        self.link_base_spec: dict[PortRef, str] = {}     # a ckcd-link port's discipline before we changed it
        self.bridge_names: dict[int, str] = {}           # dpid -> OVS bridge name (its LOCAL port)
        self.ovsdb_errors: dict[int, str] = {}           # dpid -> why its OVSDB did not answer last

    # --- what the controller tells us ---------------------------------------------------

    def bridge_named(self, dpid: int, name: str) -> None:
        self.bridge_names[dpid] = name

    def ovsdb_of(self, dpid: int) -> Ovsdb:
        """The switch host's OVSDB: its policy entry's remote, else this machine's."""
        host = self.policy.switch_host(dpid)
        return Ovsdb(host.ovsdb) if host is not None else LOCAL

    # --- ports: queues and disciplines ----------------------------------------------------

    def configure_ports(self, policy: Policy) -> None:
        """Queues (Separate Queues) and disciplines on every policy port whose switch is
        known; clear the ports the policy no longer names."""
        self.policy = policy
        wanted = {(p.dpid, p.port): p for p in policy.ports}
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

    def _configure_port(self, key: PortRef, port: Port, state: PortState, old: PortState) -> None:
        """Queues first, then the discipline; a backend error stops there and is the status,
        so GET /state says how far the port got. The same error is logged once, not at each
        retry."""
        db = self.ovsdb_of(key[0])
        try:
            state.aqm_backend = aqm.backend_of(state.name, db)
            state.queue_backend = queues.choose_backend(state.name, state.aqm_backend, self.queue_backend, db)
            if self.policy.approaches.separate_queues:
                self._apply_queues(port, state, db)
            else:
                self._clear_queues(state.name, state.queue_backend, db)
            self._set_discipline(key, port, state, db)
            state.status = APPLIED
            self.ovsdb_errors.pop(key[0], None)
        except BACKEND_ERRORS as err:
            state.status = f"error: {err}"
            if isinstance(err, OvsdbError):
                self.ovsdb_errors[key[0]] = str(err)
            if state.status != old.status:
                self.logger.error("port %s of switch %016x: %s", state.name, key[0], err)
        if old.status.startswith("error") and state.status == APPLIED:
            self.logger.info("port %s of switch %016x: applied (%s)", state.name, key[0], db.where)

    def _apply_queues(self, port: Port, state: PortState, db: Ovsdb) -> None:
        plan = planner.queue_plan(self.policy, port)
        if state.queue_backend == "tc-htb":
            queues.apply_tc_htb(state.name, plan)
        elif state.queue_backend == "ovsdb-queue":
            queues.apply_ovsdb_queues(state.name, plan, db)
        state.queues = plan.classes

    def _set_discipline(self, key: PortRef, port: Port, state: PortState, db: Ovsdb) -> None:
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

    @staticmethod
    def _clear_queues(name: str, backend: str, db: Ovsdb) -> None:
        if backend == "tc-htb":
            queues.clear_tc(name)
        elif backend == "ovsdb-queue":
            queues.clear_ovsdb_queues(name, db)

    def _clear_port(self, key: PortRef) -> None:
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
        except BACKEND_ERRORS as err:
            self.logger.error("port %s: %s", state.name, err)

    # --- bridges: sFlow agents and counter refresh -----------------------------------------

    def configure_sampling(self, policy: Policy, collectors: Sequence[str] = (),
                           still: Callable[[], bool] = lambda: True) -> bool:
        """sFlow agents on the bridges of the bottleneck ports, sending to every instance's
        collector (`collectors`: the live instances' own, docs/ha.md; none said: the policy's
        collector), or to sFlow-RT's sFlow port; a switch host's own `collector` wins. Off on
        the other bridges. Then the counter refresh. Stops before a bridge once `still()` is false
        (we stopped leading). True when every bridge took its settings."""
        self.policy = policy
        ok = True
        hh = policy.heavy_hitters
        sampling = bridge_sampling(hh, policy.ports)  # dpid -> 1-in-N
        for dpid, bridge in sorted(self.bridge_names.items()):
            if not still():
                return False
            db = self.ovsdb_of(dpid)
            targets = sampling_targets(policy, dpid, collectors)
            try:
                if hh.enabled and dpid in sampling:
                    if sflow.ensure_sflow(bridge, sampling=sampling[dpid], polling_s=hh.polling_s,
                                          target=targets, vsctl=db.vsctl):
                        self.logger.info("sFlow agent on %s (%s) samples 1-in-%d, sends to %s (%s)", bridge,
                                         db.where, sampling[dpid], ", ".join(targets), hh.source)
                elif sflow.sflow_settings(bridge, vsctl=db.vsctl) is not None:
                    sflow.disable_sflow(bridge, vsctl=db.vsctl)
            except (ValueError, RuntimeError, OSError) as err:
                self.logger.error("sFlow on %s (%s): %s", bridge, db.where, err)
                ok = False
        self._configure_counter_refresh(sampling)
        return ok

    def _configure_counter_refresh(self, sampling: Mapping[int, int]) -> None:
        """Counting confirms heavy hitters: the switch hosts with bottleneck bridges credit their
        counters to the OpenFlow flows every counter_refresh_ms (ovs_config/counter_refresh.py);
        otherwise a value we set there is taken back."""
        hh = self.policy.heavy_hitters
        counting = hh.enabled and confirms_by_counting(hh)
        hosts: dict[Ovsdb, int | None] = {}
        for dpid in sorted(self.bridge_names):
            db = self.ovsdb_of(dpid)
            want = hh.counter_refresh_ms if counting and dpid in sampling else None
            if hosts.get(db) is None:  # a host with one counting bridge wants it
                hosts[db] = want
        for db, ms in hosts.items():
            try:
                if counter_refresh.ensure_counter_refresh(db, ms):
                    self.logger.info("%s: OVS credits its flow counters %s", db.where,
                                     f"every {ms} ms (max-revalidator)" if ms else "at its own interval again")
            except (ValueError, RuntimeError) as err:
                self.logger.error("counter refresh on %s: %s", db.where, err)

    # --- the retry loop ---------------------------------------------------------------------

    def retry(self, connected: Collection[int]) -> bool:
        """One round: configure again the ports in error whose switch is connected (a switch
        host's OVSDB that was down comes back; an agent that was not running starts), and
        re-read the kernel qdiscs' stats for GET /state. True if a port became applied (its
        bridge may now want its sFlow agent)."""
        recovered = False
        for key, state in list(self.port_state.items()):
            port = self.policy.port(*key)
            if port is None or state.name is None or key[0] not in connected:
                continue
            if state.status.startswith("error"):
                fresh = PortState(name=state.name)
                self._configure_port(key, port, fresh, state)
                if self.port_state.get(key) is state:
                    self.port_state[key] = fresh
                    recovered |= fresh.status == APPLIED
            elif state.aqm_backend == aqm.KERNEL_BACKEND and state.discipline is not None:
                try:
                    state.qdisc = aqm.kernel_status(state.name, self.ovsdb_of(key[0]))
                except OvsdbError as err:
                    state.qdisc = {"error": str(err)}
        return recovered

    def run_forever(self, sleep: Callable[[float], None], connected: Callable[[], Collection[int]],
                    on_recovered: Callable[[], None]) -> None:
        """retry() every RETRY_INTERVAL_S, in a thread of its own (the controller's green
        thread: a switch host's OVSDB that does not answer costs its timeout here, never
        LLDP's rhythm nor a packet-in's answer); on_recovered() after a round where a port
        became applied."""
        while True:
            sleep(RETRY_INTERVAL_S)
            if self.retry(connected()):
                on_recovered()
