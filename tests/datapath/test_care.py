"""CARE (Chan and Hamdi 2003; seed 004 section 2.5; parameters are our assumptions,
docs/disciplines-004.md): capture-recapture over the last t captured arrivals, the
Mh model's jackknife for the number of flows, rate_i = n_i / t * A, and drops of
1 - (C/N) / rate_i for flows above the fair share."""

from __future__ import annotations

import pytest

from replaylib import SEC, merge, poisson, run

C = 100_000_000


@pytest.mark.parametrize("nflows", [3, 8])
def test_jackknife_estimates_the_number_of_flows(nflows):
    """N = S + (t-1)/t f1 over t = 100 captures: with 3 or 8 flows of equal rate every
    flow is captured many times (f1 ~ 0), so N ~ S = the flows. Tolerance 20 %:
    at 8 flows a flow is captured 12.5 times on average, and now and then once."""
    tr = merge(*(poisson(f, 90e6 / nflows, 0, 2 * SEC, seed=f) for f in range(nflows)))
    r = run(tr, "care", rate_bps=C, extra=["--xstats-every-ms", "100"])
    est = [float(x["est_flows"]) for t, x in r.xstats if t >= SEC // 2]
    assert sum(est) / len(est) == pytest.approx(nflows, rel=0.2), est


def test_a_flow_above_the_fair_share_is_cut_to_it():
    """Flows at 90, 10 and 10 Mbit/s on 100 Mbit/s: N = 3, C/N = 33 Mbit/s; the
    90 Mbit/s flow is dropped with 1 - 33/90 and gets about 33 through (20-45: its
    n_i and A are estimates from 100 captures and 100 ms windows); the 10 Mbit/s
    flows are below the share and lose under 5 %."""
    tr = merge(poisson(1, 90e6, 0, 3 * SEC, seed=1), poisson(2, 10e6, 0, 3 * SEC, seed=2),
               poisson(3, 10e6, 0, 3 * SEC, seed=3))
    r = run(tr, "care", rate_bps=C)
    assert 20e6 <= r.rate_bps(1, SEC, 3 * SEC) <= 45e6, r.rate_bps(1, SEC, 3 * SEC)
    for f in (2, 3):
        assert r.rate_bps(f, SEC, 3 * SEC) >= 0.95 * r.rate_bps(f, SEC, 3 * SEC, delivered=False)
