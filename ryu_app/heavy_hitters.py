"""Heavy hitters: sFlow samples in, steering decisions out (docs/sflow.md).

One detector per bottleneck port (policy `ports`), fed only by samples whose
output interface is that port: OVS samples whole bridges, and a flow crossing two
bridges must not count twice. A detected flow is handed to the controller's
steer(); a released one to unsteer(). Every decision is kept, with its time and
the estimate that caused it, for GET /coex/v1/heavy-hitters.

Detectors (policy `detector`): "rate", the windowed rate estimate against a threshold
(HeavyHitterDetector); "mode", seed 003's mode of the sample history
(ModeHeavyHitterDetector: the port's most packet-consuming connection, one at a time).

Sources: the embedded collector (OVS's agent sends datagrams to us) or sFlow-RT's
REST API, polled once a second, for operators who run it. Either way the OVS agent on
the bottleneck bridges sends to `collector`: our listener, or sFlow-RT's sFlow port.
"""

from __future__ import annotations

import collections
import ipaddress
import time
import urllib.parse

from ryu.lib import hub

from coex.heavy_hitters import HeavyHitterConfig, HeavyHitterDetector, ModeHeavyHitterDetector
from coex.policy import HeavyHitters
from coex.sflow_collector import SFlowCollector
from coex.sflowrt import PORT_KEYS
from ovs_config import sflow
from ryu_app.sflow_listener import SFlowListener

TICK_S = 0.5
LOG_LEN = 500
MTU_FRAME_BYTES = 1514
# Below this many samples per second at the threshold, a flow at 2x the threshold is
# rarely detected within a second without false positives (docs/sflow.md, "How fast
# detection can be").
FEW_SAMPLES_PER_S = 10.0


def threshold_samples_per_s(threshold_bps: float, sampling: int) -> float:
    """Samples per second a flow of MTU frames at the threshold gives at 1-in-`sampling`."""
    return threshold_bps / (8 * MTU_FRAME_BYTES * sampling)


def ifindex(port_name: str) -> int | None:
    try:
        with open(f"/sys/class/net/{port_name}/ifindex") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def flow_dict(key) -> dict:
    return {"src_ip": key.src_ip, "dst_ip": key.dst_ip, "protocol": key.protocol,
            "src_port": key.src_port, "dst_port": key.dst_port}


class PortWatch:
    """The detectors of one bottleneck port."""

    def __init__(self, dpid: int, port: int, name: str, capacity_bps: int, hh: HeavyHitters):
        self.dpid, self.port, self.name = dpid, port, name
        self.ifindex = ifindex(name)
        self.detector = HeavyHitterDetector(HeavyHitterConfig(
            threshold_bps=hh.threshold_bps, capacity_share=hh.capacity_share,
            fair_share_multiple=hh.fair_share_multiple,
            capacity_bps=None if hh.threshold_bps is not None else capacity_bps,
            window_s=hh.window_s, min_window_s=hh.min_window_s, release_fraction=hh.release_fraction, min_hold_s=hh.min_hold_s))
        # With detector "mode" the decisions are the mode detector's; the rate detector
        # still runs, for the estimates the log and GET /heavy-hitters show.
        self.mode = (ModeHeavyHitterDetector(hh.rec_int, hh.hist_len, hh.stat_int, idle_s=hh.window_s,
                                             min_hold_s=hh.min_hold_s, rate_of=self.detector.estimate_bps)
                     if hh.detector == "mode" else None)

    def observe_sample(self, sample, now: float, since=None) -> list:
        events = self.detector.observe_sample(sample, now, since)
        return events if self.mode is None else self.mode.observe_sample(sample, now)

    def observe_rate(self, key, rate_bps: float, now: float) -> list:
        return self.detector.observe_rate(key, rate_bps, now)

    def tick(self, now: float) -> list:
        events = self.detector.tick(now)
        return events if self.mode is None else self.mode.tick(now)

    def report(self, now: float, sampling: int) -> dict:
        out = {"dpid": self.dpid, "port": self.port, "name": self.name, "ifindex": self.ifindex,
               "detector": "rate" if self.mode is None else "mode",
               "threshold_bps": round(self.detector.high_threshold_bps()),
               "threshold_samples_per_s": round(threshold_samples_per_s(
                   self.detector.high_threshold_bps(), sampling), 1),
               "active_flows": self.detector.active_flows(),
               "top": [{"flow": flow_dict(k), "estimate_bps": round(v)}
                       for k, v in self.detector.top(now, 5)]}
        if self.mode is not None:
            last = self.mode.estimator.last_decision
            out["mode"] = {"flow": flow_dict(self.mode.current) if self.mode.current is not None else None,
                           "since_monotonic_s": self.mode.since,
                           "samples": self.mode.estimator.samples_seen,
                           "last_decision": None if last is None else {
                               "flow": flow_dict(last.key) if last.key is not None else None,
                               "count": last.count, "records": last.records}}
        return out


class HeavyHitterService:
    def __init__(self, app):
        self.app = app  # the CoexController: steer(), unsteer(), port_names, policy, logger
        self.settings: HeavyHitters | None = None
        self.watches: dict[tuple[int, int], PortWatch] = {}
        self.collector = SFlowCollector()
        self.collector.subscribe_flow_samples(self._on_sample)
        self.listener: SFlowListener | None = None
        self.log = collections.deque(maxlen=LOG_LEN)
        self.current: dict[tuple, dict] = {}  # (flow key, port) -> decision that steered it
        self.error: str | None = None  # why detection does not run although enabled
        self._threads = []
        self._generation = 0

    # --- configuration ------------------------------------------------------------

    def configure(self, hh: HeavyHitters, ports) -> None:
        """(Re)start detection for the policy's settings and bottleneck ports."""
        self.stop()
        self.settings = hh
        self.error = None
        if not hh.enabled:
            return
        if hh.source == "sflow-rt" and hh.detector == "mode":
            # sFlow-RT hands us rates per flow, not the packet samples the mode of history
            # counts (docs/sflow.md): refuse rather than steer by another rule.
            self.error = ("detector 'mode' needs the packet samples of the embedded collector; "
                          "source 'sflow-rt' gives flow rates only: detection is off")
            self.app.logger.error("heavy hitters: %s", self.error)
            return
        if hh.source == "sflow-rt":
            self._check_sflow_rt_addresses(hh)
        for p in ports:
            name = self.app.port_names.get((p.dpid, p.port))
            if name is not None:
                watch = self.watches[(p.dpid, p.port)] = PortWatch(p.dpid, p.port, name, p.capacity_bps, hh)
                rate = threshold_samples_per_s(watch.detector.high_threshold_bps(), hh.sampling)
                if watch.mode is None and rate < FEW_SAMPLES_PER_S:
                    self.app.logger.warning(
                        "heavy hitters on %s: a flow at the %.1f Mbit/s threshold gives %.1f samples/s at "
                        "1-in-%d; detection will often take more than a second (docs/sflow.md): sample "
                        "more often or raise the threshold", name, watch.detector.high_threshold_bps() / 1e6,
                        rate, hh.sampling)
        self._generation += 1
        gen = self._generation
        if hh.source == "embedded":
            host, _, port = hh.collector.rpartition(":")
            self.listener = SFlowListener(self.collector, host=host, port=int(port), poll_timeout_s=0.5)
            try:
                self.listener.open()
            except OSError as err:
                self.app.logger.error("sFlow collector cannot listen on %s: %s", hh.collector, err)
                self.listener = None
            else:
                self._threads.append(hub.spawn(self._serve, gen))
        else:
            self._threads.append(hub.spawn(self._poll_sflow_rt, gen))
        self._threads.append(hub.spawn(self._tick_loop, gen))

    def _check_sflow_rt_addresses(self, hh: HeavyHitters) -> None:
        """sFlow-RT: the controller points the OVS agents at `collector`, which must be
        sFlow-RT's sFlow address (UDP 6343 by default), not its REST API's (8008)."""
        try:
            target = sflow.validate_target(hh.collector)
        except ValueError as err:
            self.app.logger.error("heavy hitters: collector %s: %s", hh.collector, err)
            return
        url_host = urllib.parse.urlsplit(hh.sflow_rt_url).hostname or ""
        try:
            if ipaddress.ip_address(url_host) != ipaddress.ip_address(target.rpartition(":")[0].strip("[]")):
                self.app.logger.warning(
                    "heavy hitters: OVS sends sFlow to %s but sFlow-RT's REST API is at %s: set "
                    "`collector` to sFlow-RT's sFlow address (port 6343 by default)", target, hh.sflow_rt_url)
        except ValueError:
            pass  # a host name in the URL: nothing to compare without a lookup

    def stop(self) -> None:
        self._generation += 1  # loops of an older generation end by themselves
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        for key, decision in list(self.current.items()):
            self._release(key, decision["estimate_bps"], "detection stopped", time.monotonic())
        self.watches.clear()
        self._threads.clear()

    # --- loops ----------------------------------------------------------------------------

    def _serve(self, gen):
        while gen == self._generation and self.listener is not None:
            self.listener.receive_once()

    def _tick_loop(self, gen):
        while gen == self._generation:
            now = time.monotonic()
            for watch in list(self.watches.values()):
                self._handle(watch, watch.tick(now), now)
            hub.sleep(TICK_S)

    def _poll_sflow_rt(self, gen):
        from ryu_app.sflowrt_client import SFlowRTClient, SFlowRTError
        client = SFlowRTClient(self.settings.sflow_rt_url)
        defined = False
        while gen == self._generation:
            try:
                if not defined:
                    client.define_flow(keys=PORT_KEYS)
                    defined = True
                self.ingest_active_flows(client.active_flows(), time.monotonic())
            except (SFlowRTError, OSError, ValueError) as err:
                self.app.logger.warning("sFlow-RT at %s: %s", self.settings.sflow_rt_url, err)
                defined = False
            hub.sleep(1.0)

    def ingest_active_flows(self, active, now: float) -> None:
        """One sFlow-RT answer (coex.sflowrt.ActiveFlows of the PORT_KEYS flow) into the
        detectors: each flow goes to the port its `outputifindex` key names. Its
        `dataSource` is not used: for OVS it is the bridge (type 2, index 1000 in our
        captures), never a port."""
        for watch in list(self.watches.values()):
            for f in active.flows:
                if f.flow_key is None or f.rate_bps is None:
                    continue
                if watch.ifindex is not None and f.output_ifindex != watch.ifindex:
                    continue
                self._handle(watch, watch.observe_rate(f.flow_key, f.rate_bps, now), now)

    # --- samples and decisions ------------------------------------------------------

    def _on_sample(self, sample, datagram, now: float) -> None:
        since = self.collector.collection_start(datagram)  # when the agent began this datagram
        for watch in self.watches.values():
            if watch.ifindex is not None and sample.output_if != watch.ifindex:
                continue
            self._handle(watch, watch.observe_sample(sample, now, since), now)

    def _handle(self, watch: PortWatch, events, now: float) -> None:
        for ev in events:
            key = (ev.key, (watch.dpid, watch.port))
            if ev.kind == "detected":
                if key not in self.current:
                    decision = self._record("steered", ev.key, watch, ev.estimate_bps, ev.threshold_bps,
                                            ev.reason, now)
                    self.current[key] = decision
                    self.app.steer(ev.key)
            elif key in self.current:
                self._release(key, ev.estimate_bps, ev.reason, now, ev.threshold_bps or None)

    def _release(self, key, estimate_bps, reason, now, threshold_bps=None) -> None:
        decision = self.current.pop(key)
        flow, (dpid, port) = key
        self.log.append({"time": time.time(), "monotonic_s": now, "decision": "released",
                         "flow": flow_dict(flow), "dpid": dpid, "port": port,
                         "estimate_bps": round(estimate_bps), "threshold_bps": threshold_bps,
                         "reason": reason, "steered_for_s": round(now - decision["monotonic_s"], 3)})
        self.app.logger.info("heavy hitter released: %s at %s:%s, %.1f Mbit/s (%s)",
                             flow_dict(flow), dpid, port, estimate_bps / 1e6, reason)
        if not any(k[0] == flow for k in self.current):
            self.app.unsteer(flow)

    def _record(self, what, flow, watch, estimate_bps, threshold_bps, reason, now) -> dict:
        entry = {"time": time.time(), "monotonic_s": now, "decision": what, "flow": flow_dict(flow),
                 "dpid": watch.dpid, "port": watch.port, "estimate_bps": round(estimate_bps),
                 "threshold_bps": round(threshold_bps) if threshold_bps else None, "reason": reason}
        self.log.append(entry)
        self.app.logger.info("heavy hitter %s: %s at %s:%s, %.1f Mbit/s over %.1f (%s)", what,
                             entry["flow"], watch.dpid, watch.port, estimate_bps / 1e6,
                             (threshold_bps or 0) / 1e6, reason)
        return entry

    # --- what REST shows ------------------------------------------------------------------

    def report(self) -> dict:
        now = time.monotonic()
        current = []
        for (flow, (dpid, port)), decision in sorted(self.current.items(), key=lambda kv: kv[1]["time"]):
            watch = self.watches.get((dpid, port))
            current.append({"flow": flow_dict(flow), "dpid": dpid, "port": port,
                            "since": decision["time"], "detected_estimate_bps": decision["estimate_bps"],
                            "estimate_bps": round(watch.detector.estimate_bps(flow, now)) if watch else None})
        return {
            "enabled": bool(self.settings and self.settings.enabled),
            "source": self.settings.source if self.settings else None,
            "detector": self.settings.detector if self.settings else None,
            "error": self.error,
            "ports": [w.report(now, self.settings.sampling) for w in self.watches.values()],
            "current": current,
            "log": list(self.log)[-100:],
            "collector": self.collector.stats() if self.listener else None,
        }
