"""The OpenAPI 3 document of /coex/v1, built from rest.ROUTES and coex.policy's own field
definitions.

Every schema of the policy document is generated from the field definitions coex.policy
validates with (coex.policy.part_schema; the discipline parameters from the core's table,
coex.disciplines), so the schema and the validator cannot drift apart. The schemas cannot
say every cross-field rule (conflicting overlaps, a rate above a port's capacity); those
only the validator checks, with a 4xx naming the field.
docs/openapi.json is this document, committed; a test keeps the two equal:
    .venv/bin/python -m ryu_app.openapi > docs/openapi.json
"""

from __future__ import annotations

import dataclasses
import json
import re

from coex.policy import OFPP_MAX, PARTS, Aggregate, NameField, Port, Rule, SwitchHost, object_schema, part_schema
from ryu_app.rest import DPID_PATH, PLAIN_ROUTES, PORT_PATH, PREFIX, ROUTES, UI_FILES

NAME = NameField().schema()
VERSION = {"type": "integer", "minimum": 0}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _body(part: type, path_keys: tuple[str, ...], description: str, **extra) -> dict:
    """What a PUT to a part's own path takes: the part's fields, those the path gives
    (path_keys, and `extra`) optional."""
    fields = {**extra, **{k: dataclasses.replace(f, default=None) if k in path_keys else f
                          for k, f in part.FIELDS.items()}}
    return object_schema(fields, description=description)


SCHEMAS = {
    "Error": {"type": "object", "additionalProperties": False, "required": ["error", "field"],
              "properties": {"error": {"type": "string", "minLength": 1},
                             "field": {"type": ["string", "null"]}}},
    **{part.__name__: part_schema(part) for part in PARTS},
    "RuleBody": _body(Rule, ("name",), "A rule for PUT /rules/{name}: name may be left out; if given it is "
                                      "the name in the path."),
    "AggregateBody": _body(Aggregate, (), "An aggregate for PUT /aggregates/{name} (GET shows it with its "
                                          "name): name may be left out; if given it is the name in the path.",
                           name=NameField(default=None)),
    "PortBody": _body(Port, ("dpid", "port"), "A port for PUT /ports/{dpid}/{port} (GET shows it with dpid and "
                                              "port): dpid and port may be left out; if given they are the path's."),
    "SwitchHostBody": _body(SwitchHost, ("dpid",), "A switch host for PUT /switches/{dpid}: dpid may be left out; "
                                                   "if given it is the path's."),
    "Change": {"type": "object", "additionalProperties": False, "required": ["version", "at", "summary"],
               "properties": {"version": VERSION, "at": {"type": "number"}, "summary": {"type": "string"}}},
}

REQUEST_BODIES = {"put_policy": "Policy", "create_rule": "Rule", "put_rule": "RuleBody",
                  "put_aggregate": "AggregateBody", "put_approaches": "Approaches",
                  "put_port": "PortBody", "put_aqm": "Aqm", "put_hh_config": "HeavyHitters",
                  "put_switch": "SwitchHostBody", "put_packet_in": "PacketIn"}


def _answer(**properties) -> dict:
    return {"type": "object", "required": list(properties), "properties": properties}


_CHANGED = _answer(version=VERSION)
RESPONSES = {  # handler -> schema of its 2xx answer
    "health": _answer(status={"const": "ok"}, policy_version=VERSION,
                      switches_connected={"type": "integer", "minimum": 0}, uptime_s={"type": "number"},
                      role={"enum": ["leader", "standby"]}, term={"type": ["integer", "null"], "minimum": 1},
                      switches_master={"type": "integer", "minimum": 0}),
    "openapi": {"type": "object", "required": ["openapi", "paths"]},
    "get_policy": _answer(version=VERSION, policy=_ref("Policy")),
    "put_policy": _answer(version=VERSION, policy=_ref("Policy")),
    "list_rules": _answer(rules={"type": "array", "items": _ref("Rule")}),
    "create_rule": _answer(version=VERSION, rule=_ref("Rule")),
    "get_rule": _ref("Rule"),
    "put_rule": _answer(version=VERSION, rule=_ref("Rule")),
    "delete_rule": _CHANGED,
    "list_aggregates": _answer(aggregates={"type": "object", "additionalProperties": _ref("Aggregate")}),
    "get_aggregate": _ref("AggregateBody"),
    "put_aggregate": _answer(version=VERSION, aggregate=_ref("AggregateBody")),
    "delete_aggregate": _CHANGED,
    "get_approaches": _ref("Approaches"),
    "put_approaches": _answer(version=VERSION, approaches=_ref("Approaches")),
    "get_packet_in": _ref("PacketIn"),
    "put_packet_in": _answer(version=VERSION, packet_in=_ref("PacketIn")),
    "list_ports": _answer(ports={"type": "array", "items": _ref("Port")}),
    "get_port": _ref("Port"),
    "put_port": _answer(version=VERSION, port=_ref("Port")),
    "delete_port": _CHANGED,
    "put_aqm": _answer(version=VERSION, port=_ref("Port")),
    "delete_aqm": _CHANGED,
    "get_heavy_hitters": _answer(enabled={"type": "boolean"}, acting={"type": "boolean"}, ports={"type": "array"},
                                 waiting={"type": "array", "items": _answer(
                                     dpid={"type": "integer"}, port={"type": "integer"},
                                     **{"for": {"type": "string", "example": "switch 0x1 to connect"}})},
                                 current={"type": "array"}, detected={"type": "array"}, log={"type": "array"}),
    "get_hh_config": _ref("HeavyHitters"),
    "put_hh_config": _answer(version=VERSION, heavy_hitters=_ref("HeavyHitters")),
    "list_switches": _answer(switches={"type": "array", "items": _ref("SwitchHost")}),
    "get_switch": _ref("SwitchHost"),
    "put_switch": _answer(version=VERSION, switch=_ref("SwitchHost")),
    "delete_switch": _CHANGED,
    "get_state": _answer(policy_version=VERSION, switches={"type": "array"}, ports={"type": "array"}),
    "get_changes": _answer(changes={"type": "array", "items": _ref("Change")}),
}

PATH_PARAMS = {
    "name": {"schema": NAME},
    "dpid": {"schema": {"type": "string", "pattern": f"^({DPID_PATH.pattern})$"},
             "description": "datapath id (1 to 2^64-1), decimal or 0x-prefixed hex"},
    "port": {"schema": {"type": "string", "pattern": f"^({PORT_PATH.pattern})$"},
             "description": f"OpenFlow port number (1 to {OFPP_MAX})"},
}


PLAIN_TYPES = {"metrics": ["text/plain"], "ui": ["text/html"], "ui_asset": ["text/html", "text/javascript", "text/css"]}


def build_openapi() -> dict:
    paths: dict = {}
    for method, template, handler, mutating, summary in ROUTES:
        answer = {"application/json": {"schema": RESPONSES[handler]}}
        op = {"operationId": handler, "summary": summary, "responses": {
            "4XX": {"description": "Rejected; nothing changed",
                    "content": {"application/json": {"schema": _ref("Error")}}}}}
        if handler != "create_rule":
            op["responses"]["200"] = {"description": "OK", "content": answer}
        if handler in ("create_rule", "put_rule"):
            op["responses"]["201"] = {"description": "Created", "content": answer}
        params = re.findall(r"\{(\w+)\}", template)
        if params:
            op["parameters"] = [{"name": p, "in": "path", "required": True, **PATH_PARAMS[p]} for p in params]
        if handler in REQUEST_BODIES:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{REQUEST_BODIES[handler]}"}}}}
        if mutating:
            op["security"] = [{"bearer": []}, {}]
            op["responses"]["502"] = {
                "description": "Stored and in force, but a switch refused part of it or did not confirm it in time "
                               "(field 'switch'; the message names the switch and what it refused)",
                "content": {"application/json": {"schema": _ref("Error")}}}
        paths.setdefault(PREFIX + template, {})[method.lower()] = op
    for method, template, handler, summary in PLAIN_ROUTES:
        op = {"operationId": handler, "summary": summary, "responses": {
            "200": {"description": "OK", "content": {t: {"schema": {"type": "string"}} for t in PLAIN_TYPES[handler]}},
            "4XX": {"description": "Rejected", "content": {"application/json": {"schema": _ref("Error")}}}}}
        if "{asset}" in template:
            op["parameters"] = [{"name": "asset", "in": "path", "required": True,
                                 "schema": {"type": "string", "enum": sorted(UI_FILES)}}]
        paths.setdefault(template, {})[method.lower()] = op
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
