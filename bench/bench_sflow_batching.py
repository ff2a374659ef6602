"""How long OVS's sFlow agent holds a sample before it sends it.

The agent (OVS 3.1, lib/sflow_receiver.c) fills one datagram of at most 1400 bytes and sends it
when the next sample would not fit, or at its one-second tick. A sample therefore waits for the
samples that fill its datagram, or for the tick: at the few samples per second a flow at the
heavy-hitter threshold gives, up to a second. The knob OVS offers is the sFlow row's `header`
(bytes of each sampled packet it copies): with MTU frames, a header above ~650 bytes leaves room
for one sample per datagram, so each sample goes out when the next one is taken.

Measured directly: a generator in h1 sends UDP datagrams of `--frame` bytes to h2 at a steady
rate through one userspace OVS bridge (standalone, no controller), each carrying its send time
(CLOCK_MONOTONIC, shared by every namespace) after a marker; the bridge samples 1-in-1 to a UDP
socket of ours. A sample's wait = our receive time of the datagram that carries it - the send
time inside its sampled bytes. Cases: header 128 (OVS's default, ours until now), 512 (what the
controller now sets, ovs_config.sflow.CONTROLLER_HEADER_BYTES), 610 (one sample per datagram)
and 640 (past OVS 3.1's cliff: no flow sample arrives at all), at 5, 40, 200 and 1000 samples/s
on the bridge (40/s: what a flow at the threshold gives under the sampling the controller
chooses, docs/sflow.md).

    .venv/bin/python bench/bench_sflow_batching.py [--seconds 4] [--headers 128,512] [--update-baseline]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from functools import partial

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchlib import machine, save, side_by_side  # noqa: E402
from ovs_config import sflow  # noqa: E402
from ovs_config.lablock import lab_lock  # noqa: E402
from ovs_config.private_ovs import PrivateOVS  # noqa: E402

MARK = b"ckcd-sflow-wait:"
COLLECTOR_PORT = 16377
HEADERS = (128, 512, 610, 640)  # OVS default, the controller's, one sample per datagram, the cliff
RATES = (5, 40, 200, 1000)  # samples (= packets, sampling 1-in-1) per second

GENERATOR = r"""
import socket, struct, sys, time
dst, rate, seconds, size = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
pad = bytes(max(0, size - 42 - 24))
start = time.monotonic()
n = 0
while True:
    due = start + n / rate
    now = time.monotonic()
    if due - start > seconds:
        break
    if due > now:
        time.sleep(due - now)
    s.sendto(b"ckcd-sflow-wait:" + struct.pack("!d", time.monotonic()) + pad, (dst, 9))
    n += 1
print(n)
"""


def waits_in(datagram: bytes, received: float) -> list[float]:
    """The waits of every marked sample in one datagram."""
    out, at = [], datagram.find(MARK)
    while at >= 0 and at + len(MARK) + 8 <= len(datagram):
        (sent,) = struct.unpack_from("!d", datagram, at + len(MARK))
        out.append(received - sent)
        at = datagram.find(MARK, at + len(MARK) + 8)
    return out


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def one_case(net, bridge: str, header: int, rate: int, seconds: float, frame: int) -> dict:
    h1, h2 = net.get("h1", "h2")
    sflow.enable_sflow(bridge, sampling=1, polling_s=3600, target=f"127.0.0.1:{COLLECTOR_PORT}",
                       header_bytes=header)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", COLLECTOR_PORT))
        sock.settimeout(0.2)
        gen = h1.popen([sys.executable, "-c", GENERATOR, h2.IP(), str(rate), str(seconds), str(frame)])
        waits, datagrams = [], 0
        deadline = time.monotonic() + seconds + 2.5  # the last samples leave at the next tick
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65535)
            except socket.timeout:
                continue
            got = waits_in(data, time.monotonic())
            if got:
                datagrams += 1
                waits += got
        out, _ = gen.communicate(timeout=10)
    sflow.disable_sflow(bridge)
    sent = int(out.split()[-1]) if out.split() else 0
    if not waits:
        return {"sent": sent, "samples": 0}
    return {"sent": sent, "samples": len(waits), "samples_per_datagram": round(len(waits) / datagrams, 2),
            "wait_p50_ms": round(1000 * statistics.median(waits), 1),
            "wait_p95_ms": round(1000 * pct(waits, 0.95), 1),
            "wait_max_ms": round(1000 * max(waits), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="traffic per case (default 4)")
    ap.add_argument("--frame", type=int, default=1514, help="frame bytes (default 1514: MTU frames)")
    ap.add_argument("--headers", default=",".join(map(str, HEADERS)),
                    help=f"sFlow header sizes to compare (default {','.join(map(str, HEADERS))})")
    ap.add_argument("--update-baseline", action="store_true")
    args = ap.parse_args()
    try:
        headers = [int(h) for h in args.headers.split(",")]
        if not all(sflow.MIN_HEADER_BYTES <= h <= sflow.MAX_HEADER_BYTES for h in headers):
            raise ValueError
    except ValueError:
        ap.error(f"--headers must be sizes in {sflow.MIN_HEADER_BYTES}..{sflow.MAX_HEADER_BYTES}, comma-separated")
    if not 2.0 <= args.seconds <= 120.0:
        ap.error("--seconds must be between 2 and 120")
    if not 100 <= args.frame <= 1514:
        ap.error("--frame must be between 100 and 1514")
    if os.geteuid() != 0:
        print("needs root (Mininet, OVS)", file=sys.stderr)
        return 1
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import OVSSwitch
    from mininet.topo import SingleSwitchTopo

    setLogLevel("warning")
    doc = {"benchmark": "sflow_batching", "machine": machine(), "seconds": args.seconds,
           "frame_bytes": args.frame, "cases": {}}
    with lab_lock(), PrivateOVS(), tempfile.TemporaryDirectory():
        net = Mininet(topo=SingleSwitchTopo(2), controller=None, autoSetMacs=True,
                      switch=partial(OVSSwitch, datapath="user", failMode="standalone"))
        try:
            net.start()
            net.pingAll(timeout=1)  # the bridge learns both MACs: no flooding during the cases
            for header in headers:
                for rate in RATES:
                    case = f"header{header}/{rate}_per_s"
                    r = one_case(net, "s1", header, rate, args.seconds, args.frame)
                    doc["cases"][case] = r
                    print(f"{case}: {r}", flush=True)
        finally:
            net.stop()
    base = save("sflow_batching", doc, args.update_baseline)
    side_by_side({k: v.get("wait_p95_ms") for k, v in doc["cases"].items()},
                 {k: v.get("wait_p95_ms") for k, v in base.get("cases", {}).items()}, base.get("machine"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
