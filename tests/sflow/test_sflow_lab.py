"""The real OVS sFlow agent sending to the real collector, in the lab (private OVS, the real
controller, Mininet dumbbell h1,h2 - s1 - s2 - h3,h4), under the lab lock.

The rate check: an iperf3 CUBIC flow h1 -> h3 paced at 50 Mbit/s for 10 s, sFlow 1-in-64 on
s1, HeavyHitterDetector with a 5 s window. The detector counts frame bytes (sampled_header
.frame_length: 1518 for a full frame, FCS included); iperf3 reports goodput. The expected wire
rate is goodput * frame_length / TCP payload (1448 of 1518 bytes with Linux's timestamps), taken
from the samples themselves. At 50 Mbit/s about 4,100 frames/s cross s1, 64 samples/s, about
320 in a window: the sampling alone gives ~5.6 % standard error per window (consecutive windows
overlap and are strongly correlated). Measured on 2026-11-22 over 6 runs: the median window
estimate was off by +7.9, +1.4, -9.3, +0.9, +3.9 and -0.0 %, single windows by -12.3 % to
+11.9 %; no bias beyond the sampling noise. Asserted: median within +-20 % (3.5 sigma) and every
steady window within +-25 %. The messages carry the host's CPU over the flow (tests/hostload.py).
"""

from __future__ import annotations

import statistics
import threading
import time

import pytest

from coex.heavy_hitters import HeavyHitterConfig, HeavyHitterDetector
from coex.sflow import FlowKey
from coex.sflow_collector import SFlowCollector
from experiments.lab.net import Controller, mininet_net
from experiments.lab.traffic import goodput_bps, iperf3
from ovs_config.sflow import disable_sflow, enable_sflow, sflow_settings
from ryu_app.sflow_listener import SFlowListener
from tests.hostload import HostLoad
from tests.waiting import eventually
from topologies.dumbbell import Dumbbell

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

OF_PORT = 16673
SAMPLING = 64
RATE_BPS = 50e6
DURATION_S = 10.0
CPORT = 45123  # iperf3 --cport: the data connection's client port, so the key is known
KEY = FlowKey("10.0.0.1", "10.0.0.3", 6, CPORT, 5201)
MEDIAN_TOLERANCE = 0.20
WINDOW_TOLERANCE = 0.25
# iperf3 -b paces the flow on a path that carries far more (~0.8 Gbit/s through vswitchd), so
# its goodput is the pace; 5 % is its pacing granularity over 10 s, not congestion.
PACE_TOLERANCE = 0.05
# The OVS agent sends a datagram when it is full or after 1 s, and polls counters every
# polling_s (1 s): every kind of sample arrives within a few seconds. 10 s is several of those.
AGENT_TIMEOUT_S = 10.0
# The detector releases the flow when its window (5 s) holds too little of it, seen at the
# next tick (0.25 s), after the agent's last flush (1 s): ~6.3 s after the flow ends. 15 s
# leaves more than twice that for a loaded VM.
RELEASE_TIMEOUT_S = 15.0
# Detection latency at 1-in-64 and several times the threshold: p95 0.66 s in the simulated
# runs (docs/sflow.md), plus up to 1 s for the agent's flush: within 2 s of the start.
DETECTED_WITHIN_S = 2.0


@pytest.fixture(scope="module")
def lab(private_ovs, tmp_path_factory):
    log = tmp_path_factory.mktemp("ryu") / "ryu.log"
    ctl = Controller(of_port=OF_PORT, log_path=str(log)).start()
    try:
        with mininet_net(Dumbbell(), ctl) as net:
            yield net, private_ovs
    finally:
        ctl.stop()


@pytest.fixture
def collector(lab):
    net, ovs = lab
    col = SFlowCollector()
    listener = SFlowListener(col, port=0, poll_timeout_s=0.05).start()
    port = listener.address[1]
    enable_sflow("s1", sampling=SAMPLING, polling_s=1, target=f"127.0.0.1:{port}", agent="lo",
                 vsctl=ovs.vsctl)
    try:
        yield col, net, ovs
    finally:
        disable_sflow("s1", vsctl=ovs.vsctl)
        listener.stop()


def test_sflow_configured_on_the_bridge(collector):
    _, _, ovs = collector
    settings = sflow_settings("s1", vsctl=ovs.vsctl)
    assert settings["sampling"] == "64" and settings["polling"] == "1"
    assert settings["agent"] == '"lo"' or settings["agent"] == "lo"


def test_datagrams_arrive_and_decode(collector):
    col, net, _ = collector
    h1, h3 = net.get("h1", "h3")
    flows = []
    col.subscribe_flow_samples(lambda s, dg, now: flows.append(s))
    h1.cmd("ping -n -q -c 300 -i 0.005 10.0.0.3")

    def all_arrived():
        st = col.stats()
        by_type = st["samples_by_type"]
        # Every port's counters at least once; 600 pings crossed s1: ~9 flow samples expected.
        return (st["datagrams_ok"] >= 3 and by_type.get("counters_sample", 0) >= 4
                and by_type.get("flow_sample", 0) >= 2 and st)

    st = eventually(all_arrived, timeout_s=AGENT_TIMEOUT_S, what="3 datagrams with counter and flow samples")
    assert st["datagrams_malformed"] == 0, st
    assert list(st["agents"]) == ["127.0.0.1/0"]
    assert all(s.sampling_rate == SAMPLING for s in flows)
    icmp = {FlowKey("10.0.0.1", "10.0.0.3", 1, 0, 0), FlowKey("10.0.0.3", "10.0.0.1", 1, 0, 0)}
    assert {s.flow_key() for s in flows} & icmp


def test_iperf3_flow_estimate_and_detection(collector):
    col, net, _ = collector
    h1, h3 = net.get("h1", "h3")
    det = HeavyHitterDetector(HeavyHitterConfig(threshold_bps=20e6, window_s=5.0))
    events, ratios = [], []
    lock = threading.Lock()

    def on_flow(sample, dg, now):
        with lock:
            events.extend(det.observe_sample(sample, now))
        p = sample.packet
        if sample.flow_key() == KEY and p is not None and p.ip_length and p.ip_length > 52:
            ratios.append(p.frame_length / (p.ip_length - 52))  # wire bytes per payload byte

    col.subscribe_flow_samples(on_flow)
    estimates = []  # (seconds since start, estimate)
    stop = threading.Event()
    t0 = time.monotonic()

    def ticker():
        while not stop.wait(0.25):
            now = time.monotonic()
            with lock:
                events.extend(det.tick(now))
                estimates.append((now - t0, det.estimate_bps(KEY, now)))

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    def released():
        with lock:
            return any(e.key == KEY and e.kind == "released" for e in events)

    try:
        with HostLoad() as load:
            report = iperf3(h1, h3, "cubic", duration_s=DURATION_S,
                            extra=f"-b {int(RATE_BPS)} --cport {CPORT}")
        t_end = time.monotonic() - t0
        eventually(released, timeout_s=RELEASE_TIMEOUT_S, what="the flow released after it ended")
    finally:
        stop.set()
        thread.join()
    goodput = goodput_bps(report)
    assert goodput == pytest.approx(RATE_BPS, rel=PACE_TOLERANCE), f"iperf3 did not keep its pace; {load}"
    # 10 s at ~64 samples/s is ~640 samples of the flow; fewer than a third means samples were lost.
    assert len(ratios) > 200, f"{len(ratios)} samples of the flow; {load}"
    expected = goodput * statistics.median(ratios)  # ~ 50 * 1518/1448 = 52.4 Mbit/s
    t_start = t_end - DURATION_S
    # The steady part: from a full window into the flow (5 s, plus a tick) to 0.5 s before its
    # end, 4 s of 0.25 s ticks: 16 estimates; 12 allows a few ticks lost to a busy host.
    steady = [e for t, e in estimates if t_start + 5.5 <= t <= t_end - 0.5]
    assert len(steady) >= 12, f"{len(steady)} steady estimates; {load}"
    median = statistics.median(steady)
    print(f"\nexpected wire rate {expected / 1e6:.2f} Mbit/s, window estimates median "
          f"{median / 1e6:.2f} (min {min(steady) / 1e6:.2f}, max {max(steady) / 1e6:.2f}), "
          f"error {100 * (median / expected - 1):+.1f} %; {col.stats()['samples_by_type']}; {load}")
    assert median == pytest.approx(expected, rel=MEDIAN_TOLERANCE), f"median {median / 1e6:.2f} Mbit/s; {load}"
    assert all(e == pytest.approx(expected, rel=WINDOW_TOLERANCE) for e in steady), \
        f"window estimates {min(steady) / 1e6:.2f}-{max(steady) / 1e6:.2f} Mbit/s; {load}"
    mine = [e for e in events if e.key == KEY]
    assert [e.kind for e in mine] == ["detected", "released"]
    assert mine[0].time_s - t0 < t_start + DETECTED_WITHIN_S, f"detected late; {load}"
    assert mine[1].reason in ("below_low", "idle") and mine[1].time_s - t0 > t_end
    assert col.stats()["datagrams_malformed"] == 0
