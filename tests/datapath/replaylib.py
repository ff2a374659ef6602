"""Helpers for the datapath tests: synthetic traces and runs of build/ckcd-replay.

A trace is a list of (time_ns, flow, length, dscp), (time_ns, flow, length, dscp, host) or
(time_ns, flow, length, dscp, host, ecn), host being the host-pair id hdcodel key=host reads
and ecn the packet's ECN codepoint (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE). ckcd-replay prints JSON
lines (docs/datapath-core.md); `run` parses them into a Result.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATAPATH = os.path.join(REPO, "datapath")
# tests/datapath/test_sanitized.py reruns this suite with the ASan + UBSan build.
REPLAY = os.environ.get("CKCD_REPLAY_BIN") or os.path.join(DATAPATH, "build", "ckcd-replay")

MS = 1_000_000
SEC = 1_000_000_000


def build() -> str:
    if os.environ.get("CKCD_REPLAY_BIN"):
        return REPLAY  # built by whoever chose it
    subprocess.run(["make", "-s", "-C", DATAPATH], check=True, stdout=subprocess.DEVNULL)
    return REPLAY


def poisson(flow: int, rate_bps: float, start_ns: int, end_ns: int, length: int = 1500,
            dscp: int = 0, seed: int = 0) -> list[tuple[int, int, int, int]]:
    """Arrivals with exponential gaps averaging rate_bps (an open-loop sender)."""
    rng = random.Random(seed * 7919 + flow)
    mean_gap = length * 8 * SEC / rate_bps
    out, t = [], float(start_ns)
    while True:
        t += rng.expovariate(1.0 / mean_gap)
        if t >= end_ns:
            return out
        out.append((int(t), flow, length, dscp))


def cbr(flow: int, rate_bps: float, start_ns: int, end_ns: int, length: int = 1500,
        dscp: int = 0) -> list[tuple[int, int, int, int]]:
    """Evenly spaced arrivals at rate_bps."""
    gap = length * 8 * SEC / rate_bps
    n = int((end_ns - start_ns) / gap)
    return [(int(start_ns + i * gap), flow, length, dscp) for i in range(n)]


ECT0 = 2
CE = 3


def with_ecn(trace, ecn: int) -> list[tuple[int, int, int, int, int, int]]:
    """The trace's packets with ECN codepoint ecn (host: the flow, as ckcd-replay's default)."""
    return [(p[0], p[1], p[2], p[3] if len(p) > 3 else 0, p[4] if len(p) > 4 else p[1], ecn) for p in trace]


def merge(*traces) -> list[tuple[int, int, int, int]]:
    return sorted((p for t in traces for p in t), key=lambda p: p[0])


@dataclass
class Result:
    config: dict
    packets: list[dict] = field(default_factory=list)
    flows: dict[int, dict] = field(default_factory=dict)
    xstats: list[tuple[int, dict]] = field(default_factory=list)
    reconfigures: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    def sent(self, flow: int | None = None, t0: int = 0, t1: int = 1 << 62) -> list[dict]:
        return [p for p in self.packets if p["verdict"] == "sent" and t0 <= p["t_arr_ns"] < t1
                and (flow is None or p["flow"] == flow)]

    def dropped(self, reason: str | None = None, flow: int | None = None) -> list[dict]:
        return [p for p in self.packets if p["verdict"] == "dropped"
                and (reason is None or p["reason"] == reason) and (flow is None or p["flow"] == flow)]

    def marked(self, reason: str | None = None, flow: int | None = None) -> list[dict]:
        """Packets the discipline marked CE instead of dropping (sent, with the reason)."""
        return [p for p in self.packets if p["verdict"] == "sent" and p.get("mark") is not None
                and (reason is None or p["mark"] == reason) and (flow is None or p["flow"] == flow)]

    def rate_bps(self, flow: int, t0: int, t1: int, delivered: bool = True) -> float:
        """Delivered (or offered) bit rate of a flow over arrivals in [t0, t1)."""
        pk = [p for p in self.packets if p["flow"] == flow and t0 <= p["t_arr_ns"] < t1
              and (not delivered or p["verdict"] == "sent")]
        return sum(p["len"] for p in pk) * 8 * SEC / (t1 - t0)


def parse_xstats(text: str) -> dict:
    out: dict = {}
    for tok in text.split():
        k, _, v = tok.partition("=")
        if k.startswith("flow."):
            out.setdefault("flows", {})[int(k[5:])] = {
                a: int(b) for a, b in (kv.split(":") for kv in v.split(","))}
        else:
            out[k] = v
    return out


def run(trace, qdisc: str, rate_bps: int = 100_000_000, seed: int = 1,
        extra: list[str] | None = None) -> Result:
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write("# time_ns flow length dscp [host]\n")
        f.write("".join(" ".join(map(str, p)) + "\n" for p in trace))
        path = f.name
    try:
        cp = subprocess.run([REPLAY, "--qdisc", qdisc, "--rate-bps", str(rate_bps), "--seed", str(seed),
                             *(extra or []), path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if cp.returncode != 0:
        raise RuntimeError(f"ckcd-replay exit {cp.returncode}: {cp.stderr.strip()}")
    res = Result(config={})
    for line in cp.stdout.splitlines():
        o = json.loads(line)
        t = o["type"]
        if t == "pkt":
            res.packets.append(o)
        elif t == "flow":
            res.flows[o["flow"]] = o
        elif t == "xstats":
            res.xstats.append((o["t_ns"], parse_xstats(o["xstats"])))
        elif t == "stats":
            res.stats = o
        elif t == "config":
            res.config = o
        elif t == "reconfigure":
            res.reconfigures.append(o)
    return res


def run_raw(args: list[str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([REPLAY, *args], input=stdin, capture_output=True, text=True)
