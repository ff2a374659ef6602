"""docs/openapi.json says what coex.policy takes: documents the validator accepts conform to
the schemas, and the ones the schemas forbid the validator refuses too (the REST fuzz test
generates requests from these schemas, so a loose schema means aimless fuzzing)."""

from __future__ import annotations

import copy
import json
import os

import pytest
from jsonschema import Draft202012Validator

from coex.policy import Policy, PolicyError
from ryu_app.openapi import build_openapi

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")
OPENAPI = build_openapi()

FULL = {
    "rules": [{"name": "bulk", "aggregate": "queue_filling", "priority": 3,
               "match": {"ipv4_src": "10.0.0.0/255.255.255.0", "ip_proto": 6, "tp_dst": 5201, "dscp": None}}],
    "aggregates": {"video": {"dscp": 34, "queue_weight": 2, "own_path": False}},
    "approaches": {"separate_queues": True, "limited_queue": {"enabled": True, "rate_bps": 20_000_000}},
    "ports": [{"dpid": 1, "port": 3, "capacity_bps": 100_000_000,
               "aqm": {"discipline": "ckcd", "params": {"limit": 80, "rate_bps": 1e8}}}],
    "heavy_hitters": {"enabled": True, "collector": "localhost:6343", "threshold_bps": 30_000_000,
                      "capacity_share": None},
}


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": OPENAPI["components"]})


def test_the_committed_document_is_the_built_one():
    with open(DOC) as f:
        assert json.load(f) == json.loads(json.dumps(OPENAPI)), \
            "docs/openapi.json is stale: .venv/bin/python -m ryu_app.openapi > docs/openapi.json"


def test_what_the_api_shows_conforms():
    policy = Policy.from_dict(FULL).to_dict()
    validator("Policy").validate(policy)
    validator("Policy").validate(Policy().to_dict())
    validator("PortBody").validate(policy["ports"][0])  # GET /ports/{dpid}/{port} can be PUT back
    validator("AggregateBody").validate({"name": "video", **policy["aggregates"]["video"]})
    validator("RuleBody").validate(policy["rules"][0])
    validator("HeavyHitters").validate(policy["heavy_hitters"])


def _with(path: str, value):
    doc = copy.deepcopy(FULL)
    *keys, last = path.split(".")
    target = doc
    for key in keys:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return doc


@pytest.mark.parametrize("path,value", [
    ("rules.0.match.tp_src", 80),           # with ip_proto 6: fine, see below
    ("rules.0.match.ip_proto", 1),          # tp_dst needs TCP or UDP
    ("rules.0.match.ipv4_src", "10.0.0.256"),
    ("rules.0.match.eth_src", "00:00:00:00:01"),
    ("rules.0.colour", "red"),
    ("rules.0.priority", 1001),
    ("aggregates.Video", {}),
    ("aggregates.video.queue_weight", 0),
    ("approaches.limited_queue.fraction", 0),
    ("ports.0.port", 0xFFFFFF01),
    ("ports.0.capacity_bps", KeyError),
    ("ports.0.aqm.params.Limit", 1),
    ("ports.0.aqm.params.limit", -1),
    ("ports.0.aqm.discipline", "nosuch"),
    ("heavy_hitters.collector", "localhost:\u00b2"),
    ("heavy_hitters.sflow_rt_url", "ftp://x"),
    ("heavy_hitters.sampling", 1 << 21),
    ("heavy_hitters.window_s", 601),
    ("heavy_hitters.release_fraction", 0.01),
    ("heavy_hitters.detector", "max"),
])
def test_what_the_schema_forbids_the_validator_refuses(path, value):
    doc = _with(path, value)
    if path == "rules.0.match.tp_src":  # the control: still valid for both
        validator("Policy").validate(doc)
        Policy.from_dict(doc)
        return
    assert not validator("Policy").is_valid(doc), path
    with pytest.raises(PolicyError):
        Policy.from_dict(doc)


# --- each field's schema is generated from the definition the validator checks with ----------

def _probes(field) -> list:
    """Values at and just beyond the field's edges, and of the wrong type."""
    from coex import policy as p
    if isinstance(field, p.IntField):
        return [field.lo, field.hi, field.lo - 1, field.hi + 1, None, True, "1"]
    if isinstance(field, p.NumField):
        return [field.lo, field.hi, field.lo - 1e-3, field.hi + 1e-3, None, True, "1"]
    if isinstance(field, p.BoolField):
        return [True, False, 1, None, "true"]
    if isinstance(field, p.ChoiceField):
        return [*field.choices, "other", None]
    if isinstance(field, p.NameField):
        return ["bulk", "b-2_x", "Bulk", "2bulk", "a" * 32, "a" * 33, "", None]
    if isinstance(field, p.TextField):
        return [field.example, "", "a b", "x:0", "x:65536", "x:6343", None, 5]
    if isinstance(field, p.PrefixField):
        return ["10.0.0.0/24", "10.0.0.1", "10.0.0.0/255.255.255.0", "10.0.0.256", "10.0.0.0/33", None, 5]
    if isinstance(field, p.MacField):
        return ["00:00:00:00:00:01", "00:00:00:00:01", "0:0:0:0:0:1", None]
    if isinstance(field, p.OvsdbRemoteField):
        return ["tcp:192.0.2.10:6640", "ssl:sw1:6640", "unix:/run/db.sock", "tcp:h:0", "tcp:h:70000",
                "udp:h:6640", "", None]
    return []  # parts and lists: their own schemas are checked through whole documents above


def _leaf_fields():
    from coex.policy import PARTS
    return [(part.__name__, name, field) for part in PARTS for name, field in getattr(part, "FIELDS", {}).items()
            if _probes(field)]


@pytest.mark.parametrize("part,name,field", _leaf_fields(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_field_schema_takes_exactly_what_its_check_takes(part, name, field):
    """Rule: the OpenAPI schema of a policy field is generated from the same definition
    coex.policy validates with, so at its edges both accept and refuse the same values."""
    schema = Draft202012Validator({"$ref": f"#/components/schemas/{part}/properties/{name}",
                                   "components": OPENAPI["components"]})
    for value in _probes(field):
        try:
            field.check(value, name)
            accepted = True
        except PolicyError:
            accepted = False
        if value is None and field.default is not None and not accepted:
            continue  # null where a default exists: the validator refuses, JSON has no "left out" value
        assert schema.is_valid(value) == accepted, (part, name, value, accepted)
