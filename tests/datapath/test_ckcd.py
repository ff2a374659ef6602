"""CKCD (seed 000): per-flow delay thresholds from eq. 9 penalize flows above
their fair share and spare flows below it.

Rates are open-loop (Poisson) senders through ckcd-replay at 100 Mbit/s, the
paper's bottleneck. The first 0.5 s (rate windows and q_avg warming up) is
left out of every measurement.
"""

from __future__ import annotations

import pytest

from replaylib import MS, SEC, cbr, merge, poisson, run

C = 100_000_000
T = 3 * SEC
WARM = SEC // 2


def unresponsive_vs_light(qdisc: str, seed: int = 1):
    heavy = poisson(1, 150e6, 0, T, seed=seed)  # 3x the fair share C/2
    light = poisson(2, 40e6, 0, T, seed=seed)  # below the fair share
    r = run(merge(heavy, light), qdisc, rate_bps=C, seed=seed)
    return r, r.rate_bps(1, WARM, T), r.rate_bps(2, WARM, T), r.rate_bps(2, WARM, T, delivered=False)


@pytest.mark.parametrize("seed", [1, 2])
def test_unresponsive_flow_at_3x_fair_share_is_penalized(seed):
    r, heavy, light, light_offered = unresponsive_vs_light("ckcd", seed)
    fair = C / 2
    # Tolerance: the heavy flow may take what the light one leaves (work
    # conservation: 100 - 40 = 60 Mbit/s), never more than 1.5x its share.
    assert heavy <= 1.5 * fair, (heavy, fair)
    # The light flow sends below its share: it keeps >= 80 % of what it sends.
    assert light >= 0.8 * light_offered, (light, light_offered)
    drops = r.stats["total"]["drops"]
    heavy_drops = sum(r.flows[1]["drops"].values())
    light_drops = sum(r.flows[2]["drops"].values())
    assert drops["delay"] > 0
    assert heavy_drops > 20 * max(light_drops, 1)
    # the link stays busy: CKCD does not buy fairness with idle capacity
    assert heavy + light >= 0.95 * C


def test_droptail_does_not_protect_the_light_flow():
    """The same load under DropTail: the light flow loses about half (this
    is what makes the CKCD assertion above meaningful)."""
    _, heavy, light, light_offered = unresponsive_vs_light("droptail limit=80")
    assert light < 0.7 * light_offered
    assert heavy > 1.5 * (C / 2)


def test_unresponsive_among_four_flows():
    """I = 4, fair share 25 Mbit/s: a 75 Mbit/s sender (3x) against three 20 Mbit/s."""
    tr = merge(poisson(1, 75e6, 0, T, seed=3), *(poisson(f, 20e6, 0, T, seed=3) for f in (2, 3, 4)))
    r = run(tr, "ckcd", rate_bps=C, seed=3)
    fair = C / 4
    # leftover for the heavy flow: 100 - 3*20 = 40 = 1.6 x fair; allow +5 %
    assert r.rate_bps(1, WARM, T) <= 1.65 * fair
    for f in (2, 3, 4):
        assert r.rate_bps(f, WARM, T) >= 0.8 * r.rate_bps(f, WARM, T, delivered=False)


def eq9_dth_us(mu_bps, active, d_ms=5.0, k=100.0, dth_min_ms=0.5, dth_max_ms=50.0):
    """docs/ckcd.md: d_th = K (mu_i/mu_f)^-2 + Q, Q = -1/(kI), K = D - Q."""
    mu_f = C / active
    q = -1.0 / (k * active)
    big_k = d_ms / 1000 - q
    d = big_k * (mu_bps / mu_f) ** -2 + q
    return 1e6 * min(max(d, dth_min_ms / 1000), dth_max_ms / 1000)


def test_dth_falls_as_admitted_rate_over_fair_share_grows():
    # four constant-rate flows, 95 Mbit/s in total on 100: nothing is dropped,
    # so the admitted rate mu_i is the sending rate; I = 4, mu_f = 25 Mbit/s.
    rates = {1: 12.5e6, 2: 22.5e6, 3: 27.5e6, 4: 32.5e6}  # mu_i/mu_f = 0.5 0.9 1.1 1.3
    tr = merge(*(cbr(f, r, 0, 2 * SEC, length=1000 + 100 * f) for f, r in rates.items()))
    r = run(tr, "ckcd", rate_bps=C, extra=["--xstats-every-ms", "250"])
    t, xs = next((t, x) for t, x in r.xstats if t >= 1 * SEC)
    assert int(xs["active_flows"]) == 4
    flows = xs["flows"]
    dth = [flows[f]["dth_us"] for f in sorted(rates)]
    assert dth == sorted(dth, reverse=True) and len(set(dth)) == 4, dth
    for f, rate in rates.items():
        mu = flows[f]["mu_bps"]
        assert mu == pytest.approx(rate, rel=0.02)
        assert flows[f]["dth_us"] == pytest.approx(eq9_dth_us(mu, 4), rel=0.02, abs=2)
    # a flow exactly at its fair share gets D (the boundary condition we chose)
    assert eq9_dth_us(C / 4, 4) == pytest.approx(5000)


def test_dth_is_clamped():
    # one flow at 1 % of the link: d_th would be ~50 s; it is clamped to dth_max_ms
    tr = merge(cbr(1, 1e6, 0, SEC), cbr(2, 90e6, 0, SEC))
    r = run(tr, "ckcd dth_max_ms=40 dth_min_ms=1", rate_bps=C, extra=["--xstats-every-ms", "500"])
    flows = r.xstats[0][1]["flows"]
    assert flows[1]["dth_us"] == 40_000
    assert flows[2]["dth_us"] == 1_000  # 1.8x the fair share: eq. 9 goes negative


def test_enqueue_phase_compares_and_drops_pairs_when_qavg_above_qmin():
    # explicit thresholds low enough that q_avg passes q_min: the CHOKe-like
    # comparison runs and matched pairs are dropped together
    tr = merge(poisson(1, 150e6, 0, SEC, seed=5), poisson(2, 30e6, 0, SEC, seed=5))
    r = run(tr, "ckcd qmin=5 qmax=60 delta_ms=1000", rate_bps=C)
    matches = r.dropped("choke-match")
    assert matches and len(matches) % 2 == 0
    assert int(r.xstats[-1][1]["matched"]) * 2 == len(matches)
    heavy = sum(1 for p in matches if p["flow"] == 1)
    assert heavy > 0.8 * len(matches)  # the flow holding most of the buffer is hit


def test_qmin_qmax_clamped_to_buffer_when_bdp_does_not_fit():
    # 100 Mbit/s x 20 ms = 167 packets > 80: q_max = limit, q_min = limit/3
    r = run(cbr(1, 1e6, 0, 10 * MS), "ckcd limit=80 rate_bps=100000000 rtt_ms=20")
    xs = r.xstats[-1][1]
    assert (xs["bdp_pkts"], xs["qmin_eff"], xs["qmax_eff"]) == ("167", "26", "80")
    # a small BDP fits: the paper's q_min = BDP, q_max = 3 BDP
    r = run(cbr(1, 1e6, 0, 10 * MS), "ckcd limit=80 rate_bps=10000000 rtt_ms=20")
    xs = r.xstats[-1][1]
    assert (xs["bdp_pkts"], xs["qmin_eff"], xs["qmax_eff"]) == ("17", "17", "51")
