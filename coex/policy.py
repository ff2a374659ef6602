"""The CoEx policy: aggregates, the rules that classify flows into them, the approaches
that keep them apart, and the bottleneck ports.

One document, validated in one place (`Policy.from_dict`), used by the REST API, the
SQLite store and the controller alike. Invalid input raises PolicyError naming the
field (e.g. "rules[2].match.tp_dst"), and nothing is half-applied: callers build a new
Policy and swap it in only when it validated.

Each part of the document declares its fields once, in a FIELDS table (type, range,
default, description); the validator reads them, and so does the REST API's OpenAPI
document (part_schema, ryu_app/openapi.py), so the two cannot disagree. Rules between
fields are code: the part's from_dict, and Policy.check for the whole document.

Aggregates follow Hock et al. (seed 001): low-delay flows, queue-filling flows, plus a
penalized aggregate for heavy hitters and the default for everything else.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import ipaddress
import json
import re

from coex.disciplines import DISCIPLINES, PORT_DISCIPLINES, spec_text

BUILTIN_AGGREGATES = ("low_delay", "queue_filling", "penalized", "default")
AQM_DISCIPLINES = PORT_DISCIPLINES  # from the core's own table (coex/disciplines.py)
# Patterns are used with fullmatch: "$" would also accept a trailing newline.
_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_MAC_RE = re.compile(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}")
_HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?")
_PORT_NUMBER = "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"  # 1-65535
_URL_RE = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?")
_DECIMAL_RE = re.compile(r"[0-9]{1,20}")
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED = _OCTET + "(\\." + _OCTET + "){3}"
# The masks a prefix may carry after its "/", as the validator (Python's ipaddress) takes them: a
# length, a netmask (255.255.255.0) or a host mask (0.0.0.255); the schema lists the same ones.
_MASKS = sorted({str(m) for n in range(33) for net in [ipaddress.IPv4Network(f"0.0.0.0/{n}")]
                 for m in (net.netmask, net.hostmask)}, key=lambda m: (len(m), m))
_PREFIX_RE = re.compile(f"{_DOTTED}(/((3[0-2]|[12]?[0-9])|{'|'.join(re.escape(m) for m in _MASKS)}))?")
_HEX_RE = re.compile(r"0[xX][0-9a-fA-F]{1,16}")
MATCH_FIELDS = ("ipv4_src", "ipv4_dst", "ip_proto", "tp_src", "tp_dst", "dscp", "eth_src")
MAX_RULES = 1000
MAX_CAPACITY_BPS = 400_000_000_000
OFPP_MAX = 0xFFFFFF00  # the highest OpenFlow 1.3 port number of a physical port
MAX_JSON_DEPTH = 32  # the policy document itself is 5 deep (ports[].aqm.params.x)


class Problem(enum.Enum):
    """What kind of wrong a PolicyError is. The core says what; whoever reports it says how
    (ryu_app.rest maps each kind to an HTTP status, the command line to a message)."""
    MALFORMED = "malformed"      # not text, not JSON, nested too deep: nothing could be read
    INVALID = "invalid"          # read, but a value is out of its range or of the wrong kind
    CONFLICT = "conflict"        # each part valid, two of them cannot both hold (a name twice)
    UNAVAILABLE = "unavailable"  # a check needs a part not reachable now (the core's checker)


class PolicyError(ValueError):
    """A policy document or change that cannot be accepted; `field` names where, `kind` what."""

    def __init__(self, message: str, field: str | None = None, kind: Problem = Problem.INVALID):
        super().__init__(message)
        self.message, self.field, self.kind = message, field, kind


# --- text in -------------------------------------------------------------------------

def parse_uint(text, hex_ok: bool = False) -> int | None:
    r"""A non-negative integer written in ASCII digits (0x-prefixed hex too when hex_ok),
    else None. Not int(): that also takes '+5', ' 5', '1_0' and non-ASCII digits such as
    '\u0665', and str.isdigit() takes '\u00b2', which int() then refuses."""
    if not isinstance(text, str):
        return None
    if _DECIMAL_RE.fullmatch(text):
        return int(text)
    if hex_ok and _HEX_RE.fullmatch(text):
        return int(text, 16)
    return None


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether JSON text nests arrays and objects deeper than limit, decided without
    parsing (json.loads recurses once per level: a deep body is a RecursionError)."""
    depth = 0
    for m in _JSON_BRACKET.finditer(_JSON_STRING.sub('""', text)):
        depth += 1 if m.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def load_json(data, what: str = "body"):
    """Parse a JSON document (bytes or str) that is to become (part of) a policy. Errors
    are PolicyError with status 400 and field `what`: not UTF-8, not JSON, or nested
    deeper than MAX_JSON_DEPTH."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as err:
            raise PolicyError(f"{what} is not UTF-8 (byte {err.start})", what, Problem.MALFORMED) from None
    if json_depth_exceeds(data, MAX_JSON_DEPTH):
        raise PolicyError(f"{what} nests arrays and objects deeper than {MAX_JSON_DEPTH} levels", what, Problem.MALFORMED)
    try:
        return json.loads(data)
    except RecursionError:  # not reached after the depth check; kept as the last line of defence
        raise PolicyError(f"{what} nests too deep", what, Problem.MALFORMED) from None
    except ValueError as err:
        raise PolicyError(f"{what} is not JSON: {err}", what, Problem.MALFORMED) from None


# --- field checks ------------------------------------------------------------------

def _obj(value, field: str, allowed: tuple[str, ...] | None, required: tuple[str, ...] = ()) -> dict:
    """A JSON object with only the allowed keys (any keys when allowed is None) and the required ones."""
    if not isinstance(value, dict):
        raise PolicyError(f"{field or 'body'} must be a JSON object", field)
    unknown = sorted(set(value) - set(allowed)) if allowed is not None else []
    if unknown:
        where = f"{field}.{unknown[0]}" if field else unknown[0]
        raise PolicyError(f"unknown field {unknown[0]!r}; expected one of {', '.join(allowed)}", where)
    for key in required:
        if key not in value:
            raise PolicyError(f"{field}.{key} is required", f"{field}.{key}")
    return value


def _int(value, field: str, lo: int, hi: int, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{field} must be an integer", field)
    if not lo <= value <= hi:
        raise PolicyError(f"{field} must be between {lo} and {hi}, got {value}", field)
    return value


def _num(value, field: str, lo: float, hi: float, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise PolicyError(f"{field} must be a number", field)
    if not lo <= value <= hi:
        raise PolicyError(f"{field} must be between {lo:g} and {hi:g}, got {value:g}", field)
    return float(value)


def _bool(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyError(f"{field} must be true or false", field)
    return value


def _name(value, field: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise PolicyError(f"{field} must be a name of 1-32 lower-case letters, digits, '_' or '-', "
                          "starting with a letter", field)
    return value


def _prefix(value, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise PolicyError(f"{field} must be an IPv4 address or prefix such as 10.0.0.0/24", field)
    try:
        return str(ipaddress.IPv4Network(value, strict=False))
    except ValueError:
        raise PolicyError(f"{field} must be an IPv4 address or prefix such as 10.0.0.0/24", field) from None


def _mac(value, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _MAC_RE.fullmatch(value):
        raise PolicyError(f"{field} must be a MAC address like 00:00:00:00:00:01", field)
    return value.lower()


# --- field definitions: each field's check and its JSON Schema in one place --------------
# The REST API's OpenAPI document (ryu_app/openapi.py) is generated from these, so what the
# schema says and what the validator takes cannot drift apart. Patterns are written once, in
# the dialect both Python's re (fullmatch) and ECMA-262 (the schema's "^...$") read alike.

REQUIRED = object()  # a field without a default


@dataclasses.dataclass(frozen=True)
class Field:
    default: object = REQUIRED
    description: str | None = None

    def check(self, value, where: str):
        """The value as the policy keeps it; PolicyError naming `where` if it is not one."""
        raise NotImplementedError

    def json_schema(self) -> dict:
        raise NotImplementedError

    def schema(self) -> dict:
        out = self.json_schema()
        if self.description is not None:
            out["description"] = self.description
        return out


def _or_null(schema: dict) -> dict:
    if "type" in schema and "enum" not in schema:
        return {**schema, "type": [schema["type"], "null"]}
    return {"oneOf": [schema, {"type": "null"}]}


@dataclasses.dataclass(frozen=True)
class IntField(Field):
    lo: int = 0
    hi: int = 0
    nullable: bool = False

    def check(self, value, where):
        return _int(value, where, self.lo, self.hi, optional=self.nullable)

    def json_schema(self):
        out = {"type": "integer", "minimum": self.lo, "maximum": self.hi}
        return _or_null(out) if self.nullable else out


@dataclasses.dataclass(frozen=True)
class NumField(Field):
    lo: float = 0.0
    hi: float = 0.0
    nullable: bool = False

    def check(self, value, where):
        return _num(value, where, self.lo, self.hi, optional=self.nullable)

    def json_schema(self):
        out = {"type": "number", "minimum": self.lo, "maximum": self.hi}
        return _or_null(out) if self.nullable else out


@dataclasses.dataclass(frozen=True)
class BoolField(Field):
    def check(self, value, where):
        return _bool(value, where)

    def json_schema(self):
        return {"type": "boolean"}


@dataclasses.dataclass(frozen=True)
class ChoiceField(Field):
    choices: tuple[str, ...] = ()

    def check(self, value, where):
        if value not in self.choices:
            raise PolicyError(f"{where} must be {' or '.join(repr(c) for c in self.choices)}", where)
        return value

    def json_schema(self):
        return {"type": "string", "enum": list(self.choices)}


@dataclasses.dataclass(frozen=True)
class NameField(Field):
    def check(self, value, where):
        return _name(value, where)

    def json_schema(self):
        return {"type": "string", "pattern": f"^{_NAME_RE.pattern}$"}


@dataclasses.dataclass(frozen=True)
class TextField(Field):
    """A string that fullmatches `pattern` (or null, when nullable)."""
    pattern: str = ""
    message: str = ""            # what the field must be, after its name
    nullable: bool = False
    example: str | None = None

    def check(self, value, where):
        if value is None and self.nullable:
            return None
        if not isinstance(value, str) or not re.fullmatch(self.pattern, value):
            raise PolicyError(f"{where} must be {self.message}", where)
        return value

    def json_schema(self):
        out = {"type": ["string", "null"] if self.nullable else "string", "pattern": f"^(?:{self.pattern})$"}
        if self.example is not None:
            out["example"] = self.example
        return out


@dataclasses.dataclass(frozen=True)
class PrefixField(Field):
    """An IPv4 address or prefix (a netmask allowed), kept as the network it names."""
    def check(self, value, where):
        return _prefix(value, where)

    def json_schema(self):
        return {"type": ["string", "null"], "pattern": f"^{_PREFIX_RE.pattern}$",
                "example": "10.0.0.1/32", "description": "IPv4 address or prefix, e.g. 10.0.0.0/24 (or with a "
                                                         "netmask, 10.0.0.0/255.255.255.0)"}


@dataclasses.dataclass(frozen=True)
class MacField(Field):
    def check(self, value, where):
        return _mac(value, where)

    def json_schema(self):
        return {"type": ["string", "null"], "pattern": f"^{_MAC_RE.pattern}$"}


@dataclasses.dataclass(frozen=True)
class PartField(Field):
    """A part of the document with fields of its own (a class with from_dict); in the
    schema a reference to that part's schema, named after the class."""
    part: type | None = None
    nullable: bool = False

    def check(self, value, where):
        if value is None and self.nullable:
            return None
        return self.part.from_dict(value, where)

    def json_schema(self):
        ref = {"$ref": f"#/components/schemas/{self.part.__name__}"}
        return {"oneOf": [ref, {"type": "null"}]} if self.nullable else ref


@dataclasses.dataclass(frozen=True)
class ListField(Field):
    """A list of parts, each named by its index in errors (rules[2].match.tp_dst)."""
    part: type | None = None
    max_items: int | None = None

    def check(self, value, where):
        if not isinstance(value, list):
            raise PolicyError(f"{where} must be a list", where)
        if self.max_items is not None and len(value) > self.max_items:
            raise PolicyError(f"at most {self.max_items} {where}", where)
        return tuple(self.part.from_dict(item, f"{where}[{i}]") for i, item in enumerate(value))

    def json_schema(self):
        out = {"type": "array", "items": {"$ref": f"#/components/schemas/{self.part.__name__}"}}
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        return out


def _read(d, where: str, fields: dict[str, Field], skip: tuple[str, ...] = ()) -> dict:
    """The object's fields checked, a default where one was left out; required fields first
    found missing. `skip`: fields the caller checks itself."""
    d = _obj(d, where, tuple(fields), tuple(k for k, f in fields.items() if f.default is REQUIRED))
    out = {}
    for key, spec in fields.items():
        if key in skip:
            continue
        value = d.get(key, spec.default)
        out[key] = spec.check(value, f"{where}.{key}" if where else key)
    return out


def object_schema(fields: dict[str, Field], **more) -> dict:
    """A JSON object with exactly these fields (unknown ones are refused, as _obj does)."""
    required = [k for k, f in fields.items() if f.default is REQUIRED]
    properties = {}
    for k, f in fields.items():
        schema = f.schema()
        if f.default is not REQUIRED and f.default is not None and not isinstance(f, PartField):
            schema["default"] = f.default
        properties[k] = schema
    return {"type": "object", "additionalProperties": False, "properties": properties,
            **({"required": required} if required else {}), **more}


# --- the parts ----------------------------------------------------------------------

def _host_port(example: str, **more) -> TextField:
    """host:port, where OVS's sFlow agents send (an IPv4 address or host name, a port 1-65535)."""
    return TextField(pattern=_HOST_RE.pattern + ":" + _PORT_NUMBER, example=example,
                     message=f"host:port (an IPv4 address or host name, a port 1-65535), e.g. {example}", **more)


# An OVSDB remote as ovs-vsctl --db takes it: unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT.
# a unix: path of printable ASCII but space and comma (which separates remotes): no control
# character gets into an ovs-vsctl --db argument or a log line
_OVSDB_REMOTE_RE = re.compile(r"unix:/[!-+\--~]{1,255}|(?:tcp|ssl):" + _HOST_RE.pattern + ":" + _PORT_NUMBER)


def ovsdb_remote_problem(remote) -> str | None:
    """Why `remote` is not an OVSDB remote, or None when it is one."""
    if isinstance(remote, str) and _OVSDB_REMOTE_RE.fullmatch(remote):
        return None
    return (f"{remote!r} is not an OVSDB remote: use tcp:HOST:PORT or ssl:HOST:PORT (OVS listens on "
            "6640), or unix:/path/to/db.sock")


@dataclasses.dataclass(frozen=True)
class OvsdbRemoteField(Field):
    def check(self, value, where):
        problem = ovsdb_remote_problem(value)
        if problem:
            raise PolicyError(f"{where}: {problem}", where)
        return value

    def json_schema(self):
        return {"type": "string", "pattern": f"^(?:{_OVSDB_REMOTE_RE.pattern})$", "example": "tcp:192.0.2.10:6640",
                "description": "the switch host's OVSDB remote, as ovs-vsctl --db takes it; port 1-65535"}


DPID_FIELD = IntField(lo=1, hi=2**64 - 1)


@dataclasses.dataclass(frozen=True)
class Match:
    """Which packets a rule takes. Unset fields match anything."""
    ipv4_src: str | None = None
    ipv4_dst: str | None = None
    ip_proto: int | None = None
    tp_src: int | None = None
    tp_dst: int | None = None
    dscp: int | None = None
    eth_src: str | None = None  # the ingress host

    FIELDS = {"ipv4_src": PrefixField(default=None), "ipv4_dst": PrefixField(default=None),
              "ip_proto": IntField(lo=0, hi=255, nullable=True, default=None),
              "tp_src": IntField(lo=0, hi=65535, nullable=True, default=None),
              "tp_dst": IntField(lo=0, hi=65535, nullable=True, default=None),
              "dscp": IntField(lo=0, hi=63, nullable=True, default=None),
              "eth_src": MacField(default=None)}
    SCHEMA_NOTES = {
        "description": "Unset (or null) fields match anything; tp_src/tp_dst need ip_proto 6 or 17.",
        # the cross-field rule of from_dict: tp_src or tp_dst set -> ip_proto is 6 or 17
        "if": {"anyOf": [{"required": [k], "properties": {k: {"type": "integer"}}} for k in ("tp_src", "tp_dst")]},
        "then": {"required": ["ip_proto"], "properties": {"ip_proto": {"enum": [6, 17]}}}}

    @classmethod
    def from_dict(cls, d, field: str) -> "Match":
        m = cls(**_read(d, field, cls.FIELDS))
        if (m.tp_src is not None or m.tp_dst is not None) and m.ip_proto not in (6, 17):
            raise PolicyError("tp_src/tp_dst need ip_proto 6 (TCP) or 17 (UDP)", f"{field}.ip_proto", Problem.CONFLICT)
        return m

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def matches(self, pkt: dict) -> bool:
        """pkt: fields of one IPv4 packet (ipv4_src, ipv4_dst, ip_proto, tp_src, tp_dst, dscp, eth_src)."""
        for key in MATCH_FIELDS:
            want = getattr(self, key)
            if want is None:
                continue
            got = pkt.get(key)
            if got is None:
                return False
            if key in ("ipv4_src", "ipv4_dst"):
                if ipaddress.IPv4Address(got) not in ipaddress.IPv4Network(want):
                    return False
            elif got != want:
                return False
        return True

    def overlaps(self, other: "Match") -> bool:
        """Could one packet match both?"""
        for key in MATCH_FIELDS:
            a, b = getattr(self, key), getattr(other, key)
            if a is None or b is None:
                continue
            if key in ("ipv4_src", "ipv4_dst"):
                if not ipaddress.IPv4Network(a).overlaps(ipaddress.IPv4Network(b)):
                    return False
            elif a != b:
                return False
        return True


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    aggregate: str
    match: Match
    priority: int = 0  # among rules; higher wins

    FIELDS = {"name": NameField(), "aggregate": NameField(), "match": PartField(part=Match),
              "priority": IntField(lo=0, hi=1000, default=0)}

    @classmethod
    def from_dict(cls, d, field: str) -> "Rule":
        return cls(**_read(d, field, cls.FIELDS))

    def to_dict(self) -> dict:
        return {"name": self.name, "aggregate": self.aggregate, "priority": self.priority,
                "match": self.match.to_dict()}


@dataclasses.dataclass(frozen=True)
class Aggregate:
    name: str
    dscp: int            # marked by the switch; selects the band/class of Separate Queues
    queue_weight: int    # share of the bottleneck under Separate Queues
    own_path: bool       # routed over its own (disjoint) path under Separate Paths

    # The defaults of an aggregate of our own; the built-in ones default to DEFAULT_AGGREGATES.
    FIELDS = {"dscp": IntField(lo=0, hi=63, default=0), "queue_weight": IntField(lo=1, hi=1000, default=1),
              "own_path": BoolField(default=False)}
    SCHEMA_NOTES = {"description": "Fields left out keep their value; a new aggregate starts from the "
                                   "defaults shown, a built-in one from its own (docs/rest.md)."}

    @classmethod
    def from_dict(cls, name: str, d, field: str) -> "Aggregate":
        base = DEFAULT_AGGREGATES.get(name)
        fields = cls.FIELDS if base is None else \
            {k: dataclasses.replace(f, default=base[k]) for k, f in cls.FIELDS.items()}
        return cls(name=name, **_read(d, field, fields))

    def to_dict(self) -> dict:
        return {"dscp": self.dscp, "queue_weight": self.queue_weight, "own_path": self.own_path}


# DSCPs: EF for low delay, AF11 for bulk, CS1 (lower effort) for the penalized.
DEFAULT_AGGREGATES = {
    "low_delay": {"dscp": 46, "queue_weight": 1, "own_path": True},
    "queue_filling": {"dscp": 10, "queue_weight": 1, "own_path": True},
    "penalized": {"dscp": 8, "queue_weight": 1, "own_path": False},
    "default": {"dscp": 0, "queue_weight": 1, "own_path": False},
}


@dataclasses.dataclass(frozen=True)
class AggregatesField(Field):
    """The aggregates by name: the built-in ones always there (changed where the document
    says), others added; kept sorted by name."""
    def check(self, value, where):
        aggs = {n: Aggregate(n, **DEFAULT_AGGREGATES[n]) for n in BUILTIN_AGGREGATES}
        for name, body in _obj(value, where, None).items():
            aggs[_name(name, f"{where}.{name}")] = Aggregate.from_dict(name, body, f"{where}.{name}")
        return tuple(aggs[n] for n in sorted(aggs))

    def json_schema(self):
        return {"type": "object", "propertyNames": NameField().json_schema(),
                "additionalProperties": {"$ref": "#/components/schemas/Aggregate"}}


@dataclasses.dataclass(frozen=True)
class LimitedQueue:
    """Seed 001's Limited Queue: a meter on one aggregate at a fraction of the port."""
    enabled: bool = False
    aggregate: str = "queue_filling"
    fraction: float = 0.5           # of the bottleneck port's capacity (paper: 50 %)
    rate_bps: int | None = None     # explicit rate instead of the fraction
    burst_ms: float | None = None   # burst as time at the meter rate; None: from rtt_ms (planner)
    rtt_ms: float = 20.0            # the aggregate's round-trip time without queueing

    FIELDS = {"enabled": BoolField(default=False), "aggregate": NameField(default="queue_filling"),
              "fraction": NumField(lo=0.01, hi=1.0, default=0.5),
              "rate_bps": IntField(lo=8000, hi=MAX_CAPACITY_BPS, nullable=True, default=None,
                                   description="at most the capacity of every bottleneck port"),
              "burst_ms": NumField(lo=1.0, hi=10_000.0, nullable=True, default=None),
              "rtt_ms": NumField(lo=0.01, hi=5_000.0, default=20.0)}

    @classmethod
    def from_dict(cls, d, field: str) -> "LimitedQueue":
        return cls(**_read(d, field, cls.FIELDS))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Approaches:
    separate_paths: bool = False
    separate_queues: bool = False
    limited_queue: LimitedQueue = LimitedQueue()

    FIELDS = {"separate_paths": BoolField(default=False), "separate_queues": BoolField(default=False),
              "limited_queue": PartField(part=LimitedQueue, default={})}

    @classmethod
    def from_dict(cls, d, field: str) -> "Approaches":
        return cls(**_read(d, field, cls.FIELDS))

    def to_dict(self) -> dict:
        return {"separate_paths": self.separate_paths, "separate_queues": self.separate_queues,
                "limited_queue": self.limited_queue.to_dict()}


@dataclasses.dataclass(frozen=True)
class PacketIn:
    """How many packets per second each switch may send the controller (an OpenFlow meter on
    its table-miss flow): a port scan, an ARP sweep or a burst of new flows is cut at the
    switch, so the controller keeps up and traffic that has flows never waits for it.
    limit_pps None: no meter. The default leaves headroom under what one controller core
    handles (docs/controller.md, "Load"; bench/bench_controller_load.py)."""
    limit_pps: int | None = 1000
    burst: int = 1000               # packets let through at once above the rate

    FIELDS = {"limit_pps": IntField(lo=10, hi=10_000_000, nullable=True, default=1000,
                                    description="packets/s each switch may send the controller; null: no limit"),
              "burst": IntField(lo=1, hi=10_000_000, default=1000)}

    @classmethod
    def from_dict(cls, d, field: str) -> "PacketIn":
        return cls(**_read(d, field, cls.FIELDS))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class HeavyHitters:
    """Heavy-hitter detection from sFlow and steering into the penalized aggregate
    (docs/sflow.md). Exactly one threshold rule applies; capacity_share and
    fair_share_multiple take the capacity of the bottleneck port being watched."""
    enabled: bool = False
    source: str = "embedded"            # "embedded" collector or "sflow-rt"
    collector: str = "127.0.0.1:6343"   # where OVS's agents send: our collector, or sFlow-RT's sFlow port
    sflow_rt_url: str = "http://127.0.0.1:8008"
    sampling: int | None = None         # OVS samples 1 in N packets; None: chosen (coex.steering.chosen_sampling)
    polling_s: int = 10                 # OVS counter polling interval
    detector: str = "rate"              # "rate": windowed estimate; "mode": seed 003 mode of history
    threshold_bps: int | None = None
    capacity_share: float | None = 0.5
    fair_share_multiple: float | None = None
    window_s: float = 5.0
    min_window_s: float = 1.0           # a young flow's bytes are divided by at least this
    release_fraction: float = 0.7       # release below this fraction of the threshold
    min_hold_s: float = 2.0
    rec_int: int = 1                    # seed 003: record every rec_int-th sample ...
    hist_len: int = 128                 # ... keep hist_len records ...
    stat_int: int = 32                  # ... and take the mode every stat_int samples
    # Confirmation by counting (coex/counting.py; detector "rate"): sFlow suspects a flow at
    # suspect_fraction of the threshold, a counting flow on its switch confirms it.
    counting: bool = True
    suspect_fraction: float = 0.5
    max_counting_flows: int = 32        # per switch
    # How often OVS credits its counters to the OpenFlow flows (its revalidator interval,
    # ovs_config/counter_refresh.py), while counting: None leaves the switch hosts' own.
    counter_refresh_ms: int | None = 100

    FIELDS = {
        "enabled": BoolField(default=False),
        "source": ChoiceField(choices=("embedded", "sflow-rt"), default="embedded"),
        "collector": _host_port("127.0.0.1:6343", default="127.0.0.1:6343",
                                description="where the bridges' sFlow agents send: the embedded collector, "
                                            "or sFlow-RT's sFlow port; host:port, port 1-65535"),
        "sflow_rt_url": TextField(pattern=_URL_RE.pattern, default="http://127.0.0.1:8008",
                                  example="http://127.0.0.1:8008", message="an http(s) URL of sFlow-RT, e.g. http://127.0.0.1:8008"),
        "sampling": IntField(lo=1, hi=1 << 20, nullable=True, default=None,
                             description="1-in-N; null: chosen per bridge from capacity and threshold (docs/sflow.md)"),
        "polling_s": IntField(lo=1, hi=3600, default=10),
        "detector": ChoiceField(choices=("rate", "mode"), default="rate", description="'mode' needs source 'embedded'"),
        "threshold_bps": IntField(lo=8000, hi=MAX_CAPACITY_BPS, nullable=True, default=None,
                                  description="at most the largest bottleneck port's capacity"),
        "capacity_share": NumField(lo=0.001, hi=1.0, nullable=True, default=None),
        "fair_share_multiple": NumField(lo=1.0, hi=1000.0, nullable=True, default=None),
        "window_s": NumField(lo=1.0, hi=600.0, default=5.0),
        "min_window_s": NumField(lo=0.1, hi=600.0, default=1.0, description="at most window_s"),
        "release_fraction": NumField(lo=0.05, hi=1.0, default=0.7),
        "min_hold_s": NumField(lo=0.0, hi=3600.0, default=2.0),
        "rec_int": IntField(lo=1, hi=1 << 16, default=1),
        "hist_len": IntField(lo=1, hi=1 << 20, default=128),
        "stat_int": IntField(lo=1, hi=1 << 20, default=32),
        "counting": BoolField(default=True, description="confirm sFlow's suspects with a counting flow's "
                                                        "exact rate (detector 'rate')"),
        "suspect_fraction": NumField(lo=0.1, hi=1.0, default=0.5,
                                     description="sFlow suspects a flow at this fraction of the threshold"),
        "max_counting_flows": IntField(lo=1, hi=4096, default=32, description="counting flows per switch at once"),
        "counter_refresh_ms": IntField(lo=10, hi=10_000, nullable=True, default=100,
                                       description="while counting, the switch hosts' OVS credits flow counters this "
                                                   "often (other_config:max-revalidator); null: their own setting"),
    }
    THRESHOLD_RULES = ("threshold_bps", "capacity_share", "fair_share_multiple")
    SCHEMA_NOTES = {"description": "Set at most one of threshold_bps, capacity_share, fair_share_multiple "
                                   "(none: capacity_share 0.5)."}

    @classmethod
    def from_dict(cls, d, field: str) -> "HeavyHitters":
        values = _read(d, field, cls.FIELDS)
        f = lambda k: f"{field}.{k}"  # noqa: E731
        if values["detector"] == "mode" and values["source"] == "sflow-rt":
            # sFlow-RT hands us rates, not samples: the seed 003 history never fills, no flow is
            # ever its mode, and every detection would be ignored (ryu_app/heavy_hitters.py).
            raise PolicyError("detector 'mode' needs the packet samples of the embedded collector; "
                              "with source 'sflow-rt' it could never steer a flow: use detector 'rate'",
                              f("detector"), Problem.CONFLICT)
        rules = [k for k in cls.THRESHOLD_RULES if values[k] is not None]
        if len(rules) > 1:
            raise PolicyError("set exactly one of threshold_bps, capacity_share, fair_share_multiple",
                              f(sorted(rules)[1]), Problem.CONFLICT)
        if not rules:
            values["capacity_share"] = 0.5
        hh = cls(**values)
        if hh.min_window_s > hh.window_s:
            raise PolicyError("min_window_s must not exceed window_s", f("min_window_s"), Problem.CONFLICT)
        return hh

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.FIELDS}


@dataclasses.dataclass(frozen=True)
class Aqm:
    discipline: str
    params: tuple[tuple[str, int | float], ...] = ()

    SCHEMA_NOTES = {"description": "A queue discipline of datapath/core and its parameters "
                                   "(docs/datapath-core.md); relations between parameters are checked by "
                                   "the core itself (422 naming the parameter)."}

    @classmethod
    def json_schema(cls) -> dict:
        """One alternative per discipline a port may run, each with exactly its parameters
        as the core's table defines them (coex.disciplines)."""
        def closed(properties: dict, **more) -> dict:
            return {"type": "object", "additionalProperties": False, "properties": properties, **more}
        return {"oneOf": [closed({"discipline": {"const": name},
                                  "params": closed({k: p.json_schema() for k, p in DISCIPLINES[name].params.items()})},
                                 required=["discipline"], title=name)
                          for name in AQM_DISCIPLINES], **cls.SCHEMA_NOTES}

    @classmethod
    def from_dict(cls, d, field: str) -> "Aqm":
        """Each parameter checked against the core's table (name, range, decimals); what
        only the core's init can check (one parameter against another, or against the
        link's rate) is checked by ovs_config.aqm.check_spec before a policy is stored."""
        d = _obj(d, field, ("discipline", "params"))
        disc = d.get("discipline")
        if disc not in AQM_DISCIPLINES:
            raise PolicyError(f"{field}.discipline must be one of {', '.join(AQM_DISCIPLINES)}",
                              f"{field}.discipline")
        known = DISCIPLINES[disc].params
        params = _obj(d.get("params", {}), f"{field}.params", None)
        items = []
        for key, value in sorted(params.items()):
            where = f"{field}.params.{key}"
            if not isinstance(key, str) or key not in known:
                raise PolicyError(f"{disc} has no parameter {key!r}; it has {', '.join(known)}", where)
            value = known[key].rounded(value)
            problem = known[key].problem(value)
            if problem:
                raise PolicyError(f"{disc} parameter {key} {problem}", where)
            numeric = known[key].kind == "number" and not isinstance(value, str)
            items.append((key, int(value) if numeric and float(value).is_integer() else value))
        return cls(disc, tuple(items))

    def spec(self, capacity_bps: int | None = None) -> str:
        """The discipline spec ckcd-link takes: 'ckcd limit=80 ...'. Disciplines that need the
        link rate (ckcd's C, RED's and CHOKe's idle decay) get the port's capacity unless the
        params set rate_bps themselves."""
        discipline = DISCIPLINES[self.discipline]
        params = dict(self.params)
        if capacity_bps is not None and discipline.rate_aware and "rate_bps" not in params:
            params["rate_bps"] = capacity_bps
        return spec_text(self.discipline, params)

    def to_dict(self) -> dict:
        return {"discipline": self.discipline, "params": dict(self.params)}


@dataclasses.dataclass(frozen=True)
class Port:
    """A bottleneck port: where queues, meters and the AQM apply."""
    dpid: int
    port: int
    capacity_bps: int
    aqm: Aqm | None = None

    FIELDS = {"dpid": DPID_FIELD, "port": IntField(lo=1, hi=OFPP_MAX),
              "capacity_bps": IntField(lo=8000, hi=MAX_CAPACITY_BPS),
              "aqm": PartField(part=Aqm, nullable=True, default=None)}

    @classmethod
    def from_dict(cls, d, field: str) -> "Port":
        return cls(**_read(d, field, cls.FIELDS))

    def to_dict(self) -> dict:
        d = {"dpid": self.dpid, "port": self.port, "capacity_bps": self.capacity_bps}
        d["aqm"] = self.aqm.to_dict() if self.aqm else None
        return d


@dataclasses.dataclass(frozen=True)
class SwitchHost:
    """How the controller reaches one switch host's configuration. The switch opens its
    OpenFlow channel itself; queues, sFlow and disciplines go through its OVSDB, here or
    across the network. A switch without an entry is configured through this machine's
    OVSDB (the local socket)."""
    dpid: int
    ovsdb: str                        # the OVSDB remote: tcp:HOST:6640, ssl:HOST:6640 or unix:PATH
    collector: str | None = None      # the sFlow collector as this host reaches it (default: the policy's)

    FIELDS = {"dpid": DPID_FIELD, "ovsdb": OvsdbRemoteField(),
              "collector": _host_port("10.0.2.2:6343", nullable=True, default=None,
                                      description="the sFlow collector as this switch host reaches it "
                                                  "(null: the policy's)")}

    @classmethod
    def from_dict(cls, d, field: str) -> "SwitchHost":
        return cls(**_read(d, field, cls.FIELDS))

    def to_dict(self) -> dict:
        return {"dpid": self.dpid, "ovsdb": self.ovsdb, "collector": self.collector}


@dataclasses.dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    aggregates: tuple[Aggregate, ...] = tuple(  # always sorted by name
        Aggregate(n, **DEFAULT_AGGREGATES[n]) for n in sorted(BUILTIN_AGGREGATES))
    approaches: Approaches = Approaches()
    ports: tuple[Port, ...] = ()
    heavy_hitters: HeavyHitters = HeavyHitters()
    switches: tuple[SwitchHost, ...] = ()
    packet_in: PacketIn = PacketIn()

    FIELDS = {"rules": ListField(part=Rule, max_items=MAX_RULES, default=[]),
              "aggregates": AggregatesField(default={}),
              "approaches": PartField(part=Approaches, default={}),
              "ports": ListField(part=Port, default=[]),
              "heavy_hitters": PartField(part=HeavyHitters, default={}),
              "switches": ListField(part=SwitchHost, default=[]),
              "packet_in": PartField(part=PacketIn, default={})}

    # --- whole-document validation ---------------------------------------------------

    @classmethod
    def from_dict(cls, d) -> "Policy":
        policy = cls(**_read(d, "", cls.FIELDS))
        policy.check()
        return policy

    def check(self) -> None:
        """Cross-field consistency: names unique, references exist, no conflicting overlaps,
        no rate above the capacity it shapes. The first problem found is the one reported."""
        self._check_rules()
        self._check_rates()
        self._check_listed_once()

    def _check_rules(self) -> None:
        agg_names = {a.name for a in self.aggregates}
        seen = set()
        for i, rule in enumerate(self.rules):
            if rule.name in seen:
                raise PolicyError(f"rule name {rule.name!r} is used twice", f"rules[{i}].name", Problem.CONFLICT)
            seen.add(rule.name)
            if rule.aggregate not in agg_names:
                raise PolicyError(f"aggregate {rule.aggregate!r} does not exist", f"rules[{i}].aggregate", Problem.CONFLICT)
            for j, other in enumerate(self.rules[:i]):
                if (other.priority == rule.priority and other.aggregate != rule.aggregate
                        and other.match.overlaps(rule.match)):
                    raise PolicyError(
                        f"rule {rule.name!r} overlaps rule {other.name!r} at the same priority "
                        f"but puts packets into {rule.aggregate!r}, not {other.aggregate!r}; "
                        "give one a higher priority or narrow its match", f"rules[{i}].match", Problem.CONFLICT)

    def _check_rates(self) -> None:
        lq = self.approaches.limited_queue
        if lq.aggregate not in {a.name for a in self.aggregates}:
            raise PolicyError(f"aggregate {lq.aggregate!r} does not exist",
                              "approaches.limited_queue.aggregate", Problem.CONFLICT)
        if lq.rate_bps is not None:
            for i, port in enumerate(self.ports):
                if lq.rate_bps > port.capacity_bps:
                    raise PolicyError(
                        f"meter rate {lq.rate_bps} bit/s is above the capacity of port "
                        f"{port.dpid}:{port.port} ({port.capacity_bps} bit/s)",
                        "approaches.limited_queue.rate_bps", Problem.CONFLICT)
        for i, port in enumerate(self.ports):
            rate = dict(port.aqm.params).get("rate_bps") if port.aqm else None
            if rate is not None and rate > port.capacity_bps:
                raise PolicyError(
                    f"AQM rate {rate:g} bit/s is above the capacity of port {port.dpid}:{port.port} "
                    f"({port.capacity_bps} bit/s)", f"ports[{i}].aqm.params.rate_bps", Problem.CONFLICT)
        hh = self.heavy_hitters
        if hh.threshold_bps is not None and self.ports:
            # The detector of a port sees only flows leaving that port, which cannot be faster
            # than the port: a threshold above every port's capacity never detects anything.
            widest = max(self.ports, key=lambda p: p.capacity_bps)
            if hh.threshold_bps > widest.capacity_bps:
                raise PolicyError(
                    f"heavy-hitter threshold {hh.threshold_bps} bit/s is above the capacity of every "
                    f"bottleneck port (the largest: {widest.dpid}:{widest.port}, {widest.capacity_bps} "
                    "bit/s): no flow could reach it", "heavy_hitters.threshold_bps", Problem.CONFLICT)
        if self.heavy_hitters.enabled and not self.ports:
            raise PolicyError("heavy-hitter detection watches bottleneck ports: declare one first "
                              "(PUT /ports/{dpid}/{port})", "heavy_hitters.enabled", Problem.CONFLICT)

    def _check_listed_once(self) -> None:
        dpids = set()
        for i, host in enumerate(self.switches):
            if host.dpid in dpids:
                raise PolicyError(f"switch {host.dpid:#x} is listed twice", f"switches[{i}]", Problem.CONFLICT)
            dpids.add(host.dpid)
        ports = set()
        for i, port in enumerate(self.ports):
            if (port.dpid, port.port) in ports:
                raise PolicyError(f"port {port.dpid}:{port.port} is listed twice", f"ports[{i}]", Problem.CONFLICT)
            ports.add((port.dpid, port.port))
        dscps = {}
        for agg in self.aggregates:
            if agg.dscp in dscps and self.approaches.separate_queues:
                raise PolicyError(f"aggregates {dscps[agg.dscp]!r} and {agg.name!r} share DSCP {agg.dscp}; "
                                  "Separate Queues needs one DSCP per aggregate",
                                  f"aggregates.{agg.name}.dscp", Problem.CONFLICT)
            dscps[agg.dscp] = agg.name

    def to_dict(self) -> dict:
        return {"rules": [r.to_dict() for r in self.rules],
                "aggregates": {a.name: a.to_dict() for a in self.aggregates},
                "approaches": self.approaches.to_dict(),
                "ports": [p.to_dict() for p in self.ports],
                "heavy_hitters": self.heavy_hitters.to_dict(),
                "switches": [h.to_dict() for h in self.switches],
                "packet_in": self.packet_in.to_dict()}

    # --- questions the controller asks ----------------------------------------------------

    def aggregate(self, name: str) -> Aggregate:
        for agg in self.aggregates:
            if agg.name == name:
                return agg
        raise KeyError(name)

    def rules_by_precedence(self) -> list[Rule]:
        return sorted(self.rules, key=lambda r: (-r.priority, r.name))

    def classify(self, pkt: dict) -> str:
        """The aggregate of one IPv4 packet: the highest-priority matching rule, else 'default'."""
        for rule in self.rules_by_precedence():
            if rule.match.matches(pkt):
                return rule.aggregate
        return "default"

    def switch_host(self, dpid: int) -> SwitchHost | None:
        for host in self.switches:
            if host.dpid == dpid:
                return host
        return None

    def port(self, dpid: int, port: int) -> Port | None:
        for p in self.ports:
            if (p.dpid, p.port) == (dpid, port):
                return p
        return None

    # --- edits (each returns a new, validated Policy) ----------------------------------

    def edited(self, mutate) -> "Policy":
        """Apply mutate(doc) to a copy of the document and validate the result."""
        doc = copy.deepcopy(self.to_dict())
        mutate(doc)
        return Policy.from_dict(doc)


# --- the document's schema ------------------------------------------------------------

PARTS = (Match, Rule, Aggregate, LimitedQueue, Approaches, PacketIn, Aqm, Port, HeavyHitters, SwitchHost, Policy)


def part_schema(part: type) -> dict:
    """The JSON Schema of one part of the document, from its field definitions (FIELDS)."""
    if hasattr(part, "json_schema"):
        return part.json_schema()
    return object_schema(part.FIELDS, **getattr(part, "SCHEMA_NOTES", {}))
