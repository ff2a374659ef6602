"""SRED (Ott, Lakshman, Wong 1999; seed 004 section 2.4): the zombie list's hit
frequency P estimates 1/(active flows), and full SRED's drop probability
p_sred(q) * min(1, 1/(256 P)^2) * (1 + Hit/P) works on the instantaneous queue."""

from __future__ import annotations

from collections import Counter

import pytest

from replaylib import SEC, merge, poisson, run

C = 100_000_000


@pytest.mark.parametrize("nflows", [4, 16])
def test_hit_frequency_estimates_the_number_of_flows(nflows):
    """Ott et al. section 3: for N flows of equal rate, P -> 1/N, so 1/P counts the flows.
    P is an EWMA with a = 1/M (M = 1000 zombies), so after the list fills (1000
    arrivals) and ~4 time constants more its relative error is a few percent plus
    the EWMA's noise; tolerance 25 %."""
    tr = merge(*(poisson(f, 120e6 / nflows, 0, 2 * SEC, seed=f) for f in range(nflows)))
    r = run(tr, "sred limit=80", rate_bps=C, extra=["--xstats-every-ms", "100"])
    est = [int(x["est_flows"]) for t, x in r.xstats if t >= SEC]
    assert sum(est) / len(est) == pytest.approx(nflows, rel=0.25), est


def test_no_drop_while_the_queue_is_below_a_sixth_of_the_buffer():
    """p_sred(q) = 0 for q < B/6: at 50 % load the queue stays short and nothing drops."""
    tr = merge(*(poisson(f, 10e6, 0, SEC, seed=f) for f in range(5)))
    r = run(tr, "sred limit=600", rate_bps=C)
    assert not r.dropped()


def test_a_flow_that_hits_the_zombie_list_more_is_dropped_more():
    """The (1 + Hit/P) factor. 200 light flows and one heavy flow with a fifth of the
    arrivals (110 % load): the heavy flow holds about a fifth of the zombies, so a fifth
    of its arrivals are hits, and each hit multiplies its p_zap by 1 + 1/P (P ~ 0.04,
    so ~25). The light flows almost never hit. Measured: the heavy flow loses 3.2x the
    fraction the light ones lose (the plain mean of the factor would say ~5; P's own
    swings and the queue's between the p_sred steps make it less); we require 2x."""
    tr = merge(poisson(0, 22e6, 0, 5 * SEC, seed=1),
               *(poisson(f, 88e6 / 200, 0, 5 * SEC, seed=f + 1) for f in range(1, 201)))
    r = run(tr, "sred limit=80", rate_bps=C)
    drops = Counter(p["flow"] for p in r.dropped("early"))
    arrived = Counter(p["flow"] for p in r.packets)
    heavy = drops[0] / arrived[0]
    light = sum(drops[f] for f in range(1, 201)) / sum(arrived[f] for f in range(1, 201))
    assert heavy >= 2 * light > 0, (heavy, light)


def test_few_flows_are_dropped_less_than_many():
    """min(1, 1/(256 P)^2): SRED scales its drop probability with the square of the
    flow count below 256 flows (TCP's window goes as 1/sqrt(p)), so at the same
    overload two flows see far fewer early drops than 300 flows."""
    few = run(merge(*(poisson(f, 55e6, 0, 3 * SEC, seed=f) for f in range(2))), "sred limit=80", rate_bps=C)
    many = run(merge(*(poisson(f, 110e6 / 300, 0, 3 * SEC, seed=f) for f in range(300))), "sred limit=80",
               rate_bps=C)
    assert len(many.dropped("early")) > 20 * max(1, len(few.dropped("early")))
