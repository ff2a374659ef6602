"""One-way delays across the lab's link, for ckcd-link's tests: `recv PORT COUNT TIMEOUT_S`
prints one line per datagram, its one-way delay in microseconds, and `send HOST PORT COUNT
INTERVAL_S` sends COUNT datagrams, each carrying the wall-clock time (ns) just before its
send. Both ends are namespaces of one machine, so they share one clock; the receiver's time is
the kernel's (SO_TIMESTAMPNS, taken as the datagram reached the socket), so a delay can only
come out longer than the path's, never shorter."""

import socket
import struct
import sys
import time

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def receive(port: int, count: int, timeout_s: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind(("0.0.0.0", port))
    s.settimeout(timeout_s)
    print("ready", flush=True)
    for _ in range(count):
        try:
            data, anc, _, _ = s.recvmsg(64, socket.CMSG_SPACE(16))
        except socket.timeout:
            break
        sent_ns = struct.unpack("!Q", data[:8])[0]
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                print((sec * 1_000_000_000 + nsec - sent_ns) // 1000, flush=True)


def send(host: str, port: int, count: int, interval_s: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(count):
        s.sendto(struct.pack("!Q", time.time_ns()), (host, port))
        time.sleep(interval_s)


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        receive(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
