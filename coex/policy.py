"""The CoEx policy: aggregates, the rules that classify flows into them, the approaches
that keep them apart, and the bottleneck ports.

One document, validated in one place (`Policy.from_dict`), used by the REST API, the
SQLite store and the controller alike. Invalid input raises PolicyError naming the
field (e.g. "rules[2].match.tp_dst"), and nothing is half-applied: callers build a new
Policy and swap it in only when it validated.

Aggregates follow Hock et al. (seed 001): low-delay flows, queue-filling flows, plus a
penalized aggregate for heavy hitters and the default for everything else.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import json
import re

from coex.disciplines import DISCIPLINES, PORT_DISCIPLINES

BUILTIN_AGGREGATES = ("low_delay", "queue_filling", "penalized", "default")
AQM_DISCIPLINES = PORT_DISCIPLINES  # from the core's own table (coex/disciplines.py)
# Patterns are used with fullmatch: "$" would also accept a trailing newline.
_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_MAC_RE = re.compile(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}")
_HOST_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?")
_URL_RE = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?")
_DECIMAL_RE = re.compile(r"[0-9]{1,20}")
_HEX_RE = re.compile(r"0[xX][0-9a-fA-F]{1,16}")
MATCH_FIELDS = ("ipv4_src", "ipv4_dst", "ip_proto", "tp_src", "tp_dst", "dscp", "eth_src")
MAX_RULES = 1000
MAX_CAPACITY_BPS = 400_000_000_000
OFPP_MAX = 0xFFFFFF00  # the highest OpenFlow 1.3 port number of a physical port
MAX_JSON_DEPTH = 32  # the policy document itself is 5 deep (ports[].aqm.params.x)


class PolicyError(ValueError):
    """A policy document or change that cannot be accepted; `field` names where."""

    def __init__(self, message: str, field: str | None = None, status: int = 422):
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


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
            raise PolicyError(f"{what} is not UTF-8 (byte {err.start})", what, 400) from None
    if json_depth_exceeds(data, MAX_JSON_DEPTH):
        raise PolicyError(f"{what} nests arrays and objects deeper than {MAX_JSON_DEPTH} levels", what, 400)
    try:
        return json.loads(data)
    except RecursionError:  # not reached after the depth check; kept as the last line of defence
        raise PolicyError(f"{what} nests too deep", what, 400) from None
    except ValueError as err:
        raise PolicyError(f"{what} is not JSON: {err}", what, 400) from None


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


# --- the parts ----------------------------------------------------------------------

def _host_port(value, field: str, example: str) -> str:
    host, _, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    port_number = parse_uint(port)
    if not _HOST_RE.fullmatch(host) or port_number is None or not 0 < port_number < 65536:
        raise PolicyError(f"{field} must be host:port (an IPv4 address or host name, a port "
                          f"1-65535), e.g. {example}", field)
    return value


# An OVSDB remote as ovs-vsctl --db takes it: unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT.
_OVSDB_REMOTE_RE = re.compile(r"unix:/[^\s,]{1,255}|(?:tcp|ssl):[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?:[0-9]{1,5}")


def ovsdb_remote_problem(remote) -> str | None:
    """Why `remote` is not an OVSDB remote, or None when it is one."""
    if isinstance(remote, str) and _OVSDB_REMOTE_RE.fullmatch(remote):
        if remote.startswith("unix:") or 0 < int(remote.rsplit(":", 1)[1]) < 65536:
            return None
    return (f"{remote!r} is not an OVSDB remote: use tcp:HOST:PORT or ssl:HOST:PORT (OVS listens on "
            "6640), or unix:/path/to/db.sock")


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

    @classmethod
    def from_dict(cls, d, field: str) -> "Match":
        d = _obj(d, field, MATCH_FIELDS)
        m = cls(ipv4_src=_prefix(d.get("ipv4_src"), f"{field}.ipv4_src"),
                ipv4_dst=_prefix(d.get("ipv4_dst"), f"{field}.ipv4_dst"),
                ip_proto=_int(d.get("ip_proto"), f"{field}.ip_proto", 0, 255, optional=True),
                tp_src=_int(d.get("tp_src"), f"{field}.tp_src", 0, 65535, optional=True),
                tp_dst=_int(d.get("tp_dst"), f"{field}.tp_dst", 0, 65535, optional=True),
                dscp=_int(d.get("dscp"), f"{field}.dscp", 0, 63, optional=True),
                eth_src=_mac(d.get("eth_src"), f"{field}.eth_src"))
        if (m.tp_src is not None or m.tp_dst is not None) and m.ip_proto not in (6, 17):
            raise PolicyError("tp_src/tp_dst need ip_proto 6 (TCP) or 17 (UDP)", f"{field}.ip_proto")
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

    @classmethod
    def from_dict(cls, d, field: str) -> "Rule":
        d = _obj(d, field, ("name", "aggregate", "match", "priority"), required=("name", "aggregate", "match"))
        return cls(name=_name(d["name"], f"{field}.name"),
                   aggregate=_name(d["aggregate"], f"{field}.aggregate"),
                   match=Match.from_dict(d["match"], f"{field}.match"),
                   priority=_int(d.get("priority", 0), f"{field}.priority", 0, 1000))

    def to_dict(self) -> dict:
        return {"name": self.name, "aggregate": self.aggregate, "priority": self.priority,
                "match": self.match.to_dict()}


@dataclasses.dataclass(frozen=True)
class Aggregate:
    name: str
    dscp: int            # marked by the switch; selects the band/class of Separate Queues
    queue_weight: int    # share of the bottleneck under Separate Queues
    own_path: bool       # routed over its own (disjoint) path under Separate Paths

    @classmethod
    def from_dict(cls, name: str, d, field: str) -> "Aggregate":
        d = _obj(d, field, ("dscp", "queue_weight", "own_path"))
        base = DEFAULT_AGGREGATES.get(name, {"dscp": 0, "queue_weight": 1, "own_path": False})
        return cls(name=name,
                   dscp=_int(d.get("dscp", base["dscp"]), f"{field}.dscp", 0, 63),
                   queue_weight=_int(d.get("queue_weight", base["queue_weight"]),
                                     f"{field}.queue_weight", 1, 1000),
                   own_path=_bool(d.get("own_path", base["own_path"]), f"{field}.own_path"))

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
class LimitedQueue:
    """Seed 001's Limited Queue: a meter on one aggregate at a fraction of the port."""
    enabled: bool = False
    aggregate: str = "queue_filling"
    fraction: float = 0.5           # of the bottleneck port's capacity (paper: 50 %)
    rate_bps: int | None = None     # explicit rate instead of the fraction
    burst_ms: float | None = None   # burst as time at the meter rate; None: from rtt_ms (planner)
    rtt_ms: float = 20.0            # the aggregate's round-trip time without queueing

    @classmethod
    def from_dict(cls, d, field: str) -> "LimitedQueue":
        d = _obj(d, field, ("enabled", "aggregate", "fraction", "rate_bps", "burst_ms", "rtt_ms"))
        return cls(enabled=_bool(d.get("enabled", False), f"{field}.enabled"),
                   aggregate=_name(d.get("aggregate", "queue_filling"), f"{field}.aggregate"),
                   fraction=_num(d.get("fraction", 0.5), f"{field}.fraction", 0.01, 1.0),
                   rate_bps=_int(d.get("rate_bps"), f"{field}.rate_bps", 8000, MAX_CAPACITY_BPS,
                                 optional=True),
                   burst_ms=_num(d.get("burst_ms"), f"{field}.burst_ms", 1.0, 10_000.0, optional=True),
                   rtt_ms=_num(d.get("rtt_ms", 20.0), f"{field}.rtt_ms", 0.01, 5_000.0))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Approaches:
    separate_paths: bool = False
    separate_queues: bool = False
    limited_queue: LimitedQueue = LimitedQueue()

    @classmethod
    def from_dict(cls, d, field: str) -> "Approaches":
        d = _obj(d, field, ("separate_paths", "separate_queues", "limited_queue"))
        return cls(separate_paths=_bool(d.get("separate_paths", False), f"{field}.separate_paths"),
                   separate_queues=_bool(d.get("separate_queues", False), f"{field}.separate_queues"),
                   limited_queue=LimitedQueue.from_dict(d.get("limited_queue", {}), f"{field}.limited_queue"))

    def to_dict(self) -> dict:
        return {"separate_paths": self.separate_paths, "separate_queues": self.separate_queues,
                "limited_queue": self.limited_queue.to_dict()}


@dataclasses.dataclass(frozen=True)
class PacketIn:
    """How many packets per second each switch may send the controller (an OpenFlow meter on
    its table-miss flow): a port scan, an ARP sweep or a burst of new flows is cut at the
    switch, so the controller keeps up and traffic that has flows never waits for it.
    limit_pps None: no meter. The default leaves headroom under what one controller core
    handles (docs/architecture.md, bench/bench_controller_load.py)."""
    limit_pps: int | None = 1000
    burst: int = 1000               # packets let through at once above the rate

    @classmethod
    def from_dict(cls, d, field: str) -> "PacketIn":
        d = _obj(d, field, ("limit_pps", "burst"))
        return cls(limit_pps=_int(d.get("limit_pps", 1000), f"{field}.limit_pps", 10, 10_000_000, optional=True),
                   burst=_int(d.get("burst", 1000), f"{field}.burst", 1, 10_000_000))

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

    FIELDS = ("enabled", "source", "collector", "sflow_rt_url", "sampling", "polling_s", "detector",
              "threshold_bps", "capacity_share", "fair_share_multiple", "window_s", "min_window_s",
              "release_fraction",
              "min_hold_s", "rec_int", "hist_len", "stat_int", "counting", "suspect_fraction",
              "max_counting_flows", "counter_refresh_ms")

    @classmethod
    def from_dict(cls, d, field: str) -> "HeavyHitters":
        d = _obj(d, field, cls.FIELDS)
        f = lambda k: f"{field}.{k}"  # noqa: E731
        source = d.get("source", "embedded")
        if source not in ("embedded", "sflow-rt"):
            raise PolicyError(f"{f('source')} must be 'embedded' or 'sflow-rt'", f("source"))
        detector = d.get("detector", "rate")
        if detector not in ("rate", "mode"):
            raise PolicyError(f"{f('detector')} must be 'rate' or 'mode'", f("detector"))
        collector = _host_port(d.get("collector", "127.0.0.1:6343"), f("collector"), "127.0.0.1:6343")
        url = d.get("sflow_rt_url", "http://127.0.0.1:8008")
        if not isinstance(url, str) or not _URL_RE.fullmatch(url):
            raise PolicyError(f"{f('sflow_rt_url')} must be an http(s) URL of sFlow-RT, e.g. "
                              "http://127.0.0.1:8008", f("sflow_rt_url"))
        if detector == "mode" and source == "sflow-rt":
            # sFlow-RT hands us rates, not samples: the seed 003 history never fills, no flow is
            # ever its mode, and every detection would be ignored (ryu_app/heavy_hitters.py).
            raise PolicyError("detector 'mode' needs the packet samples of the embedded collector; "
                              "with source 'sflow-rt' it could never steer a flow: use detector 'rate'",
                              f("detector"))
        rules = {k: d[k] for k in ("threshold_bps", "capacity_share", "fair_share_multiple")
                 if d.get(k) is not None}
        if not rules:
            rules = {"capacity_share": 0.5}
        if len(rules) != 1:
            raise PolicyError("set exactly one of threshold_bps, capacity_share, fair_share_multiple",
                              f(sorted(rules)[1]))
        hh = cls(enabled=_bool(d.get("enabled", False), f("enabled")), source=source, collector=collector,
                 sflow_rt_url=url, sampling=_int(d.get("sampling"), f("sampling"), 1, 1 << 20, optional=True),
                 polling_s=_int(d.get("polling_s", 10), f("polling_s"), 1, 3600), detector=detector,
                 threshold_bps=_int(rules.get("threshold_bps"), f("threshold_bps"), 8000,
                                    MAX_CAPACITY_BPS, optional=True),
                 capacity_share=_num(rules.get("capacity_share"), f("capacity_share"), 0.001, 1.0,
                                     optional=True),
                 fair_share_multiple=_num(rules.get("fair_share_multiple"), f("fair_share_multiple"),
                                          1.0, 1000.0, optional=True),
                 window_s=_num(d.get("window_s", 5.0), f("window_s"), 1.0, 600.0),
                 min_window_s=_num(d.get("min_window_s", 1.0), f("min_window_s"), 0.1, 600.0),
                 release_fraction=_num(d.get("release_fraction", 0.7), f("release_fraction"), 0.05, 1.0),
                 min_hold_s=_num(d.get("min_hold_s", 2.0), f("min_hold_s"), 0.0, 3600.0),
                 rec_int=_int(d.get("rec_int", 1), f("rec_int"), 1, 1 << 16),
                 hist_len=_int(d.get("hist_len", 128), f("hist_len"), 1, 1 << 20),
                 stat_int=_int(d.get("stat_int", 32), f("stat_int"), 1, 1 << 20),
                 counting=_bool(d.get("counting", True), f("counting")),
                 suspect_fraction=_num(d.get("suspect_fraction", 0.5), f("suspect_fraction"), 0.1, 1.0),
                 max_counting_flows=_int(d.get("max_counting_flows", 32), f("max_counting_flows"), 1, 4096),
                 counter_refresh_ms=_int(d.get("counter_refresh_ms", 100), f("counter_refresh_ms"), 10, 10_000,
                                         optional=True))
        if hh.min_window_s > hh.window_s:
            raise PolicyError("min_window_s must not exceed window_s", f("min_window_s"))
        return hh

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.FIELDS}


@dataclasses.dataclass(frozen=True)
class Aqm:
    discipline: str
    params: tuple[tuple[str, int | float], ...] = ()

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
        return " ".join([self.discipline] + [f"{k}={discipline.params[k].format(v)}"
                                             for k, v in params.items()])

    def to_dict(self) -> dict:
        return {"discipline": self.discipline, "params": dict(self.params)}


@dataclasses.dataclass(frozen=True)
class Port:
    """A bottleneck port: where queues, meters and the AQM apply."""
    dpid: int
    port: int
    capacity_bps: int
    aqm: Aqm | None = None

    @classmethod
    def from_dict(cls, d, field: str) -> "Port":
        d = _obj(d, field, ("dpid", "port", "capacity_bps", "aqm"), required=("dpid", "port", "capacity_bps"))
        aqm = d.get("aqm")
        return cls(dpid=_int(d["dpid"], f"{field}.dpid", 1, 2**64 - 1),
                   port=_int(d["port"], f"{field}.port", 1, OFPP_MAX),
                   capacity_bps=_int(d["capacity_bps"], f"{field}.capacity_bps", 8000, MAX_CAPACITY_BPS),
                   aqm=None if aqm is None else Aqm.from_dict(aqm, f"{field}.aqm"))

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

    FIELDS = ("dpid", "ovsdb", "collector")

    @classmethod
    def from_dict(cls, d, field: str) -> "SwitchHost":
        d = _obj(d, field, cls.FIELDS, required=("dpid", "ovsdb"))
        problem = ovsdb_remote_problem(d["ovsdb"])
        if problem:
            raise PolicyError(f"{field}.ovsdb: {problem}", f"{field}.ovsdb")
        collector = d.get("collector")
        if collector is not None:
            _host_port(collector, f"{field}.collector", "10.0.2.2:6343")
        return cls(dpid=_int(d["dpid"], f"{field}.dpid", 1, 2**64 - 1), ovsdb=d["ovsdb"], collector=collector)

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

    # --- whole-document validation ---------------------------------------------------

    @classmethod
    def from_dict(cls, d) -> "Policy":
        d = _obj(d, "", ("rules", "aggregates", "approaches", "ports", "heavy_hitters", "switches", "packet_in"))
        raw_aggs = _obj(d.get("aggregates", {}), "aggregates", None)
        aggs = {n: Aggregate(n, **DEFAULT_AGGREGATES[n]) for n in BUILTIN_AGGREGATES}
        for name, body in raw_aggs.items():
            aggs[_name(name, f"aggregates.{name}")] = Aggregate.from_dict(name, body, f"aggregates.{name}")
        rules_raw = d.get("rules", [])
        if not isinstance(rules_raw, list):
            raise PolicyError("rules must be a list", "rules")
        if len(rules_raw) > MAX_RULES:
            raise PolicyError(f"at most {MAX_RULES} rules", "rules")
        rules = tuple(Rule.from_dict(r, f"rules[{i}]") for i, r in enumerate(rules_raw))
        ports_raw = d.get("ports", [])
        if not isinstance(ports_raw, list):
            raise PolicyError("ports must be a list", "ports")
        ports = tuple(Port.from_dict(p, f"ports[{i}]") for i, p in enumerate(ports_raw))
        switches_raw = d.get("switches", [])
        if not isinstance(switches_raw, list):
            raise PolicyError("switches must be a list", "switches")
        switches = tuple(SwitchHost.from_dict(h, f"switches[{i}]") for i, h in enumerate(switches_raw))
        policy = cls(rules=rules, aggregates=tuple(aggs[n] for n in sorted(aggs)),
                     approaches=Approaches.from_dict(d.get("approaches", {}), "approaches"), ports=ports,
                     heavy_hitters=HeavyHitters.from_dict(d.get("heavy_hitters", {}), "heavy_hitters"),
                     switches=switches, packet_in=PacketIn.from_dict(d.get("packet_in", {}), "packet_in"))
        policy.check()
        return policy

    def check(self) -> None:
        """Cross-field consistency: names unique, references exist, no conflicting overlaps."""
        agg_names = {a.name for a in self.aggregates}
        seen = set()
        for i, rule in enumerate(self.rules):
            if rule.name in seen:
                raise PolicyError(f"rule name {rule.name!r} is used twice", f"rules[{i}].name", 409)
            seen.add(rule.name)
            if rule.aggregate not in agg_names:
                raise PolicyError(f"aggregate {rule.aggregate!r} does not exist", f"rules[{i}].aggregate")
            for j, other in enumerate(self.rules[:i]):
                if (other.priority == rule.priority and other.aggregate != rule.aggregate
                        and other.match.overlaps(rule.match)):
                    raise PolicyError(
                        f"rule {rule.name!r} overlaps rule {other.name!r} at the same priority "
                        f"but puts packets into {rule.aggregate!r}, not {other.aggregate!r}; "
                        "give one a higher priority or narrow its match", f"rules[{i}].match", 409)
        lq = self.approaches.limited_queue
        if lq.aggregate not in agg_names:
            raise PolicyError(f"aggregate {lq.aggregate!r} does not exist",
                              "approaches.limited_queue.aggregate")
        if lq.rate_bps is not None:
            for i, port in enumerate(self.ports):
                if lq.rate_bps > port.capacity_bps:
                    raise PolicyError(
                        f"meter rate {lq.rate_bps} bit/s is above the capacity of port "
                        f"{port.dpid}:{port.port} ({port.capacity_bps} bit/s)",
                        "approaches.limited_queue.rate_bps")
        for i, port in enumerate(self.ports):
            rate = dict(port.aqm.params).get("rate_bps") if port.aqm else None
            if rate is not None and rate > port.capacity_bps:
                raise PolicyError(
                    f"AQM rate {rate:g} bit/s is above the capacity of port {port.dpid}:{port.port} "
                    f"({port.capacity_bps} bit/s)", f"ports[{i}].aqm.params.rate_bps")
        hh = self.heavy_hitters
        if hh.threshold_bps is not None and self.ports:
            # The detector of a port sees only flows leaving that port, which cannot be faster
            # than the port: a threshold above every port's capacity never detects anything.
            widest = max(self.ports, key=lambda p: p.capacity_bps)
            if hh.threshold_bps > widest.capacity_bps:
                raise PolicyError(
                    f"heavy-hitter threshold {hh.threshold_bps} bit/s is above the capacity of every "
                    f"bottleneck port (the largest: {widest.dpid}:{widest.port}, {widest.capacity_bps} "
                    "bit/s): no flow could reach it", "heavy_hitters.threshold_bps")
        if self.heavy_hitters.enabled and not self.ports:
            raise PolicyError("heavy-hitter detection watches bottleneck ports: declare one first "
                              "(PUT /ports/{dpid}/{port})", "heavy_hitters.enabled")
        dpids = set()
        for i, host in enumerate(self.switches):
            if host.dpid in dpids:
                raise PolicyError(f"switch {host.dpid:#x} is listed twice", f"switches[{i}]", 409)
            dpids.add(host.dpid)
        ports = set()
        for i, port in enumerate(self.ports):
            if (port.dpid, port.port) in ports:
                raise PolicyError(f"port {port.dpid}:{port.port} is listed twice", f"ports[{i}]", 409)
            ports.add((port.dpid, port.port))
        dscps = {}
        for agg in self.aggregates:
            if agg.dscp in dscps and self.approaches.separate_queues:
                raise PolicyError(f"aggregates {dscps[agg.dscp]!r} and {agg.name!r} share DSCP {agg.dscp}; "
                                  "Separate Queues needs one DSCP per aggregate",
                                  f"aggregates.{agg.name}.dscp", 409)
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
