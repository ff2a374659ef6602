"""ECN in the core (docs/ecn.md): a discipline given ecn=1 marks an ECN-capable packet CE
where it would have dropped it early, for delay or as a penalty, and still drops Not-ECT
packets and on overflow. The traces are open-loop (nothing slows down when marked), so a
queue that marks fills up to its limit: that is what tells marks from drops here."""

from __future__ import annotations

import pytest

from replaylib import CE, ECT0, MS, SEC, cbr, merge, poisson, run, run_raw, with_ecn

C = 100_000_000
OVERLOAD = poisson(1, 130e6, 0, SEC, seed=1)  # one flow at 1.3x the link


def verdicts(r):
    return [(p["seq"], p["verdict"], p["reason"]) for p in r.packets]


def test_red_marks_ect_packets_instead_of_early_drops_and_still_overflows():
    """Rule (sch_red with ecn): every early decision on an ECT packet is a mark, counted under
    'early' beside the drops; the marked packet is sent with CE; a full buffer still drops."""
    r = run(with_ecn(OVERLOAD, ECT0), "red ecn=1", rate_bps=C)
    marks = r.marked("early")
    assert len(marks) > 100
    assert not r.dropped("early")
    assert r.dropped("overflow"), "marks do not slow an open-loop sender: the buffer fills"
    assert all(p["ecn"] == CE for p in marks)
    assert all(p["ecn"] == ECT0 for p in r.sent() if p["mark"] is None)
    total = r.stats["total"]
    assert total["drops"]["early"] == 0
    # As in sch_red, the mark is made before the limit is checked: a marked arrival may still
    # overflow, and then counts as a mark and an overflow drop. Every other mark is sent.
    overflowed = [p for p in r.dropped("overflow") if p["mark"] == "early"]
    assert total["marks"]["early"] == len(marks) + len(overflowed)
    assert total["deq_pkts"] == len(r.sent())


def test_harddrop_drops_above_max_but_still_marks_between_the_thresholds():
    """Rule (sch_red's harddrop): q_avg above max drops even ECT packets; RED's probabilistic
    decisions below it stay marks."""
    r = run(with_ecn(OVERLOAD, ECT0), "red ecn=1 harddrop=1 limit=200 min=20 max=60", rate_bps=C,
            extra=["--xstats-every-ms", "1000"])
    xs = r.xstats[-1][1]
    assert int(xs["forced_drops"]) > 0 and int(xs["forced_marks"]) == 0
    assert int(xs["prob_marks"]) > 0 and int(xs["prob_drops"]) == 0
    assert len(r.dropped("early")) == int(xs["forced_drops"])


@pytest.mark.parametrize("spec", ["red ecn=1", "codel ecn=1", "choke ecn=1", "sred ecn=1", "fred ecn=1",
                                  "sfb ecn=1", "hdcodel ecn=1", "ckcd ecn=1", "fq_codel ecn=1",
                                  "pie ecn=1 max_burst_ms=0", "dualpi2 ecn=1"])
def test_not_ect_packets_are_never_marked(spec):
    """Rule: ecn=1 changes nothing for Not-ECT packets (a non-IP frame is Not-ECT): every
    verdict is the one ecn=0 gives, packet by packet."""
    trace = merge(poisson(1, 80e6, 0, SEC // 2, seed=3), poisson(2, 60e6, 0, SEC // 2, seed=4))
    on, off = run(trace, spec, rate_bps=C), run(trace, spec.replace("ecn=1", "ecn=0"), rate_bps=C)
    assert not on.marked()
    assert verdicts(on) == verdicts(off)
    assert on.dropped(), "the trace overloads the link: there is something to mark"


def test_dualpi2_marks_classic_ect_with_p_squared_and_l4s_whatever_ecn_says():
    """Rule (sch_dualpi2, docs/baselines.md): in C an ECN-capable packet (ECT(0)) is marked
    where a Not-ECT one is dropped (ecn=1, Linux's behaviour and our default; ecn=0 drops it
    instead); L (ECT(1)) is always marked, never dropped below overload. With drop_overload=0
    p' stays at 1/k, so there is no overload; with it (the default) an overloaded queue drops
    classic ECT packets too, and L's."""
    trace = merge(with_ecn(poisson(1, 70e6, 0, SEC, seed=11), ECT0), with_ecn(poisson(2, 40e6, 0, SEC, seed=12), 1),
                  poisson(3, 20e6, 0, SEC, seed=13))
    marked = run(trace, "dualpi2 limit=100000 drop_overload=0", rate_bps=C)
    dropped = run(trace, "dualpi2 limit=100000 drop_overload=0 ecn=0", rate_bps=C)
    for r in (marked, dropped):
        assert len(r.marked("early", 2)) > 1000 and not r.dropped(flow=2)
        assert r.dropped("early", 3) and not r.marked(flow=3)
    assert len(marked.marked("early", 1)) > 500 and not marked.dropped(flow=1)
    assert len(dropped.dropped("early", 1)) > 500 and not dropped.marked(flow=1)
    assert all(p["ecn"] == CE for p in marked.marked())
    overload = run(trace, "dualpi2 limit=100000", rate_bps=C)
    assert overload.dropped("early", 1) and overload.dropped("early", 2)


def test_an_arrival_already_ce_counts_as_marked():
    """Rule (as INET_ECN_set_ce): a packet that arrives CE is ECN-capable and may be marked
    again; it leaves CE."""
    r = run(with_ecn(OVERLOAD, CE), "red ecn=1", rate_bps=C)
    assert r.marked("early") and not r.dropped("early")
    assert all(p["ecn"] == CE for p in r.sent())


def test_codel_marks_at_dequeue_and_its_law_advances_as_after_a_drop():
    """Rule (sch_codel with ecn): the packet the law chooses is marked and sent; count and the
    next signal time advance as after a drop, so marks come Delta/sqrt(count) apart, faster
    and faster, rather than all at once."""
    r = run(with_ecn(OVERLOAD, ECT0), "codel ecn=1 limit=1000", rate_bps=C)
    marks = r.marked("delay")
    assert len(marks) > 20 and not r.dropped("delay")
    gaps = [b["t_ns"] - a["t_ns"] for a, b in zip(marks, marks[1:])]
    assert min(gaps) > 0, "one mark per scheduled signal, not a burst"
    assert gaps[0] > gaps[-1], "the control law shortens the interval as count grows"
    assert r.stats["total"]["marks"]["delay"] == len(marks)


def test_choke_match_still_drops_both_packets():
    """Rule (sch_choke): a match drops both packets, ECN or not; RED's decisions mark."""
    # ten flows, so that most comparisons draw another flow's packet and RED decides
    flows = merge(*(poisson(f, 13e6, 0, SEC, seed=9) for f in range(1, 11)))
    r = run(with_ecn(flows, ECT0), "choke ecn=1 limit=80 min=20 max=60", rate_bps=C)
    assert r.dropped("choke-match") and r.marked("early")
    assert not r.dropped("early")


def test_sfb_marks_and_drops_once_p_min_passes_one_half():
    """Rule (sch_sfb): an early decision marks an ECT packet, but with p_min above 1/2 a share
    2 (p_min - 1/2) of them is dropped: the flow ignores the marks."""
    r = run(with_ecn(OVERLOAD, ECT0), "sfb ecn=1 limit=1000 max=1000", rate_bps=C)
    assert len(r.marked("early")) > 50
    assert r.dropped("early"), "an open-loop flow drives p_min past 1/2"
    off = run(with_ecn(OVERLOAD, ECT0), "sfb limit=1000 max=1000", rate_bps=C)
    assert not off.marked() and off.dropped("early")


def test_ckcd_marks_a_late_flow_for_delta_then_drops_it():
    """Rule (docs/ckcd.md): a flow in the dropping state has its late ECT packets marked for
    Delta; still late after Delta, it is not answering the marks (an open-loop flow here, BBRv1
    on a real link) and its late packets are dropped, so marking never lets a flow keep more
    than its share. The p_c decisions mark; q_avg above q_max and a match still drop."""
    delta = 50
    trace = with_ecn(merge(cbr(1, 70e6, 0, SEC), cbr(2, 50e6, 0, SEC)), ECT0)
    r = run(trace, f"ckcd ecn=1 limit=400 delta_ms={delta} qmin=100 qmax=300", rate_bps=C)
    for flow in (1, 2):
        marks, drops = r.marked("delay", flow), r.dropped("delay", flow)
        if not drops:
            continue
        assert marks, f"flow {flow}: dropped for delay without a mark first"
        assert drops[0]["t_ns"] - marks[0]["t_ns"] >= delta * MS
    assert r.dropped("delay") and r.marked("delay")
    assert r.stats["total"]["marks"]["delay"] == len(r.marked("delay"))
    assert not r.marked("choke-match") and not r.marked("overflow")


def test_hdcodel_marks_the_thinned_drops_but_still_drops_the_heavy_connection():
    """Rule (docs/ecn.md): the heavy connection's drops police it ("always dropped"), so they
    stay drops with ecn=1; the other connections' thinned drops become marks."""
    trace = with_ecn(merge(poisson(1, 90e6, 0, 4 * SEC, seed=1), poisson(2, 15e6, 0, 4 * SEC, seed=2),
                           poisson(3, 15e6, 0, 4 * SEC, seed=3)), ECT0)
    r = run(trace, "hdcodel ecn=1 key=flow limit=100000 interval_ms=10", rate_bps=C,
            extra=["--xstats-every-ms", "4000"])
    x = r.xstats[-1][1]
    assert x["heavy_key"] == "1"
    assert len(r.dropped("delay", 1)) == int(x["heavy_drops"]) > 1000 and not r.marked(flow=1)
    thinned = r.marked("delay", 2) + r.marked("delay", 3)
    assert len(thinned) == int(x["thinned_marks"]) > 50 and int(x["thinned_drops"]) == 0
    assert not r.dropped("delay", 2) and not r.dropped("delay", 3)


def test_bands_count_their_bands_marks_and_penalized_marks_as_penalty():
    """Rule: a band's marks show at the top level as its drops do - those of the penalized band
    under 'penalty', the band's own counters keep the inner reason."""
    trace = merge(with_ecn(poisson(1, 130e6, 0, SEC // 2, dscp=0, seed=5), ECT0),
                  with_ecn(poisson(2, 130e6, 0, SEC // 2, dscp=46, seed=6), ECT0))
    r = run(trace, "bands map=46:1 penalized=1 | red ecn=1 | red ecn=1", rate_bps=C)
    top, b0, b1 = r.stats["total"]["marks"], r.stats["bands"][0]["marks"], r.stats["bands"][1]["marks"]
    assert b0["early"] > 0 and b1["early"] > 0
    assert top["early"] == b0["early"] and top["penalty"] == b1["early"]
    assert sum(top.values()) == len(r.marked()) + len([p for p in r.dropped() if p["mark"]])


@pytest.mark.parametrize("spec,words", [
    ("droptail ecn=1", "unknown parameter 'ecn'"),
    ("cocoa ecn=1", "unknown parameter 'ecn'"),
    ("care ecn=1", "unknown parameter 'ecn'"),
    ("red ecn=2", "out of range"),
    ("codel ecn=yes", ""),
])
def test_ecn_where_it_is_not_taken_is_refused_naming_the_parameter(spec, words):
    """Bad input: ecn on a discipline that does not take it, or out of 0..1, is refused and
    names the parameter."""
    cp = run_raw(["--describe", "--qdisc", spec])
    assert cp.returncode == 2
    assert "ecn" in cp.stderr and words in cp.stderr, cp.stderr


def test_replay_reads_the_ecn_column_and_counts_ce():
    """A CE count in a replay: the number of CE packets out equals the marks the totals report,
    per flow and in all, and only flows sent ECT carry them."""
    trace = merge(with_ecn(poisson(1, 70e6, 0, SEC, seed=7), ECT0), poisson(2, 70e6, 0, SEC, seed=8))
    r = run(trace, "red ecn=1", rate_bps=C)
    ce = [p for p in r.sent() if p["ecn"] == CE]
    assert ce and all(p["flow"] == 1 for p in ce)
    overflowed = [p for p in r.dropped() if p["mark"]]
    assert len(ce) + len(overflowed) == sum(r.flows[1]["marks"].values()) == \
        sum(r.stats["total"]["marks"].values())
    assert sum(r.flows[2]["marks"].values()) == 0 and r.dropped("early", 2)
