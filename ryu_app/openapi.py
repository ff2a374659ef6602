"""The OpenAPI 3 document of /coex/v1, built from rest.ROUTES and the schemas below.

The schemas describe what coex.policy accepts (that module is the authority: it also
checks cross-field rules no schema can say, such as conflicting overlaps).
docs/openapi.json is this document, committed; a test keeps the two equal:
    .venv/bin/python -m ryu_app.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
import re

from coex.disciplines import DISCIPLINES
from coex.policy import AQM_DISCIPLINES, MAX_CAPACITY_BPS, MAX_RULES, OFPP_MAX
from ryu_app.rest import PLAIN_ROUTES, PREFIX, ROUTES, UI_FILES

# Patterns are ECMA-262 regular expressions (OpenAPI 3.1): [0-9], not \d, which Python
# would also let match non-ASCII digits.
NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,31}$"}
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED = _OCTET + "(\\." + _OCTET + "){3}"
PREFIX_V4 = {"type": ["string", "null"], "description": "IPv4 address or prefix, e.g. 10.0.0.0/24 (or with a "
             "netmask, 10.0.0.0/255.255.255.0)", "pattern": f"^{_DOTTED}(/((3[0-2]|[12]?[0-9])|{_DOTTED}))?$",
             "example": "10.0.0.1/32"}
L4_PORT = {"type": "integer", "minimum": 0, "maximum": 65535}
DSCP = {"type": "integer", "minimum": 0, "maximum": 63}
DPID = {"type": "integer", "minimum": 1, "maximum": 2**64 - 1}
OF_PORT = {"type": "integer", "minimum": 1, "maximum": OFPP_MAX}
CAPACITY = {"type": "integer", "minimum": 8000, "maximum": MAX_CAPACITY_BPS}
VERSION = {"type": "integer", "minimum": 0}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict) -> dict:
    return {**schema, "type": [schema["type"], "null"]}


def _obj(properties: dict, required=(), **more) -> dict:
    """A JSON object that takes no other fields, as coex.policy refuses unknown ones."""
    return {"type": "object", "additionalProperties": False, "properties": properties,
            **({"required": list(required)} if required else {}), **more}


# Two IPv4 or two IPv6 addresses (coex.disciplines.host_pair_problem checks them as addresses).
HOST_PAIR = "^([0-9.]{7,15}>[0-9.]{7,15}|[0-9A-Fa-f:]{2,39}>[0-9A-Fa-f:]{2,39})$"


def _aqm_param(p) -> dict:
    """One parameter as the core's table defines it (coex.disciplines)."""
    if p.kind == "text":
        return {"type": "string", "pattern": "^[A-Za-z0-9_.,:+-]{1,128}$", "description": p.unit,
                "default": p.default}
    desc = p.unit + (f", at most {p.decimals} decimals" if p.decimals else ", an integer")
    if p.name == "rate_bps":
        desc += "; at most the port's capacity_bps, which it defaults to"
    number = {"type": "number", "minimum": p.min, "maximum": p.max, "default": p.default, "description": desc}
    if p.unit == "key":  # or a host pair by address, which ckcd-link resolves (docs/hdcodel.md)
        return {"oneOf": [number, {"type": "string", "pattern": HOST_PAIR,
                                   "description": "a host pair, sender>receiver: 10.0.0.1>10.0.0.3"}]}
    return number


def _aqm() -> dict:
    """One alternative per discipline a port may run, each with exactly its parameters."""
    return {"oneOf": [_obj({"discipline": {"const": name},
                            "params": _obj({k: _aqm_param(p) for k, p in DISCIPLINES[name].params.items()})},
                           required=("discipline",), title=name)
                      for name in AQM_DISCIPLINES],
            "description": "A queue discipline of datapath/core and its parameters (docs/datapath-core.md); "
                           "relations between parameters are checked by the core itself (422 naming the "
                           "parameter)."}


RULE_FIELDS = {"name": NAME, "aggregate": NAME,
               "priority": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 0},
               "match": _ref("Match")}
AGGREGATE_FIELDS = {"dscp": DSCP, "queue_weight": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "own_path": {"type": "boolean"}}
PORT_FIELDS = {"dpid": DPID, "port": OF_PORT, "capacity_bps": CAPACITY,
               "aqm": {"oneOf": [_ref("Aqm"), {"type": "null"}]}}

SWITCH_FIELDS = {
    "dpid": DPID,
    "ovsdb": {"type": "string", "example": "tcp:192.0.2.10:6640",
              "pattern": "^(unix:/[^\\s,]{1,255}|(tcp|ssl):[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?:[0-9]{1,5})$",
              "description": "the switch host's OVSDB remote, as ovs-vsctl --db takes it; port 1-65535"},
    "collector": {"type": ["string", "null"], "example": "192.0.2.1:6343",
                  "pattern": "^[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?:[0-9]{1,5}$",
                  "description": "the sFlow collector as this switch host reaches it (null: the policy's)"}}

SCHEMAS = {
    "Error": {"type": "object", "additionalProperties": False, "required": ["error", "field"],
              "properties": {"error": {"type": "string", "minLength": 1},
                             "field": {"type": ["string", "null"]}}},
    "Match": _obj({
        "ipv4_src": PREFIX_V4, "ipv4_dst": PREFIX_V4,
        "ip_proto": _nullable({"type": "integer", "minimum": 0, "maximum": 255}),
        "tp_src": _nullable(L4_PORT), "tp_dst": _nullable(L4_PORT), "dscp": _nullable(DSCP),
        "eth_src": {"type": ["string", "null"], "pattern": "^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$"}},
        description="Unset (or null) fields match anything; tp_src/tp_dst need ip_proto 6 or 17.",
        # tp_src or tp_dst set -> ip_proto is 6 or 17
        **{"if": {"anyOf": [{"required": [k], "properties": {k: {"type": "integer"}}} for k in ("tp_src", "tp_dst")]},
           "then": {"required": ["ip_proto"], "properties": {"ip_proto": {"enum": [6, 17]}}}}),
    "Rule": _obj(RULE_FIELDS, required=("name", "aggregate", "match")),
    "RuleBody": _obj(RULE_FIELDS, required=("aggregate", "match"),
                     description="A rule for PUT /rules/{name}: name may be left out; if given it is "
                                 "the name in the path."),
    "Aggregate": _obj(AGGREGATE_FIELDS),
    "AggregateBody": _obj({"name": NAME, **AGGREGATE_FIELDS},
                          description="An aggregate for PUT /aggregates/{name} (GET shows it with its "
                                      "name): name may be left out; if given it is the name in the path."),
    "LimitedQueue": _obj({
        "enabled": {"type": "boolean", "default": False},
        "aggregate": NAME,
        "fraction": {"type": "number", "minimum": 0.01, "maximum": 1.0, "default": 0.5},
        "rate_bps": _nullable({"type": "integer", "minimum": 8000, "maximum": MAX_CAPACITY_BPS,
                               "description": "at most the capacity of every bottleneck port"}),
        "burst_ms": _nullable({"type": "number", "minimum": 1, "maximum": 10000}),
        "rtt_ms": {"type": "number", "minimum": 0.01, "maximum": 5000}}),
    "Approaches": _obj({"separate_paths": {"type": "boolean"}, "separate_queues": {"type": "boolean"},
                        "limited_queue": _ref("LimitedQueue")}),
    "PacketIn": _obj({
        "limit_pps": _nullable({"type": "integer", "minimum": 10, "maximum": 10_000_000,
                                "description": "packets/s each switch may send the controller; null: no limit"}),
        "burst": {"type": "integer", "minimum": 1, "maximum": 10_000_000}}),
    "Aqm": _aqm(),
    "Port": _obj(PORT_FIELDS, required=("dpid", "port", "capacity_bps")),
    "PortBody": _obj(PORT_FIELDS, required=("capacity_bps",),
                     description="A port for PUT /ports/{dpid}/{port} (GET shows it with dpid and "
                                 "port): dpid and port may be left out; if given they are the path's."),
    "HeavyHitters": _obj({
        "enabled": {"type": "boolean"}, "source": {"type": "string", "enum": ["embedded", "sflow-rt"]},
        "collector": {"type": "string", "example": "127.0.0.1:6343",
                      "pattern": "^[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?:[0-9]{1,5}$",
                      "description": "host:port, port 1-65535"},
        "sflow_rt_url": {"type": "string", "example": "http://127.0.0.1:8008",
                         "pattern": "^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$"},
        "sampling": _nullable({"type": "integer", "minimum": 1, "maximum": 1 << 20,
                               "description": "1-in-N; null: chosen per bridge from capacity and threshold (docs/sflow.md)"}),
        "polling_s": {"type": "integer", "minimum": 1, "maximum": 3600},
        "detector": {"type": "string", "enum": ["rate", "mode"],
                     "description": "'mode' needs source 'embedded'"},
        "threshold_bps": _nullable({"type": "integer", "minimum": 8000, "maximum": MAX_CAPACITY_BPS,
                                    "description": "at most the largest bottleneck port's capacity"}),
        "capacity_share": _nullable({"type": "number", "minimum": 0.001, "maximum": 1}),
        "fair_share_multiple": _nullable({"type": "number", "minimum": 1, "maximum": 1000}),
        "window_s": {"type": "number", "minimum": 1, "maximum": 600},
        "min_window_s": {"type": "number", "minimum": 0.1, "maximum": 600,
                         "description": "at most window_s"},
        "release_fraction": {"type": "number", "minimum": 0.05, "maximum": 1},
        "min_hold_s": {"type": "number", "minimum": 0, "maximum": 3600},
        "rec_int": {"type": "integer", "minimum": 1, "maximum": 1 << 16},
        "hist_len": {"type": "integer", "minimum": 1, "maximum": 1 << 20},
        "stat_int": {"type": "integer", "minimum": 1, "maximum": 1 << 20},
        "counting": {"type": "boolean",
                     "description": "confirm sFlow's suspects with a counting flow's exact rate (detector 'rate')"},
        "suspect_fraction": {"type": "number", "minimum": 0.1, "maximum": 1,
                             "description": "sFlow suspects a flow at this fraction of the threshold"},
        "max_counting_flows": {"type": "integer", "minimum": 1, "maximum": 4096,
                               "description": "counting flows per switch at once"},
        "counter_refresh_ms": _nullable({"type": "integer", "minimum": 10, "maximum": 10000,
                                         "description": "while counting, the switch hosts' OVS credits flow counters "
                                                        "this often (other_config:max-revalidator); null: "
                                                        "their own setting"})},
        description="Set at most one of threshold_bps, capacity_share, fair_share_multiple "
                    "(none: capacity_share 0.5)."),
    "Policy": _obj({
        "rules": {"type": "array", "maxItems": MAX_RULES, "items": _ref("Rule")},
        "aggregates": {"type": "object", "propertyNames": NAME, "additionalProperties": _ref("Aggregate")},
        "approaches": _ref("Approaches"),
        "ports": {"type": "array", "items": _ref("Port")},
        "heavy_hitters": _ref("HeavyHitters"),
        "switches": {"type": "array", "items": _ref("SwitchHost")},
        "packet_in": _ref("PacketIn")}),
    "SwitchHost": _obj(SWITCH_FIELDS, required=("dpid", "ovsdb")),
    "SwitchHostBody": _obj(SWITCH_FIELDS, required=("ovsdb",),
                           description="A switch host for PUT /switches/{dpid}: dpid may be left out; "
                                       "if given it is the path's."),
    "Change": _obj({"version": VERSION, "at": {"type": "number"}, "summary": {"type": "string"}},
                   required=("version", "at", "summary")),
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
                      switches_connected={"type": "integer", "minimum": 0}, uptime_s={"type": "number"}),
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
    "get_heavy_hitters": _answer(enabled={"type": "boolean"}, ports={"type": "array"},
                                 waiting={"type": "array", "items": _answer(
                                     dpid={"type": "integer"}, port={"type": "integer"},
                                     **{"for": {"type": "string", "example": "switch 0x1 to connect"}})},
                                 current={"type": "array"}, log={"type": "array"}),
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
    "dpid": {"schema": {"type": "string", "pattern": "^(0*[1-9][0-9]{0,19}|0[xX]0*[1-9a-fA-F][0-9a-fA-F]{0,15})$"},
             "description": "datapath id (1 to 2^64-1), decimal or 0x-prefixed hex"},
    "port": {"schema": {"type": "string", "pattern": "^0*[1-9][0-9]{0,9}$"},
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
