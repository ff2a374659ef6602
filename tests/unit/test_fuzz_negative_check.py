"""The REST fuzz test's rule for negative cases (tests/integration/test_rest_fuzz.py): a body is
held to "refused with a 4xx" only if it really breaks the served schema. Schemathesis 3.x marks a
body negative when it meant to break it; in one CI run it "broke" PUT /policy's
packet_in.limit_pps by setting it to null, which the field's type ["integer", "null"] allows, and
the controller rightly took it."""

import json
import os

from tests.integration.test_rest_fuzz import body_valid_for

DOC = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")))
PUT_POLICY = DOC["paths"]["/coex/v1/policy"]["put"]


def test_the_ci_runs_null_limit_is_valid_and_real_violations_are_not():
    assert body_valid_for(PUT_POLICY, DOC, {"packet_in": {"limit_pps": None, "burst": 7826017}})
    assert not body_valid_for(PUT_POLICY, DOC, {"packet_in": {"limit_pps": 5}})  # below its minimum of 10
    assert not body_valid_for(PUT_POLICY, DOC, {"packet_in": {"burst": 10_000_001}})
    assert not body_valid_for(PUT_POLICY, DOC, {"ports": [{"dpid": 1, "port": 1}]})  # capacity_bps required
    assert not body_valid_for(PUT_POLICY, DOC, {"no_such_key": 1})  # additionalProperties: false


def test_an_operation_without_a_json_body_has_no_valid_body():
    assert not body_valid_for(DOC["paths"]["/coex/v1/policy"]["get"], DOC, {})
