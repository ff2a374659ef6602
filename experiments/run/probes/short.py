"""Short flows ([[short_flows]]): each group's server on its sending host and fetching client on
its receiving host (shortflows.py, run in the hosts), and the transfers read back from the
client's JSON lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import sys
import time
import zlib

from experiments.run.probes.jsonlines import read_rows
from experiments.scenario.model import Scenario
from experiments.scenario.workloads import cdf_path

if TYPE_CHECKING:  # only named in annotations: case.py imports this module
    from experiments.run.case import Started


def start_short_flows(started: Started, scenario: Scenario, net, run_dir: str, t0: float) -> float | None:
    """Each [[short_flows]] group's server on its sending host and its client on its receiving
    host, started now; the client waits until the group's start_s. Returns when the clients
    started (seconds since t0), which their transfer times count from."""
    if not scenario.short_flows:
        return None
    for g in scenario.short_flows:
        started.popen(net.get(g.src), [sys.executable, "-m", "experiments.run.probes.shortflows", "serve", "--port",
                                       str(g.port), "--cc", g.cc], os.path.join(run_dir, f"short-serve-{g.port}.txt"))
    time.sleep(0.5)  # the servers listen before the first request can come (start_s may be 0)
    launched = time.monotonic() - t0
    for g in scenario.short_flows:
        started.popen(net.get(g.dst), [sys.executable, "-m", "experiments.run.probes.shortflows", "fetch", "--host",
                                       net.get(g.src).IP(), "--port", str(g.port),
                                       *size_args(g), "--rate", f"{g.rate_per_s:g}", "--duration", f"{g.stop_s - g.start_s:g}",
                                       "--seed", str(zlib.crc32(f"{scenario.name}/{g.label}".encode())),
                                       "--start-after", f"{max(0.0, g.start_s - launched):g}"]
                      + ([] if g.poisson else ["--interval"]), os.path.join(run_dir, f"short-{g.port}.jsonl"))
    return launched


def size_args(g) -> list[str]:
    """The fetching client's size options for group g (shortflows.py)."""
    if g.sizes_kb:
        return ["--sizes-kb", ",".join(f"{s:g}" for s in g.sizes_kb)]
    args = ["--size-cdf", cdf_path(g.size_cdf)] if g.size_cdf else \
        ["--pareto", "{shape:g},{min_kb:g},{max_kb:g}".format(**g.size_pareto)]
    return args + (["--size-max-kb", f"{g.size_max_kb:g}"] if g.size_max_kb is not None else [])


def short_flow_record(g, run_dir: str, launched_s: float) -> dict:
    """A [[short_flows]] group's transfers, their start times in seconds since t0. A transfer
    still running when the run ended has no line: counted as unfinished by the analysis."""
    rec = {"label": g.label, "src": g.src, "dst": g.dst, "cc": g.cc, "port": g.port, "transfers": [],
           "error": None, "by_size_class": g.distribution}
    try:
        rows = read_rows(os.path.join(run_dir, f"short-{g.port}.jsonl"))
    except OSError as err:
        rec["error"] = f"no client output: {err.strerror}"
        return rec
    for row in rows:
        if "t" in row and "size" in row:
            row["t"] = round(launched_s + row["t"], 3)
            rec["transfers"].append(row)
    return rec
