"""hdcodel: CoDel that drops the most bandwidth-consuming connection's late packets and the
others' only with probability p (Hanai, Yamaguchi, Kobayashi, seed 003; docs/hdcodel.md).
Each test names the rule of the paper it checks."""

from __future__ import annotations

import math
import random

import pytest

from coex.heavy_hitters import ModeOfHistoryEstimator
from replaylib import MS, SEC, cbr, merge, poisson, run

C = 100_000_000
# A standing overload of 120 Mbit/s into 100: CoDel stays in its dropping state, and
# interval_ms=10 makes it decide often enough (thousands of decisions in 4 s) to measure p.
OVERLOAD = "limit=100000 interval_ms=10"


def overload_trace(rates_bps=(90e6, 15e6, 15e6), end_ns=4 * SEC, seed=1):
    return merge(*(poisson(f, r, 0, end_ns, seed=seed) for f, r in enumerate(rates_bps, 1)))


def last_xstats(r) -> dict:
    return r.xstats[-1][1]


def delay_drops(r, flow) -> int:
    return len(r.dropped("delay", flow))


def fates(r) -> list[tuple]:
    return [(p["seq"], p["verdict"], p["reason"], p["t_ns"]) for p in r.packets]


# ---- Sec. IV-A, Fig. 7: the drop decision -----------------------------------------------

@pytest.mark.parametrize("p", [0.333333, 0.5])
def test_heavy_connection_always_dropped_others_at_rate_p(p):
    # "a packet in the most bandwidth-consuming connection that exceeds the target is always
    # dropped. An exceeding packet in the other connections is dropped with dropping
    # probability p."
    r = run(overload_trace(), f"hdcodel key=flow p={p} {OVERLOAD}")
    x = last_xstats(r)
    assert x["heavy_key"] == "1"
    heavy, thinned, spared = int(x["heavy_drops"]), int(x["thinned_drops"]), int(x["spared"])
    # every decision on flow 1 was a drop; the drops of flows 2 and 3 are the thinned ones
    assert delay_drops(r, 1) == heavy > 1000
    assert delay_drops(r, 2) + delay_drops(r, 3) == thinned
    n = thinned + spared
    # Binomial(n, p): 4 standard deviations (a correct build fails this once in ~16 000
    # seeds; the seed is fixed, so the run is repeatable)
    assert abs(thinned / n - p) <= 4 * math.sqrt(p * (1 - p) / n), (thinned, n)


def test_counter_thinning_drops_exactly_one_in_1_over_p():
    # Sec. IV-B: "our implementation periodically drops a packet once per 1/p packets using a
    # loop counter": one counter over all other connections' decisions, the 3rd, 6th, ...
    r = run(overload_trace(), f"hdcodel key=flow p=0.333333 thin=counter {OVERLOAD}")
    x = last_xstats(r)
    n = int(x["thinned_drops"]) + int(x["spared"])
    assert n > 1000 and int(x["thinned_drops"]) == n // 3


def test_p_1_is_plain_codel_on_the_same_trace_and_seed():
    # p = 1: "an exceeding packet in the other connections is dropped with probability p" is
    # every exceeding packet, CoDel's own rule; no random number is drawn, so the run is codel's
    tr = overload_trace()
    for params in ("limit=1000", OVERLOAD):
        a = run(tr, f"codel {params}", seed=5)
        b = run(tr, f"hdcodel key=flow p=1 {params}", seed=5)
        assert a.dropped("delay") and fates(a) == fates(b)


def test_one_connection_is_plain_codel():
    # one connection is always the most bandwidth-consuming one: every exceeding packet is its
    # own and dropped. key=flow with one flow, and key=host with several flows of one host pair
    # (the paper's connection is the host pair: "MAC addresses of the sender and the receiver")
    one = poisson(1, 120e6, 0, 2 * SEC, seed=2)
    a = run(one, "codel limit=1000")
    b = run(one, "hdcodel key=flow")
    assert a.dropped("delay") and fates(a) == fates(b)
    many = [(t, f, ln, d, 7) for t, f, ln, d in overload_trace(end_ns=2 * SEC)]
    a = run(many, "codel limit=1000")
    b = run(many, "hdcodel key=host")
    assert a.dropped("delay") and fates(a) == fates(b)
    assert last_xstats(b)["heavy_key"] == "7"


def test_spare_hold_keeps_the_drop_due_advance_counts_it():
    # Left open by the paper: whether a spared drop advances CoDel's count and drop_next.
    # Two interleaved CBR flows of 65 Mbit/s (130 into 100), flow 1 the fixed heavy key, p = 0,
    # so every drop must land on flow 1. Dequeues happen on the same grid of packet times in
    # all three runs (a drop takes no link time).
    pkt_ns = 1500 * 8 * SEC // C
    tr = merge(cbr(1, 65e6, 0, 2 * SEC),
               [(t + pkt_ns // 3, 2, ln, d) for t, _, ln, d in cbr(2, 65e6, 0, 2 * SEC)])
    codel = [p["t_ns"] for p in run(tr, "codel limit=100000").dropped("delay")]
    hold = run(tr, "hdcodel key=flow mode=static heavy_key=1 p=0 spare=hold limit=100000")
    adv = run(tr, "hdcodel key=flow mode=static heavy_key=1 p=0 spare=advance limit=100000")
    for r in (hold, adv):
        assert {p["flow"] for p in r.dropped("delay")} == {1}
        assert int(last_xstats(r)["spared"]) > 50
    # hold: the drop stays due and the next packet is judged, so CoDel's schedule is kept and
    # each drop moves to the next flow-1 packet: at most two packet times later (no more
    # than two flow-2 packets stand together at the head here)
    held = [p["t_ns"] for p in hold.dropped("delay")]
    assert abs(len(held) - len(codel)) <= 1
    assert all(0 <= h - c <= 2 * pkt_ns for h, c in zip(held, codel))
    # advance: a spared decision counts as a drop (as an ECN mark does in Linux), so the drops
    # are CoDel's decisions that fell on flow 1, at CoDel's instants, about half of them
    advanced = [p["t_ns"] for p in adv.dropped("delay")]
    assert set(advanced) <= set(codel) and len(advanced) < 0.6 * len(codel)


# ---- Sec. IV-A, Fig. 8: the estimate of the most bandwidth-consuming connection ---------

def test_estimate_switches_when_another_connection_becomes_heavier():
    # "The determined connection is assumed as the most bandwidth-consuming connection": the
    # mode of the last hist_len records follows the traffic. Flow 1 sends 3/4 of the packets
    # for 1 s, then flow 2 does. At 120 Mbit/s of 1500-byte packets the 128 records span
    # 13 ms; flow 2 outnumbers flow 1 in them about 64 packets (~7 ms) after the change, and
    # is the estimate at the next statistics point (32 packets, ~3 ms later): allow 30 ms.
    tr = merge(poisson(1, 90e6, 0, SEC, seed=3), poisson(2, 30e6, 0, SEC, seed=3),
               poisson(1, 30e6, SEC, 2 * SEC, seed=4), poisson(2, 90e6, SEC, 2 * SEC, seed=4))
    r = run(tr, f"hdcodel key=flow {OVERLOAD}", extra=["--xstats-every-ms", "5"])
    heavy = [(t, x["heavy_key"]) for t, x in r.xstats]
    assert all(k == "1" for t, k in heavy if 10 * MS <= t <= SEC)
    assert all(k == "2" for t, k in heavy if SEC + 30 * MS <= t)
    # and the drops follow the estimate: after the switch flow 2 pays
    late = [p for p in r.dropped("delay") if p["t_ns"] > SEC + 30 * MS]
    assert late and sum(p["flow"] == 2 for p in late) >= 0.8 * len(late)


def test_key_host_penalizes_the_whole_host_pair():
    # The paper keys a connection by the sender's and receiver's MACs, a host pair: six flows
    # of 10 Mbit/s from one host (60 in all) outweigh a 40 Mbit/s flow from another under
    # key=host, and that flow is the heavy one under key=flow. hist_len=1024 so that the mode
    # never flickers: 50 % of the records against 33 % (key=host), 33 % against 17 % (key=flow)
    # are more than 6 standard deviations apart in 1024 records.
    tr = merge(*(poisson(f, 10e6, 0, 2 * SEC, seed=5) for f in range(1, 7)),
               poisson(7, 40e6, 0, 2 * SEC, seed=5), poisson(8, 20e6, 0, 2 * SEC, seed=5))
    hosts = {**{f: 10 for f in range(1, 7)}, 7: 30, 8: 20}
    tr = [(t, f, ln, d, hosts[f]) for t, f, ln, d in tr]
    by_host = run(tr, f"hdcodel key=host p=0 hist_len=1024 {OVERLOAD}")
    by_flow = run(tr, f"hdcodel key=flow p=0 hist_len=1024 {OVERLOAD}")
    assert last_xstats(by_host)["heavy_key"] == "10"
    assert last_xstats(by_flow)["heavy_key"] == "7"
    assert {p["flow"] for p in by_host.dropped("delay")} == set(range(1, 7))
    assert {p["flow"] for p in by_flow.dropped("delay")} == {7}


def test_a_trace_without_hosts_keys_each_flow_as_its_own_host():
    # ckcd-replay's 5th column is optional: old 4-column traces stay valid, each flow its own
    # host pair, so key=host and key=flow agree on them
    tr = overload_trace(end_ns=2 * SEC)
    assert fates(run(tr, "hdcodel key=host")) == fates(run(tr, "hdcodel key=flow"))


# ---- the Static baseline (Sec. II-H) -----------------------------------------------------

def test_static_mode_penalizes_its_fixed_key():
    # "this existing method assumed that the most bandwidth-consuming connection was given":
    # the given key is penalized whatever the traffic says, here a light flow, and no
    # estimate is taken.
    r = run(overload_trace(), f"hdcodel key=flow mode=static heavy_key=3 p=0 {OVERLOAD}",
            extra=["--xstats-every-ms", "100"])
    assert delay_drops(r, 3) > 0 and delay_drops(r, 1) == delay_drops(r, 2) == 0
    assert all(x["heavy_key"] == "3" and x["stat_points"] == "0" for _, x in r.xstats)


# ---- the estimator, packet by packet against the controller's (coex/heavy_hitters.py) --

def keyed_sequence(n: int, seed: int, keys=(1, 2, 3, 4, 0, 4294967295)) -> list[int]:
    """Keys whose weights change every 500 packets, so the mode moves and ties happen."""
    rng = random.Random(seed)
    out = []
    for start in range(0, n, 500):
        weights = [rng.choice((1, 1, 2, 3, 5)) for _ in keys]
        out += rng.choices(keys, weights, k=min(500, n - start))
    return out


def c_estimates(keys: list[int], spec: str, by_host: bool) -> list[tuple[int, str, int]]:
    """(packets seen, heavy_key, stat_points) after each packet: one arrival per ms and an
    xstats line every ms, printed after that ms's arrival. 64-byte packets never queue."""
    if by_host:  # the key in the host column, flows that say nothing about it
        tr = [((i + 1) * MS, 1000 + i % 5, 64, 0, k) for i, k in enumerate(keys)]
    else:
        tr = [((i + 1) * MS, k, 64, 0) for i, k in enumerate(keys)]
    r = run(tr, spec, extra=["--xstats-every-ms", "1", "--no-packets"])
    return [(min(len(keys), t // MS), x["heavy_key"], int(x["stat_points"])) for t, x in r.xstats]


def python_estimates(keys: list[int], rec_int: int, hist_len: int, stat_int: int) -> list[str]:
    est = ModeOfHistoryEstimator(rec_int=rec_int, hist_len=hist_len, stat_int=stat_int)
    out = []
    for k in keys:
        est.observe(k)
        out.append("none" if est.current is None else str(est.current))
    return out


def assert_same_estimates(keys, rec_int, hist_len, stat_int, by_host=False) -> list[str]:
    spec = (f"hdcodel key={'host' if by_host else 'flow'} rec_int={rec_int} hist_len={hist_len} "
            f"stat_int={stat_int}")
    want = python_estimates(keys, rec_int, hist_len, stat_int)
    got = c_estimates(keys, spec, by_host)
    assert {seen for seen, _, _ in got} >= set(range(1, len(keys) + 1))
    for seen, heavy, points in got:
        assert points == seen // stat_int
        assert heavy == (want[seen - 1] if seen else "none"), (seen, heavy, want[seen - 1])
    return want


@pytest.mark.parametrize("rec_int,hist_len,stat_int", [
    (1, 128, 32),  # the defaults (the controller's)
    (3, 10, 7),
    (5, 16, 2),    # statistics points before the first record: no estimate yet
    (1, 1, 1),     # the estimate is the last packet's connection
    (2, 4, 4),     # short history: ties at most statistics points
])
@pytest.mark.parametrize("by_host", [False, True])
def test_mode_of_history_matches_the_controllers_estimator(rec_int, hist_len, stat_int, by_host):
    # Sec. IV-A: record every rec_int packets, keep hist_len records, take the mode every
    # stat_int packets. Ties keep the current estimate if it is among them, else go to the
    # most recently recorded; before the first statistics point (or with no record) there is
    # none; the history need not be full. Same key sequence, same estimate after every packet.
    assert_same_estimates(keyed_sequence(3000, seed=rec_int * 100 + hist_len), rec_int, hist_len,
                          stat_int, by_host)


def test_ties_follow_the_controllers_rules():
    # A B A B ...: every statistics point of a 4-record history is a 2-2 tie. The first goes to
    # the most recently recorded (B: a 1-1 tie at packet 2), the later ones keep the current
    # estimate; then C C C C pushes both out, and the A B ties after it go to B, recorded last.
    keys = [1, 2] * 20 + [3] * 8 + [1, 2] * 4
    want = assert_same_estimates(keys, 1, 4, 2)
    assert want[1:40:2] == ["2"] * 20 and want[47] == "3" and want[-1] == "2"
