"""RED (Linux sch_red): the early-drop rate grows with the average queue."""

from __future__ import annotations

from replaylib import SEC, poisson, run

C = 100_000_000


def red_point(load: float):
    r = run(poisson(1, load * C, 0, 3 * SEC, seed=4), "red limit=200 min=10 max=150 max_p=0.1 wlog=9",
            rate_bps=C, extra=["--xstats-every-ms", "20"])
    avg = [float(x["q_avg"]) for t, x in r.xstats if t >= SEC // 2]
    arrivals = [p for p in r.packets if p["t_arr_ns"] >= SEC // 2]
    early = sum(1 for p in arrivals if p["reason"] == "early")
    return sum(avg) / len(avg), early / len(arrivals), r


def test_drop_rate_grows_with_average_queue():
    points = [red_point(load) for load in (1.02, 1.05, 1.1, 1.2)]
    avgs = [a for a, _, _ in points]
    rates = [d for _, d, _ in points]
    assert avgs == sorted(avgs), avgs
    assert rates == sorted(rates) and rates[0] > 0, rates
    # RED, not the buffer, did the dropping
    for _, _, r in points:
        assert r.stats["total"]["drops"]["overflow"] == 0


def test_no_drops_while_average_below_min():
    r = run(poisson(1, 50e6, 0, SEC, seed=1), "red min=20 max=60", rate_bps=C)
    assert not r.dropped()


def test_forced_drop_above_max():
    # far above capacity: the average crosses max and arrivals are dropped outright
    r = run(poisson(1, 400e6, 0, SEC, seed=1), "red limit=80 min=5 max=20 max_p=0.01", rate_bps=C)
    assert int(r.xstats[-1][1]["forced_drops"]) > 0


def test_idle_period_decays_the_average():
    # a burst builds the average, then 200 ms of silence: the average seen by
    # the next arrival has decayed as if ~1700 packets had met an empty queue
    burst = poisson(1, 300e6, 0, 50_000_000, seed=1)
    later = [(450_000_000, 1, 1500, 0)]
    r = run(burst + later, "red limit=1000 min=500 max=900", rate_bps=C,
            extra=["--xstats-every-ms", "100"])
    before = float(r.xstats[0][1]["q_avg"])  # t = 100 ms, queue already empty
    after = float(r.xstats[-1][1]["q_avg"])
    assert before > 5
    assert after < 0.1 * before
