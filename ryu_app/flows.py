"""OpenFlow 1.3 messages the controller sends, in one place.

Pipeline:
  table 0 (CLASSIFY): LLDP -> controller; one rule per policy rule that writes the
      aggregate id into the metadata (and marks DSCP under Separate Queues); miss -> table 1.
  table 1 (FORWARD): one flow per (aggregate, destination host) on every switch of the
      aggregate's tree toward the host, matching the metadata and ipv4_dst (PRIO_AGG_PATH,
      PRIO_PATH for the default aggregate); a meter on the hop that leaves through a
      Limited Queue port; miss -> controller. coex.forwarding plans the flows of both
      tables (their priorities too); add_classify_flow() and add_hop_flow() only write them.

Every flow we install carries COOKIE, so on (re)connect we delete exactly our own flows
and leave anything an operator installed by hand.
"""

from __future__ import annotations

from coex.forwarding import ClassifyFlow, HopFlow
from coex.policy import Match
from coex.sflow import FlowKey

COOKIE = 0xC0E0_0000_0000_0000
COOKIE_MASK = 0xFFFF_0000_0000_0000
COUNT_COOKIE = COOKIE | 1    # a heavy-hitter suspect's counting flow: removed by its own cookie
COUNT_IDLE_TIMEOUT_S = 2     # a suspect that ends leaves no counting flow behind

TABLE_CLASSIFY = 0
TABLE_FORWARD = 1

PRIO_MISS = 0
PRIO_LLDP = 65000

# The packet-in limit's meter (coex.policy.PacketIn), far above Limited Queue's ids (1, 2, ...
# per switch: one per bottleneck port).
PACKET_IN_METER_ID = 0xFFFF

METADATA_MASK = 0xFF         # the aggregate id lives in the low byte


def add_flow(dp, table_id: int, priority: int, match, actions=(), goto=None, meter_id=None,
             metadata=None, idle_timeout: int = 0, cookie: int = COOKIE) -> None:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    inst = []
    if meter_id is not None:
        inst.append(parser.OFPInstructionMeter(meter_id, ofp.OFPIT_METER))
    if actions:
        inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(actions)))
    if metadata is not None:
        inst.append(parser.OFPInstructionWriteMetadata(metadata, METADATA_MASK))
    if goto is not None:
        inst.append(parser.OFPInstructionGotoTable(goto))
    dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=cookie, table_id=table_id, priority=priority,
                                  match=match, instructions=inst, idle_timeout=idle_timeout))


def delete_our_flows(dp, table_id=None, match=None) -> None:
    """Delete every flow with our cookie (in one table, matching `match`, if given)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=COOKIE, cookie_mask=COOKIE_MASK,
                                  table_id=ofp.OFPTT_ALL if table_id is None else table_id,
                                  command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                                  out_group=ofp.OFPG_ANY, match=match or parser.OFPMatch()))


def install_base_flows(dp, packet_in) -> None:
    """LLDP to the controller; table 0 falls through to table 1; table 1 misses go up,
    through the packet-in meter when the policy sets a limit (`packet_in`, a
    coex.policy.PacketIn). LLDP stays outside the meter: a storm of new flows must not
    starve discovery and expire the links."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    to_ctrl = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
    meter_id = None
    if packet_in.limit_pps is not None:
        band = parser.OFPMeterBandDrop(rate=packet_in.limit_pps, burst_size=packet_in.burst)
        dp.send_msg(parser.OFPMeterMod(datapath=dp, command=ofp.OFPMC_ADD,
                                       flags=ofp.OFPMF_PKTPS | ofp.OFPMF_BURST | ofp.OFPMF_STATS,
                                       meter_id=PACKET_IN_METER_ID, bands=[band]))
        meter_id = PACKET_IN_METER_ID
    add_flow(dp, TABLE_CLASSIFY, PRIO_LLDP, parser.OFPMatch(eth_type=0x88CC), to_ctrl)
    add_flow(dp, TABLE_CLASSIFY, PRIO_MISS, parser.OFPMatch(), goto=TABLE_FORWARD)
    add_flow(dp, TABLE_FORWARD, PRIO_MISS, parser.OFPMatch(), to_ctrl, meter_id=meter_id)


def rule_match(parser, match) -> object:
    """OpenFlow match for a coex.policy.Match (always IPv4)."""
    fields = {"eth_type": 0x0800}
    for key in ("ipv4_src", "ipv4_dst"):
        value = getattr(match, key)
        if value is not None:
            addr, plen = value.split("/")
            fields[key] = addr if plen == "32" else (addr, _mask(int(plen)))
    if match.ip_proto is not None:
        fields["ip_proto"] = match.ip_proto
    if match.dscp is not None:
        fields["ip_dscp"] = match.dscp
    if match.eth_src is not None:
        fields["eth_src"] = match.eth_src
    proto = {6: "tcp", 17: "udp"}.get(match.ip_proto)
    if match.tp_src is not None:
        fields[f"{proto}_src"] = match.tp_src
    if match.tp_dst is not None:
        fields[f"{proto}_dst"] = match.tp_dst
    return parser.OFPMatch(**fields)


def add_classify_flow(dp, flow: ClassifyFlow, counting: bool = False) -> None:
    """A table-0 flow as coex.forwarding planned it: [set DSCP] [write metadata], go to 1.
    counting: a suspect's counting flow (its cookie, an idle timeout)."""
    parser = dp.ofproto_parser
    actions = [] if flow.dscp is None else [parser.OFPActionSetField(ip_dscp=flow.dscp)]
    add_flow(dp, TABLE_CLASSIFY, flow.priority, _classify_match(parser, flow.match), actions,
             goto=TABLE_FORWARD, metadata=flow.agg_id, idle_timeout=COUNT_IDLE_TIMEOUT_S if counting else 0,
             cookie=COUNT_COOKIE if counting else COOKIE)


def delete_counting_flow(dp, key) -> None:
    """Remove one suspect's counting flow, and only it (the steering flow of the same
    5-tuple has another cookie)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=COUNT_COOKIE, cookie_mask=0xFFFF_FFFF_FFFF_FFFF,
                                  table_id=TABLE_CLASSIFY, command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                                  out_group=ofp.OFPG_ANY, match=five_tuple_match(parser, key)))


def _classify_match(parser, match) -> object:
    if match is None:
        return parser.OFPMatch(eth_type=0x0800)
    if isinstance(match, Match):
        return rule_match(parser, match)
    return five_tuple_match(parser, match)


def five_tuple_match(parser, key) -> object:
    """Exact match on one flow (a coex.sflow.FlowKey: src/dst IP, protocol, ports)."""
    fields = {"eth_type": 0x0800, "ipv4_src": key.src_ip, "ipv4_dst": key.dst_ip, "ip_proto": key.protocol}
    proto = {6: "tcp", 17: "udp"}.get(key.protocol)
    if proto:
        fields[f"{proto}_src"] = key.src_port
        fields[f"{proto}_dst"] = key.dst_port
    return parser.OFPMatch(**fields)


def _mask(plen: int) -> str:
    bits = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
    return ".".join(str((bits >> s) & 0xFF) for s in (24, 16, 8, 0))


def dest_match(parser, dst_ip: str, agg_id: int | None):
    """Forwarding flows always match the aggregate id: a default flow (id 0) must not carry
    packets that table 0 put into another aggregate, or they would never reach the
    controller to get their own tree."""
    return parser.OFPMatch(metadata=(agg_id or 0, METADATA_MASK), eth_type=0x0800, ipv4_dst=dst_ip)


def add_hop_flow(dp, hop: HopFlow) -> None:
    """A forwarding flow as coex.forwarding planned it: [set_queue] output, under its meter."""
    parser = dp.ofproto_parser
    actions = [] if hop.queue_index is None else [parser.OFPActionSetQueue(hop.queue_index)]
    actions.append(parser.OFPActionOutput(hop.out_port))
    add_flow(dp, TABLE_FORWARD, hop.priority, dest_match(parser, hop.dst_ip, hop.agg_id),
             actions, meter_id=hop.meter_id)


def set_meters(dp, plans) -> None:
    """Replace every meter on the switch with the planned Limited Queue ones (drop band at
    the rate). Deleting every meter deletes the flows that use them too: call it before
    install_base_flows (the packet-in meter) and the forwarding flows."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    dp.send_msg(parser.OFPMeterMod(datapath=dp, command=ofp.OFPMC_DELETE, meter_id=ofp.OFPM_ALL))
    for m in plans:
        band = parser.OFPMeterBandDrop(rate=m.rate_kbps, burst_size=m.burst_kbit)
        dp.send_msg(parser.OFPMeterMod(datapath=dp, command=ofp.OFPMC_ADD,
                                       flags=ofp.OFPMF_KBPS | ofp.OFPMF_BURST | ofp.OFPMF_STATS,
                                       meter_id=m.meter_id, bands=[band]))


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
