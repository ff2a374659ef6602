"""Cocoa (seed 002, Bachl et al.): fq's per-flow queues with a per-flow limit that
Algorithm 1 adapts, replayed packet by packet through build/ckcd-replay. Each test names
the rule of the paper it checks; docs/cocoa.md has our reading of the open points."""

from __future__ import annotations

import pytest

from replaylib import MS, SEC, cbr, merge, run, run_raw

LINK_BPS = 12_000_000  # 1 ms per 1500-byte packet: easy times to reason about
PKT_NS = 1 * MS


def limits(r, flow: int) -> list[int]:
    """The flow's per-flow limit at every xstats sample that shows it."""
    return [x["flows"][flow]["limit"] for _, x in r.xstats if flow in x.get("flows", {})]


def bursts(flow: int, n_pkts: int, every_ns: int, count: int, gap_ns: int = 10_000):
    """count bursts of n_pkts back-to-back arrivals, one every every_ns."""
    return [(k * every_ns + i * gap_ns, flow, 1500, 0) for k in range(count) for i in range(n_pkts)]


def test_idle_link_enlarges_the_buffer_at_most_twofold_per_interval():
    # Alg. 1 lines 3-5 and sec. 2.2: when the flow's queue was idle during the current
    # interval (the link could have sent more), the limit grows by tx / active x idle,
    # capped at 2x, and the arrival that found the queue full is queued. Bursts of 30
    # packets every 100 ms into a 10-packet buffer: the queue drains in ~10 ms and idles
    # ~90 ms, so tx/active x idle (~10/10 ms x 90 ms = 90) is far above the cap: the limit
    # doubles at each burst that still overflows it, 10 -> 20 -> 40, and stops once the
    # 30-packet burst fits.
    trace = bursts(1, 30, 100 * MS, 8)
    r = run(trace, "cocoa flow_limit=10", rate_bps=LINK_BPS, extra=["--xstats-every-ms", "5"])
    seen = limits(r, 1)
    assert seen[0] == 10 and seen[-1] == 40
    steps = [b for a, b in zip(seen, seen[1:]) if b != a]
    assert steps == [20, 40], seen
    final = r.xstats[-1][1]
    assert int(final["enlargements"]) == 2 and int(final["shrinks"]) == 0
    # once 40 packets fit, a 30-packet burst loses nothing
    last_burst = [p for p in r.packets if p["t_arr_ns"] >= 700 * MS]
    assert last_burst and all(p["verdict"] == "sent" for p in last_burst)


def test_standing_queue_in_the_longest_interval_is_cut_at_the_end_of_the_guard_interval():
    # Alg. 1 lines 10-13: when a loss comes after the guard interval ended and the longest
    # interval had a standing queue (its minimum queue q_min > 0), the limit drops by q_min
    # and the q_min newest packets go ("drop superfluous packets"). A sender 10 % above the
    # link keeps the 100-packet buffer full (q_min ~ 99); our floor is 2 packets
    # (docs/cocoa.md), so the limit falls to 2 and 98 packets are dropped as "shrink" at once.
    # The first loss comes at ~1 s and opens a GI of max_gi = 1 s: the cut is at ~2 s.
    trace = cbr(1, LINK_BPS * 1.1, 0, 3 * SEC)
    r = run(trace, "cocoa", rate_bps=LINK_BPS, extra=["--xstats-every-ms", "50"])
    shrunk = r.dropped("shrink")
    assert len(shrunk) == 98
    t = shrunk[0]["t_ns"]
    assert all(p["t_ns"] == t for p in shrunk)  # one cut
    first_loss = r.dropped("overflow")[0]["t_ns"]
    assert first_loss + SEC <= t <= first_loss + SEC + 20 * PKT_NS  # the first loss after the GI
    # the newest packets: every packet queued then that is not shrunk arrived before them
    queued_then = [p for p in r.packets if p["t_arr_ns"] <= t and p["verdict"] == "sent" and p["t_ns"] > t]
    assert queued_then and max(p["seq"] for p in queued_then) < min(p["seq"] for p in shrunk)
    assert limits(r, 1)[-1] == 2
    # the link stays busy: the buffer was standing queue, not throughput (utilization
    # after the cut within one packet per 100 of the link rate)
    after = [p for p in r.sent(1) if p["t_ns"] > t + 100 * MS]
    span = after[-1]["t_ns"] - after[0]["t_ns"]
    assert len(after) >= 0.99 * span / PKT_NS
    # the standing queue is gone: sojourn after the cut is at most the 2-packet buffer
    assert max(p["sojourn_ns"] for p in after) <= 2 * PKT_NS + 1000


def test_first_loss_opens_the_first_guard_interval_and_keeps_the_limit():
    # Alg. 1 lines 6-9: the first time a flow's queue is full it is the flow's first
    # interval: a new interval and a guard interval start, the arrival is dropped, and the
    # limit stays. The GI is multiplier x the longest interval so far (the time from the
    # flow's start to this loss), here 1.25 x ~1.1 s, under max_gi_ms.
    trace = cbr(1, LINK_BPS * 1.1, 0, 1_150 * MS)
    r = run(trace, "cocoa max_gi_ms=10000", rate_bps=LINK_BPS, extra=["--xstats-every-ms", "1140"])
    drops = r.dropped("overflow")
    assert drops, "a sender 10 % above the link must fill a 100-packet buffer within 1.1 s"
    first = drops[0]["t_ns"]
    gi_us = r.xstats[0][1]["flows"][1]["gi_us"]
    assert gi_us == pytest.approx(1.25 * first / 1000, rel=0.01)
    assert limits(r, 1)[0] == 100 and not r.dropped("shrink")


def test_max_gi_caps_the_guard_interval():
    # Sec. 2.3: the GI is at most max_gi (1 s by default) however long the longest interval.
    trace = cbr(1, LINK_BPS * 1.1, 0, 1_150 * MS)
    r = run(trace, "cocoa max_gi_ms=200", rate_bps=LINK_BPS, extra=["--xstats-every-ms", "1140"])
    assert r.xstats[0][1]["flows"][1]["gi_us"] == 200_000


def test_flows_share_the_link_by_deficit_round_robin():
    # fq, which cocoa extends: per-flow queues served round robin by bytes, so two
    # backlogged flows get equal shares whatever their arrival rates (a 2 % tolerance:
    # the shares are measured over 1 s of 1 ms packets, after the start-up quanta).
    trace = merge(cbr(1, LINK_BPS * 0.8, 0, 2 * SEC), cbr(2, LINK_BPS * 2.0, 0, 2 * SEC))
    r = run(trace, "cocoa", rate_bps=LINK_BPS)
    a, b = (r.rate_bps(f, 1 * SEC, 2 * SEC) for f in (1, 2))
    assert a == pytest.approx(LINK_BPS / 2, rel=0.02) and b == pytest.approx(LINK_BPS / 2, rel=0.02)


def test_a_light_flow_is_not_queued_behind_a_heavy_one():
    # fq's isolation: a flow under its share waits for at most one packet of each other
    # flow, not behind their queues (a 100-packet buffer of the heavy flow is 100 ms here).
    trace = merge(cbr(1, LINK_BPS * 0.1, 0, 2 * SEC), cbr(2, LINK_BPS * 1.5, 0, 2 * SEC))
    r = run(trace, "cocoa", rate_bps=LINK_BPS)
    light = r.sent(1, 500 * MS)
    assert light and not r.dropped(flow=1)
    assert max(p["sojourn_ns"] for p in light) <= 2 * PKT_NS


def test_reconfigure_carries_every_flow_queue_over():
    trace = merge(cbr(1, LINK_BPS * 1.5, 0, 400 * MS), cbr(2, LINK_BPS * 1.5, 0, 400 * MS))
    r = run(trace, "cocoa", rate_bps=LINK_BPS,
            extra=["--reconfigure", f"{200 * MS}:droptail limit=1000",
                   "--reconfigure", f"{300 * MS}:cocoa"])
    assert not r.dropped("flush")
    assert len(r.packets) == len(trace)


@pytest.mark.parametrize("spec,names", [
    ("cocoa flow_limit=1", ["flow_limit"]),
    ("cocoa multiplier=0", ["multiplier"]),
    ("cocoa max_increase=0.5", ["max_increase"]),
    ("cocoa max_gi_ms=0", ["max_gi_ms"]),
    ("cocoa quantum=10", ["quantum"]),
    ("cocoa flows=8", ["flows"]),
    ("cocoa limt=5", ["limt"]),
])
def test_bad_parameters_are_refused_naming_them(spec, names):
    cp = run_raw(["--qdisc", spec, "--describe"])
    assert cp.returncode == 2
    assert all(n in cp.stderr for n in names), cp.stderr
