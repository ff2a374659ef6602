"""Confirmation by counting (issue 16): sFlow makes a flow a *suspect* on few samples, a
counting flow on the switch of its bottleneck port then counts its bytes exactly, and the
counted rate decides steering; once steered, its steering flow's counter decides release.

Sampling alone needs many samples to tell a flow at 2x the threshold from one at half of it
(docs/sflow.md, "How fast detection can be"); a switch counter needs two readings. So the
detector runs at a low bar (`suspect_fraction` of the threshold) and this book judges what it
suspects: confirmed when the counted rate over at least CONFIRM_WINDOW_S reaches the threshold,
dropped when it has not within SUSPECT_TIMEOUT_S (and not suspected again for RETRY_AFTER_S).
A counting flow counts from zero when it goes in, so its first reading already gives a rate
(the install's few milliseconds make it an underestimate, never an overestimate).
Counting flows are bounded per switch: when a switch has `max_per_switch`, a new suspect takes
the place of the one with the smallest sFlow estimate if its own is larger, else waits.

Pure: time and counter readings in, verdicts out. ryu_app/heavy_hitters.py installs and removes
the counting flows, polls the counters with OpenFlow flow stats and carries the verdicts out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Hashable, Optional

CONFIRM_WINDOW_S = 0.2    # counted at least this long (from its counting flow's install) before it is confirmed
SUSPECT_TIMEOUT_S = 1.0   # a suspect not confirmed by then is dropped
RETRY_AFTER_S = 2.0       # a dropped suspect is not counted again sooner
RELEASE_WINDOW_S = 1.0    # a steered flow's rate over its last second decides release

SwitchFlow = tuple[int, Hashable]  # (dpid, flow key): one counting or steering flow


class Counter:
    """Readings of one flow's byte counter: (monotonic time, bytes)."""

    def __init__(self):
        self.readings: deque = deque()

    def add(self, now: float, byte_count: int, keep_s: float) -> None:
        if self.readings and byte_count < self.readings[-1][1]:
            self.readings.clear()  # the flow was replaced (a reconnect re-installed it): start again
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
        suspect = self.suspects[sf] = Suspect(port, now, estimate_bps, first_seen_s)
        suspect.counter.add(now, 0, SUSPECT_TIMEOUT_S)  # the counting flow starts at zero now
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
        entry = self.steered.get((dpid, key)) or self.suspects.get((dpid, key))
        return entry.counter.rate_bps() if entry else None

    def judge(self, now: float, thresholds, min_hold_s: float) -> list[Verdict]:
        """Verdicts due now. thresholds(port) -> (high, low) bit/s of that port's detector."""
        out = []
        for sf, s in list(self.suspects.items()):
            rate = s.counter.rate_bps()
            high, _ = thresholds(s.port)
            if rate is not None and s.counter.span_s() >= CONFIRM_WINDOW_S and rate >= high:
                del self.suspects[sf]
                self.confirmed_total += 1
                out.append(Verdict("confirmed", sf[0], sf[1], s.port, rate, s.estimate_bps, s.first_seen_s))
            elif now - s.since >= SUSPECT_TIMEOUT_S:
                del self.suspects[sf]
                self.dropped_total += 1
                self._retry_at[sf] = now + RETRY_AFTER_S
                out.append(Verdict("dropped", sf[0], sf[1], s.port, rate or 0.0, s.estimate_bps))
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
