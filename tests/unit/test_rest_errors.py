"""CoexApi.handle() (ryu_app/rest.py) on inputs that once gave a 500: every one is a 4xx JSON
{error, field}, and a rejected request leaves the policy alone. A stand-in for the controller
holds the policy; tests/integration/test_rest*.py run the same against the real ryu-manager."""

from __future__ import annotations

import json

import pytest

from controller_parts import DPID, ControllerParts
from ryu_app.rest import MAX_BODY_BYTES


def call(api, method, path, body=None, raw=None, headers=None):
    if raw is None and body is not None:
        raw = json.dumps(body).encode()
    status, payload, _ = api.handle(method, path, headers or {}, raw or b"")
    json.dumps(payload)  # what the adapter sends must be JSON
    return status, payload


@pytest.fixture
def api():
    api = ControllerParts().api()
    assert call(api, "PUT", "/coex/v1/ports/0x42/1", {"capacity_bps": 10_000_000})[0] == 200
    return api


def rejected(api, method, path, body=None, raw=None, headers=None, status=None, field=None):
    before = (api.view.policy, api.view.policy_version)
    got, payload = call(api, method, path, body, raw, headers)
    assert 400 <= got < 500, payload
    assert set(payload) == {"error", "field"} and payload["error"]
    if status is not None:
        assert got == status, payload
    if field is not None:
        assert payload["field"] == field, payload
    assert (api.view.policy, api.view.policy_version) == before
    return payload


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
@pytest.mark.parametrize("port", ["\u00b2", "\u0661", "+1", "1\n", "1_0", "0", "00"])
def test_path_ports_take_ascii_digits_only(api, method, port):
    """Rule: a path port not of the document's shape (ASCII digits, not 0) is a 400."""
    rejected(api, method, f"/coex/v1/ports/66/{port}", {"capacity_bps": 10_000_000}, status=400, field="port")


@pytest.mark.parametrize("dpid", ["\u00b2", "\u0664\u0662", "0x", "0x\u0664", " 66", "0", "0x0"])
def test_path_dpids_take_ascii_digits_only(api, dpid):
    rejected(api, "GET", f"/coex/v1/ports/{dpid}/1", status=400, field="dpid")


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
@pytest.mark.parametrize("dpid, port, field", [("66", "4294967041", "port"), ("66", "9999999999", "port"),
                                               ("18446744073709551616", "1", "dpid")])
def test_path_numbers_of_the_documents_shape_out_of_range_name_nothing(api, method, dpid, port, field):
    """Rule (the OpenAPI document is the validator's promise): a path number its pattern allows
    is never a 400; one out of range names no switch or port, a 404."""
    rejected(api, method, f"/coex/v1/ports/{dpid}/{port}", {"capacity_bps": 10_000_000}, status=404, field=field)


@pytest.mark.parametrize("dpid", ["000000000000000000066", "0X000000000000000042", "0x42"])
def test_path_numbers_padded_with_zeros_name_the_same_switch(dpid):
    """Rule: the document's patterns take leading zeros beyond 20 digits (or 16 hex digits), and
    so does the API: the same switch, not a 500 (a parser limited to 20 digits once raised)."""
    api = ControllerParts().api()
    status, body = call(api, "PUT", f"/coex/v1/ports/{dpid}/0000000001", {"capacity_bps": 10_000_000})
    assert status == 200 and (body["port"]["dpid"], body["port"]["port"]) == (66, 1), body


def test_path_that_is_not_utf8_is_a_400(api):
    rejected(api, "GET", b"/coex/v1/rules/\xff", status=400, field="path")
    assert call(api, "GET", "/coex/v1/rules/caf\u00e9".encode())[1]["error"] == "no rule named 'caf\u00e9'"


def test_deeply_nested_body_is_a_400_naming_the_body(api):
    rejected(api, "PUT", "/coex/v1/policy", raw=b"[" * 100_000 + b"]" * 100_000, status=400, field="body")
    rejected(api, "PUT", "/coex/v1/approaches", raw=b'{"limited_queue": ' * 20_000 + b"{}" + b"}" * 20_000,
             status=400, field="body")


def test_body_over_the_limit_is_a_413(api):
    rejected(api, "POST", "/coex/v1/rules", raw=b" " * (MAX_BODY_BYTES + 1), status=413, field="body")


def test_collector_with_unicode_digits_is_a_422(api):
    rejected(api, "PUT", "/coex/v1/heavy-hitters/config", {"collector": "\u00b2:\u00b2"},
             status=422, field="heavy_hitters.collector")


def test_aqm_rate_above_capacity_is_a_409(api):
    """Rule: a value in its range that another field forbids is a conflict (409), not invalid (422)."""
    rejected(api, "PUT", "/coex/v1/ports/0x42/1/aqm", {"discipline": "ckcd", "params": {"rate_bps": 2e7}},
             status=409, field="ports[0].aqm.params.rate_bps")
    assert call(api, "PUT", "/coex/v1/ports/0x42/1/aqm",
                {"discipline": "ckcd", "params": {"rate_bps": 1e7}})[0] == 200
    # and the capacity cannot drop below the AQM rate afterwards
    rejected(api, "PUT", "/coex/v1/ports/0x42/1", {"capacity_bps": 5_000_000, "aqm": {
        "discipline": "ckcd", "params": {"rate_bps": 1e7}}}, status=409, field="ports[0].aqm.params.rate_bps")


def test_heavy_hitter_threshold_above_every_port_is_a_409(api):
    rejected(api, "PUT", "/coex/v1/heavy-hitters/config", {"enabled": True, "threshold_bps": 20_000_000},
             status=409, field="heavy_hitters.threshold_bps")
    assert call(api, "PUT", "/coex/v1/heavy-hitters/config", {"threshold_bps": 10_000_000})[0] == 200


def test_mode_detector_with_sflow_rt_is_a_409(api):
    rejected(api, "PUT", "/coex/v1/heavy-hitters/config", {"source": "sflow-rt", "detector": "mode"},
             status=409, field="heavy_hitters.detector")


def test_port_body_may_repeat_the_path_but_not_contradict_it(api):
    port = call(api, "GET", "/coex/v1/ports/66/1")[1]
    assert call(api, "PUT", "/coex/v1/ports/0x42/1", port)[0] == 200  # what GET shows goes back as is
    rejected(api, "PUT", "/coex/v1/ports/0x42/1", {**port, "port": 2}, status=409, field="port")
    rejected(api, "PUT", "/coex/v1/ports/0x42/1", {**port, "dpid": 67}, status=409, field="dpid")
    rejected(api, "PUT", "/coex/v1/rules/one", {"name": "two", "aggregate": "default"}, status=409, field="name")
    rejected(api, "PUT", "/coex/v1/aggregates/one", {"name": "two", "dscp": 10}, status=409, field="name")


@pytest.mark.parametrize("authorization", [
    "Bearer s\u00e9cret", "Bearer \u00ff", "Bearer \u2603", "Bearer s\udcff", "Basic \u00e9", "\u00e9", "Bearer ",
])
def test_non_ascii_bearer_tokens_are_a_401(authorization):
    api = ControllerParts(token="s3cret").api()
    rejected(api, "PUT", "/coex/v1/approaches", {"separate_paths": True},
             headers={"Authorization": authorization}, status=401, field="Authorization")


def test_a_non_ascii_token_matches_the_bytes_the_client_sent():
    api = ControllerParts(token="s\u00e9cret").api()
    # WSGI gives headers as latin-1 text of the raw bytes: the client sent UTF-8.
    sent = "Bearer s\u00e9cret".encode("utf-8").decode("latin-1")
    assert call(api, "PUT", "/coex/v1/approaches", {"separate_paths": True},
                headers={"Authorization": sent})[0] == 200
    rejected(api, "PUT", "/coex/v1/approaches", {"separate_paths": False},
             headers={"Authorization": "Bearer s\u00e9cret"}, status=401)  # latin-1 bytes: not the token
    assert call(api, "PUT", "/coex/v1/approaches", {"separate_paths": False},
                headers={"Authorization": "bearer " + sent[7:]})[0] == 200  # the scheme is case-insensitive


@pytest.mark.parametrize("path,status", [
    ("/coex/v1/health\n", 404), ("/coex/v1/rules/a\n", 404), ("/coex/v1/ports/66/1\n", 400)])
def test_a_path_ending_in_a_newline_is_not_the_route_without_it(api, path, status):
    rejected(api, "GET", path, status=status)


@pytest.mark.parametrize("raw, status, field", [
    (b"{not json", 400, "body"),                                                     # Problem.MALFORMED
    (json.dumps({"heavy_hitters": {"threshold_bps": -1}}).encode(), 422, "heavy_hitters.threshold_bps"),  # INVALID
    (json.dumps({"rules": [{"name": "a", "match": {"ip_proto": 6, "tp_dst": 80}, "aggregate": "low_delay"},
                           {"name": "a", "match": {"ip_proto": 6, "tp_dst": 81}, "aggregate": "low_delay"}]}).encode(),
     409, "rules[1].name"),                                                          # CONFLICT
])
def test_each_kind_of_policy_problem_answers_with_its_own_status(api, raw, status, field):
    """Rule: the core names the kind of problem (coex.policy.Problem), never an HTTP status; the
    REST layer answers MALFORMED with 400, INVALID with 422 and CONFLICT with 409."""
    rejected(api, "PUT", "/coex/v1/policy", raw=raw, status=status, field=field)
