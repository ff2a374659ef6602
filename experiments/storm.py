"""A packet-in storm: frames no switch has a flow for, sent from a host's interface.

Each frame is an IPv4/UDP datagram to an address no host has (10.9.0.0/16 by default) and a
made-up unicast MAC, with its sequence number in the payload so that no two frames are the
same (the controller floods a given frame only once per second). Every one therefore misses
table 1 and becomes a packet-in: what a port scan or a burst of new flows does to a
controller. Used by the packet-in limit's test and bench/bench_controller_load.py.

    python3 -m experiments.storm IFACE COUNT [--rate PPS] [--net 10.9]

Run inside the host's namespace (Mininet: host.popen(...)). Needs CAP_NET_RAW. Prints the
frames sent and the seconds it took.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time

MARK = b"ckcd-storm"


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame(seq: int, src_mac: bytes, src_ip: bytes, net: tuple[int, int]) -> bytes:
    """Frame `seq` of the storm: its own destination address, MAC and payload."""
    dst_ip = bytes([net[0], net[1], (seq >> 8) & 0xFF, seq & 0xFF])
    dst_mac = bytes([0x02, 0x5C, 0x00, (seq >> 16) & 0xFF, (seq >> 8) & 0xFF, seq & 0xFF])
    payload = MARK + struct.pack("!I", seq) + bytes(18)
    udp = struct.pack("!HHHH", 40000 + seq % 20000, 9, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), seq & 0xFFFF, 0, 64, 17, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + udp


def interface_addresses(iface: str) -> tuple[bytes, bytes]:
    with open(f"/sys/class/net/{iface}/address") as f:
        mac = bytes.fromhex(f.read().strip().replace(":", ""))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl
        req = struct.pack("256s", iface.encode()[:15])
        ip = fcntl.ioctl(s.fileno(), 0x8915, req)[20:24]  # SIOCGIFADDR
    return mac, ip


def send(iface: str, count: int, rate_pps: float | None = None, net: tuple[int, int] = (10, 9)) -> float:
    """Send `count` storm frames out of iface, paced at rate_pps if given; returns the seconds taken."""
    mac, ip = interface_addresses(iface)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((iface, 0))
        start = time.monotonic()
        for seq in range(count):
            if rate_pps:
                lag = start + seq / rate_pps - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
            try:
                s.send(frame(seq, mac, ip, net))
            except BlockingIOError:  # the interface queue is full: wait for it, keep the count
                time.sleep(0.001)
                s.send(frame(seq, mac, ip, net))
        return time.monotonic() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("iface")
    ap.add_argument("count", type=int)
    ap.add_argument("--rate", type=float, default=None, help="frames per second (default: as fast as it can)")
    ap.add_argument("--net", default="10.9", help="first two octets of the destinations (default 10.9)")
    args = ap.parse_args(argv)
    if not 1 <= args.count <= 10_000_000:
        ap.error("count must be between 1 and 10000000")
    try:
        net = tuple(int(x) for x in args.net.split("."))
        if len(net) != 2 or not all(0 <= x <= 255 for x in net):
            raise ValueError
    except ValueError:
        ap.error(f"--net must be two octets such as 10.9, got {args.net!r}")
    took = send(args.iface, args.count, args.rate, net)
    print(f"{args.count} {took:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
