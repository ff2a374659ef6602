"""SFB (Feng et al. 2001; seed 004 section 2.7; Linux sch_sfb's defaults): 8
levels x 16 bins of (qlen, p_m), p_min over the flow's bins decides; p_min = 1
marks a non-responsive flow, which only the penalty token bucket lets through."""

from __future__ import annotations

from replaylib import SEC, merge, poisson, run

C = 100_000_000


def test_a_non_responsive_flow_does_not_starve_the_others():
    """A 200 Mbit/s open-loop flow beside four 10 Mbit/s ones. Blue raises the heavy
    flow's p_m while its bins hold >= bin_size packets, until what passes of it fits
    the link beside the others: each light flow keeps at least 90 % of its 10 Mbit/s
    (measured 101-103 %: they share a bin with the heavy flow at some levels, never at
    all eight), the heavy one gets the rest, and no bin grows past max (25) by more
    than a few packets of other flows (measured 27)."""
    tr = merge(poisson(0, 200e6, 0, 3 * SEC, seed=1), *(poisson(f, 10e6, 0, 3 * SEC, seed=f + 1) for f in range(1, 5)))
    r = run(tr, "sfb limit=1000", rate_bps=C, extra=["--xstats-every-ms", "100"])
    for f in range(1, 5):
        assert r.rate_bps(f, SEC, 3 * SEC) >= 9e6, f
    assert r.rate_bps(0, SEC, 3 * SEC) <= C - 4 * 9e6
    assert max(int(x["maxqlen"]) for t, x in r.xstats) <= 40


def test_the_penalty_bucket_passes_at_most_penalty_rate():
    """Once p_min reaches 1 (bin_size 1 and increment 0.5 get it there within two
    queued arrivals) the flow passes only through the token bucket: penalty_rate 100
    lets through at most 100 packets/s (1.2 Mbit/s) more than penalty_rate 0, with
    which Linux drops every such packet. Measured 1.0 Mbit/s more."""
    tr = poisson(1, 200e6, 0, 3 * SEC, seed=5)
    got = {}
    for rate in (0, 100):
        r = run(tr, f"sfb bin_size=1 increment=0.5 penalty_rate={rate}", rate_bps=C)
        got[rate] = r.rate_bps(1, SEC, 3 * SEC)
        assert r.stats["total"]["drops"]["penalty"] > 0
    assert 0 < got[100] - got[0] <= 100 * 1500 * 8 + 20 * 1500 * 8 / 2, got


def test_no_mark_below_bin_size():
    """A bin's p_m rises only when it holds bin_size (20) packets: at 60 % load the
    queue never gets there and nothing is dropped."""
    tr = merge(*(poisson(f, 15e6, 0, SEC, seed=f) for f in range(4)))
    r = run(tr, "sfb", rate_bps=C, extra=["--xstats-every-ms", "500"])
    assert not r.dropped()
    assert float(r.xstats[-1][1]["maxprob"]) == 0


def test_one_overloaded_flow_is_held_near_the_bin_target_by_p_min():
    """Blue's control: one flow at 120 % of the link. Its bins' p_m rises while they
    hold >= bin_size packets and falls when they empty, so its queue stays short (mean
    2-20 packets; measured 5) though the limit is 1000, and p_min's early drops, not
    the bins' `max`, do the work (at least 20x as many; measured 100x)."""
    r = run(poisson(1, 120e6, 0, 3 * SEC, seed=5), "sfb limit=1000", rate_bps=C,
            extra=["--xstats-every-ms", "20"])
    qlen = [int(x["maxqlen"]) for t, x in r.xstats if t >= SEC]
    assert 2 <= sum(qlen) / len(qlen) <= 20, sum(qlen) / len(qlen)
    drops = r.stats["total"]["drops"]
    assert drops["early"] > 20 * drops["overflow"]
