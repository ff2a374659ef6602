"""coex.steering: detector parameters from the policy, a port's detectors, the steering book.

Pure: samples are stand-ins with the three things the detectors read, time is handed in.
"""

from __future__ import annotations

import dataclasses

import pytest

from coex.heavy_hitters import MODE_OF_HISTORY, HeavyHitterConfig, HeavyHitterEvent
from coex.policy import HeavyHitters, Policy
from coex.sflow import FlowKey
from coex.sflowrt import PORT_KEYS, parse_active_flows
from coex.steering import (FEW_SAMPLES_PER_S, MAX_PORT_SAMPLES_PER_S, SUSPECT_SAMPLES_PER_S, PortWatch,
                           SteeringBook, bridge_sampling, chosen_sampling, detector_config, mode_detector,
                           sampling_targets, threshold_samples_per_s)

ELEPHANT = FlowKey("10.0.0.1", "10.0.0.3", 6, 43210, 5201)
MOUSE = FlowKey("10.0.0.2", "10.0.0.4", 6, 40000, 80)
PORT_IFINDEX = 7
WALL = 1_700_000_000.0  # the wall clock the records show: any fixed value


SAMPLING = 10
FRAME = 1500
STEP_S = 0.1
BPS_PER_SAMPLE_PER_STEP = 8 * FRAME * SAMPLING / STEP_S  # 1.2 Mbit/s


@dataclasses.dataclass
class Sample:
    """What the detectors read of a coex.sflow.FlowSample."""
    key: FlowKey
    output_if: int = PORT_IFINDEX
    sampling_rate: int = SAMPLING

    def flow_key(self):
        return self.key

    def frame_length(self):
        return FRAME


def absolute(**kw) -> HeavyHitters:
    """A rate policy with an absolute 10 Mbit/s threshold (release below 7 Mbit/s, hold 2 s),
    decided by sFlow's estimate alone (counting off; confirmation by counting: test_counting.py
    and suspects below)."""
    return HeavyHitters(enabled=True, threshold_bps=10_000_000, capacity_share=None,
                        **{"counting": False, **kw})


def watch(hh: HeavyHitters, ifindex=PORT_IFINDEX, capacity_bps=50_000_000) -> PortWatch:
    return PortWatch(1, 3, "s1-eth3", ifindex, capacity_bps, hh)


def feed(w: PortWatch, flows: dict, start: float, stop: float, output_if=PORT_IFINDEX) -> list:
    """Every STEP_S from ``start`` to ``stop``: for each {flow: samples per step}, that many
    samples (interleaved), then tick(). Returns the events."""
    events, t = [], start
    while t < stop - 1e-9:
        for i in range(max(flows.values())):
            for key, n in flows.items():
                if i < n:
                    events += w.observe_sample(Sample(key, output_if), t)
        events += w.tick(t)
        t = round(t + STEP_S, 9)
    return events


def rates(w: PortWatch, flows: dict, now: float, output_ifindex=PORT_IFINDEX) -> list:
    """One sFlow-RT answer with {flow: bit/s} leaving by ``output_ifindex``, into the watch."""
    body = [{"key": ",".join(map(str, [*key, output_ifindex])), "value": bps / 8} for key, bps in flows.items()]
    return w.observe_active_flows(parse_active_flows(body, keys=PORT_KEYS), now)


def event(kind, key, estimate_bps, threshold_bps, reason, t=0.0) -> HeavyHitterEvent:
    return HeavyHitterEvent(kind, t, key, estimate_bps, threshold_bps, reason, "absolute")


# ------------------------------------------------------------------ parameters from the policy

def test_detector_config_takes_the_policy_rule_and_the_port_capacity_only_for_a_share():
    """Rule: capacity_share and fair_share_multiple are shares of the watched port's capacity;
    an absolute threshold_bps is the same on every port (no capacity passed)."""
    share = HeavyHitters(enabled=True, capacity_share=0.3, window_s=3.0, min_window_s=0.5,
                         release_fraction=0.6, min_hold_s=1.0)
    assert detector_config(share, 50_000_000) == HeavyHitterConfig(
        capacity_share=0.3, capacity_bps=50_000_000, window_s=3.0, min_window_s=0.5, release_fraction=0.6,
        min_hold_s=1.0)
    fair = HeavyHitters(enabled=True, capacity_share=None, fair_share_multiple=2.0)
    assert detector_config(fair, 100_000_000) == HeavyHitterConfig(fair_share_multiple=2.0,
                                                                   capacity_bps=100_000_000)
    assert detector_config(absolute(), 50_000_000) == HeavyHitterConfig(threshold_bps=10_000_000)


def test_mode_detector_is_seed_003s_history_with_the_rate_window_as_idle_time():
    """Rule (seed 003, Sec. IV-A, as docs/sflow.md reads it): record every rec_int-th sample,
    keep hist_len records, decide every stat_int samples; a connection without a sample for
    window_s is idle, and a mode holds its place min_hold_s."""
    hh = HeavyHitters(enabled=True, detector="mode", rec_int=2, hist_len=64, stat_int=16, window_s=4.0,
                      min_hold_s=1.5)
    det = mode_detector(hh)
    est = det.estimator
    assert (est.rec_int, est.hist_len, est.stat_int, det.idle_s, det.min_hold_s) == (2, 64, 16, 4.0, 1.5)


def test_threshold_samples_per_s_counts_mtu_frames_of_a_flow_at_the_threshold():
    # 15 Mbit/s of 1514-byte frames at 1-in-256: the 4.8 samples/s docs/sflow.md quotes
    assert threshold_samples_per_s(15e6, 256) == pytest.approx(4.84, abs=0.01)
    assert watch(absolute(), capacity_bps=50e6).detects_slowly(256)  # 10 Mbit/s: 3.2/s
    assert not watch(absolute()).detects_slowly(64)  # 12.9/s
    assert threshold_samples_per_s(10e6, 64) >= FEW_SAMPLES_PER_S
    assert not watch(HeavyHitters(enabled=True, detector="mode")).detects_slowly(10_000)  # no threshold


# ------------------------------------------------------------------ one port's detectors

def test_port_watch_counts_only_what_leaves_by_its_port():
    """Rule: OVS samples whole bridges, so a port's detectors take only the samples whose
    output interface is the port's ifIndex; a port whose ifIndex is not known takes all."""
    elephant = {ELEPHANT: 25}  # 30 Mbit/s
    mine = watch(absolute())
    assert feed(mine, elephant, 0.0, 2.0, output_if=PORT_IFINDEX + 1) == []
    assert mine.report(2.0, SAMPLING, False)["top"] == []
    unknown = watch(absolute(), ifindex=None)
    assert [e.kind for e in feed(unknown, elephant, 0.0, 2.0, output_if=PORT_IFINDEX + 1)] == ["detected"]


def test_port_watch_takes_sflowrt_rates_by_output_ifindex():
    w = watch(absolute())
    assert rates(w, {ELEPHANT: 30e6}, 0.0, output_ifindex=PORT_IFINDEX + 1) == []
    [ev] = rates(w, {ELEPHANT: 30e6, MOUSE: 1e6}, 0.0)
    assert (ev.kind, ev.key, ev.estimate_bps) == ("detected", ELEPHANT, 30e6)


def test_hysteresis_a_steered_flow_is_released_below_the_low_threshold_after_the_hold_time():
    """Rule: a flow is steered when its estimate reaches the high threshold (10 Mbit/s); it is
    released only when the estimate is below the low one (release_fraction 0.7: 7 Mbit/s), and
    not before it has been steered min_hold_s (2 s); between low and high it stays."""
    w, book = watch(absolute()), SteeringBook()

    def at(t, bps):
        return [(d.action, d.record["reason"]) for d in book.apply(w.key, rates(w, {ELEPHANT: bps}, t), t, WALL)]

    assert at(0.0, 24e6) == [("steer", "above_high")]
    assert at(1.0, 5e6) == []     # below low, but held for only 1 s
    assert at(2.5, 8e6) == []     # held, but between low and high
    assert at(3.0, 5e6) == [("unsteer", "below_low")]
    [_, released] = book.recent()
    assert (released["threshold_bps"], released["steered_for_s"]) == (7e6, 3.0)


def test_mode_watch_steers_the_mode_of_the_history_without_a_threshold():
    """Rule (seed 003): with detector "mode" the port's heavy hitter is the most frequent
    connection among the recorded samples, whatever its rate; the rate detector still runs for
    the estimates shown."""
    hh = HeavyHitters(enabled=True, detector="mode", rec_int=1, hist_len=16, stat_int=8)
    w, book = watch(hh), SteeringBook()
    events = feed(w, {ELEPHANT: 3, MOUSE: 1}, 0.0, 1.0)  # 3.6 and 1.2 Mbit/s: far below any share
    [steer] = book.apply(w.key, events, 1.0, WALL)
    assert (steer.action, steer.flow) == ("steer", ELEPHANT)
    assert events[0].mode == MODE_OF_HISTORY and steer.record["threshold_bps"] is None
    assert steer.record["reason"].startswith("mode (") and steer.record["estimate_bps"] > 0
    report = w.report(1.0, SAMPLING, False)
    assert report["detector"] == "mode" and report["mode"]["flow"]["src_port"] == ELEPHANT.src_port


# ------------------------------------------------------------------ the steering book

def test_book_steers_per_flow_and_port_and_unsteers_when_no_port_steers_it():
    """Rule: a detection steers a flow on that port unless it already is; a release frees it
    there; the switches unsteer the flow only when no port steers it any more."""
    book = SteeringBook()
    detected = event("detected", ELEPHANT, 30e6, 10e6, "above_high")
    released = event("released", ELEPHANT, 5e6, 7e6, "below_low")
    assert [d.action for d in book.apply((1, 3), [detected, detected], 0.0, WALL)] == ["steer"]
    assert [d.action for d in book.apply((2, 1), [detected], 0.5, WALL)] == ["steer"]
    assert book.steered() == {ELEPHANT}
    assert [d.action for d in book.apply((1, 3), [released, released], 4.0, WALL)] == [None]
    assert [d.action for d in book.apply((2, 1), [released], 4.5, WALL)] == ["unsteer"]
    assert book.steered() == set() and book.apply((2, 1), [released], 5.0, WALL) == []
    assert [(r["decision"], r["port"], r.get("steered_for_s")) for r in book.recent()] == [
        ("steered", 3, None), ("steered", 1, None), ("released", 3, 4.0), ("released", 1, 4.0)]


def test_book_release_all_frees_every_flow_with_its_steering_estimate():
    book = SteeringBook()
    book.apply((1, 3), [event("detected", ELEPHANT, 30e6, 10e6, "above_high")], 0.0, WALL)
    book.apply((1, 3), [event("detected", MOUSE, 12e6, 10e6, "above_high")], 1.0, WALL)
    done = book.release_all("detection stopped", 2.0, WALL + 2)
    assert [(d.action, d.flow, d.record["estimate_bps"], d.record["threshold_bps"]) for d in done] == [
        ("unsteer", ELEPHANT, 30_000_000, None), ("unsteer", MOUSE, 12_000_000, None)]
    assert book.steered() == set() and book.current({}, 2.0) == []


def test_book_keeps_the_latest_decisions():
    book = SteeringBook(log_len=3)
    for i in range(4):
        book.apply((1, 3), [event("detected", ELEPHANT._replace(src_port=i), 30e6, 10e6, "above_high")],
                   float(i), WALL)
    assert [r["flow"]["src_port"] for r in book.recent()] == [1, 2, 3]
    assert [r["flow"]["src_port"] for r in book.recent(2)] == [2, 3]


def test_rest_shape_of_current_log_and_ports():
    """GET /coex/v1/heavy-hitters keeps these keys (docs/rest.md, tests/integration)."""
    w, book = watch(absolute()), SteeringBook()
    book.apply(w.key, rates(w, {ELEPHANT: 24e6}, 0.0), 0.0, WALL)
    book.apply(w.key, rates(w, {ELEPHANT: 5e6}, 3.0), 3.0, WALL + 3)
    book.apply(w.key, rates(w, {ELEPHANT: 24e6}, 4.0), 4.0, WALL + 4)
    [current] = book.current({w.key: w}, 4.0)
    assert current == {"flow": {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.3", "protocol": 6, "src_port": 43210,
                                "dst_port": 5201},
                       "dpid": 1, "port": 3, "since": WALL + 4, "detected_estimate_bps": 24_000_000,
                       "estimate_bps": 24_000_000}
    assert book.current({}, 4.0)[0]["estimate_bps"] is None  # its port no longer watched
    steered, released, _ = book.recent()
    assert list(steered) == ["time", "monotonic_s", "decision", "flow", "dpid", "port", "estimate_bps",
                             "threshold_bps", "reason", "detection_latency_s"]
    assert list(released) == list(steered)[:-1] + ["steered_for_s"]
    assert (steered["threshold_bps"], released["threshold_bps"]) == (10_000_000, 7_000_000.0)
    assert w.tick(4.0) == []  # counts the active flows
    assert w.report(4.0, 64, False) == {"dpid": 1, "port": 3, "name": "s1-eth3", "ifindex": PORT_IFINDEX,
                                        "detector": "rate", "sampling": 64, "sampling_chosen": False,
                                        "threshold_bps": 10_000_000, "threshold_samples_per_s": 12.9,
                                        "active_flows": 1,
                                        "top": [{"flow": current["flow"], "estimate_bps": 24_000_000}]}


def test_book_counts_decisions_and_detection_latency_for_metrics():
    """GET /metrics' counters: steered and released (by reason) since the book was made, even
    past the log's length, and the latency from a flow's first sample to its detection."""
    book = SteeringBook(log_len=1)
    first = dataclasses.replace(event("detected", ELEPHANT, 30e6, 10e6, "above_high", t=2.0), first_seen_s=1.4)
    book.apply((1, 3), [first], 2.0, WALL)
    book.apply((1, 3), [event("released", ELEPHANT, 1e6, 7e6, "below_low", t=5.0)], 5.0, WALL + 3)
    book.apply((1, 3), [event("detected", ELEPHANT, 30e6, 10e6, "mode (3/4 records)", t=6.0)], 6.0, WALL + 4)
    assert book.steered_total == 2 and book.released_total == {"below_low": 1}
    assert book.latency_n == 1 and book.latency_sum_s == pytest.approx(0.6)  # the mode detector knows none
    assert book.latency_counts == [0, 0, 1, 0, 0, 0, 0, 0]  # in (0.5, 1.0]
    assert [r["decision"] for r in book.recent()] == ["steered"]


@pytest.mark.parametrize("threshold_bps, capacity_bps, expect", [
    (50e6, 100e6, 64),      # 4128 frames/s at the threshold / 40 = 103 -> 64: 64.5 samples/s
    (10e6, 100e6, 16),      # 20.6 -> 16: 51.6 samples/s
    (1e6, 100e6, 8),        # 2 -> 2, but 100 Mbit/s at 1-in-2 is 4128 samples/s: the budget takes 8
    (5e9, 10e9, 8192),      # 10 Gbit/s: 101.9 samples/s of the whole port at 8192
    (None, 100e6, 8),       # the mode detector: only the budget
])
def test_chosen_sampling_serves_the_threshold_within_the_budget(threshold_bps, capacity_bps, expect):
    """docs/sflow.md, "Sampling chosen from the goal": the largest power of two that gives a flow
    at the threshold at least SUSPECT_SAMPLES_PER_S samples a second, unless the port's full
    capacity would then give more than MAX_PORT_SAMPLES_PER_S."""
    n = chosen_sampling(threshold_bps, capacity_bps)
    assert n == expect
    assert capacity_bps / (8 * 1514 * n) <= MAX_PORT_SAMPLES_PER_S
    if threshold_bps is not None and n > 1 and capacity_bps / (8 * 1514 * (n // 2)) <= MAX_PORT_SAMPLES_PER_S:
        assert threshold_bps / (8 * 1514 * n) >= SUSPECT_SAMPLES_PER_S > threshold_bps / (8 * 1514 * 2 * n)


def test_a_bridge_samples_for_its_most_demanding_port_and_a_set_sampling_wins():
    @dataclasses.dataclass
    class P:
        dpid: int
        port: int
        capacity_bps: int
    ports = [P(1, 3, 100_000_000), P(1, 4, 20_000_000), P(2, 3, 1_000_000_000)]
    chosen = bridge_sampling(HeavyHitters(enabled=True, capacity_share=0.5), ports)
    assert chosen == {1: min(chosen_sampling(50e6, 100e6), chosen_sampling(10e6, 20e6)),
                      2: chosen_sampling(500e6, 1e9)}
    assert bridge_sampling(HeavyHitters(enabled=True, sampling=256), ports) == {1: 256, 2: 256}


def test_the_agents_send_to_every_live_instance_unless_the_switch_host_says_otherwise():
    """Rule (docs/ha.md): with the embedded collector, a bridge's agent sends to every live
    instance's collector, or to the policy's collector while none is known; a switch host's
    own `collector` wins (the address it reaches us by); sFlow-RT: its sFlow port alone."""
    pol = Policy.from_dict({"ports": [{"dpid": 1, "port": 3, "capacity_bps": 50_000_000}],
                            "heavy_hitters": {"enabled": True, "collector": "127.0.0.1:6343"},
                            "switches": [{"dpid": 2, "ovsdb": "tcp:10.0.0.2:6640", "collector": "10.0.0.1:6343"}]})
    live = ["127.0.0.1:6344", "127.0.0.1:6343", "127.0.0.1:6344"]
    assert sampling_targets(pol, 1, live) == ["127.0.0.1:6343", "127.0.0.1:6344"]
    assert sampling_targets(pol, 1, []) == ["127.0.0.1:6343"]
    assert sampling_targets(pol, 2, live) == ["10.0.0.1:6343"]
    rt = pol.edited(lambda d: d["heavy_hitters"].update(source="sflow-rt", collector="10.0.0.8:6343"))
    assert sampling_targets(rt, 1, live) == ["10.0.0.8:6343"]


def test_a_standby_takes_over_what_its_detectors_hold_heavy():
    """Rule: held() gives a "detected" event for each flow the deciding detector holds heavy
    (the rate detector's with its threshold and first sample; the mode detector's current
    mode), and none while nothing is heavy."""
    w = watch(absolute())
    assert w.held(0.0) == []
    rates(w, {ELEPHANT: 20e6}, 0.0)
    [ev] = w.held(0.5)
    assert (ev.kind, ev.key, ev.threshold_bps, ev.reason) == ("detected", ELEPHANT, 10_000_000,
                                                              "detected while standing by")
    m = watch(absolute(detector="mode"))
    for i in range(64):
        m.mode.observe(ELEPHANT, i * 0.01)
    [ev] = m.held(1.0)
    assert (ev.key, ev.mode) == (ELEPHANT, MODE_OF_HISTORY)


def test_counting_puts_the_detectors_bar_at_the_suspect_fraction_and_keeps_the_threshold():
    """Sample to suspect, count to confirm: with counting on, the detector raises a
    suspect at suspect_fraction of the threshold; the threshold shown and confirmed against
    stays the policy's."""
    w = watch(absolute(counting=True, suspect_fraction=0.5))
    assert (w.high_threshold_bps(), w.low_threshold_bps()) == (10_000_000, 7_000_000)
    assert w.detector.high_threshold_bps() == 5_000_000
    # A young flow is judged on a tenth of a second (policy: 1 s), from its second sample (policy: 4)
    assert (w.detector.config.min_window_s, w.detector.config.min_samples) == (0.1, 2)
    [ev] = rates(w, {ELEPHANT: 6e6}, 0.0)  # above the suspects' bar, below the threshold
    assert ev.kind == "detected" and ev.threshold_bps == 5_000_000
    assert watch(absolute(detector="mode", counting=True)).suspect_fraction == 1.0  # the mode detector: no counting
