"""Fuzz the /coex/v1 REST API of the real ryu-manager from its own OpenAPI document.

Schemathesis reads the document the controller serves (/coex/v1/openapi.json, kept equal to
docs/openapi.json by test_rest.py) and generates requests for every operation in it: bodies,
path parameters and headers that the schema allows (positive) and that it forbids
(negative). On top of that each request may have its path parameters pointed at the real
switch and port, its Authorization header varied (right, missing, wrong, non-ASCII), its
method swapped for one the route does not take, its path moved under an unknown one, or its
body replaced by broken bytes (truncated, not UTF-8, nested 100,000 deep, over 1 MiB).

For every request: no 5xx; the answer conforms to the schema (status, JSON, body schema);
every 4xx is JSON {error, field}; schema-invalid input is refused; schema-valid input is never
refused as malformed or invalid (400, 422: the document says all those checks); and after every 4xx both
GET /coex/v1/policy and GET /coex/v1/state are what they were before the request.

Derandomized (the same requests every run) and sized to finish in about a minute.
"""

from __future__ import annotations

import re

import jsonschema
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis import DataGenerationMethod
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    has_only_additional_properties_in_non_body_parameters,
    response_schema_conformance,
    status_code_conformance,
)

from coex.policy import MAX_JSON_DEPTH, parse_uint
from ryu_app.rest import MAX_BODY_BYTES, PLAIN_ROUTES, PREFIX, ROUTES
from tests.integration.labkit import controller_with_bridge

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

schemathesis.experimental.OPEN_API_3_1.enable()  # our document is OpenAPI 3.1 (3.x of schemathesis: opt-in)

OF_PORT, REST_PORT = 16673, 18095
DPID, BRIDGE = 0x43, "rf0"
TOKEN = "fuzz-t0ken"
EXAMPLES_PER_OPERATION = {"positive": 25, "negative": 16}
BUILTIN = ["default", "low_delay", "queue_filling", "penalized"]
BASE = f"http://127.0.0.1:{REST_PORT}"


def body_is_valid(case) -> bool:
    """The body as sent, checked against the operation's schema in the served document (JSON
    Schema 2020-12, as OpenAPI 3.1 says). Schemathesis 3.x marks a body negative when it meant to
    break it, but its mutations do not always manage: a "wrong type" null for a field whose type is
    ["integer", "null"] is valid (a CI run's PUT /policy with packet_in.limit_pps = null)."""
    return body_valid_for(case.operation.definition.raw, case.operation.schema.raw_schema, case.body)


def body_valid_for(operation: dict, document: dict, body) -> bool:
    """Does `body` validate against the JSON body schema of `operation` (its definition in the
    OpenAPI `document`, whose components its $refs name)?"""
    content = operation.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if schema is None:
        return False
    root = dict(schema, components=document.get("components", {}))
    return jsonschema.Draft202012Validator(root).is_valid(body)


def invalid_input_is_refused(ctx, response, case):
    """Schemathesis' negative_data_rejection with our codes: any 4xx (409 and 413 too), for input
    that really is invalid: a case whose only negated part is a body that validates is not."""
    method = case.data_generation_method
    if method is None or not method.is_negative or has_only_additional_properties_in_non_body_parameters(case):
        return
    meta = case.meta
    # Headers, query and cookies with no parameter declared can only be negated by extra ones,
    # which are ignored, as has_only_additional_properties_in_non_body_parameters says.
    others = [meta.path_parameters] + [getattr(meta, where) for where in ("query", "headers", "cookies")
                                       if len(getattr(case.operation, where))] if meta is not None else []
    only_body = meta is not None and meta.body is not None and meta.body.is_negative and not any(
        part is not None and part.is_negative for part in others)
    if only_body and body_is_valid(case):
        return
    assert 400 <= response.status_code < 500, \
        f"schema-invalid input accepted with {response.status_code}: {response.text[:300]}"


def valid_input_is_not_called_invalid(ctx, response, case):
    """The document is the validator's promise: a request it allows (a positive case, sent as
    generated) is never refused as malformed (400) or invalid (422). It may still be refused for
    what a schema cannot say: a name that does not exist (404), a conflict with the rest of the
    policy or with the path (409), a switch or port not there (404, 409)."""
    method = case.data_generation_method
    if method is None or not method.is_positive:
        return
    assert response.status_code not in (400, 422), \
        f"schema-valid input refused with {response.status_code}: {response.text[:300]}"


CHECKS = (not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          invalid_input_is_refused, valid_input_is_not_called_invalid)
METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH")
ALLOWED = {}  # path template -> methods
for _method, _template, *_ in ROUTES:
    ALLOWED.setdefault(PREFIX + _template, set()).add(_method)
for _method, _template, *_ in PLAIN_ROUTES:  # /metrics and the dashboard: full paths
    ALLOWED.setdefault(_template, set()).add(_method)

# Where the controller listens or sends (sFlow collector, sFlow-RT) is kept on loopback: a valid
# generated host is swapped for 127.0.0.1, which the schema takes as well, so validity holds.
HOST_PORT = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?(:[0-9]{1,5})")
URL = re.compile(r"(https?://)[A-Za-z0-9.-]+((:[0-9]{1,5})?/?)")
BROKEN_BODIES = [
    b'{"rules": [{"name": "a", "aggregate": "default", "match": {}',  # truncated
    b'\xff\xfe{"separate_paths": true}',  # not UTF-8
    b"[" * 100_000 + b"]" * 100_000,  # a RecursionError once
    b'{"a": ' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1),
    b" " * MAX_BODY_BYTES + b"{}",  # over the limit
    b"NaN", b"null", b'"text"', b"[]",
]


@pytest.fixture(scope="module")
def fuzz_api(private_ovs, tmp_path_factory):
    """The real controller (with a token) and a bridge (dpid 0x43, ports 1 and 2)."""
    with controller_with_bridge(private_ovs, tmp_path_factory.mktemp("rest-fuzz"), OF_PORT, REST_PORT,
                                BRIDGE, DPID, token=TOKEN):
        with requests.Session() as session:
            yield session


@pytest.fixture(scope="module")
def served_schema(fuzz_api):
    return schemathesis.from_uri(f"{BASE}{PREFIX}/openapi.json", base_url=BASE)


schema = schemathesis.from_pytest_fixture("served_schema")


def loopback(hh):
    if not isinstance(hh, dict):
        return
    collector, url = hh.get("collector"), hh.get("sflow_rt_url")
    if isinstance(collector, str) and (m := HOST_PORT.fullmatch(collector)):
        hh["collector"] = "127.0.0.1" + m.group(2)
    if isinstance(url, str) and (m := URL.fullmatch(url)):
        hh["sflow_rt_url"] = m.group(1) + "127.0.0.1" + m.group(2)


def coherent(case, data):
    """Nudge a schema-valid body towards one the policy takes: the names, dpid and port the
    path gives, and aggregates that exist (the schema cannot say either). Stays schema-valid."""
    body, params = case.body, case.path_parameters or {}
    if not isinstance(body, dict) or not data.draw(st.sampled_from([True, True, True, False]), "coherent"):
        return
    if "name" in body and "name" in params:
        body["name"] = params["name"]
    for key in ("dpid", "port"):
        if key in body and key in params:
            body[key] = parse_uint(params[key], hex_ok=True) or body[key]
    rules = body.get("rules", []) if case.operation.path == f"{PREFIX}/policy" else [body]
    for rule in rules:
        if isinstance(rule, dict) and "aggregate" in rule:
            rule["aggregate"] = data.draw(st.sampled_from(BUILTIN), "aggregate")


def snapshot(session) -> tuple:
    got = []
    for path in ("/policy", "/state"):
        res = session.get(f"{BASE}{PREFIX}{path}", timeout=30)
        assert res.status_code == 200, res.text
        got.append(res.json())
    return tuple(got)


FUZZ = settings(derandomize=True, database=None, deadline=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck))


@schema.parametrize(data_generation_methods=[DataGenerationMethod.positive])
@schema.given(data=st.data())
@settings(FUZZ, max_examples=EXAMPLES_PER_OPERATION["positive"])
def test_fuzz_valid_requests(fuzz_api, case, data):
    """Requests the schema allows (and their variations): no 5xx; a 4xx changes nothing."""
    coherent(case, data)
    exercise(fuzz_api, case, data)


def has_input(ctx) -> bool:
    """Operations with a body or path parameters: the others have nothing to make invalid."""
    return "{" in ctx.operation.path or "requestBody" in ctx.operation.definition.raw


@schema.include(has_input).parametrize(data_generation_methods=[DataGenerationMethod.negative])
@schema.given(data=st.data())
@settings(FUZZ, max_examples=EXAMPLES_PER_OPERATION["negative"])
def test_fuzz_invalid_requests(fuzz_api, case, data):
    """Requests the schema forbids: refused with a JSON 4xx that changes nothing."""
    exercise(fuzz_api, case, data)


def exercise(session, case, data):
    params = case.path_parameters or {}
    if case.data_generation_method.is_positive:
        # Path parameters: often the real switch and its ports, else what the schema generated.
        # (Not in negative cases: the generated value may be the invalid part.)
        if "dpid" in params:
            params["dpid"] = data.draw(st.sampled_from([params["dpid"], str(DPID), hex(DPID)]), "dpid")
        if "port" in params:
            params["port"] = data.draw(st.sampled_from([params["port"], "1", "2"]), "port")
    if case.operation.path == f"{PREFIX}/heavy-hitters/config":
        loopback(case.body)
    elif case.operation.path == f"{PREFIX}/policy" and isinstance(case.body, dict):
        loopback(case.body.get("heavy_hitters"))

    kwargs = case.as_transport_kwargs(base_url=BASE)
    auth = _authorize(data, kwargs)
    mangle, expect = _mangle(data, case, kwargs)

    if case.operation.path.endswith("/aqm") and params.get("port") in ("1", "2"):
        # an AQM needs a bottleneck port: declare it (if it is not) so the body gets validated
        port_url = f"{BASE}{PREFIX}/ports/{params['dpid']}/{params['port']}"
        if session.get(port_url, timeout=30).status_code == 404:
            session.put(port_url, json={"capacity_bps": 100_000_000}, timeout=60,
                        headers={"Authorization": f"Bearer {TOKEN}"})
    before = snapshot(session)
    response = session.request(**kwargs, timeout=60)
    assert response.status_code < 500, (kwargs, response.text)
    if response.status_code >= 400 or expect is not None:
        assert response.headers.get("Content-Type", "").startswith("application/json"), response.text
        reply = response.json()
        assert set(reply) == {"error", "field"} and isinstance(reply["error"], str) and reply["error"], reply
        assert expect is None or response.status_code in expect, (kwargs, response.status_code, reply)
        assert snapshot(session) == before, ("a rejected request changed something", kwargs, reply)
        if response.status_code == 405:
            assert set(response.headers["Allow"].split(", ")) == ALLOWED[case.operation.path]
    if mangle == "none" or (mangle == "body" and expect is None):
        if auth in (f"Bearer {TOKEN}", f"bearer {TOKEN}") or not case.operation.definition.raw.get("security"):
            case.validate_response(response, checks=CHECKS)
        else:  # a changing call without the token: refused before its body is looked at (unless a
            # generated path parameter holds a '/' and the path is another route's or none)
            assert response.status_code == 401 or case.data_generation_method.is_negative, (kwargs, response.text)


def _authorize(data, kwargs) -> str | None:
    """The Authorization header drawn for the request: mostly the token, sometimes a wrong one or none."""
    headers = kwargs.setdefault("headers", {})
    auth = data.draw(st.sampled_from([f"Bearer {TOKEN}"] * 15 + [
        None, "Bearer guess", f"bearer {TOKEN}", f"Basic {TOKEN}", "Bearer s\u00e9cret", "Bearer \u00ff"]), "auth")
    headers.pop("Authorization", None)
    if auth is not None:
        headers["Authorization"] = auth.encode("latin-1")  # the bytes as they are (requests takes bytes)
    return auth


def _mangle(data, case, kwargs) -> tuple[str, object]:
    """Sometimes a broken body, a method or a path no route has: what was done, and the statuses
    that must answer it (None: the schema's)."""
    mangle = data.draw(st.sampled_from(["none"] * 12 + ["body", "method", "path"]), "mangle")
    expect = None
    if mangle == "body" and case.method in ("PUT", "POST"):
        kwargs.pop("json", None)
        kwargs["data"] = data.draw(st.sampled_from(BROKEN_BODIES), "broken body")
        expect = range(400, 500)
    elif mangle == "method":
        others = sorted(set(METHODS) - ALLOWED[case.operation.path])
        kwargs["method"] = data.draw(st.sampled_from(others), "other method")
        expect = [405]
    elif mangle == "path":
        if PREFIX + "/" in kwargs["url"]:
            kwargs["url"] = kwargs["url"].replace(PREFIX + "/", PREFIX + "/no-such/", 1)  # no route starts so
        else:  # /metrics
            kwargs["url"] = kwargs["url"].replace(BASE + "/", BASE + "/no-such/", 1)
        expect = [404]
    return mangle, expect
