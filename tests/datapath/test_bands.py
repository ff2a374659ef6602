"""bands: DSCP classification, weighted work-conserving DRR, penalized band."""

from __future__ import annotations

import pytest

from replaylib import SEC, merge, poisson, run

C = 100_000_000
T = 2 * SEC
WARM = SEC // 4


def share(r, flow):
    return r.rate_bps(flow, WARM, T) / C


@pytest.mark.parametrize("weights,expect", [("1,3", (0.25, 0.75)), ("1,1", (0.5, 0.5)), ("2,1", (2 / 3, 1 / 3))])
def test_drr_shares_by_weight(weights, expect):
    # both bands overloaded (each alone could fill the link); flow 1 DSCP 0 ->
    # band 0, flow 2 DSCP 46 -> band 1
    tr = merge(poisson(1, 100e6, 0, T, dscp=0, seed=1), poisson(2, 100e6, 0, T, dscp=46, seed=1))
    r = run(tr, f"bands weights={weights} map=46:1 | droptail limit=80 | droptail limit=80", rate_bps=C)
    s1, s2 = share(r, 1), share(r, 2)
    # within 5 percentage points (Poisson arrivals, one-packet deficit overdraft)
    assert s1 == pytest.approx(expect[0], abs=0.05)
    assert s2 == pytest.approx(expect[1], abs=0.05)
    assert s1 + s2 >= 0.97


def test_mixed_packet_sizes_share_bytes_not_packets():
    tr = merge(poisson(1, 100e6, 0, T, length=300, dscp=0, seed=2),
               poisson(2, 100e6, 0, T, length=1500, dscp=10, seed=2))
    r = run(tr, "bands weights=1,1 map=10:1 | droptail limit=400 | droptail limit=80", rate_bps=C)
    assert share(r, 1) == pytest.approx(0.5, abs=0.05)


def test_idle_band_share_goes_to_the_other():
    # band 1 idle: band 0 gets the whole link though its weight is 1 of 4
    r = run(poisson(1, 120e6, 0, T, seed=3), "bands weights=1,3 | droptail | droptail", rate_bps=C)
    assert share(r, 1) >= 0.97
    # band 1 light (10 Mbit/s of its 75): band 0 takes the rest
    tr = merge(poisson(1, 120e6, 0, T, seed=3), poisson(2, 10e6, 0, T, dscp=46, seed=3))
    r = run(tr, "bands weights=1,3 map=46:1 | droptail | droptail", rate_bps=C)
    assert share(r, 2) == pytest.approx(0.10, abs=0.01)
    assert share(r, 1) >= 0.87


def test_classification_by_dscp_and_default_band():
    tr = merge(poisson(1, 5e6, 0, SEC // 10, dscp=46, seed=4), poisson(2, 5e6, 0, SEC // 10, dscp=10, seed=4),
               poisson(3, 5e6, 0, SEC // 10, dscp=0, seed=4))
    r = run(tr, "bands map=46:2,10:0 default=1 | droptail | droptail | droptail", rate_bps=C)
    bands = {p["flow"]: {q["band"] for q in r.packets if q["flow"] == p["flow"]} for p in r.packets}
    assert bands == {1: {2}, 2: {0}, 3: {1}}
    assert [b["deq_pkts"] for b in r.stats["bands"]] == [r.flows[2]["sent_pkts"], r.flows[3]["sent_pkts"],
                                                         r.flows[1]["sent_pkts"]]


def test_penalized_band_reports_penalty_and_keeps_inner_reason_per_band():
    tr = merge(poisson(1, 50e6, 0, SEC, seed=5), poisson(2, 150e6, 0, SEC, dscp=8, seed=5))
    r = run(tr, "bands weights=1,1 map=8:1 penalized=1 | droptail limit=80 | droptail limit=10", rate_bps=C)
    heavy = r.dropped(flow=2)
    assert heavy and all(p["reason"] == "penalty" for p in heavy)
    total = r.stats["total"]["drops"]
    band1 = r.stats["bands"][1]["drops"]
    assert total["penalty"] == len(heavy) == band1["overflow"]
    assert band1["penalty"] == 0 and total["overflow"] == r.stats["bands"][0]["drops"]["overflow"]


def test_separate_queues_protect_a_light_aggregate():
    """The Separate Queues use: two bands, equal weights, an AQM in each."""
    tr = merge(poisson(1, 150e6, 0, T, seed=6), poisson(2, 30e6, 0, T, dscp=46, seed=6))
    r = run(tr, "bands weights=1,1 map=46:1 | ckcd | ckcd", rate_bps=C)
    assert r.rate_bps(2, WARM, T) >= 0.95 * r.rate_bps(2, WARM, T, delivered=False)


@pytest.mark.parametrize("band_spec, band_rate", [("ckcd", C), ("ckcd rate_bps=60000000", 60_000_000)])
def test_a_band_is_given_the_whole_link_rate(band_spec, band_rate):
    """Checked and kept: a band's rate_bps left out is the link's, not its
    weighted share. The DRR is work-conserving, so a band alone (or beside idle ones) is
    served at up to the whole link; handing it its share (75 of 100 Mbit/s here) made CKCD
    in a lone band see every flow above C/I and drop the link empty (tests/integration/
    test_port_aqm.py fell below 80 % of the link). A band spec that names rate_bps keeps it."""
    tr = merge(poisson(1, 60e6, 0, T, dscp=0, seed=6), poisson(2, 60e6, 0, T, dscp=46, seed=6),
               poisson(3, 60e6, 0, T, dscp=46, seed=7))
    r = run(tr, f"bands weights=1,3 map=46:1 | droptail limit=80 | {band_spec}", rate_bps=C,
            extra=["--xstats-every-ms", "500"])
    xs = next(x for t, x in r.xstats if t >= SEC)
    assert (xs["active_flows"], xs["fair_share_bps"]) == ("2", str(band_rate // 2))
