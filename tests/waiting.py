"""Wait for an effect instead of sleeping a fixed time.

After a controller restart or a switch reconnect, OVS retries with a backoff of up to
8 s and the status in its database lags the connection; on a loaded 2-core CI machine a
fixed sleep after "connected" is a race. Tests poll for what they assert instead.
"""

from __future__ import annotations

import time


def eventually(check, timeout_s: float = 15.0, interval_s: float = 0.2, what: str = "condition"):
    """Call `check` until it returns something truthy; return that, or fail after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not true after {timeout_s:.0f} s (last: {value!r})")
        time.sleep(interval_s)
