"""The runner's trust verdict on a late ckcd-link: blamed on the hypervisor (and a rerun
advised) only when the VM's steal time was high. Records are minimal but in run.json's
shape: one link, one flow, CPU rows [t, busy %, steal %, vswitchd, runner, links]."""

from __future__ import annotations

from experiments.analysis.metrics import run_metrics
from experiments.analysis.fidelity import RTT_EXCESS_MAX_MS, STEAL_HIGH_PCT
from experiments.scenario.catalog import parse_scenario

DOC = {"name": "t", "topology": "dumbbell", "duration_s": 10, "warmup_s": 2,
       "disciplines": ["droptail"], "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}],
       "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}, "ping": {"src": "h1", "dst": "h3"}}
SCENARIO = parse_scenario(DOC, "test")


def record(steal_pct: float, late_fraction: float, ping_ms: float | None = None,
           queue_ms: float = 2.0, kernel_drops: int | None = None, lost: dict | None = None,
           late_mean_us: float = 60.0) -> dict:
    releases = 10_000
    final = {"dirs": {d: {"schedule": {"releases": releases, "late_over_1ms": int(late_fraction * releases),
                                       "late_mean_us": late_mean_us}} for d in ("ab", "ba")}}
    if kernel_drops is not None:  # ckcd-link's stats have counted them since its receive ring
        final["dirs"]["ab"]["rx_kernel_drops"], final["dirs"]["ba"]["rx_kernel_drops"] = kernel_drops, 0
    for counter, n in (lost or {}).items():
        final["dirs"]["ab"][counter], final["dirs"]["ba"][counter] = n, 0
    flow = {"label": "f1", "cc": "cubic", "goodput": [[5.0, 45.0]], "srtt": [[5.0, 25.0]], "error": None}
    # The link's 100 ms log over the window (2..10 s): queueing delay queue_ms throughout.
    series = [{"t": 2 + i / 10, "interval_s": 0.1, "tx_bytes": 600_000, "sojourn_ms": queue_ms,
               "sojourn_count": 400, "qlen_pkts": 8, "drops": {}} for i in range(80)]
    ping = [[2.0 + i / 5, ping_ms] for i in range(40)] if ping_ms is not None else []
    return {"scenario": SCENARIO.to_dict(), "flows": [flow], "ping": ping,
            "links": {"l0": {"series": series, "sojourn_samples": [], "final": final}},
            "cpu": [[t, 60.0, steal_pct, 20.0, 5.0, 30.0] for t in range(10)]}


def reasons(steal_pct: float, late_fraction: float, **kw) -> list[str]:
    return run_metrics(record(steal_pct, late_fraction, **kw))["fidelity"]["reasons"]


def test_late_link_under_steal_says_rerun():
    [why] = reasons(STEAL_HIGH_PCT + 11, 0.09)
    assert "fell behind its schedule (9.0 %" in why and "took 21 % of the CPU (steal): rerun" in why


def test_late_link_without_steal_is_ours():
    [why] = reasons(2.0, 0.09)
    assert "fell behind its schedule" in why and "steal" not in why


def test_a_mean_lateness_above_what_the_curve_found_harmless_untrusts_the_run():
    """Rule: ckcd-link's mean release lateness may be at most SCHEDULE_MAX_LATE_MEAN_US (130 us, the
    largest that moved neither Jain nor utilization by more than their CI), even with few late
    releases over 1 ms."""
    from experiments.analysis.fidelity import SCHEDULE_MAX_LATE_MEAN_US
    assert reasons(2.0, 0.01, late_mean_us=SCHEDULE_MAX_LATE_MEAN_US) == []
    [why] = reasons(2.0, 0.01, late_mean_us=SCHEDULE_MAX_LATE_MEAN_US + 70)
    assert "fell behind its schedule (1.0 % of releases > 1 ms late, mean 200 us)" in why


def test_kept_schedule_is_trusted_whatever_the_steal():
    assert reasons(30.0, 0.01) == []


# Frames the kernel dropped on ckcd-link's sockets (its receive ring full) are losses no emulated
# queue decided: the run is untrusted, by any count, and says how many.
def test_frames_lost_before_the_link_untrust_the_run():
    [why] = reasons(2.0, 0.01, kernel_drops=3)
    assert "l0: the kernel dropped 3 frames before ckcd-link read them" in why
    assert reasons(2.0, 0.01, kernel_drops=0) == []
    assert reasons(2.0, 0.01) == []  # records of a ckcd-link that did not count them
    # An empty pool and a full host line lose frames outside the queue too.
    no_buffer, host_line = reasons(2.0, 0.01, lost={"rx_no_buffer": 2, "host_delay_drops": 5})
    assert "l0: ckcd-link had no buffer for 2 arrivals" in no_buffer
    assert "l0: 5 frames of a host with an access delay found its line full" in host_line


def test_ping_hosts_access_delays_are_part_of_what_the_link_explains():
    # ping h1 -> h3 with 15 ms on h1's frames: 22 ms of base + queue, plus 15
    rec = record(2.0, 0.01, ping_ms=37.0)
    rec["scenario"] = parse_scenario(dict(DOC, access_delay_ms={"h1": 15}), "test").to_dict()
    assert run_metrics(rec)["fidelity"]["reasons"] == []
    rec["ping"] = [[t, 37.0 + RTT_EXCESS_MAX_MS + 0.5] for t, _ in rec["ping"]]
    [why] = run_metrics(rec)["fidelity"]["reasons"]
    assert "(2 x 10 ms + 15 ms of access delays + the links' largest mean queueing delay, 2.0 ms" in why


def test_rtt_the_link_explains_is_trusted():
    # base 20 ms + 2 ms queue; 0.4-1.1 ms more is what normal runs measured (vswitchd, hosts)
    assert reasons(2.0, 0.01, ping_ms=22.0 + RTT_EXCESS_MAX_MS - 0.1) == []


def test_rtt_above_what_the_link_explains_is_untrusted():
    # 2026-11-22 intra_cubic/ckcd: ping 31.1 ms over a 10 ms link with 1.6 ms of queue, 12 % steal
    [why] = reasons(12.0, 0.04, ping_ms=31.1, queue_ms=1.6)
    assert "ping RTT 31.1 ms is 9.5 ms above what the emulated link explains" in why
    assert why.endswith("the hypervisor took 12 % of the CPU (steal): rerun")


def test_rtt_excess_without_steal_is_ours():
    [why] = reasons(2.0, 0.01, ping_ms=31.1, queue_ms=1.6)
    assert "packets waited outside ckcd-link" in why and "steal" not in why


def with_ping_own(rec: dict, request_ms: float, reply_ms: float) -> dict:
    """The record with ckcd-link's per-flow log of ping's frames: its echo requests waited
    request_ms on the way (ab), its replies reply_ms on the way back (ba), 2 frames a row."""
    rows = [[2 + i / 10, d, 2, 2 * ms * 1000] for i in range(80) for d, ms in (("ab", request_ms), ("ba", reply_ms))]
    rec["links"]["l0"]["ping_sojourn"] = rows
    return rec


def test_ping_is_explained_by_the_queue_it_waited_in_not_the_links_mean():
    """Rule: ping's RTT is explained by what its own frames waited (ckcd-link's per-flow
    sojourn, both directions), not by the link's mean over all frames. Behind DualPI2 the mean
    counts the L queue's near-zero waits while Not-ECT ping waits in the classic queue: a link
    mean of 0.5 ms and ping's own 4 ms must leave nothing unexplained (the old rule found 3.5 ms
    too much and untrusted every DualPI2 run). Behind fq_codel the reverse: ping waits almost
    nothing in its own flow, so an RTT the link's 6 ms mean would explain is 6 ms too long."""
    dual = with_ping_own(record(2.0, 0.01, ping_ms=24.5, queue_ms=0.5), request_ms=4.0, reply_ms=0.0)
    m = run_metrics(dual)
    # 0.5 ms less the serialization of ping's 98-byte frames both ways at 50 Mbit/s (fidelity.link_extra_ms)
    assert m["fidelity"]["reasons"] == [] and abs(m["rtt_unexplained_ms"] - (0.5 - 2 * 98 * 8 / 50e6 * 1000)) < 1e-9
    assert abs(m["links"]["l0"]["ping_queue_delay_ms"] - 4.0) < 1e-9
    assert reasons(2.0, 0.01, ping_ms=24.5, queue_ms=0.5)  # without ping's own: the link's mean
    isolated = with_ping_own(record(2.0, 0.01, ping_ms=26.5, queue_ms=6.0), request_ms=0.2, reply_ms=0.1)
    [why] = run_metrics(isolated)["fidelity"]["reasons"]
    assert "ping RTT 26.5 ms is 6.2 ms above what the emulated link explains (2 x 10 ms + 0.3 ms that " \
           "ping's own frames waited in its queues" in why


def test_ping_own_wait_counts_both_directions_and_only_the_window():
    """Rule: the replies' wait on the way back counts too, and rows outside the measurement
    window (2-10 s) do not: a reply queue of 1 ms adds 1 ms to what is explained, and a row at
    1 s that waited 500 ms changes nothing."""
    rec = with_ping_own(record(2.0, 0.01, ping_ms=25.0, queue_ms=0.5), request_ms=3.0, reply_ms=1.0)
    rec["links"]["l0"]["ping_sojourn"].append([1.0, "ab", 2, 2 * 500_000.0])
    m = run_metrics(rec)
    assert abs(m["links"]["l0"]["ping_queue_delay_ms"] - 4.0) < 1e-9 and m["fidelity"]["reasons"] == []


def test_a_slow_reverse_direction_and_its_delay_are_explained():
    """Rule: the link explains ping's serialization at each direction's rate and the reverse
    direction's own delay ([link.reverse]): at 1 Mbit/s back a 98-byte reply takes 0.78 ms, and a
    30 ms reverse delay adds 20 ms to 2 x 10, so an RTT of 40.8 ms plus what ping waited is
    explained; the same RTT on a symmetric link is 20 ms too long."""
    rec = with_ping_own(record(2.0, 0.01, ping_ms=40.8 + 0.5, queue_ms=0.5), request_ms=0.5, reply_ms=0.0)
    rec["scenario"]["link"]["reverse"] = {"rate_bps": 1_000_000, "delay_ms": 30.0, "buffer_pkts": None,
                                          "trace": None, "loss": None}
    m = run_metrics(rec)
    assert m["fidelity"]["reasons"] == [] and abs(m["rtt_unexplained_ms"]) < 0.05, m["rtt_unexplained_ms"]
    assert reasons(2.0, 0.01, ping_ms=40.8 + 0.5, queue_ms=0.5)
