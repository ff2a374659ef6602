"""ModeOfHistoryEstimator: seed 003's (Hanai et al.) most-bandwidth-consuming connection by the
mode of a packet history. Here one "packet" of the paper is one sFlow sample."""

from __future__ import annotations

import os
import random

import pytest

from coex.heavy_hitters import ModeOfHistoryEstimator
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
