"""ModeOfHistoryEstimator: seed 003's (Hanai et al.) most-bandwidth-consuming connection by the
mode of a packet history. Here one "packet" of the paper is one sFlow sample."""

from __future__ import annotations

import os
import random

import pytest

from coex.heavy_hitters import MODE_OF_HISTORY, ModeHeavyHitterDetector, ModeOfHistoryEstimator
from coex.sflow import FlowKey, decode_datagram


def test_records_every_rec_int_th_sample_and_keeps_hist_len():
    est = ModeOfHistoryEstimator(rec_int=3, hist_len=4, stat_int=1000)
    for i in range(1, 31):
        est.observe(i)
    # samples 3, 6, ..., 30 were recorded; the last 4 are kept
    assert est.history == (21, 24, 27, 30)
    assert est.samples_seen == 30


def test_decision_every_stat_int_samples():
    est = ModeOfHistoryEstimator(rec_int=1, hist_len=10, stat_int=5)
    decisions = [est.observe("a" if i % 3 else "b") for i in range(1, 21)]
    points = [i + 1 for i, d in enumerate(decisions) if d is not None]
    assert points == [5, 10, 15, 20]
    d = decisions[-1]
    assert d.packet_index == 20 and d.key == "a" and d.records == 10
    assert d.count == sum(1 for i in range(11, 21) if i % 3) and d.share == d.count / 10
    assert est.current == "a" and est.last_decision == d


def test_mode_is_the_most_frequent_connection_in_the_history_only():
    est = ModeOfHistoryEstimator(rec_int=1, hist_len=6, stat_int=6)
    for k in ["old"] * 6:
        est.observe(k)
    assert est.current == "old"
    # the history forgets: 6 new records push "old" out completely
    for k in ["x", "y", "x", "y", "x", "z"]:
        d = est.observe(k)
    assert d.key == "x" and d.count == 3


def test_ties_keep_the_incumbent_else_the_most_recent():
    est = ModeOfHistoryEstimator(rec_int=1, hist_len=4, stat_int=4)
    for k in ["a", "b", "a", "b"]:
        d = est.observe(k)
    assert d.key == "b"  # tie, no incumbent: the connection recorded last
    for k in ["a", "b", "a", "b"]:
        d = est.observe(k)
    assert d.key == "b"  # tie again: the incumbent stays
    for k in ["b", "a", "a", "b"]:
        d = est.observe(k)
    assert d.key == "b"


def test_empty_history_and_non_ip_samples():
    est = ModeOfHistoryEstimator(rec_int=1, hist_len=4, stat_int=2)
    assert est.observe(None) is None
    d = est.observe(None)
    assert d.key is None and d.records == 0 and d.share == 0.0
    assert est.samples_seen == 2  # non-IP samples count as packets, never as a connection


def test_finds_the_elephant_among_mice_from_sampled_packets():
    """One flow with 40 % of the packets among 30 mice sharing the rest, each packet sampled
    1-in-64: the mode of the sampled history is the elephant at every statistics point."""
    rng = random.Random(3)
    mice = [f"m{i}" for i in range(30)]
    est = ModeOfHistoryEstimator(rec_int=1, hist_len=128, stat_int=32)
    decisions = []
    for _ in range(200_000):
        key = "elephant" if rng.random() < 0.4 else rng.choice(mice)
        if rng.random() < 1 / 64:  # the switch's sampler
            d = est.observe(key)
            if d is not None:
                decisions.append(d.key)
    assert len(decisions) > 50
    assert decisions[2:] == ["elephant"] * len(decisions[2:])


def test_switches_to_the_new_elephant():
    est = ModeOfHistoryEstimator(rec_int=2, hist_len=20, stat_int=10)
    for i in range(100):
        est.observe("first" if i % 4 else f"mouse{i}")
    assert est.current == "first"
    for i in range(60):
        est.observe("second" if i % 4 else f"mouse{i}")
    assert est.current == "second"


def test_observe_sample_keys_by_5_tuple():
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "sflow", "tcp5201_2.bin")
    est = ModeOfHistoryEstimator(rec_int=1, hist_len=8, stat_int=6)
    decision = None
    for s in decode_datagram(open(path, "rb").read()).flow_samples:
        decision = est.observe_sample(s) or decision
    assert decision.key == FlowKey("10.0.0.1", "10.0.0.3", 6, 55284, 5201)
    assert (decision.count, decision.records) == (5, 6)


@pytest.mark.parametrize("name", ["rec_int", "hist_len", "stat_int"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_parameters_validated(name, bad):
    with pytest.raises(ValueError, match=name):
        ModeOfHistoryEstimator(**{name: bad})


def test_forget_drops_a_connection_from_the_history():
    est = ModeOfHistoryEstimator(rec_int=1, hist_len=10, stat_int=5)
    for k in ["a", "b", "a", "a", "b"]:
        est.observe(k)
    assert est.current == "a"
    assert est.forget("a") == 3 and est.history == ("b", "b") and est.current is None
    assert est.forget("zzz") == 0
    assert est.observe("c") is None  # 6 samples: no decision yet ...
    for k in ["c", "c", "c", "c"]:
        d = est.observe(k)
    assert d.key == "c" and d.records == 7  # ... then the mode among what is left


# ------------------------------------------------------------------ the detector

def feed(det, pattern, t0, dt=0.01):
    """Samples of the keys in `pattern`, dt apart from t0; returns (events, time after)."""
    events, t = [], t0
    for k in pattern:
        events += det.observe(k, t)
        t += dt
    return events, t


def test_mode_detector_steers_the_mode_alone_and_no_threshold():
    det = ModeHeavyHitterDetector(rec_int=1, hist_len=20, stat_int=10, idle_s=3.0, min_hold_s=0.0,
                                  rate_of=lambda key, now: 1234.0)
    events, t = feed(det, ["big", "m1", "big", "m2", "big", "m3", "big", "m1", "big", "m2"], 0.0)
    [e] = events
    assert (e.kind, e.key, e.reason, e.mode) == ("detected", "big", "mode (5/10 records)", MODE_OF_HISTORY)
    assert e.estimate_bps == 1234.0 and e.threshold_bps == 0.0  # the rate is for the log only
    assert det.heavy_hitters() == {"big": pytest.approx(0.09)}
    # the same mode at the next statistics point: no new event
    events, t = feed(det, ["big", "m1"] * 5, t)
    assert events == []


def test_mode_detector_replaces_the_mode_after_its_hold():
    det = ModeHeavyHitterDetector(rec_int=1, hist_len=10, stat_int=10, idle_s=100.0, min_hold_s=1.0)
    events, t = feed(det, ["a"] * 10, 0.0)
    assert [(e.kind, e.key) for e in events] == [("detected", "a")]
    # "b" is the mode 0.1 s later: the incumbent keeps its place for min_hold_s ...
    events, t = feed(det, ["b"] * 10, t)
    assert events == [] and det.heavy_hitters() == {"a": pytest.approx(0.09)}
    # ... and after it, "b" replaces it, one steered at a time
    events, t = feed(det, ["b"] * 10, 2.0)
    assert [(e.kind, e.key, e.reason) for e in events] == [
        ("released", "a", "not_mode"), ("detected", "b", "mode (10/10 records)")]
    assert det.heavy_hitters() == {"b": pytest.approx(2.09)}


def test_mode_detector_releases_and_forgets_a_quiet_connection():
    """A connection that stopped is released after idle_s without samples and leaves the
    history, so a mouse does not inherit the mode from the dead elephant's old records."""
    det = ModeHeavyHitterDetector(rec_int=1, hist_len=128, stat_int=8, idle_s=2.0, min_hold_s=0.0)
    events, t = feed(det, ["big"] * 60 + ["m1", "m2"] * 2, 0.0)
    assert [(e.kind, e.key) for e in events] == [("detected", "big")]
    assert det.tick(2.0) == []   # big's last sample at 0.59 s: quiet for 1.41 s only
    [e] = det.tick(2.7)
    assert (e.kind, e.key, e.reason) == ("released", "big", "idle")
    assert "big" not in det.estimator.history and det.heavy_hitters() == {}
    # (the mice went quiet as long and were forgotten too); new samples: m1 is the mode, not big
    events, _ = feed(det, ["m1", "m1", "m2", "m1"] * 2, 2.8)
    assert [(e.kind, e.key) for e in events] == [("detected", "m1")]


def test_mode_detector_on_real_samples():
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "sflow", "tcp5201_2.bin")
    det = ModeHeavyHitterDetector(rec_int=1, hist_len=8, stat_int=6)
    events = []
    for s in decode_datagram(open(path, "rb").read()).flow_samples:
        events += det.observe_sample(s, 1.0)
    assert [(e.kind, e.key) for e in events] == [("detected", FlowKey("10.0.0.1", "10.0.0.3", 6, 55284, 5201))]


@pytest.mark.parametrize("kw, name", [({"idle_s": 0}, "idle_s"), ({"min_hold_s": -1}, "min_hold_s"),
                                      ({"stat_int": 0}, "stat_int")])
def test_mode_detector_parameters_validated(kw, name):
    with pytest.raises(ValueError, match=name):
        ModeHeavyHitterDetector(**kw)
