"""Keys seen within the last few seconds, forgotten oldest first.

The controller floods a frame it cannot place at most once per second and probes an address
at most once per second; under a packet-in storm it asks this thousands of times a second
with as many keys in the window, so expiry must not cost a pass over all of them (it did:
rebuilding the dict on every packet-in made the storm's cost quadratic). Pure: time is
handed in.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable


class Recent:
    def __init__(self, window_s: float):
        self.window_s = window_s
        self._seen: OrderedDict[Hashable, float] = OrderedDict()  # key -> when, oldest first

    def expire(self, now: float) -> None:
        while self._seen:
            key, when = next(iter(self._seen.items()))
            if now - when < self.window_s:
                break
            self._seen.popitem(last=False)

    def add_if_new(self, key: Hashable, now: float) -> bool:
        """Remember key unless it was seen within the window; True if it was not."""
        self.expire(now)
        if key in self._seen:
            return False
        self._seen[key] = now
        return True

    def __len__(self) -> int:
        return len(self._seen)
