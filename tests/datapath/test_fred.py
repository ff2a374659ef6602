"""FRED (Lin and Morris 1997; seed 004 section 2.3): per-active-flow qlen_i and
strikes, avgcq = q_avg / N, forced drops for flows above max(minq, avgcq) or
maxq, RED's drop only for flows at or above max(minq, avgcq)."""

from __future__ import annotations

from collections import Counter

from replaylib import SEC, merge, poisson, run

C = 100_000_000
SPEC = "fred limit=80 min=20 max=60 max_p=0.1"


def test_a_fragile_flow_below_minq_is_never_dropped():
    """Lin and Morris: a flow with fewer than minq (2) packets queued is always
    accepted unless q_avg reaches max. A 2 Mbit/s flow beside a 150 Mbit/s one (every
    packet of it meets a queue the heavy flow keeps full) loses nothing; the heavy
    flow takes every drop."""
    tr = merge(poisson(1, 150e6, 0, 2 * SEC, seed=1), poisson(2, 2e6, 0, 2 * SEC, seed=2))
    r = run(tr, SPEC, rate_bps=C)
    drops = Counter(p["flow"] for p in r.dropped())
    assert drops[1] > 1000 and drops[2] == 0, drops


def test_a_non_responsive_flow_is_held_to_its_share_of_the_queue():
    """Strikes and avgcq: two open-loop flows at 150 and 50 Mbit/s. FRED holds each
    flow's queue near avgcq = q_avg / 2, so the heavy flow cannot take the buffer; the
    light flow (below its fair 50 % of the link only by its arrival rate) keeps at
    least 80 % of what it sends (measured about 95 %), where a FIFO would give it its
    arrival share 25 % of the link, i.e. half of what it sends."""
    tr = merge(poisson(1, 150e6, 0, 2 * SEC, seed=3), poisson(2, 50e6, 0, 2 * SEC, seed=4))
    r = run(tr, SPEC, rate_bps=C, extra=["--xstats-every-ms", "100"])
    light = r.rate_bps(2, SEC // 2, 2 * SEC) / r.rate_bps(2, SEC // 2, 2 * SEC, delivered=False)
    assert light >= 0.8, light
    during = [x for t, x in r.xstats if SEC // 2 <= t < 2 * SEC]
    assert int(during[-1]["flow_drops"]) > 0
    assert all(1 <= int(x["active_flows"]) <= 2 for x in during)


def test_active_flows_are_the_flows_with_packets_queued():
    """N counts flows while they have packets queued and forgets them at qlen_i = 0:
    after every flow has stopped and the queue drained, N is 0."""
    tr = merge(*(poisson(f, 30e6, 0, SEC, seed=f) for f in range(4)))
    r = run(tr, SPEC, rate_bps=C, extra=["--xstats-every-ms", "50"])
    busy = [int(x["active_flows"]) for t, x in r.xstats if SEC // 4 <= t < SEC]
    assert max(busy) >= 3
    assert r.xstats[-1][1]["active_flows"] == "0"
