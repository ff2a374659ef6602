"""ryu_app.switch_sync and ryu_app.flows: only the difference goes to a switch, in steps each
closed by a barrier; a switch's refusal is matched to the message that caused it; what a
switch sends back of its tables reads as the values that were written.

The switch stands in as a recorder, and says so: it keeps the messages (the framework's own
OpenFlow 1.3 objects, each serialized as it would go on the wire) and its answers are the
framework's reply objects, built here. The lab tests (tests/integration) run the same code
against Open vSwitch.
"""

from __future__ import annotations

import importlib
import logging

from coex.forwarding import DEFAULT, ForwardingPlan
from coex.policy import Policy
from coex.sflow import FlowKey
from coex.switch_state import SwitchState, desired
from ryu_app import flows
from ryu_app.framework import ofproto_v1_3
from ryu_app.switch_sync import SwitchSync

parser = importlib.import_module(ofproto_v1_3.__name__ + "_parser")
ofp = ofproto_v1_3
LOG = logging.getLogger("test_switch_sync")

BOTTLENECK = {"dpid": 1, "port": 3, "capacity_bps": 40_000_000}
RULES = [{"name": "bulk", "aggregate": "queue_filling", "priority": 10,
          "match": {"ipv4_src": "10.0.0.0/24", "ip_proto": 6, "tp_dst": 5201}},
         {"name": "voice", "aggregate": "low_delay", "priority": 20,
          "match": {"dscp": 46, "eth_src": "00:00:00:00:00:0A"}}]
TREES = {(DEFAULT, "10.0.0.3"): {1: 3}, ("queue_filling", "10.0.0.3"): {1: 3}, ("penalized", "10.0.0.3"): {1: 3}}
HEAVY = FlowKey("10.0.0.1", "10.0.0.3", 6, 40000, 5201)


class RecordingSwitch:
    """A switch's OpenFlow connection, recorded: set_xid and send_msg as Ryu's Datapath has them."""

    def __init__(self, dpid: int = 1):
        self.id, self.ofproto, self.ofproto_parser, self.xid, self.sent = dpid, ofp, parser, 0, []

    def set_xid(self, msg) -> None:
        self.xid += 1
        msg.set_xid(self.xid)

    def send_msg(self, msg) -> None:
        msg.serialize()  # well-formed, or this raises
        self.sent.append(msg)

    def kinds(self) -> list[str]:
        out = []
        for m in self.sent:
            if isinstance(m, parser.OFPBarrierRequest):
                out.append("barrier")
            elif isinstance(m, parser.OFPMeterMod):
                out.append({ofp.OFPMC_ADD: "add_meter", ofp.OFPMC_MODIFY: "modify_meter",
                            ofp.OFPMC_DELETE: "delete_meter"}[m.command])
            else:
                out.append({ofp.OFPFC_ADD: "add_flow", ofp.OFPFC_MODIFY_STRICT: "modify_flow",
                            ofp.OFPFC_DELETE_STRICT: "delete_flow"}[m.command])
        return out


def state(pol: Policy, **kw) -> SwitchState:
    return desired(ForwardingPlan(pol), pol.packet_in, 1, TREES, **kw)


def policy(**approaches) -> Policy:
    return Policy.from_dict({"ports": [BOTTLENECK], "rules": RULES, "approaches": approaches})


def test_nothing_is_sent_to_a_switch_whose_state_does_not_change():
    dp, sync = RecordingSwitch(), SwitchSync(LOG)
    sync.held[1] = state(policy())
    assert sync.converge(dp, state(policy())) is None and dp.sent == []


def test_a_change_goes_in_steps_each_closed_by_a_barrier_meters_before_their_flows():
    """Rule: Limited Queue turned on sends its meters, a barrier, then the hops that use them,
    a barrier - and nothing else: the other flows stay as they are."""
    dp, sync = RecordingSwitch(), SwitchSync(LOG)
    sync.held[1] = state(policy())
    write = sync.converge(dp, state(policy(limited_queue={"enabled": True})))
    kinds = dp.kinds()
    assert kinds[-1] == "barrier" and "delete_flow" not in kinds and "add_flow" not in kinds, kinds
    first_meter, last_meter = kinds.index("add_meter"), len(kinds) - 1 - kinds[::-1].index("add_meter")
    uses = [i for i, m in enumerate(dp.sent) if kinds[i] == "modify_flow" and any(
        isinstance(inst, parser.OFPInstructionMeter) for inst in m.instructions)]
    assert uses and all(i > last_meter for i in uses) and "barrier" in kinds[last_meter:min(uses)]
    assert kinds[:first_meter] == [] or kinds[first_meter - 1] == "barrier"
    assert not write.done.is_set()


def test_a_refusal_is_matched_to_its_message_counted_and_the_switch_read_again():
    """Rule: an OFPT_ERROR carries the xid of the message it refuses: the write that sent it
    gets the error (REST reports it), the count goes up (/metrics), and the switch's state is
    no longer trusted until it is read again. The barrier's reply ends the write."""
    dp, sync = RecordingSwitch(), SwitchSync(LOG)
    sync.held[1] = state(policy())
    write = sync.converge(dp, state(policy(), steered=[HEAVY]))
    [add] = [m for m in dp.sent if isinstance(m, parser.OFPFlowMod)]
    err = parser.OFPErrorMsg(dp, type_=ofp.OFPET_BAD_REQUEST, code=ofp.OFPBRC_IS_SLAVE, data=b"")
    err.xid = add.xid
    got = sync.on_error(1, err, "OFPET_BAD_REQUEST")
    assert got is not None and got.command == "add_flow" and "priority 2100" in str(got)
    assert str(got).startswith("switch 0000000000000001 refused add_flow flow table 0 priority 2100")
    assert write.errors == [got] and sync.error_counts[(1, "OFPET_BAD_REQUEST")] == 1 and not sync.fresh(1)
    barrier = dp.sent[-1]
    sync.on_barrier(1, barrier.xid)
    assert write.done.is_set() and sync.wait([write], 0.1) == ([got], [])
    err2 = parser.OFPErrorMsg(dp, type_=ofp.OFPET_BAD_REQUEST, code=1, data=b"")
    err2.xid = add.xid  # after its barrier: forgotten, none of ours
    assert sync.on_error(1, err2, "OFPET_BAD_REQUEST") is None


def test_a_switch_not_yet_read_gets_no_difference_but_does_get_changes():
    """A switch whose tables are being read is converged by its reconcile; a tree's new hop
    meanwhile is still sent (the read may predate it)."""
    dp, sync = RecordingSwitch(), SwitchSync(LOG)
    assert sync.converge(dp, state(policy())) is None and dp.sent == []
    flow = next(iter(state(policy()).flows))
    sync.change(dp, add=[flow])
    assert dp.kinds() == ["add_flow", "barrier"]


def wire(obj, cls):
    """obj serialized and parsed back by cls, as a switch's reply would carry it."""
    buf = bytearray()
    obj.serialize(buf, 0)
    return cls.parser(bytes(buf), 0)


def test_what_a_switch_reports_of_its_tables_reads_as_what_was_written():
    """Rule: a flow written with flow_mod and read back from a flow-stats entry (match and
    instructions through their wire form) is the same value, for every kind of flow ours are
    (masked prefixes, ports, DSCP, a MAC, metadata, meters, queues, counting flows), and a meter
    likewise: a reconnect finds nothing to change on a switch that holds what we wrote."""
    dp = RecordingSwitch()
    wanted = state(policy(limited_queue={"enabled": True}, separate_queues=True), steered=[HEAVY], counted=[HEAVY])
    for flow in wanted.flows:
        mod = flows.flow_mod(dp, flow, "add_flow")
        entry = parser.OFPFlowStats(table_id=mod.table_id, priority=mod.priority, idle_timeout=mod.idle_timeout,
                                    cookie=mod.cookie, match=wire(mod.match, parser.OFPMatch),
                                    instructions=[wire(i, parser.OFPInstruction) for i in mod.instructions])
        assert flows.flow_of(dp, entry) == flow
    for meter in wanted.meters:
        mod = flows.meter_mod(dp, meter, "add_meter")
        entry = parser.OFPMeterConfigStats(flags=mod.flags, meter_id=mod.meter_id,
                                           bands=[wire(b, parser.OFPMeterBandHeader) for b in mod.bands])
        assert flows.meter_of(dp, entry) == meter
    assert len({f.key for f in wanted.flows}) == len(wanted.flows) >= 10


def test_an_error_after_an_earlier_steps_barrier_is_still_matched():
    """Rule: a barrier's reply closes only the messages sent before it: a refusal of a message
    in a later step of the same write, arriving after the first barrier was answered, is
    matched to it all the same."""
    dp, sync = RecordingSwitch(), SwitchSync(LOG)
    sync.held[1] = state(policy())
    write = sync.converge(dp, state(policy(limited_queue={"enabled": True})))
    barriers = [m for m in dp.sent if isinstance(m, parser.OFPBarrierRequest)]
    assert len(barriers) == 2
    sync.on_barrier(1, barriers[0].xid)
    assert not write.done.is_set()
    late = next(m for m in dp.sent if m.xid > barriers[0].xid and isinstance(m, parser.OFPFlowMod))
    err = parser.OFPErrorMsg(dp, type_=ofp.OFPET_METER_MOD_FAILED, code=ofp.OFPMMFC_UNKNOWN_METER, data=b"")
    err.xid = late.xid
    assert sync.on_error(1, err, "OFPET_METER_MOD_FAILED") is not None
    sync.on_barrier(1, barriers[1].xid)
    assert write.done.is_set() and len(write.errors) == 1
