"""The mode-of-history detector (seed 003, `detector: "mode"`) in the real controller: OVS's
sFlow samples -> ModeHeavyHitterDetector on the bottleneck port -> the port's most
packet-consuming connection is steered into the penalized aggregate, alone, and released
when it goes quiet.

Dumbbell, s1:3 declared a 50 Mbit/s bottleneck, sampling 1-in-64: one TCP flow paced at
30 Mbit/s (~40 samples/s) for 8 s and three at 1 Mbit/s (~1.3 samples/s each) for the
first 6 s. The mode detector has no rate threshold (it names the most frequent connection
of the last hist_len samples every stat_int samples), so the small flows end first: with
the big one gone they would become the mode in turn, as the paper intends.
"""

from __future__ import annotations

import pytest

from tests.integration.labkit import (PACED_ESTIMATE_BPS, SFLOW_PORT, penalized_actions, run_watching,
                                      steering_flows, wait_released)

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM


def test_mode_detector_steers_the_heaviest_flow_alone(hh_lab):
    net, api, ctl = hh_lab
    api.ok("PUT", "/ports/1/3", {"capacity_bps": 50_000_000})
    api.ok("PUT", "/heavy-hitters/config", {
        "enabled": True, "detector": "mode", "collector": f"127.0.0.1:{SFLOW_PORT}", "sampling": 64,
        "polling_s": 5, "rec_int": 1, "hist_len": 128, "stat_int": 32, "window_s": 3, "min_hold_s": 1})
    h1, h2, h3, h4 = net.get("h1", "h2", "h3", "h4")
    run = run_watching(api, [(h1, h3, 5201, "30M", 8)] + [(h2, h4, 5202 + i, "1M", 6) for i in range(3)],
                       report_at_s=4)
    seen, detected_after, during = run["seen"], run["first_after_s"], run["during"]
    print(f"mode detector steered after {detected_after} s")
    [connected] = run["reports"][5201]["start"]["connected"]
    big = ("10.0.0.1", "10.0.0.3", connected["local_port"], 5201)
    assert list(seen) == [big], seen  # the heaviest flow, and nothing else, ever
    assert seen[big]["actions"] == penalized_actions(api, separate_queues=False)
    # GET /heavy-hitters names the detector and the current mode while the flows run: the big
    # flow is 30 of the port's 33 Mbit/s (~90 % of the records), so it holds a majority of them
    # in any history of 128.
    [port] = during["ports"]
    assert port["detector"] == "mode" and port["mode"]["flow"]["src_port"] == connected["local_port"]
    assert port["mode"]["last_decision"]["count"] > port["mode"]["last_decision"]["records"] / 2, \
        f"{port['mode']}; {run['load']}"
    # The rate detector still runs for the estimates shown: the same claim as with it alone.
    [current] = during["current"]
    low, high = PACED_ESTIMATE_BPS
    assert current["flow"]["dst_port"] == 5201 and low <= current["estimate_bps"] <= high, \
        f"{current}; {run['load']}"

    # Quiet for window_s (3 s): released and forgotten.
    wait_released(seen)
    assert steering_flows() == [] and list(seen) == [big]
    report = api.ok("GET", "/heavy-hitters")
    assert report["current"] == [] and report["detector"] == "mode"
    log = [(d["decision"], d["flow"]["dst_port"], d["reason"]) for d in report["log"]]
    assert [(what, port) for what, port, _ in log] == [("steered", 5201), ("released", 5201)], log
    assert log[0][2].startswith("mode (") and log[1][2] == "idle"
