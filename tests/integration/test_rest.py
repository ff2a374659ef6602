"""The /coex/v1 REST API of the real ryu-manager, with one real (userspace) OVS bridge
connected so that dpid and port checks have something to check against."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from experiments.lab.net import Controller
from experiments.lab.rest_client import CoexClient
from ryu_app.openapi import build_openapi
from tests.integration.labkit import controller_with_bridge

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

OF_PORT, REST_PORT = 16663, 18090
DPID = 0x42


@pytest.fixture(scope="module")
def api(private_ovs, tmp_path_factory):
    """Controller + a bridge 'rt0' (dpid 0x42) with internal ports 1 and 2."""
    with controller_with_bridge(private_ovs, tmp_path_factory.mktemp("rest"), OF_PORT, REST_PORT, "rt0", DPID) as ctl:
        yield CoexClient(ctl.rest_url)


def policy_of(api):
    return api.ok("GET", "/policy")


def test_health_and_openapi(api):
    status, body = api.get("/health")
    assert status == 200 and body["status"] == "ok" and body["switches_connected"] == 1
    status, doc = api.get("/openapi.json")
    assert status == 200 and doc == json.loads(json.dumps(build_openapi()))
    with open("docs/openapi.json") as f:
        assert json.load(f) == doc, "docs/openapi.json is stale: python -m ryu_app.openapi > docs/openapi.json"


@pytest.mark.parametrize("method,path,raw,status,field", ids=lambda v: repr(v)[:40] if isinstance(v, bytes) else None,
                         argvalues=[
    ("GET", "/nowhere", None, 404, None),
    ("DELETE", "/health", None, 405, None),
    ("POST", "/rules", b"{not json", 400, "body"),
    ("POST", "/rules", b"", 400, "body"),
    ("PUT", "/policy", b"[" * 100_000 + b"]" * 100_000, 400, "body"),  # was a RecursionError
    ("PUT", "/approaches", b" " * (1 << 20) + b"{}", 413, "body"),
    ("PUT", "/approaches", b'\xff{"separate_paths": true}', 400, "body"),
    ("GET", "/rules/%ff", None, 400, "path"),  # was webob's UnicodeDecodeError, a text/plain 500
    ("DELETE", "/ports/1/%C2%B2", None, 400, "port"),
    ("GET", "/ports/%D9%A1/1", None, 400, "dpid"),
    ("PUT", "/heavy-hitters/config", '{"collector": "\u00b2:\u00b2"}'.encode(), 422, "heavy_hitters.collector"),
    ("PUT", "/heavy-hitters/config", b'{"source": "sflow-rt", "detector": "mode"}', 409,
     "heavy_hitters.detector"),  # each valid alone: a conflict
    ("POST", "/rules", b'{"name": "x", "aggregate": "default", "match": {}, "colour": 1}', 422, "rules[0].colour"),
    ("POST", "/rules", b'{"name": "x", "aggregate": "default", "match": {"tp_dst": "80", "ip_proto": 6}}',
     422, "rules[0].match.tp_dst"),
    ("PUT", "/approaches", b'{"separate_queues": "on"}', 422, "approaches.separate_queues"),
    ("PUT", "/ports/99/1", b'{"capacity_bps": 10000000}', 404, "dpid"),
    ("PUT", "/ports/0x42/7", b'{"capacity_bps": 10000000}', 404, "port"),
    ("PUT", "/ports/zz/1", b'{"capacity_bps": 10000000}', 400, "dpid"),
    ("PUT", "/ports/0x42/1", b'{"capacity_bps": -5}', 422, "ports[0].capacity_bps"),
    ("PUT", "/ports/0x42/1/aqm", b'{"discipline": "ckcd"}', 404, "port"),
    ("GET", "/rules/nosuch", None, 404, "name"),
    ("DELETE", "/aggregates/default", None, 409, "name"),
])
def test_bad_requests_get_json_errors_and_change_nothing(api, method, path, raw, status, field):
    before = policy_of(api)
    got, body = api.request(method, path, raw=raw)
    assert got == status, body
    assert set(body) == {"error", "field"} and body["error"] and body["field"] == field
    assert policy_of(api) == before


@pytest.mark.parametrize("method,path,body,field", [
    ("PUT", "/approaches", {"limited_queue": {"enabled": True, "rate_bps": 20_000_000}},
     "approaches.limited_queue.rate_bps"),
    ("PUT", "/ports/0x42/1/aqm", {"discipline": "ckcd", "params": {"rate_bps": 20_000_000, "rtt_ms": 20}},
     "ports[0].aqm.params.rate_bps"),
    ("PUT", "/heavy-hitters/config", {"enabled": True, "threshold_bps": 20_000_000}, "heavy_hitters.threshold_bps"),
])
def test_a_rate_above_port_capacity_is_refused(api, method, path, body, field):
    api.ok("PUT", "/ports/0x42/1", {"capacity_bps": 10_000_000})
    try:
        before, state = policy_of(api), api.ok("GET", "/state")
        status, answer = api.request(method, path, body)
        assert status == 409 and answer["field"] == field, answer  # a rate valid alone, against the capacity
        assert policy_of(api) == before and api.ok("GET", "/state") == state
    finally:
        api.ok("DELETE", "/ports/66/1")


def raw_request(port: int, request: bytes) -> tuple[int, str, bytes]:
    """Send bytes as they are (http.client refuses a non-ASCII request line); status, type, body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers.get("Content-Type", ""), body


@pytest.mark.parametrize("head,body,status", [
    ("Transfer-Encoding: chunked", b"zz\r\nabc\r\n0\r\n\r\n", 400),  # a broken chunk
    ("Transfer-Encoding: chunked", b"5\r\n{\"sep\r\n0\r\n\r\n", 400),  # truncated JSON in chunks
    ("Content-Length: 99999999999", b"{}", 413),  # refused before reading: no wait for the rest
])
def test_bodies_over_raw_http_get_json_errors(api, head, body, status):
    before = policy_of(api)
    request = f"PUT /coex/v1/approaches HTTP/1.1\r\nHost: x\r\n{head}\r\nConnection: close\r\n\r\n"
    got, ctype, answer = raw_request(REST_PORT, request.encode() + body)
    assert got == status and ctype.startswith("application/json"), (got, answer)
    assert json.loads(answer)["field"] == "body" and policy_of(api) == before


def test_a_chunked_body_is_read(api):
    body = b'{"separate_paths": false}'
    request = (b"PUT /coex/v1/approaches HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: close\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    status, _, answer = raw_request(REST_PORT, request)
    assert status == 200 and json.loads(answer)["approaches"]["separate_paths"] is False, answer


@pytest.mark.parametrize("path,field", [
    ("/coex/v1/ports/1/\u00b2", "port"), ("/coex/v1/ports/\u0664\u0662/1", "dpid"),
    ("/coex/v1/rules/caf\u00e9", "name"),
])
def test_non_ascii_request_lines_get_json_errors(api, path, field):
    for method in ("GET", "DELETE"):
        request = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        status, ctype, body = raw_request(REST_PORT, request)
        assert 400 <= status < 500 and ctype.startswith("application/json"), (status, body)
        assert json.loads(body)["field"] == field


def test_conflicting_rules_are_refused(api):
    api.ok("PUT", "/rules/web", {"aggregate": "low_delay", "match": {"ipv4_dst": "10.0.0.0/24"}})
    before = policy_of(api)
    status, body = api.post("/rules", {"name": "bulk", "aggregate": "queue_filling",
                                       "match": {"ipv4_dst": "10.0.0.3"}})
    assert status == 409 and body["field"] == "rules[1].match"
    assert policy_of(api) == before
    api.ok("DELETE", "/rules/web")


def test_rule_lifecycle_and_state(api):
    created = api.ok("POST", "/rules", {"name": "voice", "aggregate": "low_delay", "priority": 5,
                                        "match": {"ip_proto": 17, "tp_dst": 5004}})
    assert created["rule"]["priority"] == 5
    assert api.ok("GET", "/rules/voice")["match"] == {"ip_proto": 17, "tp_dst": 5004}
    api.ok("PUT", "/rules/voice", {"aggregate": "low_delay", "match": {"ip_proto": 17, "tp_dst": 5005}})
    assert [r["name"] for r in api.ok("GET", "/rules")["rules"]] == ["voice"]
    state = api.ok("GET", "/state")
    assert state["switches"][0]["dpid"] == DPID and state["switches"][0]["connected"]
    api.ok("DELETE", "/rules/voice")
    assert api.get("/rules/voice")[0] == 404
    assert api.ok("GET", "/changes")["changes"][0]["summary"] == "rule voice deleted"


def test_token_guards_changes(private_ovs, tmp_path):
    ctl = Controller(of_port=OF_PORT + 1, rest_port=REST_PORT + 1, log_path=str(tmp_path / "ryu.log"),
                     db_path=str(tmp_path / "p.sqlite"), token="s3cret").start()
    try:
        anon = CoexClient(ctl.rest_url)
        assert anon.get("/policy")[0] == 200
        status, body = anon.put("/approaches", {"separate_paths": True})
        assert status == 401 and body["field"] == "Authorization"
        wrong = CoexClient(ctl.rest_url, token="guess")
        assert wrong.put("/approaches", {"separate_paths": True})[0] == 401
        for token in ("s\u00e9cret", "\u00ff" * 6):  # non-ASCII: was a TypeError in compare_digest, a 500
            conn = http.client.HTTPConnection("127.0.0.1", REST_PORT + 1, timeout=10)
            conn.request("PUT", "/coex/v1/approaches", b'{"separate_paths": true}',
                         {"Authorization": f"Bearer {token}"})  # sent as latin-1 bytes
            res = conn.getresponse()
            assert res.status == 401 and json.loads(res.read())["field"] == "Authorization"
            conn.close()
        assert anon.ok("GET", "/policy")["version"] == 0
        good = CoexClient(ctl.rest_url, token="s3cret")
        assert good.ok("PUT", "/approaches", {"separate_paths": True})["version"] == 1
    finally:
        ctl.stop()


def test_rest_listens_on_loopback_only(api):
    import subprocess
    listeners = subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
    assert f"127.0.0.1:{REST_PORT}" in listeners
    assert f"0.0.0.0:{REST_PORT}" not in listeners and f"*:{REST_PORT}" not in listeners


POLICY_FILE = {
    "rules": [{"name": "bulk", "aggregate": "queue_filling", "match": {"ip_proto": 6, "tp_dst": 5302}}],
    "ports": [{"dpid": 1, "port": 3, "capacity_bps": 50_000_000}],
    "heavy_hitters": {"enabled": True, "source": "sflow-rt", "sflow_rt_url": "http://127.0.0.1:18008",
                      "sampling": 256, "threshold_bps": 40_000_000},
}


def test_policy_file_is_applied_at_start_and_only_once(tmp_path):
    """CKCD_COEX_POLICY: validated and stored at start (no REST call); a restart with the
    same file adds no version; a REST change holds until the next start."""
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY_FILE))

    def start():
        ctl = Controller(of_port=OF_PORT + 1, rest_port=REST_PORT + 1, log_path=str(tmp_path / "ryu.log"),
                         db_path=str(tmp_path / "policy.sqlite"))
        ctl.env["CKCD_COEX_POLICY"] = str(path)
        return ctl.start()

    ctl = start()
    try:
        api = CoexClient(ctl.rest_url)
        hh = api.ok("GET", "/heavy-hitters/config")
        assert (hh["source"], hh["sampling"], hh["threshold_bps"]) == ("sflow-rt", 256, 40_000_000)
        # Enabled by the file with no switch connected yet reads as enabled, and says
        # what it waits for (it used to answer "enabled": false, as if the setting was ignored).
        report = api.ok("GET", "/heavy-hitters")
        assert report["enabled"] is True and report["error"] is None, report
        assert report["waiting"] == [{"dpid": 1, "port": 3, "for": "switch 0x1 to connect"}], report
        assert [r["name"] for r in api.ok("GET", "/rules")["rules"]] == ["bulk"]
        [change] = api.ok("GET", "/changes")["changes"]
        assert change["version"] == 1 and change["summary"] == f"policy file {path}"
        api.ok("DELETE", "/rules/bulk")
    finally:
        ctl.stop()
    ctl = start()
    try:
        api = CoexClient(ctl.rest_url)
        # The file differed from the stored policy again (the rule was deleted): version 3.
        assert [c["version"] for c in api.ok("GET", "/changes")["changes"]] == [3, 2, 1]
        assert [r["name"] for r in api.ok("GET", "/rules")["rules"]] == ["bulk"]
    finally:
        ctl.stop()
    ctl = start()
    try:  # unchanged file, unchanged store: no new version
        assert CoexClient(ctl.rest_url).ok("GET", "/policy")["version"] == 3
    finally:
        ctl.stop()


@pytest.mark.parametrize("content,message", [
    ('{"heavy_hitters": {"sampling": 0}}', "heavy_hitters.sampling"),
    ("{not json", "is not JSON"),
    (None, "cannot read"),
])
def test_bad_policy_file_stops_the_controller_with_one_clear_line(tmp_path, content, message):
    path = tmp_path / "policy.json"
    if content is not None:
        path.write_text(content)
    log = tmp_path / "ryu.log"
    ctl = Controller(of_port=OF_PORT + 1, rest_port=REST_PORT + 1, log_path=str(log),
                     db_path=str(tmp_path / "policy.sqlite"))
    ctl.env["CKCD_COEX_POLICY"] = str(path)
    with pytest.raises(RuntimeError, match="ryu-manager exited with 2"):
        ctl.start()
    text = log.read_text()
    assert "CKCD_COEX_POLICY: " in text and message in text, text
    assert "Traceback" not in text, text
