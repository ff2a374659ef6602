"""The OpenAPI 3 document of /coex/v1, built from rest.ROUTES and the schemas below.

The schemas describe what coex.policy accepts (that module is the authority: it also
checks cross-field rules no schema can say, such as conflicting overlaps).
docs/openapi.json is this document, committed; a test keeps the two equal:
    .venv/bin/python -m ryu_app.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
import re

from coex.policy import AQM_DISCIPLINES, MAX_CAPACITY_BPS
from ryu_app.rest import PREFIX, ROUTES

NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,31}$"}
PREFIX_V4 = {"type": "string", "description": "IPv4 address or prefix, e.g. 10.0.0.0/24",
             "example": "10.0.0.1/32"}
L4_PORT = {"type": "integer", "minimum": 0, "maximum": 65535}

SCHEMAS = {
    "Error": {"type": "object", "required": ["error", "field"],
              "properties": {"error": {"type": "string"}, "field": {"type": ["string", "null"]}}},
    "Match": {"type": "object", "additionalProperties": False, "properties": {
        "ipv4_src": PREFIX_V4, "ipv4_dst": PREFIX_V4,
        "ip_proto": {"type": "integer", "minimum": 0, "maximum": 255},
        "tp_src": L4_PORT, "tp_dst": L4_PORT,
        "dscp": {"type": "integer", "minimum": 0, "maximum": 63},
        "eth_src": {"type": "string", "pattern": "^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$"}},
        "description": "Unset fields match anything; tp_src/tp_dst need ip_proto 6 or 17."},
    "Rule": {"type": "object", "additionalProperties": False, "required": ["name", "aggregate", "match"],
             "properties": {"name": NAME, "aggregate": NAME,
                            "priority": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 0},
                            "match": {"$ref": "#/components/schemas/Match"}}},
    "Aggregate": {"type": "object", "additionalProperties": False, "properties": {
        "dscp": {"type": "integer", "minimum": 0, "maximum": 63},
        "queue_weight": {"type": "integer", "minimum": 1, "maximum": 1000},
        "own_path": {"type": "boolean"}}},
    "LimitedQueue": {"type": "object", "additionalProperties": False, "properties": {
        "enabled": {"type": "boolean", "default": False},
        "aggregate": NAME,
        "fraction": {"type": "number", "minimum": 0.01, "maximum": 1.0, "default": 0.5},
        "rate_bps": {"type": ["integer", "null"], "minimum": 8000, "maximum": MAX_CAPACITY_BPS},
        "burst_ms": {"type": ["number", "null"], "minimum": 1, "maximum": 10000}}},
    "Approaches": {"type": "object", "additionalProperties": False, "properties": {
        "separate_paths": {"type": "boolean"}, "separate_queues": {"type": "boolean"},
        "limited_queue": {"$ref": "#/components/schemas/LimitedQueue"}}},
    "Aqm": {"type": "object", "additionalProperties": False, "required": ["discipline"], "properties": {
        "discipline": {"type": "string", "enum": list(AQM_DISCIPLINES)},
        "params": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}}},
    "PortBody": {"type": "object", "additionalProperties": False, "required": ["capacity_bps"], "properties": {
        "capacity_bps": {"type": "integer", "minimum": 8000, "maximum": MAX_CAPACITY_BPS},
        "aqm": {"oneOf": [{"$ref": "#/components/schemas/Aqm"}, {"type": "null"}]}}},
    "HeavyHitters": {"type": "object", "additionalProperties": False, "properties": {
        "enabled": {"type": "boolean"}, "source": {"type": "string", "enum": ["embedded", "sflow-rt"]},
        "collector": {"type": "string", "example": "127.0.0.1:6343"},
        "sflow_rt_url": {"type": "string", "example": "http://127.0.0.1:8008"},
        "sampling": {"type": "integer", "minimum": 1}, "polling_s": {"type": "integer", "minimum": 1},
        "detector": {"type": "string", "enum": ["rate", "mode"]},
        "threshold_bps": {"type": ["integer", "null"], "minimum": 8000},
        "capacity_share": {"type": ["number", "null"], "minimum": 0.001, "maximum": 1},
        "fair_share_multiple": {"type": ["number", "null"], "minimum": 1},
        "window_s": {"type": "number", "minimum": 1},
        "min_window_s": {"type": "number", "minimum": 0.1}, "release_fraction": {"type": "number"},
        "min_hold_s": {"type": "number", "minimum": 0}, "rec_int": {"type": "integer", "minimum": 1},
        "hist_len": {"type": "integer", "minimum": 1}, "stat_int": {"type": "integer", "minimum": 1}},
        "description": "Set exactly one of threshold_bps, capacity_share, fair_share_multiple."},
    "Policy": {"type": "object", "additionalProperties": False, "properties": {
        "rules": {"type": "array", "items": {"$ref": "#/components/schemas/Rule"}},
        "aggregates": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Aggregate"}},
        "approaches": {"$ref": "#/components/schemas/Approaches"},
        "ports": {"type": "array", "items": {"type": "object"}},
        "heavy_hitters": {"$ref": "#/components/schemas/HeavyHitters"}}},
}

REQUEST_BODIES = {"put_policy": "Policy", "create_rule": "Rule", "put_rule": "Rule",
                  "put_aggregate": "Aggregate", "put_approaches": "Approaches",
                  "put_port": "PortBody", "put_aqm": "Aqm", "put_hh_config": "HeavyHitters"}

PATH_PARAMS = {
    "name": {"schema": NAME},
    "dpid": {"schema": {"type": "string", "pattern": "^([1-9][0-9]*|0x[0-9a-fA-F]+)$"},
             "description": "datapath id, decimal or 0x-prefixed hex"},
    "port": {"schema": {"type": "string", "pattern": "^[1-9][0-9]*$"}, "description": "OpenFlow port number"},
}


def build_openapi() -> dict:
    paths: dict = {}
    for method, template, handler, mutating, summary in ROUTES:
        op = {"operationId": handler, "summary": summary, "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}},
            "4XX": {"description": "Rejected; nothing changed",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}}
        if handler in ("create_rule", "put_rule"):
            op["responses"]["201"] = {"description": "Created",
                                      "content": {"application/json": {"schema": {"type": "object"}}}}
        params = re.findall(r"\{(\w+)\}", template)
        if params:
            op["parameters"] = [{"name": p, "in": "path", "required": True, **PATH_PARAMS[p]} for p in params]
        if handler in REQUEST_BODIES:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{REQUEST_BODIES[handler]}"}}}}
        if mutating:
            op["security"] = [{"bearer": []}, {}]
        paths.setdefault(PREFIX + template, {})[method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "ckcd-coex policy API", "version": "1",
                 "description": "CoEx aggregates, rules, approaches and bottleneck ports. "
                                "Errors are JSON {error, field} with a 4xx code; a rejected "
                                "request changes nothing. See docs/rest.md."},
        "servers": [{"url": "http://127.0.0.1:8080"}],
        "paths": paths,
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


if __name__ == "__main__":
    print(json.dumps(build_openapi(), indent=1, sort_keys=True))
