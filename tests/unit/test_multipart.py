"""ryu_app.multipart and ryu_app.flow_counters: a read in flight is known by its switch and its
xid, so two switches that hand out the same xid each get their own reply.

The switches stand in as recorders (tests/unit/test_switch_sync.RecordingSwitch: the
framework's own OpenFlow 1.3 objects, serialized as they would go on the wire); their replies
are the framework's reply objects, built here. The lab tests run the same code against Open
vSwitch.
"""

from __future__ import annotations

import importlib

from ryu_app import flows
from ryu_app.flow_counters import FlowCounters
from ryu_app.framework import hub, ofproto_v1_3
from ryu_app.multipart import MultipartReads
from tests.unit.test_switch_sync import RecordingSwitch

parser = importlib.import_module(ofproto_v1_3.__name__ + "_parser")
ofp = ofproto_v1_3


def reply(dp, xid: int, cookies: list[int], more: bool = False):
    msg = parser.OFPFlowStatsReply(dp, flags=ofp.OFPMPF_REPLY_MORE if more else 0,
                                   body=[parser.OFPFlowStats(cookie=c) for c in cookies])
    msg.xid = xid
    return msg


def test_two_switches_with_the_same_xid_each_get_their_own_reply():
    """Rule: a reply fills the read of the switch it came from, even when another switch's
    read in flight has the same xid (each switch numbers its own transactions)."""
    one, two = RecordingSwitch(1), RecordingSwitch(2)
    reads = MultipartReads()
    a, b = reads.send(one, flows.our_flows_request(one)), reads.send(two, flows.our_flows_request(two))
    assert a.xid == b.xid == 1
    assert reads.on_reply(2, reply(two, 1, [22]))
    assert b.done.is_set() and not a.done.is_set()
    assert reads.on_reply(1, reply(one, 1, [11]))
    assert reads.gather([a, b], 0.1) == [a.entries, b.entries]
    assert [e.cookie for e in a.entries] == [11] and [e.cookie for e in b.entries] == [22]


def test_a_read_is_complete_only_at_its_last_part_and_is_forgotten_after_gathering():
    """Rule: parts with OFPMPF_REPLY_MORE add to a read without completing it; a read not
    complete by the deadline is None, and a part arriving after gather() is not ours."""
    dp, reads = RecordingSwitch(1), MultipartReads()
    read = reads.send(dp, flows.our_flows_request(dp))
    assert reads.on_reply(1, reply(dp, read.xid, [1, 2], more=True))
    assert reads.gather([read], 0.05) == [None]
    assert not reads.on_reply(1, reply(dp, read.xid, [3]))


def test_flow_counters_keep_each_switchs_entries_apart():
    """Rule: a /metrics scrape over two switches whose requests share an xid reports each
    switch's own flows, and leaves out a switch that does not answer by the deadline."""
    one, two, three = RecordingSwitch(1), RecordingSwitch(2), RecordingSwitch(3)
    reads = MultipartReads()
    counters = FlowCounters({1: one, 2: two, 3: three}, reads)

    def answer():
        hub.sleep(0.01)
        reads.on_reply(2, reply(two, 1, [2]))
        reads.on_reply(1, reply(one, 1, [1]))

    thread = hub.spawn(answer)
    got = counters.read(timeout_s=0.5)
    hub.joinall([thread])
    assert {dpid: [e.cookie for e in entries] for dpid, entries in got.items()} == {1: [1], 2: [2]}
    assert [m.xid for m in one.sent + two.sent + three.sent] == [1, 1, 1]
