"""Short-flow sizes ([[short_flows]]): a list drawn from uniformly (`sizes_kb`), an empirical CDF
from experiments/workloads/ (`size_cdf`, e.g. the web-search and data-mining workloads), or a
bounded Pareto (`size_pareto`): the heavy-tailed sizes that data-center and web studies find.
Pure: the scenario check reads a CDF here, and the probe that runs the transfers in the lab
(experiments/run/probes/shortflows.py) draws from it with the same functions.

A CDF file: `#` comments, then one point per line, a size in bytes and the probability that a
flow is at most that large, both non-decreasing, the last probability 1. A draw u in [0, 1)
falls between two points and is interpolated linearly between their sizes (as ns-2's empirical
random variable does), so a CDF of few points still gives every size between them.
"""

from __future__ import annotations

import math
import os
import random

from experiments.names import named_file

WORKLOADS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workloads")
# A distribution's flows are reported by size class (their completion times per class), not per
# size: (0, 100 KB], (100 KB, 10 MB], above, as pFabric's and Homa's papers group them.
SIZE_BINS_KB = (100, 10_000)


def cdf_path(name: str) -> str:
    """experiments/workloads/<name>.cdf; ValueError for a name that is not one, or no such file."""
    return named_file(WORKLOADS_DIR, name, ".cdf", "workload")


def read_cdf(path: str) -> list[tuple[float, float]]:
    """(bytes, cumulative probability) points; ValueError naming the line that is wrong."""
    points: list[tuple[float, float]] = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            text = line.split("#", 1)[0].split()
            if not text:
                continue
            try:
                size, prob = (float(x) for x in text)
            except ValueError:
                raise ValueError(f"{path}: line {lineno}: expected a size in bytes and a probability") from None
            if not (math.isfinite(size) and size >= 0 and 0 <= prob <= 1):
                raise ValueError(f"{path}: line {lineno}: a size >= 0 and a probability in [0, 1]")
            if points and (size < points[-1][0] or prob < points[-1][1]):
                raise ValueError(f"{path}: line {lineno}: sizes and probabilities must not decrease")
            points.append((size, prob))
    if not points or points[-1][1] != 1:
        raise ValueError(f"{path}: the last point's probability must be 1")
    return points


def cdf_draw(points: list[tuple[float, float]], u: float) -> float:
    """The size (bytes) at cumulative probability u, interpolated between the points around it."""
    prev_size, prev_p = 0.0, 0.0
    for size, p in points:
        if u < p:
            return prev_size + (size - prev_size) * (u - prev_p) / (p - prev_p)
        prev_size, prev_p = size, p
    return points[-1][0]


def cdf_mean(points: list[tuple[float, float]]) -> float:
    """The mean size (bytes) the draws have: each segment's probability at its midpoint."""
    mean, prev_size, prev_p = 0.0, 0.0, 0.0
    for size, p in points:
        mean += (p - prev_p) * (prev_size + size) / 2
        prev_size, prev_p = size, p
    return mean


def pareto_draw(shape: float, low: float, high: float, u: float) -> float:
    """Bounded Pareto on [low, high] with tail index `shape`, by its inverse CDF at u."""
    ratio = (low / high) ** shape
    return low / (1 - u * (1 - ratio)) ** (1 / shape)


class SizeDraws:
    """A group's sizes, one per transfer, in bytes (at least 1), from its own seeded stream."""

    def __init__(self, seed: int, sizes_kb=None, cdf: list[tuple[float, float]] | None = None,
                 pareto: tuple[float, float, float] | None = None, max_kb: float | None = None):
        self.rng = random.Random(seed)
        self.sizes, self.cdf, self.pareto = [int(k * 1000) for k in sizes_kb or ()], cdf, pareto
        self.max_bytes = None if max_kb is None else max_kb * 1000

    def next(self) -> int:
        if self.sizes:
            return self.rng.choice(self.sizes)
        if self.cdf is not None:
            size = cdf_draw(self.cdf, self.rng.random())
        else:
            shape, low_kb, high_kb = self.pareto
            size = pareto_draw(shape, low_kb * 1000, high_kb * 1000, self.rng.random())
        if self.max_bytes is not None:
            size = min(size, self.max_bytes)
        return max(1, int(round(size)))


def size_bin(size_bytes: int) -> str:
    """A size's class for reports: "0-100", "100-10000" or "10000+" (KB)."""
    kb = size_bytes / 1000
    edges = (0,) + SIZE_BINS_KB
    for lo, hi in zip(edges, edges[1:]):
        if kb <= hi:
            return f"{lo}-{hi}"
    return f"{edges[-1]}+"


def size_key(label: str) -> float:
    """Sort key of a by-size label: a size ("50") or a class ("100-10000", "10000+")."""
    return float(label.split("-")[0].rstrip("+"))
