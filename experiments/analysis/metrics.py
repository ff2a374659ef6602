"""Metrics of a run record, and their means and 95 % confidence intervals over repeats.

Everything is computed from what a run saved (run.json), so `ckcd-coex report DIR` can
recompute it. Means are taken over the scenario's measurement window (Scenario.measure_window_s:
after the last flow joined plus the warm-up, until the first flow stops).

Definitions (docs/experiments.md has the reasons):
- throughput of a flow: its goodput (TCP payload) over the window, from the bytes its sender's
  kernel saw acknowledged (tcp_info, sampled by ss): what the network delivered. Records without
  those samples fall back to iperf3's receiver, which counts bytes when it reads them and can
  over-read a window that ends with the flow (docs/experiments.md). A flow's share of the wire
  is 1514/1448 of its goodput;
- utilization: sum of the flows' goodput over the capacity of the emulated links (seed 000's
  "summarized throughput of all the flows over the link capacity"); the TCP ceiling is
  1448/1514 = 95.6 % (GOODPUT_CEILING), and a reading above it by more than
  CEILING_TOLERANCE untrusts the run. `busy` per link is the wire view (frame bytes sent / rate);
- queueing delay: ckcd-link's sojourn (arrival -> start of serialization) of the bottleneck
  direction; the mean over all dequeued frames in the window (the 100 ms log), p50/p95/p99 over
  the dequeue samples;
- RTT: ping from the scenario's ping source every 0.2 s (base RTT = 2 x delay); per flow also the
  sender's smoothed RTT (tcp_info, iperf3);
- drops by reason: ckcd-link's counters (log deltas summed over the window);
- ECN marks by reason likewise (a discipline with ecn=1 marks CE instead of some drops), and per
  sending host the segments its TCP saw acknowledged with ECE (the CE marks echoed back: the
  congestion signals an ECN sender received; the kernel's TCPDeliveredCE over the whole run).
"""

from __future__ import annotations

import dataclasses

from experiments.run.probes.cpu import CpuSample
from experiments.analysis.stats import counter_rate, in_window, jain_index, mean_ci95, percentile, window_rate
from experiments.scenario.model import Scenario
from ovs_config.link_daemon import lateness, schedule_kept

CPU_SATURATED_PCT = 90.0        # a sample above this is saturated ...
CPU_SATURATED_MAX_FRACTION = 0.10  # ... and more than this fraction of them makes the run untrusted
# Mean VM steal at which a late ckcd-link is blamed on the hypervisor: its vCPU was not
# running, so no setting of ours could have kept the schedule (measured: 21 % steal gave
# 9.4 % of releases over 1 ms late, 4 % steal gave 2.0 % in the same fidelity scenario).
STEAL_HIGH_PCT = 10.0
# Ping's mean RTT may exceed what the emulated link explains (2 x delay + the bottleneck's mean
# queueing delay) by this much before the run is untrusted: the rest was spent outside ckcd-link
# (vswitchd, the hosts, a stalled vCPU). Measured: 0.4-1.1 ms in 25 runs at < 3 % steal; 3.9 and
# 9.5 ms in two at 12 % steal, the second passing the schedule check (2026-11-22, docs/experiments.md).
RTT_EXCESS_MAX_MS = 3.0
# ckcd-link keeps its schedule when at most this fraction of its releases are over 1 ms late
# and their mean lateness is at most this.
SCHEDULE_MAX_OVER_1MS_FRACTION = 0.05
SCHEDULE_MAX_LATE_MEAN_US = 1000.0
# The most TCP payload an Ethernet link of rate R carries: R x 1448/1514 with 1500-byte frames
# (MSS 1448 with timestamps, 66 bytes of Ethernet, IP and TCP headers; the link counts frames,
# not preamble or gap). A run reading more than this plus the tolerance measured something wrong.
GOODPUT_CEILING = 1448 / 1514
CEILING_TOLERANCE = 0.005
# A flow held back by its receiver's window for more than this fraction of its busy time in the
# window was limited by the receiving host (its iperf3 fell behind reading), not by the network.
RWND_LIMITED_MAX_FRACTION = 0.05


def fmt(value, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _stats(values: list) -> dict:
    if not values:
        return {"mean": None, "p50": None, "p95": None, "p99": None, "n": 0}
    return {"mean": sum(values) / len(values), "p50": percentile(values, 50), "p95": percentile(values, 95),
            "p99": percentile(values, 99), "n": len(values)}


def run_metrics(record: dict) -> dict:
    """The metrics of one run record (module docstring: what each one means), and whether the
    run is trusted with the reasons it is not."""
    scenario = Scenario.from_dict(record["scenario"])
    w0, w1 = scenario.measure_window_s
    # base RTT: None for records from before flows carried their hosts
    flows = [_flow_metrics(f, w0, w1, scenario.base_rtt_ms(f["src"], f["dst"]) if "src" in f else None)
             for f in record["flows"]]
    rates = [f["mean_mbps"] or 0.0 for f in flows]
    total = sum(rates)
    rate_bps = _mean_rate_bps(scenario.link.rate_bps, record.get("link_changes", []), w0, w1)
    capacity_mbps = rate_bps * len(record["links"]) / 1e6
    windows = {name: _LinkWindow.of(link, w0, w1) for name, link in record["links"].items()}
    links = {name: _link_metrics(windows[name], link.get("final"), rate_bps, scenario.link.release_lateness_us)
             for name, link in record["links"].items()}
    rtt = _stats(in_window(record.get("ping", []), w0, w1))
    cpu = _cpu_metrics([CpuSample.from_row(row) for row in record.get("cpu", [])])
    ping = scenario.ping
    ping_access_ms = scenario.base_rtt_ms(ping.src, ping.dst) - scenario.link.rtt_ms if ping else 0.0
    reasons = _untrusted_reasons(cpu, links, rtt, scenario.link.delay_ms, flows, ping_access_ms) \
        + _ceiling_reasons(total / capacity_mbps, flows)
    return {"window_s": [w0, w1], "flows": flows,
            "classes": _group_metrics(flows, rates, "cc"), "aggregates": _group_metrics(flows, rates, "aggregate"),
            "rtts": _group_metrics(flows, rates, "rtt_class"),
            "jain": jain_index(rates), "total_mbps": total,
            # the same traffic seen twice more, to check the goodput against: iperf3's reads, and
            # the frames the links sent (their TCP payload is at most GOODPUT_CEILING of them)
            "total_read_mbps": sum(f["read_mbps"] or 0.0 for f in flows),
            "wire_mbps": sum(link["wire_mbps"] or 0.0 for link in links.values()),
            "capacity_mbps": capacity_mbps, "utilization": total / capacity_mbps,
            "queue_delay_ms": _queue_delay_ms(windows.values()), "rtt_ms": rtt,
            "drops": _by_reason(row for w in windows.values() for row in w.rows),
            "marks": _by_reason((row for w in windows.values() for row in w.rows), "marks"),
            "senders": _sender_metrics(record.get("tcp_counters") or {}), "links": links, "cpu": cpu,
            "short_flows": {g["label"]: short_flow_metrics(g, w0, w1) for g in record.get("short_flows", [])},
            "fidelity": {"trusted": not reasons, "reasons": reasons}}


def short_flow_metrics(group: dict, w0: float, w1: float) -> dict:
    """A [[short_flows]] group's transfers that started in the window: how many started, how many
    completed and failed (the rest were still running when the run ended), and the flow
    completion times (ms) of the completed ones, over all and per size (KB)."""
    started = [x for x in group["transfers"] if w0 <= x["t"] <= w1]
    done = [x for x in started if x.get("ok")]
    by_size: dict = {}
    for x in done:
        by_size.setdefault(x["size"], []).append(x["fct_ms"])
    return {"started": len(started), "completed": len(done),
            "failed": sum(1 for x in started if x.get("ok") is False),
            "fct_ms": _stats([x["fct_ms"] for x in done]),
            "by_size_kb": {f"{size / 1000:g}": _stats(v) for size, v in sorted(by_size.items())}}


def _mean_rate_bps(start_bps: int, applied: list[dict], w0: float, w1: float) -> float:
    """The link's rate averaged over [w0, w1], with the [[link_changes]] as they took effect:
    what utilization is measured against when the rate changes during a run."""
    steps = [(0.0, start_bps)] + [(c["at_s"], c["rate_bps"]) for c in applied if c.get("rate_bps")]
    total = 0.0
    for i, (t, rate) in enumerate(steps):
        t_next = steps[i + 1][0] if i + 1 < len(steps) else w1
        total += rate * max(0.0, min(t_next, w1) - max(t, w0))
    return total / (w1 - w0) if w1 > w0 else float(start_bps)


def jain_series(flows: list[dict]) -> list[list[float]]:
    """Jain's index over time: per second of the run, over the flows with a goodput sample in
    it (iperf3's intervals, by their midpoints), [t, index] with t the second's middle."""
    by_second: dict[int, list[float]] = {}
    for f in flows:
        # A flow's last interval is short and may share a second with the one before: one value
        # per flow per second, the intervals' rates weighted by their lengths.
        acc: dict[int, list[float]] = {}
        for t, mbps, *rest in f.get("goodput", []):
            seconds = rest[0] if rest else 1.0
            bits, secs = acc.setdefault(int(t), [0.0, 0.0])
            acc[int(t)] = [bits + mbps * seconds, secs + seconds]
        for sec, (bits, secs) in acc.items():
            by_second.setdefault(sec, []).append(bits / secs if secs else 0.0)
    return [[sec + 0.5, jain_index(rates)] for sec, rates in sorted(by_second.items()) if len(rates) > 1]


def rtt_class(base_rtt_ms: float | None) -> str | None:
    """The name of the group of flows with one base RTT: "20 ms RTT" ("rtts" in the metrics)."""
    return None if base_rtt_ms is None else f"{base_rtt_ms:g} ms RTT"


def _flow_metrics(flow: dict, w0: float, w1: float, base_rtt_ms: float | None) -> dict:
    """A flow's goodput, sRTT and cwnd over the window, its base RTT (the scenario's) and the
    smallest RTT its TCP measured (the kernel's min RTT, over the whole flow); a flow that sent
    nothing in the window has 0 Mbit/s, one that failed has none."""
    tcp = flow.get("tcp_info") or []  # [t, sRTT ms, cwnd segments, min RTT ms, bytes acknowledged]
    acked = counter_rate([[r[0], r[4]] for r in tcp if len(r) > 4], w0, w1)
    reads = window_rate(flow["goodput"], w0, w1)
    goodput = acked * 8 / 1e6 if acked is not None else reads
    busy = counter_rate([[r[0], r[5]] for r in tcp if len(r) > 6], w0, w1)
    rwnd = counter_rate([[r[0], r[6]] for r in tcp if len(r) > 6], w0, w1)
    return {"label": flow["label"], "cc": flow["cc"], "aggregate": flow.get("aggregate"),
            "mean_mbps": goodput if goodput is not None else (None if flow["error"] else 0.0),
            "read_mbps": reads, "goodput_source": "tcp_info" if acked is not None else "iperf3",
            "rwnd_limited_fraction": rwnd / busy if busy and rwnd is not None else None,
            "srtt_ms": _stats(in_window(flow["srtt"], w0, w1)), "retransmits": flow.get("retransmits"),
            "base_rtt_ms": base_rtt_ms, "min_rtt_ms": flow.get("min_rtt_ms"),
            "rtt_class": rtt_class(base_rtt_ms),
            "cwnd_pkts": _stats(in_window([[r[0], r[2]] for r in tcp if r[2] is not None], w0, w1)),
            "link_drops": sum(sum(d.values()) for d in (flow.get("link_drops") or {}).values()),
            "link_marks": sum(sum(d.values()) for d in (flow.get("link_marks") or {}).values()),
            "ecn": flow.get("ecn", False), "error": flow["error"]}


def _group_metrics(flows: list[dict], rates: list[float], attr: str) -> dict:
    """Per value of the flows' `attr` (cc: the classes; aggregate; rtt_class), sorted by it: how
    many flows, their total and mean rate, Jain's index among them, their mean sRTT and min RTT."""
    groups: dict = {}
    for f, r in zip(flows, rates):
        if f[attr]:
            groups.setdefault(f[attr], []).append((r, f))
    return {name: {"flows": len(g), "total_mbps": sum(r for r, _ in g),
                   "mean_mbps": sum(r for r, _ in g) / len(g), "jain": jain_index([r for r, _ in g]),
                   "srtt_ms": _mean([f["srtt_ms"]["mean"] for _, f in g]),
                   "min_rtt_ms": _mean([f.get("min_rtt_ms") for _, f in g if f.get("min_rtt_ms") is not None])}
            for name, g in sorted(groups.items(), key=lambda kv: group_order(kv[0]))}


def group_order(name: str) -> tuple:
    """Sort key: "20 ms RTT" before "100 ms RTT"; names without a leading number by name."""
    head = name.split(" ", 1)[0]
    try:
        return (0, float(head), name)
    except ValueError:
        return (1, 0.0, name)


@dataclasses.dataclass
class _LinkWindow:
    """A link's 100 ms log rows and its dequeue samples (sojourn, ms) inside the window."""
    rows: list[dict]
    sojourn_samples: list[float]

    @classmethod
    def of(cls, link: dict, w0: float, w1: float) -> "_LinkWindow":
        return cls([r for r in link["series"] if w0 <= r["t"] <= w1], in_window(link["sojourn_samples"], w0, w1))


def _link_metrics(window: _LinkWindow, final: dict | None, rate_bps: int, intended_late_us: float = 0.0) -> dict:
    """intended_late_us: link.release_lateness_us, a lateness put there on purpose (to measure
    what lateness does): the schedule check then judges the sender's own wake-ups, and the
    lateness it added is part of what the link explains of ping's RTT."""
    rows = window.rows
    tx_bytes = sum(r["tx_bytes"] for r in rows)
    span = sum(r["interval_s"] for r in rows)
    sched = _schedule(final, "tx_wake" if intended_late_us else "schedule")
    return {"busy": tx_bytes * 8 / (rate_bps * span) if span else None,
            "wire_mbps": tx_bytes * 8 / span / 1e6 if span else None,
            "queue_delay_ms": _queue_delay_ms([window]),
            # what a ping sent at random times waits: each 100 ms row counts once, however many
            # frames it dequeued (differs from the per-frame mean when the rate changes)
            "queue_delay_time_mean_ms": _mean([r["sojourn_ms"] for r in rows if r["sojourn_ms"] is not None]),
            "qlen_pkts_mean": _mean([r["qlen_pkts"] for r in rows]),
            "drops": _by_reason(rows), "marks": _by_reason(rows, "marks"),
            "schedule": sched, "schedule_kept": sched["kept"],
            "intended_late_rtt_ms": _intended_late_ms(final) if intended_late_us else 0.0,
            "lost_before_link": _lost_before_link(final)}


# Frames a ckcd-link lost before any emulated queue saw them, by its stats' counter: no
# discipline decided these losses, so a run with any is untrusted.
LOST_OUTSIDE_QUEUE = {
    "rx_kernel_drops": "the kernel dropped {n} frames before ckcd-link read them (its receive ring was full: "
                       "the daemon fell behind{blame})",
    "rx_no_buffer": "ckcd-link had no buffer for {n} arrivals (its frame pool was empty)",
    "host_delay_drops": "{n} frames of a host with an access delay found its line full (an unresponsive sender)",
}


def _lost_before_link(final: dict | None) -> dict | None:
    """LOST_OUTSIDE_QUEUE's counters summed over both directions; a counter the ckcd-link that
    ran did not give is left out. None without final stats."""
    if not final or "dirs" not in final:
        return None
    dirs = list(final["dirs"].values())
    return {k: sum(d[k] for d in dirs) for k in LOST_OUTSIDE_QUEUE if all(k in d for d in dirs)}


def _queue_delay_ms(windows) -> dict:
    """Sojourn over one or more links: percentiles over the dequeue samples, the mean over every
    dequeued frame (each log row's mean weighted by its frame count)."""
    windows = list(windows)
    timed = [[r for r in w.rows if r["sojourn_ms"] is not None] for w in windows]
    # Summed per link first, then over links: the order in which the sums were always taken.
    weighted_sum = sum(sum(r["sojourn_ms"] * r["sojourn_count"] for r in rows) for rows in timed)
    frames = sum(sum(r["sojourn_count"] for r in rows) for rows in timed)
    samples = [v for w in windows for v in w.sojourn_samples]
    return dict(_stats(samples), mean=weighted_sum / frames if frames else None)


def _by_reason(rows, key: str = "drops") -> dict:
    """The log rows' counters by reason (key: "drops", or "marks"; rows from before ckcd-link
    marked have none), summed."""
    counts: dict = {}
    for r in rows:
        for reason, n in r.get(key, {}).items():
            counts[reason] = counts.get(reason, 0) + n
    return counts


def _sender_metrics(counters: dict) -> dict:
    """Per sending host: segments delivered and those acknowledged with ECE, over the run."""
    return {host: {"delivered": c.get("delivered"), "delivered_ce": c.get("delivered_ce"),
                   "ce_fraction": c["delivered_ce"] / c["delivered"] if c.get("delivered") else None}
            for host, c in sorted(counters.items())}


def _untrusted_reasons(cpu: dict, links: dict, rtt: dict, delay_ms: float, flows: list[dict],
                       ping_access_ms: float = 0.0) -> list[str]:
    """Why the run's numbers should not be trusted, in this order: a saturated CPU, links that
    fell behind their schedule, ping waiting outside the emulated link, failed flows."""
    # Timing faults (a late link, delay outside it) are blamed on the hypervisor, with the advice
    # to rerun, when it held back the vCPU; otherwise they are ours to explain.
    steal = cpu["steal_mean_pct"] or 0.0
    blame = f"; the hypervisor took {steal:.0f} % of the CPU (steal): rerun" if steal >= STEAL_HIGH_PCT else ""
    return (_cpu_reasons(cpu["saturated_fraction"]) + _schedule_reasons(links, blame)
            + _rtt_reasons(rtt["mean"], delay_ms, links, blame, ping_access_ms)
            + [f"flow {f['label']}: {f['error']}" for f in flows if f["error"]]
            + [f"flow {f['label']} was held back by its receiver's window {100 * f['rwnd_limited_fraction']:.0f} % of "
               f"its busy time (limit {100 * RWND_LIMITED_MAX_FRACTION:.0f} %): its receiving iperf3 fell behind "
               f"reading{blame}" for f in flows
               if (f.get("rwnd_limited_fraction") or 0) > RWND_LIMITED_MAX_FRACTION])


def _ceiling_reasons(utilization: float, flows: list[dict]) -> list[str]:
    if utilization <= GOODPUT_CEILING + CEILING_TOLERANCE:
        return []
    sources = sorted({f["goodput_source"] for f in flows})
    return [f"utilization {100 * utilization:.1f} % is above TCP's goodput ceiling of {100 * GOODPUT_CEILING:.1f} % "
            f"(+ {100 * CEILING_TOLERANCE:g} points of tolerance): the throughput measured from "
            f"{' and '.join(sources)} is wrong for this run"]


def _cpu_reasons(saturated: float) -> list[str]:
    if saturated <= CPU_SATURATED_MAX_FRACTION:
        return []
    return [f"CPU above {CPU_SATURATED_PCT:.0f} % in {100 * saturated:.0f} % of the seconds "
            f"(limit {100 * CPU_SATURATED_MAX_FRACTION:.0f} %)"]


def _schedule_reasons(links: dict, blame: str) -> list[str]:
    reasons = []
    for name, link in links.items():
        s = link["schedule"]
        if s["kept"] is None:
            reasons.append(f"{name}: no final stats from ckcd-link")
        elif not s["kept"]:
            reasons.append(f"{name}: ckcd-link fell behind its schedule ({100 * s['late_over_1ms_fraction']:.1f} % "
                           f"of releases > 1 ms late, mean {s['late_mean_us']:.0f} us{blame})")
        for counter, n in (link.get("lost_before_link") or {}).items():
            if n:
                reasons.append(f"{name}: " + LOST_OUTSIDE_QUEUE[counter].format(n=n, blame=blame))
    return reasons


def _rtt_reasons(rtt_mean: float | None, delay_ms: float, links: dict, blame: str,
                 access_ms: float = 0.0) -> list[str]:
    """access_ms: the ping hosts' access delays (their frames wait them in ckcd-link too)."""
    excess = _rtt_excess_ms(rtt_mean, delay_ms, links)
    if excess is not None:
        excess -= access_ms
    if excess is None or excess <= RTT_EXCESS_MAX_MS:
        return []
    access = f" + {access_ms:g} ms of access delays" if access_ms else ""
    return [f"ping RTT {rtt_mean:.1f} ms is {excess:.1f} ms above what the emulated link explains "
            f"(2 x {delay_ms:g} ms{access} + its mean queueing delay; limit "
            f"{RTT_EXCESS_MAX_MS:g} ms): packets waited outside ckcd-link{blame}"]


def _cpu_metrics(samples: list[CpuSample]) -> dict:
    """Over every sample of the run, not only the measurement window."""
    busy = [s.busy_pct for s in samples]
    saturated = sum(1 for b in busy if b > CPU_SATURATED_PCT) / len(busy) if busy else 0.0
    return {"mean_pct": _mean(busy), "p95_pct": percentile(busy, 95), "saturated_fraction": saturated,
            "steal_mean_pct": _mean([s.steal_pct for s in samples]),
            "vswitchd_core_pct": _mean([s.vswitchd_core_pct for s in samples]),
            "runner_core_pct": _mean([s.runner_core_pct for s in samples]),
            "links_core_pct": _mean([s.links_core_pct for s in samples])}


def _rtt_excess_ms(rtt_mean: float | None, delay_ms: float, links: dict) -> float | None:
    """Ping's mean RTT minus the base RTT and the largest mean queueing delay of the links (the
    most the emulation can explain: ping takes one of them, in the low-delay band if any). Ping
    samples the queue in time, so the queue's mean is taken over time too, and the larger of it
    and the per-frame mean is what can be explained: when the rate halves, each frame waits twice
    as long but half as many frames are counted (seed 002's cocoa_halve: 77.4 ms over time,
    68.6 per frame)."""
    queues = [max(v for v in (link["queue_delay_ms"]["mean"], link.get("queue_delay_time_mean_ms"))
                  if v is not None)
              for link in links.values() if link["queue_delay_ms"]["mean"] is not None]
    if rtt_mean is None or not queues:
        return None
    intended = max(link.get("intended_late_rtt_ms", 0.0) for link in links.values())
    return rtt_mean - 2 * delay_ms - max(queues) - intended


def _intended_late_ms(final: dict | None) -> float:
    """What an intended lateness added to a round trip: in each direction, the releases' mean
    lateness beyond the sender's own."""
    dirs = (final or {}).get("dirs", {}).values()
    return sum(max(0.0, d["schedule"]["late_mean_us"] - d["tx_wake"]["late_mean_us"]) for d in dirs) / 1000


def _schedule(final: dict | None, part: str = "schedule") -> dict:
    """How late ckcd-link was: its releases against the schedule, or with an intended lateness
    (link.release_lateness_us) its sender's own wake-ups, which that lateness does not move."""
    if not final or "dirs" not in final:
        return {"kept": None, "late_mean_us": None, "late_over_1ms_fraction": None}
    count, over, mean_us = lateness(final, part)
    return {"kept": schedule_kept(final, SCHEDULE_MAX_OVER_1MS_FRACTION, SCHEDULE_MAX_LATE_MEAN_US, part),
            "late_mean_us": mean_us, "late_over_1ms_fraction": over / count if count else 0.0, "measured": part}


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


# --- over repeats --------------------------------------------------------------------------------

# The scalar metrics summarised per case: name -> how to read it from a run's metrics.
SCALARS = {
    "jain": lambda m: m["jain"],
    "total_mbps": lambda m: m["total_mbps"],
    "total_read_mbps": lambda m: m.get("total_read_mbps"),
    "wire_mbps": lambda m: m.get("wire_mbps"),
    "utilization": lambda m: m["utilization"],
    "queue_delay_mean_ms": lambda m: m["queue_delay_ms"]["mean"],
    "queue_delay_p95_ms": lambda m: m["queue_delay_ms"]["p95"],
    "queue_delay_p99_ms": lambda m: m["queue_delay_ms"]["p99"],
    "rtt_mean_ms": lambda m: m["rtt_ms"]["mean"],
    "rtt_p95_ms": lambda m: m["rtt_ms"]["p95"],
    "rtt_p99_ms": lambda m: m["rtt_ms"]["p99"],
    "drops": lambda m: sum(m["drops"].values()),
    "marks": lambda m: sum(m.get("marks", {}).values()),
    "cpu_mean_pct": lambda m: m["cpu"]["mean_pct"],
}


# A case's numbers rest on at least this many trusted runs before a table quotes them without a
# warning: with two, Student's t for a 95 % interval is 12.7 and the interval says little.
MIN_TRUSTED = 3


def run_name(record: dict) -> str:
    """`rep2`, with its batch where the record has one: runs of several batches can be pooled."""
    return f"rep{record['rep']}" + (f" of batch {record['batch_id']}" if record.get("batch_id") else "")


def summarize(records: list[dict], include_untrusted: bool = False) -> list[dict]:
    """One entry per (scenario, case), ordered by scenario name and then by the case's place in
    its scenario (so a report re-rendered from saved runs, which load in directory order, reads
    the same): mean and 95 % CI (Student's t over runs) of each scalar, per CC class and
    aggregate, drops by reason. Only trusted runs are pooled, unless include_untrusted; the
    entry counts runs, trusted runs and pooled runs, and names each untrusted run and why."""
    groups: dict = {}
    for rec in records:
        key = (rec["scenario"]["name"], rec["case"]["name"])
        groups.setdefault(key, []).append(rec)

    def place(key):
        cases = [c.name for c in Scenario.from_dict(groups[key][0]["scenario"]).cases()]
        return key[0], cases.index(key[1]) if key[1] in cases else len(cases), key[1]

    return [_case_summary(scenario, case, groups[(scenario, case)], include_untrusted)
            for scenario, case in sorted(groups, key=place)]


def _case_summary(scenario: str, case: str, recs: list[dict], include_untrusted: bool) -> dict:
    measured = [r for r in recs if r.get("metrics")]
    trusted = [r for r in measured if r["metrics"]["fidelity"]["trusted"]]
    untrusted = [r for r in measured if not r["metrics"]["fidelity"]["trusted"]]
    ok = measured if include_untrusted else trusted
    entry = {"scenario": scenario, "case": case, "discipline": recs[0]["case"]["discipline"],
             "approach": recs[0]["case"]["approach"], "runs": len(recs), "failed": len(recs) - len(measured),
             "trusted": len(trusted), "pooled": len(ok), "includes_untrusted": include_untrusted and bool(untrusted),
             "few_trusted": len(trusted) < MIN_TRUSTED,
             "untrusted_runs": [{"run": run_name(r), "reasons": r["metrics"]["fidelity"]["reasons"]} for r in untrusted],
             "untrusted_reasons": sorted({why for r in untrusted for why in r["metrics"]["fidelity"]["reasons"]}),
             "errors": [r["error"] for r in recs if r.get("error")]}
    for name, read in SCALARS.items():
        entry[name] = mean_ci95([read(r["metrics"]) for r in ok])
    for group in ("classes", "aggregates", "rtts"):
        names = sorted({n for r in ok for n in r["metrics"][group]}, key=group_order)
        entry[group] = {n: {stat: mean_ci95([r["metrics"][group][n][stat] for r in ok if n in r["metrics"][group]])
                            for stat in ("mean_mbps", "total_mbps", "srtt_ms")}
                        for n in names}
    entry["short_flows"] = _short_flow_summary(ok)
    for key, out in (("drops", "drops_by_reason"), ("marks", "marks_by_reason")):
        reasons = sorted({k for r in ok for k in r["metrics"].get(key, {})})
        entry[out] = {k: mean_ci95([r["metrics"].get(key, {}).get(k, 0) for r in ok]) for k in reasons}
    return entry


def _short_flow_summary(ok: list[dict]) -> dict:
    """Per short-flow group and size: the mean over runs of each run's FCT p50/p95/p99 (with CIs)
    and the completed and started transfers summed over the runs."""
    out: dict = {}
    for label in sorted({g for r in ok for g in r["metrics"].get("short_flows", {})}):
        runs = [r["metrics"]["short_flows"][label] for r in ok if label in r["metrics"].get("short_flows", {})]
        sizes = sorted({s for m in runs for s in m["by_size_kb"]}, key=float)
        out[label] = {"started": sum(m["started"] for m in runs), "completed": sum(m["completed"] for m in runs),
                      "failed": sum(m["failed"] for m in runs),
                      "by_size_kb": {s: {p: mean_ci95([m["by_size_kb"][s][p] for m in runs
                                                       if s in m["by_size_kb"]]) for p in ("p50", "p95", "p99")}
                                     for s in sizes}}
    return out


# --- against the paper ------------------------------------------------------------------------------

PAPER = {"fairness_gain": 0.62, "latency_reduction": 0.92, "utilization": 0.96}


def full_buffer_ms(scenario: dict) -> float:
    """The queueing delay of a full bottleneck buffer: buffer_pkts MTU frames at the link rate."""
    link = scenario["link"]
    return link["buffer_pkts"] * 1514 * 8 / link["rate_bps"] * 1000


def headline(summary: list[dict], full_buffer: dict[str, float] | None = None) -> list[dict]:
    """Per scenario that ran both DropTail and CKCD (no approach): seed 000's headline numbers,
    ours. Fairness gain = Jain(CKCD)/Jain(DropTail) - 1; latency reduction = 1 - CKCD/DropTail,
    once for the mean queueing delay and once for the mean ping RTT; CKCD's utilization.
    "−92 % latency" has two readings in our lab, both given: CKCD's mean queueing delay against
    DropTail's mean, and against a full buffer (`full_buffer`: scenario -> ms, full_buffer_ms)."""
    by = {(e["scenario"], e["case"]): e for e in summary}
    rows = []
    for scenario in dict.fromkeys(e["scenario"] for e in summary):
        dt, ck = by.get((scenario, "droptail")), by.get((scenario, "ckcd"))
        if not dt or not ck or dt["jain"]["mean"] is None or ck["jain"]["mean"] is None:
            continue

        def reduction(key):
            a, b = dt[key]["mean"], ck[key]["mean"]
            return None if a in (None, 0) or b is None else 1 - b / a
        rows.append({"scenario": scenario, "jain_droptail": dt["jain"]["mean"], "jain_ckcd": ck["jain"]["mean"],
                     "fairness_gain": ck["jain"]["mean"] / dt["jain"]["mean"] - 1,
                     "queue_delay_droptail_ms": dt["queue_delay_mean_ms"]["mean"],
                     "queue_delay_ckcd_ms": ck["queue_delay_mean_ms"]["mean"],
                     "queue_delay_reduction": reduction("queue_delay_mean_ms"),
                     "full_buffer_ms": (full_buffer or {}).get(scenario),
                     "queue_delay_vs_full_buffer": None if not (full_buffer or {}).get(scenario)
                     or ck["queue_delay_mean_ms"]["mean"] is None
                     else 1 - ck["queue_delay_mean_ms"]["mean"] / full_buffer[scenario],
                     "rtt_droptail_ms": dt["rtt_mean_ms"]["mean"], "rtt_ckcd_ms": ck["rtt_mean_ms"]["mean"],
                     "rtt_reduction": reduction("rtt_mean_ms"),
                     "utilization_droptail": dt["utilization"]["mean"],
                     "utilization_ckcd": ck["utilization"]["mean"],
                     "runs_droptail": _counts(dt), "runs_ckcd": _counts(ck),
                     "few_trusted": dt["few_trusted"] or ck["few_trusted"],
                     "includes_untrusted": dt["includes_untrusted"] or ck["includes_untrusted"]})
    return rows


def _counts(entry: dict) -> dict:
    return {k: entry[k] for k in ("runs", "trusted", "pooled")}
