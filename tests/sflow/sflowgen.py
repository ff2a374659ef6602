"""Build sFlow v5 datagrams for tests: an XDR encoder of the structures coex.sflow decodes.

Written from the sFlow Version 5 memo (sflow.org/sflow_version_5.txt), independently of the
decoder, so that the decoder's tests do not read back its own assumptions. Also builds the
raw Ethernet/IPv4/IPv6/TCP/UDP bytes a sampled_header carries. captured() reads the real
datagrams OVS sent, from tests/fixtures/sflow.
"""

from __future__ import annotations

import os
import socket
import struct

CAPTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "sflow")
# The captures in the order OVS sent them (their sequence numbers in manifest.json).
CAPTURE_ORDER = ["counters_1.bin", "mixed_1.bin", "counters_2.bin", "mixed_2.bin", "tcp5201_1.bin",
                 "tcp5201_2.bin"]


def captured() -> list[bytes]:
    """The real OVS datagrams of tests/fixtures/sflow, in the order they were sent."""
    out = []
    for name in CAPTURE_ORDER:
        with open(os.path.join(CAPTURES, name), "rb") as f:
            out.append(f.read())
    return out


def u32(v: int) -> bytes:
    return struct.pack(">I", v)


def u64(v: int) -> bytes:
    return struct.pack(">Q", v)


def opaque(b: bytes) -> bytes:
    """XDR variable-length opaque: length, bytes, zero padding to 4."""
    return u32(len(b)) + b + b"\0" * (-len(b) % 4)


def record(fmt: int, body: bytes, enterprise: int = 0) -> bytes:
    """sample_record / flow_record / counter_record: data_format then opaque body."""
    return u32((enterprise << 12) | fmt) + opaque(body)


def datagram(samples: list[bytes], agent: str = "192.0.2.1", sub_agent: int = 0,
             seq: int = 1, uptime_ms: int = 1000, version: int = 5) -> bytes:
    if ":" in agent:
        addr = u32(2) + socket.inet_pton(socket.AF_INET6, agent)
    else:
        addr = u32(1) + socket.inet_aton(agent)
    return (u32(version) + addr + u32(sub_agent) + u32(seq) + u32(uptime_ms)
            + u32(len(samples)) + b"".join(samples))


def flow_sample(records: list[bytes], seq: int = 1, source: tuple = (0, 3), rate: int = 64,
                pool: int = 64, drops: int = 0, inp: int = 1, out: int = 2,
                expanded: bool = False) -> bytes:
    if expanded:
        body = (u32(seq) + u32(source[0]) + u32(source[1]) + u32(rate) + u32(pool) + u32(drops)
                + u32(0) + u32(inp) + u32(0) + u32(out) + u32(len(records)) + b"".join(records))
        return record(3, body)
    body = (u32(seq) + u32((source[0] << 24) | source[1]) + u32(rate) + u32(pool) + u32(drops)
            + u32(inp) + u32(out) + u32(len(records)) + b"".join(records))
    return record(1, body)


def counters_sample(records: list[bytes], seq: int = 1, source: tuple = (0, 3),
                    expanded: bool = False) -> bytes:
    if expanded:
        body = u32(seq) + u32(source[0]) + u32(source[1]) + u32(len(records)) + b"".join(records)
        return record(4, body)
    body = u32(seq) + u32((source[0] << 24) | source[1]) + u32(len(records)) + b"".join(records)
    return record(2, body)


def sampled_header(frame: bytes, frame_length: int | None = None, protocol: int = 1,
                   stripped: int = 4) -> bytes:
    fl = frame_length if frame_length is not None else len(frame) + stripped
    return record(1, u32(protocol) + u32(fl) + u32(stripped) + opaque(frame))


def sampled_ipv4(src: str, dst: str, proto: int, sport: int, dport: int, length: int = 1500,
                 flags: int = 0x10, tos: int = 0) -> bytes:
    return record(3, u32(length) + u32(proto) + socket.inet_aton(src) + socket.inet_aton(dst)
                  + u32(sport) + u32(dport) + u32(flags) + u32(tos))


def sampled_ipv6(src: str, dst: str, proto: int, sport: int, dport: int, length: int = 1500,
                 flags: int = 0, priority: int = 0) -> bytes:
    return record(4, u32(length) + u32(proto) + socket.inet_pton(socket.AF_INET6, src)
                  + socket.inet_pton(socket.AF_INET6, dst) + u32(sport) + u32(dport)
                  + u32(flags) + u32(priority))


def sampled_ethernet(src_mac: str, dst_mac: str, eth_type: int, length: int = 1518) -> bytes:
    def mac(m: str) -> bytes:
        return bytes.fromhex(m.replace(":", "")) + b"\0\0"  # opaque[6] padded to 8
    return record(2, u32(length) + mac(src_mac) + mac(dst_mac) + u32(eth_type))


def if_counters(if_index: int = 3, speed: int = 10_000_000_000, in_octets: int = 0,
                out_octets: int = 0, in_pkts: int = 0, out_pkts: int = 0, in_errors: int = 0,
                out_discards: int = 0, status: int = 3) -> bytes:
    body = (u32(if_index) + u32(6) + u64(speed) + u32(1) + u32(status) + u64(in_octets)
            + u32(in_pkts) + u32(0) + u32(0) + u32(0) + u32(in_errors) + u32(0)
            + u64(out_octets) + u32(out_pkts) + u32(0) + u32(0) + u32(out_discards) + u32(0)
            + u32(0))
    assert len(body) == 88
    return record(1, body)


# ---- packet bytes

def ethernet(payload: bytes, src: str = "00:00:00:00:00:01", dst: str = "00:00:00:00:00:03",
             ethertype: int = 0x0800, vlans: tuple = ()) -> bytes:
    h = bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", ""))
    for vid in vlans:
        h += struct.pack(">HH", 0x8100, vid)
    return h + struct.pack(">H", ethertype) + payload


def ipv4(payload: bytes, src: str = "10.0.0.1", dst: str = "10.0.0.3", proto: int = 6,
         tos: int = 0, total_length: int | None = None, frag: int = 0) -> bytes:
    tl = total_length if total_length is not None else 20 + len(payload)
    return struct.pack(">BBHHHBBH4s4s", 0x45, tos, tl, 1, frag, 64, proto, 0,
                       socket.inet_aton(src), socket.inet_aton(dst)) + payload


def ipv6(payload: bytes, src: str = "2001:db8::1", dst: str = "2001:db8::3", nxt: int = 6,
         tclass: int = 0) -> bytes:
    return struct.pack(">IHBB16s16s", (6 << 28) | (tclass << 20), len(payload), nxt, 64,
                       socket.inet_pton(socket.AF_INET6, src),
                       socket.inet_pton(socket.AF_INET6, dst)) + payload


def tcp(sport: int = 43210, dport: int = 5201, flags: int = 0x18, payload: bytes = b"") -> bytes:
    return struct.pack(">HHIIBBHHH", sport, dport, 1, 1, 5 << 4, flags, 65535, 0, 0) + payload


def udp(sport: int = 40000, dport: int = 53, payload: bytes = b"") -> bytes:
    return struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
