"""ckcd-link's link models on real traffic between two network namespaces (tests/link/linklab.py):
a direction that follows a delivery-opportunity trace, random loss after the queue, a link
whose two directions differ, and a real-time flow's receiver measuring the link. UDP from iperf3 (-u), so what arrives is what the link gives, not
what a congestion control chose to send.

Tolerances and why:
- a trace's delivered rate: within 2 % of its average (the target), over 8 s, 16 of the on/off
  trace's 500 ms periods whatever the phase the window starts at; what is left is the time the two
  stats reads take (milliseconds, well under 0.1 %).
- loss: the lost count within 5 standard deviations of the binomial mean, over the frames the link
  served (each is one Bernoulli trial).
- an asymmetric link: each direction within 2 % of its own rate while both are flooded.
Needs root, iperf3; holds the lab lock for the module (the lab and daemon_factory fixtures: conftest.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from experiments.traces.generate import average_bps, onoff  # noqa: E402
from linklab import HOST_A_IP, HOST_B_IP, NetLab  # noqa: E402
from ovs_config.link_daemon import DEFAULT_BINARY, LinkDaemon  # noqa: E402  (fixtures: conftest.py)
from tests.waiting import eventually  # noqa: E402

TRACES = REPO / "experiments" / "traces"
DATAGRAM = 1400                # iperf3 -l: each datagram one frame of ...
FRAME = DATAGRAM + 8 + 20 + 14  # ... UDP, IPv4 and Ethernet headers

pytestmark = [
    pytest.mark.lab,  # needs root: ckcd-link on veths in network namespaces
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(not DEFAULT_BINARY.exists(), reason="datapath/build/ckcd-link not built (make -C datapath)"),
]


def udp_flood(lab: NetLab, rate_bps: float, seconds: float, reverse: bool = False):
    """An iperf3 UDP flow A -> B (reverse: B -> A) at rate_bps, 1400-byte datagrams."""
    port = lab.next_port()
    lab.iperf_server(port)
    args = ["iperf3", "-c", HOST_B_IP, "-p", str(port), "-u", "-b", str(int(rate_bps)),
            "-t", str(seconds), "-l", str(DATAGRAM)] + (["-R"] if reverse else [])
    return lab.popen(lab.ns_a, *args, stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"))


def measured_rate_bps(d: LinkDaemon, direction: str, window_s: float) -> float:
    """Bytes the direction sent over window_s, read from the daemon at the window's two ends."""
    first, t0 = d.stats()["dirs"][direction]["tx_bytes"], time.monotonic()
    time.sleep(window_s)  # a measurement window, not a wait for something to happen
    last, t1 = d.stats()["dirs"][direction]["tx_bytes"], time.monotonic()
    return (last - first) * 8 / (t1 - t0)


def backlogged(d: LinkDaemon, direction: str = "ab") -> None:
    eventually(lambda: d.stats()["dirs"][direction]["qlen_pkts"] > 10, timeout_s=5,
               what=f"a standing queue in {direction}")


def test_a_trace_delivers_its_average_rate(lab, daemon_factory):
    """Target: a direction following a trace delivers the trace's average rate within 2 % when
    backlogged (the on/off trace: 48 Mbit/s for 400 ms, nothing for 100 ms). show names the trace
    and its average as ckcd-link read it, which is the generator's."""
    path = TRACES / "onoff.trace"
    want = average_bps(onoff())
    d = daemon_factory(rate_bps=100_000_000, qdisc="droptail limit=400", trace=str(path))
    shown = d.show()["dirs"]["ab"]
    assert shown["trace"]["file"] == str(path) and abs(shown["trace"]["average_bps"] - want) < 1, shown
    assert shown["rate_bps"] == shown["trace"]["average_bps"], "the disciplines see the trace's average"
    flood = udp_flood(lab, 60e6, 14)
    backlogged(d)
    got = measured_rate_bps(d, "ab", 8.0)  # 16 periods of 500 ms
    flood.wait(timeout=30)
    # A 1400-byte datagram is a 1442-byte frame, of which the trace takes its 1428-byte IP packet
    # and Mahimahi's 4 bytes: the frames' rate is the trace's times 1442 / 1432.
    want_frames = want * FRAME / (FRAME - 14 + 4)
    print(f"\nonoff.trace: delivered {got / 1e6:.2f} Mbit/s of frames, the trace's average {want / 1e6:.2f} "
          f"Mbit/s ({want_frames / 1e6:.2f} of these frames)")
    assert abs(got - want_frames) <= 0.02 * want_frames, (got, want_frames)


def test_bernoulli_loss_is_within_its_binomial_bound(lab, daemon_factory):
    """Target: with `bernoulli p=0.02` the link loses the frames it served at 2 %, within 5 sd of
    the binomial mean; the losses are counted as `lost`, not as queue drops (the queue, at
    under half the rate, drops nothing)."""
    d = daemon_factory(rate_bps=50_000_000, qdisc="droptail limit=400", loss="bernoulli p=0.02", seed=3)
    assert d.show()["dirs"]["ab"]["loss"] == {"spec": "bernoulli p=0.02", "rate": pytest.approx(0.02)}
    udp_flood(lab, 20e6, 6).wait(timeout=30)
    ab = d.stop()["dirs"]["ab"]
    served = ab["tx_frames"] + ab["lost"]
    mean, sd = 0.02 * served, math.sqrt(served * 0.02 * 0.98)
    print(f"\nbernoulli p=0.02: {ab['lost']} of {served} served frames lost (mean {mean:.0f}, sd {sd:.1f})")
    assert served > 5000 and abs(ab["lost"] - mean) <= 5 * sd, ab
    assert sum(ab["drops"].values()) == 0, ab["drops"]


def test_the_two_directions_of_an_asymmetric_link_are_their_own(lab, daemon_factory):
    """Target: an asymmetric link's two directions measured apart, both flooded at once: A -> B at
    its 40 Mbit/s and B -> A at its 10 Mbit/s, each within 2 %."""
    d = daemon_factory(rate_bps=40_000_000, rate_ba_bps=10_000_000, qdisc="droptail limit=400",
                qdisc_ba="droptail limit=400")
    floods = [udp_flood(lab, 60e6, 12), udp_flood(lab, 30e6, 12, reverse=True)]
    backlogged(d, "ab")
    backlogged(d, "ba")
    got = {"ab": measured_rate_bps(d, "ab", 4.0), "ba": measured_rate_bps(d, "ba", 4.0)}
    for f in floods:
        f.wait(timeout=30)
    print(f"\nasymmetric: ab {got['ab'] / 1e6:.2f} Mbit/s (40), ba {got['ba'] / 1e6:.2f} Mbit/s (10)")
    assert abs(got["ab"] - 40e6) <= 0.02 * 40e6 and abs(got["ba"] - 10e6) <= 0.02 * 10e6, got


def test_a_real_time_flow_measures_the_links_delay_and_loss(lab, daemon_factory):
    """Target (a UDP flow's metrics): the real-time flow's receiver (experiments/run/probes/
    udpflow.py) measures through the daemon the link's one-way delay, 10 ms plus serialization
    and the daemon's release lateness (at most 3 ms, as test_link_daemon.py's ping bound), and its
    Bernoulli loss of 5 % within 5 sd of the binomial mean over the datagrams sent."""
    d = daemon_factory(rate_bps=50_000_000, qdisc="droptail limit=400", loss="bernoulli p=0.05", seed=11)
    port = lab.next_port()
    rx = lab.popen(lab.ns_b, sys.executable, "-m", "experiments.run.probes.udpflow", "receive", "--port", str(port),
                   "--duration", "8", "--interval", "0.5", stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    assert json.loads(rx.stdout.readline()) == {"listening": port}
    lab.ns(lab.ns_a, sys.executable, "-m", "experiments.run.probes.udpflow", "send", "--host", HOST_B_IP,
           "--port", str(port), "--rate", "5000000", "--bytes", "1200", "--duration", "4", timeout=30)
    rows = [json.loads(line) for line in rx.communicate(timeout=20)[0].splitlines()]
    sent = math.ceil(4 / (1200 * 8 / 5_000_000))  # the sender sends datagram k at k * gap while that is < 4 s
    received = sum(r["received"] for r in rows)
    lost = sent - received
    mean, sd = 0.05 * sent, math.sqrt(sent * 0.05 * 0.95)
    owd = [r["owd_ms"]["mean"] for r in rows if r["received"]]
    print(f"\nreal-time flow: {received} of {sent} datagrams, {lost} lost (mean {mean:.0f}, sd {sd:.1f}); one-way "
          f"delay {min(owd):.2f}-{max(owd):.2f} ms per interval")
    assert abs(lost - mean) <= 5 * sd, (lost, mean, sd)
    assert all(10.0 <= v <= 13.0 for v in owd), owd
    # The receiver's count agrees with the sender's, but for the last few if they were lost (no
    # later datagram shows their gap): at 5 %, three in a row at the end is a 1-in-8000 chance.
    assert 0 <= lost - sum(r["lost"] - r["reordered"] for r in rows) <= 3
