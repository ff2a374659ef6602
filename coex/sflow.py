"""A bounded decoder for sFlow version 5 datagrams: bytes in, dataclasses out.

The wire format is XDR (RFC 4506: big-endian, every item padded to 4 bytes), and
the structures are those of the sFlow Version 5 memo (sflow.org/sflow_version_5.txt,
InMon 2004) with the structure numbers of sflow.org/developers/structures.php.
What is decoded, by the spec's struct names:

  sample_datagram / sample_datagram_v5  version 5 only; agent ``address`` IPv4 or IPv6
  sample_record (enterprise 0)          1 flow_sample, 2 counters_sample,
                                        3 flow_sample_expanded, 4 counters_sample_expanded
  flow_record (enterprise 0)            1 sampled_header (Ethernet, IPv4 or IPv6 headers are
                                          parsed into a PacketHeader: MACs, 802.1Q VLAN, IPv4/
                                          IPv6 addresses, protocol, DSCP/ECN, TCP/UDP ports),
                                        2 sampled_ethernet, 3 sampled_ipv4, 4 sampled_ipv6
  counter_record (enterprise 0)         1 if_counters (the generic interface counters)

Anything else (other enterprises, extended_switch, ethernet counters, ...) is skipped
by its length and counted in ``skipped_records`` / ``Datagram.skipped_samples``.

Bounded: every length and count is checked against the bytes that remain in the
enclosing structure before it is used, so a datagram of n bytes costs O(n) whatever
it claims. A datagram that breaks the format raises SFlowDecodeError with a short
``reason`` (one of REASONS) that a collector can count; nothing else is raised for any
input. A sampled packet header that is cut short is *not* an error: sFlow truncates
headers by design (128 bytes by default), so PacketHeader fields the header does not
reach are None.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, Optional, Union

# Limits. A UDP payload cannot exceed 65507 bytes over IPv4; agents send <= 1400 by
# default. Frame lengths above MAX_FRAME_LENGTH (a 64 KiB GSO packet plus headers fits)
# would poison rate estimates, so they are refused.
MAX_DATAGRAM_BYTES = 65535
MAX_FRAME_LENGTH = 1 << 18
MAX_HEADER_BYTES = 1 << 12  # sampled_header.header<>: agents default to 128

# Reasons an SFlowDecodeError carries (the collector counts by these).
REASONS = (
    "truncated",            # a field or a length-prefixed item runs past its container
    "too_long",             # datagram longer than MAX_DATAGRAM_BYTES
    "unsupported_version",  # sample_datagram.version != 5
    "bad_address_type",     # agent address type not IP_V4 (1) / IP_V6 (2)
    "absurd_count",         # an array count that cannot fit in the bytes left
    "bad_alignment",        # an opaque<> length that is not a multiple of 4 where XDR requires it
    "bad_length",           # a known structure whose length disagrees with its definition
    "absurd_value",         # sampling_rate 0, frame_length > MAX_FRAME_LENGTH, header too long
    "trailing_bytes",       # bytes left after the last sample
)


class SFlowDecodeError(ValueError):
    """A datagram that is not valid sFlow v5. ``reason`` is one of REASONS."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


# sample_record / flow_record / counter_record types: data_format = enterprise << 12 | format
SAMPLE_FLOW = 1
SAMPLE_COUNTERS = 2
SAMPLE_FLOW_EXPANDED = 3
SAMPLE_COUNTERS_EXPANDED = 4
FLOW_SAMPLED_HEADER = 1
FLOW_SAMPLED_ETHERNET = 2
FLOW_SAMPLED_IPV4 = 3
FLOW_SAMPLED_IPV6 = 4
COUNTERS_GENERIC_IF = 1

# sampled_header.header_protocol values we parse (header_protocol enum of the spec)
HEADER_ETHERNET = 1
HEADER_IPV4 = 11
HEADER_IPV6 = 12

# sflow_data_source type (top 8 bits of the compact form)
SOURCE_IFINDEX = 0
SOURCE_VLAN = 1
SOURCE_ENTITY = 2

# interface format (top 2 bits of the compact form)
INTERFACE_IFINDEX = 0
INTERFACE_DISCARDED = 1
INTERFACE_MULTIPLE = 2
INTERFACE_LOCAL = 0x3FFFFFFF  # format 0 value: the packet went to/came from the agent itself

_U32 = struct.Struct(">I")
_U32x2 = struct.Struct(">II")
_U32x4 = struct.Struct(">IIII")
_FLOW_SAMPLE = struct.Struct(">IIIIIIII")           # seq, source, rate, pool, drops, in, out, nrec
_FLOW_SAMPLE_X = struct.Struct(">IIIIIIIIIII")      # seq, stype, sindex, rate, pool, drops,
                                                    # infmt, inval, outfmt, outval, nrec
_COUNTER_SAMPLE = struct.Struct(">III")             # seq, source, nrec
_COUNTER_SAMPLE_X = struct.Struct(">IIII")          # seq, stype, sindex, nrec
_SAMPLED_HEADER = struct.Struct(">IIII")            # protocol, frame_length, stripped, header len
_SAMPLED_ETHERNET = struct.Struct(">I6s2x6s2xI")    # length, src_mac, dst_mac, type
_SAMPLED_IPV4 = struct.Struct(">II4s4sIIII")        # length, proto, src, dst, sport, dport, flags, tos
_SAMPLED_IPV6 = struct.Struct(">II16s16sIIII")      # ... priority
_IF_COUNTERS = struct.Struct(">IIQIIQIIIIIIQIIIIII")  # if_counters, 88 bytes
_ETH = struct.Struct(">6s6sH")
_VLAN = struct.Struct(">HH")
_IPV4 = struct.Struct(">BBHHHBBH4s4s")
_IPV6 = struct.Struct(">IHBB16s16s")
_PORTS = struct.Struct(">HH")

_inet_ntoa = socket.inet_ntoa


def _inet6(b: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6, b)


class FlowKey(NamedTuple):
    """The 5-tuple a flow is identified by. Ports are 0 for protocols without ports."""
    src_ip: str
    dst_ip: str
    protocol: int
    src_port: int
    dst_port: int

    def __str__(self) -> str:
        return f"{self.src_ip}:{self.src_port}->{self.dst_ip}:{self.dst_port}/{self.protocol}"


@dataclass(slots=True)
class PacketHeader:
    """What the sampled bytes of one packet say (sampled_header, parsed).

    Fields the sampled bytes do not reach, or that the packet does not have, are None.
    """
    header_protocol: int
    frame_length: int        # sampled_header.frame_length: the original frame's length
    stripped: int            # bytes removed before sampling (e.g. the FCS)
    header_length: int       # bytes of header actually sampled
    src_mac: Optional[str] = None
    dst_mac: Optional[str] = None
    vlan: Optional[int] = None           # outermost 802.1Q VLAN id
    ethertype: Optional[int] = None      # after VLAN tags
    ip_version: Optional[int] = None
    src_ip: Optional[str] = None
    dst_ip: Optional[str] = None
    protocol: Optional[int] = None       # IPv4 protocol / IPv6 next header
    dscp: Optional[int] = None
    ecn: Optional[int] = None
    ip_length: Optional[int] = None      # IPv4 total length / IPv6 payload length + 40
    src_port: Optional[int] = None
    dst_port: Optional[int] = None
    tcp_flags: Optional[int] = None

    def flow_key(self) -> Optional[FlowKey]:
        if self.src_ip is None:
            return None
        return FlowKey(self.src_ip, self.dst_ip, self.protocol or 0,
                       self.src_port or 0, self.dst_port or 0)


@dataclass(slots=True)
class SampledEthernet:
    """sampled_ethernet (flow_data 0:2)."""
    length: int
    src_mac: str
    dst_mac: str
    eth_type: int


@dataclass(slots=True)
class SampledIP:
    """sampled_ipv4 (flow_data 0:3) or sampled_ipv6 (0:4). ``tos`` is the IPv4 ToS byte or the
    IPv6 priority field."""
    ip_version: int
    length: int              # IP packet length excluding lower layers
    protocol: int
    src_ip: str
    dst_ip: str
    src_port: int
    dst_port: int
    tcp_flags: int
    tos: int

    def flow_key(self) -> FlowKey:
        return FlowKey(self.src_ip, self.dst_ip, self.protocol, self.src_port, self.dst_port)


FlowRecord = Union[PacketHeader, SampledEthernet, SampledIP]


@dataclass(slots=True)
class FlowSample:
    """flow_sample (sample_data 0:1) or flow_sample_expanded (0:3)."""
    expanded: bool
    sequence_number: int
    source_id_type: int
    source_id_index: int
    sampling_rate: int       # 1 in N packets
    sample_pool: int         # packets that could have been sampled
    drops: int
    input_format: int
    input_if: int
    output_format: int
    output_if: int
    records: tuple           # FlowRecord instances in datagram order
    skipped_records: int     # records of types we do not decode

    @property
    def packet(self) -> Optional[PacketHeader]:
        for r in self.records:
            if type(r) is PacketHeader:
                return r
        return None

    def flow_key(self) -> Optional[FlowKey]:
        """The 5-tuple, from the sampled header if it reaches layer 3, else from sampled_ipv4/6."""
        ip = None
        for r in self.records:
            if type(r) is PacketHeader:
                key = r.flow_key()
                if key is not None:
                    return key
            elif type(r) is SampledIP and ip is None:
                ip = r
        return ip.flow_key() if ip is not None else None

    def frame_length(self) -> Optional[int]:
        """Bytes of the sampled packet: sampled_header.frame_length, else the IP length."""
        ip_len = None
        for r in self.records:
            if type(r) is PacketHeader:
                return r.frame_length
            if type(r) is SampledIP and ip_len is None:
                ip_len = r.length
            elif type(r) is SampledEthernet and ip_len is None:
                ip_len = r.length
        return ip_len


@dataclass(slots=True)
class IfCounters:
    """if_counters (counter_data 0:1), the generic interface counters (RFC 2863 names)."""
    if_index: int
    if_type: int
    if_speed: int            # bits/s
    if_direction: int        # 0 unknown, 1 full-duplex, 2 half-duplex, 3 in, 4 out
    if_status: int           # bit 0 admin up, bit 1 oper up
    in_octets: int
    in_ucast_pkts: int
    in_multicast_pkts: int
    in_broadcast_pkts: int
    in_discards: int
    in_errors: int
    in_unknown_protos: int
    out_octets: int
    out_ucast_pkts: int
    out_multicast_pkts: int
    out_broadcast_pkts: int
    out_discards: int
    out_errors: int
    promiscuous_mode: int

    @property
    def admin_up(self) -> bool:
        return bool(self.if_status & 1)

    @property
    def oper_up(self) -> bool:
        return bool(self.if_status & 2)


@dataclass(slots=True)
class CounterSample:
    """counters_sample (sample_data 0:2) or counters_sample_expanded (0:4)."""
    expanded: bool
    sequence_number: int
    source_id_type: int
    source_id_index: int
    records: tuple           # IfCounters instances
    skipped_records: int

    @property
    def generic(self) -> Optional[IfCounters]:
        for r in self.records:
            if type(r) is IfCounters:
                return r
        return None


Sample = Union[FlowSample, CounterSample]


@dataclass(slots=True)
class Datagram:
    """sample_datagram_v5."""
    version: int
    agent_address: str
    sub_agent_id: int
    sequence_number: int
    uptime_ms: int
    samples: tuple           # FlowSample / CounterSample in datagram order
    skipped_samples: int     # sample records of types we do not decode
    length: int              # bytes of the datagram

    @property
    def flow_samples(self) -> list:
        return [s for s in self.samples if type(s) is FlowSample]

    @property
    def counter_samples(self) -> list:
        return [s for s in self.samples if type(s) is CounterSample]


def sample_type_name(sample: Sample) -> str:
    """The name the collector counts samples by."""
    if type(sample) is FlowSample:
        return "flow_sample_expanded" if sample.expanded else "flow_sample"
    return "counters_sample_expanded" if sample.expanded else "counters_sample"


# --------------------------------------------------------------------------- decoding

def decode_datagram(data: bytes) -> Datagram:
    """Decode one sFlow v5 datagram (the UDP payload). Raises SFlowDecodeError only."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SFlowDecodeError("truncated", f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    n = len(data)
    if n > MAX_DATAGRAM_BYTES:
        raise SFlowDecodeError("too_long", f"{n} bytes")
    if n < 8:
        raise SFlowDecodeError("truncated", "datagram header")
    version, addr_type = _U32x2.unpack_from(data, 0)
    if version != 5:
        raise SFlowDecodeError("unsupported_version", str(version))
    agent, off = _agent_address(data, addr_type)
    sub_agent, seq, uptime, nsamples = _U32x4.unpack_from(data, off)
    samples, skipped, off = _decode_records(data, off + 16, n, nsamples, _SAMPLE_RECORDS)
    if off != n:
        raise SFlowDecodeError("trailing_bytes", f"{n - off} bytes after the last sample")
    return Datagram(5, agent, sub_agent, seq, uptime, samples, skipped, n)


def _agent_address(data: bytes, addr_type: int) -> tuple[str, int]:
    """The agent's address and where the rest of the datagram header (16 bytes) starts."""
    if addr_type == 1:
        end = 12
    elif addr_type == 2:
        end = 24
    else:
        raise SFlowDecodeError("bad_address_type", str(addr_type))
    if len(data) < end + 16:
        raise SFlowDecodeError("truncated", "datagram header")
    return (_inet_ntoa(data[8:12]) if addr_type == 1 else _inet6(data[8:24])), end


def _decode_records(data: bytes, off: int, end: int, count: int, array: "_RecordArray") -> tuple:
    """(decoded records, records of formats we skip, offset after the last one) of the
    ``count`` records of ``array`` at data[off:end]. The one walk over records: the count and
    each length are checked against the bytes left before they are used."""
    what, counted, decoders = array
    if count > (end - off) >> 3:
        raise SFlowDecodeError("absurd_count", f"{count} {counted} in {end - off} bytes")
    records = []
    skipped = 0
    for _ in range(count):
        if end - off < 8:
            raise SFlowDecodeError("truncated", f"{what} header")
        fmt, length = _U32x2.unpack_from(data, off)
        off += 8
        if length > end - off:
            raise SFlowDecodeError("truncated", f"{what} of {length} bytes, {end - off} left")
        if length & 3:
            raise SFlowDecodeError("bad_alignment", f"{what} length {length}")
        decode = decoders.get(fmt)
        if decode is None:
            skipped += 1
        else:
            records.append(decode(data, off, off + length))
        off += length
    return tuple(records), skipped, off


def _flow_sample(expanded: bool, data: bytes, off: int, end: int) -> FlowSample:
    if expanded:
        if end - off < 44:
            raise SFlowDecodeError("truncated", "flow_sample_expanded")
        (seq, stype, sindex, rate, pool, drops,
         infmt, inval, outfmt, outval, nrec) = _FLOW_SAMPLE_X.unpack_from(data, off)
        off += 44
    else:
        if end - off < 32:
            raise SFlowDecodeError("truncated", "flow_sample")
        seq, source, rate, pool, drops, inp, outp, nrec = _FLOW_SAMPLE.unpack_from(data, off)
        off += 32
        stype, sindex = source >> 24, source & 0xFFFFFF
        infmt, inval = inp >> 30, inp & 0x3FFFFFFF
        outfmt, outval = outp >> 30, outp & 0x3FFFFFFF
    if rate == 0:
        raise SFlowDecodeError("absurd_value", "sampling_rate 0")
    records, skipped, _ = _decode_records(data, off, end, nrec, _FLOW_RECORDS)
    return FlowSample(expanded, seq, stype, sindex, rate, pool, drops,
                      infmt, inval, outfmt, outval, records, skipped)


def _counter_sample(expanded: bool, data: bytes, off: int, end: int) -> CounterSample:
    if expanded:
        if end - off < 16:
            raise SFlowDecodeError("truncated", "counters_sample_expanded")
        seq, stype, sindex, nrec = _COUNTER_SAMPLE_X.unpack_from(data, off)
        off += 16
    else:
        if end - off < 12:
            raise SFlowDecodeError("truncated", "counters_sample")
        seq, source, nrec = _COUNTER_SAMPLE.unpack_from(data, off)
        off += 12
        stype, sindex = source >> 24, source & 0xFFFFFF
    records, skipped, _ = _decode_records(data, off, end, nrec, _COUNTER_RECORDS)
    return CounterSample(expanded, seq, stype, sindex, records, skipped)


def _exact(layout: struct.Struct, data: bytes, off: int, end: int, name: str) -> tuple:
    """A fixed-size record, whose length must be its structure's size exactly."""
    if end - off != layout.size:
        raise SFlowDecodeError("bad_length", f"{name} of {end - off} bytes")
    return layout.unpack_from(data, off)


def _sampled_ipv4(data: bytes, off: int, end: int) -> SampledIP:
    ln, proto, src, dst, sport, dport, flags, tos = _exact(_SAMPLED_IPV4, data, off, end, "sampled_ipv4")
    return SampledIP(4, ln, proto, _inet_ntoa(src), _inet_ntoa(dst), sport, dport, flags, tos)


def _sampled_ipv6(data: bytes, off: int, end: int) -> SampledIP:
    ln, proto, src, dst, sport, dport, flags, prio = _exact(_SAMPLED_IPV6, data, off, end, "sampled_ipv6")
    return SampledIP(6, ln, proto, _inet6(src), _inet6(dst), sport, dport, flags, prio)


def _sampled_ethernet(data: bytes, off: int, end: int) -> SampledEthernet:
    ln, src, dst, etype = _exact(_SAMPLED_ETHERNET, data, off, end, "sampled_ethernet")
    return SampledEthernet(ln, src.hex(":"), dst.hex(":"), etype)


def _if_counters(data: bytes, off: int, end: int) -> IfCounters:
    return IfCounters(*_exact(_IF_COUNTERS, data, off, end, "if_counters"))


def _sampled_header(data: bytes, off: int, end: int) -> PacketHeader:
    if end - off < 16:
        raise SFlowDecodeError("bad_length", "sampled_header shorter than its fixed part")
    proto, frame_length, stripped, hlen = _SAMPLED_HEADER.unpack_from(data, off)
    off += 16
    # header<> is padded to 4 bytes: its padded length must fill the record exactly.
    if hlen > end - off or (hlen + 3) & ~3 != end - off:
        raise SFlowDecodeError("bad_length", f"sampled_header.header of {hlen} bytes in "
                                             f"{end - off}")
    if hlen > MAX_HEADER_BYTES:
        raise SFlowDecodeError("absurd_value", f"sampled header of {hlen} bytes")
    if frame_length > MAX_FRAME_LENGTH:
        raise SFlowDecodeError("absurd_value", f"frame_length {frame_length}")
    return PacketHeader(proto, frame_length, stripped, hlen,
                        *_parse_packet(data, off, off + hlen, proto))


# ------------------------------------------------------------ sampled packet headers
# Parsed in place (offsets into the datagram, `end` = end of the sampled bytes). Truncation
# inside a sampled header is normal: parsing stops where the bytes end and the fields not
# reached stay None. One function for the common Ethernet/IPv4/TCP-UDP path (the per-sample
# cost is mostly Python calls); IPv6 in a helper.

_NONE14 = (None,) * 14


def _parse_packet(data: bytes, off: int, end: int, proto: int) -> tuple:
    """(src_mac, dst_mac, vlan, ethertype, ip_version, src_ip, dst_ip, protocol, dscp, ecn,
    ip_length, src_port, dst_port, tcp_flags) of the packet bytes data[off:end]."""
    src_mac = dst_mac = vlan = etype = None
    if proto == HEADER_ETHERNET:
        if end - off < 14:
            return _NONE14
        dst, src, etype = _ETH.unpack_from(data, off)
        dst_mac, src_mac = dst.hex(":"), src.hex(":")
        off += 14
        tags = 0
        while (etype == 0x8100 or etype == 0x88A8 or etype == 0x9100) and tags < 2:  # 802.1Q/ad
            if end - off < 4:
                return (src_mac, dst_mac, vlan, etype) + _NONE14[4:]
            tci, etype = _VLAN.unpack_from(data, off)
            if tags == 0:
                vlan = tci & 0x0FFF
            off += 4
            tags += 1
        if etype == 0x0800:
            ipv = 4
        elif etype == 0x86DD:
            ipv = 6
        else:
            return (src_mac, dst_mac, vlan, etype) + _NONE14[4:]
    elif proto == HEADER_IPV4:
        ipv = 4
    elif proto == HEADER_IPV6:
        ipv = 6
    else:
        return _NONE14
    l2 = (src_mac, dst_mac, vlan, etype)
    if ipv == 6:
        return l2 + _parse_ipv6(data, off, end)
    if end - off < 20:
        return l2 + _NONE14[4:]
    vihl, tos, total, _ident, frag, _ttl, ipproto, _csum, src, dst = _IPV4.unpack_from(data, off)
    if vihl >> 4 != 4:
        return l2 + _NONE14[4:]
    sport = dport = flags = None
    ihl = (vihl & 0x0F) * 4
    if not frag & 0x1FFF and ihl >= 20:  # a later fragment carries no transport header
        off += ihl
        if ipproto == 6 or ipproto == 17 or ipproto == 132:  # TCP, UDP, SCTP: ports first
            if end - off >= 4:
                sport, dport = _PORTS.unpack_from(data, off)
            if ipproto == 6 and end - off >= 14:
                flags = data[off + 13]
    return l2 + (4, _inet_ntoa(src), _inet_ntoa(dst), ipproto, tos >> 2, tos & 3, total,
                 sport, dport, flags)


_IPV6_EXT = (0, 43, 60)  # hop-by-hop, routing, destination options: skipped by their length


def _parse_ipv6(data: bytes, off: int, end: int) -> tuple:
    """The 10 layer-3/4 fields of _parse_packet for an IPv6 packet at data[off:end]."""
    if end - off < 40:
        return _NONE14[4:]
    vtcfl, plen, nxt, _hops, src, dst = _IPV6.unpack_from(data, off)
    if vtcfl >> 28 != 6:
        return _NONE14[4:]
    tclass = (vtcfl >> 20) & 0xFF
    off += 40
    sport = dport = flags = None
    for _ in range(4):  # at most four extension headers; after that, no ports
        if nxt not in _IPV6_EXT or end - off < 2:
            break
        nxt, extlen = data[off], data[off + 1]
        off += (extlen + 1) * 8
    if nxt in (6, 17, 132) and end - off >= 4:
        sport, dport = _PORTS.unpack_from(data, off)
        if nxt == 6 and end - off >= 14:
            flags = data[off + 13]
    return (6, _inet6(src), _inet6(dst), nxt, tclass >> 2, tclass & 3, plen + 40,
            sport, dport, flags)


# The record arrays and the formats decoded in each, below the decoders they name.

class _RecordArray(NamedTuple):
    """One of the three arrays of records (sample_record in a datagram, flow_record in a flow
    sample, counter_record in a counters sample): each record is data_format, then opaque<>
    of `length` bytes."""
    what: str        # the structure's name, for error details
    counted: str     # what the array's count counts, for error details
    decoders: dict   # data_format -> decode(data, start, stop); other formats are skipped


_SAMPLE_RECORDS = _RecordArray("sample_record", "samples", {
    SAMPLE_FLOW: partial(_flow_sample, False), SAMPLE_FLOW_EXPANDED: partial(_flow_sample, True),
    SAMPLE_COUNTERS: partial(_counter_sample, False), SAMPLE_COUNTERS_EXPANDED: partial(_counter_sample, True)})
_FLOW_RECORDS = _RecordArray("flow_record", "flow records", {
    FLOW_SAMPLED_HEADER: _sampled_header, FLOW_SAMPLED_ETHERNET: _sampled_ethernet,
    FLOW_SAMPLED_IPV4: _sampled_ipv4, FLOW_SAMPLED_IPV6: _sampled_ipv6})
_COUNTER_RECORDS = _RecordArray("counter_record", "counter records", {COUNTERS_GENERIC_IF: _if_counters})
