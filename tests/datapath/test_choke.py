"""CHOKe (seed 004 Algorithm 1, Linux sch_choke): an arrival that matches a
random queued packet's flow is dropped together with it."""

from __future__ import annotations

from collections import Counter

from replaylib import SEC, merge, poisson, run

C = 100_000_000


def test_single_flow_overload_matches_and_drops_both_packets():
    # one flow at 1.3x the link: the queue builds, q_avg passes min, and every
    # comparison draws a packet of the same flow
    r = run(poisson(1, 130e6, 0, SEC, seed=1), "choke limit=80 min=20 max=60", rate_bps=C,
            extra=["--xstats-every-ms", "10"])
    matches = r.dropped("choke-match")
    xs = r.xstats[-1][1]
    assert int(xs["matched"]) > 100
    # each match drops two packets and counts each of them
    assert len(matches) == 2 * int(xs["matched"])
    assert r.stats["total"]["drops"]["choke-match"] == len(matches)
    # the pair: the arrival (sojourn 0) and a queued packet, at the same instant
    by_time = Counter(p["t_ns"] for p in matches)
    assert set(by_time.values()) == {2}
    for t in list(by_time)[:50]:
        pair = [p for p in matches if p["t_ns"] == t]
        assert sorted(p["sojourn_ns"] == 0 for p in pair) == [False, True]
        assert pair[0]["flow"] == pair[1]["flow"]
    # the average hovered at min (the matches hold it there), far below max:
    # matches, not forced or overflow drops, did the work
    avg = [float(x["q_avg"]) for t, x in r.xstats if SEC // 4 <= t < SEC]
    assert 18 < sum(avg) / len(avg) < 30 and max(avg) < 60, avg
    # (the buffer overflows only while q_avg is still climbing to min)
    assert not [p for p in r.dropped("overflow") if p["t_arr_ns"] >= SEC // 4]
    assert int(xs["forced_drops"]) == 0


def test_no_comparison_below_min():
    # 80 % load: the queue stays short, q_avg below min, nothing is compared
    r = run(poisson(1, 80e6, 0, SEC, seed=2), "choke min=20 max=60", rate_bps=C)
    assert not r.dropped()
    assert r.xstats[-1][1]["matched"] == "0"


def test_heavy_flow_takes_the_matches():
    tr = merge(poisson(1, 150e6, 0, SEC, seed=3), poisson(2, 30e6, 0, SEC, seed=3))
    r = run(tr, "choke", rate_bps=C)
    by_flow = Counter(p["flow"] for p in r.dropped("choke-match"))
    assert by_flow[1] > 5 * by_flow[2]
