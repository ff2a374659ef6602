"""Heavy-hitter detection from sFlow samples. Pure: time is passed in, no I/O, no clock.

Two detectors (docs/sflow.md has the parameters, units and every interpretation):

HeavyHitterDetector
    A per-flow rate estimate from packet samples scaled by the sampling rate over a
    sliding window,

        estimate_bps = 8 * sum(frame_length * sampling_rate over the samples in the window)
                       / clamp(age, min_window_s, window_s)

    where age is the time since the flow's first sample. A flow younger than the window
    is not diluted by the window it has not lived through, and its first sample is left
    out of the sum (it only marks where the measurement starts: n samples over the time
    since the first one are n - 1 intervals, which removes the upward bias that otherwise
    makes young mice look heavy). The agent batches samples into datagrams, so the
    others that arrive with the first one were taken before it arrived: when the caller
    knows when that batch began to be collected (``since``: the agent's previous
    datagram), the flow's age counts from there and they count; when it does not, they
    are left out with the first one; a flow younger than min_window_s is divided by
    min_window_s, which makes the first estimates conservative. A flow is a heavy hitter when its estimate reaches the high threshold
    (with at least min_samples samples in the window) and stops being one when the
    estimate falls below the low threshold = release_fraction * high, but not before it
    has been one for min_hold_s. The high threshold is one of
      - threshold_bps                          an absolute rate,
      - capacity_share * capacity_bps          a share of the port capacity,
      - fair_share_multiple * capacity_bps / active_flows
                                               a multiple of the fair share.
    Rates reported by an external analyser (sFlow-RT) enter through observe_rate().

ModeOfHistoryEstimator / ModeHeavyHitterDetector
    The dynamic method of Hanai, Yamaguchi, Kobayashi, "Modified Controlling Queue Delay
    for TCP Fairness Improvement" (seed 003, Sec. IV-A): record the connection of every
    rec_int-th packet, keep the latest hist_len records, and every stat_int packets take
    the most frequent connection in the records as the most bandwidth-consuming one.
    Here a "packet" is one sFlow flow sample: rec_int and stat_int count samples, so with
    1-in-N sampling one record stands for about N * rec_int packets of the switch.
    ModeHeavyHitterDetector turns its decisions into the same events as
    HeavyHitterDetector: the current mode is the one heavy hitter of its port (no rate
    threshold), replaced when another connection becomes the mode, released when its
    connection goes quiet.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Hashable, Optional

MODES = ("absolute", "capacity_share", "fair_share")


def _positive(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class HeavyHitterConfig:
    """Parameters of HeavyHitterDetector, checked once here.

    Exactly one of threshold_bps, capacity_share, fair_share_multiple sets the high
    threshold; the last two need capacity_bps.
    """
    threshold_bps: Optional[float] = None      # absolute high threshold, bit/s
    capacity_bps: Optional[float] = None       # port capacity, bit/s
    capacity_share: Optional[float] = None     # high = share * capacity (0 < share <= 1)
    fair_share_multiple: Optional[float] = None  # high = multiple * capacity / active flows
    window_s: float = 5.0                      # sliding window of the estimate
    min_window_s: float = 1.0                  # smallest divisor for a young flow
    release_fraction: float = 0.7              # low threshold = release_fraction * high
    min_hold_s: float = 2.0                    # a heavy hitter stays one at least this long
    min_samples: int = 4                       # samples in the window before a detection
    max_flows: int = 65536                     # flows tracked; least recently seen go first

    def __post_init__(self) -> None:
        chosen = [n for n in ("threshold_bps", "capacity_share", "fair_share_multiple")
                  if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError("exactly one of threshold_bps, capacity_share, fair_share_multiple "
                             f"must be set, got {chosen or 'none'}")
        _positive("threshold_bps", self.threshold_bps, allow_none=True)
        _positive("capacity_bps", self.capacity_bps, allow_none=True)
        _positive("capacity_share", self.capacity_share, allow_none=True)
        _positive("fair_share_multiple", self.fair_share_multiple, allow_none=True)
        if self.capacity_share is not None and self.capacity_share > 1:
            raise ValueError(f"capacity_share must be in (0, 1], got {self.capacity_share!r}")
        if chosen[0] != "threshold_bps" and self.capacity_bps is None:
            raise ValueError(f"capacity_bps is required with {chosen[0]}")
        _positive("window_s", self.window_s)
        _positive("min_window_s", self.min_window_s)
        if self.min_window_s > self.window_s:
            raise ValueError(f"min_window_s ({self.min_window_s}) must not exceed window_s "
                             f"({self.window_s})")
        _positive("release_fraction", self.release_fraction)
        if self.release_fraction > 1:
            raise ValueError(f"release_fraction must be in (0, 1], got {self.release_fraction!r}")
        if isinstance(self.min_hold_s, bool) or not isinstance(self.min_hold_s, (int, float)) \
                or not math.isfinite(self.min_hold_s) or self.min_hold_s < 0:
            raise ValueError(f"min_hold_s must be a finite number >= 0, got {self.min_hold_s!r}")
        _positive_int("min_samples", self.min_samples)
        _positive_int("max_flows", self.max_flows)

    @property
    def mode(self) -> str:
        if self.threshold_bps is not None:
            return "absolute"
        return "capacity_share" if self.capacity_share is not None else "fair_share"


@dataclass(frozen=True)
class HeavyHitterEvent:
    kind: str                # "detected" or "released"
    time_s: float
    key: Hashable            # the flow (coex.sflow.FlowKey for sFlow samples)
    estimate_bps: float
    threshold_bps: float     # the high threshold for "detected", the low one for "released"
    reason: str              # "above_high", "below_low", "idle", "evicted"; mode: "mode (..)", "not_mode"
    mode: str                # which threshold rule (one of MODES), or MODE_OF_HISTORY
    # "detected" by the rate detector: when its activity period began (its first sample since
    # it was last quiet for a window), so time_s - first_seen_s is the detection latency.
    first_seen_s: Optional[float] = None


@dataclass
class _Flow:
    first_seen: float
    first_scaled: Optional[float] = None  # left out: the first sample (without `since`: its whole delivery)
    samples: deque = field(default_factory=deque)  # (time_s, scaled bytes)
    scaled_bytes: float = 0.0
    reported_bps: Optional[float] = None
    reported_at: float = -math.inf
    heavy_since: Optional[float] = None


class HeavyHitterDetector:
    """Per-flow rate estimates and heavy-hitter events. See the module docstring.

    Feed it with observe() (one packet sample), observe_sample() (a decoded
    coex.sflow.FlowSample) or observe_rate() (a rate measured elsewhere), and call tick()
    regularly (e.g. every 0.5 s) so that flows that went quiet are released. ``now`` is
    seconds on any monotonic clock; a ``now`` earlier than one already seen counts as the
    latest seen (``late_calls`` counts them), so a collector thread and a timer thread may
    share a detector.
    """

    def __init__(self, config: HeavyHitterConfig):
        if not isinstance(config, HeavyHitterConfig):
            raise ValueError(f"config must be a HeavyHitterConfig, got {type(config).__name__}")
        self.config = config
        self._flows: "OrderedDict[Hashable, _Flow]" = OrderedDict()  # least recently seen first
        self._now = -math.inf
        self._lock = threading.RLock()
        self._active_count = 0  # flows active in the window, counted at the last tick()
        self.evicted_flows = 0
        self.late_calls = 0  # calls whose `now` was earlier than one already seen

    # -- thresholds
    def high_threshold_bps(self) -> float:
        c = self.config
        if c.threshold_bps is not None:
            return float(c.threshold_bps)
        if c.capacity_share is not None:
            return c.capacity_share * c.capacity_bps
        return c.fair_share_multiple * c.capacity_bps / max(1, self._active_count)

    def low_threshold_bps(self) -> float:
        return self.config.release_fraction * self.high_threshold_bps()

    def active_flows(self) -> int:
        """Flows with a sample or a report in the window, as counted at the last tick(); the
        fair-share threshold divides by this."""
        return self._active_count

    # -- input
    def observe(self, key: Hashable, frame_bytes: int, sampling_rate: int, now: float,
                since: Optional[float] = None) -> list[HeavyHitterEvent]:
        """One packet sample of ``frame_bytes`` taken 1-in-``sampling_rate``, delivered at
        ``now``. ``since``, if known, is when the batch it came in began to be collected
        (SFlowCollector.collection_start: the agent's previous datagram): a flow's first
        sample then starts its measurement at ``since`` and the rest of that batch counts;
        without it the whole first delivery only marks the start."""
        if frame_bytes < 0 or sampling_rate < 1:
            raise ValueError(f"frame_bytes must be >= 0 and sampling_rate >= 1, got "
                             f"{frame_bytes!r}, {sampling_rate!r}")
        with self._lock:
            now = self._advance(now)
            flow = self._flow(key, now)
            scaled = float(frame_bytes) * sampling_rate
            if flow.first_scaled is None:
                usable = isinstance(since, (int, float)) and not isinstance(since, bool) \
                    and math.isfinite(since) and since < now
                flow.first_seen, flow.first_scaled = (since if usable else now), scaled
            elif now == flow.first_seen:
                # Delivered with the first one (one sFlow datagram): taken at some time
                # before `first_seen` too, so it marks the start as well, not a rate.
                flow.first_scaled += scaled
            flow.samples.append((now, scaled))
            flow.scaled_bytes += scaled
            events = self._evict_overflow(now)
            ev = self._evaluate(key, flow, now)
            if ev:
                events.append(ev)
            return events

    def observe_sample(self, sample, now: float, since: Optional[float] = None
                       ) -> list[HeavyHitterEvent]:
        """A decoded coex.sflow.FlowSample; samples without an IP 5-tuple are ignored."""
        key = sample.flow_key()
        length = sample.frame_length()
        if key is None or length is None:
            return []
        return self.observe(key, length, sample.sampling_rate, now, since)

    def observe_rate(self, key: Hashable, rate_bps: float, now: float) -> list[HeavyHitterEvent]:
        """A rate measured elsewhere (e.g. sFlow-RT's bytes/s * 8). It stands for the flow's
        estimate until window_s passes without a new report."""
        if isinstance(rate_bps, bool) or not isinstance(rate_bps, (int, float)) \
                or not math.isfinite(rate_bps) or rate_bps < 0:
            raise ValueError(f"rate_bps must be a finite number >= 0, got {rate_bps!r}")
        with self._lock:
            now = self._advance(now)
            flow = self._flow(key, now)
            flow.reported_bps = float(rate_bps)
            flow.reported_at = now
            events = self._evict_overflow(now)
            ev = self._evaluate(key, flow, now)
            if ev:
                events.append(ev)
            return events

    def tick(self, now: float) -> list[HeavyHitterEvent]:
        """Expire old samples of every flow, release heavy hitters that went below the low
        threshold or quiet, forget idle flows."""
        with self._lock:
            now = self._advance(now)
            horizon = now - self.config.window_s
            for flow in self._flows.values():
                self._expire(flow, now)
            self._active_count = sum(1 for f in self._flows.values()
                                     if f.samples or f.reported_at > horizon)
            events = []
            for key in list(self._flows):
                flow = self._flows[key]
                ev = self._evaluate(key, flow, now)
                if ev:
                    events.append(ev)
                if flow.heavy_since is None and not flow.samples and \
                        now - flow.reported_at > self.config.window_s:
                    del self._flows[key]
            return events

    def forget(self, key: Hashable) -> None:
        """Stop treating `key` as a heavy hitter (its samples stay): the next sample above the
        threshold detects it again. Counting (coex/counting.py) decides for the flows this
        detector suspects, and hands back the ones it did not keep."""
        with self._lock:
            flow = self._flows.get(key)
            if flow is not None:
                flow.heavy_since = None

    # -- queries
    def estimate_bps(self, key: Hashable, now: float) -> float:
        with self._lock:
            now = self._advance(now)
            flow = self._flows.get(key)
            if flow is None:
                return 0.0
            self._expire(flow, now)
            return self._estimate(flow, now)

    def heavy_hitters(self) -> dict:
        """{flow key: time it was detected} of the current heavy hitters."""
        with self._lock:
            return {k: f.heavy_since for k, f in self._flows.items() if f.heavy_since is not None}

    def top(self, now: float, n: int = 10) -> list[tuple[Hashable, float]]:
        """The n flows with the largest estimates, largest first."""
        with self._lock:
            now = self._advance(now)
            rates = []
            for k, f in self._flows.items():
                self._expire(f, now)
                rates.append((k, self._estimate(f, now)))
            rates.sort(key=lambda kv: kv[1], reverse=True)
            return rates[:n]

    def __len__(self) -> int:
        return len(self._flows)

    # -- internals
    def _advance(self, now: float) -> float:
        """The time to use: ``now``, or the latest time already seen if ``now`` is earlier
        (two threads that read one clock and then take the lock can arrive out of order)."""
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        if now < self._now:
            self.late_calls += 1
            return self._now
        self._now = now
        return now

    def _flow(self, key: Hashable, now: float) -> _Flow:
        flow = self._flows.get(key)
        if flow is None:
            flow = self._flows[key] = _Flow(first_seen=now)
        else:
            self._flows.move_to_end(key)
            if not flow.samples and now - flow.reported_at > self.config.window_s:
                flow.first_seen = now  # quiet for a whole window: a new activity period
                flow.first_scaled = None
        return flow

    def _evict_overflow(self, now: float) -> list[HeavyHitterEvent]:
        events = []
        while len(self._flows) > self.config.max_flows:
            key, flow = self._flows.popitem(last=False)
            self.evicted_flows += 1
            if flow.heavy_since is not None:
                events.append(HeavyHitterEvent("released", now, key, self._estimate(flow, now),
                                               self.low_threshold_bps(), "evicted",
                                               self.config.mode))
        return events

    def _expire(self, flow: _Flow, now: float) -> None:
        horizon = now - self.config.window_s
        samples = flow.samples
        while samples and samples[0][0] <= horizon:
            flow.scaled_bytes -= samples.popleft()[1]
        if not samples:
            flow.scaled_bytes = 0.0  # no float residue

    def _estimate(self, flow: _Flow, now: float) -> float:
        c = self.config
        if flow.reported_bps is not None and now - flow.reported_at <= c.window_s:
            return flow.reported_bps
        if not flow.samples:
            return 0.0
        age = now - flow.first_seen
        scaled = flow.scaled_bytes
        if age < c.window_s:  # the first delivery is still in the window: leave it out
            scaled -= flow.first_scaled or 0.0
        return 8.0 * max(0.0, scaled) / min(c.window_s, max(c.min_window_s, age))

    def _evaluate(self, key: Hashable, flow: _Flow, now: float) -> Optional[HeavyHitterEvent]:
        self._expire(flow, now)
        est = self._estimate(flow, now)
        c = self.config
        if flow.heavy_since is None:
            high = self.high_threshold_bps()
            enough = len(flow.samples) >= c.min_samples or \
                (flow.reported_bps is not None and now - flow.reported_at <= c.window_s)
            if est >= high and enough:
                flow.heavy_since = now
                return HeavyHitterEvent("detected", now, key, est, high, "above_high", c.mode,
                                        first_seen_s=flow.first_seen)
            return None
        if now - flow.heavy_since < c.min_hold_s:
            return None
        low = self.low_threshold_bps()
        if est < low:
            flow.heavy_since = None
            idle = not flow.samples and not (flow.reported_bps is not None
                                             and now - flow.reported_at <= c.window_s)
            return HeavyHitterEvent("released", now, key, est, low,
                                    "idle" if idle else "below_low", c.mode)
        return None


# ------------------------------------------------------------------ seed 003

@dataclass(frozen=True)
class ModeDecision:
    """The result of one statistics point of ModeOfHistoryEstimator."""
    packet_index: int        # samples seen when the decision was taken
    key: Optional[Hashable]  # the most frequent connection in the history (None: empty)
    count: int               # its records in the history
    records: int             # records in the history (<= hist_len)

    @property
    def share(self) -> float:
        return self.count / self.records if self.records else 0.0


class ModeOfHistoryEstimator:
    """Seed 003's estimate of the most bandwidth-consuming connection (Sec. IV-A, Fig. 8).

    rec_int  (recording interval): record the connection of every rec_int-th sample.
    hist_len (history length):     keep the latest hist_len records.
    stat_int (statistical interval): every stat_int samples, the most frequent connection
                                   among the records becomes the estimate.

    Units: sFlow samples, not switch packets. With 1-in-N sampling each sample stands for
    about N packets, so one record stands for about N * rec_int packets and a decision is
    taken every N * stat_int packets on average. Ties go to the current estimate if it is
    among them, else to the connection recorded most recently. The paper keys connections
    by sender and receiver MAC; any hashable key works here (the 5-tuple by default in
    observe_sample).
    """

    def __init__(self, rec_int: int = 1, hist_len: int = 128, stat_int: int = 32):
        _positive_int("rec_int", rec_int)
        _positive_int("hist_len", hist_len)
        _positive_int("stat_int", stat_int)
        self.rec_int, self.hist_len, self.stat_int = rec_int, hist_len, stat_int
        self._history: deque = deque()
        self._counts: Counter = Counter()
        self._seen = 0
        self.current: Optional[Hashable] = None
        self.last_decision: Optional[ModeDecision] = None

    @property
    def samples_seen(self) -> int:
        return self._seen

    @property
    def history(self) -> tuple:
        return tuple(self._history)

    def observe(self, key: Optional[Hashable]) -> Optional[ModeDecision]:
        """One sample of connection ``key``. Returns a ModeDecision at each statistics point
        (every stat_int samples), else None. ``key`` None is a packet of no connection (not
        IP): it counts towards rec_int and stat_int but is never recorded."""
        self._seen += 1
        if key is not None and self._seen % self.rec_int == 0:
            self._history.append(key)
            self._counts[key] += 1
            if len(self._history) > self.hist_len:
                old = self._history.popleft()
                left = self._counts[old] - 1
                if left:
                    self._counts[old] = left
                else:
                    del self._counts[old]
        if self._seen % self.stat_int:
            return None
        return self._decide()

    def observe_sample(self, sample) -> Optional[ModeDecision]:
        """A decoded coex.sflow.FlowSample keyed by its 5-tuple; a non-IP sample counts as a
        packet (the switch received it) but is not recorded."""
        return self.observe(sample.flow_key())

    def forget(self, key: Hashable) -> int:
        """Drop every record of ``key`` (a connection that ended); returns how many. The
        current estimate is cleared if it was ``key``; counters of samples are unchanged."""
        n = self._counts.pop(key, 0)
        if n:
            self._history = deque(k for k in self._history if k != key)
        if self.current == key:
            self.current = None
        return n

    def _decide(self) -> ModeDecision:
        counts = self._counts
        if not counts:
            decision = ModeDecision(self._seen, None, 0, 0)
        else:
            best = max(counts.values())
            if self.current is not None and counts.get(self.current) == best:
                key = self.current
            else:
                key = next(k for k in reversed(self._history) if counts[k] == best)
            decision = ModeDecision(self._seen, key, best, len(self._history))
        self.current = decision.key
        self.last_decision = decision
        return decision


MODE_OF_HISTORY = "mode_of_history"


class ModeHeavyHitterDetector:
    """Seed 003's estimator as a detector of its own: at every statistics point the mode of
    the history is *the* heavy hitter of the port (at most one at a time, no rate
    threshold: the most bandwidth-consuming connection by packets, however fast it is).

    Events are HeavyHitterEvents (mode "mode_of_history"):
      detected  when a connection becomes the mode (reason "mode (<count>/<records>
                records)"); estimate_bps is ``rate_of(key, now)`` (e.g. a
                HeavyHitterDetector's estimate_bps, for the log), 0.0 without it;
                threshold_bps is 0.0: there is no threshold;
      released  when another connection becomes the mode (reason "not_mode", after
                min_hold_s), or when the connection had no sample for idle_s (reason
                "idle", from tick()).
    A connection with no sample for idle_s is also dropped from the history, so the next
    mode is taken among connections that are still sending (in the paper every packet is
    recorded and an ended connection leaves the history within hist_len packets at line
    rate; from 1-in-N samples of a slow port that could take minutes).
    """

    def __init__(self, rec_int: int = 1, hist_len: int = 128, stat_int: int = 32,
                 idle_s: float = 5.0, min_hold_s: float = 2.0, rate_of=None):
        self.estimator = ModeOfHistoryEstimator(rec_int, hist_len, stat_int)
        _positive("idle_s", idle_s)
        if isinstance(min_hold_s, bool) or not isinstance(min_hold_s, (int, float)) \
                or not math.isfinite(min_hold_s) or min_hold_s < 0:
            raise ValueError(f"min_hold_s must be a finite number >= 0, got {min_hold_s!r}")
        self.idle_s, self.min_hold_s = float(idle_s), float(min_hold_s)
        self._rate_of = rate_of
        self._last_seen: dict = {}
        self.current: Optional[Hashable] = None
        self.since: Optional[float] = None
        self._lock = threading.RLock()

    def heavy_hitters(self) -> dict:
        with self._lock:
            return {} if self.current is None else {self.current: self.since}

    def observe(self, key: Optional[Hashable], now: float) -> list[HeavyHitterEvent]:
        """One sample of connection ``key`` (None: not IP) at ``now``."""
        with self._lock:
            if key is not None:
                self._last_seen[key] = now
            decision = self.estimator.observe(key)
            return [] if decision is None else self._decide(decision, now)

    def observe_sample(self, sample, now: float) -> list[HeavyHitterEvent]:
        return self.observe(sample.flow_key(), now)

    def tick(self, now: float) -> list[HeavyHitterEvent]:
        """Forget connections quiet for idle_s; release the current one if it is among them."""
        with self._lock:
            events = []
            for key, seen in list(self._last_seen.items()):
                if now - seen > self.idle_s:
                    del self._last_seen[key]
                    self.estimator.forget(key)
                    if key == self.current:
                        events.append(self._event("released", key, now, "idle"))
                        self.current = self.since = None
            return events

    def _decide(self, decision: ModeDecision, now: float) -> list[HeavyHitterEvent]:
        pick = decision.key
        if pick == self.current:
            return []
        events = []
        if self.current is not None:
            if now - self.since < self.min_hold_s:
                return []  # the incumbent keeps its place until its hold is over
            events.append(self._event("released", self.current, now, "not_mode"))
            self.current = self.since = None
        if pick is not None:
            self.current, self.since = pick, now
            events.append(self._event("detected", pick, now,
                                      f"mode ({decision.count}/{decision.records} records)"))
        return events

    def _event(self, kind: str, key: Hashable, now: float, reason: str) -> HeavyHitterEvent:
        rate = float(self._rate_of(key, now)) if self._rate_of is not None else 0.0
        return HeavyHitterEvent(kind, now, key, rate, 0.0, reason, MODE_OF_HISTORY)
