"""What one switch should hold, as data, and the difference between two such states.

Every flow and meter ckcd-coex installs is a plain value here (Flow, Meter): its table,
priority and match as OpenFlow 1.3 field tuples, its instructions, cookie and timeout. A
SwitchState is a switch's whole set; desired() builds the one a forwarding plan asks of a
switch, and diff() turns a state the switch holds (read back from its flow and meter
tables, or what was last sent) into the one wanted with as few messages as it can: deletes
before adds, in steps that each must finish before the next starts (Delta.steps; the shell
puts a barrier after each). A flow that only changes its instructions is modified in place,
so its age and counters stay, as they do for every flow that does not change.

Pure: no Ryu, no sockets. ryu_app/flows.py turns these values into flow-mods and meter-mods
and switches' replies back into them (Faucet's valve, which returns the messages a change
needs, is the shape).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from coex.forwarding import PRIO_AGG_PATH, PRIO_PATH, ClassifyFlow, ForwardingPlan, HopFlow, Tree
from coex.policy import Match, PacketIn
from coex.ports import PortState
from coex.topology import PortRef

COOKIE = 0xC0E0_0000_0000_0000
COOKIE_MASK = 0xFFFF_0000_0000_0000  # ours: every cookie under this prefix
COUNT_COOKIE = COOKIE | 1            # a heavy-hitter suspect's counting flow: removed by its own cookie
COUNT_IDLE_TIMEOUT_S = 2             # a suspect that ends leaves no counting flow behind

TABLE_CLASSIFY = 0
TABLE_FORWARD = 1

PRIO_MISS = 0
PRIO_LLDP = 65000

# The packet-in limit's meter (coex.policy.PacketIn), far above Limited Queue's ids (1, 2, ...
# per switch: one per bottleneck port).
PACKET_IN_METER_ID = 0xFFFF
METADATA_MASK = 0xFF                 # the aggregate id lives in the low byte of the metadata

# OpenFlow 1.3 numbers the values below carry (the specification's, section 7.2.5 and A.2.5).
OFPP_CONTROLLER = 0xFFFF_FFFD
OFPCML_NO_BUFFER = 0xFFFF            # send the whole packet to the controller
ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_LLDP = 0x88CC

Field = tuple  # (OXM field name, value) or (name, (value, mask)), as Ryu's OFPMatch names them
Action = tuple  # ("set_field", name, value) | ("set_queue", index) | ("output", port[, max_len])


@dataclasses.dataclass(frozen=True, order=True)
class Flow:
    """One flow entry. (table, priority, match) is what OpenFlow identifies it by (`key`);
    the rest is what it does and how it is kept."""
    table: int
    priority: int
    match: tuple[Field, ...] = ()        # sorted by field name; () matches everything
    actions: tuple[Action, ...] = ()     # apply-actions, in order
    goto: int | None = None
    metadata: int | None = None          # written under METADATA_MASK
    meter: int | None = None
    cookie: int = COOKIE
    idle_timeout: int = 0

    @property
    def key(self) -> tuple:
        return (self.table, self.priority, self.match)

    def instructions(self) -> tuple:
        return (self.actions, self.goto, self.metadata, self.meter)


@dataclasses.dataclass(frozen=True, order=True)
class Meter:
    """One meter with one drop band: rate and burst in kbit/s and kbit, or packets/s and
    packets (unit "pktps"); always with statistics."""
    meter_id: int
    unit: str    # "kbps" or "pktps"
    rate: int
    burst: int


@dataclasses.dataclass(frozen=True)
class SwitchState:
    flows: frozenset[Flow] = frozenset()
    meters: frozenset[Meter] = frozenset()

    @classmethod
    def of(cls, flows: Iterable[Flow] = (), meters: Iterable[Meter] = ()) -> "SwitchState":
        return cls(frozenset(flows), frozenset(meters))


@dataclasses.dataclass(frozen=True)
class Delta:
    """The messages that take a switch from one state to another, by kind. Flows whose
    cookie or idle timeout change are deleted and added again (OpenFlow's modify keeps
    both); a meter that changes is modified."""
    delete_flows: tuple[Flow, ...] = ()
    delete_meters: tuple[Meter, ...] = ()
    add_meters: tuple[Meter, ...] = ()
    modify_meters: tuple[Meter, ...] = ()
    modify_flows: tuple[Flow, ...] = ()
    add_flows: tuple[Flow, ...] = ()

    def __bool__(self) -> bool:
        return any(dataclasses.astuple(self))

    def steps(self) -> list[list[tuple[str, Flow | Meter]]]:
        """(command, value) lists, each to be done before the next starts. Flows leave or
        let go of their meters first: OpenFlow deletes a meter's flows with it, and a modify
        of a flow no longer there does nothing, so a flow that stops using a meter must have
        stopped before the meter goes. Then the meters. Then the flows that need a new meter,
        and the new flows. Empty steps are left out."""
        new_meters = {m.meter_id for m in self.add_meters}
        early = [f for f in self.modify_flows if f.meter not in new_meters]
        late = [f for f in self.modify_flows if f.meter in new_meters]
        steps = [[("delete_flow", f) for f in self.delete_flows] + [("modify_flow", f) for f in early],
                 [("delete_meter", m) for m in self.delete_meters] + [("add_meter", m) for m in self.add_meters]
                 + [("modify_meter", m) for m in self.modify_meters],
                 [("modify_flow", f) for f in late] + [("add_flow", f) for f in self.add_flows]]
        return [s for s in steps if s]


def diff(held: SwitchState, wanted: SwitchState) -> Delta:
    """The delta from `held` (what the switch has of ours) to `wanted`. Two flows of one key
    in `held` (a switch cannot hold them; a stale read could) are both deleted unless one is
    exactly the wanted one."""
    held_by_key: dict[tuple, list[Flow]] = {}
    for f in held.flows:
        held_by_key.setdefault(f.key, []).append(f)
    wanted_by_key = {f.key: f for f in wanted.flows}
    delete, modify, add = [], [], []
    for key, have in held_by_key.items():
        want = wanted_by_key.get(key)
        if want in have:
            delete += [f for f in have if f != want]
        elif want is not None and len(have) == 1 and _modifiable(have[0], want):
            modify.append(want)
        else:
            delete += have
            if want is not None:
                add.append(want)
    add += [f for key, f in wanted_by_key.items() if key not in held_by_key]
    held_meters = {m.meter_id: m for m in held.meters}
    wanted_meters = {m.meter_id: m for m in wanted.meters}
    return Delta(delete_flows=tuple(sorted(delete)),
                 delete_meters=tuple(sorted(m for i, m in held_meters.items() if i not in wanted_meters)),
                 add_meters=tuple(sorted(m for i, m in wanted_meters.items() if i not in held_meters)),
                 modify_meters=tuple(sorted(m for i, m in wanted_meters.items()
                                            if i in held_meters and held_meters[i] != m)),
                 modify_flows=tuple(sorted(modify)), add_flows=_adds_in_order(add))


def _modifiable(have: Flow, want: Flow) -> bool:
    """A modify can take `have` to `want`: only the instructions differ."""
    return have.cookie == want.cookie and have.idle_timeout == want.idle_timeout


def _adds_in_order(flows: list[Flow]) -> tuple[Flow, ...]:
    """Table 1 before table 0: a packet classified into an aggregate finds its forwarding
    flow already there."""
    return tuple(sorted(flows, key=lambda f: (-f.table, f)))


# --- what a switch should hold ---------------------------------------------------------------

def desired(plan: ForwardingPlan, packet_in: PacketIn, dpid: int, trees: Mapping[tuple[str, str], Tree],
            steered: Iterable = (), counted: Iterable = (),
            port_states: Mapping[PortRef, PortState] | None = None) -> SwitchState:
    """Every flow and meter of ours switch dpid should hold: the base flows and the packet-in
    meter, one classification flow per policy rule, the steered heavy hitters', the counting
    flows of the suspects counted on it, its hop of every tree through it, and its Limited
    Queue meters."""
    port_states = port_states or {}
    flows = list(base_flows(packet_in))
    flows += [classify_flow(f) for f in plan.classify_flows()]
    flows += [classify_flow(plan.steer_flow(key)) for key in steered]
    flows += [classify_flow(f, counting=True) for f in map(plan.count_flow, counted) if f is not None]
    for (agg, dst_ip), tree in trees.items():
        if dpid in tree:
            flows.append(hop_flow(plan.hop_flow(agg, dst_ip, dpid, tree[dpid],
                                                port_states.get((dpid, tree[dpid])))))
    meters = [Meter(m.meter_id, "kbps", m.rate_kbps, m.burst_kbit) for m in plan.meters if m.dpid == dpid]
    meters += packet_in_meters(packet_in)
    return SwitchState.of(flows, meters)


def packet_in_meters(packet_in: PacketIn) -> list[Meter]:
    if packet_in.limit_pps is None:
        return []
    return [Meter(PACKET_IN_METER_ID, "pktps", packet_in.limit_pps, packet_in.burst)]


def base_flows(packet_in: PacketIn) -> list[Flow]:
    """LLDP to the controller; table 0 falls through to table 1; table 1 misses go up,
    through the packet-in meter when the policy sets a limit. LLDP stays outside the meter: a
    storm of new flows must not starve discovery and expire the links."""
    to_controller = (("output", OFPP_CONTROLLER, OFPCML_NO_BUFFER),)
    meter = PACKET_IN_METER_ID if packet_in.limit_pps is not None else None
    return [Flow(TABLE_CLASSIFY, PRIO_LLDP, match_of({"eth_type": ETH_TYPE_LLDP}), to_controller),
            Flow(TABLE_CLASSIFY, PRIO_MISS, goto=TABLE_FORWARD),
            Flow(TABLE_FORWARD, PRIO_MISS, actions=to_controller, meter=meter)]


def classify_flow(flow: ClassifyFlow, counting: bool = False) -> Flow:
    """A table-0 flow as coex.forwarding planned it: [set DSCP] [write metadata], go to 1.
    counting: a suspect's counting flow (its cookie, an idle timeout)."""
    actions = () if flow.dscp is None else (("set_field", "ip_dscp", flow.dscp),)
    return Flow(TABLE_CLASSIFY, flow.priority, classify_match(flow.match), actions, goto=TABLE_FORWARD,
                metadata=flow.agg_id, cookie=COUNT_COOKIE if counting else COOKIE,
                idle_timeout=COUNT_IDLE_TIMEOUT_S if counting else 0)


def hop_flow(hop: HopFlow) -> Flow:
    """A forwarding flow as coex.forwarding planned it: [set_queue] output, under its meter."""
    actions = (() if hop.queue_index is None else (("set_queue", hop.queue_index),)) + (("output", hop.out_port),)
    return Flow(TABLE_FORWARD, hop.priority, dest_match(hop.dst_ip, hop.agg_id), actions, meter=hop.meter_id)


@dataclasses.dataclass(frozen=True)
class Hop:
    """What a forwarding flow says of its tree: this switch sends the aggregate's packets for
    dst_ip out of out_port."""
    agg_id: int
    dst_ip: str
    out_port: int


def hop_of(flow: Flow) -> Hop | None:
    """The hop a table-1 forwarding flow of ours carries out (hop_flow's inverse); None for any
    other flow."""
    fields = dict(flow.match)
    metadata, dst = fields.get("metadata"), fields.get("ipv4_dst")
    outputs = [a for a in flow.actions if a[0] == "output"]
    if (flow.table != TABLE_FORWARD or flow.cookie != COOKIE or flow.priority not in (PRIO_PATH, PRIO_AGG_PATH)
            or not isinstance(metadata, tuple) or metadata[1] != METADATA_MASK or not isinstance(dst, str)
            or len(outputs) != 1 or flow.actions[-1] != outputs[0]):
        return None
    return Hop(metadata[0], dst, outputs[0][1])


def match_of(fields: Mapping[str, object]) -> tuple[Field, ...]:
    return tuple(sorted(fields.items()))


def classify_match(match) -> tuple[Field, ...]:
    """A rule's Match, one flow's 5-tuple (a FlowKey), or None: any IPv4."""
    if match is None:
        return match_of({"eth_type": ETH_TYPE_IPV4})
    if isinstance(match, Match):
        return rule_match(match)
    return five_tuple_match(match)


def rule_match(match: Match) -> tuple[Field, ...]:
    """The OpenFlow match of a coex.policy.Match (always IPv4); a /32 is an exact address."""
    fields: dict[str, object] = {"eth_type": ETH_TYPE_IPV4}
    for key in ("ipv4_src", "ipv4_dst"):
        value = getattr(match, key)
        if value is not None:
            addr, plen = value.split("/")
            fields[key] = addr if plen == "32" else (addr, prefix_mask(int(plen)))
    if match.ip_proto is not None:
        fields["ip_proto"] = match.ip_proto
    if match.dscp is not None:
        fields["ip_dscp"] = match.dscp
    if match.eth_src is not None:
        fields["eth_src"] = match.eth_src.lower()
    proto = {6: "tcp", 17: "udp"}.get(match.ip_proto)
    if match.tp_src is not None:
        fields[f"{proto}_src"] = match.tp_src
    if match.tp_dst is not None:
        fields[f"{proto}_dst"] = match.tp_dst
    return match_of(fields)


def five_tuple_match(key) -> tuple[Field, ...]:
    """Exact match on one flow (a coex.sflow.FlowKey: src/dst IP, protocol, ports)."""
    fields: dict[str, object] = {"eth_type": ETH_TYPE_IPV4, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip,
                                 "ip_proto": key.protocol}
    proto = {6: "tcp", 17: "udp"}.get(key.protocol)
    if proto:
        fields[f"{proto}_src"] = key.src_port
        fields[f"{proto}_dst"] = key.dst_port
    return match_of(fields)


def dest_match(dst_ip: str, agg_id: int | None) -> tuple[Field, ...]:
    """Forwarding flows always match the aggregate id: a default flow (id 0) must not carry
    packets that table 0 put into another aggregate, or they would never reach the
    controller to get their own tree."""
    return match_of({"metadata": (agg_id or 0, METADATA_MASK), "eth_type": ETH_TYPE_IPV4, "ipv4_dst": dst_ip})


def prefix_mask(plen: int) -> str:
    bits = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
    return ".".join(str((bits >> s) & 0xFF) for s in (24, 16, 8, 0))
