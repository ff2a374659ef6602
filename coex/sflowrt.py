"""sFlow-RT as an optional backend: its REST bodies in, flow rates for the detector out.

For operators who already run sFlow-RT (InMon's analyser; it cannot be installed on our
machines, where the embedded collector coex.sflow_collector is the default). Pure: this
module builds and parses REST bodies; ryu_app/sflowrt_client.py does the HTTP.

The REST API used, as documented at sflow-rt.com/reference.php ("Defining Flows" and the
REST API table):

    PUT /flow/{name}/json          body {"keys": "...", "value": "bytes", ...}
        defines a flow: ``keys`` is a comma-separated list of packet attributes that form
        the flow key, ``value`` what is summed ("bytes" gives bytes per second, "frames"
        frames per second), optional ``filter``, ``t`` (smoothing time constant, seconds)
        and ``n`` (flows tracked per data source).
    GET /activeflows/{agent}/{name}/json?maxFlows=&minValue=&aggMode=
        the largest active flows: a JSON array of objects
        {"key": "<key values joined by ','>", "value": <rate>, "agent": "<ip>",
         "dataSource": "<ifIndex or name>"}, largest value first.

With the default keys "ipsource,ipdestination,ipprotocol,tcpsourceport,tcpdestinationport"
and value "bytes", a key string parses into a coex.sflow.FlowKey and value * 8 is the
flow's rate in bit/s, which HeavyHitterDetector.observe_rate() takes.

Which port a flow crosses: sFlow-RT's "dataSource" is the data source of the samples, and
Open vSwitch samples a whole bridge (our captures, tests/fixtures/sflow: every flow sample
has data source type 2, index 1000, with the ports only in its input/output fields), so
"dataSource" never names a port for OVS. The flow keys "inputifindex" and "outputifindex"
(sFlow-RT's flow key attributes for those fields, sflow-rt.com/define_flow.php) do:
PORT_KEYS appends "outputifindex", and ActiveFlow.output_ifindex / input_ifindex carry
them when the definition has them.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Optional, Union

from coex.sflow import FlowKey

DEFAULT_FLOW_NAME = "ckcd_coex_flows"
DEFAULT_KEYS = "ipsource,ipdestination,ipprotocol,tcpsourceport,tcpdestinationport"
UDP_KEYS = "ipsource,ipdestination,ipprotocol,udpsourceport,udpdestinationport"
# The 5-tuple per egress port: what the controller defines (one rate per flow and port).
PORT_KEYS = DEFAULT_KEYS + ",outputifindex"
VALUES = ("bytes", "frames")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_KEY_TOKEN = re.compile(r"^[A-Za-z0-9_:.\-\[\]]+$")
MAX_ENTRIES = 100_000


class SFlowRTFormatError(ValueError):
    """A response body that is not what the documented API returns."""


@dataclass(frozen=True)
class ActiveFlow:
    key: str                       # sFlow-RT's key string, as received
    flow_key: Optional[FlowKey]    # parsed when the flow uses the 5-tuple keys
    value: float                   # per second, in the flow's value unit
    rate_bps: Optional[float]      # value * 8 for value "bytes", else None
    agent: str
    data_source: str
    input_ifindex: Optional[int] = None   # the "inputifindex" key, when defined
    output_ifindex: Optional[int] = None  # the "outputifindex" key, when defined


@dataclass(frozen=True)
class ActiveFlows:
    flows: list                    # ActiveFlow, largest first, one per key
    rejected: int                  # entries that were not valid and were skipped


def check_flow_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"name must be 1-64 of [A-Za-z0-9_-], got {name!r}")
    return name


def flow_definition(keys: str = DEFAULT_KEYS, value: str = "bytes",
                    filter: Optional[str] = None, t: Optional[float] = None,
                    n: Optional[int] = None) -> dict:
    """The body of PUT /flow/{name}/json. Raises ValueError naming a bad parameter."""
    if not isinstance(keys, str) or not keys or \
            not all(_KEY_TOKEN.match(k) for k in keys.split(",")):
        raise ValueError(f"keys must be a comma-separated list of sFlow-RT attributes, got {keys!r}")
    if value not in VALUES:
        raise ValueError(f"value must be one of {', '.join(VALUES)}, got {value!r}")
    body: dict[str, Any] = {"keys": keys, "value": value}
    if filter is not None:
        if not isinstance(filter, str) or not filter:
            raise ValueError(f"filter must be a non-empty string, got {filter!r}")
        body["filter"] = filter
    if t is not None:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"t must be a number of seconds > 0, got {t!r}")
        body["t"] = t
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        body["n"] = n
    return body


def parse_flow_key(key: str, keys: str = DEFAULT_KEYS) -> Optional[FlowKey]:
    """A key string of a 5-tuple flow definition -> FlowKey; None if it does not parse."""
    names = keys.split(",")
    parts = key.split(",")
    if len(parts) != len(names):
        return None
    fields = dict(zip(names, parts))
    try:
        src = str(ipaddress.ip_address(fields["ipsource"]))
        dst = str(ipaddress.ip_address(fields["ipdestination"]))
        proto = int(fields["ipprotocol"])
        sport = int(fields.get("tcpsourceport", fields.get("udpsourceport", "0")))
        dport = int(fields.get("tcpdestinationport", fields.get("udpdestinationport", "0")))
    except (KeyError, ValueError):
        return None
    if not (0 <= proto <= 255 and 0 <= sport <= 65535 and 0 <= dport <= 65535):
        return None
    return FlowKey(src, dst, proto, sport, dport)


def parse_ifindexes(key: str, keys: str) -> tuple[Optional[int], Optional[int]]:
    """(inputifindex, outputifindex) from a key string, None where the definition lacks the
    attribute or the value is not an ifIndex."""
    names = keys.split(",")
    parts = key.split(",")
    out: list[Optional[int]] = []
    for name in ("inputifindex", "outputifindex"):
        value = None
        if len(parts) == len(names) and name in names:
            text = parts[names.index(name)]
            if text.isdigit() and int(text) <= 0xFFFFFFFF:
                value = int(text)
        out.append(value)
    return out[0], out[1]


def parse_active_flows(body: Union[str, bytes, list], keys: str = DEFAULT_KEYS,
                       value: str = "bytes") -> ActiveFlows:
    """Parse a GET /activeflows/... body. Entries that are not objects with a string "key"
    and a finite, non-negative numeric "value" are skipped and counted; a body that is not
    a JSON array raises SFlowRTFormatError. One flow per key (the largest value), largest
    first."""
    if value not in VALUES:
        raise ValueError(f"value must be one of {', '.join(VALUES)}, got {value!r}")
    if isinstance(body, (str, bytes, bytearray)):
        try:
            body = json.loads(body)
        except (ValueError, UnicodeDecodeError) as err:
            raise SFlowRTFormatError(f"activeflows body is not JSON: {err}") from None
    if not isinstance(body, list):
        raise SFlowRTFormatError(f"activeflows body must be a JSON array, got {type(body).__name__}")
    if len(body) > MAX_ENTRIES:
        raise SFlowRTFormatError(f"activeflows body has {len(body)} entries (> {MAX_ENTRIES})")
    best: dict[str, ActiveFlow] = {}
    rejected = 0
    for entry in body:
        if not isinstance(entry, dict):
            rejected += 1
            continue
        key, val = entry.get("key"), entry.get("value")
        if not isinstance(key, str) or isinstance(val, bool) or not isinstance(val, (int, float)) \
                or not math.isfinite(val) or val < 0:
            rejected += 1
            continue
        in_if, out_if = parse_ifindexes(key, keys)
        flow = ActiveFlow(key=key, flow_key=parse_flow_key(key, keys), value=float(val),
                          rate_bps=float(val) * 8 if value == "bytes" else None,
                          agent=str(entry.get("agent", "")),
                          data_source=str(entry.get("dataSource", "")),
                          input_ifindex=in_if, output_ifindex=out_if)
        old = best.get(key)
        if old is None or flow.value > old.value:
            best[key] = flow
    flows = sorted(best.values(), key=lambda f: f.value, reverse=True)
    return ActiveFlows(flows, rejected)


def feed_detector(detector, active: ActiveFlows, now: float) -> list:
    """Hand every parsed 5-tuple flow with a rate to HeavyHitterDetector.observe_rate()."""
    events = []
    for f in active.flows:
        if f.flow_key is not None and f.rate_bps is not None:
            events.extend(detector.observe_rate(f.flow_key, f.rate_bps, now))
    return events
