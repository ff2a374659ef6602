"""OpenFlow 1.3 messages the controller sends, in one place.

Pipeline:
  table 0 (CLASSIFY): LLDP -> controller; one rule per policy rule that writes the
      aggregate id into the metadata (and marks DSCP under Separate Queues); miss -> table 1.
  table 1 (FORWARD): one flow per (aggregate, destination host) on every switch of the
      aggregate's tree toward the host, matching the metadata and ipv4_dst (PRIO_AGG_PATH,
      PRIO_PATH for the default aggregate); a meter on the hop that leaves through a
      Limited Queue port; miss -> controller. coex.forwarding plans the flows of both
      tables (their priorities too), coex.switch_state makes them plain values (Flow, Meter)
      and the difference between two states; here they become flow-mods and meter-mods
      (flow_mod, meter_mod), and switches' flow and meter tables become values again
      (flow_of, meter_of).

Every flow we install carries a cookie under COOKIE_MASK, so we read back and delete exactly
our own flows and leave anything an operator installed by hand. Meters have no cookie: the
controller owns every meter of a switch it manages.
"""

from __future__ import annotations

from coex.sflow import FlowKey
from coex.switch_state import (COOKIE, COOKIE_MASK, COUNT_COOKIE, METADATA_MASK,  # noqa: F401 (re-exported)
                               OFPP_CONTROLLER, PACKET_IN_METER_ID, TABLE_CLASSIFY, TABLE_FORWARD, Flow, Meter,
                               match_of)

EXACT_COOKIE = 0xFFFF_FFFF_FFFF_FFFF   # a cookie mask that takes one cookie only
def flow_mod(dp, flow: Flow, command: str):
    """The flow-mod for one of Delta.steps' flow commands: add_flow, modify_flow (strict: this
    flow only, its age and counters kept) or delete_flow (strict, and only with its own cookie:
    an operator's flow of the same match and priority stays)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    match = parser.OFPMatch(**dict(flow.match))
    if command == "delete_flow":
        return parser.OFPFlowMod(datapath=dp, cookie=flow.cookie, cookie_mask=EXACT_COOKIE, table_id=flow.table,
                                 command=ofp.OFPFC_DELETE_STRICT, priority=flow.priority, out_port=ofp.OFPP_ANY,
                                 out_group=ofp.OFPG_ANY, match=match)
    modify = command == "modify_flow"
    return parser.OFPFlowMod(datapath=dp, cookie=flow.cookie, cookie_mask=EXACT_COOKIE if modify else 0,
                             table_id=flow.table, command=ofp.OFPFC_MODIFY_STRICT if modify else ofp.OFPFC_ADD,
                             priority=flow.priority, match=match, instructions=_instructions(dp, flow),
                             idle_timeout=flow.idle_timeout)


def _instructions(dp, flow: Flow) -> list:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    inst = []
    if flow.meter is not None:
        inst.append(parser.OFPInstructionMeter(flow.meter, ofp.OFPIT_METER))
    if flow.actions:
        inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [_action(dp, a) for a in flow.actions]))
    if flow.metadata is not None:
        inst.append(parser.OFPInstructionWriteMetadata(flow.metadata, METADATA_MASK))
    if flow.goto is not None:
        inst.append(parser.OFPInstructionGotoTable(flow.goto))
    return inst


def _action(dp, action: tuple):
    parser = dp.ofproto_parser
    kind, *args = action
    if kind == "output":
        return parser.OFPActionOutput(*args)
    if kind == "set_queue":
        return parser.OFPActionSetQueue(args[0])
    if kind == "set_field":
        return parser.OFPActionSetField(**{args[0]: args[1]})
    raise ValueError(f"no such action: {action!r}")


def meter_mod(dp, meter: Meter, command: str):
    """The meter-mod for one of Delta.steps' meter commands (add_meter, modify_meter,
    delete_meter): one drop band, with burst and statistics."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    if command == "delete_meter":
        return parser.OFPMeterMod(datapath=dp, command=ofp.OFPMC_DELETE, meter_id=meter.meter_id)
    unit = ofp.OFPMF_PKTPS if meter.unit == "pktps" else ofp.OFPMF_KBPS
    return parser.OFPMeterMod(datapath=dp, command=ofp.OFPMC_ADD if command == "add_meter" else ofp.OFPMC_MODIFY,
                              flags=unit | ofp.OFPMF_BURST | ofp.OFPMF_STATS, meter_id=meter.meter_id,
                              bands=[parser.OFPMeterBandDrop(rate=meter.rate, burst_size=meter.burst)])


def message(dp, command: str, value):
    """The OpenFlow message of one (command, value) of Delta.steps."""
    return meter_mod(dp, value, command) if command.endswith("_meter") else flow_mod(dp, value, command)


# --- what a switch holds, read back ---------------------------------------------------------

def our_flows_request(dp):
    """Every flow of ours in every table (cookie-masked), for flow_of."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, COOKIE, COOKIE_MASK,
                                      parser.OFPMatch())


def meters_request(dp):
    """Every meter's configuration, for meter_of."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPMeterConfigStatsRequest(dp, 0, ofp.OFPM_ALL)


def flow_of(dp, entry) -> Flow:
    """A flow-stats entry as the Flow that would have installed it. An output's max_len
    counts only toward the controller (switches echo whatever was sent for other ports)."""
    ofp = dp.ofproto
    actions, goto, metadata, meter = (), None, None, None
    for inst in entry.instructions:
        if inst.type == ofp.OFPIT_APPLY_ACTIONS:
            actions = tuple(_action_of(dp, a) for a in inst.actions)
        elif inst.type == ofp.OFPIT_GOTO_TABLE:
            goto = inst.table_id
        elif inst.type == ofp.OFPIT_WRITE_METADATA:
            # a mask other than ours is not a value of ours: it must not compare equal to one
            metadata = inst.metadata if inst.metadata_mask == METADATA_MASK else (inst.metadata, inst.metadata_mask)
        elif inst.type == ofp.OFPIT_METER:
            meter = inst.meter_id
        else:
            actions += (("instruction", inst.type),)
    return Flow(entry.table_id, entry.priority, match_of(dict(entry.match.items())), actions, goto, metadata, meter,
                entry.cookie, entry.idle_timeout)


def _action_of(dp, a) -> tuple:
    ofp = dp.ofproto
    if a.type == ofp.OFPAT_OUTPUT:
        return ("output", a.port, a.max_len) if a.port == OFPP_CONTROLLER else ("output", a.port)
    if a.type == ofp.OFPAT_SET_QUEUE:
        return ("set_queue", a.queue_id)
    if a.type == ofp.OFPAT_SET_FIELD:
        return ("set_field", a.key, a.value)
    return ("action", a.type)  # none of ours: it makes the flow differ from what we want


def meter_of(dp, entry) -> Meter:
    """A meter-config entry as a Meter; one that is not a single drop band is given rate -1,
    so that it differs from every meter of ours and is replaced."""
    ofp = dp.ofproto
    unit = "pktps" if entry.flags & ofp.OFPMF_PKTPS else "kbps"
    bands = entry.bands
    if len(bands) != 1 or bands[0].type != ofp.OFPMBT_DROP:
        return Meter(entry.meter_id, unit, -1, -1)
    return Meter(entry.meter_id, unit, bands[0].rate, bands[0].burst_size)


def barrier(dp):
    return dp.ofproto_parser.OFPBarrierRequest(dp)


# --- packets, counters ---------------------------------------------------------------------

def packet_out(dp, out_ports, data: bytes) -> None:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    actions = [parser.OFPActionOutput(p) for p in out_ports]
    if actions:
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=ofp.OFPP_CONTROLLER, actions=actions, data=data))


def classify_flow_stats_request(dp):
    """Ask for the counters of our table-0 flows (counting and steering flows among them)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPFlowStatsRequest(dp, 0, TABLE_CLASSIFY, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                      COOKIE, COOKIE_MASK, parser.OFPMatch())


def flow_key_of(match):
    """The 5-tuple of a counting or steering flow's match, as coex.sflow.FlowKey."""
    fields = dict(match.items())
    proto = fields.get("ip_proto", 0)
    name = {6: "tcp", 17: "udp"}.get(proto)
    return FlowKey(fields.get("ipv4_src"), fields.get("ipv4_dst"), proto,
                   fields.get(f"{name}_src", 0) if name else 0, fields.get(f"{name}_dst", 0) if name else 0)


def path_flow_stats_request(dp):
    """Ask for the counters of our table-1 flows (the per-aggregate forwarding flows)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPFlowStatsRequest(dp, 0, TABLE_FORWARD, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                      COOKIE, COOKIE_MASK, parser.OFPMatch())
