"""Real-time flows: a constant-rate UDP sender and a receiver that measures what a video or game
flow feels, per interval: packets received and lost, one-way delay and jitter. Run on the lab's
hosts by the runner for a scenario's [[udp_flows]].

    python3 -m experiments.run.probes.udpflow receive --port P --duration D [--interval 0.5]
    python3 -m experiments.run.probes.udpflow send --host B --port P --rate BPS --bytes N --duration D
        [--start-after S]

Each datagram carries its sequence number and the time it was sent (CLOCK_MONOTONIC, ns): the
lab's hosts are network namespaces of one kernel, whose monotonic clock they share, so the
receiver measures the one-way delay exactly, not half an RTT. Per interval the receiver prints one
JSON line: {"mono": interval start (monotonic s), "received", "lost", "reordered", "owd_ms":
{"mean", "p50", "p95", "max"}, "jitter_ms"}. `lost` counts the sequence numbers skipped, `reordered`
the skipped ones that came late after all, so a span's losses are its lost less its reordered (the
two may fall in different intervals); the jitter is RFC 3550's interarrival estimate
(J += (|D| - J) / 16), as RTP receivers report it.

Why not iperf3 -u: its report gives jitter and loss per interval but no one-way delay, and its
jitter is computed from the sender's clock differences only.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import time

HEADER = struct.Struct("!QQ")  # sequence number, send time (monotonic ns)
MAX_PPS = 5000                  # a Python sender's honest limit on one core


def interval_report(mono: float, owds: list[float], received: int, lost: int, reordered: int, jitter_ms: float) -> dict:
    owds = sorted(owds)

    def pct(p: float):
        return round(owds[min(len(owds) - 1, int(p * len(owds)))], 3) if owds else None
    return {"mono": round(mono, 4), "received": received, "lost": lost, "reordered": reordered,
            "owd_ms": {"mean": round(sum(owds) / len(owds), 3) if owds else None, "p50": pct(0.5), "p95": pct(0.95),
                       "max": round(owds[-1], 3) if owds else None},
            "jitter_ms": round(jitter_ms, 3)}


class Receiver:
    """Sequence, delay and jitter bookkeeping of one flow (no I/O: the tests feed it)."""

    def __init__(self, interval_s: float, start: float):
        self.interval_s = interval_s
        self.start = start
        self.next_seq = 0
        self.jitter_ms = 0.0
        self.last_transit = None
        self._reset(start)

    def _reset(self, mono: float) -> None:
        self.mono, self.owds, self.received, self.lost, self.reordered = mono, [], 0, 0, 0

    def datagram(self, seq: int, sent_ns: int, arrived_ns: int) -> list[dict]:
        """One datagram; the reports of the intervals it closed."""
        out = self.tick(arrived_ns / 1e9)
        transit = (arrived_ns - sent_ns) / 1e6
        self.owds.append(transit)
        self.received += 1
        if self.last_transit is not None:
            self.jitter_ms += (abs(transit - self.last_transit) - self.jitter_ms) / 16
        self.last_transit = transit
        if seq >= self.next_seq:
            self.lost += seq - self.next_seq
            self.next_seq = seq + 1
        else:  # counted lost when its successor came: it was late, not lost
            self.reordered += 1
        return out

    def tick(self, now: float) -> list[dict]:
        out = []
        while now >= self.mono + self.interval_s:
            out.append(interval_report(self.mono, self.owds, self.received, self.lost, self.reordered,
                                       self.jitter_ms))
            self._reset(self.mono + self.interval_s)
        return out

    def flush(self) -> dict:
        return interval_report(self.mono, self.owds, self.received, self.lost, self.reordered, self.jitter_ms)


def receive(port: int, duration: float, interval_s: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.1)
    rx = Receiver(interval_s, time.monotonic())
    end = rx.start + duration
    print(json.dumps({"listening": port}), flush=True)

    def emit(rows):
        for row in rows:
            print(json.dumps(row), flush=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    while not stopping and time.monotonic() < end:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            emit(rx.tick(time.monotonic()))
            continue
        except InterruptedError:
            continue
        if len(data) >= HEADER.size:
            seq, sent_ns = HEADER.unpack_from(data)
            emit(rx.datagram(seq, sent_ns, time.monotonic_ns()))
    emit([rx.flush()])


def send(host: str, port: int, rate_bps: float, size: int, duration: float, start_after: float = 0.0) -> None:
    """Datagrams of `size` bytes (UDP payload) at rate_bps, on a fixed schedule from start_after
    seconds on: a late send does not shift the ones after it."""
    gap = size * 8 / rate_bps
    if 1 / gap > MAX_PPS:
        raise SystemExit(f"udpflow: {rate_bps:g} bit/s in {size}-byte datagrams is over {MAX_PPS} a second")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = bytes(size - HEADER.size)
    start = time.monotonic() + start_after
    seq = 0
    while True:
        due = start + seq * gap
        if due - start >= duration:
            return
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            sock.sendto(HEADER.pack(seq, time.monotonic_ns()) + pad, (host, port))
        except OSError:
            pass  # a full socket buffer: the datagram is lost, as the receiver will count it
        seq += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rv = sub.add_parser("receive")
    rv.add_argument("--port", type=int, required=True)
    rv.add_argument("--duration", type=float, required=True)
    rv.add_argument("--interval", type=float, default=0.5)
    sd = sub.add_parser("send")
    sd.add_argument("--host", required=True)
    sd.add_argument("--port", type=int, required=True)
    sd.add_argument("--rate", type=float, required=True, help="bit/s of UDP payload")
    sd.add_argument("--bytes", type=int, required=True, help="UDP payload per datagram (16..1472)")
    sd.add_argument("--duration", type=float, required=True)
    sd.add_argument("--start-after", type=float, default=0.0, help="seconds before the first datagram")
    args = ap.parse_args(argv)
    if args.cmd == "receive":
        receive(args.port, args.duration, args.interval)
    else:
        if not HEADER.size <= args.bytes <= 1472:
            ap.error("--bytes must be 16..1472 (one datagram per frame)")
        send(args.host, args.port, args.rate, args.bytes, args.duration, args.start_after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
