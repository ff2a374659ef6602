"""HeavyHitterDetector on synthetic sample streams (time passed in, so deterministic)."""

from __future__ import annotations

import random

import pytest

from coex.heavy_hitters import HeavyHitterConfig, HeavyHitterDetector
from coex.sflow import FlowKey

ELEPHANT = FlowKey("10.0.0.1", "10.0.0.3", 6, 43210, 5201)
MOUSE = FlowKey("10.0.0.2", "10.0.0.4", 6, 40000, 80)
FRAME = 1518
THRESHOLD = 10e6


def sample_times(rate_bps, start, stop, sampling=64, frame=FRAME, seed=1):
    """Times of the sampled packets of a flow of `frame`-byte packets at rate_bps from start to
    stop, each packet sampled with probability 1/sampling (geometric gaps)."""
    rng = random.Random(seed)
    pkt_s = frame * 8 / rate_bps
    t, out = start, []
    while True:
        t += pkt_s * (int(rng.expovariate(1.0) * sampling) + 1)  # ~ geometric(1/sampling)
        if t >= stop:
            return out
        out.append(t)


def streams(det, flows, start, stop, sampling=64, frame=FRAME, tick_s=0.25):
    """flows: [(key, rate_bps, seed)], all from start to stop, merged in time; tick() every
    tick_s. Returns the events."""
    merged = sorted((t, key) for key, rate, seed in flows
                    for t in sample_times(rate, start, stop, sampling, frame, seed))
    events, next_tick = [], start
    for t, key in merged + [(stop, None)]:
        while next_tick <= t:
            events += det.tick(next_tick)
            next_tick += tick_s
        if key is not None:
            events += det.observe(key, frame, sampling, t)
    return events


def stream(det, key, rate_bps, start, stop, seed=1, **kw):
    return streams(det, [(key, rate_bps, seed)], start, stop, **kw)


def absolute(**kw):
    return HeavyHitterDetector(HeavyHitterConfig(threshold_bps=THRESHOLD, **kw))


def test_young_flow_estimate_leaves_the_first_sample_out():
    det = absolute(min_samples=1, window_s=5.0, min_window_s=1.0)
    det.observe(ELEPHANT, 1000, 10, 10.0)
    assert det.estimate_bps(ELEPHANT, 10.0) == 0.0  # one sample: a start, no rate yet
    det.observe(ELEPHANT, 1000, 10, 12.0)
    assert det.estimate_bps(ELEPHANT, 12.0) == pytest.approx(8 * 10_000 / 2.0)
    det.observe(ELEPHANT, 1000, 10, 14.0)
    assert det.estimate_bps(ELEPHANT, 14.0) == pytest.approx(8 * 20_000 / 4.0)
    # at 15.0 the first sample leaves the window; the window is full: all in it count
    assert det.estimate_bps(ELEPHANT, 15.0) == pytest.approx(8 * 20_000 / 5.0)


def test_flow_at_twice_the_threshold_is_detected_within_the_window():
    det = absolute()
    events = stream(det, ELEPHANT, 2 * THRESHOLD, 0.0, 6.0)
    detected = [e for e in events if e.kind == "detected"]
    assert len(detected) == 1
    e = detected[0]
    assert e.key == ELEPHANT and e.reason == "above_high" and e.mode == "absolute"
    assert e.time_s < 1.0  # well within the 5 s window
    assert e.estimate_bps >= THRESHOLD and e.threshold_bps == THRESHOLD
    assert det.heavy_hitters() == {ELEPHANT: e.time_s}
    # and the steady-state estimate is close to the truth (500 samples/5 s: ~5 % noise)
    assert det.estimate_bps(ELEPHANT, 6.0) == pytest.approx(2 * THRESHOLD, rel=0.15)


@pytest.mark.parametrize("seed", range(5))
def test_flow_below_the_threshold_is_never_detected(seed):
    det = absolute()
    events = stream(det, MOUSE, 0.5 * THRESHOLD, 0.0, 30.0, seed=seed)
    assert events == []


def test_hysteresis_keeps_a_flow_between_low_and_high():
    # The band between low and high must be wider than the sampling noise of the estimate:
    # at 1-in-16, 9 Mbit/s of 1518-byte frames gives ~185 samples per 5 s window (7 %).
    det = absolute(release_fraction=0.6)
    stream(det, ELEPHANT, 2 * THRESHOLD, 0.0, 6.0, sampling=16)
    # drops to 0.9 x threshold: above low (0.6), below high: stays a heavy hitter
    events = stream(det, ELEPHANT, 0.9 * THRESHOLD, 6.0, 20.0, seed=2, sampling=16)
    assert events == [] and ELEPHANT in det.heavy_hitters()
    # drops to 0.3 x: released, reason below_low, at an estimate under the low threshold
    events = stream(det, ELEPHANT, 0.3 * THRESHOLD, 20.0, 30.0, seed=3, sampling=16)
    assert [e.kind for e in events] == ["released"]
    assert events[0].reason == "below_low" and events[0].estimate_bps < 0.6 * THRESHOLD
    assert events[0].threshold_bps == pytest.approx(0.6 * THRESHOLD)
    assert events[0].time_s < 20.0 + 5.0


def test_minimum_hold_time():
    det = absolute(min_hold_s=3.0, window_s=1.0, min_window_s=0.5)
    events = stream(det, ELEPHANT, 3 * THRESHOLD, 0.0, 1.0)
    t_detect = events[0].time_s
    events = stream(det, ELEPHANT, 0.01 * THRESHOLD, 1.0, 10.0, seed=4)  # (almost) stops at 1 s
    assert [e.kind for e in events] == ["released"]
    assert events[0].time_s >= t_detect + 3.0
    assert events[0].time_s <= t_detect + 3.0 + 0.25 + 1e-9  # the first tick after the hold


def test_release_after_the_flow_stops():
    det = absolute()
    stream(det, ELEPHANT, 2 * THRESHOLD, 0.0, 6.0)
    events = []
    t = 6.0
    while t < 15.0:
        t += 0.25
        events += det.tick(t)
    assert [e.kind for e in events] == ["released"]
    # the estimate decays as samples leave the window: below 7 Mbit/s after ~1.75 s of 5
    assert 6.0 < events[0].time_s <= 6.0 + 5.0
    assert det.heavy_hitters() == {}
    assert len(det) == 0  # idle flows are forgotten once their window is empty
    # ... and an idle release says so once the window is empty
    det2 = absolute(min_hold_s=10.0)
    stream(det2, ELEPHANT, 2 * THRESHOLD, 0.0, 2.0)
    ev2 = []
    for i in range(1, 60):
        ev2 += det2.tick(2.0 + i * 0.25)
    assert ev2[0].reason == "idle" and ev2[0].estimate_bps == 0.0


def test_detected_again_after_release():
    det = absolute(window_s=1.0, min_window_s=0.5, min_hold_s=0.5)
    ev = stream(det, ELEPHANT, 3 * THRESHOLD, 0.0, 2.0)
    ev += stream(det, ELEPHANT, 0.0001 * THRESHOLD, 2.0, 5.0)
    ev += stream(det, ELEPHANT, 3 * THRESHOLD, 5.0, 7.0, seed=9)
    assert [e.kind for e in ev] == ["detected", "released", "detected"]


def test_capacity_share_threshold():
    det = HeavyHitterDetector(HeavyHitterConfig(capacity_bps=100e6, capacity_share=0.2))
    assert det.high_threshold_bps() == 20e6 and det.low_threshold_bps() == pytest.approx(14e6)
    assert stream(det, MOUSE, 15e6, 0.0, 10.0) == []
    ev = stream(det, ELEPHANT, 40e6, 10.0, 14.0)
    assert ev[0].kind == "detected" and ev[0].mode == "capacity_share"


def test_fair_share_threshold_follows_active_flows():
    det = HeavyHitterDetector(HeavyHitterConfig(capacity_bps=100e6, fair_share_multiple=2.0))
    keys = [FlowKey("10.0.0.1", "10.0.0.3", 6, p, 5201) for p in range(10)]
    # ten flows at 5 Mbit/s each and one at 30: fair share 100/11 = 9.1, high 18.2 Mbit/s
    events = streams(det, [(k, 5e6, 100 + i) for i, k in enumerate(keys)], 0.0, 8.0)
    assert events == []
    assert det.active_flows() == 10
    assert det.high_threshold_bps() == pytest.approx(2 * 100e6 / 10)
    ev = stream(det, ELEPHANT, 30e6, 8.0, 12.0)
    assert [e.kind for e in ev] == ["detected"] and ev[0].mode == "fair_share"
    assert det.active_flows() == 11  # the mice stopped at 8 s but are still in the window
    det.tick(13.5)
    assert det.active_flows() == 1  # a window later only the elephant is left
    assert det.high_threshold_bps() == pytest.approx(200e6)


def test_rate_reports_from_an_external_analyser():
    det = absolute()
    assert det.observe_rate(ELEPHANT, 5e6, 0.0) == []
    ev = det.observe_rate(ELEPHANT, 25e6, 1.0)
    assert ev[0].kind == "detected" and ev[0].estimate_bps == 25e6  # min_samples does not apply
    assert det.estimate_bps(ELEPHANT, 2.0) == 25e6
    ev = det.tick(7.0)  # no report for longer than the window: stale, idle
    assert [(e.kind, e.reason) for e in ev] == [("released", "idle")]


def test_observe_sample_uses_the_decoded_sample():
    import os
    from coex.sflow import decode_datagram
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "sflow", "tcp5201_2.bin")
    dg = decode_datagram(open(path, "rb").read())
    det = HeavyHitterDetector(HeavyHitterConfig(threshold_bps=3e6, min_samples=1))
    events = []
    for now in (0.0, 0.5):  # the datagram's samples arrive twice: a start, then a rate
        for s in dg.flow_samples:
            events += det.observe_sample(s, now)
    key = FlowKey("10.0.0.1", "10.0.0.3", 6, 55284, 5201)
    # the second delivery's 5 data samples of 1518 bytes (frame_length) x 64 (sampling_rate),
    # over the 1 s min_window: 3.9 Mbit/s; the ACK flow's one sample per delivery is a mouse
    assert det.estimate_bps(key, 0.5) == pytest.approx(8 * 5 * 1518 * 64 / 1.0)
    assert [(e.kind, e.key) for e in events] == [("detected", key)]


def test_with_since_a_young_flow_counts_from_when_its_first_batch_began():
    """When the collector knows when the agent began filling the datagram (the previous
    datagram's arrival), the first datagram's samples cover that span: all but the first
    one (the sample that opened the measurement) count, over the time since then."""
    det = absolute(min_samples=1)
    for _ in range(4):                      # one datagram, begun at 9.2, arriving at 10.0
        det.observe(MOUSE, 1518, 256, 10.0, since=9.2)
    assert det.estimate_bps(MOUSE, 10.0) == pytest.approx(8 * 3 * 1518 * 256 / 1.0)  # min_window
    det.observe(MOUSE, 1518, 256, 11.5, since=10.0)
    assert det.estimate_bps(MOUSE, 11.5) == pytest.approx(8 * 4 * 1518 * 256 / 2.3)  # 11.5 - 9.2
    # an unusable since (not before now) falls back to the first delivery marking the start
    det.observe(ELEPHANT, 1518, 256, 20.0, since=20.0)
    det.observe(ELEPHANT, 1518, 256, 20.0, since=20.0)
    assert det.estimate_bps(ELEPHANT, 20.0) == 0.0


def test_samples_delivered_with_the_first_one_mark_the_start_too():
    """OVS's agent batches samples (~6 per datagram, or its 1 s tick), so the samples that
    arrive with a flow's first one were taken over the time *before* it arrived: counting
    them over the time since made young mice look 2x faster (bench_sflow_decode: the
    false positives at 1-in-256). Without `since` they only mark the start."""
    det = absolute(min_samples=1)
    for _ in range(4):                      # one datagram: 4 samples of a young flow
        det.observe(MOUSE, 1518, 256, 10.0)
    assert det.estimate_bps(MOUSE, 10.0) == 0.0
    det.observe(MOUSE, 1518, 256, 11.0)     # the next datagram, 1 s later: one sample
    assert det.estimate_bps(MOUSE, 11.0) == pytest.approx(8 * 1518 * 256 / 1.0)  # 3.1 Mbit/s
    assert det.heavy_hitters() == {}
    # once those samples leave the window, they count like any other (the window is full)
    for t in (12.0, 13.0, 14.0):
        det.observe(MOUSE, 1518, 256, t)
    assert det.estimate_bps(MOUSE, 15.0) == pytest.approx(8 * 4 * 1518 * 256 / 5.0)


def test_max_flows_evicts_the_least_recently_seen():
    det = absolute(max_flows=3)
    for i in range(5):
        det.observe(FlowKey("10.0.0.1", "10.0.0.3", 6, i, 80), 100, 64, float(i))
    assert len(det) == 3 and det.evicted_flows == 2
    assert det.estimate_bps(FlowKey("10.0.0.1", "10.0.0.3", 6, 0, 80), 5.0) == 0.0


def test_top_flows():
    det = absolute()
    streams(det, [(ELEPHANT, 20e6, 1), (MOUSE, 1e6, 7)], 0.0, 5.0)
    top = det.top(5.0)
    assert [k for k, _ in top] == [ELEPHANT, MOUSE]


def test_late_time_counts_as_the_latest_seen():
    det = absolute(min_samples=1)
    det.observe(ELEPHANT, 1500, 64, 3.0)
    det.tick(5.0)
    det.observe(ELEPHANT, 1500, 64, 4.0)  # another thread read the clock before the tick
    assert det.late_calls == 1
    # two samples, 2 s apart (the late one counts at 5.0): one interval's worth over 2 s
    assert det.estimate_bps(ELEPHANT, 5.0) == pytest.approx(8 * 1500 * 64 / 2.0)
    with pytest.raises(ValueError, match="now"):
        det.tick(float("nan"))


@pytest.mark.parametrize("kw, name", [
    ({}, "exactly one"),
    ({"threshold_bps": 1e6, "capacity_share": 0.1, "capacity_bps": 1e9}, "exactly one"),
    ({"threshold_bps": -1}, "threshold_bps"),
    ({"threshold_bps": float("nan")}, "threshold_bps"),
    ({"capacity_share": 0.1}, "capacity_bps"),
    ({"capacity_share": 1.5, "capacity_bps": 1e9}, "capacity_share"),
    ({"fair_share_multiple": 0, "capacity_bps": 1e9}, "fair_share_multiple"),
    ({"threshold_bps": 1e6, "window_s": 0}, "window_s"),
    ({"threshold_bps": 1e6, "min_window_s": 6.0}, "min_window_s"),
    ({"threshold_bps": 1e6, "release_fraction": 1.2}, "release_fraction"),
    ({"threshold_bps": 1e6, "min_hold_s": -1}, "min_hold_s"),
    ({"threshold_bps": 1e6, "min_samples": 0}, "min_samples"),
    ({"threshold_bps": 1e6, "max_flows": 2.5}, "max_flows"),
])
def test_config_validation_names_the_parameter(kw, name):
    with pytest.raises(ValueError, match=name):
        HeavyHitterConfig(**kw)


def test_input_validation():
    det = absolute()
    with pytest.raises(ValueError, match="sampling_rate"):
        det.observe(ELEPHANT, 1500, 0, 1.0)
    with pytest.raises(ValueError, match="rate_bps"):
        det.observe_rate(ELEPHANT, -5, 1.0)
    with pytest.raises(ValueError, match="config"):
        HeavyHitterDetector({"threshold_bps": 1})
