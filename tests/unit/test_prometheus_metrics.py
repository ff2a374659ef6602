"""GET /metrics (ryu_app/metrics.py) from a stand-in controller: every family docs/metrics.md
lists, values read at scrape time from the controller's state, ckcd-link's stats and the
switches' flow counters, nothing secret in labels, and the routes' errors as JSON 4xx."""

from __future__ import annotations

import os
import re
import types

from prometheus_client.parser import text_string_to_metric_families

import controller_parts
from coex.policy import Policy
from controller_parts import DPID, LINK_CONTROL_PATH, LINK_STATS, ControllerParts
from ryu_app.metrics import discipline_name, parse_xstats, state_groups
from ryu_app.rest import CoexApi, Raw

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "metrics.md")
TOKEN = "s3cret-token-value"


class Match(dict):
    pass


def flow(metadata, nbytes, npkts):
    """A table-1 flow as Ryu parses it: a forwarding flow, or with metadata None the miss flow."""
    fields = {} if metadata is None else {"metadata": (metadata, 0xFF), "eth_type": 0x800,
                                          "ipv4_dst": "10.0.0.3"}
    return types.SimpleNamespace(match=Match(fields), byte_count=nbytes, packet_count=npkts)


class MetricsController(ControllerParts):
    """Switch 0x42 (s1-l0 its port 1, a declared bottleneck served by ckcd-link; s1-eth2 its
    port 2, linked to switch 7), three hosts, and forwarding-flow counters of two aggregates."""

    def __init__(self):
        super().__init__(token=TOKEN)
        self.in_force.replace(Policy.from_dict({
            "rules": [{"name": "bulk", "aggregate": "queue_filling", "match": {"ip_proto": 6, "tp_dst": 5201}}],
            "ports": [{"dpid": DPID, "port": 1, "capacity_bps": 50_000_000}]}), 0)
        self.net.add_switch(7, (1, 2, 3))
        self.net.add_link((DPID, 2), (7, 1), now=0.0)
        for i, (dpid, port) in enumerate([(DPID, 1), (7, 2), (7, 3)], 1):
            self.net.learn_host(f"00:00:00:00:00:0{i}", f"10.0.0.{i}", dpid, port, now=0.0)
        self.port_names.update({(DPID, 1): "s1-l0", (DPID, 2): "s1-eth2"})
        self.link_ports["s1-l0"] = (LINK_CONTROL_PATH, "ab")  # FakeLink, controller_parts' ckcd-link
        qf = self.in_force.plan.agg_id("queue_filling")
        self.path_flows = {DPID: [flow(0, 1000, 10), flow(qf, 5000, 5), flow(qf, 100, 1), flow(None, 9, 9)]}


def scrape(api) -> dict:
    status, payload, _ = api.handle("GET", "/metrics", {}, b"")
    assert status == 200 and isinstance(payload, Raw)
    assert payload.content_type == "text/plain; version=0.0.4; charset=utf-8"
    text = payload.body.decode()
    assert TOKEN not in text and "5201" not in text  # no token, no rule match in any label
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def make_api():
    app = MetricsController()
    api = app.api()
    from ryu_app import metrics
    api._registry = metrics.CollectorRegistry(auto_describe=False)  # ours only: no process_* samples
    api._registry.register(metrics.CoexCollector(app.view, api.errors, app.heavy_hitters.book))
    return app, api


PORT = (("dpid", str(DPID)), ("interface", "s1-l0"), ("port", "1"))


def test_metrics_read_the_controller_the_link_and_the_flow_counters_at_scrape_time():
    app, api = make_api()
    got = scrape(api)
    assert got[("coex_switches_connected", ())] == 1
    assert got[("coex_links", ())] == 1 and got[("coex_hosts", ())] == 3
    assert got[("coex_policy_version", ())] == 0
    info = [k for k in got if k[0] == "coex_port_discipline_info"]
    assert info == [("coex_port_discipline_info", tuple(sorted(dict(
        PORT, backend="ckcd-link", discipline="bands", bands="ckcd,droptail", declared="true").items())))]
    assert got[("coex_port_queue_packets", PORT)] == 12
    assert got[("coex_port_link_rate_bits_per_second", PORT)] == 50e6
    assert got[("coex_port_drops_total", PORT + (("reason", "overflow"),))] == 7
    assert got[("coex_port_drops_total", PORT + (("reason", "delay"),))] == 0  # every reason, also at 0
    assert got[("coex_port_marks_total", PORT + (("reason", "early"),))] == 5  # ECN: CE instead of a drop
    assert got[("coex_port_marks_total", PORT + (("reason", "delay"),))] == 3
    assert got[("coex_port_marks_total", PORT + (("reason", "overflow"),))] == 0  # every reason, also at 0
    assert got[("coex_port_busy_seconds_total", PORT)] == 1_514_000 * 8 / 50e6
    assert got[("coex_port_sojourn_seconds_count", PORT)] == 1000
    assert got[("coex_port_sojourn_seconds_sum", PORT)] == 2.0
    assert got[("coex_port_sojourn_seconds", PORT + (("quantile", "0.99"),))] == 0.009
    band0 = tuple(sorted(PORT + (("band", "0"),)))
    assert got[("coex_port_ckcd_active_flows", band0)] == 2
    assert got[("coex_port_ckcd_fair_share_bits_per_second", band0)] == 12.5e6
    assert ("coex_port_ckcd_active_flows", tuple(sorted(PORT + (("band", "1"),)))) not in got  # droptail band
    agg = lambda name: (("aggregate", name), ("dpid", str(DPID)))  # noqa: E731
    assert got[("coex_aggregate_bytes_total", agg("default"))] == 1000
    assert got[("coex_aggregate_bytes_total", agg("queue_filling"))] == 5100
    assert got[("coex_aggregate_packets_total", agg("queue_filling"))] == 6
    assert got[("coex_aggregate_path_flows", agg("queue_filling"))] == 2
    assert got[("coex_aggregate_bytes_total", agg("low_delay"))] == 0  # every aggregate, also idle
    assert got[("coex_heavy_hitters", ())] == 0 and got[("coex_heavy_hitter_steered_total", ())] == 0
    assert got[("coex_heavy_hitter_detection_latency_seconds_count", ())] == 0
    # State changes show at the next scrape: nothing is cached.
    app.in_force.replace(app.policy, 5)
    app.path_flows = {}
    api.handle("PUT", "/coex/v1/approaches", {}, b'{"separate_queues": "yes"}')
    got = scrape(api)
    assert got[("coex_policy_version", ())] == 5
    assert got[("coex_rest_errors_total", (("code", "401"),))] == 1  # no token given
    assert not [k for k in got if k[0] == "coex_aggregate_bytes_total"]


REASONS = ("choke_match", "delay", "early", "flush", "overflow", "penalty", "shrink")  # ckcd-link's drops keys


def test_ecn_marks_are_exposed_by_reason_beside_the_drops(monkeypatch):
    """ckcd-link's `marks` (docs/ckcd-link.md, `stats`) as coex_port_marks_total, one sample per
    reason as coex_port_drops_total has, read from the direction's own counts (not the queue's)."""
    reply = {**LINK_STATS, "drops": {r: 0 for r in REASONS} | {"overflow": 11},
             "marks": {r: 0 for r in REASONS} | {"early": 40, "delay": 2, "penalty": 1},
             "queue": {"drops": {"overflow": 999}, "marks": {"early": 999}}}
    monkeypatch.setattr(controller_parts, "LINK_STATS", reply)
    _, api = make_api()
    text = api.handle("GET", "/metrics", {}, b"")[1].body.decode()
    assert "# TYPE coex_port_marks_total counter" in text
    labels = 'dpid="{}",interface="s1-l0",port="1"'.format(DPID)
    got = {(m.group(1), m.group(2)): float(m.group(3)) for m in re.finditer(
        r'^(coex_port_(?:drops|marks)_total)\{' + labels + r',reason="(\w+)"\} (\S+)$', text, re.M)}
    assert got == {**{("coex_port_drops_total", r): 0.0 for r in REASONS}, ("coex_port_drops_total", "overflow"): 11.0,
                   **{("coex_port_marks_total", r): 0.0 for r in REASONS},
                   ("coex_port_marks_total", "early"): 40.0, ("coex_port_marks_total", "delay"): 2.0,
                   ("coex_port_marks_total", "penalty"): 1.0}


def test_a_link_without_marks_shows_every_reason_at_zero(monkeypatch):
    """A ckcd-link from before ECN has no `marks`: it marked nothing, and the series are all there
    (a query over marks and drops together never misses a port)."""
    monkeypatch.setattr(controller_parts, "LINK_STATS", {k: v for k, v in LINK_STATS.items() if k != "marks"})
    _, api = make_api()
    got = scrape(api)
    marks = {dict(k[1])["reason"]: v for k, v in got.items() if k[0] == "coex_port_marks_total"}
    assert marks == {r: 0 for r in REASONS}
    assert got[("coex_port_drops_total", PORT + (("reason", "overflow"),))] == 7


def test_metrics_routes_refuse_other_methods_and_paths_with_json():
    _, api = make_api()
    status, payload, headers = api.handle("POST", "/metrics", {}, b"")
    assert status == 405 and headers == {"Allow": "GET"} and set(payload) == {"error", "field"}
    status, payload, _ = api.handle("GET", "/metrics/extra", {}, b"")
    assert status == 404 and set(payload) == {"error", "field"}
    assert api.errors == {405: 1, 404: 1}


def test_xstats_and_spec_parsing():
    assert parse_xstats("q_avg=1.5 active_flows=3 fair_share_bps=33333333") == [
        {"band": None, "q_avg": "1.5", "active_flows": "3", "fair_share_bps": "33333333"}]
    assert parse_xstats("") == [{"band": None}]
    assert [g["band"] for g in parse_xstats(LINK_STATS["xstats"])] == ["0", "1"]
    assert discipline_name("ckcd limit=80 delta_ms=100") == ("ckcd", "")
    assert discipline_name(LINK_STATS["qdisc"]) == ("bands", "ckcd,droptail")
    assert discipline_name(None) == ("none", "")


CKCD_STATS = {**LINK_STATS, "qdisc": "ckcd limit=80",
              # the text says otherwise: a queue without bands is read from the typed numbers
              "xstats": "q_avg=1.5 active_flows=9 fair_share_bps=1 flow.7=mu_bps:1,dth_us:2,dropping:0",
              "state": {"active_flows": 4, "fair_share_bps": 12_500_000, "q_avg": 1.5}}


def test_a_queue_without_bands_is_read_from_the_typed_state(monkeypatch):
    monkeypatch.setattr(controller_parts, "LINK_STATS", CKCD_STATS)
    _, api = make_api()
    got = scrape(api)
    port = tuple(sorted(PORT + (("band", ""),)))
    assert got[("coex_port_ckcd_active_flows", port)] == 4
    assert got[("coex_port_ckcd_fair_share_bits_per_second", port)] == 12.5e6


def test_state_groups_typed_where_it_exists_text_per_band():
    assert state_groups(CKCD_STATS) == [{"band": None, "active_flows": 4, "fair_share_bps": 12_500_000}]
    # RED: the core flags q_avg only, so no flows and no fair share
    assert state_groups({"xstats": "q_avg=3.25 count=1", "state": {"q_avg": 3.25}}) == [{"band": None}]
    # an older ckcd-link without "state": the text
    assert state_groups({"xstats": "active_flows=3 fair_share_bps=5"}) == [
        {"band": None, "active_flows": "3", "fair_share_bps": "5"}]
    # bands from an older ckcd-link without per-band "state" ("state" is the bands' sum and
    # smallest share): each band's values from the text
    banded = {**LINK_STATS, "state": {"active_flows": 2, "fair_share_bps": 12_500_000},
              "bands": [{"band": 0}, {"band": 1}]}
    assert state_groups(banded) == parse_xstats(LINK_STATS["xstats"])


BANDED_STATS = {**LINK_STATS,
                # the text says otherwise: each band is read from its typed "state"
                "state": {"active_flows": 5, "fair_share_bps": 4_000_000},
                "bands": [{"band": 0, "qlen_pkts": 3, "state": {"active_flows": 3, "fair_share_bps": 4_000_000,
                                                                "q_avg": 2.5}},
                          {"band": 1, "qlen_pkts": 9, "state": {"q_avg": 7.0}}]}


def test_bands_are_read_from_each_bands_typed_state(monkeypatch):
    assert state_groups(BANDED_STATS) == [{"band": "0", "active_flows": 3, "fair_share_bps": 4_000_000},
                                          {"band": "1"}]
    monkeypatch.setattr(controller_parts, "LINK_STATS", BANDED_STATS)
    _, api = make_api()
    got = scrape(api)
    band0, band1 = (tuple(sorted(PORT + (("band", b),))) for b in ("0", "1"))
    # band 0's text says 2 flows and 12.5 Mb/s: the typed numbers win
    assert got[("coex_port_ckcd_active_flows", band0)] == 3
    assert got[("coex_port_ckcd_fair_share_bits_per_second", band0)] == 4e6
    # band 1 (droptail) flags neither
    assert ("coex_port_ckcd_active_flows", band1) not in got
    assert ("coex_port_ckcd_fair_share_bits_per_second", band1) not in got


def test_docs_list_every_metric():
    _, api = make_api()
    text = api.handle("GET", "/metrics", {}, b"")[1].body.decode()
    families = {m.group(1) for m in re.finditer(r"^# TYPE (coex_\w+) ", text, re.M)}
    with open(DOCS) as f:
        documented = set(re.findall(r"`(coex_\w+)`", f.read()))
    assert families <= documented, f"undocumented in docs/metrics.md: {sorted(families - documented)}"
    assert len(families) >= 25
