"""DualPI2 (RFC 9332; Linux sch_dualpi2's defaults and choices, docs/baselines.md): two FIFOs,
L for the packets whose ECN field matches the mask (ECT(1) and CE by default) and C for the
rest, under one PI controller whose base probability p' follows the larger head delay; C gets
p'^2 (a drop, or a CE mark on an ECN-capable packet), L gets k p' as CE marks plus a step mark
on a late packet; a byte credit shares the link between them. The core has no timer: the PI
updates due run at the next enqueue or dequeue.

The traces are open-loop: nothing slows down when marked or dropped. xstats report p' as of the
last enqueue or dequeue. ECN codepoints: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE."""

from __future__ import annotations

import bisect
import json
import math

import pytest

from replaylib import CE, ECT0, MS, SEC, cbr, merge, run, run_raw, with_ecn

C = 100_000_000
ECT1 = 1
AQM_OFF = "target_ms=10000"  # p' never rises while the queue waits less than 10 s
NO_STEP = "step_thresh_ms=10000"  # no L packet waits that long here


def probs(r) -> list[float]:
    """p' at each xstats sample."""
    return [float(x["prob"]) for _, x in r.xstats]


def p_around(r):
    """A function of t: p' in the samples either side of t. With samples 1 ms apart and tupdate
    16 ms, a decision at t was made with one of the two."""
    times, p = [t for t, _ in r.xstats], probs(r)

    def at(t: int) -> tuple[float, float]:
        i = bisect.bisect_left(times, t)
        return p[max(0, i - 1)], p[min(i, len(p) - 1)]
    return at


def head_delay(r, t: int) -> int:
    """The larger of the two head packets' sojourn at t, from the packets' own times: the oldest
    packet that had arrived before t and left (sent or dropped) at t or later."""
    queued = [p["t_arr_ns"] for p in r.packets if p["t_arr_ns"] < t <= p["t_ns"]]
    return t - min(queued) if queued else 0


@pytest.mark.parametrize("mask,in_l", [(1, {ECT1, CE}), (3, {ECT1, ECT0, CE}), (2, {ECT0, CE})])
def test_the_ecn_field_and_the_mask_choose_the_queue(mask, in_l):
    """Rule (RFC 9332 2.3, Linux's ecn_mask): a packet whose ECN field shares a bit with the
    mask joins L, every other C: by default (l4s_ect, 1) ECT(1) and CE, with any_ect (3) every
    ECN-capable packet; Not-ECT never. 1, 2, 4 and 8 packets of the four codepoints, each alone
    on an idle link, show in the counters which went where."""
    count = {0: 1, ECT1: 2, ECT0: 4, CE: 8}
    trace = [(i * MS + ecn * 100 * MS, 10 + ecn, 1500, 0, 1, ecn) for ecn, n in count.items() for i in range(n)]
    r = run(sorted(trace), f"dualpi2 ecn_mask={mask}", rate_bps=C)
    x = r.xstats[-1][1]
    assert int(x["pkts_in_l"]) == sum(n for ecn, n in count.items() if ecn in in_l)
    assert int(x["pkts_in_c"]) == sum(n for ecn, n in count.items() if ecn not in in_l)
    assert len(r.sent()) == 15 and not r.marked()


def test_c_gets_p_squared_and_l_gets_k_times_p():
    """Rule (RFC 9332 2.1, the coupling): with p' held still, a C packet is dropped with p_C =
    p'^2 and an L packet marked with p_CL = k p' (k = 2). A one-second update period holds p'
    from its first update (t = 1 s) to its second; over that second every packet leaves a
    standing queue, so each is a decision. The counts are binomial: each must lie within four
    standard deviations of n p (the replay's seed fixes them, and 4 sigma is what any seed
    passes with probability above 0.9999, so the test checks the law, not the seed); p' = 0.3
    puts p' (0.3), p'^2 (0.09) and 2 p' (0.6) dozens of deviations apart."""
    trace = merge(with_ecn(cbr(1, 60e6, 0, 3 * SEC), ECT1), cbr(2, 60e6, 0, 3 * SEC))
    spec = f"dualpi2 limit=100000 tupdate_ms=1000 alpha=0 beta=1.8 c_protection=50 {NO_STEP}"
    r = run(trace, spec, rate_bps=C, extra=["--xstats-every-ms", "100"])
    held = {float(x["prob"]) for t, x in r.xstats if SEC < t < 2 * SEC}
    [p] = held
    assert 0.25 < p < 0.35, "premise: p' near 0.3"
    window = [q for q in r.packets if SEC <= q["t_ns"] < 2 * SEC]
    assert min(int(x["qlen_pkts"]) for t, x in r.xstats if SEC <= t <= 2 * SEC) > 100, "a standing queue"

    def within_4_sigma(hits, n, prob):
        return abs(hits - n * prob) <= 4 * math.sqrt(n * prob * (1 - prob)), (hits, n, prob)

    c = [q for q in window if q["flow"] == 2]
    assert within_4_sigma(sum(q["verdict"] == "dropped" for q in c), len(c), p * p)
    assert all(q["reason"] == "early" and q["sojourn_ns"] > 0 for q in c if q["verdict"] == "dropped")
    l_pkts = [q for q in window if q["flow"] == 1]
    assert all(q["verdict"] == "sent" for q in l_pkts), "L is marked, never dropped, below overload"
    assert within_4_sigma(sum(q["mark"] == "early" for q in l_pkts), len(l_pkts), 2 * p)
    assert all(q["ecn"] == CE for q in l_pkts if q["mark"])


def test_the_pi_update_follows_the_larger_head_delay():
    """Rule (RFC 9332 A.1, Linux): at the end of each tupdate, p' += alpha (qdelay - target) +
    beta (qdelay - qdelay_old), qdelay the larger head sojourn of the two queues then, p' kept
    within [0, 1]. The head delays come from the packets' own times; the gains are held to
    2^-48 per ns, so p' agrees to 1e-5."""
    trace = merge(with_ecn(cbr(1, 70e6, 0, 3 * SEC), ECT1), cbr(2, 50e6, 0, 3 * SEC, length=1000))
    spec = f"dualpi2 limit=100000 tupdate_ms=1000 target_ms=10 alpha=0.5 beta=1 c_protection=30 {NO_STEP}"
    r = run(trace, spec, rate_bps=C, extra=["--xstats-every-ms", "500"])
    p, old = 0.0, 0
    for t in (SEC, 2 * SEC):
        qdelay = head_delay(r, t)
        p = min(1.0, max(0.0, p + 0.5 * (qdelay - 10 * MS) / SEC + (qdelay - old) / SEC))
        old = qdelay
        [x] = [x for s, x in r.xstats if s == t + 500 * MS]
        assert abs(float(x["prob"]) - p) < 1e-5 and int(x["qdelay_us"]) == qdelay // 1000, (t, x, p)
    assert float(r.xstats[1][1]["prob"]) > 0.5 > float(r.xstats[3][1]["prob"]), "premise: p' up, then down"


def test_the_step_marks_an_l_packet_that_waited_longer_than_the_threshold():
    """Rule (RFC 9332 2.4 L's native AQM, Linux's step): an L packet whose sojourn exceeds
    step_thresh (1 ms) leaves CE-marked ('delay', counted in step_marks); one that waited no
    longer is not marked. The PI part is off (alpha = beta = 0), so every mark is the step's."""
    trace = with_ecn(merge(cbr(1, 110e6, 0, 100 * MS), cbr(1, 50e6, 100 * MS, 300 * MS)), ECT1)
    r = run(trace, "dualpi2 alpha=0 beta=0", rate_bps=C)
    late = [q for q in r.sent() if q["sojourn_ns"] > MS]
    prompt = [q for q in r.sent() if q["sojourn_ns"] <= MS]
    assert len(late) > 500 and len(prompt) > 500 and not r.dropped()
    assert all(q["mark"] == "delay" and q["ecn"] == CE for q in late)
    assert not any(q["mark"] for q in prompt)
    assert int(r.xstats[-1][1]["step_marks"]) == len(late) == int(r.xstats[-1][1]["ecn_mark"])


def queued_at(r, seq: int, t: int, before: bool) -> int:
    """Packets of the trace's one flow queued at t: arrived before t (before=True: ahead of seq)
    or after seq and before t, and not yet gone."""
    if before:
        return sum(1 for q in r.packets if q["seq"] < seq and q["t_ns"] > t)
    return sum(1 for q in r.packets if q["seq"] > seq and q["t_arr_ns"] < t)


def test_min_qlen_step_spares_a_packet_that_found_l_short():
    """Rule (Linux's min_qlen_step): the step applies to an L packet only if L held at least
    min_qlen_step packets when it arrived; a late packet that found fewer is not marked."""
    trace = with_ecn(merge(cbr(1, 110e6, 0, 100 * MS), cbr(1, 50e6, 100 * MS, 300 * MS)), ECT1)
    r = run(trace, "dualpi2 alpha=0 beta=0 min_qlen_step=40", rate_bps=C)
    late = [q for q in r.sent() if q["sojourn_ns"] > MS]
    ahead = {q["seq"]: queued_at(r, q["seq"], q["t_arr_ns"], before=True) for q in late}
    marked = [q for q in late if q["mark"]]
    assert marked and len(marked) < len(late)
    assert all((ahead[q["seq"]] >= 40) == (q["mark"] == "delay") for q in late)


def test_the_step_in_packets_marks_while_the_l_backlog_exceeds_it():
    """Rule (Linux's step_thresh in packets): with step_thresh_pkts the step compares the L
    backlog a packet leaves behind, not its sojourn: marked exactly when more than 20 L packets
    stay queued after it."""
    trace = with_ecn(merge(cbr(1, 110e6, 0, 100 * MS), cbr(1, 50e6, 100 * MS, 300 * MS)), ECT1)
    r = run(trace, "dualpi2 alpha=0 beta=0 step_thresh_pkts=20", rate_bps=C)
    behind = {q["seq"]: queued_at(r, q["seq"], q["t_ns"], before=False) for q in r.sent()}
    assert any(n > 20 for n in behind.values()) and any(n <= 20 for n in behind.values())
    assert all((behind[q["seq"]] > 20) == (q["mark"] == "delay") for q in r.sent())


@pytest.mark.parametrize("idle_ms", [500, 10_000])
def test_lazy_updates_equal_what_a_timer_would_do_over_idle_periods(idle_ms):
    """Rule (the core's lazy update, lazy_update.h): the updates of an idle stretch run at the
    next packet, each on the queue as it stood at its period's end, so p' (9 decimals), the last
    qdelay and the update count equal those of the same run with a probe packet every
    millisecond, which runs each update on time as a timer would. After 0.5 s p' has fallen but
    is not yet 0; after 10 s it is 0."""
    load = cbr(1, 150e6, 0, SEC)
    alone = run(load, "dualpi2", rate_bps=C)
    drained = max(q["t_ns"] for q in alone.sent()) + MS
    end = SEC + idle_ms * MS
    last = [(end, 1, 1500, 0)]
    probes = [(t, 2, 64, 0) for t in range(drained, end, MS)]
    lazy = run(load + last, "dualpi2", rate_bps=C).xstats[-1][1]
    timed = run(merge(load, probes, last), "dualpi2", rate_bps=C).xstats[-1][1]
    p0 = float(alone.xstats[-1][1]["prob"])
    assert p0 > 0.3, "premise: the overload drove p' up"
    assert [lazy[k] for k in ("prob", "qdelay_us", "updates")] == \
        [timed[k] for k in ("prob", "qdelay_us", "updates")]
    assert int(lazy["updates"]) == end // (16 * MS)
    assert (0 < float(lazy["prob"]) < p0) if idle_ms == 500 else float(lazy["prob"]) == 0


@pytest.mark.parametrize("idle_s", [140, 200])
def test_a_long_idle_with_a_small_alpha_decays_as_a_timer_would(idle_s):
    """Rule (lazy_update.h, an empty queue's updates in closed form): alpha = 0.0064 Hz (tc's
    max_rtt 500 ms derivation) lowers p' by alpha x target = 0.000096 per idle update, so from 1
    it takes about 10,400 updates (167 s) to reach 0; however long the idle, p' at the next
    packet equals that of the run whose probes make every update happen on time: partly decayed
    after 140 s, 0 after 200 s. (beta = 0, so the last delay's beta term does not take p' down
    at the first idle update and leave nothing to decay.)"""
    spec, rate = "dualpi2 alpha=0.0064 beta=0", 10_000_000
    load = cbr(1, 100e6, 0, SEC)
    alone = run(load, spec, rate_bps=rate)
    drained = max(q["t_ns"] for q in alone.sent()) + MS
    end = drained + idle_s * SEC
    last = [(end, 1, 1500, 0)]
    probes = [(t, 2, 64, 0) for t in range(drained, end, 8 * MS)]
    lazy = run(load + last, spec, rate_bps=rate).xstats[-1][1]
    timed = run(merge(load, probes, last), spec, rate_bps=rate).xstats[-1][1]
    assert float(alone.xstats[-1][1]["prob"]) == 1, "premise: the overload drove p' to 1"
    assert [lazy[k] for k in ("prob", "qdelay_us", "updates")] == \
        [timed[k] for k in ("prob", "qdelay_us", "updates")]
    assert (0.1 < float(lazy["prob"]) < 0.2) if idle_s == 140 else float(lazy["prob"]) == 0


def test_a_stalled_link_runs_at_most_64_updates_at_once():
    """Rule (lazy_update.h's bound on one call's work): while packets wait on a link that sends
    nothing, each update sees a longer head delay, so the updates run one by one, and one
    enqueue or dequeue runs at most 64 of them; the periods beyond are counted but skipped. A
    65535-byte packet holds a 100 kbit/s link for 5.2 s (327 periods) with 1500-byte packets
    queued behind it: the dequeue that ends the stall leaves p' as 64 updates on that growing
    delay make it (computed here: the gains, kept to 2^-48 per ns, make 64 updates on a delay
    near a second err by up to 2e-4), below what the run with a probe every millisecond (every
    update on time) reaches."""
    spec, rate = f"dualpi2 alpha=0.01 beta=0.1 {NO_STEP}", 100_000
    stall = (65535 * 8 * SEC + rate - 1) // rate
    # the last arrival keeps the trace running past the sample (xstats come while it runs)
    trace = [(0, 1, 65535, 0)] + [(1000 * i, 1, 1500, 0) for i in range(1, 4)] + [(stall + 10 * MS, 3, 64, 0)]
    probes = [(t, 2, 64, 0) for t in range(MS, stall, MS)]
    sample = ["--xstats-every-ms", str(stall // MS + 1)]
    lazy = [x for t, x in run(trace, spec, rate_bps=rate, extra=sample).xstats if t > stall][0]
    timed = [x for t, x in run(merge(trace, probes), spec, rate_bps=rate, extra=sample).xstats if t > stall][0]
    p, old = 0.0, 0
    for k in range(1, 65):
        qdelay = k * 16 * MS - 1000  # the head packet came 1 us after the clock started
        p = min(1.0, max(0.0, p + 0.01 * (qdelay - 15 * MS) / SEC + 0.1 * (qdelay - old) / SEC))
        old = qdelay
    assert abs(float(lazy["prob"]) - p) < 3e-4, (lazy["prob"], p)
    assert int(lazy["updates"]) == int(timed["updates"]) == stall // (16 * MS)
    assert float(timed["prob"]) > p + 0.1


def test_overload_switches_l_from_marks_to_drops():
    """Rule (RFC 9332 4.2.3, Linux's drop_overload): once k p' > 1 an L packet is dropped with
    p_C = p'^2 and every other one marked, so unresponsive L traffic cannot hold the queue;
    every drop came with p' > 1/k. With drop_overload=0 p' is held at 1/k: L is never dropped
    early and overflows at the limit instead."""
    trace = with_ecn(cbr(1, 150e6, 0, 3 * SEC), ECT1)
    r = run(trace, f"dualpi2 limit=100000 {NO_STEP}", rate_bps=C, extra=["--xstats-every-ms", "1"])
    drops, around = r.dropped("early"), p_around(r)
    assert len(drops) > 1000 and not r.dropped("overflow")
    assert all(max(around(q["t_ns"])) > 0.5 for q in drops)
    # while the arrivals last (after them the queue drains below the 2-MTU guard)
    over = [q for q in r.sent() if min(around(q["t_ns"])) > 0.5 and q["t_ns"] < 3 * SEC]
    assert len(over) > 1000 and all(q["mark"] == "early" for q in over)
    held = run(trace, f"dualpi2 limit=2000 drop_overload=0 {NO_STEP}", rate_bps=C,
               extra=["--xstats-every-ms", "1"])
    assert not held.dropped("early") and held.dropped("overflow")
    assert max(probs(held)) == 0.5


@pytest.mark.parametrize("wc", [0, 10, 50, 100])
def test_the_credit_gives_c_its_share_when_both_queues_are_backlogged(wc):
    """Rule (Linux's C-queue protection, WRR on a byte credit): with both queues backlogged C
    gets c_protection % of the bytes sent, at every instant within two packets' credit (the
    credit moves by at most a packet times a weight each send, and starts at mtu x (wc - wl));
    0 gives L strict priority, 100 gives it to C. The PI part is off; L's step marks do not
    drop."""
    trace = merge(with_ecn(cbr(1, 100e6, 0, SEC), ECT1), cbr(2, 100e6, 0, SEC))
    r = run(trace, f"dualpi2 limit=100000 {AQM_OFF} c_protection={wc}", rate_bps=C)
    assert not r.dropped()
    c_bytes = total = worst = 0
    for q in sorted(r.sent(), key=lambda q: q["t_ns"]):
        if q["t_ns"] < 50 * MS or q["t_ns"] > SEC:  # both backlogged from 50 ms to the end
            continue
        total += q["len"]
        c_bytes += q["len"] if q["flow"] == 2 else 0
        worst = max(worst, abs(100 * c_bytes - wc * total))
    assert worst <= 2 * 100 * 1514, (worst, c_bytes, total)


def test_limit_and_memory_limit_hold_both_queues_together():
    """Rule (Linux): `limit` packets and `memory_limit` bytes over L and C together; an arrival
    that would pass either is dropped (overflow), whichever queue it is for. maxq is the most
    packets held."""
    trace = merge(with_ecn(cbr(1, 100e6, 0, 200 * MS), ECT1), cbr(2, 90e6, 0, 200 * MS, length=1000))
    r = run(trace, f"dualpi2 limit=50 {AQM_OFF} {NO_STEP}", rate_bps=C, extra=["--xstats-every-ms", "5"])
    over = r.dropped("overflow")
    assert {q["flow"] for q in over} == {1, 2} and len(r.dropped()) == len(over)
    assert max(int(x["qlen_pkts"]) for _, x in r.xstats) == 50 == int(r.xstats[-1][1]["maxq"])
    m = run(trace, f"dualpi2 limit=50 memory_limit=30000 {AQM_OFF} {NO_STEP}", rate_bps=C,
            extra=["--xstats-every-ms", "5"])
    assert max(int(x["qlen_pkts"]) for _, x in m.xstats) < 50 and m.dropped("overflow")
    assert all(int(x["memory_used"]) == int(x["qlen_bytes"]) <= 30000 for _, x in m.xstats)
    assert 30000 - 1500 < int(m.xstats[-1][1]["max_memory_used"]) <= 30000
    assert m.xstats[-1][1]["memory_limit"] == "30000"
    assert run(trace, "dualpi2 limit=50", rate_bps=C).xstats[-1][1]["memory_limit"] == str(50 * 2 * 1514)


def test_the_memory_limit_must_let_pi2_signal_and_its_default_fits_32_bits():
    """Rule (Linux's memory limit, our refusal): PI2 signals only while 2 x mtu bytes stay queued
    beside the packet, so a memory_limit of 2 x mtu or less would never let it: refused naming
    memory_limit, and one byte more is taken. The default, limit x 2 x mtu, is capped at
    2^32 - 1 as Linux caps it (the parameter's own maximum)."""
    assert run_raw(["--describe", "--qdisc", "dualpi2 memory_limit=3029"]).returncode == 0
    assert run_raw(["--describe", "--qdisc", "dualpi2 mtu=700 memory_limit=1401"]).returncode == 0
    refused = run_raw(["--describe", "--qdisc", "dualpi2 memory_limit=3028"])
    assert refused.returncode == 2 and "'memory_limit'" in refused.stderr
    one = [(0, 1, 1500, 0)]
    assert run(one, "dualpi2 limit=1000000 mtu=65535", rate_bps=C).xstats[-1][1]["memory_limit"] == str(2**32 - 1)
    assert run(one, "dualpi2 limit=1000000", rate_bps=C).xstats[-1][1]["memory_limit"] == str(2 * 1514 * 10**6)


def test_no_signal_while_less_than_two_mtu_stay_queued():
    """Rule (Linux's guard): no PI2 drop or mark while less than 2 x mtu bytes stay queued
    beside the packet. Three packets at a time: the first leaves at once, the second with one
    1500-byte packet behind it; the waiting drives p' to 1 with a zero target. With the
    1514-byte mtu nothing is signalled; with mtu=700 (2 x 700 < 1500) the same queue is
    dropped from."""
    triples = merge(*(cbr(f, 29e6, 0, SEC) for f in (1, 2, 3)))
    spec = f"dualpi2 target_ms=0 alpha=5000 beta=5000 {NO_STEP}"
    r = run(triples, spec, rate_bps=C, extra=["--xstats-every-ms", "100"])
    assert max(probs(r)) == 1 and max(int(x["qlen_pkts"]) for _, x in r.xstats) <= 2
    assert not r.dropped() and not r.marked()
    assert run(triples, spec + " mtu=700", rate_bps=C).dropped("early")


def test_drop_early_decides_on_the_arriving_packet():
    """Rule (Linux's drop_early): by default the PI2 decisions are taken on the packet leaving
    (its drop comes after a sojourn); with drop_early=1 on the one arriving, dropped before it
    is queued."""
    trace = cbr(1, 150e6, 0, SEC)
    late, early = (run(trace, f"dualpi2 drop_early={e}", rate_bps=C).dropped("early") for e in (0, 1))
    assert late and all(q["sojourn_ns"] > 0 for q in late)
    assert early and all(q["t_ns"] == q["t_arr_ns"] for q in early)


@pytest.mark.parametrize("mask,ecn", [(1, ECT0), (2, ECT1)])
def test_drop_early_classifies_before_it_marks(mask, ecn):
    """Rule (Linux classifies once, before the decision): with drop_early=1 the PI2 decision on
    an arriving classic packet may mark it CE, and CE matches every ecn_mask; the packet still
    joins C, the queue its codepoint chose, so none of the flow's packets joins L (pkts_in_l 0)
    and they leave in the order they came (a marked one overtaking its flow's earlier packets
    through L would be a reordering, seen by TCP as a loss)."""
    trace = with_ecn(cbr(1, 130e6, 0, SEC), ecn)
    r = run(trace, f"dualpi2 drop_early=1 ecn_mask={mask} {NO_STEP}", rate_bps=C)
    assert len(r.marked("early")) > 100, "premise: the standing queue got marks"
    assert int(r.xstats[-1][1]["pkts_in_l"]) == 0
    order = [q["seq"] for q in sorted(r.sent(), key=lambda q: q["t_ns"])]
    assert order == sorted(order)


@pytest.mark.parametrize("spec,names,typed", [
    ("dualpi2 step_thresh_pkts=5 step_thresh_ms=2", ["'step_thresh_pkts'", "'step_thresh_ms'"],
     ("conflict", "step_thresh_pkts", "step_thresh_ms")),
    ("dualpi2 limit=80 min_qlen_step=80", ["'min_qlen_step'", "'limit'"], ("conflict", "min_qlen_step", "limit")),
    ("dualpi2 limit=80 step_thresh_pkts=80", ["'step_thresh_pkts'", "'limit'"],
     ("conflict", "step_thresh_pkts", "limit")),
    ("dualpi2 memory_limit=1000", ["'memory_limit'", "'mtu'"], ("conflict", "memory_limit", "mtu")),
    ("dualpi2 memory_limit=3028", ["'memory_limit'", "'mtu'"], ("conflict", "memory_limit", "mtu")),
    ("dualpi2 mtu=700 memory_limit=1400", ["'memory_limit'", "'mtu'"], ("conflict", "memory_limit", "mtu")),
    ("dualpi2 coupling=0", ["coupling", "out of range"], ("range", "coupling", None)),
    ("dualpi2 coupling=1.5", ["coupling", "decimal"], ("not-a-number", "coupling", None)),
    ("dualpi2 c_protection=101", ["c_protection", "out of range"], ("range", "c_protection", None)),
    ("dualpi2 ecn_mask=0", ["ecn_mask", "out of range"], ("range", "ecn_mask", None)),
    ("dualpi2 alpha=50000.0001", ["alpha", "out of range"], ("range", "alpha", None)),
    ("dualpi2 tupdate_ms=0.5", ["tupdate_ms", "out of range"], ("range", "tupdate_ms", None)),
    ("dualpi2 split_gso=1", ["unknown parameter", "split_gso"], ("unknown-parameter", "split_gso", None)),
])
def test_bad_parameters_are_refused_naming_them(spec, names, typed):
    """Rule: a parameter out of its range, or in conflict with another (the step given both in
    time and in packets, a step or min_qlen_step L can never reach under `limit`, a memory
    limit of at most 2 x mtu, under which the 2-MTU guard never lets PI2 signal), is refused
    with a message naming it (and the other), and the typed refusal says which."""
    cp = run_raw(["--describe", "--qdisc", spec])
    assert cp.returncode == 2, cp.stdout
    assert all(n in cp.stderr for n in names), cp.stderr
    refusal = json.loads(cp.stdout)
    assert (refusal["code"], refusal["param"], refusal["other"]) == typed, refusal


def test_the_description_parses_back_with_the_step_in_packets():
    """Rule: a spec describes itself as one that parses back to the same description; with the
    step in packets the time threshold, which may not be given beside it, is left out."""
    for spec in ("dualpi2", "dualpi2 step_thresh_pkts=5 ecn_mask=3 drop_early=1 drop_overload=0 ecn=0"):
        desc = run_raw(["--describe", "--qdisc", spec]).stdout.strip()
        assert run_raw(["--describe", "--qdisc", desc]).stdout.strip() == desc
        assert ("step_thresh_ms" in desc) == ("step_thresh_pkts=0" in desc), desc


@pytest.mark.parametrize("old,new", [("droptail limit=100", "dualpi2 target_ms=0 alpha=50000 beta=50000"),
                                     ("dualpi2 limit=100", "droptail limit=100"),
                                     ("dualpi2 limit=100", "dualpi2 limit=100 c_protection=90 ecn_mask=3")])
@pytest.mark.parametrize("gap_ns", [1000, 0])
def test_reconfiguration_carries_the_packets_over_in_arrival_order(old, new, gap_ns):
    """Rule (aqm_reconfigure): queued packets, L and C alike, are carried over to and from
    dualpi2 with no decision on them, and leave in the order they arrived: the older of the two
    heads by arrival time, which cannot wrap, and for packets of one instant (gap 0) by
    arrival number."""
    trace = [(i * gap_ns, 1 + i % 2, 1500, 0, 1, ECT1 if i % 2 else 0) for i in range(50)]
    r = run(trace, old, rate_bps=10_000_000, extra=["--reconfigure", f"{20 * MS}:{new}"])
    assert r.reconfigures[0]["qlen_pkts"] >= 30
    assert len(r.sent()) == 50 and not r.dropped()
    carried = [q["seq"] for q in sorted(r.sent(), key=lambda q: q["t_ns"]) if q["t_ns"] >= 20 * MS]
    assert carried == sorted(carried)


def test_xstats_and_the_typed_state_give_the_probability():
    """Rule: xstats mirror Linux's tc -s counters (prob, delay_c/l, pkts_in_c/l, maxq, ecn_mark,
    step_marks, credit, memory), and the typed state (aqm_get_xstats) carries p' as `prob`."""
    trace = merge(with_ecn(cbr(1, 80e6, 0, SEC), ECT1), cbr(2, 80e6, 0, SEC))
    stdin = "".join(f"{p[0]} {p[1]} {p[2]} 0 {p[1]} {p[5] if len(p) > 5 else 0}\n" for p in trace)
    out = run_raw(["--qdisc", "dualpi2", "--xstats-every-ms", "100"], stdin)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    samples = [o for o in lines if o["type"] == "xstats"]
    busy = samples[5]
    text = dict(tok.split("=") for tok in busy["xstats"].split())
    assert set(text) >= {"prob", "delay_c_us", "delay_l_us", "pkts_in_c", "pkts_in_l", "maxq", "ecn_mark",
                         "step_marks", "credit", "memory_used", "max_memory_used", "memory_limit"}
    assert float(text["prob"]) > 0 and busy["state"] == {"prob": float(text["prob"])}
    assert int(text["delay_c_us"]) > int(text["delay_l_us"]), "L is served first"
    stats = lines[-1]
    marks = sum(stats["total"]["marks"].values())
    assert int(samples[-1]["xstats"].split("ecn_mark=")[1].split()[0]) == marks
