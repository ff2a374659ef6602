"""CPU samples: named fields in memory, the same rows in run.json, and older rows still read."""

import json
import threading
import time

from experiments.run.probes.cpu import CpuSample, CpuSampler


def test_rows_read_back_by_name():
    s = CpuSample.from_row([3.0, 55.5, 1.5, 20.0, 4.0, 31.0])
    assert (s.t_s, s.busy_pct, s.steal_pct) == (3.0, 55.5, 1.5)
    assert (s.vswitchd_core_pct, s.runner_core_pct, s.links_core_pct) == (20.0, 4.0, 31.0)


def test_five_column_rows_have_no_runner_share():
    # Records from before the runner's own column: [t, busy, steal, vswitchd, links].
    s = CpuSample.from_row([3.0, 55.5, 1.5, 20.0, 31.0])
    assert s.runner_core_pct is None and s.links_core_pct == 31.0


def test_sampler_writes_six_column_rows():
    stop = threading.Event()
    sampler = CpuSampler(time.monotonic(), [None, None], stop, period_s=0.05)
    thread = threading.Thread(target=sampler.run)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not sampler.series and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
    first = sampler.series[0]
    assert 0 <= first.busy_pct <= 100 and first.links_core_pct == 0.0  # no link daemons: idle
    row = json.loads(json.dumps(first))
    assert len(row) == 6 and CpuSample.from_row(row) == first
