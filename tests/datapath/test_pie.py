"""PIE (RFC 8033; Linux sch_pie's constants, docs/baselines.md): every tupdate the drop
probability p moves by alpha (qdelay - target) + beta (qdelay - qdelay_old); arrivals are
dropped early with probability p, de-randomized, after a burst allowance. The core has no
timer: the updates due run at the next enqueue or dequeue, one per elapsed period.

The traces are open-loop: nothing slows down when dropped, so p climbs higher than a TCP
flow would let it. xstats reports p as of the last enqueue or dequeue."""

from __future__ import annotations

import bisect

import pytest

from replaylib import CE, ECT0, MS, SEC, cbr, merge, run, with_ecn

C = 100_000_000
TUPDATE = 15 * MS


def probs(r) -> list[tuple[int, float, int]]:
    """(t_ns, p, qdelay_us) of each xstats sample."""
    return [(t, float(x["prob"]), int(x["qdelay_us"])) for t, x in r.xstats]


def test_probability_rises_under_a_standing_queue_and_falls_when_it_drains():
    """Rule (RFC 8033 4.2): while the queue delay stays above target and is not falling, each
    update raises p; once the queue has drained (no delay for two updates) each update lowers
    it (the alpha term below target and the 1/64 decay) until it is 0."""
    tr = merge(cbr(1, 120e6, 0, 1500 * MS), cbr(1, 60e6, 1500 * MS, 5 * SEC))
    r = run(tr, "pie limit=100000", rate_bps=C, extra=["--xstats-every-ms", "15"])
    samples = probs(r)
    rising = [(t, p, d) for t, p, d in samples if 200 * MS <= t <= 900 * MS]
    assert all(d > 15_000 for _, _, d in rising), "premise: above target all along"
    assert all(b[1] > a[1] for a, b in zip(rising, rising[1:])), rising
    drained = [(t, p, d) for t, p, d in samples if t >= 1600 * MS]
    assert all(d == 0 for _, _, d in drained), "premise: the 60 Mbit/s phase keeps the queue empty"
    assert drained[0][1] > 0.1
    falling = [p for _, p, _ in drained if p > 0]
    assert all(b < a for a, b in zip(falling, falling[1:]))
    assert drained[-1][1] == 0


def test_burst_allowance_lets_an_initial_burst_through_undropped():
    """Rule (RFC 8033 5.3): no early drop while the burst allowance lasts, max_burst_ms from
    the start (150 ms by default); it runs down by tupdate at each update, so the first
    early drop comes no sooner than max_burst_ms. The same 150 % overload with no allowance
    loses over a hundred packets to early drops in the second a 1000 ms allowance spares."""
    tr = cbr(1, 150e6, 0, 2 * SEC)
    early = {}
    for burst in (0, 150, 1000):
        r = run(tr, f"pie limit=100000 max_burst_ms={burst}", rate_bps=C)
        early[burst] = sorted(p["t_ns"] for p in r.dropped("early"))
        assert not r.dropped("overflow")
    assert early[150][0] >= 150 * MS and early[1000][0] >= 1000 * MS
    assert len([t for t in early[0] if t < 1000 * MS]) > 100


def test_ecn_marks_below_ten_percent_and_drops_above():
    """Rule (sch_pie with ecn): an early decision on an ECN-capable packet is a CE mark while
    p <= 10 % and a drop above; a Not-ECT packet is always dropped. p only changes at an
    update, so the samples either side of a decision (1 ms apart, one update at most
    between them) bracket the p it was made with."""
    tr = merge(with_ecn(cbr(1, 100e6, 0, 2 * SEC), ECT0), with_ecn(cbr(2, 40e6, 0, 2 * SEC), 0))
    r = run(tr, "pie ecn=1 limit=100000", rate_bps=C, extra=["--xstats-every-ms", "1"])
    times = [t for t, _ in r.xstats]
    p_at = [float(x["prob"]) for _, x in r.xstats]

    def around(t):
        i = bisect.bisect_left(times, t)
        return p_at[max(0, i - 1)], p_at[min(i, len(p_at) - 1)]

    marks, drops = r.marked("early", flow=1), r.dropped("early", flow=1)
    assert len(marks) > 20 and len(drops) > 20
    # a mark is decided on arrival (t_ns is when the marked packet left), a drop then too
    assert all(min(around(p["t_arr_ns"])) <= 0.1 for p in marks)
    assert all(max(around(p["t_arr_ns"])) > 0.1 for p in drops)
    assert all(p["ecn"] == CE for p in marks)
    assert r.dropped("early", flow=2) and not r.marked(flow=2)


def test_limit_overflow_drops_arrivals_at_a_full_queue():
    """Rule: `limit` packets at most; an arrival at a full queue is dropped (overflow), also
    during the burst allowance, which only spares early drops."""
    r = run(cbr(1, 300e6, 0, 100 * MS), "pie limit=50", rate_bps=C, extra=["--xstats-every-ms", "10"])
    over = r.dropped("overflow")
    assert over and not r.dropped("early")
    assert max(int(x["qlen_pkts"]) for _, x in r.xstats) <= 50
    assert int(r.xstats[-1][1]["maxq"]) == 50
    assert int(r.xstats[-1][1]["overlimit"]) == len(over)


def test_an_idle_queue_decays_as_the_updates_it_missed_would_decay_it():
    """Rule (RFC 8033 4.2, run lazily): an idle queue gets no event, so the updates due run at
    the next one, one per tupdate elapsed, each seeing no delay: p falls at least by the 1/64
    of every update after the first two, and after long enough it is 0 and the burst
    allowance is back. The update counter counts every period since the first arrival."""
    load = cbr(1, 150e6, 0, SEC)
    short = load + [(SEC + 300 * MS, 1, 1500, 0)]
    long = load + [(SEC + 10 * SEC, 1, 1500, 0)]
    spec = "pie limit=100000"
    before = run(load, spec, rate_bps=C, extra=["--xstats-every-ms", "1000"])
    busy_until = max(p["t_ns"] for p in before.sent())
    p0 = float(before.xstats[-1][1]["prob"])
    assert p0 > 0.5, "premise: the overload drove p up"
    after = run(short, spec, rate_bps=C).xstats[-1][1]
    idle_updates = (SEC + 300 * MS - busy_until) // TUPDATE
    assert 0 < float(after["prob"]) <= p0 * (63 / 64) ** (idle_updates - 2), (p0, after["prob"])
    last = run(long, spec, rate_bps=C).xstats[-1][1]
    assert float(last["prob"]) == 0 and int(last["burst_us"]) == 150_000
    assert int(last["updates"]) == (SEC + 10 * SEC) // TUPDATE


@pytest.mark.parametrize("spec,idle_s,probe_ns", [
    ("pie limit=100000 alpha=0.0001 target_ms=1", 10, MS),
    ("pie limit=100000 dq_rate_estimator=1 tupdate_ms=1 max_burst_ms=10000", 9, MS // 2)])
def test_a_long_idle_ends_as_the_updates_on_time_would_leave_it(spec, idle_s, probe_ns):
    """Rule (lazy_update.h, an idle queue's updates at once): however long the idle, p, the
    delays, the burst allowance, the rate and the update count at the next packet equal those of
    the same run with a probe packet every probe_ns, which runs each update on time as a timer
    would. With alpha x target small p is still decaying after 10 s (666 updates); with the rate
    estimator and 1 ms updates p reaches 0 within the first second and refills the 10 s
    allowance, which then runs down 1 ms an update: 9,000 updates leave part of it."""
    load = cbr(1, 150e6, 0, SEC)
    alone = run(load, spec, rate_bps=C)
    drained = max(p["t_ns"] for p in alone.sent()) + MS
    end = drained + idle_s * SEC
    last = [(end, 1, 1500, 0)]
    probes = [(t, 2, 64, 0) for t in range(drained, end, probe_ns)]
    lazy = run(load + last, spec, rate_bps=C).xstats[-1][1]
    timed = run(merge(load, probes, last), spec, rate_bps=C).xstats[-1][1]
    assert float(alone.xstats[-1][1]["prob"]) > 0.5, "premise: the overload drove p up"
    keys = ("prob", "qdelay_us", "qdelay_old_us", "burst_us", "avg_dq_rate", "updates")
    assert [lazy[k] for k in keys] == [timed[k] for k in keys]
    assert 0 < float(lazy["prob"]) < 0.001 if "alpha" in spec else 0 < int(lazy["burst_us"]) < 10_000_000


def test_drops_are_de_randomized_between_0_85_and_8_5_over_p():
    """Rule (RFC 8033 5.4): p accumulates over the arrivals since the last drop; no drop
    while the sum is below 0.85, a drop for certain once it reaches 8.5. So between two early
    drops the arrivals number at least 0.85 / p_max - 1 and at most 8.5 / p_min + 1 (p's range
    over that stretch)."""
    tr = cbr(1, 125e6, 0, 3 * SEC)
    r = run(tr, "pie limit=100000", rate_bps=C, extra=["--xstats-every-ms", "1"])
    times = [t for t, _ in r.xstats]
    p_at = [float(x["prob"]) for _, x in r.xstats]
    drops = sorted(r.dropped("early"), key=lambda p: p["seq"])
    assert len(drops) > 100
    for a, b in zip(drops, drops[1:]):
        span = p_at[max(0, bisect.bisect_left(times, a["t_ns"]) - 1):bisect.bisect_right(times, b["t_ns"]) + 1]
        between = b["seq"] - a["seq"] - 1
        assert 0.85 / max(span) - 1 <= between <= 8.5 / min(span) + 1, (a["seq"], b["seq"], min(span), max(span))


def test_bytemode_scales_the_probability_by_packet_size():
    """Rule (sch_pie's bytemode): with bytemode=1 a packet's drop probability is p x size / the
    largest packet, so 150-byte packets are dropped about a tenth as often as 1500-byte ones;
    without it both sizes are dropped alike."""
    tr = merge(cbr(1, 90e6, 0, SEC), cbr(2, 30e6, 0, SEC, length=150))
    share = {}
    for mode in (0, 1):
        r = run(tr, f"pie limit=100000 bytemode={mode}", rate_bps=C)
        share[mode] = [len(r.dropped("early", flow=f)) / r.flows[f]["arr_pkts"] for f in (1, 2)]
    big, small = share[1]
    assert small < 0.3 * big, share
    big, small = share[0]
    assert 0.5 * big < small < 2 * big, share


def test_dequeue_rate_estimator_measures_the_link_and_drives_p():
    """Rule (RFC 8033 4.1 and 5.1, dq_rate_estimator=1): the dequeue rate is measured over
    16 KiB of departures while that much is queued, and the queue delay is the backlog over
    it (Little's law): the rate comes out as the link's 12.5 MB/s, and under a standing
    queue p rises as with timestamps."""
    r = run(cbr(1, 120e6, 0, SEC), "pie limit=100000 dq_rate_estimator=1", rate_bps=C,
            extra=["--xstats-every-ms", "100"])
    rate = int(r.xstats[-2][1]["avg_dq_rate"])
    assert abs(rate - C / 8) < 0.02 * C / 8, rate
    p = [float(x["prob"]) for t, x in r.xstats if 200 * MS <= t <= 800 * MS]
    assert p[0] > 0 and all(b > a for a, b in zip(p, p[1:])), p
    sample = r.xstats[-2][1]
    little = int(sample["qlen_bytes"]) * 1e6 / rate
    assert abs(int(sample["qdelay_us"]) - little) < 0.1 * little, (sample, little)


@pytest.mark.parametrize("spec", ["pie", "pie dq_rate_estimator=1"])
def test_no_early_drop_below_target(spec):
    """Rule (RFC 8033 5.3/4.2): a queue that never waits target/2 keeps p at 0 and drops
    nothing (60 % load)."""
    r = run(cbr(1, 60e6, 0, SEC), spec, rate_bps=C, extra=["--xstats-every-ms", "100"])
    assert not r.dropped()
    assert all(float(x["prob"]) == 0 for _, x in r.xstats)
