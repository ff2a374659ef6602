"""Heavy hitters end to end: OVS's sFlow agent -> the controller's embedded collector ->
detector (a suspect) -> a counting flow on s1 whose counter confirms it (sample to
suspect, count to confirm) -> a steering flow into the penalized aggregate -> released when its
counter shows the flow has stopped.

Dumbbell, port s1:3 declared as a 50 Mbit/s bottleneck, threshold 30 % of it (15 Mbit/s):
one paced TCP flow at 30 Mbit/s (60 %) and three at 1 Mbit/s. The flow table is watched for
the whole run: the one steering flow matches the big flow's 5-tuple exactly (as iperf3
reports it), sends it into the penalized aggregate, carries its bytes, and goes when the
flow has ended; no small flow is ever steered.
"""

from __future__ import annotations

import re

import pytest

from coex.counting import CONFIRM_WINDOW_S, READ_INTERVAL_S
from ovs_config.ovsdb import LOCAL
from ovs_config.sflow import sflow_settings
from ovs_config.private_ovs import ofctl
from tests.integration.labkit import (PACED_COUNTED_BPS, PACED_ESTIMATE_BPS, SFLOW_PORT, penalized_actions,
                                      run_watching, steering_flows, wait_released)

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM


def test_big_flow_is_steered_and_released_small_ones_never(hh_lab):
    net, api, ctl = hh_lab
    api.ok("PUT", "/ports/1/3", {"capacity_bps": 50_000_000})
    api.ok("PUT", "/heavy-hitters/config", {"enabled": True, "collector": f"127.0.0.1:{SFLOW_PORT}",
                                            "sampling": 64, "polling_s": 5, "capacity_share": 0.3,
                                            "window_s": 3, "min_hold_s": 1})
    # The agent runs on the bridge of the bottleneck port only.
    assert sflow_settings("s1")["sampling"] == "64" and sflow_settings("s2") is None
    # Counting reads switch counters, which OVS refreshes every 100 ms while it does (500 by default).
    assert LOCAL.get("Open_vSwitch", ".", "other_config:max-revalidator") == "100"
    h1, h2, h3, h4 = net.get("h1", "h2", "h3", "h4")
    # Watch the flow table for the whole run (a full window into the flow for the report).
    run = run_watching(api, [(h1, h3, 5201, "30M", 10)] + [(h2, h4, 5202 + i, "1M", 10) for i in range(3)],
                       report_at_s=6)
    seen, detected_after, big_bytes, during = run["seen"], run["first_after_s"], run["big_bytes"], run["during"]
    print(f"heavy hitter steered {detected_after} s after the flows started")
    assert detected_after is not None, f"never steered; report: {api.ok('GET', '/heavy-hitters')}"
    # Exactly the big flow's data connection (iperf3's own record of its 5-tuple) was steered,
    # into the penalized aggregate; none of the small ones ever was.
    [connected] = run["reports"][5201]["start"]["connected"]
    big = ("10.0.0.1", "10.0.0.3", connected["local_port"], 5201)
    assert list(seen) == [big], seen
    assert seen[big]["actions"] == penalized_actions(api, separate_queues=False)
    # Its packets went through the steering flow: its byte count grew while it ran (at
    # 30 Mbit/s, megabytes in the seconds between the first and the last look).
    assert big_bytes[-1] - big_bytes[0] > 1_000_000, f"{big_bytes}; {run['load']}"
    report = api.ok("GET", "/heavy-hitters")
    steered = [d for d in report["log"] if d["decision"] == "steered"]
    assert [d["flow"]["dst_port"] for d in steered] == [5201], steered  # the small ones never
    assert steered[0]["flow"]["src_port"] == connected["local_port"]
    assert steered[0]["estimate_bps"] >= steered[0]["threshold_bps"] == 15e6
    # Confirmed by its counting flow's counter, not by the samples: the steering's rate is the
    # switch's count of the flow over the span of its counter's changes (>= CONFIRM_WINDOW_S: at
    # least the threshold; at most the paced rate's upper tolerance stretched by the READ_INTERVAL_S
    # the first value's time may lag, 36.5 * 0.15 / 0.1 Mbit/s), and the rate shown while it runs is
    # its steering flow's count over the last second.
    assert steered[0]["reason"].startswith("counted"), steered[0]
    low, high = PACED_COUNTED_BPS
    assert steered[0]["estimate_bps"] <= high * (CONFIRM_WINDOW_S + READ_INTERVAL_S) / CONFIRM_WINDOW_S, steered[0]
    assert 0 < steered[0]["counted_for_s"] <= 1.0, steered[0]
    [now] = during["current"]
    assert now["counted_bps"] is not None and low <= now["counted_bps"] <= high, f"{now}; {run['load']}"
    # While it runs, sFlow's estimate tracks the paced 30 Mbit/s within the sampling noise.
    low, high = PACED_ESTIMATE_BPS
    assert low <= now["estimate_bps"] <= high, f"{now}; {run['load']}"
    # Released once the flow is gone: the window (3 s) empties, the hold (1 s) has passed.
    wait_released(seen)
    assert steering_flows() == [] and steering_flows("s2") == []
    assert list(seen) == [big], seen  # not even while the big one was being released
    report = api.ok("GET", "/heavy-hitters")
    assert report["current"] == []
    assert [d["decision"] for d in report["log"]] == ["steered", "released"]
    assert report["log"][1]["reason"] == "counted_below_low"
    # The big one was confirmed once (a small one may have been a suspect on two close samples,
    # never confirmed: 1 Mbit/s is counted), and no counting flow is left on the switch.
    assert (report["counting"]["confirmed"], report["counting"]["suspects"]) == (1, [])
    assert "priority=2050" not in ofctl("dump-flows", "s1")
    assert report["collector"]["datagrams_ok"] > 0
    # 15 Mbit/s of MTU frames at 1-in-64: 15e6 / (8 * 1514 * 64) = 19.4 samples/s, enough
    # for sub-second detection; at 1-in-256 it would be 4.8 and the controller warns.
    [port] = report["ports"]
    assert port["threshold_samples_per_s"] == 19.4
    assert "samples/s" not in ctl.log()
    api.ok("PUT", "/heavy-hitters/config", {"enabled": True, "collector": f"127.0.0.1:{SFLOW_PORT}",
                                            "sampling": 256, "capacity_share": 0.3})
    assert api.ok("GET", "/heavy-hitters")["ports"][0]["threshold_samples_per_s"] == 4.8
    assert re.search(r"15.0 Mbit/s threshold gives 4.8 samples/s at 1-in-256", ctl.log())
    api.ok("PUT", "/heavy-hitters/config", {"enabled": False})
    assert LOCAL.get("Open_vSwitch", ".", "other_config:max-revalidator") is None  # OVS's own again
