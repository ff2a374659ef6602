"""LLDP frames that the controller sends out of every port and reads back.

Our own discovery rather than ryu.topology: that module is only active with
`--observe-links`, and `ryu-manager ckcd_coex` must work as typed. A frame
sent out of (dpid, port) that comes back as a packet-in at (dpid', port')
proves the link (dpid, port) -> (dpid', port').
"""

from __future__ import annotations

from ryu_app.framework import ether, ethernet, lldp, packet

# Nearest-bridge group address: switches never forward it, so a frame only crosses one link.
LLDP_MAC_NEAREST_BRIDGE = lldp.LLDP_MAC_NEAREST_BRIDGE
_CHASSIS_PREFIX = b"dpid:"


def build_lldp(dpid: int, port_no: int, hw_addr: str) -> bytes:
    tlvs = (
        lldp.ChassisID(subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED,
                       chassis_id=_CHASSIS_PREFIX + b"%016x" % dpid),
        lldp.PortID(subtype=lldp.PortID.SUB_PORT_COMPONENT, port_id=b"%d" % port_no),
        lldp.TTL(ttl=120),
        lldp.End(),
    )
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=LLDP_MAC_NEAREST_BRIDGE, src=hw_addr,
                                       ethertype=ether.ETH_TYPE_LLDP))
    pkt.add_protocol(lldp.lldp(tlvs))
    pkt.serialize()
    return bytes(pkt.data)


def parse_lldp(pkt: packet.Packet) -> tuple[int, int] | None:
    """(dpid, port) that sent this LLDP frame, or None if it is not one of ours."""
    frame = pkt.get_protocol(lldp.lldp)
    if frame is None or len(frame.tlvs) < 2:
        return None
    chassis, port = frame.tlvs[0], frame.tlvs[1]
    if not isinstance(chassis, lldp.ChassisID) or not isinstance(port, lldp.PortID):
        return None
    if not chassis.chassis_id.startswith(_CHASSIS_PREFIX):
        return None
    try:
        return int(chassis.chassis_id[len(_CHASSIS_PREFIX):], 16), int(port.port_id)
    except ValueError:
        return None
