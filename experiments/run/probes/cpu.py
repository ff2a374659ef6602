"""The machine's CPU during a run: what one sample holds, and the sampler that takes them.

run.json keeps the samples as rows in `CpuSample`'s field order ([t_s, busy_pct, steal_pct,
vswitchd_core_pct, runner_core_pct, links_core_pct]); `CpuSample.from_row` reads them back, also
the five-column rows of records made before the runner's own share was kept.
"""

from __future__ import annotations

import os
import threading
import time
from typing import NamedTuple, Sequence


class CpuSample(NamedTuple):
    t_s: float                        # since the run's t0
    busy_pct: float                   # of all cores; steal counts as busy (the VM wanted the CPU)
    steal_pct: float                  # of all cores: time the hypervisor did not run our vCPU
    vswitchd_core_pct: float | None   # ovs-vswitchd's share of one core
    runner_core_pct: float | None     # the runner's own share of one core (None in older records)
    links_core_pct: float             # all ckcd-link daemons' share of one core, together

    @classmethod
    def from_row(cls, row: Sequence) -> "CpuSample":
        """A run.json row: six columns, or five (no runner column) in records from before it."""
        runner = row[4] if len(row) > 5 else None
        return cls(row[0], row[1], row[2], row[3], runner, row[-1])


class CpuSampler:
    """The machine's CPU every second from /proc/stat: busy % of all cores, steal %, and the named
    processes' % of one core. `pids` are vswitchd, the runner, then the link daemons (None or 0
    for one that is not known counts as idle)."""

    def __init__(self, t0: float, pids: list, stop: threading.Event, period_s: float = 1.0):
        self.t0, self.pids, self.stop, self.period_s = t0, pids, stop, period_s
        self.series: list[CpuSample] = []
        self.hz = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def totals() -> tuple[int, int, int]:
        """(all, idle, steal) ticks of all cores since boot, from /proc/stat."""
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]
        steal = fields[7] if len(fields) > 7 else 0
        return sum(fields[:8]), idle, steal

    def _proc_ticks(self, pid: int | None) -> int:
        if not pid:
            return 0
        try:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
            return int(rest[11]) + int(rest[12])
        except (OSError, IndexError, ValueError):
            return 0

    def run(self) -> None:
        prev = self.totals()
        prev_t = time.monotonic()
        prev_p = [self._proc_ticks(p) for p in self.pids]
        while not self.stop.wait(self.period_s):
            cur, now = self.totals(), time.monotonic()
            cur_p = [self._proc_ticks(p) for p in self.pids]
            total = cur[0] - prev[0]
            if total > 0:
                busy = 100.0 * (total - (cur[1] - prev[1])) / total
                steal = 100.0 * (cur[2] - prev[2]) / total
                core = [100.0 * (c - p) / self.hz / (now - prev_t) for c, p in zip(cur_p, prev_p)]
                self.series.append(CpuSample(t_s=round(now - self.t0, 2), busy_pct=round(busy, 1),
                                             steal_pct=round(steal, 1), vswitchd_core_pct=round(core[0], 1),
                                             runner_core_pct=round(core[1], 1),
                                             links_core_pct=round(sum(core[2:]), 1)))
            prev, prev_t, prev_p = cur, now, cur_p
