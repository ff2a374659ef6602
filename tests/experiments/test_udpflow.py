"""Real-time flows (experiments/run/probes/udpflow.py, udp.py, and their metrics): the receiver's
bookkeeping of sequence gaps, late datagrams, one-way delay and RFC 3550 jitter, a real sender and
receiver over loopback, and what a run's metrics make of the intervals."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from experiments.analysis.metrics import udp_flow_metrics
from experiments.run.probes.udpflow import Receiver


def test_gaps_are_losses_and_a_late_datagram_is_reordered_not_lost():
    """Rule: a skipped sequence number counts as lost when its successor comes; if it comes after
    all it counts as reordered, so the span's loss is lost - reordered; the one-way delay is the
    arrival less the send time; jitter moves by |D| - J over 16 (RFC 3550)."""
    rx = Receiver(interval_s=1.0, start=100.0)
    ms = 1_000_000
    for seq, sent, arrived in ((0, 0, 5), (1, 10, 15), (3, 30, 37), (2, 20, 40), (5, 50, 55)):
        assert rx.datagram(seq, 100_000 * ms + sent * ms, 100_000 * ms + arrived * ms) == []
    row = rx.flush()
    assert (row["received"], row["lost"], row["reordered"]) == (5, 2, 1)  # 2 and 4 skipped; 2 came late
    assert row["owd_ms"]["mean"] == pytest.approx((5 + 5 + 7 + 20 + 5) / 5)
    # |D| = 0, 2, 13, 15 in turn: J = 0, 0.125, 0.9297, 1.8091
    assert row["jitter_ms"] == pytest.approx(1.809, abs=1e-3)


def test_intervals_close_on_time_even_without_traffic():
    """Rule: an interval is reported when the clock passes its end, with or without datagrams."""
    rx = Receiver(interval_s=0.5, start=10.0)
    assert [r["mono"] for r in rx.tick(11.2)] == [10.0, 10.5]
    assert rx.flush()["received"] == 0 and rx.flush()["mono"] == 11.0


def test_a_real_sender_and_receiver_over_loopback():
    """A sender at 400 kbit/s in 500-byte datagrams for 1 s (100 datagrams) to a receiver on
    loopback: every datagram arrives, in order, with a median one-way delay under a millisecond."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rx = subprocess.Popen([sys.executable, "-m", "experiments.run.probes.udpflow", "receive", "--port", str(port),
                           "--duration", "2.5", "--interval", "0.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(rx.stdout.readline()) == {"listening": port}
        subprocess.run([sys.executable, "-m", "experiments.run.probes.udpflow", "send", "--host", "127.0.0.1",
                        "--port", str(port), "--rate", "400000", "--bytes", "500", "--duration", "1"],
                       check=True, timeout=10)
        rows = [json.loads(line) for line in rx.communicate(timeout=10)[0].splitlines()]
    finally:
        rx.kill()
    assert sum(r["received"] for r in rows) == 100 and sum(r["lost"] + r["reordered"] for r in rows) == 0
    # The median says the sender's stamp and the receiver's clock agree (loopback: tens of µs, 1 ms
    # leaves room for a loaded machine). One datagram can wait out a scheduler slice while the other
    # core is busy (4.7 ms seen under three spinning processes), so the max is only held to the
    # 1 s the sender ran: a transit longer than the whole run would mean two clocks or wrong units.
    assert all(r["owd_ms"]["p50"] < 1 for r in rows if r["received"])
    assert all(0 <= r["owd_ms"]["max"] < 1000 for r in rows if r["received"])


def test_the_metrics_take_the_window_weighted_by_datagrams():
    """Rule: intervals starting in the window count; delays are weighted by the datagrams each
    interval received; loss is lost less reordered over all datagrams."""
    flow = {"error": None, "intervals": [
        [1.0, 100, 0, 0, 50.0, 50.0, 60.0, 70.0, 1.0],   # before the window
        [2.0, 100, 2, 0, 10.0, 10.0, 12.0, 15.0, 0.5],
        [2.5, 300, 3, 1, 20.0, 19.0, 30.0, 40.0, 1.5]]}
    m = udp_flow_metrics(flow, 2.0, 3.0)
    assert (m["received"], m["lost"]) == (400, 4) and m["loss_fraction"] == pytest.approx(4 / 404)
    assert m["owd_ms"] == pytest.approx(17.5) and m["owd_p95_ms"] == pytest.approx(25.5)
    assert m["owd_max_ms"] == 40.0 and m["jitter_ms"] == 1.0
