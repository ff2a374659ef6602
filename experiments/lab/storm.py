"""A packet-in storm: frames no switch has a flow for, sent from a host's interface.

Each frame is an IPv4/UDP datagram to an address no host has (10.9.0.0/16) and a made-up
unicast MAC, with a marker and its sequence number in the payload, so that no two frames are
the same (the controller floods a given frame only once per second) and a sink can count
them. Every one therefore misses table 1 and becomes a packet-in: what a port scan or a burst
of new flows does to a controller. Used by the packet-in limit's lab test and
bench/bench_controller_load.py.

    python3 -m experiments.lab.storm IFACE (--count N | --seconds S) [--rate PPS] [--marker M]

Run inside the host's namespace (Mininet: host.popen(..., cwd=the repository)). Needs
CAP_NET_RAW. Prints one JSON line: frames sent, first and last send time (time.time()), how
often the interface queue was full (ENOBUFS: the frame is sent again, not counted twice).
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import socket
import struct
import sys
import time

MARKER = b"CKCDLOAD"
PAYLOAD_BYTES = 32        # marker + 8-byte sequence number + padding


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame_heads(src_mac: bytes, src_ip: bytes) -> list[bytes]:
    """The 65536 Ethernet/IPv4/UDP headers the storm cycles through, made once (the sender
    then only appends the payload, so Python can offer ~300k frames/s)."""
    heads = []
    for i in range(65536):
        dst_ip = bytes((10, 9, i >> 8, i & 0xFF))
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + PAYLOAD_BYTES, i, 0, 64, 17, 0, src_ip, dst_ip)
        ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
        dst_mac = bytes((0x02, 0xCC, 0x5A, 0x11, i >> 8, i & 0xFF))  # locally administered, nobody's
        heads.append(dst_mac + src_mac + b"\x08\x00" + ip + struct.pack("!HHHH", 40000, 40001, 8 + PAYLOAD_BYTES, 0))
    return heads


def payload(marker: bytes, seq: int) -> bytes:
    return marker + struct.pack("!Q", seq) + bytes(PAYLOAD_BYTES - len(marker) - 8)


def interface_addresses(iface: str) -> tuple[bytes, bytes]:
    with open(f"/sys/class/net/{iface}/address") as f:
        mac = bytes.fromhex(f.read().strip().replace(":", ""))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ip = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", iface.encode()[:15]))[20:24]  # SIOCGIFADDR
    return mac, ip


def send(iface: str, count: int | None = None, seconds: float | None = None, rate_pps: float | None = None,
         marker: bytes = MARKER) -> dict:
    """Send `count` frames, or frames for `seconds`, paced at rate_pps if given."""
    mac, ip = interface_addresses(iface)
    heads = frame_heads(mac, ip)
    sent = full = 0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((iface, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        start = time.time()
        end = start + seconds if seconds is not None else None
        while (sent < count) if end is None else (time.time() < end):
            if rate_pps and sent % 32 == 0:  # pace in groups: a sleep per frame would cap the rate
                ahead = start + sent / rate_pps - time.time()
                if ahead > 0:
                    time.sleep(ahead)
            try:
                s.send(heads[sent & 0xFFFF] + payload(marker, sent))
                sent += 1
            except OSError as err:
                if err.errno not in (errno.ENOBUFS, errno.EAGAIN):
                    raise
                full += 1
                time.sleep(0.0005)
    return {"sent": sent, "t_first": start, "t_last": time.time(), "enobufs": full}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("iface")
    how_long = ap.add_mutually_exclusive_group(required=True)
    how_long.add_argument("--count", type=int, help="frames to send")
    how_long.add_argument("--seconds", type=float, help="send for this long")
    ap.add_argument("--rate", type=float, default=None, help="frames per second (default: as fast as it can)")
    ap.add_argument("--marker", default=MARKER.decode(), help=f"payload marker, 1-24 ASCII (default {MARKER.decode()})")
    args = ap.parse_args(argv)
    if args.count is not None and not 1 <= args.count <= 100_000_000:
        ap.error("--count must be between 1 and 100000000")
    if args.seconds is not None and not 0 < args.seconds <= 3600:
        ap.error("--seconds must be in (0, 3600]")
    if args.rate is not None and not 0 < args.rate <= 10_000_000:
        ap.error("--rate must be in (0, 10000000]")
    if not (args.marker.isascii() and 1 <= len(args.marker) <= PAYLOAD_BYTES - 8):
        ap.error("--marker must be 1-24 ASCII characters")
    print(json.dumps(send(args.iface, args.count, args.seconds, args.rate, args.marker.encode())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
