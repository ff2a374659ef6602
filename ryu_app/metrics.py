"""GET /metrics: the controller's state in the Prometheus text format (docs/metrics.md).

One custom collector reads everything at scrape time from where it already lives - the
controller's view (ryu_app/view.py; through it each ckcd-link's `stats`, read by
ovs_config.link_stats as for GET /state), the steering book, the REST error counts, the
switches' flow counters (an OFPFlowStatsRequest per switch, answered within
FLOW_STATS_TIMEOUT_S) - so there is no second copy of any state and no
thread of its own. Labels carry only names and numbers of ports, aggregates and reasons:
never the token or rule matches.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric)

from coex.steering import LATENCY_BUCKETS_S, SteeringBook
from ovs_config.link_stats import DirectionStats
from ryu_app.view import ControllerView

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PORT_LABELS = ["dpid", "port", "interface"]


def parse_xstats(text: str) -> list[dict]:
    """A discipline's xstats ("k=v k=v ...") as one dict per band: tokens after "band=<i>"
    belong to band i (datapath/core/bands.c); a discipline without bands gives one dict
    with band None."""
    groups = [{"band": None}]
    for token in (text or "").split():
        key, sep, value = token.partition("=")
        if not sep:
            continue
        if key == "band":
            if groups == [{"band": None}]:
                groups = []
            groups.append({"band": value})
            continue
        groups[-1][key] = value
    return groups


TYPED_STATE = ("active_flows", "fair_share_bps")


def _typed(state: dict) -> dict:
    return {k: state[k] for k in TYPED_STATE
            if isinstance(state.get(k), (int, float)) and not isinstance(state[k], bool)}


def state_groups(d: dict) -> list[dict]:
    """The discipline's active flows and fair share from ckcd-link's `stats` of a direction,
    one dict per band as parse_xstats gives them. The typed numbers win (the core's
    aqm_get_xstats, only the fields it gives): under bands each entry of `bands` has its own
    `state` (aqm_band_xstats; the queue's `state` is the bands' sum and smallest share), a
    queue without bands has `state` beside its xstats. The xstats text is read only when the
    typed numbers are missing: an older ckcd-link without per-band `state` (or without
    `state` at all)."""
    groups = parse_xstats(d.get("xstats", ""))
    bands = d.get("bands")
    if isinstance(bands, list) and bands:
        states = [b.get("state") if isinstance(b, dict) else None for b in bands]
        if all(isinstance(s, dict) for s in states):
            return [{"band": str(b.get("band", i)), **_typed(s)} for i, (b, s) in enumerate(zip(bands, states))]
        return groups  # an older ckcd-link: each band's values from the text
    state = d.get("state")
    if isinstance(state, dict) and all(g["band"] is None for g in groups):
        return [{"band": None, **_typed(state)}]
    return groups


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def discipline_name(spec: str | None) -> tuple[str, str]:
    """(the discipline's kind, the bands' kinds comma-separated or "") of a ckcd-link spec such
    as "bands weights=1,3 ... | ckcd limit=80 ... | droptail limit=80"."""
    if not spec:
        return "none", ""
    parts = [p.split()[0] for p in spec.split("|") if p.split()]
    return parts[0], ",".join(parts[1:])


class CoexCollector:
    """The prometheus_client collector of one controller: its view, its REST API's error
    counts (status -> answers, counted as they happen) and its steering book."""

    def __init__(self, view: ControllerView, rest_errors: Mapping[int, int], book: SteeringBook):
        self.view, self.rest_errors, self.book = view, rest_errors, book

    def collect(self):
        yield from self._controller()
        yield from self._ports()
        yield from self._aggregates()
        yield from self._heavy_hitters()

    # --- controller health ---------------------------------------------------------------

    def _controller(self):
        view = self.view
        yield GaugeMetricFamily("coex_switches_connected", "OpenFlow switches connected now",
                                value=view.switches_connected())
        lead = view.leadership()
        yield GaugeMetricFamily("coex_leader", "1 while this instance leads, 0 while it stands by (docs/ha.md)",
                                value=1 if lead["role"] == "leader" else 0)
        yield GaugeMetricFamily("coex_switches_master", "Connected switches that confirmed this instance as MASTER",
                                value=lead["switches_master"])
        yield GaugeMetricFamily("coex_links", "Switch-to-switch links known from LLDP", value=view.link_count())
        yield GaugeMetricFamily("coex_hosts", "Hosts learned", value=view.host_count())
        yield GaugeMetricFamily("coex_policy_version",
                                "Version of the policy in force (moves on every accepted change)",
                                value=view.policy_version)
        errors = CounterMetricFamily("coex_rest_errors", "REST answers with a 4xx or 5xx status, by status code",
                                     labels=["code"])
        for code, n in sorted(self.rest_errors.items()):
            errors.add_metric([str(code)], n)
        yield errors
        refused = CounterMetricFamily("coex_switch_errors", "OFPT_ERROR replies switches sent for the controller's "
                                      "flow-mods and meter-mods, by switch and error type", labels=["dpid", "type"])
        for (dpid, kind), n in sorted(view.switch_errors().items()):
            refused.add_metric([f"{dpid:016x}", kind], n)
        yield refused
        writes = CounterMetricFamily("coex_switch_writes", "Flow-mods and meter-mods the controller sent, by switch "
                                     "and command", labels=["dpid", "command"])
        for (dpid, command), n in sorted(view.switch_writes().items()):
            writes.add_metric([f"{dpid:016x}", command], n)
        yield writes

    # --- bottleneck ports ----------------------------------------------------------------

    def _ports(self):
        port_names = self.view.port_names()
        by_name = {name: key for key, name in port_names.items()}
        declared = {(p.dpid, p.port): p for p in self.view.policy.ports}
        served = self.view.served_links()
        info = GaugeMetricFamily("coex_port_discipline_info", "A bottleneck port's queue discipline (value 1)",
                                 labels=PORT_LABELS + ["backend", "discipline", "bands", "declared"])
        families = {
            "rate": GaugeMetricFamily("coex_port_link_rate_bits_per_second", "Emulated link rate leaving the port",
                                      labels=PORT_LABELS),
            "delay": GaugeMetricFamily("coex_port_link_delay_seconds", "Emulated one-way delay leaving the port",
                                       labels=PORT_LABELS),
            "qlen": GaugeMetricFamily("coex_port_queue_packets", "Frames queued now (not the one on the wire)",
                                      labels=PORT_LABELS),
            "qbytes": GaugeMetricFamily("coex_port_queue_bytes", "Bytes queued now", labels=PORT_LABELS),
            "sojourn_max": GaugeMetricFamily("coex_port_sojourn_max_seconds",
                                             "Longest queueing delay of any dequeued frame since the link started",
                                             labels=PORT_LABELS),
            "drops": CounterMetricFamily("coex_port_drops", "Frames the queue dropped, by reason",
                                         labels=PORT_LABELS + ["reason"]),
            "marks": CounterMetricFamily("coex_port_marks",
                                         "Frames the queue marked CE (ECN) where it would have dropped them, by reason",
                                         labels=PORT_LABELS + ["reason"]),
            "tx_pkts": CounterMetricFamily("coex_port_transmitted_packets", "Frames sent on the link",
                                           labels=PORT_LABELS),
            "tx_bytes": CounterMetricFamily("coex_port_transmitted_bytes", "Bytes sent on the link",
                                            labels=PORT_LABELS),
            "busy": CounterMetricFamily("coex_port_busy_seconds",
                                        "Time the link spent serializing: bytes sent x 8 / the current rate",
                                        labels=PORT_LABELS),
            "active": GaugeMetricFamily("coex_port_ckcd_active_flows", "CKCD's active flows I (per band under bands)",
                                        labels=PORT_LABELS + ["band"]),
            "fair": GaugeMetricFamily("coex_port_ckcd_fair_share_bits_per_second",
                                      "CKCD's fair share C / I (per band under bands)", labels=PORT_LABELS + ["band"]),
        }
        sojourn = Metric("coex_port_sojourn_seconds",
                         "Queueing delay (arrival to start of serialization) of dequeued frames since the link "
                         "started; quantiles from ckcd-link's histogram (within 1/16)", "summary")
        keys = sorted(set(declared) | {by_name[n] for n in served if n in by_name})
        for key in keys:
            name = port_names.get(key, "")
            labels = [str(key[0]), str(key[1]), name]
            state = self.view.port_state(key)
            backend = "ckcd-link" if name in served else (state.queue_backend if state else None) or "none"
            spec = None
            if name in served:
                stats = self.view.link_stats(served[name])
                if stats is not None:
                    spec = stats.reply.get("qdisc")
                    self._port_samples(families, sojourn, labels, stats)
            elif key in declared and declared[key].aqm is not None:
                spec = declared[key].aqm.discipline
            kind, bands = discipline_name(spec)
            info.add_metric(labels + [backend, kind, bands, "true" if key in declared else "false"], 1)
        yield info
        yield from families.values()
        yield sojourn

    @staticmethod
    def _port_samples(f, sojourn, labels, stats: DirectionStats) -> None:
        d = stats.reply
        rate = d.get("rate_bps") or 0
        f["rate"].add_metric(labels, rate)
        f["delay"].add_metric(labels, (d.get("delay_ms") or 0) / 1e3)
        f["qlen"].add_metric(labels, stats.qlen_pkts)
        f["qbytes"].add_metric(labels, d.get("qlen_bytes", 0))
        for reason, n in stats.drops.items():  # every reason, also at 0
            f["drops"].add_metric(labels + [reason], n)
        for reason, n in stats.marks.items():  # also from a ckcd-link before ECN (no marks): all 0
            f["marks"].add_metric(labels + [reason], n)
        f["tx_pkts"].add_metric(labels, d.get("tx_frames", 0))
        f["tx_bytes"].add_metric(labels, d.get("tx_bytes", 0))
        if rate:
            f["busy"].add_metric(labels, d.get("tx_bytes", 0) * 8 / rate)
        soj = d.get("sojourn_us") or {}
        count = soj.get("count", 0)
        names = dict(zip(["dpid", "port", "interface"], labels))
        for q, field in (("0.5", "p50"), ("0.99", "p99")):
            if soj.get(field) is not None:
                sojourn.add_sample("coex_port_sojourn_seconds", {**names, "quantile": q}, soj[field] / 1e6)
        sojourn.add_sample("coex_port_sojourn_seconds_sum", names, (soj.get("mean") or 0) * count / 1e6)
        sojourn.add_sample("coex_port_sojourn_seconds_count", names, count)
        if soj.get("max") is not None:
            f["sojourn_max"].add_metric(labels, soj["max"] / 1e6)
        for group in state_groups(d):
            active, fair = _number(group.get("active_flows")), _number(group.get("fair_share_bps"))
            band = group["band"] if group["band"] is not None else ""
            if active is not None:
                f["active"].add_metric(labels + [band], active)
            if fair is not None:
                f["fair"].add_metric(labels + [band], fair)

    # --- aggregates (the switches' flow counters) -------------------------------------------

    def _aggregates(self):
        view = self.view
        labels = ["aggregate", "dpid"]
        nbytes = CounterMetricFamily("coex_aggregate_bytes", "Bytes the aggregate's forwarding flows forwarded on a switch "
                                     "(flows that expire take their counts with them)", labels=labels)
        npkts = CounterMetricFamily("coex_aggregate_packets", "Packets the aggregate's forwarding flows forwarded on a "
                                    "switch", labels=labels)
        nflows = GaugeMetricFamily("coex_aggregate_path_flows", "Forwarding flows of the aggregate installed on a switch "
                                   "(one per destination host)",
                                   labels=labels)
        totals: dict[tuple[str, int], list] = {}
        for dpid, entries in sorted(view.path_counters().items()):
            for agg in [a.name for a in view.policy.aggregates]:
                totals[(agg, dpid)] = [0, 0, 0]
            for e in entries:
                fields = dict(e.match.items())
                if "ipv4_dst" not in fields:
                    continue  # not a forwarding flow (table 1's miss)
                meta = fields.get("metadata", 0)
                meta = meta[0] if isinstance(meta, tuple) else meta
                t = totals.setdefault((view.aggregate_of(meta & 0xFF), dpid), [0, 0, 0])
                t[0] += e.byte_count
                t[1] += e.packet_count
                t[2] += 1
        for (agg, dpid), (b, p, n) in sorted(totals.items()):
            nbytes.add_metric([agg, str(dpid)], b)
            npkts.add_metric([agg, str(dpid)], p)
            nflows.add_metric([agg, str(dpid)], n)
        yield nbytes
        yield npkts
        yield nflows

    # --- heavy hitters -----------------------------------------------------------------------

    def _heavy_hitters(self):
        book = self.book
        yield GaugeMetricFamily("coex_heavy_hitters", "Flows steered into the penalized aggregate now "
                                "(per flow and port)", value=book.steered_count())
        yield CounterMetricFamily("coex_heavy_hitter_steered", "Heavy hitters steered (detections)",
                                  value=book.steered_total)
        released = CounterMetricFamily("coex_heavy_hitter_released", "Heavy hitters released, by reason",
                                       labels=["reason"])
        for reason, n in sorted(book.released_total.items()):
            released.add_metric([reason], n)
        yield released
        latency = HistogramMetricFamily("coex_heavy_hitter_detection_latency_seconds",
                                        "From a flow's first sample at a port's rate detector to its detection")
        buckets, running = [], 0
        for bound, n in zip([str(b) for b in LATENCY_BUCKETS_S] + ["+Inf"], book.latency_counts):
            running += n
            buckets.append((bound, running))
        latency.add_metric([], buckets, book.latency_sum_s)
        yield latency


def registry_for(view: ControllerView, rest_errors: Mapping[int, int], book: SteeringBook) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CoexCollector(view, rest_errors, book))
    registry.register(ProcessCollector(registry=None))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
