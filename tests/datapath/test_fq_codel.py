"""FQ-CoDel (RFC 8290; Linux sch_fq_codel's defaults, docs/baselines.md): flows hashed into
buckets, each a FIFO under its own CoDel, served by deficit round robin with new buckets
first; on overflow the fattest bucket loses half its backlog from its head.

The traces are open-loop. A bucket collision would merge two test flows, so the tests that
need them apart check first that they are (the `backlogged` bucket count in xstats)."""

from __future__ import annotations

import bisect
import json
import math
from collections import Counter

import pytest

from replaylib import CE, ECT0, MS, SEC, cbr, merge, poisson, run, run_raw, with_ecn

C = 100_000_000
PKT_NS = 1500 * 8 * SEC // C  # a 1500-byte packet on the wire: 120 us
NO_CODEL = "target_ms=10000 interval_ms=100000"  # CoDel never acts: the scheduler alone


def backlogged_buckets(r) -> int:
    """The most buckets that held packets at once, over the run's xstats samples."""
    return max(int(x["backlogged"]) for _, x in r.xstats)


def test_a_sparse_flows_packets_leave_before_the_bulk_backlog():
    """Rule (RFC 8290 4.1, 4.2: new-flow priority): a packet of a flow whose bucket is on
    neither list joins the new list, which is served first, so it waits at most for the
    packet on the wire, not behind the bulk flow's standing backlog. The same trace through
    one FIFO (codel) makes it wait behind that backlog."""
    bulk = cbr(1, 130e6, 0, SEC)
    sparse = cbr(2, 1.6e6, 5 * MS, SEC, length=200)  # one 200-byte packet a millisecond
    r = run(merge(bulk, sparse), "fq_codel", rate_bps=C)
    sparse_sent = r.sent(2)
    assert len(sparse_sent) == len(sparse), "none of the sparse flow's packets is lost"
    assert max(p["sojourn_ns"] for p in sparse_sent) <= PKT_NS
    late = [p["sojourn_ns"] for p in r.sent(1, 200 * MS, SEC)]
    assert min(late) > 20 * PKT_NS, "premise: the bulk flow holds a standing backlog"
    fifo = run(merge(bulk, sparse), "codel limit=100000", rate_bps=C)
    assert max(p["sojourn_ns"] for p in fifo.sent(2)) > 20 * PKT_NS


@pytest.mark.parametrize("quantum", [300, 1514, 6000])
def test_drr_shares_bytes_equally_among_backlogged_buckets_within_one_quantum(quantum):
    """Rule (RFC 8290 4.2, deficit round robin): while buckets stay backlogged, the bytes
    each has sent differ at every instant by less than one quantum plus one packet, whatever
    the flows' packet sizes and arrival rates (90, 60 and 40 Mbit/s of 1500, 700 and 300
    bytes, each above its third of the link)."""
    tr = merge(cbr(1, 90e6, 0, SEC), cbr(2, 60e6, 0, SEC, length=700), cbr(3, 40e6, 0, SEC, length=300))
    r = run(tr, f"fq_codel quantum={quantum} {NO_CODEL}", rate_bps=C, extra=["--xstats-every-ms", "100"])
    assert backlogged_buckets(r) == 3, "premise: three buckets"
    sent = {1: 0, 2: 0, 3: 0}
    worst = 0
    for p in sorted(r.sent(), key=lambda p: p["t_ns"]):
        if 50 * MS <= p["t_ns"] <= SEC:  # every flow backlogged from before 50 ms to the end
            sent[p["flow"]] += p["len"]
            worst = max(worst, max(sent.values()) - min(sent.values()))
    assert worst < quantum + 1500, (worst, sent)
    assert min(sent.values()) > 0.3 * sum(sent.values())


def test_codel_drops_only_in_the_bucket_with_a_standing_queue():
    """Rule (RFC 8290 4.1, one CoDel per bucket): a flow above its share builds a standing
    queue in its bucket and gets CoDel's drops; two flows below their share never wait
    behind it and lose nothing. One FIFO under CoDel (codel) drops from all three."""
    tr = merge(poisson(1, 130e6, 0, 2 * SEC, seed=1), poisson(2, 20e6, 0, 2 * SEC, seed=2),
               poisson(3, 20e6, 0, 2 * SEC, seed=3))
    r = run(tr, "fq_codel limit=100000", rate_bps=C)
    assert len(r.dropped("delay", flow=1)) > 50
    assert not r.dropped(flow=2) and not r.dropped(flow=3)
    fifo = run(tr, "codel limit=100000", rate_bps=C)
    assert fifo.dropped("delay", flow=2) and fifo.dropped("delay", flow=3)


def overflow_batches(r) -> list[tuple[int, list[dict]]]:
    """Overflow drops grouped by the instant they happened: one batch per arrival over the limit."""
    by_t: dict[int, list[dict]] = {}
    for p in r.dropped("overflow"):
        by_t.setdefault(p["t_ns"], []).append(p)
    return sorted(by_t.items())


def queued_at(arrivals: list[dict], times: list[int], t: int, window: int = 400) -> list[dict]:
    """Of a flow's packets in arrival order, those in the queue just after the arrivals at t
    (those that leave or are dropped at t included); times are their arrival times. A packet waits at most a full 50-packet
    queue, 6 ms, in which the flow brings fewer than `window` arrivals: older ones are gone."""
    last = bisect.bisect_right(times, t)
    return [p for p in arrivals[max(0, last - window):last] if p["t_ns"] >= t]


@pytest.mark.parametrize("drop_batch", [1, 10, 64])
def test_overflow_drops_half_the_fattest_buckets_backlog_from_its_head(drop_batch):
    """Rule (RFC 8290 4.1.1, Linux's batch): an arrival over `limit` makes the bucket with the
    largest backlog lose packets from its head until half its bytes are gone, at most
    `drop_batch` of them. Two light flows (10 Mbit/s each) share the 50-packet queue with a
    130 Mbit/s one: they never lose a packet, where one FIFO (droptail) drops theirs."""
    tr = merge(cbr(1, 130e6, 0, SEC), poisson(2, 10e6, 0, SEC, seed=2), poisson(3, 10e6, 0, SEC, seed=3))
    r = run(tr, f"fq_codel limit=50 drop_batch={drop_batch} {NO_CODEL}", rate_bps=C)
    batches = overflow_batches(r)
    assert len(batches) > 50
    bulk = sorted((p for p in r.packets if p["flow"] == 1), key=lambda p: p["seq"])
    times = [p["t_arr_ns"] for p in bulk]
    assert not r.dropped(flow=2) and not r.dropped(flow=3)
    for t, dropped in batches:
        fat = queued_at(bulk, times, t)
        assert {p["flow"] for p in dropped} == {1}
        assert len(dropped) == min(drop_batch, math.ceil(len(fat) / 2)), (t, len(dropped), len(fat))
        # the head: every flow-1 packet dropped at t is older than every one left queued
        left = [p["seq"] for p in fat if p["verdict"] == "sent"]
        assert max(p["seq"] for p in dropped) < min(left)
    fifo = run(tr, "droptail limit=50", rate_bps=C)
    assert fifo.dropped(flow=2) and fifo.dropped(flow=3)


def test_an_arrival_that_makes_its_bucket_the_fattest_is_the_one_dropped():
    """Rule: the arrival is queued before the fattest bucket is chosen; when it alone makes
    that bucket (a 1500-byte packet beside two 100-byte ones) the batch drops it, and the
    core reports it dropped on arrival (not queued, not sent)."""
    tr = [(0, 9, 1500, 0), (1000, 1, 100, 0), (2000, 2, 100, 0), (3000, 3, 1500, 0)]
    r = run(tr, "fq_codel limit=2", rate_bps=1_000_000, extra=["--xstats-every-ms", "1"])
    [dropped] = r.dropped()
    assert (dropped["flow"], dropped["reason"], dropped["t_ns"]) == (3, "overflow", 3000)
    assert sorted(p["flow"] for p in r.sent()) == [1, 2, 9]
    total = r.stats["total"]
    assert total["enq_pkts"] == 3 and total["drops"]["overflow"] == 1


def test_memory_limit_bounds_the_bytes_queued():
    """Rule (Linux's memory_limit, here in packet bytes): over memory_limit the fattest bucket
    loses packets as over `limit`; 30000 bytes hold 20 packets of 1500 though `limit` is 10240,
    and those drops count as drop_overmemory too."""
    r = run(cbr(1, 130e6, 0, SEC), f"fq_codel memory_limit=30000 {NO_CODEL}", rate_bps=C,
            extra=["--xstats-every-ms", "10"])
    assert max(int(x["qlen_bytes"]) for _, x in r.xstats) <= 30000
    final = r.xstats[-1][1]
    assert int(final["drop_overmemory"]) == int(final["drop_overlimit"]) == len(r.dropped("overflow")) > 0


def test_ce_threshold_marks_every_ect_packet_whose_sojourn_exceeds_it():
    """Rule (Linux's ce_threshold): with ecn=0, an ECN-capable packet that waited more than
    ce_threshold_ms leaves CE (counted under 'delay' and as ce_mark), one that waited less
    leaves unmarked, and a Not-ECT packet is never marked; CoDel still drops."""
    ect = with_ecn(cbr(1, 80e6, 0, SEC), ECT0)
    not_ect = with_ecn(cbr(2, 80e6, 0, SEC), 0)
    r = run(merge(ect, not_ect), "fq_codel ce_threshold_ms=2", rate_bps=C, extra=["--xstats-every-ms", "100"])
    assert backlogged_buckets(r) == 2, "premise: two buckets"
    sent = r.sent(1)
    above = [p for p in sent if p["sojourn_ns"] > 2 * MS]
    assert above and len(above) < len(sent)
    assert all((p["mark"] == "delay") == (p["sojourn_ns"] > 2 * MS) for p in sent)
    assert all(p["ecn"] == CE for p in above)
    assert not r.marked(flow=2)
    assert int(r.xstats[-1][1]["ce_mark"]) == len(above)
    assert r.dropped("delay"), "ce_threshold does not turn CoDel's drops into marks"


def test_ecn_marks_instead_of_codels_drops_on_ect_packets_only():
    """Rule (RFC 8290 5.1.2, sch_fq_codel with ecn): CoDel's decisions on an ECN-capable flow's
    bucket are marks (delay), on a Not-ECT flow's bucket drops."""
    tr = merge(with_ecn(cbr(1, 80e6, 0, SEC), ECT0), with_ecn(cbr(2, 80e6, 0, SEC), 0))
    r = run(tr, "fq_codel ecn=1 limit=100000", rate_bps=C, extra=["--xstats-every-ms", "100"])
    assert backlogged_buckets(r) == 2, "premise: two buckets"
    assert len(r.marked("delay", flow=1)) > 20 and not r.dropped(flow=1)
    assert r.dropped("delay", flow=2) and not r.marked(flow=2)
    assert int(r.xstats[-1][1]["ecn_mark"]) == len(r.marked("delay"))


def test_a_bucket_that_empties_while_new_passes_through_the_old_list():
    """Rule (RFC 8290 4.2): a new bucket that has nothing left to send goes to the tail of the
    old list (when that list is not empty) instead of leaving, so a flow whose next packet
    arrives before the round reaches it again is not new again: new_flow_count grows by fewer
    than its packets (one every 100 us here, while the bulk bucket holds the round for one or
    two 120 us packets). A flow that comes back after the round has passed (every 1 ms) is
    new for every packet, and the bulk flow's bucket once."""
    bulk = cbr(1, 130e6, 0, SEC)
    counts = {}
    for gap in (100_000, 1_000_000):
        sparse = [(5 * MS + i * gap, 2, 200, 0) for i in range((SEC - 5 * MS) // gap)]
        r = run(merge(bulk, sparse), "fq_codel", rate_bps=C, extra=["--xstats-every-ms", "2000"])
        assert len(r.sent(2)) == len(sparse)
        counts[gap] = (int(r.xstats[-1][1]["new_flow_count"]), len(sparse))
    new, packets = counts[100_000]
    assert new < 0.9 * packets, counts
    new, packets = counts[1_000_000]
    assert new == packets + 1, counts


def test_the_bucket_salt_is_drawn_with_the_first_packet_not_at_creation(tmp_path):
    """Rule (replayable records): creating the queue draws no random number; its first packet
    draws the salt, after sch_ckcd's record has started, so `--events` on that record repeats
    the draw at the same point and buckets flows alike."""
    events = []
    for name, record in (("empty", "r 12345\n"), ("one", "e 1000 7 1500 0 7\nr 12345\nd 2000 0\n")):
        path = tmp_path / name
        path.write_text(record)
        out = run_raw(["--qdisc", "fq_codel", "--events", str(path)]).stdout.splitlines()
        events.append(next(json.loads(line) for line in out if '"type":"events"' in line))
    assert events[0]["random_used"] == 0
    assert events[1]["random_used"] == 1 and events[1]["random_past_record"] == 0
