"""Confirmation by counting: sFlow makes a flow a *suspect* on few samples, a
counting flow on the switch of its bottleneck port then counts its bytes exactly, and the
counted rate decides steering; once steered, its steering flow's counter decides release.

Sampling alone needs many samples to tell a flow at 2x the threshold from one at half of it
(docs/sflow.md, "How fast detection can be"); a switch counter needs two readings. So the
detector runs at a low bar (`suspect_fraction` of the threshold) and this book judges what it
suspects: confirmed when its counter's changes span at least CONFIRM_WINDOW_S and their bytes
reach the threshold's over that span plus CONFIRM_SLACK_S (so the further above the threshold,
the sooner), dropped
when it is counted below the threshold at SUSPECT_TIMEOUT_S or has not been confirmed by
SUSPECT_MAX_S (and not suspected again for RETRY_AFTER_S).

When a counter's bytes were counted matters as much as how many. OVS credits its counters to
the OpenFlow flows only when a revalidator runs (ovs_config/counter_refresh.py), and when a
new flow goes in, the revalidation it triggers credits it with bytes its 5-tuple sent before
(up to one revalidator interval of them): a count "since install" overestimates a young flow,
and a reading between revalidations repeats the last one. So a suspect is judged only on its
counter's *changes*: from the first value it shows (the baseline, which may hold those older
bytes) to its latest, each timed when a reading first showed it. A late time for the latest
value only lengthens the span; the first value's time is held to at most one reading interval
after the reading before it, which the slack covers (docs/sflow.md, "Fresh counters"). A
release is judged on reading times instead: a counter that stops moving is a flow that stopped.
Counting flows are bounded per switch: when a switch has `max_per_switch`, a new suspect takes
the place of the one with the smallest sFlow estimate if its own is larger, else waits.

Pure: time and counter readings in, verdicts out. ryu_app/heavy_hitters.py installs and removes
the counting flows, polls the counters with OpenFlow flow stats and carries the verdicts out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Hashable, Optional

READ_INTERVAL_S = 0.05    # a suspect's counter is read this often (ryu_app/heavy_hitters.py)
CONFIRM_WINDOW_S = 0.1    # its counter's changes span at least this long before it is confirmed ...
# ... and hold the threshold's bytes over that span and CONFIRM_SLACK_S more: what a flow paced
# below the threshold sends when it catches up after falling behind (iperf3 and TCP do, at a
# flow's start beside another) is not a heavy hitter, nor is the up to READ_INTERVAL_S by which
# the first value's time may be late. Measured in the lab (bench_hh_latency): mice paced at 0.7x
# the threshold showed up to 1.07x over 0.3 s, 0.11 threshold-seconds above their pace; for a
# mouse at 0.7x to be confirmed it would take 0.3 * span + 0.15, at least 0.18 threshold-seconds.
# A flow at 2x is confirmed once its span is 0.15 s, one at 1.5x at 0.3 s, at 1.1x at 1.5 s.
CONFIRM_SLACK_S = 0.15
SUSPECT_TIMEOUT_S = 1.0   # a suspect counted below the threshold by then is dropped ...
SUSPECT_MAX_S = 3.0       # ... one counted above it but not yet confirmed, by then
RETRY_AFTER_S = 2.0       # a dropped suspect is not counted again sooner
RELEASE_WINDOW_S = 1.0    # a steered flow's rate over its last second decides release

SwitchFlow = tuple[int, Hashable]  # (dpid, flow key): one counting or steering flow


class Counter:
    """Readings of one flow's byte counter: (monotonic time, bytes), those of the last keep_s;
    and of its changes the first and the latest value, each with the time a reading first
    showed it."""

    def __init__(self, start: Optional[float] = None):
        self.readings: deque = deque()
        self.start = start  # when the flow went in: nothing was credited to it before
        self.first_shown: Optional[tuple[float, int]] = None
        self.last_shown: Optional[tuple[float, int]] = None

    def add(self, now: float, byte_count: int, keep_s: float) -> None:
        if self.readings and byte_count < self.readings[-1][1]:
            self.start = self.readings[-1][0]  # the flow was replaced (a reconnect re-installed it) since
            self.readings.clear()
            self.first_shown = self.last_shown = None
        if byte_count > 0 and (self.last_shown is None or byte_count != self.last_shown[1]):
            self.last_shown = (now, byte_count)
            if self.first_shown is None:
                # Credited after the reading before this one: a reading that came late (a slow switch, a
                # busy controller) must not shorten the span, so the first value is timed no later than
                # READ_INTERVAL_S after it. (The latest value's time only lengthens the span if late.)
                before = self.readings[-1][0] if self.readings else self.start
                self.first_shown = (now if before is None else min(now, before + READ_INTERVAL_S), byte_count)
        self.readings.append((now, byte_count))
        while len(self.readings) > 2 and now - self.readings[1][0] >= keep_s:
            self.readings.popleft()  # keep one reading at or before the window's start

    def span_s(self) -> float:
        return self.readings[-1][0] - self.readings[0][0] if len(self.readings) > 1 else 0.0

    def rate_bps(self) -> Optional[float]:
        """Over the readings kept; None before two."""
        span = self.span_s()
        if span <= 0:
            return None
        return 8.0 * (self.readings[-1][1] - self.readings[0][1]) / span

    def change_span_s(self) -> float:
        return self.last_shown[0] - self.first_shown[0] if self.first_shown is not None else 0.0

    def change_rate_bps(self) -> Optional[float]:
        """From the first value shown to the latest, each timed when first shown; None before
        the counter has changed once after its first value."""
        span = self.change_span_s()
        if span <= 0:
            return None
        return 8.0 * (self.last_shown[1] - self.first_shown[1]) / span


@dataclass
class Suspect:
    port: tuple[int, int]          # the bottleneck port whose detector suspected it
    since: float                   # when it became a suspect
    estimate_bps: float            # sFlow's estimate then
    first_seen_s: Optional[float]  # the detector's start of the flow (for the detection latency)
    counter: Counter = field(default_factory=Counter)


@dataclass
class Steered:
    port: tuple[int, int]
    since: float
    counter: Counter = field(default_factory=Counter)


@dataclass(frozen=True)
class Verdict:
    what: str                      # "confirmed", "dropped" (suspects), "release" (steered)
    dpid: int
    key: Hashable
    port: tuple[int, int]
    rate_bps: float                # counted
    estimate_bps: float            # sFlow's estimate when suspected (0 for a release)
    first_seen_s: Optional[float] = None
    suspected_s: Optional[float] = None  # when it became a suspect (confirmed and dropped ones)


class CountingBook:
    def __init__(self, max_per_switch: int):
        if max_per_switch < 1:
            raise ValueError(f"max_per_switch must be >= 1, got {max_per_switch!r}")
        self.max_per_switch = max_per_switch
        self.suspects: dict[SwitchFlow, Suspect] = {}
        self.steered: dict[SwitchFlow, Steered] = {}
        self._retry_at: dict[SwitchFlow, float] = {}
        self.confirmed_total = self.dropped_total = self.evicted_total = self.waited_total = 0

    # --- suspects --------------------------------------------------------------------

    def suspect(self, dpid: int, key, port, estimate_bps: float, first_seen_s: Optional[float],
                now: float) -> tuple[bool, list[SwitchFlow]]:
        """A detector suspects `key` at `port` (on switch dpid). Returns whether to count it
        (install its counting flow) and the suspects it displaces (remove theirs)."""
        sf = (dpid, key)
        if sf in self.suspects or sf in self.steered or now < self._retry_at.get(sf, 0.0):
            return False, []
        self._retry_at = {k: t for k, t in self._retry_at.items() if t > now}
        mine = [k for k in self.suspects if k[0] == dpid]
        displaced = []
        if len(mine) >= self.max_per_switch:
            smallest = min(mine, key=lambda k: self.suspects[k].estimate_bps)
            if self.suspects[smallest].estimate_bps >= estimate_bps:
                self.waited_total += 1
                return False, []  # the bound holds the larger estimates; the detector asks again
            del self.suspects[smallest]
            self.evicted_total += 1
            displaced.append(smallest)
        self.suspects[sf] = Suspect(port, now, estimate_bps, first_seen_s, Counter(start=now))
        return True, displaced

    def forget(self, dpid: int, key) -> None:
        """The flow's counting flow could not be installed (or its port stopped being watched)."""
        self.suspects.pop((dpid, key), None)

    # --- steered flows (their steering flow's counter) --------------------------------

    def steering(self, dpid: int, key, port, now: float) -> None:
        self.steered[(dpid, key)] = Steered(port, now)

    def unsteered(self, dpid: int, key) -> None:
        self.steered.pop((dpid, key), None)

    # --- readings and verdicts ------------------------------------------------------------

    def switches(self) -> set[int]:
        """The switches whose counters are wanted now."""
        return {dpid for dpid, _ in self.suspects} | {dpid for dpid, _ in self.steered}

    def reading(self, dpid: int, key, byte_count: int, now: float, steering: bool) -> None:
        """A counter read from switch dpid: a counting flow's (steering False) or a steering flow's."""
        entry = (self.steered if steering else self.suspects).get((dpid, key))
        if entry is not None:
            entry.counter.add(now, byte_count, RELEASE_WINDOW_S if steering else SUSPECT_TIMEOUT_S)

    def counted_bps(self, dpid: int, key) -> Optional[float]:
        steered = self.steered.get((dpid, key))
        if steered is not None:
            return steered.counter.rate_bps()
        suspect = self.suspects.get((dpid, key))
        return suspect.counter.change_rate_bps() if suspect is not None else None

    def judge(self, now: float, thresholds, min_hold_s: float) -> list[Verdict]:
        """Verdicts due now. thresholds(port) -> (high, low) bit/s of that port's detector."""
        out = []
        for sf, s in list(self.suspects.items()):
            rate, span = s.counter.change_rate_bps(), s.counter.change_span_s()
            high, _ = thresholds(s.port)
            if rate is not None and span >= CONFIRM_WINDOW_S and rate * span >= high * (span + CONFIRM_SLACK_S):
                del self.suspects[sf]
                self.confirmed_total += 1
                out.append(Verdict("confirmed", sf[0], sf[1], s.port, rate, s.estimate_bps, s.first_seen_s,
                                   s.since))
            elif now - s.since >= (SUSPECT_MAX_S if rate is not None and rate >= high else SUSPECT_TIMEOUT_S):
                del self.suspects[sf]
                self.dropped_total += 1
                self._retry_at[sf] = now + RETRY_AFTER_S
                out.append(Verdict("dropped", sf[0], sf[1], s.port, rate or 0.0, s.estimate_bps,
                                   suspected_s=s.since))
        for sf, s in list(self.steered.items()):
            rate = s.counter.rate_bps()
            _, low = thresholds(s.port)
            if rate is not None and s.counter.span_s() >= RELEASE_WINDOW_S * 0.9 and rate < low \
                    and now - s.since >= min_hold_s:
                del self.steered[sf]
                # Its samples stay in the detector's window for a while after it stops: not a
                # suspect again at once on those.
                self._retry_at[sf] = now + RETRY_AFTER_S
                out.append(Verdict("release", sf[0], sf[1], s.port, rate, 0.0))
        return out
