"""coex.sflow on real Open vSwitch datagrams (tests/fixtures/sflow, see its README) and on
datagrams built from the sFlow v5 spec (sflowgen)."""

from __future__ import annotations

import json
import os

import pytest

import sflowgen as g
from coex.sflow import (MAX_FRAME_LENGTH, CounterSample, FlowKey, FlowSample, PacketHeader,
                        SampledEthernet, SampledIP, SFlowDecodeError, decode_datagram,
                        sample_type_name)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "sflow")


def fixture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


ALL = ["counters_1.bin", "mixed_1.bin", "counters_2.bin", "mixed_2.bin",
       "tcp5201_1.bin", "tcp5201_2.bin"]  # in datagram sequence order


# ------------------------------------------------------------ real OVS datagrams

@pytest.mark.parametrize("name", ALL)
def test_real_datagram_header(name):
    dg = decode_datagram(fixture(name))
    assert dg.version == 5
    assert dg.agent_address == "127.0.0.1"  # agent=lo
    assert dg.sub_agent_id == 0
    assert dg.length == len(fixture(name))
    assert dg.skipped_samples == 0


def test_real_datagram_sequence_numbers_increase():
    seqs = [decode_datagram(fixture(n)).sequence_number for n in ALL]
    assert seqs == [1, 2, 3, 4, 6, 7]
    uptimes = [decode_datagram(fixture(n)).uptime_ms for n in ALL]
    assert uptimes == sorted(uptimes)


def test_real_flow_samples_sequence_and_sampling():
    flow_seqs = []
    for n in ALL:
        for s in decode_datagram(fixture(n)).flow_samples:
            assert s.sampling_rate == 64
            assert s.sample_pool == 64 * s.sequence_number  # OVS 3.1: pool grows by the rate
            assert s.drops == 0
            assert (s.source_id_type, s.source_id_index) == (2, 1000)  # the bridge
            assert not s.expanded
            assert s.skipped_records == 1  # extended_switch
            flow_seqs.append(s.sequence_number)
    assert flow_seqs == list(range(1, 25))


def test_real_iperf3_flow_5_tuple_and_frame():
    dg = decode_datagram(fixture("tcp5201_2.bin"))
    data = [s for s in dg.flow_samples if s.flow_key().dst_port == 5201]
    assert len(data) == 5
    s = data[0]
    assert s.flow_key() == FlowKey("10.0.0.1", "10.0.0.3", 6, 55284, 5201)
    p = s.packet
    assert isinstance(p, PacketHeader)
    assert (p.header_protocol, p.frame_length, p.stripped, p.header_length) == (1, 1518, 4, 128)
    assert (p.src_mac, p.dst_mac) == ("00:00:00:00:00:01", "00:00:00:00:00:03")
    assert (p.ethertype, p.vlan, p.ip_version, p.ip_length, p.dscp, p.ecn) == (0x0800, None, 4,
                                                                              1500, 0, 0)
    assert p.tcp_flags & 0x10  # ACK
    assert s.frame_length() == 1518
    # the ACK going back enters on the other port
    back = [x for x in dg.flow_samples if x.flow_key().src_port == 5201][0]
    assert back.flow_key() == FlowKey("10.0.0.3", "10.0.0.1", 6, 5201, 55284)
    assert (back.input_if, back.output_if) == (s.output_if, s.input_if)
    assert back.packet.frame_length == 70


def test_real_iperf3_control_connection():
    s = decode_datagram(fixture("tcp5201_1.bin")).flow_samples[0]
    assert s.flow_key() == FlowKey("10.0.0.1", "10.0.0.3", 6, 55268, 5201)


def test_real_icmp_samples():
    dg = decode_datagram(fixture("mixed_1.bin"))
    keys = {s.flow_key() for s in dg.flow_samples}
    assert keys == {FlowKey("10.0.0.1", "10.0.0.3", 1, 0, 0), FlowKey("10.0.0.3", "10.0.0.1", 1, 0, 0)}
    assert all(s.packet.frame_length == 102 for s in dg.flow_samples)  # 98-byte echo + FCS
    assert len(dg.counter_samples) == 1


def test_real_counter_samples():
    dg = decode_datagram(fixture("counters_2.bin"))
    assert [type(s) for s in dg.samples] == [CounterSample] * 4
    by_if = {s.source_id_index: s.generic for s in dg.samples}
    assert sorted(by_if) == [180, 181, 185, 187]
    c = by_if[185]
    assert (c.if_index, c.if_type, c.if_speed, c.if_direction) == (185, 6, 10_000_000_000, 1)
    assert c.admin_up and c.oper_up
    assert (c.in_octets, c.in_ucast_pkts, c.out_octets, c.out_ucast_pkts) == (21548, 224, 21548, 224)
    assert c.in_broadcast_pkts == 0xFFFFFFFF  # "unknown" in sFlow
    assert (c.in_errors, c.out_errors, c.in_discards, c.out_discards) == (0, 0, 0, 0)
    assert not by_if[187].oper_up  # a port that is down
    for s in dg.samples:
        assert s.sequence_number == 2 and s.source_id_type == 0 and s.skipped_records == 3


def test_real_counters_grow_between_polls():
    first = {s.source_id_index: s.generic for s in decode_datagram(fixture("counters_1.bin")).samples
             if s.generic}
    second = {s.source_id_index: s.generic for s in decode_datagram(fixture("counters_2.bin")).samples}
    for idx in (180, 185):
        assert second[idx].in_octets > first[idx].in_octets
        assert second[idx].out_ucast_pkts > first[idx].out_ucast_pkts


def test_manifest_matches_decoder():
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["sampling"] == 64
    for name, info in manifest["files"].items():
        dg = decode_datagram(fixture(name))
        assert dg.sequence_number == info["sequence"]
        assert len(dg.flow_samples) == info["flow_samples"]
        assert len(dg.counter_samples) == info["counter_samples"]


# ------------------------------------------------------------ built from the spec

def test_ipv6_agent_and_expanded_samples():
    frame = g.ethernet(g.ipv4(g.udp(5000, 53), proto=17, tos=46 << 2 | 1))
    dg = decode_datagram(g.datagram(
        [g.flow_sample([g.sampled_header(frame)], seq=7, source=(0, 1 << 25), rate=256,
                       inp=1 << 26, out=5, expanded=True),
         g.counters_sample([g.if_counters(if_index=1 << 25, in_octets=1 << 40)], seq=9,
                           source=(0, 1 << 25), expanded=True)],
        agent="2001:db8::10", sub_agent=3, seq=42))
    assert (dg.agent_address, dg.sub_agent_id, dg.sequence_number) == ("2001:db8::10", 3, 42)
    fs, cs = dg.samples
    assert fs.expanded and cs.expanded
    assert sample_type_name(fs) == "flow_sample_expanded"
    assert sample_type_name(cs) == "counters_sample_expanded"
    assert (fs.sequence_number, fs.source_id_index, fs.sampling_rate, fs.input_if, fs.output_if) == \
        (7, 1 << 25, 256, 1 << 26, 5)
    assert fs.flow_key() == FlowKey("10.0.0.1", "10.0.0.3", 17, 5000, 53)
    assert (fs.packet.dscp, fs.packet.ecn) == (46, 1)
    assert cs.generic.if_index == 1 << 25 and cs.generic.in_octets == 1 << 40


def test_compact_source_and_interface_fields():
    fs = decode_datagram(g.datagram([g.flow_sample(
        [g.sampled_ipv4("10.1.1.1", "10.2.2.2", 6, 1, 2)], source=(1, 0xABCDEF),
        inp=(2 << 30) | 3, out=0x3FFFFFFF)])).samples[0]
    assert (fs.source_id_type, fs.source_id_index) == (1, 0xABCDEF)
    assert (fs.input_format, fs.input_if) == (2, 3)       # multiple interfaces
    assert (fs.output_format, fs.output_if) == (0, 0x3FFFFFFF)  # internal


def test_vlan_tagged_frame():
    frame = g.ethernet(g.ipv4(g.tcp(1234, 80)), vlans=(100, 200))
    p = decode_datagram(g.datagram([g.flow_sample([g.sampled_header(frame)])])).samples[0].packet
    assert p.vlan == 100 and p.ethertype == 0x0800
    assert p.flow_key() == FlowKey("10.0.0.1", "10.0.0.3", 6, 1234, 80)


def test_ipv6_packet_in_header():
    frame = g.ethernet(g.ipv6(g.tcp(443, 50000), tclass=10 << 2), ethertype=0x86DD)
    p = decode_datagram(g.datagram([g.flow_sample([g.sampled_header(frame)])])).samples[0].packet
    assert p.ip_version == 6 and p.dscp == 10
    assert p.flow_key() == FlowKey("2001:db8::1", "2001:db8::3", 6, 443, 50000)


def test_ip_header_protocols_without_ethernet():
    p4 = decode_datagram(g.datagram([g.flow_sample([g.sampled_header(
        g.ipv4(g.udp(1, 2), proto=17), protocol=11, stripped=0)])])).samples[0].packet
    assert p4.flow_key() == FlowKey("10.0.0.1", "10.0.0.3", 17, 1, 2)
    p6 = decode_datagram(g.datagram([g.flow_sample([g.sampled_header(
        g.ipv6(g.udp(3, 4), nxt=17), protocol=12, stripped=0)])])).samples[0].packet
    assert p6.flow_key() == FlowKey("2001:db8::1", "2001:db8::3", 17, 3, 4)


def test_truncated_packet_header_is_not_an_error():
    frame = g.ethernet(g.ipv4(g.tcp()))[:30]  # IPv4 header cut short
    p = decode_datagram(g.datagram([g.flow_sample([g.sampled_header(frame, frame_length=1518)])])
                        ).samples[0].packet
    assert p.ethertype == 0x0800 and p.src_ip is None and p.flow_key() is None
    assert p.frame_length == 1518


def test_later_fragment_has_no_ports():
    frame = g.ethernet(g.ipv4(g.udp(9, 9), proto=17, frag=100))
    p = decode_datagram(g.datagram([g.flow_sample([g.sampled_header(frame)])])).samples[0].packet
    assert p.src_ip == "10.0.0.1" and p.src_port is None
    assert p.flow_key() == FlowKey("10.0.0.1", "10.0.0.3", 17, 0, 0)


def test_non_ip_frame():
    frame = g.ethernet(b"\0" * 46, ethertype=0x88CC)  # LLDP
    s = decode_datagram(g.datagram([g.flow_sample([g.sampled_header(frame)])])).samples[0]
    assert s.packet.ethertype == 0x88CC and s.flow_key() is None


def test_sampled_ipv4_ipv6_ethernet_records():
    fs = decode_datagram(g.datagram([g.flow_sample([
        g.sampled_ethernet("00:00:00:00:00:01", "00:00:00:00:00:03", 0x0800, length=1000),
        g.sampled_ipv4("10.0.0.1", "10.0.0.3", 6, 43210, 5201, length=980, tos=0xB8),
        g.sampled_ipv6("2001:db8::1", "2001:db8::2", 17, 1, 2, length=500),
    ])])).samples[0]
    eth, ip4, ip6 = fs.records
    assert isinstance(eth, SampledEthernet) and eth.src_mac == "00:00:00:00:00:01" \
        and eth.eth_type == 0x0800 and eth.length == 1000
    assert isinstance(ip4, SampledIP) and ip4.tos == 0xB8 and ip4.length == 980
    assert ip6.ip_version == 6 and ip6.flow_key() == FlowKey("2001:db8::1", "2001:db8::2", 17, 1, 2)
    assert fs.packet is None
    assert fs.flow_key() == FlowKey("10.0.0.1", "10.0.0.3", 6, 43210, 5201)
    assert fs.frame_length() == 1000  # sampled_ethernet came first


def test_unknown_records_and_samples_skipped_by_length():
    dg = decode_datagram(g.datagram([
        g.record(7, b"\1" * 12, enterprise=4413),                     # vendor sample
        g.flow_sample([g.record(1001, b"\0" * 16),                    # extended_switch
                       g.record(99, b"\0" * 20, enterprise=9),
                       g.sampled_ipv4("10.0.0.1", "10.0.0.3", 17, 1, 2)]),
        g.counters_sample([g.record(2, b"\0" * 52), g.if_counters()]),  # ethernet counters
        g.record(5, b"\0" * 8),                                        # discarded_packet
    ]))
    assert dg.skipped_samples == 2
    fs, cs = dg.samples
    assert isinstance(fs, FlowSample) and fs.skipped_records == 2 and len(fs.records) == 1
    assert cs.skipped_records == 1 and cs.generic.if_index == 3


def test_empty_datagram():
    dg = decode_datagram(g.datagram([]))
    assert dg.samples == () and dg.flow_samples == [] and dg.counter_samples == []


# ------------------------------------------------------------ malformed: reasons

def reason(data) -> str:
    with pytest.raises(SFlowDecodeError) as err:
        decode_datagram(data)
    return err.value.reason


def test_errors_have_reasons():
    good = g.datagram([g.flow_sample([g.sampled_ipv4("10.0.0.1", "10.0.0.3", 6, 1, 2)])])
    assert reason(b"") == "truncated"
    assert reason(good[:20]) == "truncated"
    assert reason(good[:-4]) == "truncated"
    assert reason(good + b"\0\0\0\0") == "trailing_bytes"
    assert reason(g.datagram([], version=4)) == "unsupported_version"
    assert reason(g.u32(5) + g.u32(3) + b"\0" * 40) == "bad_address_type"
    assert reason(b"\0" * 70000) == "too_long"
    assert reason("not bytes") == "truncated"


def test_absurd_counts_rejected_before_allocation():
    dg = bytearray(g.datagram([]))
    dg[-4:] = g.u32(0xFFFFFFFF)  # 4 billion samples in 0 bytes
    assert reason(bytes(dg)) == "absurd_count"
    body = (g.u32(1) + g.u32(3) + g.u32(64) + g.u32(64) + g.u32(0) + g.u32(1) + g.u32(2)
            + g.u32(1_000_000))  # a million flow records in nothing
    assert reason(g.datagram([g.record(1, body)])) == "absurd_count"


def test_bad_lengths():
    assert reason(g.datagram([g.record(1, b"\0" * 6)])) == "bad_alignment"
    assert reason(g.datagram([g.record(1, b"\0" * 8)])) == "truncated"  # short flow_sample
    assert reason(g.datagram([g.flow_sample([g.record(3, b"\0" * 28)])])) == "bad_length"
    assert reason(g.datagram([g.counters_sample([g.record(1, b"\0" * 84)])])) == "bad_length"
    # sampled_header whose header<> claims more than the record holds
    rec = g.record(1, g.u32(1) + g.u32(100) + g.u32(0) + g.u32(64) + b"\0" * 16)
    assert reason(g.datagram([g.flow_sample([rec])])) == "bad_length"


def test_absurd_values():
    assert reason(g.datagram([g.flow_sample([], rate=0)])) == "absurd_value"
    big = g.sampled_header(b"\0" * 64, frame_length=MAX_FRAME_LENGTH + 1)
    assert reason(g.datagram([g.flow_sample([big])])) == "absurd_value"


def test_error_message_names_reason():
    err = SFlowDecodeError("truncated", "datagram header")
    assert err.reason == "truncated" and "datagram header" in str(err)
    assert isinstance(err, ValueError)
