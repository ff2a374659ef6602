"""The policy REST API under /coex/v1 (docs/rest.md, ryu_app/openapi.py).

CoexApi.handle() is plain Python: method, path, headers and body in; status, JSON and
headers out. The Ryu side (RestController) only adapts webob to it, through one
catch-all route, so that every answer - unknown route, wrong method, bad JSON, a field
out of range - is JSON with a 4xx code, never Ryu's HTML or a traceback.

Every change is a whole-document edit: copy the policy, edit the copy, validate it
(coex.policy), store it (committed before we answer), then enforce it. A rejected
request therefore changes nothing, neither in the store nor on the switches.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import webob

from coex.policy import BUILTIN_AGGREGATES, OFPP_MAX, Policy, PolicyError, Problem, load_json, parse_uint
from ovs_config import aqm
from ryu_app.framework import ControllerBase, hub, route
from ryu_app.view import ControllerView

PREFIX = "/coex/v1"
MAX_BODY_BYTES = 1 << 20
# How each kind of policy problem answers a request (RFC 9110: 400 for what could not be read,
# 422 for content that was read and is wrong, 409 for parts that contradict each other, 503
# for a check that cannot run now).
HTTP_STATUS = {Problem.MALFORMED: 400, Problem.INVALID: 422, Problem.CONFLICT: 409, Problem.UNAVAILABLE: 503}
DRAIN_BYTES = 16 * MAX_BODY_BYTES


class ApiError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None, headers=None):
        super().__init__(message)
        self.status, self.message, self.field, self.headers = status, message, field, headers or {}


# (method, path template, handler, mutating, summary). The OpenAPI document is built from it.
ROUTES = [
    ("GET", "/health", "health", False, "Liveness, policy version, connected switches"),
    ("GET", "/openapi.json", "openapi", False, "This API's OpenAPI 3 document"),
    ("GET", "/policy", "get_policy", False, "The whole policy document and its version"),
    ("PUT", "/policy", "put_policy", True, "Replace the whole policy document"),
    ("GET", "/rules", "list_rules", False, "Classifier rules"),
    ("POST", "/rules", "create_rule", True, "Add a classifier rule"),
    ("GET", "/rules/{name}", "get_rule", False, "One classifier rule"),
    ("PUT", "/rules/{name}", "put_rule", True, "Create or replace a classifier rule"),
    ("DELETE", "/rules/{name}", "delete_rule", True, "Delete a classifier rule"),
    ("GET", "/aggregates", "list_aggregates", False, "Aggregates and their treatment"),
    ("GET", "/aggregates/{name}", "get_aggregate", False, "One aggregate"),
    ("PUT", "/aggregates/{name}", "put_aggregate", True, "Create or change an aggregate"),
    ("DELETE", "/aggregates/{name}", "delete_aggregate", True, "Delete an aggregate no rule uses"),
    ("GET", "/approaches", "get_approaches", False, "Which CoEx approaches are on"),
    ("PUT", "/approaches", "put_approaches", True, "Set the CoEx approaches"),
    ("GET", "/ports", "list_ports", False, "Bottleneck ports"),
    ("GET", "/ports/{dpid}/{port}", "get_port", False, "One bottleneck port"),
    ("PUT", "/ports/{dpid}/{port}", "put_port", True, "Declare a bottleneck port (capacity, AQM)"),
    ("DELETE", "/ports/{dpid}/{port}", "delete_port", True, "Forget a bottleneck port"),
    ("PUT", "/ports/{dpid}/{port}/aqm", "put_aqm", True, "Attach a queue discipline to a port"),
    ("DELETE", "/ports/{dpid}/{port}/aqm", "delete_aqm", True, "Detach the port's queue discipline"),
    ("GET", "/heavy-hitters", "get_heavy_hitters", False,
     "Current heavy hitters with their estimates and since when, per-port top flows, decisions"),
    ("GET", "/heavy-hitters/config", "get_hh_config", False, "Heavy-hitter detection settings"),
    ("PUT", "/heavy-hitters/config", "put_hh_config", True, "Change heavy-hitter detection settings"),
    ("GET", "/switches", "list_switches", False, "How each switch host's OVSDB is reached"),
    ("GET", "/switches/{dpid}", "get_switch", False, "How one switch host's OVSDB is reached"),
    ("PUT", "/switches/{dpid}", "put_switch", True,
     "Set a switch host's OVSDB remote (tcp:HOST:6640, ssl:..., unix:...) and sFlow collector address"),
    ("DELETE", "/switches/{dpid}", "delete_switch", True, "Configure the switch through the local OVSDB again"),
    ("GET", "/packet-in", "get_packet_in", False, "The packet-in limit every switch enforces"),
    ("PUT", "/packet-in", "put_packet_in", True, "Set the packet-in limit (packets/s per switch; null: none)"),
    ("GET", "/state", "get_state", False, "What is installed on which switch, with which backend"),
    ("GET", "/changes", "get_changes", False, "The latest accepted policy changes"),
]

# Answers that are not JSON: (method, full path template, handler, summary). Reads, no token.
PLAIN_ROUTES = [
    ("GET", "/metrics", "metrics", "Prometheus metrics, text format 0.0.4 (docs/metrics.md)"),
    ("GET", PREFIX + "/ui", "ui", "The live dashboard (HTML; docs/metrics.md)"),
    ("GET", PREFIX + "/ui/{asset}", "ui_asset", "The dashboard's script and style sheet"),
]
UI_DIR = Path(__file__).resolve().parent / "ui"
UI_FILES = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
            "style.css": "text/css; charset=utf-8"}


class Raw:
    """An answer that is not JSON: bytes and their content type."""

    def __init__(self, body: bytes, content_type: str):
        self.body, self.content_type = body, content_type


def check_port_disciplines(policy, current=None) -> None:
    """The core's own check of each port's discipline at the port's rate (coex.policy checks
    each parameter alone; relations between them only the core knows): a PolicyError naming
    the parameter, so a spec the link would refuse is never stored. A port whose discipline
    and capacity are as in `current` (the stored policy) is not asked again."""
    checked = {(p.dpid, p.port): (p.aqm, p.capacity_bps) for p in current.ports} if current else {}
    for i, port in enumerate(policy.ports):
        if port.aqm is None or checked.get((port.dpid, port.port)) == (port.aqm, port.capacity_bps):
            continue
        try:
            aqm.check_spec(port.aqm.spec(port.capacity_bps), port.capacity_bps)
        except aqm.AqmSpecError as err:
            where = f"ports[{i}].aqm" + (f".params.{err.param}" if err.param else "")
            raise PolicyError(err.message, where, Problem.CONFLICT) from None  # each value valid alone
        except aqm.AqmBackendError as err:
            raise PolicyError(str(err), f"ports[{i}].aqm", Problem.UNAVAILABLE) from None


def _compile(template: str) -> re.Pattern:  # used with fullmatch ("$" would let "\n" end a path)
    return re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + "/?")


_COMPILED = ([(m, _compile(PREFIX + t), h, mut) for m, t, h, mut, _ in ROUTES]
             + [(m, _compile(t), h, False) for m, t, h, _ in PLAIN_ROUTES])


# Path numbers: their shape is what the OpenAPI document's patterns say (ryu_app.openapi uses
# these), and one that does not have it is a 400. One of the right shape but out of range names
# no switch or port: a 404, as for one that does not exist.
DPID_PATH = re.compile(r"0*[1-9][0-9]{0,19}|0[xX]0*[1-9a-fA-F][0-9a-fA-F]{0,15}")
PORT_PATH = re.compile(r"0*[1-9][0-9]{0,9}")


def _parse_dpid(text: str) -> int:
    if not DPID_PATH.fullmatch(text):
        raise ApiError(400, "dpid must be a decimal integer or 0x-prefixed hex (ASCII digits), not 0", "dpid")
    value = int(text, 16) if text[:2] in ("0x", "0X") else int(text)  # ASCII digits: the pattern said so
    if value >= 2**64:
        raise ApiError(404, f"no switch {text}: a datapath id is 1 to 2^64-1", "dpid")
    return value


def _parse_port(text: str) -> int:
    if not PORT_PATH.fullmatch(text):
        raise ApiError(400, f"port must be a port number (1 to {OFPP_MAX}, ASCII digits)", "port")
    value = int(text)
    if value > OFPP_MAX:
        raise ApiError(404, f"no port {text}: OpenFlow port numbers are 1 to {OFPP_MAX}", "port")
    return value


def _header_bytes(text: str) -> bytes:
    """A header value as the bytes the client sent: WSGI hands headers over as latin-1 text."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:  # not from a WSGI server; compare its UTF-8
        return text.encode("utf-8", "surrogatepass")


def _read_body(req) -> bytes:
    """At most MAX_BODY_BYTES + 1 bytes of the body (one more than allowed tells "too large").
    A declared length over the limit is refused without keeping the body: read away (so that a
    client still sending gets the 413, not a reset) up to DRAIN_BYTES, beyond that not read."""
    length = req.content_length
    if length is not None and length > MAX_BODY_BYTES:
        if length <= DRAIN_BYTES:
            try:
                while req.body_file.read(1 << 16):
                    pass
            except (ValueError, OSError):
                pass
        raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes", "body")
    if length is None and req.environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
        stream = req.environ["wsgi.input"]  # eventlet decodes chunks; webob would read nothing
    else:
        stream = req.body_file
    try:
        return stream.read(MAX_BODY_BYTES + 1) or b""
    except (ValueError, OSError):  # a broken chunk, a client gone
        raise ApiError(400, "the request body could not be read (broken chunked encoding?)", "body") from None


class CoexApi:
    def __init__(self, view: ControllerView, heavy_hitters, apply_policy: Callable[[Policy, str], int],
                 token: str | None, logger: logging.Logger):
        """view: what the controller knows (ryu_app/view.py); heavy_hitters: the detection
        service (its report() and steering book); apply_policy(new, summary): store and
        enforce a validated policy, returning its version; token: what mutating calls must
        present (None: no token)."""
        self.view, self.heavy_hitters, self.apply_policy = view, heavy_hitters, apply_policy
        self.token, self.logger = token, logger
        self.lock = hub.Semaphore()  # one read-modify-write of the policy at a time
        self.started = time.time()
        self.errors: Counter = Counter()  # status code -> answers with it (4xx, 5xx), for /metrics
        self._registry = None

    # --- dispatch ----------------------------------------------------------------

    def handle(self, method: str, path: str | bytes, headers, body) -> tuple[int, dict | Raw, dict]:
        """path: decoded text, or the raw (percent-decoded) bytes of the request line; body:
        bytes, or a function reading them (called only when the call takes a body, after the
        token is checked; it may raise ApiError). The answer is JSON, or Raw for PLAIN_ROUTES."""
        status, payload, headers = self._handle(method, path, headers, body)
        if status >= 400:
            self.errors[status] += 1
        return status, payload, headers

    def _handle(self, method: str, path: str | bytes, headers, body) -> tuple[int, dict | Raw, dict]:
        try:
            if isinstance(path, bytes):
                try:
                    path = path.decode("utf-8")
                except UnicodeDecodeError:
                    raise ApiError(400, "the request path is not UTF-8", "path") from None
            allowed = []
            for m, pattern, handler, mutating in _COMPILED:
                match = pattern.fullmatch(path)
                if not match:
                    continue
                if m != method:
                    allowed.append(m)
                    continue
                if mutating:
                    self._authorize(headers)
                args = match.groupdict()
                payload = self._body(body() if callable(body) else body) if method in ("PUT", "POST") else None
                status, result = getattr(self, handler)(payload, **args)
                return status, result, {}
            if allowed:
                raise ApiError(405, f"{method} is not allowed on {path}; allowed: {', '.join(allowed)}",
                               headers={"Allow": ", ".join(allowed)})
            if not path.startswith(PREFIX):
                raise ApiError(404, f"no such resource: {path}; the API lives under {PREFIX}/")
            raise ApiError(404, f"no such resource: {path}")
        except ApiError as err:
            return err.status, {"error": err.message, "field": err.field}, err.headers
        except PolicyError as err:
            return HTTP_STATUS[err.kind], {"error": err.message, "field": err.field}, {}
        except Exception as err:  # a bug of ours: say so in JSON, keep the trace in the log
            self.logger.error("REST %s %s failed: %s", method, path, traceback.format_exc())
            return 500, {"error": f"internal error: {type(err).__name__}; see the controller log",
                         "field": None}, {}

    def _authorize(self, headers) -> None:
        token = self.token
        if token is None:
            return
        # Bytes, not str: compare_digest refuses str with non-ASCII characters (a TypeError).
        scheme, _, given = _header_bytes(headers.get("Authorization", "")).strip().partition(b" ")
        want = token.encode("utf-8", "surrogateescape")
        if not (scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), want)):
            raise ApiError(401, "this call changes policy and needs 'Authorization: Bearer <token>'",
                           "Authorization", {"WWW-Authenticate": "Bearer"})

    @staticmethod
    def _body(body: bytes):
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes", "body")
        if not body.strip():
            raise ApiError(400, "request body required (JSON)", "body")
        return load_json(body, "body")  # PolicyError (400, field "body") when not JSON or too deep

    def _change(self, mutate, summary: str, can_apply=None) -> int:
        """Validate the edited policy, then (can_apply: raise ApiError if the host cannot
        enforce it) store and enforce it. Input errors come before environment errors."""
        with self.lock:
            new = self.view.policy.edited(mutate)  # validates; raises PolicyError, changing nothing
            check_port_disciplines(new, self.view.policy)
            if can_apply is not None:
                can_apply()
            return self.apply_policy(new, summary)

    def _doc(self) -> dict:
        return self.view.policy.to_dict()

    # --- handlers: each returns (status, JSON object) ---------------------------------

    def health(self, _):
        return 200, {"status": "ok", "policy_version": self.view.policy_version,
                     "switches_connected": self.view.switches_connected(),
                     "uptime_s": round(time.time() - self.started, 1), **self.view.leadership()}

    def metrics(self, _):
        from ryu_app import metrics
        if self._registry is None:
            self._registry = metrics.registry_for(self.view, self.errors, self.heavy_hitters.book)
        return 200, Raw(metrics.render(self._registry), metrics.CONTENT_TYPE)

    def ui(self, _):
        return self.ui_asset(None, "index.html")

    def ui_asset(self, _, asset):
        if asset not in UI_FILES:
            raise ApiError(404, f"no such dashboard file: {asset}; there are {', '.join(sorted(UI_FILES))}",
                           "asset")
        return 200, Raw((UI_DIR / asset).read_bytes(), UI_FILES[asset])

    def openapi(self, _):
        from ryu_app.openapi import build_openapi
        return 200, build_openapi()

    def get_policy(self, _):
        return 200, {"version": self.view.policy_version, "policy": self._doc()}

    def put_policy(self, body):
        if not isinstance(body, dict):
            raise ApiError(400, "the policy must be a JSON object", "body")
        Policy.from_dict(body)  # validate before touching anything
        version = self._change(lambda d: (d.clear(), d.update(body)), "policy replaced")
        return 200, {"version": version, "policy": self._doc()}

    # rules
    def list_rules(self, _):
        return 200, {"rules": self._doc()["rules"]}

    @staticmethod
    def _index(items: list, **key) -> int | None:
        """The index of the entry of a policy list whose fields equal `key`, or None."""
        for i, item in enumerate(items):
            if all(item.get(k) == v for k, v in key.items()):
                return i
        return None

    @classmethod
    def _upsert(cls, section: str, entry: dict, **key):
        """A policy edit that replaces the entry of `section` matching `key`, or appends it."""
        def mutate(doc):
            i = cls._index(doc[section], **key)
            if i is None:
                doc[section].append(entry)
            else:
                doc[section][i] = entry
        return mutate

    def _find_rule(self, doc, name):
        return self._index(doc["rules"], name=name)

    def get_rule(self, _, name):
        i = self._find_rule(self._doc(), name)
        if i is None:
            raise ApiError(404, f"no rule named {name!r}", "name")
        return 200, self._doc()["rules"][i]

    def create_rule(self, body):
        if not isinstance(body, dict):
            raise ApiError(400, "a rule must be a JSON object", "body")
        name = body.get("name")
        if isinstance(name, str) and self._find_rule(self._doc(), name) is not None:
            raise ApiError(409, f"rule {name!r} exists; PUT /rules/{name} replaces it", "name")
        version = self._change(lambda d: d["rules"].append(body), f"rule {name} added")
        return 201, {"version": version, "rule": self._doc()["rules"][self._find_rule(self._doc(), name)]}

    def put_rule(self, body, name):
        if not isinstance(body, dict):
            raise ApiError(400, "a rule must be a JSON object", "body")
        if body.get("name", name) != name:
            raise ApiError(409, f"the name in the body ({body.get('name')!r}) differs from the path ({name!r})", "name")
        mutate = self._upsert("rules", {**body, "name": name}, name=name)
        created = self._find_rule(self._doc(), name) is None
        version = self._change(mutate, f"rule {name} {'added' if created else 'replaced'}")
        return (201 if created else 200), {"version": version, "rule": self.get_rule(None, name)[1]}

    def delete_rule(self, _, name):
        if self._find_rule(self._doc(), name) is None:
            raise ApiError(404, f"no rule named {name!r}", "name")
        version = self._change(lambda d: d["rules"].pop(self._find_rule(d, name)), f"rule {name} deleted")
        return 200, {"version": version}

    # aggregates
    def list_aggregates(self, _):
        return 200, {"aggregates": self._doc()["aggregates"]}

    def get_aggregate(self, _, name):
        aggs = self._doc()["aggregates"]
        if name not in aggs:
            raise ApiError(404, f"no aggregate named {name!r}", "name")
        return 200, {"name": name, **aggs[name]}

    def put_aggregate(self, body, name):
        if not isinstance(body, dict):
            raise ApiError(400, "an aggregate must be a JSON object", "body")
        if body.get("name", name) != name:
            raise ApiError(409, f"the name in the body ({body.get('name')!r}) differs from the path ({name!r})", "name")
        body = {k: v for k, v in body.items() if k != "name"}
        version = self._change(lambda d: d["aggregates"].__setitem__(name, body), f"aggregate {name} set")
        return 200, {"version": version, "aggregate": self.get_aggregate(None, name)[1]}

    def delete_aggregate(self, _, name):
        doc = self._doc()
        if name not in doc["aggregates"]:
            raise ApiError(404, f"no aggregate named {name!r}", "name")
        if name in BUILTIN_AGGREGATES:
            raise ApiError(409, f"{name!r} is built in and cannot be deleted", "name")
        users = [r["name"] for r in doc["rules"] if r["aggregate"] == name]
        if users:
            raise ApiError(409, f"aggregate {name!r} is used by rules {', '.join(users)}", "name")
        if doc["approaches"]["limited_queue"]["aggregate"] == name:
            raise ApiError(409, f"aggregate {name!r} is the Limited Queue aggregate", "name")
        version = self._change(lambda d: d["aggregates"].pop(name), f"aggregate {name} deleted")
        return 200, {"version": version}

    # approaches
    def get_approaches(self, _):
        return 200, self._doc()["approaches"]

    def put_approaches(self, body):
        version = self._change(lambda d: d.__setitem__("approaches", body), "approaches set")
        return 200, {"version": version, "approaches": self._doc()["approaches"]}

    # packet-in limit
    def get_packet_in(self, _):
        return 200, self._doc()["packet_in"]

    def put_packet_in(self, body):
        version = self._change(lambda d: d.__setitem__("packet_in", body), "packet-in limit set")
        return 200, {"version": version, "packet_in": self._doc()["packet_in"]}

    # ports and AQM
    def list_ports(self, _):
        return 200, {"ports": self._doc()["ports"]}

    def _port_index(self, doc, dpid, port):
        return self._index(doc["ports"], dpid=dpid, port=port)

    def _known_port(self, dpid_text, port_text) -> tuple[int, int]:
        dpid, port = _parse_dpid(dpid_text), _parse_port(port_text)
        if not self.view.is_connected(dpid):
            raise ApiError(404, f"switch {dpid:#x} is not connected", "dpid")
        if not self.view.has_port(dpid, port):
            raise ApiError(404, f"switch {dpid:#x} has no port {port}", "port")
        return dpid, port

    def get_port(self, _, dpid, port):
        d, p = _parse_dpid(dpid), _parse_port(port)
        doc = self._doc()
        i = self._port_index(doc, d, p)
        if i is None:
            raise ApiError(404, f"port {d}:{p} is not a configured bottleneck port", "port")
        return 200, doc["ports"][i]

    def put_port(self, body, dpid, port):
        d, p = self._known_port(dpid, port)
        if not isinstance(body, dict):
            raise ApiError(400, "a port must be a JSON object", "body")
        for key, path_value in (("dpid", d), ("port", p)):
            if key in body and body[key] != path_value:
                raise ApiError(409, f"{key} in the body ({body[key]!r}) differs from the path ({path_value})", key)
        version = self._change(self._upsert("ports", {**body, "dpid": d, "port": p}, dpid=d, port=p),
                               f"port {d}:{p} set")
        return 200, {"version": version, "port": self.get_port(None, dpid, port)[1]}

    def delete_port(self, _, dpid, port):
        d, p = _parse_dpid(dpid), _parse_port(port)
        if self._port_index(self._doc(), d, p) is None:
            raise ApiError(404, f"port {d}:{p} is not a configured bottleneck port", "port")
        version = self._change(lambda doc: doc["ports"].pop(self._port_index(doc, d, p)),
                               f"port {d}:{p} removed")
        return 200, {"version": version}

    def put_aqm(self, body, dpid, port):
        d, p = self._known_port(dpid, port)
        if self._port_index(self._doc(), d, p) is None:
            raise ApiError(404, f"port {d}:{p} is not a bottleneck port yet; "
                                f"PUT /ports/{dpid}/{port} with its capacity_bps first", "port")

        def has_backend():
            backend, reason = self.view.aqm_backend(d, p)
            if backend is None:
                raise ApiError(409, f"port {d}:{p}: {reason}", "port")
        version = self._change(lambda doc: doc["ports"][self._port_index(doc, d, p)].__setitem__("aqm", body),
                               f"AQM on {d}:{p} set", can_apply=has_backend)
        return 200, {"version": version, "port": self.get_port(None, dpid, port)[1]}

    def delete_aqm(self, _, dpid, port):
        d, p = _parse_dpid(dpid), _parse_port(port)
        if self._port_index(self._doc(), d, p) is None:
            raise ApiError(404, f"port {d}:{p} is not a configured bottleneck port", "port")
        version = self._change(lambda doc: doc["ports"][self._port_index(doc, d, p)].__setitem__("aqm", None),
                               f"AQM on {d}:{p} removed")
        return 200, {"version": version}

    # heavy hitters
    def get_heavy_hitters(self, _):
        return 200, self.heavy_hitters.report()

    def get_hh_config(self, _):
        return 200, self._doc()["heavy_hitters"]

    def put_hh_config(self, body):
        version = self._change(lambda d: d.__setitem__("heavy_hitters", body), "heavy-hitter settings set")
        return 200, {"version": version, "heavy_hitters": self._doc()["heavy_hitters"]}

    # switch hosts: how their OVSDB is reached
    def list_switches(self, _):
        return 200, {"switches": self._doc()["switches"]}

    def _switch_index(self, doc, dpid):
        return self._index(doc["switches"], dpid=dpid)

    def get_switch(self, _, dpid):
        d = _parse_dpid(dpid)
        doc = self._doc()
        i = self._switch_index(doc, d)
        if i is None:
            raise ApiError(404, f"switch {d:#x} has no OVSDB setting (the local OVSDB configures it)", "dpid")
        return 200, doc["switches"][i]

    def put_switch(self, body, dpid):
        d = _parse_dpid(dpid)
        if not isinstance(body, dict):
            raise ApiError(400, "a switch host must be a JSON object", "body")
        if "dpid" in body and body["dpid"] != d:
            raise ApiError(409, f"dpid in the body ({body['dpid']!r}) differs from the path ({d})", "dpid")
        mutate = self._upsert("switches", {**body, "dpid": d}, dpid=d)
        version = self._change(mutate, f"switch {d:#x} OVSDB {body.get('ovsdb')}")
        return 200, {"version": version, "switch": self.get_switch(None, dpid)[1]}

    def delete_switch(self, _, dpid):
        d = _parse_dpid(dpid)
        if self._switch_index(self._doc(), d) is None:
            raise ApiError(404, f"switch {d:#x} has no OVSDB setting", "dpid")
        version = self._change(lambda doc: doc["switches"].pop(self._switch_index(doc, d)),
                               f"switch {d:#x} OVSDB setting removed")
        return 200, {"version": version}

    # state
    def get_state(self, _):
        return 200, self.view.effective_state()

    def get_changes(self, _):
        return 200, {"changes": self.view.changes()}


class RestController(ControllerBase):
    """Adapts Ryu's WSGI (webob) to CoexApi. One route catches every path."""

    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.api: CoexApi = data

    # [\s\S], not ".": a path with a newline (%0A) must reach us too, not Ryu's HTML 404.
    @route("coex", r"/{path:[\s\S]*}", requirements={"path": r"[\s\S]*"})
    def dispatch(self, req, path, **_):
        # Not req.path: webob decodes PATH_INFO as UTF-8 itself and raises on other bytes (a
        # 500 with a traceback); it also re-quotes, so names would arrive percent-encoded.
        path = req.environ.get("SCRIPT_NAME", "") + req.environ.get("PATH_INFO", "")
        try:
            path = path.encode("latin-1")  # PEP 3333: the request line's bytes, as latin-1 text
        except UnicodeEncodeError:
            pass  # already decoded by the server
        status, payload, headers = self.api.handle(req.method, path, req.headers, lambda: _read_body(req))
        if isinstance(payload, Raw):
            res = webob.Response(status=status, body=payload.body)
            res.headers["Content-Type"] = payload.content_type
        else:
            res = webob.Response(status=status, content_type="application/json", charset="utf-8",
                                 body=json.dumps(payload, indent=1).encode() + b"\n")
        for key, value in headers.items():
            res.headers[key] = value
        return res


def register(wsgi, api: CoexApi) -> CoexApi:
    wsgi.register(RestController, api)
    return api
