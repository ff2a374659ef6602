"""CoDel (RFC 8289): in the dropping state the k-th drop follows the previous
one after interval / sqrt(k)."""

from __future__ import annotations

import math

from replaylib import MS, SEC, cbr, poisson, run

C = 100_000_000
PKT_NS = 1500 * 8 * SEC // C  # 120 us on the wire


def test_drop_spacing_follows_interval_over_sqrt_count():
    # a standing overload: the sojourn never falls back under target, so the
    # first dropping state lasts the whole run and count runs 1, 2, 3, ...
    r = run(cbr(1, 130e6, 0, 2 * SEC), "codel limit=100000 target_ms=5 interval_ms=100", rate_bps=C)
    drops = [p["t_ns"] for p in r.dropped("delay")]
    assert len(drops) >= 20
    for k in range(1, len(drops)):
        gap = drops[k] - drops[k - 1]
        want = 100 * MS / math.sqrt(k)
        # drops happen at dequeue instants: at most one packet time late;
        # the Q32 Newton estimate of 1/sqrt(count) is within 0.5 %
        assert abs(gap - want) <= PKT_NS + 0.005 * want, (k, gap, want)


def test_first_drop_waits_one_interval_above_target():
    r = run(cbr(1, 130e6, 0, SEC), "codel limit=100000 target_ms=5 interval_ms=100", rate_bps=C)
    first = r.dropped("delay")[0]["t_ns"]
    # the sojourn passes 5 ms when 5 ms / (1 - 100/130) ~ 21.7 ms have passed;
    # the first drop comes one interval later
    above = 5 * MS / (1 - 100 / 130)
    assert abs(first - (above + 100 * MS)) < 2 * MS


def test_no_drops_below_target():
    r = run(poisson(1, 60e6, 0, SEC, seed=1), "codel", rate_bps=C)
    assert not r.dropped()


def test_interval_parameter_scales_spacing():
    r = run(cbr(1, 130e6, 0, 2 * SEC), "codel limit=100000 interval_ms=50", rate_bps=C)
    drops = [p["t_ns"] for p in r.dropped("delay")]
    assert abs((drops[1] - drops[0]) - 50 * MS) <= PKT_NS
    assert abs((drops[4] - drops[3]) - 50 * MS / 2) <= PKT_NS + 0.005 * 25 * MS
