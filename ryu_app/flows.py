"""OpenFlow 1.3 messages the controller sends, in one place.

Every flow we install carries COOKIE, so on (re)connect we can delete exactly
our own flows and leave anything an operator installed by hand.
"""

from __future__ import annotations

COOKIE = 0xC0E0_0000_0000_0000
COOKIE_MASK = 0xFFFF_0000_0000_0000

# Priorities, low to high. Aggregate and heavy-hitter rules go above PRIO_PATH.
PRIO_TABLE_MISS = 0
PRIO_PATH = 100
PRIO_LLDP = 65000


def add_flow(dp, priority: int, match, actions, idle_timeout: int = 0, hard_timeout: int = 0,
             cookie: int = COOKIE) -> None:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=cookie, priority=priority, match=match,
                                  instructions=inst, idle_timeout=idle_timeout,
                                  hard_timeout=hard_timeout))


def delete_our_flows(dp, match=None) -> None:
    """Delete every flow with our cookie (optionally only those matching `match`)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=COOKIE, cookie_mask=COOKIE_MASK,
                                  table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE,
                                  out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                  match=match or parser.OFPMatch()))


def install_base_flows(dp) -> None:
    """Table-miss to the controller, and LLDP always to the controller."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    to_ctrl = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
    add_flow(dp, PRIO_TABLE_MISS, parser.OFPMatch(), to_ctrl)
    add_flow(dp, PRIO_LLDP, parser.OFPMatch(eth_type=0x88CC), to_ctrl)


def packet_out(dp, out_ports, data: bytes, in_port=None) -> None:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    actions = [parser.OFPActionOutput(p) for p in out_ports]
    if not actions:
        return
    dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER,
                                    in_port=ofp.OFPP_CONTROLLER if in_port is None else in_port,
                                    actions=actions, data=data))


def ipv4_pair_match(parser, src_ip: str, dst_ip: str):
    return parser.OFPMatch(eth_type=0x0800, ipv4_src=src_ip, ipv4_dst=dst_ip)


def barrier(dp) -> None:
    dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))
