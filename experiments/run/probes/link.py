"""ckcd-link's view of a run: its clock, its 100 ms log, its dequeue samples and final stats.

The daemons keep clocks of their own (their log's `t` and samples' `t_s` count from their
start): daemon_clock_zeros places them on the runner's monotonic clock, so every series of a
run shares one time axis.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

from experiments.run.probes.ckcd_state import CkcdStateReader


SAMPLE_PERIOD_S = 0.5  # samples(n=1024) every 0.5 s: all dequeues up to 2048/s, a fair sample above


MAX_STORED_SAMPLES = 30000


def daemon_clock_zeros(controls: dict) -> dict[str, float]:
    """Where each link daemon's clock (log t, sample t_s) started, on our monotonic clock."""
    zeros = {}
    for name, control in controls.items():
        before = time.monotonic()  # read before the request: uptime is at most that old
        zeros[name] = before - control.ping()["uptime_s"]
    return zeros


def link_record(name: str, run_dir: str, offset_s: float, stats: dict, final: dict | None,
                 sojourn_samples: list, ping_keys: tuple[str, ...] = (),
                 group_ping_keys: dict[str, tuple[str, ...]] | None = None) -> dict:
    """ping_keys: ckcd-link's flow keys of ping's echo requests and replies, whose own
    queueing delay the record keeps as `ping_sojourn`; group_ping_keys: those of each RTT
    group's ping ("h2>h5"), kept as `group_ping_sojourn`."""
    series, ping_sojourn = [], []
    groups = {pair: [] for pair in group_ping_keys or {}}
    ckcd = CkcdStateReader()
    path = os.path.join(run_dir, f"link-{name}.jsonl")
    with contextlib.suppress(OSError):
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                ping_sojourn += _flow_sojourn(row, offset_s, ping_keys)
                for pair, keys in (group_ping_keys or {}).items():
                    groups[pair] += _flow_sojourn(row, offset_s, keys)
                if row.get("dir") != "ab":
                    continue
                soj = row.get("sojourn_us") or {}
                ckcd.add(round(row["t"] + offset_s, 3), row)
                series.append({"t": round(row["t"] + offset_s, 3), "interval_s": row["interval_s"],
                               "qlen_pkts": row["qlen_pkts"], "qlen_bytes": row.get("qlen_bytes"),
                               "tx_bytes": row["tx_bytes"], "lost": row.get("lost", 0),
                               "sojourn_ms": soj["mean"] / 1000 if soj.get("count") else None,
                               "sojourn_count": soj.get("count", 0), "drops": row.get("drops", {}),
                               "marks": row.get("marks", {})})
    ab = stats["dirs"]["ab"]
    if len(sojourn_samples) > MAX_STORED_SAMPLES:  # an even subsample keeps the percentiles
        step = len(sojourn_samples) / MAX_STORED_SAMPLES
        sojourn_samples = [sojourn_samples[int(k * step)] for k in range(MAX_STORED_SAMPLES)]
    return {"series": series, "sojourn_samples": sojourn_samples, "ping_sojourn": ping_sojourn,
            **({"group_ping_sojourn": groups} if groups else {}), "ckcd": ckcd.points,
            "final": final, "stats_ab": {k: ab.get(k) for k in ("rate_bps", "delay_ms", "qdisc", "drops", "marks",
                                                                "tx_bytes", "sojourn_us", "schedule",
                                                                "tx_wake", "nflows", "rx_io",
                                                                "rx_kernel_drops")}}


def _flow_sojourn(row: dict, offset_s: float, keys: tuple[str, ...]) -> list:
    """[t, dir, deq_pkts, summed sojourn in us] of the row's flows of these keys (ping's, the
    fidelity check explains ping's RTT by what they waited). Nothing from a daemon that logs
    no per-flow sojourn."""
    return [[round(row["t"] + offset_s, 3), row.get("dir"), f["deq_pkts"], f["sojourn_ns_sum"] / 1000]
            for f in row.get("flows", ()) if f.get("key") in keys and "sojourn_ns_sum" in f]


class SojournSampler:
    """ckcd-link's last 1024 dequeues of the bottleneck direction every SAMPLE_PERIOD_S: every
    dequeue up to ~2000 packets/s, an evenly spread sample above (100 Mbit/s is ~8300/s)."""

    def __init__(self, controls: dict, daemon_zero: dict, t0: float, stop: threading.Event):
        self.controls, self.daemon_zero, self.t0, self.stop = controls, daemon_zero, t0, stop
        self.values: dict[str, list] = {name: [] for name in controls}
        self.last: dict[str, float] = {name: -1.0 for name in controls}

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_PERIOD_S):
            for name, control in self.controls.items():
                try:
                    samples = control.samples("ab", 1024)
                except Exception:  # the daemon is going away; the log still has the series
                    continue
                offset = self.daemon_zero[name] - self.t0
                for t_s, sojourn_us, _qlen, _len in samples:
                    if t_s > self.last[name]:
                        self.values[name].append([round(t_s + offset, 4), round(sojourn_us / 1000, 3)])
                if samples:
                    self.last[name] = max(self.last[name], samples[-1][0])
