"""Which flows go into the penalized aggregate, and why: detectors per port and the steering book.

Pure: time is handed in (``now``: seconds on a monotonic clock, what the detectors count
with; ``wall_s``: the wall clock the records show), no I/O. ryu_app/heavy_hitters.py feeds
samples and sFlow-RT rates in and turns the decisions into flow-mods (docs/sflow.md, "In
the controller").

- detector_config(), mode_detector(): the detectors' parameters from the policy's
  heavy_hitters section and a port's capacity.
- PortWatch: the detectors of one bottleneck port, fed only with what leaves by that port.
- SteeringBook: which flows are steered on which port, since when, with which estimate;
  a detection steers, a release frees, and every decision is kept as a record for
  GET /coex/v1/heavy-hitters.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass
from typing import Hashable, Optional

from coex.heavy_hitters import (MODE_OF_HISTORY, HeavyHitterConfig, HeavyHitterDetector, HeavyHitterEvent,
                                ModeHeavyHitterDetector)
from coex.policy import HeavyHitters

LOG_LEN = 500  # decisions kept
REPORT_LOG_LEN = 100  # of which GET /heavy-hitters shows the latest
# Upper bounds (s) of the detection-latency histogram GET /metrics exports: sub-second to a
# few windows (docs/sflow.md measured p95 0.7-1.5 s in the lab).
LATENCY_BUCKETS_S = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
TOP_FLOWS = 5  # per port, in GET /heavy-hitters
MTU_FRAME_BYTES = 1514
# Below this many samples per second at the threshold, a flow at 2x the threshold is
# rarely detected within a second without false positives (docs/sflow.md, "How fast
# detection can be").
FEW_SAMPLES_PER_S = 10.0

# When the policy leaves `sampling` out, each bridge samples 1 in N with N the largest power of
# two that gives a flow at the threshold SUSPECT_SAMPLES_PER_S samples a second (20 within the
# half second a steer should take), but no fewer samples than keep the port's full capacity
# within MAX_PORT_SAMPLES_PER_S (the collector's budget: bench/bench_sflow_decode.py measures
# ~2.5 * 10^5 samples/s on one core, so 2000/s per port is under 1 %). Rule: docs/sflow.md.
SUSPECT_SAMPLES_PER_S = 40.0
MAX_PORT_SAMPLES_PER_S = 2000.0
# Confirming by counting, a wrong suspect costs a counting flow for a second, not a wrong steer,
# so suspects are made on little evidence: a young flow's sFlow estimate is taken over at least
# SUSPECT_MIN_WINDOW_S (the policy's min_window_s, 1 s by default, if shorter) and from
# SUSPECT_MIN_SAMPLES samples on (min_samples, 4, otherwise). A flow at 2x the threshold is
# then a suspect after ~1/40 s of data, or its second sample at coarse sampling
# (docs/sflow.md, "Confirmation by counting").
SUSPECT_MIN_WINDOW_S = 0.1
SUSPECT_MIN_SAMPLES = 2
# fair_share_multiple's threshold falls as flows join: sampling is chosen for this many.
SAMPLING_FAIR_SHARE_FLOWS = 8

# The policy's fields that are HeavyHitterConfig's under the same names and meaning.
_RATE_DETECTOR_FIELDS = ("threshold_bps", "capacity_share", "fair_share_multiple", "window_s",
                         "min_window_s", "release_fraction", "min_hold_s")


def detector_config(hh: HeavyHitters, capacity_bps: float, scale: float = 1.0) -> HeavyHitterConfig:
    """The rate detector's parameters on a port of ``capacity_bps``. The capacity is passed
    only to the rules that are a share of it: an absolute threshold is the same on any port.
    ``scale`` multiplies the threshold rule (a suspect's bar: suspect_fraction)."""
    fields = {name: getattr(hh, name) for name in _RATE_DETECTOR_FIELDS}
    for rule in ("threshold_bps", "capacity_share", "fair_share_multiple"):
        if fields[rule] is not None:
            fields[rule] *= scale
    return HeavyHitterConfig(capacity_bps=None if hh.threshold_bps is not None else capacity_bps, **fields)


def rate_detector_config(hh: HeavyHitters, capacity_bps: float) -> HeavyHitterConfig:
    """The rate detector a PortWatch runs: the policy's, or, confirming by counting, the
    suspects' (its bar at suspect_fraction of the threshold, SUSPECT_MIN_WINDOW_S and
    SUSPECT_MIN_SAMPLES: a wrong suspect costs a counting flow for a second, not a wrong steer)."""
    if not confirms_by_counting(hh):
        return detector_config(hh, capacity_bps)
    config = detector_config(hh, capacity_bps, hh.suspect_fraction)
    return dataclasses.replace(config, min_window_s=min(config.min_window_s, SUSPECT_MIN_WINDOW_S),
                               min_samples=min(config.min_samples, SUSPECT_MIN_SAMPLES))


def confirms_by_counting(hh: HeavyHitters) -> bool:
    """Suspects confirmed by a switch counter (coex/counting.py): the rate detector's
    decisions only; the mode detector's are about the mode of the samples, not a rate."""
    return hh.counting and hh.detector == "rate"


def mode_detector(hh: HeavyHitters, rate_of=None) -> ModeHeavyHitterDetector:
    """Seed 003's mode of history with the policy's rec_int, hist_len and stat_int. It has no
    window of its own: a connection is idle after the rate detector's window (window_s) without
    a sample, and a mode holds its place min_hold_s, as a rate heavy hitter does."""
    return ModeHeavyHitterDetector(hh.rec_int, hh.hist_len, hh.stat_int, idle_s=hh.window_s,
                                   min_hold_s=hh.min_hold_s, rate_of=rate_of)


def threshold_samples_per_s(threshold_bps: float, sampling: int) -> float:
    """Samples per second a flow of MTU frames at the threshold gives at 1-in-`sampling`."""
    return threshold_bps / (8 * MTU_FRAME_BYTES * sampling)


def sampling_threshold_bps(hh: HeavyHitters, capacity_bps: float) -> float | None:
    """The threshold the chosen sampling must serve on a port (None: the mode detector, which
    has none and only wants samples)."""
    if hh.detector == "mode":
        return None
    if hh.threshold_bps is not None:
        return float(hh.threshold_bps)
    if hh.capacity_share is not None:
        return hh.capacity_share * capacity_bps
    return hh.fair_share_multiple * capacity_bps / SAMPLING_FAIR_SHARE_FLOWS


def chosen_sampling(threshold_bps: float | None, capacity_bps: float) -> int:
    """1-in-N for one port: the largest power of two giving SUSPECT_SAMPLES_PER_S at the
    threshold, raised (to a power of two) if the full capacity would give more than
    MAX_PORT_SAMPLES_PER_S; without a threshold, the budget alone decides."""
    floor_n = max(1, math.ceil(capacity_bps / (8 * MTU_FRAME_BYTES * MAX_PORT_SAMPLES_PER_S)))
    floor_n = 1 << (floor_n - 1).bit_length()
    if threshold_bps is None:
        return floor_n
    n = max(1, int(threshold_bps / (8 * MTU_FRAME_BYTES * SUSPECT_SAMPLES_PER_S)))
    n = 1 << (n.bit_length() - 1)
    return max(n, floor_n)


def bridge_sampling(hh: HeavyHitters, ports) -> dict[int, int]:
    """dpid -> 1-in-N for each bridge with a bottleneck port: the policy's `sampling`, or
    the smallest N its ports choose (OVS samples a whole bridge at one rate)."""
    out: dict[int, int] = {}
    for p in ports:
        n = hh.sampling if hh.sampling is not None else \
            chosen_sampling(sampling_threshold_bps(hh, p.capacity_bps), p.capacity_bps)
        out[p.dpid] = min(out.get(p.dpid, n), n)
    return out


def sampling_targets(policy, dpid: int, collectors) -> list[str]:
    """Where switch dpid's sFlow agent sends: its switch host's own `collector` when the policy
    gives one (the address it reaches us by); with the embedded collector, every live instance's
    (`collectors`, so that every instance detects: docs/ha.md), or the policy's `collector`
    while none is known; else sFlow-RT's sFlow port, the policy's `collector`."""
    host = policy.switch_host(dpid)
    if host is not None and host.collector:
        return [host.collector]
    hh = policy.heavy_hitters
    if hh.source == "embedded" and collectors:
        return sorted(set(collectors))
    return [hh.collector]


def flow_dict(key) -> dict:
    """A flow key as GET /heavy-hitters shows it."""
    return {"src_ip": key.src_ip, "dst_ip": key.dst_ip, "protocol": key.protocol,
            "src_port": key.src_port, "dst_port": key.dst_port}


class PortWatch:
    """The detectors of one bottleneck port.

    Only what leaves by the port counts (a sample's output interface, an sFlow-RT flow's
    outputifindex): OVS samples whole bridges, and a flow crossing two bridges must not
    count twice. ``ifindex`` None (not known) takes everything. With detector "mode" the
    decisions are the mode detector's; the rate detector still runs, for the estimates
    the log and GET /heavy-hitters show.
    """

    def __init__(self, dpid: int, port: int, name: str, ifindex: Optional[int], capacity_bps: float,
                 hh: HeavyHitters):
        self.dpid, self.port, self.name, self.ifindex = dpid, port, name, ifindex
        # Confirming by counting, the detector's bar is the suspects' (suspect_fraction of the
        # threshold); the threshold the counter must reach stays the policy's.
        self.suspects_only = confirms_by_counting(hh)
        self.suspect_fraction = hh.suspect_fraction if self.suspects_only else 1.0
        self.release_fraction = hh.release_fraction
        self.detector = HeavyHitterDetector(rate_detector_config(hh, capacity_bps))
        self.mode = mode_detector(hh, self.detector.estimate_bps) if hh.detector == "mode" else None

    @property
    def key(self) -> tuple[int, int]:
        return self.dpid, self.port

    def leaves_by(self, output_ifindex) -> bool:
        return self.ifindex is None or output_ifindex == self.ifindex

    def observe_sample(self, sample, now: float, since: Optional[float] = None) -> list:
        """A decoded flow sample; ``since`` as HeavyHitterDetector.observe takes it. Making
        suspects, it is not used: it is the agent's previous datagram, which on a quiet bridge
        is up to a second back, and a flow that starts there would be divided by that second
        (measured: 0-0.25 s more to a suspect at 1-in-16); its first datagram's samples are
        then left out instead, a few milliseconds of samples at the rates that matter."""
        if not self.leaves_by(sample.output_if):
            return []
        events = self.detector.observe_sample(sample, now, None if self.suspects_only else since)
        return events if self.mode is None else self.mode.observe_sample(sample, now)

    def observe_active_flows(self, active, now: float) -> list:
        """One sFlow-RT answer (coex.sflowrt.ActiveFlows of the PORT_KEYS flow). Its flows
        are matched by their `outputifindex` key, never by `dataSource`: for OVS that is
        the bridge (type 2, index 1000 in our captures), not a port."""
        events = []
        for f in active.flows:
            if f.flow_key is not None and f.rate_bps is not None and self.leaves_by(f.output_ifindex):
                events += self.detector.observe_rate(f.flow_key, f.rate_bps, now)
        return events

    def tick(self, now: float) -> list:
        events = self.detector.tick(now)
        return events if self.mode is None else self.mode.tick(now)

    def held(self, now: float) -> list[HeavyHitterEvent]:
        """A "detected" event for each flow the deciding detector holds heavy now, as if it had
        just detected it: what a standby's detectors found, for it to act on as it takes over."""
        if self.mode is not None:
            return [HeavyHitterEvent("detected", now, key, self.detector.estimate_bps(key, now), 0.0,
                                     "detected while standing by", MODE_OF_HISTORY)
                    for key in self.mode.heavy_hitters()]
        return [HeavyHitterEvent("detected", now, key, self.detector.estimate_bps(key, now),
                                 self.detector.high_threshold_bps(), "detected while standing by",
                                 self.detector.config.mode, first_seen_s=since)
                for key, since in self.detector.heavy_hitters().items()]

    def high_threshold_bps(self) -> float:
        """The policy's threshold (the detector's bar divided by suspect_fraction)."""
        return self.detector.high_threshold_bps() / self.suspect_fraction

    def low_threshold_bps(self) -> float:
        return self.high_threshold_bps() * self.release_fraction

    def detects_slowly(self, sampling: int) -> bool:
        """True when a flow at the rate threshold gives fewer than FEW_SAMPLES_PER_S samples
        per second (the mode detector has no rate threshold: never)."""
        return self.mode is None and \
            threshold_samples_per_s(self.high_threshold_bps(), sampling) < FEW_SAMPLES_PER_S

    def report(self, now: float, sampling: int, chosen: bool) -> dict:
        out = {"dpid": self.dpid, "port": self.port, "name": self.name, "ifindex": self.ifindex,
               "detector": "rate" if self.mode is None else "mode",
               "sampling": sampling, "sampling_chosen": chosen,
               "threshold_bps": round(self.high_threshold_bps()),
               "threshold_samples_per_s": round(threshold_samples_per_s(self.high_threshold_bps(), sampling), 1),
               "active_flows": self.detector.active_flows(),
               "top": [{"flow": flow_dict(k), "estimate_bps": round(v)}
                       for k, v in self.detector.top(now, TOP_FLOWS)]}
        if self.mode is not None:
            out["mode"] = self._mode_report()
        return out

    def _mode_report(self) -> dict:
        last = self.mode.estimator.last_decision
        return {"flow": flow_dict(self.mode.current) if self.mode.current is not None else None,
                "since_monotonic_s": self.mode.since,
                "samples": self.mode.estimator.samples_seen,
                "last_decision": None if last is None else {
                    "flow": flow_dict(last.key) if last.key is not None else None,
                    "count": last.count, "records": last.records}}


@dataclass(frozen=True)
class Decision:
    """One decision of the book: its record and what it asks of the switches."""
    flow: Hashable
    record: dict            # as GET /heavy-hitters shows it in "log"
    action: Optional[str]   # "steer", "unsteer", or None: released on one port, still steered on another


class SteeringBook:
    """Which flows are steered, on which port, since when and with which estimate.

    A flow is steered per (flow, port): a "detected" event of a port steers the flow there
    unless it already is; a "released" event frees it there if it is steered there; other
    events change nothing. The switches unsteer a flow only when no port steers it any more.
    The hysteresis (when a detector releases) is the detector's; the book only follows it.
    """

    def __init__(self, log_len: int = LOG_LEN):
        self.log: deque = deque(maxlen=log_len)
        self._steered: dict[tuple, dict] = {}  # (flow, (dpid, port)) -> the record that steered it
        # Since the book was made, for GET /metrics (the log keeps only the latest log_len):
        self.steered_total = 0
        self.released_total: dict[str, int] = {}  # release reason -> count
        # detection latency (steered records that know it): counts per LATENCY_BUCKETS_S bound
        # (not cumulative; the last slot is above every bound), their sum and count
        self.latency_counts = [0] * (len(LATENCY_BUCKETS_S) + 1)
        self.latency_sum_s = 0.0
        self.latency_n = 0

    def apply(self, port: tuple[int, int], events, now: float, wall_s: float) -> list[Decision]:
        """A port's detector events, in order, into decisions."""
        decisions = []
        for ev in events:
            key = (ev.key, port)
            if ev.kind == "detected" and key not in self._steered:
                decisions.append(self._steer(key, ev, now, wall_s))
            elif ev.kind != "detected" and key in self._steered:
                decisions.append(self._release(key, ev.estimate_bps, ev.threshold_bps or None, ev.reason,
                                               now, wall_s))
        return decisions

    def adopt(self, flow, port: tuple[int, int], record: dict, now: float) -> None:
        """A steering the previous leader made (its record, from the shared store) is in force
        here as if this book had made it. Its monotonic time was the other process's clock:
        here it counts from now."""
        self._steered[(flow, port)] = dict(record, monotonic_s=now)

    def hand_over(self) -> set:
        """Forget every steering without releasing it (no record, no count): a leader stepping
        down leaves them in force for its successor, which adopts them. Returns their flows."""
        flows = self.steered()
        self._steered.clear()
        return flows

    def release_all(self, reason: str, now: float, wall_s: float) -> list[Decision]:
        """Free every steered flow (detection stops), with their steering estimates."""
        return [self._release(key, record["estimate_bps"], None, reason, now, wall_s)
                for key, record in list(self._steered.items())]

    def steered_count(self) -> int:
        """Steerings in force now, per (flow, port)."""
        return len(self._steered)

    def steered(self) -> set:
        """The flows steered on at least one port."""
        return {flow for flow, _ in self._steered}

    def is_steered(self, flow, port: tuple[int, int]) -> bool:
        return (flow, port) in self._steered

    def current(self, watches: dict, now: float, counted=None) -> list[dict]:
        """GET /heavy-hitters "current": the steered flows, oldest first, with their estimate
        at detection and now (from their port's watch, if it still runs) and, confirming by
        counting, the rate their steering flow counts (`counted(dpid, flow)`, None if not yet)."""
        out = []
        for (flow, (dpid, port)), record in sorted(self._steered.items(), key=lambda kv: kv[1]["time"]):
            watch = watches.get((dpid, port))
            entry = {"flow": flow_dict(flow), "dpid": dpid, "port": port,
                     "since": record["time"], "detected_estimate_bps": record["estimate_bps"],
                     "estimate_bps": round(watch.detector.estimate_bps(flow, now)) if watch else None}
            if counted is not None:
                rate = counted(dpid, flow)
                entry["counted_bps"] = None if rate is None else round(rate)
            out.append(entry)
        return out

    def recent(self, n: int = REPORT_LOG_LEN) -> list[dict]:
        return list(self.log)[-n:]

    def _steer(self, key, ev, now: float, wall_s: float) -> Decision:
        threshold = round(ev.threshold_bps) if ev.threshold_bps else None  # the mode detector has none
        record = self._record("steered", key, ev.estimate_bps, threshold, ev.reason, now, wall_s)
        self._steered[key] = record
        self.steered_total += 1
        if ev.first_seen_s is not None:
            latency = max(0.0, ev.time_s - ev.first_seen_s)
            record["detection_latency_s"] = round(latency, 3)
            self.latency_counts[sum(1 for b in LATENCY_BUCKETS_S if latency > b)] += 1
            self.latency_sum_s += latency
            self.latency_n += 1
        return Decision(key[0], record, "steer")

    def _release(self, key, estimate_bps, threshold_bps, reason, now: float, wall_s: float) -> Decision:
        steered = self._steered.pop(key)
        record = self._record("released", key, estimate_bps, threshold_bps, reason, now, wall_s)
        record["steered_for_s"] = round(now - steered["monotonic_s"], 3)
        self.released_total[reason] = self.released_total.get(reason, 0) + 1
        flow = key[0]
        return Decision(flow, record, None if flow in self.steered() else "unsteer")

    def _record(self, what, key, estimate_bps, threshold_bps, reason, now: float, wall_s: float) -> dict:
        flow, (dpid, port) = key
        record = {"time": wall_s, "monotonic_s": now, "decision": what, "flow": flow_dict(flow),
                  "dpid": dpid, "port": port, "estimate_bps": round(estimate_bps),
                  "threshold_bps": threshold_bps, "reason": reason}
        self.log.append(record)
        return record
