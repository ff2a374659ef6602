"""Heavy hitters in the controller: sFlow in, steer()/unsteer() and GET /heavy-hitters out
(docs/sflow.md).

This module only translates. What is decided is coex.steering's: one PortWatch (the
detectors) per bottleneck port (policy `ports`), and the SteeringBook that turns their
events into steer and release decisions and keeps every decision, with its time and the
estimate that caused it. Here: the listener or the sFlow-RT poller and the timer run in
green threads, a steer decision goes to the switches' steer() (SwitchActions, which the
controller's OpenFlow shell implements), an unsteer one to unsteer(), and the book's
records to the log and to REST. What it reads of the controller comes from its
ControllerView.

Detectors (policy `detector`): "rate", the windowed rate estimate against a threshold
(HeavyHitterDetector); "mode", seed 003's mode of the sample history
(ModeHeavyHitterDetector: the port's most packet-consuming connection, one at a time).

Sources: the embedded collector (OVS's agent sends datagrams to us) or sFlow-RT's
REST API, polled once a second, for operators who run it. Either way the OVS agent on
the bottleneck bridges sends to `collector`: our listener, or sFlow-RT's sFlow port.

Every instance detects; only the leader acts (docs/ha.md). A standby's detectors take the
samples (the agents send to every instance's collector) but their events go nowhere: it
steers nothing, counts nothing and stores nothing. Taking over, it acts at once on what they
hold heavy (lead()); stepping down, it leaves what it steered to its successor (stand_by()).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import time
import urllib.parse
from typing import Callable, Protocol


from coex.counting import READ_INTERVAL_S, CountingBook, Verdict
from coex.forwarding import PRIO_STEER
from coex.heavy_hitters import HeavyHitterEvent
from coex.policy import HeavyHitters
from coex.sflow_collector import SFlowCollector
from coex.sflow import FlowKey
from coex.sflowrt import PORT_KEYS
from coex.steering import (PortWatch, SteeringBook, bridge_sampling, confirms_by_counting, flow_dict,
                           threshold_samples_per_s)
from ovs_config import sflow
from ryu_app.framework import hub
from ryu_app.sflow_listener import SFlowListener
from ryu_app.sflowrt_client import SFlowRTClient, SFlowRTError
from ryu_app.view import ControllerView

TICK_S = 0.5
# Counting: the counters of the counting and steering flows are read (one flow-stats request per
# switch with suspects or steered flows; docs/sflow.md, "Confirmation by counting") every
# READ_INTERVAL_S while a switch has suspects: a suspect's counter is judged by when its values
# first showed, and the confirmation's slack covers one interval of lateness (coex/counting.py).
# Otherwise every COUNT_INTERVAL_S (releases look at a second). A switch that has not answered
# within COUNT_TIMEOUT_S is skipped that round.
COUNT_INTERVAL_S = 0.1
COUNT_TIMEOUT_S = 0.5
# A collector that cannot listen (its port taken, e.g. by the instance that led before us on the
# same address) tries again this often.
LISTEN_RETRY_S = 2.0


def ifindex(port_name: str) -> int | None:
    """The port's ifIndex, which the sFlow agent names it by; None when it cannot be read."""
    try:
        with open(f"/sys/class/net/{port_name}/ifindex") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


class SwitchActions(Protocol):
    """What detection asks of the switches (the controller's OpenFlow shell does it)."""

    def steer(self, key: FlowKey) -> None:
        """Put the flow into the penalized aggregate on every switch."""

    def unsteer(self, key: FlowKey) -> None:
        """Take the flow's steering flows away again."""

    def install_counting(self, dpid: int, key: FlowKey) -> bool:
        """A counting flow for the suspect on the switch; False if it cannot be counted there."""

    def remove_counting(self, dpid: int, key: FlowKey) -> None:
        """Take the suspect's counting flow away."""

    def classify_counters(self, dpid: int, timeout_s: float) -> list[tuple[int, FlowKey, int]] | None:
        """(priority, flow key, bytes) of the counting and steering flows; None if no answer in time."""


class HeavyHitterService:
    def __init__(self, view: ControllerView, switches: SwitchActions, logger: logging.Logger,
                 remember: Callable[[dict, int, int, dict | None], None] = lambda *_: None,
                 leading: Callable[[], bool] = lambda: True, listen: str | None = None):
        self.view = view  # port names and which switches are connected
        self.switches = switches
        self.logger = logger
        self.leading = leading  # whether we act on what we detect (docs/ha.md)
        self.listen = listen    # this instance's own collector address; None: the policy's
        # remember(flow, dpid, port, record or None): each steering and release, for whoever
        # leads next (the shared store, docs/ha.md)
        self.remember = remember
        self.settings: HeavyHitters | None = None
        self.ports: list = []  # the policy's bottleneck ports: detection waits for those not watched yet
        self.watches: dict[tuple[int, int], PortWatch] = {}
        self.book = SteeringBook()
        self.collector = SFlowCollector()
        self.collector.subscribe_flow_samples(self._on_sample)
        self.listener: SFlowListener | None = None
        self.error: str | None = None  # why detection does not run although enabled
        self.sampling: dict[int, int] = {}  # dpid -> 1-in-N its sFlow agent samples at
        self.counting: CountingBook | None = None  # suspects and steered flows' counters, confirming by counting
        self._threads = []
        self._generation = 0
        self._configured = None  # (settings, ports, their names) detection last started for

    # --- configuration ------------------------------------------------------------

    def configure(self, hh: HeavyHitters, ports) -> None:
        """(Re)start detection for the policy's settings and bottleneck ports. Nothing is
        restarted (nor any flow released) when they, and which of the ports' names are known,
        are as last time: a policy edit elsewhere (a rule, an approach) leaves steering alone."""
        names = self.view.port_names()
        wanted = (hh, tuple(ports), tuple(names.get((p.dpid, p.port)) for p in ports))
        if wanted == self._configured:
            return
        self.stop()
        self._configured = wanted
        self.settings = hh
        self.ports = list(ports)
        self.sampling = bridge_sampling(hh, self.ports)
        self.error = None
        if not hh.enabled:
            return
        self.counting = CountingBook(hh.max_counting_flows) if confirms_by_counting(hh) else None
        if hh.source == "sflow-rt" and hh.detector == "mode":
            # sFlow-RT hands us rates per flow, not the packet samples the mode of history
            # counts (docs/sflow.md): refuse rather than steer by another rule.
            self.error = ("detector 'mode' needs the packet samples of the embedded collector; "
                          "source 'sflow-rt' gives flow rates only: detection is off")
            self.logger.error("heavy hitters: %s", self.error)
            return
        if hh.source == "sflow-rt":
            self._check_sflow_rt_addresses(hh)
        for p in ports:
            name = self.view.port_names().get((p.dpid, p.port))
            if name is not None:
                self._watch(PortWatch(p.dpid, p.port, name, ifindex(name), p.capacity_bps, hh),
                            self.sampling[p.dpid], chosen=hh.sampling is None)
        self._generation += 1
        self._start_loops(hh, self._generation)

    def _watch(self, watch: PortWatch, sampling: int, chosen: bool) -> None:
        self.watches[watch.key] = watch
        if chosen:
            self.logger.info("heavy hitters on %s: sampling 1-in-%d chosen, %.1f samples/s at the "
                                 "%.1f Mbit/s threshold", watch.name, sampling,
                                 threshold_samples_per_s(watch.high_threshold_bps(), sampling),
                                 watch.high_threshold_bps() / 1e6)
        elif watch.detects_slowly(sampling):
            threshold = watch.high_threshold_bps()
            self.logger.warning(
                "heavy hitters on %s: a flow at the %.1f Mbit/s threshold gives %.1f samples/s at "
                "1-in-%d; detection will often take more than a second (docs/sflow.md): sample "
                "more often or raise the threshold", watch.name, threshold / 1e6,
                threshold_samples_per_s(threshold, sampling), sampling)

    def _start_loops(self, hh: HeavyHitters, gen: int) -> None:
        if hh.source == "embedded":
            self._threads.append(hub.spawn(self._serve, gen))
        else:
            self._threads.append(hub.spawn(self._poll_sflow_rt, gen))
        self._threads.append(hub.spawn(self._tick_loop, gen))
        if self.counting is not None:
            self._threads.append(hub.spawn(self._count_loop, gen))

    def collector_address(self) -> str | None:
        """Where this instance's embedded collector listens (and the agents send to): its own
        address if it has one, else the policy's; None when it runs none."""
        hh = self.settings
        if hh is None or not hh.enabled or hh.source != "embedded":
            return None
        return self.listen or hh.collector

    def _open_listener(self) -> bool:
        address = self.collector_address()
        host, _, port = address.rpartition(":")
        listener = SFlowListener(self.collector, host=host.strip("[]"), port=int(port), poll_timeout_s=0.5)
        try:
            listener.open()
        except OSError as err:
            self.error = f"the sFlow collector cannot listen on {address}: {err.strerror or err}; trying again"
            return False
        if self.error is not None:
            self.logger.info("sFlow collector listens on %s", address)
        self.listener, self.error = listener, None
        return True

    def _check_sflow_rt_addresses(self, hh: HeavyHitters) -> None:
        """sFlow-RT: the controller points the OVS agents at `collector`, which must be
        sFlow-RT's sFlow address (UDP 6343 by default), not its REST API's (8008)."""
        try:
            target = sflow.validate_target(hh.collector)
        except ValueError as err:
            self.logger.error("heavy hitters: collector %s: %s", hh.collector, err)
            return
        url_host = urllib.parse.urlsplit(hh.sflow_rt_url).hostname or ""
        try:
            if ipaddress.ip_address(url_host) != ipaddress.ip_address(target.rpartition(":")[0].strip("[]")):
                self.logger.warning(
                    "heavy hitters: OVS sends sFlow to %s but sFlow-RT's REST API is at %s: set "
                    "`collector` to sFlow-RT's sFlow address (port 6343 by default)", target, hh.sflow_rt_url)
        except ValueError:
            pass  # a host name in the URL: nothing to compare without a lookup

    def stop(self) -> None:
        self._configured = None
        self._generation += 1  # loops of an older generation end by themselves
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        self._carry_out(self.book.release_all("detection stopped", time.monotonic(), time.time()))
        if self.counting is not None:
            for dpid, key in list(self.counting.suspects):
                self.switches.remove_counting(dpid, key)
            self.counting = None
        self.watches.clear()
        self._threads.clear()

    # --- loops ----------------------------------------------------------------------------

    def _serve(self, gen):
        failed = 0
        while gen == self._generation and not self._open_listener():
            if not failed:  # once: GET /heavy-hitters keeps saying it
                self.logger.error("heavy hitters: %s", self.error)
            failed += 1
            hub.sleep(LISTEN_RETRY_S)
        while gen == self._generation and self.listener is not None:
            self.listener.receive_once()

    def _tick_loop(self, gen):
        while gen == self._generation:
            now = time.monotonic()
            for watch in list(self.watches.values()):
                self._apply(watch, watch.tick(now), now)
            hub.sleep(TICK_S)

    def _poll_sflow_rt(self, gen):
        client = SFlowRTClient(self.settings.sflow_rt_url)
        defined = False
        while gen == self._generation:
            try:
                if not defined:
                    client.define_flow(keys=PORT_KEYS)
                    defined = True
                self.ingest_active_flows(client.active_flows(), time.monotonic())
            except (SFlowRTError, OSError, ValueError) as err:
                self.logger.warning("sFlow-RT at %s: %s", self.settings.sflow_rt_url, err)
                defined = False
            hub.sleep(1.0)

    def ingest_active_flows(self, active, now: float) -> None:
        """One sFlow-RT answer (coex.sflowrt.ActiveFlows of the PORT_KEYS flow) into every
        port's detectors; each takes the flows that leave by it."""
        for watch in list(self.watches.values()):
            self._apply(watch, watch.observe_active_flows(active, now), now)

    # --- samples and decisions ------------------------------------------------------

    def _on_sample(self, sample, datagram, now: float) -> None:
        since = self.collector.collection_start(datagram)  # when the agent began this datagram
        for watch in self.watches.values():
            self._apply(watch, watch.observe_sample(sample, now, since), now)

    def _apply(self, watch: PortWatch, events, now: float) -> None:
        if not self.leading():  # a standby's detectors keep their state; their events go nowhere
            return
        if events and self.counting is not None:
            events = self._suspect(watch, events, now)
        if events:
            self._carry_out(self.book.apply(watch.key, events, now, time.time()))

    # --- confirmation by counting (coex/counting.py) ------------------------------------------

    def _suspect(self, watch: PortWatch, events, now: float) -> list:
        """The detector's events while counting decides: a detection makes a suspect (its
        counting flow goes in); its releases are not decisions (the counters are). Returns the
        events the steering book still takes: a detection whose flow cannot be counted, if
        sFlow's estimate alone reaches the threshold."""
        through = []
        for ev in events:
            if ev.kind != "detected" or self.book.is_steered(ev.key, watch.key):
                continue
            admitted, displaced = self.counting.suspect(watch.dpid, ev.key, watch.key, ev.estimate_bps,
                                                        ev.first_seen_s, now)
            for dpid, key in displaced:
                self.switches.remove_counting(dpid, key)
                watch.detector.forget(key)
            if admitted and not self.switches.install_counting(watch.dpid, ev.key):
                self.counting.forget(watch.dpid, ev.key)
                admitted = False
                if ev.estimate_bps >= watch.high_threshold_bps():
                    through.append(dataclasses.replace(ev, threshold_bps=watch.high_threshold_bps(),
                                                       reason="above_high (not countable: a rule on DSCP or host)"))
                    continue
            if not admitted:
                watch.detector.forget(ev.key)  # it may be suspected again at a later sample
        return through

    def _count_loop(self, gen):
        last_read: dict[int, float] = {}  # dpid -> when its counters were last read
        while gen == self._generation:
            hub.sleep(READ_INTERVAL_S)
            book = self.counting
            if book is None or not self.leading():
                continue
            started = time.monotonic()
            with_suspects = {dpid for dpid, _ in book.suspects}
            due = [dpid for dpid in sorted(book.switches())
                   if dpid in with_suspects or started - last_read.get(dpid, 0.0) >= COUNT_INTERVAL_S - 1e-3]
            for dpid in due:
                last_read[dpid] = started
                entries = self.switches.classify_counters(dpid, COUNT_TIMEOUT_S)
                now = time.monotonic()
                for priority, key, nbytes in entries or ():
                    book.reading(dpid, key, nbytes, now, steering=priority == PRIO_STEER)
            if gen != self._generation:
                return
            now = time.monotonic()
            for verdict in book.judge(now, self._thresholds, self.settings.min_hold_s):
                self._carry_out_verdict(verdict, now)

    def _thresholds(self, port) -> tuple[float, float]:
        watch = self.watches.get(port)
        if watch is None:  # reconfigured meanwhile: nothing is confirmed, nothing released by this
            return float("inf"), -1.0
        return watch.high_threshold_bps(), watch.low_threshold_bps()

    def _carry_out_verdict(self, v: Verdict, now: float) -> None:
        watch = self.watches.get(v.port)
        if v.what in ("confirmed", "dropped"):
            self.switches.remove_counting(v.dpid, v.key)
        if watch is None:
            return
        mode = watch.detector.config.mode
        if v.what == "confirmed":
            ev = HeavyHitterEvent("detected", now, v.key, v.rate_bps, watch.high_threshold_bps(),
                                  f"counted (sFlow suspected it at {v.estimate_bps / 1e6:.1f} Mbit/s)", mode,
                                  first_seen_s=v.first_seen_s)
            decisions = self.book.apply(v.port, [ev], now, time.time())
            for d in decisions:  # how long the counter took, beside sFlow's part (detection_latency_s)
                d.record["counted_for_s"] = round(now - v.suspected_s, 3)
            self._carry_out(decisions)
        elif v.what == "dropped":
            watch.detector.forget(v.key)
        else:  # release: its steering flow counted less than the low threshold over the last second
            ev = HeavyHitterEvent("released", now, v.key, v.rate_bps, watch.low_threshold_bps(),
                                  "counted_below_low", mode)
            self._carry_out(self.book.apply(v.port, [ev], now, time.time()))
            watch.detector.forget(v.key)

    def adopt(self, steered) -> None:
        """The previous leader's steerings ((flow, dpid, port, record) from the shared store),
        taken over as they are: the flows stay steered, and counting (if it confirms) goes on
        reading their steering flows to release them."""
        now = time.monotonic()
        for flow, dpid, port, record in steered:
            key = FlowKey(flow["src_ip"], flow["dst_ip"], flow["protocol"], flow["src_port"], flow["dst_port"])
            if self.book.is_steered(key, (dpid, port)):
                continue
            self.book.adopt(key, (dpid, port), record, now)
            if self.counting is not None:
                self.counting.steering(dpid, key, (dpid, port), now)
            self.switches.steer(key)
            self.logger.info("heavy hitter %s at %s:%s: steered by the previous leader, kept", key, dpid, port)

    def lead(self) -> None:
        """Taking over (after adopt): what our detectors hold heavy now, found while we stood
        by, is acted on at once, as if just detected (it is steered, or a suspect counted)
        rather than after a detection window of its own."""
        now = time.monotonic()
        for watch in list(self.watches.values()):
            self._apply(watch, watch.held(now), now)

    def stand_by(self) -> None:
        """Stepping down: what we steered stays steered for our successor, which adopts it from
        the store (no release is recorded or remembered), and our suspects are dropped (the
        successor's reconcile takes their counting flows away). Detection goes on."""
        for flow in self.book.hand_over():
            self.switches.unsteer(flow)  # from what we would write: nothing is, as a standby
        book = self.counting
        if book is not None:
            for (dpid, key), suspect in list(book.suspects.items()):
                book.forget(dpid, key)
                if suspect.port in self.watches:  # suspected again, and acted on, if we lead again
                    self.watches[suspect.port].detector.forget(key)
            book.steered.clear()

    def counted_on(self, dpid: int) -> list:
        """The suspects counted on switch dpid (their counting flows go back in on a reconnect)."""
        return [key for d, key in (self.counting.suspects if self.counting else ()) if d == dpid]

    def _carry_out(self, decisions) -> None:
        """The book's decisions to the log and the switches."""
        for d in decisions:
            r = d.record
            if self.counting is not None:  # the steering flow's counter takes over from here
                if r["decision"] == "steered":
                    self.counting.steering(r["dpid"], d.flow, (r["dpid"], r["port"]), r["monotonic_s"])
                else:
                    self.counting.unsteered(r["dpid"], d.flow)
            self.remember(r["flow"], r["dpid"], r["port"], r if r["decision"] == "steered" else None)
            if r["decision"] == "steered":
                self.logger.info("heavy hitter steered: %s at %s:%s, %.1f Mbit/s over %.1f (%s)", r["flow"],
                                     r["dpid"], r["port"], r["estimate_bps"] / 1e6,
                                     (r["threshold_bps"] or 0) / 1e6, r["reason"])
            else:
                self.logger.info("heavy hitter released: %s at %s:%s, %.1f Mbit/s (%s)", r["flow"],
                                     r["dpid"], r["port"], r["estimate_bps"] / 1e6, r["reason"])
            if d.action == "steer":
                self.switches.steer(d.flow)
            elif d.action == "unsteer":
                self.switches.unsteer(d.flow)

    # --- what REST shows ------------------------------------------------------------------

    def _waiting(self) -> list[dict]:
        """The bottleneck ports detection is enabled for but cannot watch yet, and what for:
        a policy (or policy file) may enable it before the switches connect."""
        if not (self.settings and self.settings.enabled) or self.error:
            return []
        waiting = []
        for p in self.ports:
            if (p.dpid, p.port) in self.watches:
                continue
            if not self.view.is_connected(p.dpid):
                what = f"switch {p.dpid:#x} to connect"
            else:
                what = f"port {p.port} on switch {p.dpid:#x}"
            waiting.append({"dpid": p.dpid, "port": p.port, "for": what})
        return waiting

    def _counting_report(self, now: float) -> dict | None:
        c = self.counting
        if c is None:
            return None
        return {"max_per_switch": c.max_per_switch,
                "suspects": [{"flow": flow_dict(key), "dpid": dpid, "port": s.port[1],
                              "for_s": round(now - s.since, 3), "estimate_bps": round(s.estimate_bps),
                              "counted_bps": None if s.counter.rate_bps() is None else round(s.counter.rate_bps())}
                             for (dpid, key), s in c.suspects.items()],
                "confirmed": c.confirmed_total, "dropped": c.dropped_total,
                "displaced": c.evicted_total, "waited": c.waited_total}

    def report(self) -> dict:
        now = time.monotonic()
        settings = self.settings
        return {
            "enabled": bool(settings and settings.enabled),
            "acting": self.leading(),
            "source": settings.source if settings else None,
            "detector": settings.detector if settings else None,
            "error": self.error,
            "ports": [w.report(now, self.sampling.get(w.dpid, 0), settings.sampling is None)
                      for w in self.watches.values()],
            "waiting": self._waiting(),
            "current": self.book.current(self.watches, now,
                                         self.counting.counted_bps if self.counting is not None else None),
            "counting": self._counting_report(now),
            "detected": [{"flow": flow_dict(ev.key), "dpid": dpid, "port": port, "estimate_bps": round(ev.estimate_bps)}
                         for (dpid, port), watch in self.watches.items() for ev in watch.held(now)],
            "log": self.book.recent(),
            "collector": self.collector.stats() if self.listener else None,
        }
