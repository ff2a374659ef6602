"""The metrics of one run record (its statistics over runs: summary.py; whether to trust it:
fidelity.py).

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

from experiments.analysis import fidelity
from experiments.analysis.stats import counter_rate, in_window, jain_index, percentile, window_rate
from experiments.run.probes.cpu import CpuSample
from experiments.scenario.model import Link, Scenario
from experiments.scenario.workloads import size_bin, size_key
from ovs_config.link_daemon import lateness


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
    every = [_flow_metrics(f, w0, w1, scenario.base_rtt_ms(f["src"], f["dst"]) if "src" in f else None)
             for f in record["flows"]]
    # Fairness and utilization are per direction: the forward flows' over the forward link
    # (every metric below), the reverse flows' over the reverse one ("reverse").
    flows = [f for f in every if not f["reverse"]]
    rates = [f["mean_mbps"] or 0.0 for f in flows]
    total = sum(rates)
    rate_bps = _mean_rate_bps(scenario.link.rate_bps, record.get("link_changes", []), w0, w1)
    capacity_mbps = rate_bps * len(record["links"]) / 1e6
    reverse = _reverse_metrics([f for f in every if f["reverse"]], scenario, len(record["links"]))
    windows = {name: _LinkWindow.of(link, w0, w1) for name, link in record["links"].items()}
    links = {name: _link_metrics(windows[name], link.get("final"), rate_bps, scenario.link)
             for name, link in record["links"].items()}
    rtt = _stats(in_window(record.get("ping", []), w0, w1))
    cpu = _cpu_metrics([CpuSample.from_row(row) for row in record.get("cpu", [])])
    ping = scenario.ping
    ping_access_ms = scenario.base_rtt_ms(ping.src, ping.dst) - scenario.link.rtt_ms if ping else 0.0
    link_ms = fidelity.link_extra_ms(scenario.link)
    phases = phase_metrics(record, scenario, w0, w1)
    group_pings = [_group_ping_metrics(p, scenario, record["links"], links, cpu, w0, w1)
                   for p in record.get("group_pings", [])]
    reasons = fidelity.untrusted_reasons(cpu, links, rtt, scenario.link.delay_ms, every, ping_access_ms, link_ms) \
        + fidelity.ceiling_reasons(total / capacity_mbps, flows) \
        + (fidelity.ceiling_reasons(reverse["utilization"], reverse["flow_list"], "reverse ") if reverse else []) \
        + [why for p in group_pings for why in p.pop("reasons")]
    return {"window_s": [w0, w1], "flows": every,
            "classes": _group_metrics(flows, rates, "cc"), "aggregates": _group_metrics(flows, rates, "aggregate"),
            "rtts": _rtts_with_pings(_group_metrics(flows, rates, "rtt_class"), scenario, rtt, group_pings),
            "jain": jain_index(rates), "total_mbps": total,
            # the same traffic seen twice more, to check the goodput against: iperf3's reads, and
            # the frames the links sent (their TCP payload is at most GOODPUT_CEILING of them)
            "total_read_mbps": sum(f["read_mbps"] or 0.0 for f in flows),
            "wire_mbps": sum(link["wire_mbps"] or 0.0 for link in links.values()),
            "capacity_mbps": capacity_mbps, "utilization": total / capacity_mbps,
            "queue_delay_ms": _queue_delay_ms(windows.values()), "rtt_ms": rtt,
            "rtt_unexplained_ms": fidelity.unexplained_rtt_ms(rtt["mean"], scenario.link.delay_ms, links,
                                                              ping_access_ms, link_ms),
            "release_late_mean_us": max((link["release_late_mean_us"] for link in links.values()
                                         if link["release_late_mean_us"] is not None), default=None),
            "drops": _by_reason(row for w in windows.values() for row in w.rows),
            "marks": _by_reason((row for w in windows.values() for row in w.rows), "marks"),
            "senders": _sender_metrics(record.get("tcp_counters") or {}), "links": links, "cpu": cpu,
            "short_flows": {g["label"]: short_flow_metrics(g, w0, w1) for g in record.get("short_flows", [])},
            "udp_flows": {g["label"]: udp_flow_metrics(g, w0, w1) for g in record.get("udp_flows", [])},
            "mptcp": mptcp_metrics(flows),
            **({"phases": phases} if phases else {}),
            **({"group_pings": group_pings} if group_pings else {}),
            **_capture_metrics(record["links"]),
            **({"reverse": {k: v for k, v in reverse.items() if k != "flow_list"}} if reverse else {}),
            "fidelity": {"trusted": not reasons, "reasons": reasons}}


def measure_records(records: list[dict]) -> list[dict]:
    """Each record's metrics computed by this code from what the run saved (a failed run has
    none): a report's or a summary's numbers do not depend on the version that ran the batch
    having measured them the same way."""
    for rec in records:
        if not rec.get("error"):
            rec["metrics"] = run_metrics(rec)
    return records


def _capture_metrics(link_records: dict) -> dict:
    """Per link with a packet capture (experiments/run/probes/capture.py): the forward frames'
    sojourn measured from it over the window, and its drops and marks of that direction."""
    out = {}
    for name, link in link_records.items():
        cap = link.get("capture")
        if cap is not None:
            ab = (cap.get("events") or {}).get("ab", {})
            out[name] = {"error": cap.get("error"), "sojourn_ms": cap.get("sojourn_ms"),
                         "drops": ab.get("drop"), "marks": ab.get("mark")}
    return {"capture": out} if out else {}


def _rtts_with_pings(rtts: dict, scenario: Scenario, rtt: dict, group_pings: list[dict]) -> dict:
    """Each RTT group's ping RTT (`ping_rtt_ms`): the main ping's group's, and with
    per_rtt_group every other's."""
    ping = scenario.ping
    if ping:
        for cls, mean in [(rtt_class(scenario.base_rtt_ms(ping.src, ping.dst)), rtt["mean"])] + [
                (p["rtt_class"], p["rtt_ms"]["mean"]) for p in group_pings]:
            if cls in rtts:
                rtts[cls]["ping_rtt_ms"] = mean
    return rtts


def _group_ping_metrics(ping: dict, scenario: Scenario, link_records: dict, links: dict, cpu: dict, w0: float,
                        w1: float) -> dict:
    """An RTT group's ping over the window: its RTT, its group, what of it the link does not
    explain (as the main ping's, with this ping's own queueing delay in each link), and its
    fidelity check's reasons ("reasons", taken out by the caller)."""
    pair = f"{ping['src']}>{ping['dst']}"
    own = {}
    for name, link in link_records.items():
        rows = [r for r in (link.get("group_ping_sojourn") or {}).get(pair, []) if w0 <= r[0] <= w1]
        own[name] = {**links[name], "ping_queue_delay_ms": _LinkWindow([], [], rows).ping_queue_delay_ms()}
    base = scenario.base_rtt_ms(ping["src"], ping["dst"])
    access_ms = base - scenario.link.rtt_ms
    rtt = _stats(in_window(ping["series"], w0, w1))
    link_ms = fidelity.link_extra_ms(scenario.link)
    return {"src": ping["src"], "dst": ping["dst"], "rtt_class": rtt_class(base), "base_rtt_ms": base,
            "rtt_ms": rtt,
            "rtt_unexplained_ms": fidelity.unexplained_rtt_ms(rtt["mean"], scenario.link.delay_ms, own, access_ms,
                                                              link_ms),
            "reasons": fidelity.group_ping_reasons(f"ping {ping['src']}→{ping['dst']}", cpu, rtt["mean"],
                                                   scenario.link.delay_ms, own, access_ms, link_ms)}


def _reverse_metrics(flows: list[dict], scenario: Scenario, links: int) -> dict | None:
    """The reverse flows' Jain's index, total goodput and utilization of the reverse direction's
    rate (the link's own where [link.reverse] sets none); None without reverse flows."""
    if not flows:
        return None
    rates = [f["mean_mbps"] or 0.0 for f in flows]
    capacity_mbps = scenario.reverse_rate_bps * links / 1e6
    return {"flows": len(flows), "jain": jain_index(rates), "total_mbps": sum(rates),
            "capacity_mbps": capacity_mbps, "utilization": sum(rates) / capacity_mbps,
            "classes": _group_metrics(flows, rates, "cc"), "flow_list": flows}


def udp_flow_metrics(flow: dict, w0: float, w1: float) -> dict:
    """A [[udp_flows]] flow over the window (its receiver's intervals that start in it): the share
    of its datagrams lost, its one-way delay (mean, and the mean of the intervals' 95th
    percentiles, each weighted by the datagrams received; the largest), its RFC 3550 jitter."""
    rows = [r for r in flow["intervals"] if w0 <= r[0] < w1]
    received = sum(r[1] for r in rows)
    lost = max(0, sum(r[2] for r in rows) - sum(r[3] for r in rows))

    def weighted(i: int) -> float | None:
        pairs = [(r[i], r[1]) for r in rows if r[i] is not None and r[1]]
        return sum(v * n for v, n in pairs) / sum(n for _, n in pairs) if pairs else None
    return {"received": received, "lost": lost,
            "loss_fraction": lost / (received + lost) if received + lost else None,
            "owd_ms": weighted(4), "owd_p95_ms": weighted(6),
            "owd_max_ms": max((r[7] for r in rows if r[7] is not None), default=None),
            "jitter_ms": _mean([r[8] for r in rows if r[1]]), "error": flow["error"]}


def short_flow_metrics(group: dict, w0: float, w1: float) -> dict:
    """A [[short_flows]] group's transfers that started in the window: how many started, how many
    completed and failed (the rest were still running when the run ended), and the flow
    completion times (ms) of the completed ones, over all and per size (KB)."""
    started = [x for x in group["transfers"] if w0 <= x["t"] <= w1]
    done = [x for x in started if x.get("ok")]
    by_size: dict = {}
    classes = group.get("by_size_class", False)  # drawn from a distribution: by size class, not per size
    for x in done:
        by_size.setdefault(size_bin(x["size"]) if classes else f"{x['size'] / 1000:g}", []).append(x["fct_ms"])
    return {"started": len(started), "completed": len(done),
            "failed": sum(1 for x in started if x.get("ok") is False),
            "fct_ms": _stats([x["fct_ms"] for x in done]),
            "by_size_kb": {size: _stats(by_size[size]) for size in sorted(by_size, key=size_key)}}


def phase_metrics(record: dict, scenario: Scenario, w0: float, w1: float) -> list[dict]:
    """The window cut where each [[link_changes]] entry took effect (as the run recorded it), and
    per part the forward flows' goodput, Jain's index, the utilization of that part's rate, the
    queueing delay and ping's RTT; [] when no change falls inside the window. The window's means
    mix the rates before and after a change, and the question of a rate change (seed 002) is
    what each discipline does on each side of it. A part starts at its change, so its means
    include the transition that follows."""
    applied = record.get("link_changes", [])
    cuts = sorted({c["at_s"] for c in applied if w0 < c["at_s"] < w1})
    if not cuts:
        return []
    edges = [w0, *cuts, w1]
    out = []
    for a, b in zip(edges, edges[1:]):
        rates = [_flow_metrics(f, a, b, None)["mean_mbps"] or 0.0 for f in record["flows"] if not f.get("reverse")]
        rate_bps = _mean_rate_bps(scenario.link.rate_bps, applied, a, b)
        capacity_mbps = rate_bps * len(record["links"]) / 1e6
        windows = [_LinkWindow.of(link, a, b) for link in record["links"].values()]
        out.append({"from_s": a, "to_s": b, "rate_mbps": rate_bps / 1e6, "flows": len(rates),
                    "total_mbps": sum(rates), "utilization": sum(rates) / capacity_mbps, "jain": jain_index(rates),
                    "queue_delay_ms": _queue_delay_ms(windows),
                    "rtt_ms": _stats(in_window(record.get("ping", []), a, b))})
    return out


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
    subflows = _subflow_metrics(flow, acked, w0, w1) if "subflows" in flow else None
    if subflows and acked is not None:  # an MPTCP connection's goodput is its subflows' together
        acked = sum(s["mean_mbps"] or 0.0 for s in subflows) * 1e6 / 8
    reads = window_rate(flow["goodput"], w0, w1)
    goodput = acked * 8 / 1e6 if acked is not None else reads
    busy = counter_rate([[r[0], r[5]] for r in tcp if len(r) > 6], w0, w1)
    rwnd = counter_rate([[r[0], r[6]] for r in tcp if len(r) > 6], w0, w1)
    return {"label": flow["label"], "cc": flow["cc"], "aggregate": flow.get("aggregate"),
            "reverse": flow.get("reverse", False),
            "mean_mbps": goodput if goodput is not None else (None if flow["error"] else 0.0),
            "read_mbps": reads, "goodput_source": "tcp_info" if acked is not None else "iperf3",
            "rwnd_limited_fraction": rwnd / busy if busy and rwnd is not None else None,
            "srtt_ms": _stats(in_window(flow["srtt"], w0, w1)), "retransmits": flow.get("retransmits"),
            "base_rtt_ms": base_rtt_ms, "min_rtt_ms": flow.get("min_rtt_ms"),
            "rtt_class": rtt_class(base_rtt_ms),
            "cwnd_pkts": _stats(in_window([[r[0], r[2]] for r in tcp if r[2] is not None], w0, w1)),
            "link_drops": sum(sum(d.values()) for d in (flow.get("link_drops") or {}).values()),
            "link_marks": sum(sum(d.values()) for d in (flow.get("link_marks") or {}).values()),
            "ecn": flow.get("ecn", False), "error": flow["error"], "tcp_state": _tcp_state(tcp, w0, w1),
            **({"subflows": subflows} if subflows is not None else {})}


def _subflow_metrics(flow: dict, first_acked: float | None, w0: float, w1: float) -> list[dict]:
    """An MPTCP connection's subflows, its first (the flow's own socket) and those that joined:
    each one's goodput over the window (its bytes acknowledged: the data it carried, a
    reinjected segment counted on each subflow that sent it) and ckcd-link's drops of it."""
    def drops(counts: dict) -> int:
        return sum(sum(d.values()) for d in (counts or {}).values())

    out = [{"key": flow.get("key"), "mean_mbps": None if first_acked is None else first_acked * 8 / 1e6,
            "link_drops": drops(flow.get("link_drops"))}]
    for s in flow["subflows"]:
        acked = counter_rate([[r[0], r[4]] for r in s["tcp_info"] if len(r) > 4], w0, w1)
        out.append({"key": s["key"], "mean_mbps": None if acked is None else acked * 8 / 1e6,
                    "link_drops": drops(s["link_drops"])})
    return out


def mptcp_metrics(flows: list[dict]) -> dict:
    """Per MPTCP connection: its subflows that carried data in the window, its goodput and its
    fair shares, that goodput over the mean of the single-path flows' (1: the share of one TCP
    flow; n: of n flows). seed 000's question: does a queue hold a connection of n subflows to
    one share, or give it n?"""
    single = [f["mean_mbps"] for f in flows if "subflows" not in f and f["mean_mbps"] is not None]
    mean_single = sum(single) / len(single) if single else None
    return {f["label"]: {"mean_mbps": f["mean_mbps"],
                         "subflows_active": sum(1 for s in f["subflows"] if (s["mean_mbps"] or 0) > 0),
                         "subflow_mbps": [s["mean_mbps"] for s in f["subflows"]],
                         "fair_shares": f["mean_mbps"] / mean_single
                         if mean_single and f["mean_mbps"] is not None else None}
            for f in flows if "subflows" in f}


# BBR's pacing gains by state (tcp_bbr.c): startup 2/ln 2, drain its inverse, the probing cycle
# 1.25, 0.75 and 1. A sample is put with the nearest of them.
BBR_GAINS = {"startup": 2.885, "drain": 0.347, "probe_up": 1.25, "probe_down": 0.75, "cruise": 1.0}


def _tcp_state(tcp: list, w0: float, w1: float) -> dict | None:
    """What the kernel said of the flow's sender over the window (ss.SocketInfo.row's later
    columns): its pacing and delivery rates, the segments it retransmitted and, under BBR, its
    bandwidth estimate and the share of samples in each state its pacing gain says. None for
    records from before these columns."""
    rows = [r for r in tcp if len(r) > 12]
    if not rows:
        return None

    def column(i: int, scale: float = 1.0) -> list:
        return in_window([[r[0], r[i] / scale] for r in rows if r[i] is not None], w0, w1)

    gains = column(11)
    states = {}
    for g in gains:
        state = min(BBR_GAINS, key=lambda s: abs(BBR_GAINS[s] - g))
        states[state] = states.get(state, 0) + 1
    retrans = counter_rate([[r[0], r[9]] for r in rows if r[9] is not None], w0, w1)
    return {"pacing_mbps": _stats(column(7, 1e6)), "delivery_mbps": _stats(column(8, 1e6)),
            "retrans_per_s": retrans,
            "bbr_bw_mbps": _stats(column(10, 1e6)) if gains else None,
            "bbr_states": {s: round(n / len(gains), 3) for s, n in sorted(states.items())} if gains else None}


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
    """A link's 100 ms log rows, its dequeue samples (sojourn, ms) and ping's own frames' log
    rows ([t, dir, deq_pkts, summed sojourn in us]; None for records from before they were kept)
    inside the window."""
    rows: list[dict]
    sojourn_samples: list[float]
    ping_rows: list | None = None

    @classmethod
    def of(cls, link: dict, w0: float, w1: float) -> "_LinkWindow":
        ping = link.get("ping_sojourn")
        return cls([r for r in link["series"] if w0 <= r["t"] <= w1], in_window(link["sojourn_samples"], w0, w1),
                   None if ping is None else [r for r in ping if w0 <= r[0] <= w1])

    def ping_queue_delay_ms(self) -> float | None:
        """What ping's own frames waited in this link on a round trip: the mean sojourn of its
        echo requests in one direction plus its replies' in the other. None when ping did not
        cross this link in the window or the record has no per-flow sojourn. Under a
        multi-queue discipline (DualPI2's L and C queues, fq_codel's flows) this is not the
        link's mean: ping waits in its own queue."""
        by_dir: dict = {}
        for _t, direction, n, sum_us in self.ping_rows or ():
            acc = by_dir.setdefault(direction, [0, 0.0])
            acc[0] += n
            acc[1] += sum_us
        if not any(n for n, _ in by_dir.values()):
            return None
        return sum(total / n for n, total in by_dir.values() if n) / 1000


def _link_metrics(window: _LinkWindow, final: dict | None, rate_bps: int, link: Link) -> dict:
    """With link.release_lateness_us (a lateness put there on purpose, to measure what lateness
    does) or link.release_batch_us (frames released together, late by up to a batch), the
    schedule check judges the sender's own wake-ups (fidelity.judged_part), and the lateness the
    releases show beyond them is part of what the link explains of ping's RTT."""
    rows = window.rows
    tx_bytes = sum(r["tx_bytes"] for r in rows)
    span = sum(r["interval_s"] for r in rows)
    part = fidelity.judged_part(final, link.release_batch_us, link.release_lateness_us)
    sched = fidelity.link_schedule(final, part)
    return {"busy": tx_bytes * 8 / (rate_bps * span) if span else None,
            "wire_mbps": tx_bytes * 8 / span / 1e6 if span else None,
            "queue_delay_ms": _queue_delay_ms([window]),
            # what a ping sent at random times waits: each 100 ms row counts once, however many
            # frames it dequeued (differs from the per-frame mean when the rate changes)
            "queue_delay_time_mean_ms": _mean([r["sojourn_ms"] for r in rows if r["sojourn_ms"] is not None]),
            "ping_queue_delay_ms": window.ping_queue_delay_ms(),
            "qlen_pkts_mean": _mean([r["qlen_pkts"] for r in rows]),
            "drops": _by_reason(rows), "marks": _by_reason(rows, "marks"),
            # frames the forward direction's loss model lost after the queue (ckcd-link --loss; rows
            # from before it had none)
            "lost_on_link": sum(r.get("lost", 0) for r in rows),
            "schedule": sched, "schedule_kept": sched["kept"],
            # the releases' own mean lateness, an intended one included (what the schedule check reads
            # without one): the x of the emulator's sensitivity curve
            "release_late_mean_us": lateness(final, "schedule")[2] if final and "dirs" in final else None,
            "intended_late_rtt_ms": fidelity.intended_late_ms(final, part) if part != "schedule" else 0.0,
            "lost_before_link": fidelity.lost_before_link(final)}


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


def _cpu_metrics(samples: list[CpuSample]) -> dict:
    """Over every sample of the run, not only the measurement window."""
    busy = [s.busy_pct for s in samples]
    saturated = sum(1 for b in busy if b > fidelity.CPU_SATURATED_PCT) / len(busy) if busy else 0.0
    return {"mean_pct": _mean(busy), "p95_pct": percentile(busy, 95), "saturated_fraction": saturated,
            "steal_mean_pct": _mean([s.steal_pct for s in samples]),
            "vswitchd_core_pct": _mean([s.vswitchd_core_pct for s in samples]),
            "runner_core_pct": _mean([s.runner_core_pct for s in samples]),
            "links_core_pct": _mean([s.links_core_pct for s in samples])}


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
