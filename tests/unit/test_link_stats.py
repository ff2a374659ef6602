"""A ckcd-link port's live counters (ovs_config.link_stats): GET /state shows the link
direction's queue, drops and marks by reason under the port's `link`, read from the daemon when
asked, as GET /metrics reads them (one reader for both), and a daemon that went away leaves
them out without failing either answer."""

from __future__ import annotations

import socket
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

import controller_parts
from controller_parts import DPID, LINK_CONTROL_PATH, ControllerParts
from coex.ports import APPLIED, PortState
from ovs_config import aqm
from ovs_config.link_daemon import LinkControl, LinkDaemonError
from ovs_config.link_stats import DROP_REASONS, LinkDirection, LinkStatsReader
from ryu_app import metrics

ZERO = {r: 0 for r in sorted(DROP_REASONS)}


def parts_with_a_link_port() -> ControllerParts:
    """Port 1 of switch 0x42 (s1-l0) served by controller_parts' ckcd-link (FakeLink, direction
    "ab"), port 2 (s1-eth2) a kernel port with the sch_ckcd qdisc, both applied."""
    parts = ControllerParts()
    parts.port_names.update({(DPID, 1): "s1-l0", (DPID, 2): "s1-eth2"})
    parts.link_ports["s1-l0"] = (LINK_CONTROL_PATH, "ab")
    hosts = parts.switch_hosts.port_state
    hosts[(DPID, 1)] = PortState(name="s1-l0", queue_backend="ckcd-link", aqm_backend=aqm.LINK_BACKEND,
                                 discipline="ckcd limit=80 ecn=1", status=APPLIED)
    hosts[(DPID, 2)] = PortState(name="s1-eth2", queue_backend="ovsdb-queue", aqm_backend=aqm.KERNEL_BACKEND,
                                 discipline="ckcd limit=80", qdisc={"applied": "ckcd limit=80"}, status=APPLIED)
    return parts


def get_state(parts: ControllerParts) -> dict:
    status, state, _ = parts.api().handle("GET", "/coex/v1/state", {}, b"")
    assert status == 200
    return {p["name"]: p for p in state["ports"]}


def scrape_counts(parts: ControllerParts) -> dict:
    """coex_port_{drops,marks}_total of s1-l0 as {"drops": {reason: n}, "marks": {...}}."""
    api = parts.api()
    api._registry = metrics.CollectorRegistry(auto_describe=False)
    api._registry.register(metrics.CoexCollector(parts.view, api.errors, parts.heavy_hitters.book))
    text = api.handle("GET", "/metrics", {}, b"")[1].body.decode()
    got = {"drops": {}, "marks": {}}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in ("coex_port_drops_total", "coex_port_marks_total") and s.labels["interface"] == "s1-l0":
                got[s.name.split("_")[2]][s.labels["reason"]] = int(s.value)
    return got


def test_state_shows_a_link_ports_queue_drops_and_marks_by_reason_as_metrics_does():
    parts = parts_with_a_link_port()
    ports = get_state(parts)
    assert ports["s1-l0"]["link"] == {"qlen_pkts": 12,
                                      "drops": {**ZERO, "overflow": 7, "early": 2},
                                      "marks": {**ZERO, "early": 5, "delay": 3}}
    assert list(ports["s1-l0"]["link"]["drops"]) == sorted(DROP_REASONS)  # every reason, also at 0
    assert ports["s1-l0"]["status"] == APPLIED and ports["s1-l0"]["aqm_backend"] == "ckcd-link"
    assert "link" not in ports["s1-eth2"]  # a kernel port: its qdisc's tc stats instead
    # The same counts as /metrics, read by the same reader.
    link = ports["s1-l0"]["link"]
    assert scrape_counts(parts) == {"drops": link["drops"], "marks": link["marks"]}


def test_state_reads_the_daemon_when_asked(monkeypatch):
    parts = parts_with_a_link_port()
    assert get_state(parts)["s1-l0"]["link"]["marks"]["penalty"] == 0
    monkeypatch.setattr(controller_parts, "LINK_STATS", {**controller_parts.LINK_STATS, "qlen_pkts": 80,
                                                         "marks": {"early": 6, "delay": 3, "penalty": 1}})
    link = get_state(parts)["s1-l0"]["link"]
    assert link["qlen_pkts"] == 80 and link["marks"] == {**ZERO, "early": 6, "delay": 3, "penalty": 1}
    # A ckcd-link from before ECN has no `marks`: it marked nothing.
    monkeypatch.setattr(controller_parts, "LINK_STATS", {k: v for k, v in controller_parts.LINK_STATS.items()
                                                         if k != "marks"})
    assert get_state(parts)["s1-l0"]["link"]["marks"] == ZERO


def test_a_daemon_that_went_away_leaves_the_link_out_of_state_and_metrics(monkeypatch):
    parts = parts_with_a_link_port()

    def gone(self, direction, max_flows=64):
        raise ConnectionRefusedError(2, "No such file or directory")

    monkeypatch.setattr(controller_parts.FakeLink, "stats", gone)
    ports = get_state(parts)
    assert "link" not in ports["s1-l0"] and ports["s1-l0"]["status"] == APPLIED
    assert scrape_counts(parts) == {"drops": {}, "marks": {}}


def test_the_reader_tolerates_a_missing_socket_and_an_ovsdb_that_does_not_answer(tmp_path):
    reader = LinkStatsReader(link_ports=lambda: {"s1-l0": (str(tmp_path / "gone.sock"), "ba")})
    assert reader.served() == {"s1-l0": LinkDirection(str(tmp_path / "gone.sock"), "ba")}
    assert reader.read(reader.served()["s1-l0"]) is None  # the real client, no daemon there

    def no_ovsdb():
        raise OSError("ovs-vsctl: not found")

    assert LinkStatsReader(link_ports=no_ovsdb).served() == {}


def test_a_reply_that_is_not_json_is_a_link_daemon_error_naming_it(tmp_path):
    """Rule: bytes on the control socket that are not JSON (not UTF-8 either) raise
    LinkDaemonError with the reply's start, which the start-up wait treats as "not answering
    yet", never a bare UnicodeDecodeError that fails a run."""
    path = str(tmp_path / "ctl.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def answer():
        conn, _ = server.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b'{"ok\xfb\xe2 garbage\n')
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        with pytest.raises(LinkDaemonError, match="not JSON"):
            LinkControl(path).request({"cmd": "ping"})
    finally:
        t.join(timeout=5)
        server.close()
