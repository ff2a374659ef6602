"""Short transfers and their completion times: a small request/response server and client over
real kernel TCP, run on the lab's hosts by the runner for a scenario's [[short_flows]].

    python3 -m experiments.run.probes.shortflows serve --port P --cc cubic        (on the sending host)
    python3 -m experiments.run.probes.shortflows fetch --host A --port P --sizes-kb 50,1000 --rate 2
        --duration 40 --seed 7 [--interval] [--start-after S]            (on the receiving host)

The client asks for `size` bytes (an 8-byte request) at Poisson arrival times (exponential gaps
of mean 1/rate; `--interval`: every 1/rate s), each on a new connection, the size drawn uniformly
from --sizes-kb, or from a workload's CDF file (--size-cdf PATH) or a bounded Pareto (--pareto
SHAPE,MIN_KB,MAX_KB), capped by --size-max-kb (experiments/scenario/workloads.py); the server answers with that many bytes and closes. A transfer's completion time
(FCT) runs from the client's connect() to the last byte received: the handshake, the request and
the response, as a web fetch's. The data goes from the server's host to the client's, under the
server's congestion control (TCP_CONGESTION on its listening socket, which accepted sockets
inherit). One JSON line per transfer on stdout: {"t": start (s since the client started), "size":
bytes, "fct_ms": ..., "ok": true} or "ok": false with "error". --start-after S shifts every arrival
by S (t still counts from the client's start).

Why not iperf3 -n: it forks a process per transfer, opens a control connection first and reports
its own timings; one client process and one connection per transfer measure what a short flow
costs, and keep the hosts' CPU low.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import struct
import sys
import time

REQUEST = struct.Struct("!Q")  # the size asked for, network order
MAX_SIZE = 1 << 31  # a request above this is refused (the server closes)
CHUNK = bytes(64 * 1024)

# Run as a script inside a lab host: the checkout's packages from its root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from experiments.scenario.workloads import SizeDraws, read_cdf  # noqa: E402


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        (size,) = REQUEST.unpack(await reader.readexactly(REQUEST.size))
        if size > MAX_SIZE:
            return
        while size > 0:
            n = min(size, len(CHUNK))
            writer.write(CHUNK[:n])
            await writer.drain()
            size -= n
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int, cc: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    sock.bind(("0.0.0.0", port))
    sock.listen(256)
    server = await asyncio.start_server(_answer, sock=sock)
    print(json.dumps({"listening": port, "cc": cc}), flush=True)
    async with server:
        await server.serve_forever()


async def _fetch(host: str, port: int, size: int, t0: float) -> dict:
    start = time.monotonic()
    out = {"t": round(start - t0, 4), "size": size}
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(REQUEST.pack(size))
        await writer.drain()
        got = 0
        while True:
            chunk = await reader.read(256 * 1024)
            if not chunk:
                break
            got += len(chunk)
        writer.close()
        if got != size:
            return dict(out, ok=False, error=f"got {got} of {size} bytes")
        return dict(out, ok=True, fct_ms=round((time.monotonic() - start) * 1000, 3))
    except OSError as err:
        return dict(out, ok=False, error=str(err))


def arrival_times(rate: float, duration: float, seed: int, poisson: bool = True) -> list[float]:
    """Start times in [0, duration): exponential gaps of mean 1/rate, or every 1/rate s."""
    rng = random.Random(seed)
    times, t = [], 0.0
    while True:
        t += rng.expovariate(rate) if poisson else 1.0 / rate
        if t >= duration:
            return times
        times.append(t)


async def fetch_all(host: str, port: int, sizes: SizeDraws, rate: float, duration: float, seed: int,
                    poisson: bool, start_after: float = 0.0) -> None:
    t0 = time.monotonic()
    pending = []
    for at in (start_after + a for a in arrival_times(rate, duration, seed, poisson)):
        await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
        task = asyncio.ensure_future(_fetch(host, port, sizes.next(), t0))
        task.add_done_callback(lambda done: print(json.dumps(done.result()), flush=True))
        pending.append(task)
    if pending:
        await asyncio.wait(pending, timeout=30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--port", type=int, required=True)
    sv.add_argument("--cc", default="cubic")
    ft = sub.add_parser("fetch")
    ft.add_argument("--host", required=True)
    ft.add_argument("--port", type=int, required=True)
    how = ft.add_mutually_exclusive_group(required=True)
    how.add_argument("--sizes-kb", help="comma-separated sizes in KB (1000 bytes), drawn uniformly")
    how.add_argument("--size-cdf", help="a workload's CDF file (bytes, cumulative probability per line)")
    how.add_argument("--pareto", help="SHAPE,MIN_KB,MAX_KB: a bounded Pareto")
    ft.add_argument("--size-max-kb", type=float, default=None, help="cap a distribution's draws")
    ft.add_argument("--rate", type=float, required=True, help="transfers per second")
    ft.add_argument("--duration", type=float, required=True)
    ft.add_argument("--seed", type=int, default=1)
    ft.add_argument("--interval", action="store_true", help="fixed gaps of 1/rate instead of Poisson")
    ft.add_argument("--start-after", type=float, default=0.0, help="seconds before the first arrival's clock starts")
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        asyncio.run(serve(args.port, args.cc))
        return 0
    sizes = SizeDraws(args.seed + 1, sizes_kb=[float(kb) for kb in args.sizes_kb.split(",")] if args.sizes_kb else None,
                      cdf=read_cdf(args.size_cdf) if args.size_cdf else None,
                      pareto=tuple(float(x) for x in args.pareto.split(",")) if args.pareto else None,
                      max_kb=args.size_max_kb)
    asyncio.run(fetch_all(args.host, args.port, sizes, args.rate, args.duration, args.seed, not args.interval,
                          args.start_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
